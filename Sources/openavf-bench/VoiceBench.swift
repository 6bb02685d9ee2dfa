import AudioGraph
import AudioTestSupport
import Foundation

/// The voice-processing libraries side by side, offline (issue 14 has the library chosen by
/// measurement): libwebrtc-audio-processing and libspeexdsp on the same signals, the
/// `VoiceSignals` set-up: echo cancellation with far-end speech only, double talk, noise
/// suppression and gain control, and each one's CPU.
enum VoiceBench {
    /// The server's own echo canceller on the issue's set-up, the anchor: the far end played into
    /// `module-echo-cancel`'s sink (`aec_method` = `method`), which plays it on the speaker; a
    /// `module-loopback` carries the speaker's monitor into `micfeed` 40 ms later at −6 dB; the
    /// canceller's source reads `micfeed`'s monitor, the microphone. Returns the echo's loss: the
    /// microphone's level beside the canceller's output over the far end's speech after 2 s.
    /// `aec_args` keeps each method's gain control off.
    static func serverCanceller(_ server: PrivatePulseServer, method: String, far: [Float]) throws -> Double {
        func module(_ arguments: [String]) throws -> String {
            try server.pactl(["load-module"] + arguments).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let path = try AcousticPath(server: server)
        defer { path.close() }
        let canceller = try module([
            // Gain control off, as the in-process figures measure the echo's loss (it would lift
            // the residual: speex's, on by default, made it 20 dB louder than the echo).
            "module-echo-cancel", "aec_method=\(method)", "aec_args=\"\(method == "speex" ? "agc=0" : "analog_gain_control=0 digital_gain_control=0")\"",
            "source_master=micfeed.monitor", "sink_master=speaker",
            "source_name=openavf_aec_source", "sink_name=openavf_aec_sink", "rate=48000", "channels=1",
        ])
        defer { _ = try? server.pactl(["unload-module", canceller]) }
        let microphone = try SignalCapture(server: server, device: "micfeed.monitor")
        let cancelled = try SignalCapture(server: server, device: "openavf_aec_source")
        let player = try SignalPlayer(server: server, device: "openavf_aec_sink", samples: far, sampleRate: 48000)
        player.waitUntilDone()
        try microphone.waitFor(frames: microphone.frameCount + 24000, timeout: 5)
        let raw = microphone.stop()[0], out = cancelled.stop()[0]
        guard let onset = SignalAnalysis.onset(raw, threshold: 0.005) else { throw BenchError("no echo reached the microphone") }
        // The two recordings start within a few milliseconds of each other: the same span of
        // each, its speech frames (found on the microphone) after 2 s, as the in-process figure.
        let window = (onset + 96000)..<min(onset + far.count - 24000, raw.count, out.count)
        guard window.count > 48000 else { throw BenchError("the recordings are too short") }
        let heard = Array(raw[window]), left = Array(out[window])
        return VoiceSignals.erle(input: heard, output: left, where: VoiceSignals.speaking(heard, sampleRate: 48000), sampleRate: 48000, from: 0)
    }

    /// The comparison table, one column a library.
    static func report(rate: Int, in dir: URL, say: (String) -> Void) throws {
        let libraries = VoiceProcessor.Library.allCases
        let figures = try libraries.map { try VoiceSignals.figures($0, rate: rate, in: dir) }
        say("Voice processing offline at \(rate / 1000) kHz (espeak-ng voices; echo: the far end 40 ms later at −6 dB and a reflection; issue 14):")
        say("  " + "figure".padding(toLength: 44, withPad: " ", startingAt: 0) + libraries.map { $0.rawValue.padding(toLength: 10, withPad: " ", startingAt: 0) }.joined() + "target")
        func row(_ name: String, _ value: (VoiceSignals.Figures) -> Double, _ format: String, _ target: String) {
            say("  " + name.padding(toLength: 44, withPad: " ", startingAt: 0)
                + figures.map { String(format: format, value($0)).padding(toLength: 10, withPad: " ", startingAt: 0) }.joined() + target)
        }
        row("echo loss, far end only, after 2 s (dB)", \.erle, "%.1f", "≥ 30")
        row("double talk: near voice's correlation", \.doubleTalkCorrelation, "%.3f", "≥ 0.9")
        row("double talk: near voice's level (dB)", \.doubleTalkLevel, "%+.1f", "≥ −3")
        row("noise between words, −35 dBFS: reduced (dB)", \.noiseReduction, "%.1f", "≥ 15")
        row("words kept under noise: correlation", \.wordsKept, "%.3f", "≥ 0.9")
        row("talker at −40 dBFS, after 3 s (dBFS)", \.quietTalkerLevel, "%.1f", "−20 ± 6")
        row("talker peaking at −6 dBFS: peak out (dBFS)", \.loudTalkerPeak, "%.1f", "< 0")
        row("CPU per second of audio, every stage (ms)", \.cpu, "%.2f", "")
    }
}
