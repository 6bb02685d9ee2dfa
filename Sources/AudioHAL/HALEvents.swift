import Synchronization

/// Server happenings the audio session follows, raised on the server thread without allocating
/// (an atomic OR and a semaphore post) and taken by the session's monitor thread.
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

    package let wakeup = Wakeup()
    private let pending = Atomic<UInt32>(0)

    package init() {}

    /// Server thread: records `kind` and wakes the monitor. Real-time safe.
    package func raise(_ kind: Kind) {
        pending.bitwiseOr(kind.rawValue, ordering: .releasing)
        wakeup.signal()
    }

    /// What was raised since the last call.
    package func take() -> Kind { Kind(rawValue: pending.exchange(0, ordering: .acquiring)) }
}
