#if canImport(Glibc)
import Glibc
#endif

/// The filter shapes of an equalizer band, in the order of Apple's `AUNBandEQ` filter types.
package enum FilterShape: Int, Sendable, CaseIterable {
    case parametric = 0, lowPass, highPass, resonantLowPass, resonantHighPass, bandPass, bandStop
    case lowShelf, highShelf, resonantLowShelf, resonantHighShelf
}

/// What a band is set to: its shape, centre or corner frequency (Hz), gain (dB, for the shapes that
/// have one) and bandwidth (octaves).
package struct BandSettings: Sendable, Equatable {
    package var shape: FilterShape
    package var frequency: Double
    package var gain: Double
    package var bandwidth: Double
    package init(shape: FilterShape, frequency: Double, gain: Double, bandwidth: Double) {
        self.shape = shape
        self.frequency = frequency
        self.gain = gain
        self.bandwidth = bandwidth
    }
}

/// A second-order section's coefficients, normalised so that a0 = 1.
///
/// The shapes are the audio-EQ cookbook's (R. Bristow-Johnson): a peaking band for parametric,
/// Butterworth (Q = 1/√2) low and high pass, resonant passes and shelves whose resonance comes
/// from the bandwidth, and plain shelves of slope 1.
package struct BiquadCoefficients: Sendable, Equatable {
    package var b0 = 1.0, b1 = 0.0, b2 = 0.0, a1 = 0.0, a2 = 0.0

    package init() {}

    package init(_ s: BandSettings, sampleRate: Double) {
        let nyquist = sampleRate / 2
        let f = min(max(s.frequency, 1), nyquist * 0.999)
        let w0 = 2 * Double.pi * f / sampleRate
        let cw = cos(w0), sw = sin(w0)
        let octaves = min(max(s.bandwidth, 0.01), 8)
        // Bandwidth in octaves between the −3 dB points (the cookbook's digital form).
        let alphaBW = sw * sinh(log(2) / 2 * octaves * w0 / sw)
        let alphaButterworth = sw / (2 * 0.5.squareRoot())
        let a = pow(10, s.gain / 40)
        var b0 = 1.0, b1 = 0.0, b2 = 0.0, a0 = 1.0, a1 = 0.0, a2 = 0.0
        switch s.shape {
        case .parametric:
            b0 = 1 + alphaBW * a; b1 = -2 * cw; b2 = 1 - alphaBW * a
            a0 = 1 + alphaBW / a; a1 = -2 * cw; a2 = 1 - alphaBW / a
        case .lowPass, .resonantLowPass:
            let alpha = s.shape == .lowPass ? alphaButterworth : alphaBW
            b0 = (1 - cw) / 2; b1 = 1 - cw; b2 = (1 - cw) / 2
            a0 = 1 + alpha; a1 = -2 * cw; a2 = 1 - alpha
        case .highPass, .resonantHighPass:
            let alpha = s.shape == .highPass ? alphaButterworth : alphaBW
            b0 = (1 + cw) / 2; b1 = -(1 + cw); b2 = (1 + cw) / 2
            a0 = 1 + alpha; a1 = -2 * cw; a2 = 1 - alpha
        case .bandPass:
            b0 = alphaBW; b1 = 0; b2 = -alphaBW
            a0 = 1 + alphaBW; a1 = -2 * cw; a2 = 1 - alphaBW
        case .bandStop:
            b0 = 1; b1 = -2 * cw; b2 = 1
            a0 = 1 + alphaBW; a1 = -2 * cw; a2 = 1 - alphaBW
        case .lowShelf, .resonantLowShelf, .highShelf, .resonantHighShelf:
            // Slope 1 for the plain shelves; the resonant ones take their Q from the bandwidth.
            let alpha = (s.shape == .lowShelf || s.shape == .highShelf) ? sw / 2 * 2.0.squareRoot() : alphaBW
            let k = 2 * a.squareRoot() * alpha
            if s.shape == .lowShelf || s.shape == .resonantLowShelf {
                b0 = a * ((a + 1) - (a - 1) * cw + k); b1 = 2 * a * ((a - 1) - (a + 1) * cw); b2 = a * ((a + 1) - (a - 1) * cw - k)
                a0 = (a + 1) + (a - 1) * cw + k; a1 = -2 * ((a - 1) + (a + 1) * cw); a2 = (a + 1) + (a - 1) * cw - k
            } else {
                b0 = a * ((a + 1) + (a - 1) * cw + k); b1 = -2 * a * ((a - 1) + (a + 1) * cw); b2 = a * ((a + 1) + (a - 1) * cw - k)
                a0 = (a + 1) - (a - 1) * cw + k; a1 = 2 * ((a - 1) - (a + 1) * cw); a2 = (a + 1) - (a - 1) * cw - k
            }
        }
        self.b0 = b0 / a0; self.b1 = b1 / a0; self.b2 = b2 / a0; self.a1 = a1 / a0; self.a2 = a2 / a0
    }

    /// The magnitude response at `frequency`, in dB.
    package func response(at frequency: Double, sampleRate: Double) -> Double {
        let w = 2 * Double.pi * frequency / sampleRate
        let (c1, s1, c2, s2) = (cos(w), sin(w), cos(2 * w), sin(2 * w))
        let nr = b0 + b1 * c1 + b2 * c2, ni = -(b1 * s1 + b2 * s2)
        let dr = 1 + a1 * c1 + a2 * c2, di = -(a1 * s1 + a2 * s2)
        return 10 * log10((nr * nr + ni * ni) / (dr * dr + di * di))
    }
}

/// One channel's filter memory (transposed direct form II, in double precision so that low
/// bands at high sample rates stay stable and quiet).
package struct BiquadState: Sendable {
    var z1 = 0.0, z2 = 0.0
    package init() {}

    package mutating func reset() { z1 = 0; z2 = 0 }

    /// Filters `count` samples in place, `stride` apart.
    package mutating func process(_ c: BiquadCoefficients, _ samples: UnsafeMutablePointer<Float>, count: Int, stride: Int = 1) {
        var z1 = self.z1, z2 = self.z2
        var p = samples
        for _ in 0..<count {
            let x = Double(p.pointee)
            let y = c.b0 * x + z1
            z1 = c.b1 * x - c.a1 * y + z2
            z2 = c.b2 * x - c.a2 * y
            p.pointee = Float(y)
            p += stride
        }
        // Denormals decay to exact zero instead of costing time.
        self.z1 = abs(z1) < 1e-30 ? 0 : z1
        self.z2 = abs(z2) < 1e-30 ? 0 : z2
    }
}
