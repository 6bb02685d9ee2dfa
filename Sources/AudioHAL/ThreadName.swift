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
