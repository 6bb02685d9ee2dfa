import AVFAudio
import AudioTestSupport
import AudioToolbox
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// AVAudioPlayer: time from `play()` to the first sound on the sink, and CPU time for MP3
/// playback, each beside paplay on the same file.
extension PlayerBench.EndOfPlay: AVAudioPlayerDelegate {
    nonisolated func audioPlayerDidFinishPlaying(_ player: AVAudioPlayer, successfully flag: Bool) { done.signal() }
}

enum PlayerBench {
    final class EndOfPlay: @unchecked Sendable {
        let done = DispatchSemaphore(value: 0)

        /// Waits for the end, running the main run loop meanwhile (the delegate is called on the
        /// main queue, as Apple's).
        func wait(seconds: Double) -> Bool {
            let deadline = Date(timeIntervalSinceNow: seconds)
            while done.wait(timeout: .now()) != .success {
                guard Date() < deadline else { return false }
                _ = RunLoop.main.run(mode: .default, before: Date(timeIntervalSinceNow: 0.5))
            }
            return true
        }
    }

    static func median(_ x: [Double]) -> Double? {
        guard !x.isEmpty else { return nil }
        let s = x.sorted()
        return s[s.count / 2]
    }

    /// Median start latencies (ms) over `runs`: prepared player, unprepared player, paplay.
    static func startLatency(server: ServerHandle, file: URL, runs: Int) throws -> (prepared: Double?, unprepared: Double?, paplay: Double?) {
        guard let paplay = PrivatePulseServer.which("paplay") else { throw BenchError("paplay is needed (apt-get install pulseaudio-utils)") }
        let watch = try OnsetWatch()
        defer { watch.dispose() }
        var prepared: [Double] = []
        var unprepared: [Double] = []
        var anchor: [Double] = []
        for _ in 0..<runs {
            let a = try AVAudioPlayer(contentsOf: file)
            a.prepareToPlay()
            pause(0.3)  // silence between runs
            watch.arm(at: AudioGetCurrentHostTime())
            a.play()
            if let ms = watch.wait(timeout: 3) { prepared.append(ms) }
            a.stop()

            let b = try AVAudioPlayer(contentsOf: file)
            pause(0.3)
            watch.arm(at: AudioGetCurrentHostTime())
            b.play()
            if let ms = watch.wait(timeout: 3) { unprepared.append(ms) }
            b.stop()

            pause(0.3)
            watch.arm(at: AudioGetCurrentHostTime())
            let child = try ChildProcess(paplay, [file.path], environment: server.environment)
            if let ms = watch.wait(timeout: 3) { anchor.append(ms) }
            _ = child.terminate()
        }
        return (median(prepared), median(unprepared), median(anchor))
    }

    /// CPU seconds to play `file` to the end: this process with AVAudioPlayer, and paplay (0
    /// when `paplay` is false).
    static func playbackCPU(server: ServerHandle, file: URL, seconds: Double, paplay: Bool = true) throws -> (ours: Double, paplay: Double) {
        let before = PlaybackBench.cpuTime()
        let player = try AVAudioPlayer(contentsOf: file)
        let end = EndOfPlay()
        player.delegate = end
        guard player.play() else { throw BenchError("AVAudioPlayer did not start") }
        guard end.wait(seconds: seconds + 10) else { throw BenchError("AVAudioPlayer did not finish") }
        let ours = PlaybackBench.cpuTime() - before
        return (ours, paplay ? try EngineBench.paplayCPU(server: server, [file.path]) : 0)
    }

    /// Makes the files: a 1 kHz tone WAV that starts at full level, and a stereo MP3 of music-like
    /// content (two tones and noise) of `seconds`.
    static func makeFiles(seconds: Double) throws -> (wav: URL, mp3: URL) {
        let dir = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("openavf-player-bench-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let wav = dir.appendingPathComponent("tone.wav")
        let mp3 = dir.appendingPathComponent("music.mp3")
        let run = { (arguments: [String]) throws in _ = try runTool("ffmpeg", ["-nostdin", "-loglevel", "error", "-y"] + arguments, in: dir) }
        try run(["-f", "lavfi", "-i", "aevalsrc=0.5*sin(2*PI*1000*t):s=48000:d=1", "-c:a", "pcm_s16le", wav.path])
        try run([
            "-f", "lavfi", "-i", "aevalsrc=0.3*sin(2*PI*220*t)+0.2*sin(2*PI*330*t)+0.05*(random(0)-0.5)|0.3*sin(2*PI*277*t)+0.2*sin(2*PI*440*t):s=44100:d=\(seconds)",
            "-c:a", "libmp3lame", "-b:a", "192k", mp3.path,
        ])
        return (wav, mp3)
    }
}
