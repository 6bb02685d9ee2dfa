import CMonotonicWait
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A counting semaphore the server thread may signal: `sem_post` neither allocates nor blocks.
///
/// One thread waits (a queue's callback thread); any thread signals.
package final class Wakeup: @unchecked Sendable {
    private let sem: UnsafeMutablePointer<sem_t>
    private let signals = Atomic<Int>(0)

    package init() {
        sem = .allocate(capacity: 1)
        sem_init(sem, 0, 0)
    }

    deinit {
        sem_destroy(sem)
        sem.deallocate()
    }

    /// Wakes the waiter; real-time safe.
    package func signal() {
        signals.add(1, ordering: .releasing)
        sem_post(sem)
    }

    /// How many times it has been signalled: a waiter that counts the wakes it has handled is
    /// idle when the two agree (the virtual backend's tests wait for that).
    package var signalCount: Int { signals.load(ordering: .acquiring) }

    /// Waits until signalled, however long that takes: the waiting thread costs nothing meanwhile.
    package func wait() {
        while sem_wait(sem) != 0 && errno == EINTR {}
    }

    /// Waits until signalled or `timeout` seconds pass (on the monotonic clock, so that a step of
    /// the wall clock neither cuts a wait short nor stretches it); returns `true` when signalled.
    @discardableResult
    package func wait(timeout: Double) -> Bool { openavf_sem_wait_monotonic(sem, timeout) == 0 }
}
