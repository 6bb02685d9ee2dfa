import Foundation

/// The one private server a test process shares: started on first use (PulseAudio, or PipeWire
/// when `OPENAVF_TEST_SERVER=pipewire`; none at all when `none`), pointed to by `PULSE_SERVER` for this process, and stopped
/// when the process exits. Each test that asks for it gets a server that answers (one that stopped
/// answering is started again, ``PrivatePulseServer/reviveIfUnresponsive(timeout:)``) and, on
/// PipeWire, the fixture's defaults back (``PrivatePulseServer/restoreDefaults()``).
public enum TestSound {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var shared: PrivatePulseServer?

    /// The longest silence a real-server test lets pass inside a sound, in frames at 48 kHz:
    /// three periods of the slowest private server (PipeWire's 1024-frame graph cycle), a
    /// criterion that holds on a busy machine. Dropouts themselves are counted by the benchmark.
    public static let gapTolerance = 3 * 1024

    /// Thrown by ``server()`` in the deterministic layer (`OPENAVF_TEST_SERVER=none`).
    public struct NoServer: Error, CustomStringConvertible {
        public var description: String {
            "this test starts a sound server, and OPENAVF_TEST_SERVER=none runs the deterministic layer only: "
                + "name its class in Scripts/lib/layers.sh (real-server tests)"
        }
    }

    /// The shared server; throws ``NoServer`` when `OPENAVF_TEST_SERVER=none` (the deterministic
    /// layer, which runs no server).
    public static func server() throws -> PrivatePulseServer {
        if ProcessInfo.processInfo.environment["OPENAVF_TEST_SERVER"] == "none" { throw NoServer() }
        lock.lock()
        defer { lock.unlock() }
        if let shared {
            do {
                if try shared.reviveIfUnresponsive() {
                    print("the shared \(shared.kind) server did not answer: killed and started again")
                }
                if shared.kind == .pipewire { shared.restoreDefaults() }
                return shared
            } catch {
                // It could not be started again in its directory: a fresh one below.
                print("the shared \(shared.kind) server did not answer and did not come back (\(error)): starting a new one")
                shared.stop()
                self.shared = nil
            }
        }
        let server = try PrivatePulseServer(kind: .fromEnvironment)
        server.makeDefaultForThisProcess()
        shared = server
        atexit { TestSound.stopShared() }
        return server
    }

    private static func stopShared() {
        lock.lock()
        let server = shared
        shared = nil
        lock.unlock()
        server?.stop()
    }
}
