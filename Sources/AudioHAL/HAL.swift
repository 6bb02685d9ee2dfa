import Synchronization

/// Where streams come from: the process's backend, chosen once and shared.
///
/// By default the PulseAudio backend, connected on first use. Tests of the device layer may
/// install a ``VirtualBackend`` instead; integration tests never do.
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

    /// Replaces the shared backend (`nil`: reconnect to the server on next use).
    package static func install(_ backend: (any AudioBackend)?) {
        current.withLock { $0 = backend }
    }
}
