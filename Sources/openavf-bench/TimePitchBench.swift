import AVFAudio
import AudioTestSupport
import CSoundTouch
import Foundation

/// The quality of time-pitch processing, measured against what the signal should have become:
/// the shipped `AVAudioUnitTimePitch` (libsonic stretches, then the windowed-sinc resampler shifts
/// the pitch) beside SoundTouch (`libsoundtouch-dev`) on music and speech, at tempo 0.5× and 2×
/// with the pitch kept and at ±1200 cents with the duration kept.
///
/// The reference is exact and needs no resampler. Played `p` times as fast, the original has at
/// each moment the spectrum of a window `p` times as long: the reference spectrum of the output's
/// frame at time t is the original's around t·rate, over a window of N·p samples whose first N/2
/// bins are the output's N/2 bins (an octave up loses what would pass Nyquist; an octave down has
/// nothing above half of it). Three figures per run:
/// - spectral error: the mean absolute difference in dB between the output's short-time amplitude
///   spectra and the reference's, over the frames and bins where either is above 60 dB under the
///   reference's loudest, after the output is aligned on the expected envelope;
/// - pitch error: the median of |cents| between each aligned frame's fundamental and the
///   original's times the pitch factor, every 20 ms where both are voiced (music: its steady
///   solo tone; speech: every voiced frame);
/// - duration error: the output's sounding length (first to last millisecond within 40 dB of its
///   loudest) against the original's divided by the rate, in percent.
enum TimePitchBench {
    struct Operation {
        let name: String
        let rate: Double
        let cents: Double
        var pitch: Double { pow(2, cents / 1200) }
    }

    static let operations = [
        Operation(name: "tempo 0.5×", rate: 0.5, cents: 0), Operation(name: "tempo 2×", rate: 2, cents: 0),
        Operation(name: "pitch +1200 ¢", rate: 1, cents: 1200), Operation(name: "pitch −1200 ¢", rate: 1, cents: -1200),
    ]

    struct Signal {
        let name: String
        let samples: [Float]
        let sampleRate: Double
        /// Where in the original the fundamental is measured (seconds).
        let pitchSpan: ClosedRange<Double>
    }

    struct Score {
        let spectralDB: Double
        let pitchCents: Double?
        let durationPercent: Double
    }

    /// 4 s of mono 48 kHz music, the same every run: a steady solo A3 (pitch measured in
    /// 0.35–1.05 s), two chords, an arpeggio over a bass, four noise-burst drum hits, 0.5 s of silence.
    static func music() -> Signal {
        let fs = 48000.0
        var x = [Float](repeating: 0, count: Int(4 * fs))
        func note(_ start: Double, _ length: Double, _ frequency: Double, _ amplitude: Double, decay: Double = .infinity) {
            for (h, weight) in [1, 0.4, 0.25, 0.12, 0.06].enumerated() where Double(h + 1) * frequency < fs / 2 {
                let w = 2 * Double.pi * frequency * Double(h + 1) / fs
                for i in 0..<Int(length * fs) {
                    let t = Double(i) / fs
                    let envelope = min(t / 0.01, 1) * min((length - t) / 0.03, 1) * exp(-t / decay)
                    x[Int(start * fs) + i] += Float(amplitude * weight * envelope * sin(w * Double(i)))
                }
            }
        }
        note(0.1, 1.0, 220, 0.3)
        for f in [261.63, 329.63, 392.0] { note(1.2, 0.5, f, 0.12, decay: 1) }
        for f in [349.23, 440.0, 523.25] { note(1.7, 0.5, f, 0.12, decay: 1) }
        note(2.2, 1.3, 110, 0.2, decay: 1.5)
        for (k, f) in [440.0, 523.25, 659.26, 880, 659.26, 523.25, 440, 329.63].enumerated() {
            note(2.2 + 0.15 * Double(k), 0.15, f, 0.15, decay: 0.2)
        }
        var random = SeededGenerator(seed: 1200)
        for start in [1.2, 1.7, 2.2, 2.8] {
            for i in 0..<Int(0.15 * fs) {
                x[Int(start * fs) + i] += Float(0.3 * exp(-Double(i) / (0.03 * fs)) * Double.random(in: -1...1, using: &random))
            }
        }
        return Signal(name: "music", samples: x, sampleRate: fs, pitchSpan: 0.35...1.05)
    }

    /// A sentence from espeak-ng (mono 22.05 kHz), its pitch measured wherever it is voiced.
    static func speech(in dir: URL) throws -> Signal {
        let url = dir.appendingPathComponent("speech.wav")
        try runTool("espeak-ng", ["-w", url.path, "Time and pitch, measured: the quick brown fox jumps over the lazy dog."], in: dir)
        let file = try AVAudioFile(forReading: url)
        guard let buffer = AVAudioPCMBuffer(pcmFormat: file.processingFormat, frameCapacity: AVAudioFrameCount(file.length)) else {
            throw BenchError("no buffer for the speech")
        }
        try file.read(into: buffer)
        let x = Array(UnsafeBufferPointer(start: buffer.floatChannelData![0], count: Int(buffer.frameLength)))
        let seconds = Double(x.count) / file.processingFormat.sampleRate
        return Signal(name: "speech", samples: x, sampleRate: file.processingFormat.sampleRate, pitchSpan: 0...seconds)
    }

    /// `x` through `AVAudioUnitTimePitch` in an offline engine (player → time pitch → main mixer),
    /// rendered in 512-frame slices as a device would pull them, one second past the expected end.
    /// In stereo, both channels `x`, the left returned.
    static func shipped(_ x: [Float], sampleRate: Double, _ op: Operation) throws -> [Float] {
        let format = AVAudioFormat(standardFormatWithSampleRate: sampleRate, channels: 2)!
        let engine = AVAudioEngine()
        try engine.enableManualRenderingMode(.offline, format: format, maximumFrameCount: 512)
        let player = AVAudioPlayerNode(), unit = AVAudioUnitTimePitch()
        unit.rate = Float(op.rate)
        unit.pitch = Float(op.cents)
        engine.attach(player)
        engine.attach(unit)
        engine.connect(player, to: unit, format: format)
        engine.connect(unit, to: engine.mainMixerNode, format: format)
        let input = AVAudioPCMBuffer(pcmFormat: format, frameCapacity: AVAudioFrameCount(x.count))!
        input.frameLength = input.frameCapacity
        for c in 0..<2 { input.floatChannelData![c].update(from: x, count: x.count) }
        player.scheduleBuffer(input, at: nil)
        try engine.start()
        player.play()
        let slice = AVAudioPCMBuffer(pcmFormat: format, frameCapacity: 512)!
        var y: [Float] = []
        let total = Int(Double(x.count) / op.rate + sampleRate)
        while y.count < total {
            guard try engine.renderOffline(512, to: slice) == .success else { throw BenchError("renderOffline failed") }
            y += UnsafeBufferPointer(start: slice.floatChannelData![0], count: Int(slice.frameLength))
        }
        engine.stop()
        return y
    }

    /// `x` through SoundTouch at its default settings, fed in 512-frame pieces, then flushed.
    static func soundTouch(_ x: [Float], sampleRate: Double, _ op: Operation) throws -> [Float] {
        guard let st = soundtouch_createInstance() else { throw BenchError("soundtouch_createInstance failed") }
        defer { soundtouch_destroyInstance(st) }
        _ = soundtouch_setSampleRate(st, UInt32(sampleRate))
        _ = soundtouch_setChannels(st, 1)
        soundtouch_setTempo(st, Float(op.rate))
        soundtouch_setPitchSemiTones(st, Float(op.cents / 100))
        var y: [Float] = []
        var piece = [Float](repeating: 0, count: 512)
        func drain() {
            while case let n = Int(soundtouch_receiveSamples(st, &piece, 512)), n > 0 { y += piece[0..<n] }
        }
        for start in stride(from: 0, to: x.count, by: 512) {
            _ = x[start..<min(start + 512, x.count)].withUnsafeBufferPointer { soundtouch_putSamples(st, $0.baseAddress, UInt32($0.count)) }
            drain()
        }
        _ = soundtouch_flush(st)
        drain()
        return y
    }

    /// `x` played `factor` times as fast (pitch and speed together), resampled by ffmpeg's soxr
    /// at its highest precision: audio whose every frame is the reference, to show the metric's floor.
    static func varispeed(_ x: [Float], sampleRate: Double, factor: Double, in dir: URL) throws -> [Float] {
        let input = dir.appendingPathComponent("varispeed-in.f32"), output = dir.appendingPathComponent("varispeed-out.f32")
        try x.withUnsafeBytes { try Data($0).write(to: input) }
        try runTool("ffmpeg", ["-v", "error", "-y", "-f", "f32le", "-ar", String(Int(sampleRate * factor)), "-ac", "1", "-i", input.path,
                               "-af", "aresample=\(Int(sampleRate)):resampler=soxr:precision=28", "-f", "f32le", output.path], in: dir)
        return try Data(contentsOf: output).withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
    }

    /// Scores `y`, the output of `op` on `signal`, against the exact reference (see the type's doc).
    static func score(_ y: [Float], _ signal: Signal, _ op: Operation) -> Score {
        let x = signal.samples, fs = signal.sampleRate, r = op.rate, p = op.pitch
        // Align: the lag (ms) at which y's envelope best matches the original's stretched by 1/rate.
        let ms = Int(fs / 1000)
        func envelope(_ s: [Float]) -> [Double] {
            (0..<s.count / ms).map { b in (s[b * ms..<(b + 1) * ms].reduce(0.0) { $0 + Double($1 * $1) } / Double(ms)).squareRoot() }
        }
        let ex = envelope(x), ey = envelope(y)
        let expected = (0..<Int(Double(ex.count) / r)).map { ex[min(Int(Double($0) * r), ex.count - 1)] }
        func match(_ lag: Int) -> Double {
            var dot = 0.0, yy = 1e-12
            for (j, e) in expected.enumerated() where j + lag >= 0 && j + lag < ey.count {
                dot += e * ey[j + lag]
                yy += ey[j + lag] * ey[j + lag]
            }
            return dot / yy.squareRoot()
        }
        let lag = (-50...400).map { ($0, match($0)) }.max { $0.1 < $1.1 }!.0 * ms

        // Duration: first to last millisecond within 40 dB of the loudest.
        func sounding(_ e: [Double]) -> Double {
            let floor = (e.max() ?? 0) * 0.01
            guard let first = e.firstIndex(where: { $0 > floor }), let last = e.lastIndex(where: { $0 > floor }) else { return 0 }
            return Double(last - first + 1)
        }
        let durationPercent = 100 * (sounding(ey) / (sounding(ex) / r) - 1)

        // Spectral error over frames of N ≈ 43 ms, hop N/4.
        let n = 1 << Int((log2(0.043 * fs)).rounded()), hop = n / 4, refLength = Int(Double(n) * p)
        var pairs: [([Double], [Double])] = []
        var c = max(lag, n / 2)
        while c + n / 2 <= y.count, Double(c - lag) * r < Double(x.count) {
            var ref = Spectrum.amplitudes(x, center: Int(Double(c - lag) * r), length: refLength)
            ref = Array(ref.prefix(n / 2)) + [Double](repeating: 0, count: max(0, n / 2 - ref.count))
            pairs.append((Spectrum.amplitudes(y, center: c, length: n).map(decibels), ref.map(decibels)))
            c += hop
        }
        let floor = (pairs.flatMap { $0.1 }.max() ?? 0) - 60
        var total = 0.0, cells = 0
        for (out, ref) in pairs {
            for k in 0..<n / 2 where out[k] > floor || ref[k] > floor {
                total += abs(max(out[k], floor) - max(ref[k], floor))
                cells += 1
            }
        }

        // Pitch, every 20 ms: frames of at least three periods of 40 Hz, the original's covering
        // what the output's does (rate times as long).
        let yLength = 1 << Int(ceil(log2(3 * fs / 40 / min(1, r)))), xLength = Int(Double(yLength) * r)
        var cents: [Double] = []
        let first = Int(signal.pitchSpan.lowerBound * fs) + xLength / 2, last = Int(signal.pitchSpan.upperBound * fs) - xLength / 2
        for cx in stride(from: first, through: last, by: 20 * ms) {
            let cy = lag + Int(Double(cx) / r)
            guard let fx = Spectrum.fundamental(x, start: cx - xLength / 2, length: xLength, sampleRate: fs),
                let fy = Spectrum.fundamental(y, start: cy - yLength / 2, length: yLength, sampleRate: fs)
            else { continue }
            cents.append(abs(1200 * log2(fy / (fx * p))))
        }
        return Score(spectralDB: cells > 0 ? total / Double(cells) : .nan, pitchCents: median(cents), durationPercent: durationPercent)
    }

    private static func decibels(_ a: Double) -> Double { 20 * log10(a + 1e-12) }

    private static func median(_ v: [Double]) -> Double? { v.isEmpty ? nil : v.sorted()[v.count / 2] }

    /// Runs every signal and operation through both libraries and prints the table; returns failures.
    static func run(say: (String) -> Void) -> [String] {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("openavf-timepitch-bench-\(getpid())")
        defer { try? FileManager.default.removeItem(at: dir) }
        var failures: [String] = []
        let signals: [Signal]
        do {
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            signals = [music(), try speech(in: dir)]
        } catch {
            return ["timepitch: \(error)"]
        }
        let version = String(cString: soundtouch_getVersionString())
        say("Time-pitch quality against the exact reference (the original's spectrum over time, stretched by the rate, its frequencies scaled by")
        say("the pitch): AVAudioUnitTimePitch as shipped (libsonic stretch + resampler, 512-frame slices) beside SoundTouch \(version) (defaults);")
        say("spectral error = mean |dB| over STFT cells within 60 dB of the reference's peak; pitch = median |cents| of frame fundamentals;")
        say("duration = sounding length against the expected; better = lower spectral error by ≥ 0.1 dB, pitch and duration no worse by 5 ¢ / 1 %:")
        say("  signal   operation        library      spectral dB   pitch ¢   duration %   better")
        for signal in signals {
            for op in operations {
                do {
                    let ours = score(try shipped(signal.samples, sampleRate: signal.sampleRate, op), signal, op)
                    let theirs = score(try soundTouch(signal.samples, sampleRate: signal.sampleRate, op), signal, op)
                    func beats(_ a: Score, _ b: Score) -> Bool {
                        a.spectralDB <= b.spectralDB - 0.1 && (a.pitchCents ?? .infinity) <= (b.pitchCents ?? .infinity) + 5
                            && abs(a.durationPercent) <= abs(b.durationPercent) + 1
                    }
                    let better = beats(ours, theirs) ? "libsonic" : beats(theirs, ours) ? "SoundTouch" : "neither"
                    for (library, s) in [("libsonic", ours), ("SoundTouch", theirs)] {
                        let pitch = s.pitchCents.map { String(format: "%7.1f", $0) } ?? "    n/a"
                        say(String(format: "  %@   %@   %@   %11.2f   %@   %+10.1f   %@", signal.name.padding(toLength: 6, withPad: " ", startingAt: 0),
                                   op.name.padding(toLength: 14, withPad: " ", startingAt: 0), library.padding(toLength: 10, withPad: " ", startingAt: 0),
                                   s.spectralDB, pitch, s.durationPercent, library == "libsonic" ? better : ""))
                    }
                } catch {
                    failures.append("timepitch, \(signal.name), \(op.name): \(error)")
                }
            }
        }
        // The floor: the exact reference itself, made audio.
        var floors: [String] = []
        for signal in signals {
            for cents in [1200.0, -1200] {
                let op = Operation(name: "", rate: pow(2, cents / 1200), cents: cents)
                do {
                    let s = score(try varispeed(signal.samples, sampleRate: signal.sampleRate, factor: op.rate, in: dir), signal, op)
                    floors.append(
                        String(format: "%@ ×%g %.2f dB, %.1f ¢, %+.1f %%", signal.name, op.rate, s.spectralDB, s.pitchCents ?? .nan, s.durationPercent))
                } catch {
                    failures.append("timepitch, \(signal.name), varispeed ×\(op.rate): \(error)")
                }
            }
        }
        say("  The metric's floor, the original played ×2 / ×0.5 by ffmpeg's soxr (speed and pitch together, the exact reference as audio):")
        say("  " + floors.joined(separator: "; "))
        return failures
    }
}
