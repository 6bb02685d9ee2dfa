import CoreAudioTypes
import Synchronization

/// The process's audio environment: the backend, with its device policy, that every queue, audio
/// session, player and recorder of the process uses.
///
/// There is one current environment, ``current``. By default it is ``pulseAudio``: the
/// PulseAudio backend, connected on first use and connected afresh after the server went away
/// (``discard(_:)``). A test sets another for the whole process (a ``VirtualBackend`` whose
/// clock it advances) and puts the previous one back when it is done:
///
/// ```swift
/// let virtual = VirtualBackend()
/// let previous = AudioSystem.current
/// AudioSystem.current = AudioSystem(backend: virtual)
/// defer { AudioSystem.current = previous }
/// ```
///
/// Thread-safe: any thread may read or set ``current`` and ask for ``backend()``.
package final class AudioSystem: Sendable {
    /// Makes the backend when there is none (first use, or after a server loss).
    private let connect: @Sendable () throws(HALError) -> any AudioBackend
    /// Whether ``discard(_:)`` forgets the backend (a server connection) or keeps it (a backend
    /// given whole, such as a virtual one: there is nothing to reconnect to).
    private let reconnects: Bool
    private let slot = Mutex<(any AudioBackend)?>(nil)

    /// An environment whose backend is made by `connect` on first use, and again after a loss.
    package init(connect: @escaping @Sendable () throws(HALError) -> any AudioBackend) {
        self.connect = connect
        reconnects = true
    }

    /// An environment of one backend made already (a ``VirtualBackend``, or a ``PulseBackend``
    /// connected to a given server).
    package init(backend: any AudioBackend) {
        connect = { backend }
        reconnects = false
        slot.withLock { $0 = backend }
    }

    /// The user's sound server through PulseAudio (``PulseBackend``), the process's default.
    package static let pulseAudio = AudioSystem { () throws(HALError) -> any AudioBackend in try PulseBackend() }

    private static let currentSystem = Mutex<AudioSystem>(pulseAudio)

    /// The environment everything in the process uses from now on. Setting it retires the
    /// previous one's backend for the audio session (which follows the new one); streams already
    /// open stay where they are.
    package static var current: AudioSystem {
        get { currentSystem.withLock { $0 } }
        set {
            let old = currentSystem.withLock { slot -> AudioSystem in
                defer { slot = newValue }
                return slot
            }
            guard old !== newValue else { return }
            // The host clock is the new environment's (a virtual backend's own, or the real one).
            old.connectedBackend?.drivesHostClock(false)
            setVirtualHostTime(nil)
            newValue.connectedBackend?.drivesHostClock(true)
            // Wakes whoever waits on the old backend's events (the session's event thread).
            old.connectedBackend?.events.raise(.retired)
            for observer in observers.withLock({ $0 }) { observer(old, newValue) }
        }
    }

    private static let observers = Mutex<[@Sendable (_ old: AudioSystem, _ new: AudioSystem) -> Void]>([])

    /// Calls `observer` each time ``current`` changes, on the thread that changes it, before the
    /// setter returns: what the process keeps of the old environment (the audio session's
    /// stream) is let go before anything uses the new one.
    package static func observeChanges(_ observer: @escaping @Sendable (_ old: AudioSystem, _ new: AudioSystem) -> Void) {
        observers.withLock { $0.append(observer) }
    }

    /// The backend, connecting it on first use. Throws ``HALError/Kind/noServer`` when no server
    /// answers.
    package func backend() throws(HALError) -> any AudioBackend {
        let result: Result<any AudioBackend, HALError> = slot.withLock { slot in
            if let backend = slot { return .success(backend) }
            do throws(HALError) {
                let backend = try connect()
                slot = backend
                return .success(backend)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// The backend if one is connected, without connecting.
    package var connectedBackend: (any AudioBackend)? { slot.withLock { $0 } }

    /// Forgets `backend` if it is this environment's (its server went away): the next
    /// ``backend()`` connects afresh. Streams opened on it keep it alive and report errors from
    /// then on. An environment made of one given backend keeps it.
    package func discard(_ backend: any AudioBackend) {
        guard reconnects else { return }
        slot.withLock { slot in
            if let b = slot, b === backend { slot = nil }
        }
    }
}
