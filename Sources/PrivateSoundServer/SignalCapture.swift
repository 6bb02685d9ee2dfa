import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Records a source of a ``PrivatePulseServer`` with `parec` (an independent, real client) into
/// memory, as interleaved 32-bit float.
public final class SignalCapture: @unchecked Sendable {
    public let sampleRate: Int
    public let channels: Int
    private let child: ChildProcess
    private let lock = NSLock()
    private var bytes = Data()
    private var scanned = 0
    private var loud = false
    private let done = DispatchSemaphore(value: 0)

    /// Starts capturing `device` (a source name such as `speaker.monitor`); returns once data flows.
    public convenience init(server: PrivatePulseServer, device: String, sampleRate: Int = 48000, channels: Int = 1, latencyMsec: Int = 10) throws {
        try self.init(environment: server.environment, device: device, sampleRate: sampleRate, channels: channels, latencyMsec: latencyMsec)
    }

    /// Starts capturing `device` of the server `environment` names (`PULSE_SERVER`…).
    public init(environment: [String: String], device: String, sampleRate: Int = 48000, channels: Int = 1, latencyMsec: Int = 10) throws {
        self.sampleRate = sampleRate
        self.channels = channels
        guard let parec = PrivatePulseServer.which("parec") else { throw PrivatePulseServer.Failure(description: "parec is not installed") }
        let pipe = try CloseOnExecPipe()
        // `channelmix.normalize`: PipeWire mixes stereo down to mono at −3 dB per channel unless
        // told to normalize, which makes it (L+R)/2 as PulseAudio's remap does; PulseAudio ignores
        // the property. Levels read the same on both servers.
        child = try ChildProcess(parec, [
            "--device=\(device)", "--raw", "--format=float32le", "--rate=\(sampleRate)", "--channels=\(channels)",
            "--latency-msec=\(latencyMsec)", "--property=channelmix.normalize=true",
        ], environment: environment, stdout: .descriptor(pipe.write))
        close(pipe.write)
        let fd = pipe.read
        Thread { [self] in
            var chunk = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n <= 0 { break }
                lock.lock()
                bytes.append(contentsOf: chunk[0..<n])
                lock.unlock()
            }
            close(fd)
            done.signal()
        }.start()
        do {
            try waitFor(frames: sampleRate / 100, timeout: 5)
        } catch {
            child.terminate()
            throw error
        }
    }

    /// Frames captured so far.
    public var frameCount: Int {
        lock.lock()
        defer { lock.unlock() }
        return bytes.count / (4 * channels)
    }

    /// Waits until at least `frames` frames have arrived; throws after `timeout` seconds.
    public func waitFor(frames: Int, timeout: Double) throws {
        guard waitUntil(timeout: timeout, { frameCount >= frames }) else {
            throw PrivatePulseServer.Failure(description: "capture stalled at \(frameCount) frames")
        }
    }

    /// Whether any sample captured so far was louder than `threshold`, the first threshold asked
    /// about (each sample is looked at once, however often this is asked).
    public func heard(above threshold: Float) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        if loud { return true }
        let end = bytes.count / 4 * 4
        loud = bytes.withUnsafeBytes { raw in
            stride(from: scanned, to: end, by: 4).contains { abs(raw.loadUnaligned(fromByteOffset: $0, as: Float.self)) > threshold }
        }
        scanned = end
        return loud
    }

    /// Stops `parec` and returns everything captured, channel by channel.
    public func stop() -> [[Float]] {
        child.terminate()
        _ = done.wait(timeout: .now() + 5)
        return samples()
    }

    /// The samples captured so far, channel by channel.
    public func samples() -> [[Float]] {
        lock.lock()
        let data = bytes
        lock.unlock()
        let frames = data.count / (4 * channels)
        var result = Array(repeating: [Float](repeating: 0, count: frames), count: channels)
        data.withUnsafeBytes { raw in
            for f in 0..<frames {
                for c in 0..<channels {
                    result[c][f] = raw.loadUnaligned(fromByteOffset: (f * channels + c) * 4, as: Float.self)
                }
            }
        }
        return result
    }
}

/// Plays interleaved float samples into a sink of a ``PrivatePulseServer`` with `pacat`.
public final class SignalPlayer: @unchecked Sendable {
    private let child: ChildProcess
    private let device: String
    private let environment: [String: String]

    /// `latencyMsec` is the stream's buffer: longer rides out a loaded machine without gaps.
    /// Into `micfeed` (the room the microphone hears) a player carries the role
    /// ``PrivatePulseServer/roomRole()`` unless `properties` give one: it is sound in the room, not
    /// another application's playback, and no policy (ducking, corking) is to act on it.
    public init(
        server: PrivatePulseServer, device: String, samples: [Float], sampleRate: Int, channels: Int = 1, properties: [String: String] = [:],
        latencyMsec: Int = 100
    ) throws {
        guard let pacat = PrivatePulseServer.which("pacat") else { throw PrivatePulseServer.Failure(description: "pacat is not installed") }
        self.device = device
        environment = server.environment
        let file = server.directory.appendingPathComponent("play-\(UInt32.random(in: 0...UInt32.max)).raw").path
        try samples.withUnsafeBufferPointer { Data(buffer: $0) }.write(to: URL(fileURLWithPath: file))
        // The peer plays at a raised priority (nice −10 where allowed; `nice` runs it as it is
        // otherwise), so that a loaded machine does not put gaps into the signal a test then
        // blames on the code it measures.
        var properties = properties
        if device == "micfeed" && properties["media.role"] == nil { properties["media.role"] = PrivatePulseServer.roomRole() }
        let arguments = [
            "--playback", "--device=\(device)", "--raw", "--format=float32le", "--rate=\(sampleRate)", "--channels=\(channels)",
            "--latency-msec=\(latencyMsec)", file,
        ] + properties.map { "--property=\($0.key)=\($0.value)" }
        if let nice = PrivatePulseServer.which("nice") {
            child = try ChildProcess(nice, ["-n", "-10", pacat] + arguments, environment: server.environment, stderr: .null)
        } else {
            child = try ChildProcess(pacat, arguments, environment: server.environment)
        }
    }

    /// Waits until what this player plays is heard on its sink's monitor, louder than
    /// `threshold`: `pacat` fills its buffer before the server plays it, which takes longer on a
    /// loaded machine, so a recording started at once can begin before the signal does (and a
    /// window that begins in the silence before a tone reads it flat). Throws after `timeout`
    /// seconds.
    public func waitUntilHeard(threshold: Float = 0.01, timeout: Double = 5) throws {
        let monitor = try SignalCapture(environment: environment, device: device + ".monitor")
        defer { _ = monitor.stop() }
        guard waitUntil(timeout: timeout, { monitor.heard(above: threshold) }) else {
            throw PrivatePulseServer.Failure(description: "what pacat plays into \(device) was not heard on its monitor within \(timeout) s")
        }
    }

    /// Waits for `pacat` to finish playing (it drains before exiting).
    public func waitUntilDone() { child.wait() }
    public func stop() { child.terminate() }
}
