import AudioGraph
import CoreAudioTypes
#if canImport(Glibc)
import Glibc
#endif

/// Apple's `AUDistortion`: a delay (0.1–500 ms, 0.1; decay 0.1–50, 1; mix 0–100 %, 50),
/// decimation (0–100 %, 50; rounding 0–100 %, 0; mix 0–100 %, 50), a polynomial (linear 0–1, 1;
/// squared 0–20, 0; cubic 0–20, 0; mix 0–100 %, 50), a ring modulator (two frequencies
/// 0.5–8000 Hz, 100; balance 0–100 %, 50; mix 0–100 %, 0), a soft clipper's gain (−80–20 dB, −6)
/// and the final wet/dry mix (0–100 %, 50), over ``Distortion``. Apple's ranges and defaults;
/// the processing is this project's reading of them (Apple does not publish its algorithm).
final class DistortionUnit: EffectUnit, @unchecked Sendable {
    private var distortion: Distortion?
    /// The same, unretained, for the render thread.
    private var distortionRef: Unmanaged<Distortion>?

    init(component: AudioComponentEntry) {
        super.init(component: component, parameters: [
            ParameterSpec(id: kDistortionParam_Delay, minimum: 0.1, maximum: 500, defaultValue: 0.1),
            ParameterSpec(id: kDistortionParam_Decay, minimum: 0.1, maximum: 50, defaultValue: 1),
            ParameterSpec(id: kDistortionParam_DelayMix, minimum: 0, maximum: 100, defaultValue: 50),
            ParameterSpec(id: kDistortionParam_Decimation, minimum: 0, maximum: 100, defaultValue: 50),
            ParameterSpec(id: kDistortionParam_Rounding, minimum: 0, maximum: 100, defaultValue: 0),
            ParameterSpec(id: kDistortionParam_DecimationMix, minimum: 0, maximum: 100, defaultValue: 50),
            ParameterSpec(id: kDistortionParam_LinearTerm, minimum: 0, maximum: 1, defaultValue: 1),
            ParameterSpec(id: kDistortionParam_SquaredTerm, minimum: 0, maximum: 20, defaultValue: 0),
            ParameterSpec(id: kDistortionParam_CubicTerm, minimum: 0, maximum: 20, defaultValue: 0),
            ParameterSpec(id: kDistortionParam_PolynomialMix, minimum: 0, maximum: 100, defaultValue: 50),
            ParameterSpec(id: kDistortionParam_RingModFreq1, minimum: 0.5, maximum: 8000, defaultValue: 100),
            ParameterSpec(id: kDistortionParam_RingModFreq2, minimum: 0.5, maximum: 8000, defaultValue: 100),
            ParameterSpec(id: kDistortionParam_RingModBalance, minimum: 0, maximum: 100, defaultValue: 50),
            ParameterSpec(id: kDistortionParam_RingModMix, minimum: 0, maximum: 100, defaultValue: 0),
            ParameterSpec(id: kDistortionParam_SoftClipGain, minimum: -80, maximum: 20, defaultValue: -6),
            ParameterSpec(id: kDistortionParam_FinalMix, minimum: 0, maximum: 100, defaultValue: 50),
        ])
    }

    override func prepare(channels: Int, sampleRate: Double) {
        let d = Distortion(channels: channels, sampleRate: sampleRate)
        distortion = d
        distortionRef = .passUnretained(d)
    }

    override func reset(scope: AudioUnitScope, element: AudioUnitElement) -> OSStatus {
        distortionRef?._withUnsafeGuaranteedRef { $0.reset() }
        return noErr
    }

    /// How long the delay stage's echoes take to fall 60 dB (each is `1 / (1 + decay)` of the
    /// last; at most 200 echoes are counted).
    override var tailTime: Double {
        let echo = 1 / (1 + Double(parameters[1]))
        let echoes = min(60 / max(-20 * log10(echo), 0.1), 200)
        return Double(parameters[0]) / 1000 * echoes
    }

    override func process(_ list: UnsafeMutableAudioBufferListPointer, frames: Int) {
        guard let distortionRef else { return }
        var s = Distortion.Settings()
        s.delay = parameters[0]
        s.decay = parameters[1]
        s.delayMix = parameters[2]
        s.decimation = parameters[3]
        s.rounding = parameters[4]
        s.decimationMix = parameters[5]
        s.linearTerm = parameters[6]
        s.squaredTerm = parameters[7]
        s.cubicTerm = parameters[8]
        s.polynomialMix = parameters[9]
        s.ringModFrequency1 = parameters[10]
        s.ringModFrequency2 = parameters[11]
        s.ringModBalance = parameters[12]
        s.ringModMix = parameters[13]
        s.softClipGain = parameters[14]
        s.finalMix = parameters[15]
        distortionRef._withUnsafeGuaranteedRef { d in
            d.process({ self.channel(list, $0) }, channels: list.count, count: frames, settings: s)
        }
    }
}
