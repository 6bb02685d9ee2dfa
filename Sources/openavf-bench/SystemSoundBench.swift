import AudioTestSupport
import AudioToolbox
import Foundation

/// System sounds: time from `AudioServicesPlaySystemSound` to the first sound on the sink, beside
/// `paplay` (a process that opens a stream and plays the file) and `pactl play-sample` (a process
/// that asks the server to play the same file from its sample cache, the way the library does).
/// Both anchors include starting a process and connecting to the server: the in-process call does
/// neither, which is its point (a sound starts without opening anything).
enum SystemSoundBench {
    /// A 0.2 s 1 kHz tone at half scale that starts at full level, as a 16-bit WAV.
    static func makeFile() throws -> URL {
        let dir = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("openavf-sound-bench-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let wav = dir.appendingPathComponent("ding.wav")
        _ = try runTool("ffmpeg", ["-nostdin", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "aevalsrc=0.5*sin(2*PI*1000*t):s=48000:d=0.2", "-c:a", "pcm_s16le", wav.path], in: dir)
        return wav
    }

    /// Median latencies in ms over `runs`: ours, paplay, pactl play-sample.
    static func startLatency(server: ServerHandle, file: URL, runs: Int) throws -> (ours: Double?, paplay: Double?, pactl: Double?) {
        guard let paplay = PrivatePulseServer.which("paplay"), let pactl = PrivatePulseServer.which("pactl") else {
            throw BenchError("paplay and pactl are needed (apt-get install pulseaudio-utils)")
        }
        var sound: SystemSoundID = 0
        let status = AudioServicesCreateSystemSoundID(file as CFURL, &sound)
        guard status == kAudioServicesNoError else { throw BenchError("AudioServicesCreateSystemSoundID failed: \(status)") }
        defer { AudioServicesDisposeSystemSoundID(sound) }
        let upload = try ChildProcess(pactl, ["upload-sample", file.path, "openavf-bench-anchor"], environment: server.environment)
        guard upload.wait() == 0 else { throw BenchError("pactl upload-sample failed") }
        let watch = try OnsetWatch()
        defer { watch.dispose() }
        var ours: [Double] = [], viaPaplay: [Double] = [], viaPactl: [Double] = []
        for _ in 0..<runs {
            pause(0.3)
            watch.arm(at: AudioGetCurrentHostTime())
            AudioServicesPlaySystemSound(sound)
            if let ms = watch.wait(timeout: 3) { ours.append(ms) }

            pause(0.3)
            watch.arm(at: AudioGetCurrentHostTime())
            let a = try ChildProcess(paplay, [file.path], environment: server.environment)
            if let ms = watch.wait(timeout: 3) { viaPaplay.append(ms) }
            _ = a.wait()

            pause(0.3)
            watch.arm(at: AudioGetCurrentHostTime())
            let b = try ChildProcess(pactl, ["play-sample", "openavf-bench-anchor"], environment: server.environment)
            if let ms = watch.wait(timeout: 3) { viaPactl.append(ms) }
            _ = b.wait()
            // pactl returns as soon as the server has the request: let the sound end, so that
            // each measurement starts from silence (two copies of one tone can cancel out).
            pause(0.3)
        }
        _ = try? ChildProcess(pactl, ["remove-sample", "openavf-bench-anchor"], environment: server.environment).wait()
        return (PlayerBench.median(ours), PlayerBench.median(viaPaplay), PlayerBench.median(viaPactl))
    }
}
