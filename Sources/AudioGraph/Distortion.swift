#if canImport(Glibc)
import Glibc
#endif

/// The chain of Apple's `AUDistortion`, in its parameters' order, each stage mixed with what
/// reached it: a delay with decaying feedback, decimation and bit rounding, a polynomial
/// waveshaper, a ring modulator of two oscillators, a soft clipper with gain, and a final mix
/// with the dry input.
///
/// Apple does not publish its algorithm; this is the plain reading of the parameters:
/// - Delay: `delay` ms (at least one frame), each echo `1 / (1 + decay)` of the one before
///   (decay 1 halves it, a 6 dB fall per echo); the echoes are the wet signal.
/// - Decimation: a sample-and-hold at `1 − 0.95 × decimation` of the rate (100 % holds each
///   sample 20 frames); rounding quantizes to `24 − 22 × rounding` bits (none at 0 %).
/// - Polynomial: `linear·x + squared·x² + cubic·x³`, the squared term through a 10 Hz DC
///   blocker (x² of a tone is half DC).
/// - Ring modulator: the input times `(1 − balance)·sin(2π f1 t) + balance·sin(2π f2 t)`.
/// - Soft clip: `tanh(gain·x)`, which never leaves −1…1.
///
/// Memory is made in `init`; ``process(_:channels:count:settings:)`` allocates nothing and takes no
/// lock, so a render thread may call it. One thread processes at a time.
package final class Distortion: @unchecked Sendable {
    /// The parameters in Apple's units (ms, percent, Hz, dB), as `AUDistortion` takes them.
    package struct Settings: Sendable, Equatable {
        package var delay: Float = 0.1
        package var decay: Float = 1
        package var delayMix: Float = 50
        package var decimation: Float = 50
        package var rounding: Float = 0
        package var decimationMix: Float = 50
        package var linearTerm: Float = 1
        package var squaredTerm: Float = 0
        package var cubicTerm: Float = 0
        package var polynomialMix: Float = 50
        package var ringModFrequency1: Float = 100
        package var ringModFrequency2: Float = 100
        package var ringModBalance: Float = 50
        package var ringModMix: Float = 0
        package var softClipGain: Float = -6
        package var finalMix: Float = 50

        package init() {}
    }

    /// The longest delay, in seconds.
    package static let maximumDelay = 0.5

    package let channels: Int
    private let sampleRate: Double
    private let lineLength: Int
    /// Per channel: the delay line, its write position, the held sample and the hold phase, the
    /// DC blocker's last input and output.
    private let lines: UnsafeMutablePointer<Float>
    private let state: UnsafeMutablePointer<ChannelState>
    /// The ring modulator's oscillator phases (radians), shared by the channels.
    private var phase1 = 0.0, phase2 = 0.0

    private struct ChannelState {
        var write = 0
        var held: Float = 0
        var holdPhase: Float = 1
        var dcIn: Float = 0
        var dcOut: Float = 0
    }

    package init(channels: Int, sampleRate: Double) {
        self.channels = max(channels, 1)
        self.sampleRate = sampleRate
        lineLength = Int(Self.maximumDelay * sampleRate) + 4
        lines = .allocate(capacity: lineLength * self.channels)
        lines.initialize(repeating: 0, count: lineLength * self.channels)
        state = .allocate(capacity: self.channels)
        state.initialize(repeating: ChannelState(), count: self.channels)
    }

    deinit {
        lines.deallocate()
        state.deallocate()
    }

    /// `wet` mixed into `dry` by `amount` (0…1): exactly `dry` at 0 and exactly `wet` at 1.
    @inline(__always)
    private static func mix(_ dry: Float, _ wet: Float, _ amount: Float) -> Float { dry * (1 - amount) + wet * amount }

    /// Forgets past audio: the delay lines, the held samples, the oscillators' phases.
    package func reset() {
        lines.update(repeating: 0, count: lineLength * channels)
        state.update(repeating: ChannelState(), count: channels)
        phase1 = 0
        phase2 = 0
    }

    /// Processes `count` frames in place, channel `c` at `channel(c)`, for `channels` channels
    /// (at most the ``channels`` it was made for).
    package func process(_ channel: (Int) -> UnsafeMutablePointer<Float>, channels used: Int, count: Int, settings s: Settings) {
        let rate = Float(sampleRate)
        let delayFrames = min(max(s.delay / 1000 * rate, 1), Float(lineLength - 2))
        let whole = Int(delayFrames), fraction = delayFrames - Float(whole)
        let feedback = 1 / (1 + max(s.decay, 0))
        let delayMix = s.delayMix / 100
        let holdStep = 1 - 0.95 * min(max(s.decimation / 100, 0), 1)
        let quantize = s.rounding > 0
        let steps = Float(pow(2, Double(23 - 22 * min(s.rounding / 100, 1))))
        let decimationMix = s.decimationMix / 100
        let polynomialMix = s.polynomialMix / 100
        // One-pole DC blocker at 10 Hz for the squared term.
        let dcPole = Float(exp(-2 * Double.pi * 10 / sampleRate))
        let ringMix = s.ringModMix / 100
        let balance = min(max(s.ringModBalance / 100, 0), 1)
        let increment1 = 2 * Double.pi * Double(s.ringModFrequency1) / sampleRate
        let increment2 = 2 * Double.pi * Double(s.ringModFrequency2) / sampleRate
        let ringing = ringMix > 0
        let gain = Float(pow(10, Double(s.softClipGain) / 20))
        let finalMix = s.finalMix / 100
        for c in 0..<min(used, channels) {
            let x = channel(c)
            let line = lines + c * lineLength
            var st = state[c]
            var p1 = phase1, p2 = phase2
            for i in 0..<count {
                let dry = x[i]
                // Delay: the echo train of `dry`, each echo `feedback` times the last.
                var r0 = st.write - whole, r1 = r0 - 1
                if r0 < 0 { r0 += lineLength }
                if r1 < 0 { r1 += lineLength }
                let echo = line[r0] + (line[r1] - line[r0]) * fraction
                var into = dry + feedback * echo
                if abs(into) < 1e-30 { into = 0 }
                line[st.write] = into
                st.write += 1
                if st.write == lineLength { st.write = 0 }
                var y = Self.mix(dry, echo, delayMix)
                // Decimation: sample and hold, then rounding to fewer bits.
                st.holdPhase += holdStep
                if st.holdPhase >= 1 {
                    st.holdPhase -= 1
                    st.held = y
                }
                var crushed = st.held
                if quantize { crushed = (crushed * steps).rounded() / steps }
                y = Self.mix(y, crushed, decimationMix)
                // Polynomial waveshaper.
                let squared = y * y
                st.dcOut = squared - st.dcIn + dcPole * st.dcOut
                st.dcIn = squared
                if abs(st.dcOut) < 1e-30 { st.dcOut = 0 }
                let shaped = s.linearTerm * y + s.squaredTerm * st.dcOut + s.cubicTerm * y * y * y
                y = Self.mix(y, shaped, polynomialMix)
                // Ring modulator.
                if ringing {
                    let carrier = Float((1 - Double(balance)) * sin(p1) + Double(balance) * sin(p2))
                    y = Self.mix(y, y * carrier, ringMix)
                }
                p1 += increment1
                p2 += increment2
                // Soft clip, then the final mix with the dry input.
                let clipped = tanhf(gain * y)
                x[i] = Self.mix(dry, clipped, finalMix)
            }
            state[c] = st
        }
        phase1 = (phase1 + increment1 * Double(count)).truncatingRemainder(dividingBy: 2 * Double.pi)
        phase2 = (phase2 + increment2 * Double(count)).truncatingRemainder(dividingBy: 2 * Double.pi)
    }
}
