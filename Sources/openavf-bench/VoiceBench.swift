import AudioGraph
import AudioTestSupport
import Foundation

/// The voice-processing libraries side by side, offline (issue 14 has the library chosen by
/// measurement): libwebrtc-audio-processing and libspeexdsp on the same signals, the
/// `VoiceSignals` set-up: echo cancellation with far-end speech only, double talk, noise
/// suppression and gain control, and each one's CPU.
enum VoiceBench {
    struct Figures {
        var erle = 0.0
        var doubleTalkCorrelation = 0.0
        var doubleTalkLevel = 0.0
        var noiseReduction = 0.0
        var wordsKept = 0.0
        var quietTalkerLevel = 0.0
        var loudTalkerPeak = 0.0
        /// Milliseconds of CPU per second of audio, all stages on.
        var cpu = 0.0
    }

    static func process(_ library: VoiceProcessor.Library, rate: Int, stages: VoiceProcessor.Stages, near: [Float], far: [Float]?) throws -> [Float] {
        guard let processor = VoiceProcessor(library: library, sampleRate: rate, stages: stages) else {
            throw BenchError("\(library) does not take \(rate) Hz")
        }
        return VoiceSignals.process(processor, near: near, far: far)
    }

    static func measure(_ library: VoiceProcessor.Library, rate: Int, in dir: URL) throws -> Figures {
        var far = try VoiceSignals.speech(VoiceSignals.farText, voice: VoiceSignals.farVoice, sampleRate: rate, in: dir)
        var near = try VoiceSignals.speech(VoiceSignals.nearText, voice: VoiceSignals.nearVoice, sampleRate: rate, in: dir)
        let length = max(far.count, near.count)
        far += [Float](repeating: 0, count: length - far.count)
        near += [Float](repeating: 0, count: length - near.count)
        far = VoiceSignals.scaled(far, toSpeechRMS: -20, sampleRate: rate)
        let talker = VoiceSignals.scaled(near, toSpeechRMS: -26, sampleRate: rate)
        let echo = VoiceSignals.echo(of: far, sampleRate: rate)
        let floor = VoiceSignals.noise(count: length, dBFS: -70, seed: 1)
        let add = { (a: [Float], b: [Float]) in zip(a, b).map { $0 + $1 } }
        let cancelling = VoiceProcessor.Stages(echoCancellation: true, noiseSuppression: true, gainControl: false)
        var figures = Figures()
        let afterConvergence = 200  // 2 s of 10 ms frames

        // 1. Far end only: how much of the echo is left.
        let echoOnly = add(echo, floor)
        let cpuBefore = PlaybackBench.cpuTime()
        _ = try process(library, rate: rate, stages: VoiceProcessor.Stages(), near: echoOnly, far: far)
        figures.cpu = (PlaybackBench.cpuTime() - cpuBefore) / (Double(length) / Double(rate)) * 1000
        // Measured with echo cancellation and noise suppression only: gain control would lift
        // what is left (as it should, between a call's words), which is not the echo's loss.
        let echoCancelled = try process(library, rate: rate, stages: cancelling, near: echoOnly, far: far)
        let echoing = VoiceSignals.speaking(echo, sampleRate: rate)
        figures.erle = VoiceSignals.erle(input: echoOnly, output: echoCancelled, where: echoing, sampleRate: rate, from: afterConvergence)

        // 2. Double talk: the near talker over the echo, beside the near talker alone.
        let talking = VoiceSignals.speaking(talker, sampleRate: rate)
        let both = try process(library, rate: rate, stages: cancelling, near: add(add(echo, talker), floor), far: far)
        let alone = try process(library, rate: rate, stages: cancelling, near: add(talker, floor), far: nil)
        // Each library delays what it processes a little (webrtc's noise suppressor 6 ms, speex a
        // frame): the near voice is compared where it comes out.
        let lag = VoiceSignals.latency(of: alone, clean: talker, sampleRate: rate)
        figures.doubleTalkCorrelation = VoiceSignals.correlation(both, talker, where: talking, sampleRate: rate, from: afterConvergence, lag: lag)
        figures.doubleTalkLevel =
            VoiceSignals.speechRMS(both, where: talking, sampleRate: rate, from: afterConvergence)
            - VoiceSignals.speechRMS(alone, where: talking, sampleRate: rate, from: afterConvergence)

        // 3. Steady noise at −35 dBFS: between the words, and the words kept.
        let noisy = add(talker, VoiceSignals.noise(count: length, dBFS: -35, seed: 2))
        let denoised = try process(
            library, rate: rate, stages: VoiceProcessor.Stages(echoCancellation: false, noiseSuppression: true, gainControl: false), near: noisy, far: nil)
        // Between words: where the talker is silent, 30 ms clear of any word (a word's decay, and
        // each library's own delay, are not the noise).
        let gaps = VoiceSignals.silent(talker, sampleRate: rate)
        figures.noiseReduction =
            VoiceSignals.speechRMS(noisy, where: gaps, sampleRate: rate, from: 100) - VoiceSignals.speechRMS(denoised, where: gaps, sampleRate: rate, from: 100)
        figures.wordsKept = VoiceSignals.correlation(
            denoised, talker, where: talking, sampleRate: rate, from: 100, lag: VoiceSignals.latency(of: denoised, clean: talker, sampleRate: rate))

        // 4. Gain control: a quiet talker (−40 dBFS) after 3 s, and a loud one's peaks.
        let gainOnly = VoiceProcessor.Stages(echoCancellation: false, noiseSuppression: false, gainControl: true)
        let quiet = try process(library, rate: rate, stages: gainOnly, near: add(VoiceSignals.scaled(near, toSpeechRMS: -40, sampleRate: rate), floor), far: nil)
        figures.quietTalkerLevel = VoiceSignals.speechRMS(quiet, where: talking, sampleRate: rate, from: 300)
        let peak = near.map { abs($0) }.max() ?? 1
        let loudInput = near.map { $0 / peak * 0.5 }  // peaks at −6 dBFS
        let loud = try process(library, rate: rate, stages: gainOnly, near: loudInput, far: nil)
        figures.loudTalkerPeak = 20 * log10(Double(loud.map { abs($0) }.max() ?? 0) + 1e-12)
        return figures
    }

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
        let figures = try libraries.map { try measure($0, rate: rate, in: dir) }
        say("Voice processing offline at \(rate / 1000) kHz (espeak-ng voices; echo: the far end 40 ms later at −6 dB and a reflection; issue 14):")
        say("  " + "figure".padding(toLength: 44, withPad: " ", startingAt: 0) + libraries.map { $0.rawValue.padding(toLength: 10, withPad: " ", startingAt: 0) }.joined() + "target")
        func row(_ name: String, _ value: (Figures) -> Double, _ format: String, _ target: String) {
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
