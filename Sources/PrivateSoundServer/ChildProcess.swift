import Foundation
#if canImport(Glibc)
public import Glibc
#endif

/// A child process started with `posix_spawn` and reaped with `waitpid`.
///
/// Foundation's `Process` on Linux can miss a child's exit while another child (the private
/// server) runs, so the test tools spawn directly. Pipes are created close-on-exec, so no
/// child inherits another's.
public final class ChildProcess: @unchecked Sendable {
    public let pid: pid_t
    private let ownProcessGroup: Bool
    private var status: Int32?
    private let lock = NSLock()

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// What to connect a standard stream to.
    public enum Stream {
        case inherit
        case null
        case file(String)
        case descriptor(Int32)
    }

    /// Starts `path`. The child gets an empty signal mask and default signal handling whatever
    /// thread starts it (dispatch worker threads block signals, and a child inherits that mask:
    /// SIGTERM would then not stop it). With `ownProcessGroup` it leads a new process group, and
    /// ``terminate(_:)`` signals the whole group.
    public init(_ path: String, _ arguments: [String], environment: [String: String], stdin: Stream = .null, stdout: Stream = .null, stderr: Stream = .null, ownProcessGroup: Bool = false) throws {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGPIPE, SIGHUP, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var flags = Int32(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)
        if ownProcessGroup {
            flags |= Int32(POSIX_SPAWN_SETPGROUP)
            posix_spawnattr_setpgroup(&attributes, 0)
        }
        posix_spawnattr_setflags(&attributes, Int16(flags))
        self.ownProcessGroup = ownProcessGroup
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (fd, stream) in [(Int32(0), stdin), (1, stdout), (2, stderr)] {
            switch stream {
            case .inherit: break
            case .null: posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0)
            case .file(let file): posix_spawn_file_actions_addopen(&actions, fd, file, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            case .descriptor(let d): posix_spawn_file_actions_adddup2(&actions, d, fd)
            }
        }
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var child: pid_t = 0
        let rc = posix_spawn(&child, path, &actions, &attributes, argv, envp)
        guard rc == 0 else { throw Failure(description: "cannot start \(path): \(String(cString: strerror(rc)))") }
        pid = child
    }

    /// Whether the child is still running (reaps it if it has exited).
    public var isRunning: Bool {
        lock.lock()
        defer { lock.unlock() }
        if status != nil { return false }
        var s: Int32 = 0
        if waitpid(pid, &s, WNOHANG) == pid {
            status = s
            return false
        }
        return true
    }

    /// Runs `path` to the end and returns its exit code and its own peak resident memory in KiB.
    ///
    /// The figure is `/usr/bin/time`'s (`%M`, the tool's `ru_maxrss` as `time` reaps it). It cannot
    /// come from this process's own `wait4`: Linux carries the spawning process's peak over into
    /// the child's at `exec`, so every child of a large process would report at least that
    /// process's size. `time` is small and forks the tool itself, so the figure is the tool's.
    public static func runMeasuringPeakMemory(
        _ path: String, _ arguments: [String], environment: [String: String], scratch: String
    ) throws -> (code: Int32, peakKiB: Int) {
        let time = "/usr/bin/time"
        guard FileManager.default.isExecutableFile(atPath: time) else { throw Failure(description: "\(time) is not installed (Debian's time)") }
        let report = scratch + ".peak"
        defer { unlink(report) }
        let child = try ChildProcess(time, ["-f", "%M", "-o", report, path] + arguments, environment: environment)
        let code = child.wait()
        let text = (try? String(contentsOfFile: report, encoding: .utf8)) ?? ""
        // `time` writes "Command exited with non-zero status N" before the figure on failure.
        guard let peak = text.split(separator: "\n").last.flatMap({ Int($0.trimmingCharacters(in: .whitespaces)) }) else {
            throw Failure(description: "\(time) reported no peak memory for \(path): \(text)")
        }
        return (code, peak)
    }

    /// Waits for the child to exit and returns its exit code (128 + signal when killed).
    @discardableResult
    public func wait() -> Int32 {
        lock.lock()
        defer { lock.unlock() }
        if status == nil {
            var s: Int32 = 0
            while waitpid(pid, &s, 0) < 0 && errno == EINTR {}
            status = s
        }
        let s = status!
        return (s & 0x7F) == 0 ? (s >> 8) & 0xFF : 128 + (s & 0x7F)
    }

    /// Sends `signal` (SIGTERM by default) and waits for the exit; SIGKILL after `grace` seconds.
    @discardableResult
    public func terminate(_ signal: Int32 = SIGTERM, grace: Double = 3) -> Int32 {
        let target = ownProcessGroup ? -pid : pid
        if isRunning { kill(target, signal) }
        if !waitUntil(timeout: grace, { !isRunning }) { kill(target, SIGKILL) }
        if ownProcessGroup { kill(target, SIGKILL) }
        return wait()
    }

    /// Runs `path` to completion and returns its standard output; throws with its standard error
    /// when it fails. With a `timeout`, kills it and throws when it has not ended after that many
    /// seconds (a client of a server that stopped answering would otherwise hang its caller).
    public static func run(_ path: String, _ arguments: [String], environment: [String: String], scratch: String, timeout: Double? = nil) throws -> String {
        let out = scratch + ".out", err = scratch + ".err"
        defer {
            unlink(out)
            unlink(err)
        }
        let child = try ChildProcess(path, arguments, environment: environment, stdout: .file(out), stderr: .file(err))
        if let timeout, !waitUntilOffMainLoop(timeout: timeout, { !child.isRunning }) {
            kill(child.pid, SIGKILL)
            child.wait()
            throw Failure(description: "\(path) \(arguments.joined(separator: " ")) did not end within \(timeout) s")
        }
        let code = child.wait()
        let output = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
        guard code == 0 else {
            let message = (try? String(contentsOfFile: err, encoding: .utf8)) ?? ""
            throw Failure(description: "\(path) \(arguments.joined(separator: " ")) exited with \(code): \(message)")
        }
        return output
    }
}

/// A pipe whose ends are close-on-exec (a child gets one end by `dup2`).
public struct CloseOnExecPipe {
    public let read: Int32
    public let write: Int32
    public init() throws {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw ChildProcess.Failure(description: "pipe failed") }
        _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
        read = fds[0]
        write = fds[1]
    }
}

/// Waits until `condition` holds, polling every millisecond without running any run loop (the caller may
/// be inside a run-loop callout); `false` after `timeout` seconds. Test fixture only: it polls a
/// child's exit (`waitpid` with `WNOHANG`), which gives no event to wait on short of a SIGCHLD
/// handler, and a process-wide handler would take other children's exits from their owners.
private func waitUntilOffMainLoop(timeout: Double, _ condition: () -> Bool) -> Bool {
    let deadline = ProcessInfo.processInfo.systemUptime + timeout
    while !condition() {
        if ProcessInfo.processInfo.systemUptime >= deadline { return false }
        usleep(1000)
    }
    return true
}
