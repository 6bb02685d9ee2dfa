#if canImport(Glibc)
import Glibc
#endif

/// A wide-band voice signal (32 or 48 kHz) cut into its band below 8 kHz at 16 kHz, for a
/// processor that runs there, and joined again with what lies above, which takes the gain the
/// processing gave the band: webrtc's way with a call above 16 kHz (it cancels its lowest band and
/// applies that band's suppression to the others). A voice's echo and noise that matter are
/// below 8 kHz, and the canceller's cost grows with the rate: speex at 16 kHz costs 0.6× webrtc's
/// 48 kHz, at 48 kHz 1.3× (`openavf-bench --only voice`).
///
/// The band is taken by a linear-phase low-pass (``tapCount`` taps, a Kaiser-windowed sinc: flat
/// to 6.1 kHz, 60 dB down from 7.9 kHz, so that nothing above 8 kHz folds into the band: folded,
/// it would follow the echo path's delay only where that is a whole number of band samples,
/// which a real path's is not) and decimated; the join interpolates the processed band
/// through the same filter and adds the rest of the input (the input, delayed as the band was,
/// less the band unprocessed) times the band's gain. Unprocessed, the join gives the input back
/// exactly, ``delay`` samples later. The band's gain for a frame is its level out over its level
/// in as its top measures it (the second difference: 4–8 kHz counts most, the nearest to what
/// lies above), ramped from the last frame's across the frame on the signal's own time, so the
/// upper band follows the lower without steps (a frame the processor silenced stays silent).
/// Where the processor has held the band 20 dB down or more in all its recent frames with sound
/// (echo or noise alone), what lies above is held 30 dB further down (``join(_:into:)``).
///
/// The processor is taken to give its band frame out one frame after it took it in (speex's
/// preprocessor's overlap), so the upper band waits a frame too: ``delay`` is the filter's and
/// that frame.
///
/// Memory is made in `init`; nothing after allocates, so a real-time thread may use it.
package final class BandSplit: @unchecked Sendable {
    /// The wide rate over the band's (2 or 3).
    package let factor: Int
    /// Wide-band samples in a frame.
    package let frameLength: Int
    /// Band samples in a frame.
    package let bandFrameLength: Int
    /// The low-pass filter's length, a multiple of ``factor``.
    package let tapCount: Int
    /// Wide-band samples a stateless ``decimate(_:into:)`` reads before its frame.
    package var lead: Int { tapCount - 1 }
    /// How much later the joined output is than the input, in wide-band samples: the filter's
    /// delay twice and the processor's frame.
    package var delay: Int { tapCount - 1 + frameLength }

    private let taps: UnsafeMutablePointer<Float>
    /// The interpolator's taps by phase: `phases[r * perPhase + j]` = `factor · taps[r + j · factor]`.
    private let phases: UnsafeMutablePointer<Float>
    private let perPhase: Int
    /// The input: ``lead`` samples, the last frame, the current frame.
    private let input: UnsafeMutablePointer<Float>
    /// The band as taken from the last frame and the current one (before processing).
    private let bandLast: UnsafeMutablePointer<Float>
    private let bandNow: UnsafeMutablePointer<Float>
    /// What the interpolator is given: ``perPhase`` samples of the last frames', then this one's.
    private let toInterpolate: UnsafeMutablePointer<Float>
    /// The band's gain for the frame before last, the last, and (while joining) this one.
    private var gainBeforeLast: Float = 1
    private var gainLast: Float = 1
    /// The band's last two samples in and out, for the gain's measure.
    private var tops: (Float, Float, Float, Float) = (0, 0, 0, 0)
    /// The band's energy out over in, for its last frames with sound in them (a ring).
    private let passed: UnsafeMutablePointer<Float>
    private var passedAt = 0
    private static let passedFrames = 20

    /// A split for `sampleRate` (32 or 48 kHz) in frames of `frameLength` (a multiple of the
    /// factor); nil for another rate.
    package init?(sampleRate: Int, frameLength: Int) {
        guard sampleRate == 32000 || sampleRate == 48000, frameLength % (sampleRate / 16000) == 0 else { return nil }
        factor = sampleRate / 16000
        self.frameLength = frameLength
        bandFrameLength = frameLength / factor
        // 2 ms of taps at either rate: a transition 1.8 kHz wide at 60 dB (Kaiser's estimate).
        perPhase = 32
        tapCount = perPhase * factor
        taps = .allocate(capacity: tapCount)
        let beta = 5.65  // 60 dB
        let cutoff = 7000 / Double(sampleRate)  // of the sampling rate
        let middle = Double(tapCount - 1) / 2
        var sum = 0.0
        var designed = [Double](repeating: 0, count: tapCount)
        for k in 0..<tapCount {
            let x = Double(k) - middle
            let sinc = x == 0 ? 2 * cutoff : sin(2 * .pi * cutoff * x) / (.pi * x)
            let ratio = x / middle
            designed[k] = sinc * Self.besselI0(beta * (1 - ratio * ratio).squareRoot()) / Self.besselI0(beta)
            sum += designed[k]
        }
        for k in 0..<tapCount { taps[k] = Float(designed[k] / sum) }
        phases = .allocate(capacity: tapCount)
        for r in 0..<factor {
            for j in 0..<perPhase { phases[r * perPhase + j] = Float(factor) * taps[r + j * factor] }
        }
        input = .allocate(capacity: tapCount - 1 + 2 * frameLength)
        input.initialize(repeating: 0, count: tapCount - 1 + 2 * frameLength)
        bandLast = .allocate(capacity: bandFrameLength)
        bandLast.initialize(repeating: 0, count: bandFrameLength)
        bandNow = .allocate(capacity: bandFrameLength)
        bandNow.initialize(repeating: 0, count: bandFrameLength)
        passed = .allocate(capacity: Self.passedFrames)
        passed.initialize(repeating: 1, count: Self.passedFrames)
        toInterpolate = .allocate(capacity: perPhase + bandFrameLength)
        toInterpolate.initialize(repeating: 0, count: perPhase + bandFrameLength)
    }

    deinit {
        taps.deallocate()
        phases.deallocate()
        input.deallocate()
        bandLast.deallocate()
        bandNow.deallocate()
        toInterpolate.deallocate()
        passed.deallocate()
    }

    /// The modified Bessel function of the first kind, order 0 (its series), for the window.
    private static func besselI0(_ x: Double) -> Double {
        var sum = 1.0, term = 1.0, k = 1.0
        while term > 1e-12 * sum {
            term *= (x / (2 * k)) * (x / (2 * k))
            sum += term
            k += 1
        }
        return sum
    }

    /// `count` samples of the band (a frame's, ``bandFrameLength``, or more) from ``lead``
    /// samples before them and their span (`samples` holds ``lead`` + `count` × ``factor``):
    /// the same span of the same signal gives the same band whatever came before in calls (the
    /// canceller's reference, read afresh each frame, may move).
    package func decimate(_ samples: UnsafePointer<Float>, count bandCount: Int, into band: UnsafeMutablePointer<Float>) {
        let m = factor, count = tapCount
        for i in 0..<bandCount {
            // The newest sample the output reads, and back from it through the taps.
            let newest = samples + (count - 1 + m * i + m - 1)
            var sum: Float = 0
            for k in 0..<count { sum += taps[k] * newest[-k] }
            band[i] = sum
        }
    }

    /// Takes the next frame of the input (``frameLength`` samples) and gives its band
    /// (``bandFrameLength``) for processing.
    package func split(_ frame: UnsafePointer<Float>, band: UnsafeMutablePointer<Float>) {
        let n = frameLength, kept = tapCount - 1 + n
        input.update(from: input + n, count: kept)
        (input + kept).update(from: frame, count: n)
        bandLast.update(from: bandNow, count: bandFrameLength)
        decimate(UnsafePointer(input + n), count: bandFrameLength, into: bandNow)
        band.update(from: bandNow, count: bandFrameLength)
    }

    /// Joins the processor's band out (``bandFrameLength``: the band of the frame before the
    /// last ``split(_:band:)``'s) with the input above it into `out` (``frameLength``), ``delay``
    /// samples behind the input.
    package func join(_ processed: UnsafePointer<Float>, into out: UnsafeMutablePointer<Float>) {
        let nb = bandFrameLength, n = frameLength, m = factor, p = perPhase
        // The band's gain as its top has it: each side's second difference (4 sin²(ω/2): 3.4 at
        // 6 kHz, 2 at 4, 0.15 at 1), which runs on from the last frame's samples.
        var before: Float = 0, after: Float = 0, bandIn: Float = 0, bandOut: Float = 0
        var (in1, in2, out1, out2) = (tops.0, tops.1, tops.2, tops.3)
        for i in 0..<nb {
            let x = bandLast[i], y = processed[i]
            let dx = x - 2 * in1 + in2, dy = y - 2 * out1 + out2
            before += dx * dx
            after += dy * dy
            bandIn += x * x
            bandOut += y * y
            (in2, in1, out2, out1) = (in1, x, out1, y)
        }
        tops = (in1, in2, out1, out2)
        // Silence in stays as it was (−100 dBFS a sample): no gain is made of nothing.
        let floor = Float(nb) * 1e-10
        var gain = min((after / max(before, floor)).squareRoot(), 32)
        // What the band passed of itself in its recent frames with sound in them (above
        // −50 dBFS). Where the processor held all of them 20 dB down or more, the call's sound
        // was echo (or noise) alone, and what lies above is held down 30 dB more: a fricative's
        // echo is mostly above the band, where the band's own gain (its echo there faint, left
        // as it was) let it through (route change test: 12–21 dB at 3 s after the move, where
        // the band alone was 29). A near voice lifts the band's ratio in its first frame.
        if bandIn >= Float(nb) * 1e-5 {
            passed[passedAt] = bandOut / bandIn
            passedAt = (passedAt + 1) % Self.passedFrames
        }
        var most: Float = 0
        for k in 0..<Self.passedFrames { most = max(most, passed[k]) }
        if most < 0.01 { gain *= 0.03 }
        // The gain on the signal's time: the band's sample `i` stands at `m·i + m − 1` beyond
        // the filter's middle in the input kept (index `lead / 2`), the input's sample `t` at
        // `t`. Each frame's gain is reached at its frame's end, from the one before.
        let middle = Float(tapCount - 1) / 2, span = Float(n)
        let g0 = gainBeforeLast, g1 = gainLast, g2 = gain
        func gainAt(_ position: Float) -> Float {
            let f = (position - middle) / span
            return f >= 0 ? g1 + (g2 - g1) * min(f, 1) : g0 + (g1 - g0) * max(f + 1, 0)
        }
        // What the interpolator adds: the band processed less the gain times the band as it
        // was; the input times the gain adds the rest (and the band again, which cancels).
        toInterpolate.update(from: toInterpolate + nb, count: p)
        let fresh = toInterpolate + p
        for i in 0..<nb { fresh[i] = processed[i] - gainAt(middle + Float(m * i + m - 1)) * bandLast[i] }
        for t in 0..<n {
            // Interpolated: the band's samples at `m·i + m − 1` (the last frames' before 0).
            // The taps that meet one have the phase `(t − m + 1) mod m`.
            let from = t - m + 1
            let r = ((from % m) + m) % m
            let newest = (from - r) / m  // the newest band sample, `newest − j` for tap `r + j·m`
            var sum: Float = 0
            let phase = phases + r * p
            let band = fresh + newest
            for j in 0..<p { sum += phase[j] * band[-j] }
            out[t] = sum + gainAt(Float(t)) * input[t]
        }
        gainBeforeLast = gainLast
        gainLast = gain
    }
}
