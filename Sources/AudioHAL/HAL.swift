import Synchronization

/// Where streams come from: the process's backend, chosen once and shared.
///
/// The PulseAudio backend, connected on first use. (Offline rendering and the device layer's own
/// tests use a ``VirtualBackend`` directly.)
package enum HAL {
    private static let current = Mutex<(any AudioBackend)?>(nil)

    /// The shared backend, connecting to the sound server on first use.
    package static func backend() throws(HALError) -> any AudioBackend {
        let result: Result<any AudioBackend, HALError> = current.withLock { slot in
            if let backend = slot { return .success(backend) }
            do throws(HALError) {
                let backend = try PulseBackend()
                slot = backend
                return .success(backend)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// Forgets `backend` if it is the shared one (its server went away): the next ``backend()``
    /// connects afresh. Streams opened on it keep it alive and report errors from then on.
    package static func discard(_ backend: any AudioBackend) {
        current.withLock { slot in
            if let b = slot, b === backend { slot = nil }
        }
    }
}
