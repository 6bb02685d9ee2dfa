import Foundation

/// Measurements on captured signals: frequency, level, gaps, delay, correlation.
public enum SignalAnalysis {
    /// The first index whose magnitude exceeds `threshold`, or `nil`.
    public static func onset(_ x: [Float], threshold: Float = 0.01, from start: Int = 0) -> Int? {
        var i = start
        while i < x.count {
            if abs(x[i]) > threshold { return i }
            i += 1
        }
        return nil
    }

    /// The last index whose magnitude exceeds `threshold`, or `nil`.
    public static func offset(_ x: [Float], threshold: Float = 0.01) -> Int? {
        x.lastIndex { abs($0) > threshold }
    }

    /// The frequency of a steady tone: the median over at least three windows of 100 ms (shorter
    /// for a short tone, down to 20 ms) of the frequency from interpolated upward zero crossings.
    /// A dropout shifts the phase of the window it falls in only, so the tone's pitch is read
    /// whatever the server's timing did; gaps are ``longestGap(_:threshold:)``'s to judge.
    public static func frequency(_ x: ArraySlice<Float>, sampleRate: Double) -> Double {
        let window = min(Int(sampleRate / 10), x.count / 3)
        guard window >= Int(sampleRate / 50) else { return crossingFrequency(x, sampleRate: sampleRate) }
        let each = stride(from: x.startIndex, through: x.endIndex - window, by: window).map {
            crossingFrequency(x[$0..<($0 + window)], sampleRate: sampleRate)
        }.sorted()
        return each[each.count / 2]
    }

    /// The frequency from interpolated upward zero crossings over all of `x`.
    private static func crossingFrequency(_ x: ArraySlice<Float>, sampleRate: Double) -> Double {
        var first: Double?
        var last = 0.0
        var count = 0
        var i = x.startIndex + 1
        while i < x.endIndex {
            let a = x[i - 1], b = x[i]
            if a < 0 && b >= 0 {
                let t = Double(i - 1) + Double(-a / (b - a))
                if first == nil { first = t }
                last = t
                count += 1
            }
            i += 1
        }
        guard let first, count > 1 else { return 0 }
        return Double(count - 1) / ((last - first) / sampleRate)
    }

    /// RMS level in dBFS (−160 for silence).
    public static func rmsDB(_ x: ArraySlice<Float>) -> Double {
        guard !x.isEmpty else { return -160 }
        var sum = 0.0
        for v in x { sum += Double(v) * Double(v) }
        let rms = (sum / Double(x.count)).squareRoot()
        return rms > 0 ? max(-160, 20 * log10(rms)) : -160
    }

    /// The level of the `frequency` component of `x` in dBFS RMS (a sine's RMS level; −160 for
    /// none), from one DFT term: tones with whole periods in `x` do not leak into each other.
    public static func toneDB(_ x: ArraySlice<Float>, frequency: Double, sampleRate: Double) -> Double {
        guard !x.isEmpty else { return -160 }
        var re = 0.0, im = 0.0
        for (n, sample) in x.enumerated() {
            let phase = 2 * Double.pi * frequency * Double(n) / sampleRate
            re += Double(sample) * cos(phase)
            im -= Double(sample) * sin(phase)
        }
        let rms = 2 * (re * re + im * im).squareRoot() / Double(x.count) / 2.0.squareRoot()
        return rms > 0 ? max(-160, 20 * log10(rms)) : -160
    }

    /// The median of ``toneDB(_:frequency:sampleRate:)`` (or of ``rmsDB(_:)`` for a `nil`
    /// frequency) over consecutive windows of `window` samples of `x`: a gap in one window (a
    /// stream that ran dry on a loaded machine) does not move it.
    public static func medianDB(_ x: ArraySlice<Float>, window: Int, frequency: Double? = nil, sampleRate: Double = 48000) -> Double {
        let levels = stride(from: x.startIndex, through: x.endIndex - window, by: window).map { start in
            let part = x[start..<(start + window)]
            return frequency.map { toneDB(part, frequency: $0, sampleRate: sampleRate) } ?? rmsDB(part)
        }.sorted()
        return levels.isEmpty ? -160 : levels[levels.count / 2]
    }

    /// The longest run of samples with magnitude below `threshold`, in samples.
    public static func longestGap(_ x: ArraySlice<Float>, threshold: Float) -> Int {
        var longest = 0
        var run = 0
        for v in x {
            if abs(v) < threshold {
                run += 1
                longest = max(longest, run)
            } else {
                run = 0
            }
        }
        return longest
    }

    /// Normalized correlation of `a` and `b` (same length).
    public static func correlation(_ a: ArraySlice<Float>, _ b: ArraySlice<Float>) -> Double {
        let n = min(a.count, b.count)
        var ab = 0.0, aa = 0.0, bb = 0.0
        var i = a.startIndex, j = b.startIndex
        for _ in 0..<n {
            let x = Double(a[i]), y = Double(b[j])
            ab += x * y
            aa += x * x
            bb += y * y
            i += 1
            j += 1
        }
        guard aa > 0, bb > 0 else { return 0 }
        return ab / (aa * bb).squareRoot()
    }

    /// The lag (in samples, ≥ 0) at which `reference` best matches inside `signal`, searched over
    /// `0..<maxLag` with a coarse-to-fine scan; and the normalized correlation there.
    public static func align(_ reference: [Float], in signal: [Float], maxLag: Int) -> (lag: Int, correlation: Double) {
        let n = reference.count
        guard signal.count >= n else { return (0, 0) }
        let limit = min(maxLag, signal.count - n)
        func score(_ lag: Int, step: Int) -> Double {
            var ab = 0.0, bb = 0.0
            var i = 0
            while i < n {
                let y = Double(signal[lag + i])
                ab += Double(reference[i]) * y
                bb += y * y
                i += step
            }
            return bb > 0 ? ab / bb.squareRoot() : 0
        }
        var best = 0
        var bestScore = -Double.infinity
        var lag = 0
        while lag <= limit {
            let s = score(lag, step: 8)
            if s > bestScore { (best, bestScore) = (lag, s) }
            lag += 4
        }
        let lo = max(0, best - 8), hi = min(limit, best + 8)
        bestScore = -Double.infinity
        for l in lo...hi {
            let s = score(l, step: 1)
            if s > bestScore { (best, bestScore) = (l, s) }
        }
        return (best, correlation(reference[...], signal[best..<(best + n)]))
    }

    /// Where `piece` best matches in `signal` within `reach` samples either side of `position`
    /// (the window kept inside `signal`): the position found, and the normalized correlation
    /// there; nil where the window is shorter than the piece. For a piece expected at a known
    /// place that may have slipped (a recording that lost or gained samples, a delay that moved).
    public static func locate(_ piece: [Float], in signal: [Float], around position: Int, within reach: Int) -> (position: Int, correlation: Double)? {
        let from = max(0, position - reach), to = min(signal.count, position + piece.count + reach)
        guard to - from >= piece.count else { return nil }
        let found = align(piece, in: Array(signal[from..<to]), maxLag: to - from - piece.count)
        return (from + found.lag, found.correlation)
    }

    /// A sine of `frequency` Hz, `seconds` long, at `amplitude`.
    public static func sine(frequency: Double, sampleRate: Double, seconds: Double, amplitude: Float = 1) -> [Float] {
        let n = Int(seconds * sampleRate)
        return (0..<n).map { amplitude * Float(sin(2 * Double.pi * frequency * Double($0) / sampleRate)) }
    }

    /// A linear chirp from `f0` to `f1` Hz with a slow amplitude wobble: a signal whose
    /// autocorrelation has one clear peak, for measuring delay and fidelity.
    public static func chirp(from f0: Double, to f1: Double, sampleRate: Double, seconds: Double, amplitude: Float = 0.5) -> [Float] {
        let n = Int(seconds * sampleRate)
        let k = (f1 - f0) / seconds
        return (0..<n).map { i in
            let t = Double(i) / sampleRate
            let wobble = 0.75 + 0.25 * sin(2 * Double.pi * 3 * t)
            return amplitude * Float(wobble * sin(2 * Double.pi * (f0 * t + 0.5 * k * t * t)))
        }
    }
}
