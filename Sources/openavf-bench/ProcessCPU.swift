import AudioTestSupport
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// CPU time of running processes, read from `/proc`: for a sound server's share of a playback,
/// which `getrusage` of the client cannot see.
enum ProcessCPU {
    /// Seconds of CPU that `roots` and every process descended from them have used so far, summed
    /// over their threads (`/proc/<pid>/task/<tid>/schedstat`, nanoseconds). A thread that has
    /// already ended is not counted; a server's threads live as long as it does.
    static func seconds(ofTrees roots: [pid_t]) -> Double {
        var children: [pid_t: [pid_t]] = [:]
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = pid_t(entry), let parent = parentID(of: pid) else { continue }
            children[parent, default: []].append(pid)
        }
        var nanoseconds = 0
        var pending = roots
        var seen = Set<pid_t>()
        while let pid = pending.popLast() {
            guard seen.insert(pid).inserted else { continue }
            pending += children[pid] ?? []
            for task in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? [] {
                guard let text = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/schedstat", encoding: .utf8),
                    let first = text.split(separator: " ").first, let ns = Int(first)
                else { continue }
                nanoseconds += ns
            }
        }
        return Double(nanoseconds) / 1e9
    }

    /// CPU seconds of one playback: the player's own (this process or a tool's child) and the
    /// server's over the same span (`nil` when the server is not this run's).
    struct Playback {
        var player: Double
        var server: Double?
        /// Player and server together: what the machine spent on the playback.
        var total: Double? { server.map { player + $0 } }

        /// "0.123 s (player 0.045 + server 0.078)", or the player's alone.
        var description: String {
            guard let server, let total else { return String(format: "%.3f s", player) }
            return String(format: "%.3f s (player %.3f + server %.3f)", total, player, server)
        }
    }

    /// Runs `playback` (which returns its player's CPU seconds) and adds the server's over it.
    static func measured(_ server: ServerHandle, _ playback: () throws -> Double) rethrows -> Playback {
        let before = server.processIDs.isEmpty ? nil : seconds(ofTrees: server.processIDs)
        let player = try playback()
        return Playback(player: player, server: before.map { seconds(ofTrees: server.processIDs) - $0 })
    }

    /// `ours` and then `anchor`, each with the server's CPU over it, on `server` with its keepers
    /// stopped (the server then does only what the playback asks of it).
    static func sideBySide(
        _ server: PrivatePulseServer, _ handle: ServerHandle, ours: () throws -> Double, anchor: () throws -> Double
    ) throws -> (ours: Playback, anchor: Playback) {
        try server.withoutKeepers { (try measured(handle, ours), try measured(handle, anchor)) }
    }

    /// The parent's ID from `/proc/<pid>/stat` (the field after the state, past the name's `)`).
    private static func parentID(of pid: pid_t) -> pid_t? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return fields.count > 1 ? pid_t(fields[1]) : nil
    }
}
