public import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `pactl subscribe` beside the code under test: the server's own events, each with the time it
/// arrived, so that a test can tell how long the server took to make a change from how long the
/// code under test then took to hear of it. (pipewire-pulse makes a default device change only
/// once WirePlumber has taken it, which on a loaded machine can take 2–3 s.)
public final class ServerEventWatch: @unchecked Sendable {
    private let child: ChildProcess
    private let lock = NSLock()
    private var events: [(time: Date, line: String)] = []

    /// Starts `pactl subscribe` and returns once the server lists it as a client (so that no
    /// event after this returns is missed); throws after `timeout` seconds.
    public init(server: PrivatePulseServer, timeout: Double = 5) throws {
        guard let pactl = PrivatePulseServer.which("pactl") else { throw PrivatePulseServer.Failure(description: "pactl is not installed") }
        let pipe = try CloseOnExecPipe()
        child = try ChildProcess(pactl, ["subscribe"], environment: server.environment, stdout: .descriptor(pipe.write))
        close(pipe.write)
        let fd = pipe.read
        Thread { [self] in
            var pending: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n <= 0 { break }
                let now = Date()
                pending.append(contentsOf: chunk[0..<n])
                while let end = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: pending[..<end], as: UTF8.self)
                    pending.removeSubrange(...end)
                    lock.withLock { events.append((now, line)) }
                }
            }
            close(fd)
        }.start()
        let listed = "application.process.id = \"\(child.pid)\""
        guard waitUntil(timeout: timeout, { ((try? server.pactl(["list", "clients"])) ?? "").contains(listed) }) else {
            child.terminate()
            throw PrivatePulseServer.Failure(description: "pactl subscribe did not connect within \(timeout) s")
        }
    }

    deinit { stop() }

    public func stop() { _ = child.terminate() }

    /// When the first event whose line contains `text` (e.g. `"'change' on server"`) arrived at
    /// or after `after`; nil when none has.
    public func first(_ text: String, after: Date) -> Date? {
        lock.withLock { events.first { $0.time >= after && $0.line.contains(text) }?.time }
    }

    /// Waits up to `timeout` seconds for ``first(_:after:)``.
    public func waitFor(_ text: String, after: Date, timeout: Double) -> Date? {
        _ = waitUntil(timeout: timeout) { self.first(text, after: after) != nil }
        return first(text, after: after)
    }
}
