import Foundation

/// How often this process's threads were switched in, read from the kernel
/// (`/proc/self/task/TID/status`: voluntary and involuntary context switches), by thread name.
///
/// A thread that sleeps until there is work is switched in only when there is; one that polls is
/// switched in every time its timer fires. Counting switches checks what the thread really did,
/// whatever the code says.
package struct ThreadWakeups: Sendable {
    /// Switches per thread id, for the threads whose name starts with one of the prefixes.
    package let counts: [Int: (name: String, switches: Int)]

    /// A reading now. Linux keeps 15 bytes of a thread's name; prefixes are compared to that.
    package init(namesStartingWith prefixes: [String]) {
        var counts: [Int: (name: String, switches: Int)] = [:]
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        for task in tasks {
            guard let tid = Int(task),
                let comm = try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8)
            else { continue }
            let name = comm.hasSuffix("\n") ? String(comm.dropLast()) : comm
            guard prefixes.contains(where: { name.hasPrefix(String($0.prefix(15))) }),
                let status = try? String(contentsOfFile: "/proc/self/task/\(task)/status", encoding: .utf8)
            else { continue }
            var switches = 0
            for line in status.split(separator: "\n") where line.contains("ctxt_switches:") {
                switches += Int(line.split(separator: ":").last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "") ?? 0
            }
            counts[tid] = (name, switches)
        }
        self.counts = counts
    }

    /// Switches since `earlier`, per thread present in both readings, named "name (tid)".
    package func since(_ earlier: ThreadWakeups) -> [String: Int] {
        var result: [String: Int] = [:]
        for (tid, now) in counts {
            guard let before = earlier.counts[tid] else { continue }
            result["\(now.name) (\(tid))"] = now.switches - before.switches
        }
        return result
    }
}
