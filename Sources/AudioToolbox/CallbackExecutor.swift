import AudioHAL
import Foundation
import Synchronization

/// Where a queue's callbacks and property listeners run.
enum CallbackTarget {
    /// The queue's own callback thread (Apple: "one of the audio queue's internal threads").
    case ownThread
    case runLoop(RunLoop, RunLoop.Mode)
    case dispatch(DispatchQueue)
}

/// Work for a callback context; the queue's callbacks are not `Sendable` by Apple's signatures.
struct CallbackWork: @unchecked Sendable {
    let run: () -> Void
}

/// Runs a queue's user code: its callback thread, and the hand-over to the run loop or dispatch
/// queue the user gave.
///
/// The thread (nice −10 where allowed, as Apple raises its queue threads) sleeps on the engine's
/// wake-up until there is work: a finished buffer, a stop's progress, posted work or the end all
/// signal it; nothing runs on a timer. Each time it wakes it calls the queue's `onWake` (which
/// turns finished buffers into callbacks), then runs what was posted to it. Reset batches (the buffers a stop or reset hands back) are counted until they
/// have run, and the queue refuses enqueueing meanwhile (``resetPending``).
///
/// Threads: ``post(_:)`` and ``deliverReset(_:inline:)`` from any thread, with or without the
/// queue's lock (they only append to the inbox and signal); ``waitForResets(timeout:)`` never on
/// the callback thread.
final class CallbackExecutor: @unchecked Sendable {
    let target: CallbackTarget
    private let wakeup: Wakeup
    private let inbox = Mutex<[CallbackWork]>([])
    private let alive = Atomic<Bool>(true)
    private let threadDone = Wakeup()
    private var thread: Thread?
    /// Reset batches handed to the callback context and not yet run; enqueue fails meanwhile.
    private let resetsInFlight = Atomic<Int>(0)
    /// Broadcast when ``resetsInFlight`` falls to 0.
    private let resetsSettled = NSCondition()
    /// Wakes the callback thread has handled, to the end of the work each brought.
    private let handled = Atomic<Int>(0)

    /// `wakeup` is the engine's: the server thread signals it when a buffer finishes.
    init(target: CallbackTarget, wakeup: Wakeup) {
        self.target = target
        self.wakeup = wakeup
    }

    /// Starts the callback thread; `onWake` runs on it each time it wakes, before posted work.
    /// Call once.
    func start(name: String, onWake: @escaping @Sendable () -> Void) {
        Self.live.withLock { $0[ObjectIdentifier(self)] = WeakExecutor(self) }
        // Weak: a Thread keeps its closure as long as it exists, and the executor keeps the thread.
        let thread = Thread { [weak self] in self?.run(name: name, onWake: onWake) }
        thread.name = name
        thread.qualityOfService = .userInteractive
        self.thread = thread
        thread.start()
    }

    private func run(name: String, onWake: () -> Void) {
        nameCurrentThread(name)
        raiseCurrentThreadPriority()
        while alive.load(ordering: .acquiring) {
            wakeup.wait()
            guard alive.load(ordering: .acquiring) else { break }
            onWake()
            let work = inbox.withLock { box in
                let w = box
                box.removeAll()
                return w
            }
            for item in work where alive.load(ordering: .acquiring) { item.run() }
            handled.add(1, ordering: .releasing)
        }
        threadDone.signal()
    }

    /// The wakes so far, and whether the callback thread has handled every one (a queue on its own
    /// thread; a dispatch queue or run loop target is the app's to drain).
    var wakes: (signalled: Int, idle: Bool) {
        let done = handled.load(ordering: .acquiring)
        let signalled = wakeup.signalCount
        return (signalled, done >= signalled)
    }

    /// Whether the calling thread is the callback thread.
    var isCallbackThread: Bool { Thread.current === thread }

    /// Wakes the callback thread.
    func signal() { wakeup.signal() }

    /// Hands `work` to the queue's callback context.
    func post(_ work: [CallbackWork]) {
        guard !work.isEmpty else { return }
        switch target {
        case .ownThread:
            inbox.withLock { $0.append(contentsOf: work) }
            wakeup.signal()
        case .dispatch(let queue):
            queue.async { [self] in
                for item in work where alive.load(ordering: .acquiring) { item.run() }
            }
        case .runLoop(let runLoop, let mode):
            let batch = CallbackWork { [self] in
                for item in work where alive.load(ordering: .acquiring) { item.run() }
            }
            let timer = Timer(timeInterval: 0, repeats: false) { _ in batch.run() }
            runLoop.add(timer, forMode: mode)
        }
    }

    /// Runs `work` now when `inline` (offline rendering: deterministic) or posts it otherwise.
    func deliver(_ work: [CallbackWork], inline: Bool) {
        if inline {
            for item in work { item.run() }
        } else {
            post(work)
        }
    }

    /// Runs reset callbacks with enqueueing refused until they have run.
    func deliverReset(_ work: [CallbackWork], inline: Bool) {
        guard !work.isEmpty else { return }
        resetsInFlight.add(1, ordering: .acquiringAndReleasing)
        let done = CallbackWork { [self] in
            resetsSettled.lock()
            resetsInFlight.subtract(1, ordering: .acquiringAndReleasing)
            resetsSettled.broadcast()
            resetsSettled.unlock()
        }
        deliver(work + [done], inline: inline)
    }

    /// Whether reset callbacks are still to run (the queue refuses enqueueing then).
    var resetPending: Bool { resetsInFlight.load(ordering: .acquiring) > 0 }

    /// Waits until the callbacks of every stop or reset so far have run; `false` after `timeout`
    /// seconds. Never call it on the callback thread.
    func waitForResets(timeout: Double) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout)
        resetsSettled.lock()
        defer { resetsSettled.unlock() }
        while resetsInFlight.load(ordering: .acquiring) > 0 {
            if !resetsSettled.wait(until: deadline) { return resetsInFlight.load(ordering: .acquiring) == 0 }
        }
        return true
    }

    /// Ends the callback thread: no posted work runs after this. Waits for the thread (up to 5 s)
    /// unless called on it.
    func shutDown() {
        Self.live.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(self)) }
        alive.store(false, ordering: .releasing)
        wakeup.signal()
        if !isCallbackThread { threadDone.wait(timeout: 5) }
        // Work the thread left (a stop's callbacks posted just before) never runs now; some of it
        // holds the queue, so keeping it would keep the queue alive for ever.
        inbox.withLock { $0.removeAll() }
    }
}

extension CallbackExecutor {
    fileprivate struct WeakExecutor: @unchecked Sendable {
        weak var executor: CallbackExecutor?
        init(_ executor: CallbackExecutor) { self.executor = executor }
    }

    /// The callback threads running now.
    fileprivate static let live = Mutex<[ObjectIdentifier: WeakExecutor]>([:])

    /// Waits until every queue's callback thread has handled every wake so far (the buffers the
    /// last render finished came back and the app's callbacks refilled them); `false` after
    /// `timeout` seconds. For the virtual backend's tests: between two advances of its clock, the
    /// library does what a real server's timing would have given it time for.
    static func waitUntilAllIdle(timeout: Double) -> Bool {
        let deadline = ProcessInfo.processInfo.systemUptime + timeout
        /// Every thread idle, and the wakes signalled so far, all threads together.
        func look() -> (idle: Bool, signalled: Int) {
            live.withLock { all in
                all.values.reduce((true, 0)) { sum, weak in
                    guard let wakes = weak.executor?.wakes else { return sum }
                    return (sum.0 && wakes.idle, sum.1 + wakes.signalled)
                }
            }
        }
        // Two looks that agree: one queue's callback can wake another's thread after that thread
        // was seen idle in the same look.
        var last = look()
        while true {
            let now = look()
            if last.idle && now.idle && last.signalled == now.signalled { return true }
            if ProcessInfo.processInfo.systemUptime >= deadline { return false }
            last = now
            sched_yield()
        }
    }
}

/// Waits until every audio queue's callback thread has handled all it was woken for
/// (``CallbackExecutor/waitUntilAllIdle(timeout:)``); `false` after `timeout` seconds.
package func waitUntilQueueCallbacksIdle(timeout: Double = 5) -> Bool {
    CallbackExecutor.waitUntilAllIdle(timeout: timeout)
}
