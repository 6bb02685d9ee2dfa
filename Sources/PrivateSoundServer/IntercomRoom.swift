import Foundation

/// Two `Examples/Intercom` instances' rooms on the private server, for the intercom test and
/// `Scripts/demo intercom`: A's microphone is `micfeed` (where the caller speaks), its speaker a
/// sink of its own (`farend`); B's microphone is a silent room (`hush`, a sink nobody plays to),
/// its speaker the server's `speaker`, which the caller records. ``close()`` unloads the two sinks.
public final class IntercomRoom: @unchecked Sendable {
    private let server: PrivatePulseServer
    private var modules: [String] = []
    /// A's port; B's is the next.
    public let port = 20000 + Int(getpid() % 10000) * 2

    public init(server: PrivatePulseServer) throws {
        self.server = server
        for name in ["farend", "hush"] {
            do {
                modules.append(
                    try server.pactl(["load-module", "module-null-sink", "sink_name=\(name)", "rate=48000", "channels=1", "format=float32le"])
                        .trimmingCharacters(in: .whitespacesAndNewlines))
            } catch {
                close()
                throw error
            }
        }
    }

    /// A's arguments (it speaks: micfeed in, farend out) and B's (it listens: a silent room in,
    /// speaker out), each talking to the other on loopback.
    public var talkerArguments: [String] {
        ["--port", "\(port)", "--peer", "127.0.0.1:\(port + 1)", "--input", "micfeed.monitor", "--output", "farend"]
    }
    public var listenerArguments: [String] {
        ["--port", "\(port + 1)", "--peer", "127.0.0.1:\(port)", "--input", "hush.monitor", "--output", "speaker"]
    }

    public func close() {
        for m in modules { _ = try? server.pactl(["unload-module", m]) }
        modules = []
    }

    deinit { close() }
}
