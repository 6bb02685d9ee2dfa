package import AudioGraph
public import Foundation
import PrivateSoundServer

/// The voice-processing measurement set-up (issue 14), shared by tests and the benchmark: two
/// espeak-ng voices, the far end (what a call plays) and the near end (the local talker), an
/// acoustic path that turns the far end into echo, steady noise; and the figures measured on
/// what a processor gives back.
public enum VoiceSignals {
    /// The far end's words: about 12 s of one voice.
    public static let farText =
        "The quick brown fox jumps over the lazy dog. A journey of a thousand miles begins with a single step. "
        + "She sells sea shells by the sea shore, and the shells she sells are surely sea shells. "
        + "Every morning the train leaves the station at seven, and every evening it comes back at nine."
    /// The near end's words: another voice, other words.
    public static let nearText =
        "Hello, can you hear me? I am calling about the meeting on Thursday afternoon. "
        + "Please bring the quarterly numbers, the new drawings and a few copies of the contract. "
        + "We will start at three and finish before five, if everybody is on time."
    public static let farVoice = "en-us+m3"
    public static let nearVoice = "en-gb+f3"

    /// `text` spoken by espeak-ng's `voice`, mono float at `sampleRate` (resampled by ffmpeg).
    public static func speech(_ text: String, voice: String, sampleRate: Int, in dir: URL) throws -> [Float] {
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let wav = dir.appendingPathComponent("espeak-\(UUID().uuidString.prefix(6)).wav")
        let raw = dir.appendingPathComponent("espeak-\(UUID().uuidString.prefix(6)).f32")
        defer {
            try? FileManager.default.removeItem(at: wav)
            try? FileManager.default.removeItem(at: raw)
        }
        try runTool("espeak-ng", ["-v", voice, "-s", "160", "-w", wav.path, text], in: dir)
        try runTool("ffmpeg", ["-v", "error", "-y", "-i", wav.path, "-ar", "\(sampleRate)", "-ac", "1", "-f", "f32le", raw.path], in: dir)
        let data = try Data(contentsOf: raw)
        return data.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
    }

    /// Runs `processor` over `near` in its frames, `far` the far end lined up with it (nil:
    /// nothing plays); a last partial frame comes out as silence.
    package static func process(_ processor: VoiceProcessor, near: [Float], far: [Float]?) -> [Float] {
        precondition(far.map { $0.count >= near.count } ?? true, "the far end is shorter than the near end")
        let n = processor.frameLength
        var out = near
        let silent = [Float](repeating: 0, count: near.count)
        (far ?? silent).withUnsafeBufferPointer { f in
            out.withUnsafeMutableBufferPointer { o in
                var start = 0
                while start + n <= o.count {
                    processor.process(near: o.baseAddress! + start, far: far == nil ? nil : f.baseAddress! + start)
                    start += n
                }
                for i in start..<o.count { o[i] = 0 }
            }
        }
        return out
    }

    /// The acoustic path from speaker to microphone: the far end 40 ms later at −6 dB, as the
    /// issue's `module-loopback` set-up, plus a reflection 9 ms after that at −16 dB (a room).
    /// `moves`: the path lengthens (or shortens: negative) by `by` samples at once at sample
    /// `at`, as a loopback or a Bluetooth link does when its buffer runs dry.
    public static func echo(of far: [Float], sampleRate: Int, moves: [(at: Int, by: Int)] = []) -> [Float] {
        let direct = sampleRate * 40 / 1000, reflection = sampleRate * 49 / 1000
        var out = [Float](repeating: 0, count: far.count)
        var moved = 0
        var next = 0
        let moves = moves.sorted { $0.at < $1.at }
        for i in 0..<far.count {
            while next < moves.count && moves[next].at <= i {
                moved += moves[next].by
                next += 1
            }
            var v: Float = 0
            if i >= direct + moved { v += 0.5 * far[i - direct - moved] }
            if i >= reflection + moved { v += 0.158 * far[i - reflection - moved] }
            out[i] = v
        }
        return out
    }

    /// White noise at `dBFS` (RMS), replayable from `seed`.
    public static func noise(count: Int, dBFS: Double, seed: UInt64) -> [Float] {
        var generator = SeededGenerator(seed: seed)
        // Uniform in ±a has an RMS of a/√3.
        let a = Float(pow(10, dBFS / 20) * 3.0.squareRoot())
        return (0..<count).map { _ in Float.random(in: -a...a, using: &generator) }
    }

    /// `x` scaled so that its speech (the 10 ms frames ``speaking(_:sampleRate:)`` marks) has an
    /// RMS of `dBFS`.
    public static func scaled(_ x: [Float], toSpeechRMS dBFS: Double, sampleRate: Int) -> [Float] {
        let level = speechRMS(x, where: speaking(x, sampleRate: sampleRate), sampleRate: sampleRate)
        guard level > -200 else { return x }
        let gain = Float(pow(10, (dBFS - level) / 20))
        return x.map { $0 * gain }
    }

    /// The 10 ms frames of `clean` that carry speech: within 30 dB of its loudest frame.
    public static func speaking(_ clean: [Float], sampleRate: Int) -> [Bool] {
        let frame = sampleRate / 100
        let levels = stride(from: 0, to: clean.count - frame + 1, by: frame).map { SignalAnalysis.rmsDB(clean[$0..<($0 + frame)]) }
        let loudest = levels.max() ?? -200
        return levels.map { $0 > loudest - 30 }
    }

    /// The 10 ms frames of `clean` between its words: 50 dB or more below its loudest frame, and
    /// so are the `margin` frames either side (a word's onset and decay, and a processor's own
    /// delay, are not the noise between words).
    public static func silent(_ clean: [Float], sampleRate: Int, margin: Int = 3) -> [Bool] {
        let frame = sampleRate / 100
        let levels = stride(from: 0, to: clean.count - frame + 1, by: frame).map { SignalAnalysis.rmsDB(clean[$0..<($0 + frame)]) }
        let loudest = levels.max() ?? -200
        let quiet = levels.map { $0 < loudest - 50 }
        return quiet.indices.map { f in (max(0, f - margin)...min(quiet.count - 1, f + margin)).allSatisfy { quiet[$0] } }
    }

    /// The RMS (dBFS) of `x` over the frames `mask` marks, from frame `first` on.
    public static func speechRMS(_ x: [Float], where mask: [Bool], sampleRate: Int, from first: Int = 0) -> Double {
        let frame = sampleRate / 100
        var sum = 0.0, count = 0
        for f in first..<min(mask.count, x.count / frame) where mask[f] {
            for i in (f * frame)..<((f + 1) * frame) { sum += Double(x[i]) * Double(x[i]) }
            count += frame
        }
        return count > 0 ? 10 * log10(max(sum / Double(count), 1e-20)) : -200
    }

    /// Echo return loss enhancement (dB): how much quieter `output` is than `input` over the
    /// frames `mask` marks from frame `first` on.
    public static func erle(input: [Float], output: [Float], where mask: [Bool], sampleRate: Int, from first: Int) -> Double {
        speechRMS(input, where: mask, sampleRate: sampleRate, from: first) - speechRMS(output, where: mask, sampleRate: sampleRate, from: first)
    }

    /// Normalized correlation of `a`, `lag` samples late, with `b` over the frames of `b` that
    /// `mask` marks from frame `first` on.
    public static func correlation(_ a: [Float], _ b: [Float], where mask: [Bool], sampleRate: Int, from first: Int, lag: Int = 0) -> Double {
        let frame = sampleRate / 100
        var ab = 0.0, aa = 0.0, bb = 0.0
        for f in first..<min(mask.count, min(a.count - lag, b.count) / frame) where mask[f] {
            for i in (f * frame)..<((f + 1) * frame) {
                let x = Double(a[i + lag]), y = Double(b[i])
                ab += x * y
                aa += x * x
                bb += y * y
            }
        }
        return aa > 0 && bb > 0 ? ab / (aa * bb).squareRoot() : 0
    }

    /// How many samples later than `clean` its words come out in `output` (a processor's own
    /// delay), searched up to 20 ms over seconds 3 to 5.
    public static func latency(of output: [Float], clean: [Float], sampleRate: Int) -> Int {
        guard clean.count >= sampleRate * 5, output.count >= sampleRate * 5 else { return 0 }
        let probe = Array(clean[(sampleRate * 3)..<(sampleRate * 5)])
        return SignalAnalysis.align(probe, in: Array(output[(sampleRate * 3)...]), maxLag: sampleRate / 50).lag
    }

    /// What ``figures(_:rate:in:)`` measures of a library, the lines 1–4.
    package struct Figures {
        package var erle = 0.0
        package var doubleTalkCorrelation = 0.0
        package var doubleTalkLevel = 0.0
        package var noiseReduction = 0.0
        package var wordsKept = 0.0
        package var quietTalkerLevel = 0.0
        package var loudTalkerPeak = 0.0
        /// Milliseconds of CPU per second of audio, all stages on.
        package var cpu = 0.0
        /// On the server: where the words slipped in the recordings the figures are taken from
        /// (`VoiceUnitCall.lastSlips`, by what was measured).
        package var slips: [String] = []

        package init() {}
    }

    private static func run(_ library: VoiceProcessor.Library, rate: Int, stages: VoiceProcessor.Stages, near: [Float], far: [Float]?) throws -> [Float] {
        guard let processor = VoiceProcessor(library: library, sampleRate: rate, stages: stages) else {
            throw PrivatePulseServer.Failure(description: "\(library) does not take \(rate) Hz")
        }
        return process(processor, near: near, far: far)
    }

    /// The set-up offline at `rate`: far-end speech 40 ms later at −6 dB plus a
    /// reflection, a near talker at −26 dBFS, noise at −35 dBFS, talkers at −40 and −6 dBFS.
    package static func figures(_ library: VoiceProcessor.Library, rate: Int, in dir: URL) throws -> Figures {
        var far = try speech(farText, voice: farVoice, sampleRate: rate, in: dir)
        var near = try speech(nearText, voice: nearVoice, sampleRate: rate, in: dir)
        let length = max(far.count, near.count)
        far += [Float](repeating: 0, count: length - far.count)
        near += [Float](repeating: 0, count: length - near.count)
        far = scaled(far, toSpeechRMS: -20, sampleRate: rate)
        let talker = scaled(near, toSpeechRMS: -26, sampleRate: rate)
        let echo = echo(of: far, sampleRate: rate)
        let floor = noise(count: length, dBFS: -70, seed: 1)
        let add = { (a: [Float], b: [Float]) in zip(a, b).map { $0 + $1 } }
        let cancelling = VoiceProcessor.Stages(echoCancellation: true, noiseSuppression: true, gainControl: false)
        var figures = Figures()
        let afterConvergence = 200  // 2 s of 10 ms frames

        // 1. Far end only: how much of the echo is left.
        let echoOnly = add(echo, floor)
        let cpuBefore = threadCPUTime()
        _ = try run(library, rate: rate, stages: VoiceProcessor.Stages(), near: echoOnly, far: far)
        figures.cpu = (threadCPUTime() - cpuBefore) / (Double(length) / Double(rate)) * 1000
        // Measured with echo cancellation and noise suppression only: gain control would lift
        // what is left (as it should, between a call's words), which is not the echo's loss.
        let echoCancelled = try run(library, rate: rate, stages: cancelling, near: echoOnly, far: far)
        let echoing = speaking(echo, sampleRate: rate)
        figures.erle = erle(input: echoOnly, output: echoCancelled, where: echoing, sampleRate: rate, from: afterConvergence)

        // 2. Double talk: the near talker over the echo, beside the near talker alone.
        let talking = speaking(talker, sampleRate: rate)
        let both = try run(library, rate: rate, stages: cancelling, near: add(add(echo, talker), floor), far: far)
        let alone = try run(library, rate: rate, stages: cancelling, near: add(talker, floor), far: nil)
        // Each library delays what it processes a little (webrtc's noise suppressor 6 ms, speex a
        // frame): the near voice is compared where it comes out.
        let lag = latency(of: alone, clean: talker, sampleRate: rate)
        figures.doubleTalkCorrelation = correlation(both, talker, where: talking, sampleRate: rate, from: afterConvergence, lag: lag)
        figures.doubleTalkLevel =
            speechRMS(both, where: talking, sampleRate: rate, from: afterConvergence)
            - speechRMS(alone, where: talking, sampleRate: rate, from: afterConvergence)

        // 3. Steady noise at −35 dBFS: between the words, and the words kept.
        let noisy = add(talker, noise(count: length, dBFS: -35, seed: 2))
        let denoised = try run(
            library, rate: rate, stages: VoiceProcessor.Stages(echoCancellation: false, noiseSuppression: true, gainControl: false), near: noisy, far: nil)
        // Between words: where the talker is silent, 30 ms clear of any word (a word's decay, and
        // each library's own delay, are not the noise).
        let gaps = silent(talker, sampleRate: rate)
        figures.noiseReduction =
            speechRMS(noisy, where: gaps, sampleRate: rate, from: 100) - speechRMS(denoised, where: gaps, sampleRate: rate, from: 100)
        figures.wordsKept = correlation(
            denoised, talker, where: talking, sampleRate: rate, from: 100, lag: latency(of: denoised, clean: talker, sampleRate: rate))

        // 4. Gain control: a quiet talker (−40 dBFS) after 3 s, and a loud one's peaks.
        let gainOnly = VoiceProcessor.Stages(echoCancellation: false, noiseSuppression: false, gainControl: true)
        let quiet = try run(library, rate: rate, stages: gainOnly, near: add(scaled(near, toSpeechRMS: -40, sampleRate: rate), floor), far: nil)
        figures.quietTalkerLevel = speechRMS(quiet, where: talking, sampleRate: rate, from: 300)
        let peak = near.map { abs($0) }.max() ?? 1
        let loudInput = near.map { $0 / peak * 0.5 }  // peaks at −6 dBFS
        let loud = try run(library, rate: rate, stages: gainOnly, near: loudInput, far: nil)
        figures.loudTalkerPeak = 20 * log10(Double(loud.map { abs($0) }.max() ?? 0) + 1e-12)
        return figures
    }

    /// This thread's CPU time, in seconds.
    private static func threadCPUTime() -> Double {
        var t = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t)
        return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
    }
}
