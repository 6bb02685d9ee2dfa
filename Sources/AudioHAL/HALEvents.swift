import Synchronization

/// Server happenings, raised on the server thread without allocating (atomic ORs and semaphore
/// posts) and taken by whoever follows them: the audio session's monitor thread (``take()`` and
/// ``wakeup``) and up to ``maximumSubscriptions`` more (``subscribe()``: the device API's
/// notification thread), each with pending kinds and a wakeup of its own.
package final class HALEvents: @unchecked Sendable {
    package struct Kind: OptionSet, Sendable {
        package let rawValue: UInt32
        package init(rawValue: UInt32) { self.rawValue = rawValue }
        /// A sink or source came, went or changed, or the server's defaults changed.
        package static let devices = Kind(rawValue: 1)
        /// The server asked a policy stream to cork (module-role-cork: a call started).
        package static let corkRequested = Kind(rawValue: 2)
        /// The server asked a policy stream to uncork (the call ended).
        package static let uncorkRequested = Kind(rawValue: 4)
        /// The connection to the server died.
        package static let serverLost = Kind(rawValue: 8)
        /// A playback stream of some client came or went.
        package static let streams = Kind(rawValue: 16)
        /// The backend stopped being the process's environment (``AudioSystem/current`` changed):
        /// whoever follows the environment's events should follow the new one's.
        package static let retired = Kind(rawValue: 32)
    }

    /// One follower's view: what was raised since it last took, and its wakeup.
    package final class Subscription: @unchecked Sendable {
        package let wakeup = Wakeup()
        fileprivate let pending = Atomic<UInt32>(0)
        fileprivate let inUse = Atomic<Bool>(false)
        fileprivate init() {}
        /// What was raised since the last call.
        package func take() -> Kind { Kind(rawValue: pending.exchange(0, ordering: .acquiring)) }
        fileprivate func raise(_ kind: Kind) {
            guard inUse.load(ordering: .relaxed) else { return }
            pending.bitwiseOr(kind.rawValue, ordering: .releasing)
            wakeup.signal()
        }
    }

    /// Followers besides the session's, made up front so that ``raise(_:)`` allocates nothing.
    package static let maximumSubscriptions = 4
    private let main = Subscription()
    private let extra: [Subscription]

    package init() {
        main.inUse.store(true, ordering: .relaxed)
        extra = (0..<Self.maximumSubscriptions).map { _ in Subscription() }
    }

    /// The audio session monitor's wakeup.
    package var wakeup: Wakeup { main.wakeup }

    /// Server thread: records `kind` for every follower and wakes each. Real-time safe.
    package func raise(_ kind: Kind) {
        main.raise(kind)
        for s in extra { s.raise(kind) }
    }

    /// What was raised since the session's monitor last took.
    package func take() -> Kind { main.take() }

    /// A follower of its own, `nil` when ``maximumSubscriptions`` are taken. It sees what is
    /// raised from now on, until ``unsubscribe(_:)``.
    package func subscribe() -> Subscription? {
        for s in extra where s.inUse.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged {
            _ = s.take()
            return s
        }
        return nil
    }

    package func unsubscribe(_ subscription: Subscription) { subscription.inUse.store(false, ordering: .releasing) }
}
