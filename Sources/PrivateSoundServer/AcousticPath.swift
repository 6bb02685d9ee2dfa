import Foundation

/// Issue 14's acoustic path on the private server: a `module-loopback` from the speaker's monitor (or `source`)
/// into `micfeed` (the default source's sink), `delayMsec` late at `gainDB`, so that what is played
/// comes back as echo in the microphone. ``close()`` unloads it. Its stream carries the role
/// ``PrivatePulseServer/roomRole()``: the room's sound, which no ducking lowers.
public final class AcousticPath: @unchecked Sendable {
    private let server: PrivatePulseServer
    private let module: String
    private var closed = false

    public init(server: PrivatePulseServer, source: String = "speaker.monitor", delayMsec: Int = 40, gainDB: Double = -6) throws {
        self.server = server
        module = try server.pactl([
            "load-module", "module-loopback", "source=\(source)", "sink=micfeed", "latency_msec=\(delayMsec)", "adjust_time=0", "source_dont_move=true",
            "sink_dont_move=true", "sink_input_properties=media.role=\(PrivatePulseServer.roomRole())",
        ]).trimmingCharacters(in: .whitespacesAndNewlines)
        // The loopback's stream at the path's gain.
        let inputs = try server.pactl(["list", "sink-inputs"]).components(separatedBy: "Sink Input #").dropFirst()
        guard let stream = inputs.first(where: { $0.contains("Owner Module: \(module)\n") })?.split(separator: "\n").first else {
            close()
            throw PrivatePulseServer.Failure(description: "module-loopback made no stream")
        }
        try server.pactl(["set-sink-input-volume", String(stream).trimmingCharacters(in: .whitespaces), String(format: "%.1fdB", gainDB)])
    }

    public func close() {
        guard !closed else { return }
        closed = true
        _ = try? server.pactl(["unload-module", module])
    }

    deinit { close() }
}
