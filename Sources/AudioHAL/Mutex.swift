#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// `Synchronization.Mutex`, visible to ThreadSanitizer. Every module of the library that locks
/// declares `typealias Mutex = AudioHAL.Mutex`, which shadows the standard one, so `Mutex` means
/// this type throughout.
///
/// The standard `Mutex` on Linux takes its fast path with an atomic compare-and-swap compiled into
/// the caller, but waits and hands over in `_lockSlow`/`_unlockSlow`, futex code inside the
/// uninstrumented `libswiftSynchronization`. Under contention ThreadSanitizer therefore sees no
/// ordering between two critical sections and reports the guarded value as raced. This wrapper
/// tells it: `__tsan_acquire` on entering, `__tsan_release` on leaving, both on the wrapper's own
/// address. Outside a ThreadSanitizer build the hooks are absent (`dlsym` finds nothing once) and a
/// lock costs one extra load and test; nothing allocates, so the real-time rules are unchanged.
package final class Mutex<Value>: @unchecked Sendable {
    private let base: Synchronization.Mutex<Value>

    package init(_ initialValue: consuming sending Value) {
        base = Synchronization.Mutex(initialValue)
    }

    /// Runs `body` with the value, holding the lock.
    package func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        let token = UnsafeRawPointer(Unmanaged.passUnretained(self).toOpaque())
        return try base.withLock { (value: inout sending Value) throws(E) -> sending Result in
            ThreadSanitizerHooks.acquire?(token)
            defer { ThreadSanitizerHooks.release?(token) }
            return try body(&value)
        }
    }
}

/// ThreadSanitizer's annotation entry points, when this process runs under it.
private enum ThreadSanitizerHooks {
    typealias Hook = @convention(c) (UnsafeRawPointer?) -> Void
    static let acquire = hook("__tsan_acquire")
    static let release = hook("__tsan_release")

    private static func hook(_ name: String) -> Hook? {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), name) else { return nil }
        return unsafeBitCast(symbol, to: Hook.self)
    }
}
