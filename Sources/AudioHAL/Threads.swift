#if canImport(Glibc)
import Glibc
#endif

/// Names the calling thread for the kernel (`/proc/PID/task/TID/comm`, `top -H`, debuggers), which
/// keeps the first 15 bytes. Foundation's `Thread.name` does not reach the kernel on Linux.
/// Written to `/proc/thread-self/comm`, as proc(5) allows a thread to do for itself.
package func nameCurrentThread(_ name: String) {
    let fd = open("/proc/thread-self/comm", O_WRONLY)
    guard fd >= 0 else { return }
    defer { close(fd) }
    let bytes = Array(name.utf8.prefix(15))
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
}

/// Gives the calling thread a higher share of the processor than ordinary threads (nice −10,
/// where the process may: root, or an `RLIMIT_NICE` allowance; otherwise it stays as it was).
/// For the threads that run an app's audio callbacks: Apple runs Audio Queue callbacks on
/// threads of raised, fixed priority, and a callback that waits behind a busy machine's other
/// work is a dropout. Not real-time scheduling: the user's code runs there and may block.
/// On Linux `setpriority(PRIO_PROCESS, 0, …)` changes the calling thread only.
package func raiseCurrentThreadPriority() {
    _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, -10)
}
