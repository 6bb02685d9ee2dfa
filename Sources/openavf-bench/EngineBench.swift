import AVFAudio
import AudioTestSupport
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// AVAudioEngine figures beside their anchors: offline rendering speed, a two-file mix beside
/// ffmpeg's amix, and a player node's playback CPU beside paplay.
enum EngineBench {
    /// Two stereo 44.1 kHz WAVs of `seconds` of music-like material (tones and noise).
    static func makeFiles(seconds: Double, in dir: URL) throws -> (URL, URL) {
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let a = dir.appendingPathComponent("a.wav"), b = dir.appendingPathComponent("b.wav")
        let run = { (arguments: [String]) throws in _ = try runTool("ffmpeg", ["-nostdin", "-loglevel", "error", "-y"] + arguments, in: dir) }
        try run([
            "-f", "lavfi", "-i", "aevalsrc=0.3*sin(2*PI*220*t)+0.05*(random(0)-0.5)|0.3*sin(2*PI*277*t):s=44100:d=\(seconds)", "-c:a", "pcm_s16le", a.path,
        ])
        try run([
            "-f", "lavfi", "-i", "aevalsrc=0.2*sin(2*PI*330*t)|0.2*sin(2*PI*440*t)+0.05*(random(0)-0.5):s=44100:d=\(seconds)", "-c:a", "pcm_s16le", b.path,
        ])
        return (a, b)
    }

    /// Renders `file` offline through player → time pitch (rate 1.25) → EQ → reverb → main mixer
    /// at 48 kHz; returns the audio's seconds per second of wall time.
    static func offlineSpeed(file: URL) throws -> Double {
        let engine = AVAudioEngine()
        let output = AVAudioFormat(standardFormatWithSampleRate: 48000, channels: 2)!
        try engine.enableManualRenderingMode(.offline, format: output, maximumFrameCount: 4096)
        let source = try AVAudioFile(forReading: file)
        let player = AVAudioPlayerNode(), pitch = AVAudioUnitTimePitch(), eq = AVAudioUnitEQ(numberOfBands: 2), reverb = AVAudioUnitReverb()
        pitch.rate = 1.25
        eq.bands[0].bypass = false
        eq.bands[0].gain = 6
        reverb.wetDryMix = 30
        for node in [player, pitch, eq, reverb] as [AVAudioNode] { engine.attach(node) }
        engine.connect(player, to: pitch, format: source.processingFormat)
        engine.connect(pitch, to: eq, format: source.processingFormat)
        engine.connect(eq, to: reverb, format: source.processingFormat)
        engine.connect(reverb, to: engine.mainMixerNode, format: source.processingFormat)
        player.scheduleFile(source, at: nil)
        try engine.start()
        player.play()
        let buffer = AVAudioPCMBuffer(pcmFormat: output, frameCapacity: 4096)!
        let total = Int(Double(source.length) / source.processingFormat.sampleRate / 1.25 * 48000)
        let start = Date()
        var done = 0
        var energy = 0.0
        while done < total {
            let n = min(4096, total - done)
            guard try engine.renderOffline(AVAudioFrameCount(n), to: buffer) == .success else { throw BenchError("renderOffline failed") }
            let left = buffer.floatChannelData![0]
            for i in Swift.stride(from: 0, to: n, by: 64) { energy += Double(left[i] * left[i]) }
            done += n
        }
        let elapsed = Date().timeIntervalSince(start)
        engine.stop()
        // A render of silence would be fast and say nothing: the music must have come through.
        guard energy / Double(total / 64) > 1e-4 else { throw BenchError("the offline render was silent (mean square \(energy / Double(total / 64)), \(total) frames)") }
        return Double(total) / 48000 / elapsed
    }

    /// Mixes the two files to a 16-bit WAV: the engine offline (two players into the main mixer,
    /// written through AVAudioFile), and ffmpeg's amix; wall seconds of each (best of `repeats`).
    static func twoFileMix(_ a: URL, _ b: URL, in dir: URL, repeats: Int) throws -> (ours: Double, ffmpeg: Double) {
        var ours = Double.infinity, anchor = Double.infinity
        for _ in 0..<repeats {
            let start = Date()
            try mixWithEngine(a, b, to: dir.appendingPathComponent("ours.wav"))
            ours = min(ours, Date().timeIntervalSince(start))
            guard let ffmpeg = ConvertBench.tool("ffmpeg") else { throw BenchError("ffmpeg is needed") }
            let figure = try ConvertBench.run(
                ffmpeg, ["-v", "error", "-y", "-i", a.path, "-i", b.path, "-filter_complex", "amix=inputs=2", "-c:a", "pcm_s16le",
                         dir.appendingPathComponent("ffmpeg.wav").path], repeats: 1)
            anchor = min(anchor, figure.seconds)
        }
        // The two results must be the same mix, or the speed says nothing.
        let mine = try AVAudioFile(forReading: dir.appendingPathComponent("ours.wav")), theirs = try AVAudioFile(forReading: dir.appendingPathComponent("ffmpeg.wav"))
        guard abs(mine.length - theirs.length) <= 4410 else { throw BenchError("the mixes differ in length: ours \(mine.length), ffmpeg's \(theirs.length) frames") }
        let level = { (file: AVAudioFile) throws -> Double in
            let buffer = AVAudioPCMBuffer(pcmFormat: file.processingFormat, frameCapacity: 44100)!
            file.framePosition = file.length / 2
            try file.read(into: buffer, frameCount: 44100)
            let x = buffer.floatChannelData![0]
            return 10 * log10((0..<Int(buffer.frameLength)).reduce(0.0) { $0 + Double(x[$1] * x[$1]) } / Double(max(buffer.frameLength, 1)) + 1e-20)
        }
        let (l1, l2) = (try level(mine), try level(theirs))
        guard abs(l1 - l2) < 1 else { throw BenchError(String(format: "the mixes differ in level: ours %.1f dB, ffmpeg's %.1f dB", l1, l2)) }
        return (ours, anchor)
    }

    private static func mixWithEngine(_ a: URL, _ b: URL, to url: URL) throws {
        let fa = try AVAudioFile(forReading: a), fb = try AVAudioFile(forReading: b)
        let format = fa.processingFormat
        let engine = AVAudioEngine()
        try engine.enableManualRenderingMode(.offline, format: format, maximumFrameCount: 4096)
        let pa = AVAudioPlayerNode(), pb = AVAudioPlayerNode()
        engine.attach(pa)
        engine.attach(pb)
        engine.connect(pa, to: engine.mainMixerNode, format: format)
        engine.connect(pb, to: engine.mainMixerNode, format: format)
        // amix's own scaling: each of two inputs at half.
        pa.volume = 0.5
        pb.volume = 0.5
        pa.scheduleFile(fa, at: nil)
        pb.scheduleFile(fb, at: nil)
        try engine.start()
        pa.play()
        pb.play()
        var settings = format.settings
        settings[AVLinearPCMBitDepthKey] = 16
        settings[AVLinearPCMIsFloatKey] = false
        let out = try AVAudioFile(forWriting: url, settings: settings, commonFormat: .pcmFormatFloat32, interleaved: false)
        let buffer = AVAudioPCMBuffer(pcmFormat: format, frameCapacity: 4096)!
        var remaining = max(fa.length, fb.length)
        while remaining > 0 {
            let n = AVAudioFrameCount(min(4096, remaining))
            guard try engine.renderOffline(n, to: buffer) == .success else { throw BenchError("renderOffline failed") }
            try out.write(from: buffer)
            remaining -= AVAudioFramePosition(n)
        }
        engine.stop()
    }

    /// CPU to play `file` through a player node to the output, beside paplay on it as it comes
    /// (the server's default buffer, 2 s) and at the engine's output latency (three I/O buffers of
    /// the session's default 20 ms: `--latency-msec=60`). Each with the server's share: paplay
    /// hands the server the file's 44.1 kHz and the server resamples it, where the engine
    /// resamples in this process to the output's 48 kHz (as Apple's mixer does to the hardware's).
    static func playerNodeCPU(server: ServerHandle, file: URL) throws -> (ours: ProcessCPU.Playback, paplay: ProcessCPU.Playback, paplayAtOurLatency: ProcessCPU.Playback) {
        let ours = try ProcessCPU.measured(server) {
            let before = PlaybackBench.cpuTime()
            let engine = AVAudioEngine()
            let source = try AVAudioFile(forReading: file)
            let player = AVAudioPlayerNode()
            engine.attach(player)
            engine.connect(player, to: engine.mainMixerNode, format: source.processingFormat)
            let done = DispatchSemaphore(value: 0)
            player.scheduleFile(source, at: nil, completionCallbackType: .dataPlayedBack) { _ in done.signal() }
            try engine.start()
            player.play()
            let seconds = Double(source.length) / source.processingFormat.sampleRate
            guard done.wait(timeout: .now() + seconds + 10) == .success else { throw BenchError("the player node did not finish") }
            engine.stop()
            return PlaybackBench.cpuTime() - before
        }
        let paplay = try ProcessCPU.measured(server) { try paplayCPU(server: server, [file.path]) }
        let paplayAtOurLatency = try ProcessCPU.measured(server) { try paplayCPU(server: server, ["--latency-msec=60", file.path]) }
        return (ours, paplay, paplayAtOurLatency)
    }

    /// paplay's CPU seconds (user and system) for `arguments`.
    static func paplayCPU(server: ServerHandle, _ arguments: [String]) throws -> Double {
        guard let paplay = PrivatePulseServer.which("paplay") else { throw BenchError("paplay is needed") }
        let child = try ChildProcess(paplay, arguments, environment: server.environment)
        var status: Int32 = 0
        var usage = rusage()
        while wait4(child.pid, &status, 0, &usage) < 0 && errno == EINTR {}
        guard status == 0 else { throw BenchError("paplay could not play \(arguments.last ?? "") (status \(status))") }
        return PlaybackBench.time(usage.ru_utime) + PlaybackBench.time(usage.ru_stime)
    }
}
