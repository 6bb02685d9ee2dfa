import AudioToolbox

public enum AVAudioUnitDistortionPreset: Int, Sendable {
    case drumsBitBrush = 0
    case drumsBufferBeats = 1
    case drumsLoFi = 2
    case multiBrokenSpeaker = 3
    case multiCellphoneConcert = 4
    case multiDecimated1 = 5
    case multiDecimated2 = 6
    case multiDecimated3 = 7
    case multiDecimated4 = 8
    case multiDistortedFunk = 9
    case multiDistortedCubed = 10
    case multiDistortedSquared = 11
    case multiEcho1 = 12
    case multiEcho2 = 13
    case multiEchoTight1 = 14
    case multiEchoTight2 = 15
    case multiEverythingIsBroken = 16
    case speechAlienChatter = 17
    case speechCosmicInterference = 18
    case speechGoldenPi = 19
    case speechRadioTower = 20
    case speechWaves = 21
}

/// A multi-stage distortion (`AUDistortion`): delay, decimation, polynomial waveshaping, ring
/// modulation and a soft clipper, with Apple's factory presets.
open class AVAudioUnitDistortion: AVAudioUnitEffect, @unchecked Sendable {
    public init() {
        super.init(audioComponentDescription: AudioComponentDescription(
            componentType: kAudioUnitType_Effect, componentSubType: kAudioUnitSubType_Distortion,
            componentManufacturer: kAudioUnitManufacturer_Apple, componentFlags: 0, componentFlagsMask: 0))
    }

    /// Sets every parameter of the unit, the final mix (``wetDryMix``) included, as loading one of
    /// an audio unit's factory presets does: set ``wetDryMix`` after loading. Apple does not
    /// publish its presets' values: these are this project's settings, chosen to give each name
    /// its character (bit-crushed drums, a telephone's grit, echoes of several lengths,
    /// ring-modulated "alien" voices, and so on).
    open func loadFactoryPreset(_ preset: AVAudioUnitDistortionPreset) {
        let p = Self.presetValues(preset)
        let values: [(AudioUnitParameterID, Float)] = [
            (kDistortionParam_Delay, p.delay), (kDistortionParam_Decay, p.decay), (kDistortionParam_DelayMix, p.delayMix),
            (kDistortionParam_Decimation, p.decimation), (kDistortionParam_Rounding, p.rounding),
            (kDistortionParam_DecimationMix, p.decimationMix), (kDistortionParam_LinearTerm, p.linear),
            (kDistortionParam_SquaredTerm, p.squared), (kDistortionParam_CubicTerm, p.cubic),
            (kDistortionParam_PolynomialMix, p.polynomialMix), (kDistortionParam_RingModFreq1, p.ring1),
            (kDistortionParam_RingModFreq2, p.ring2), (kDistortionParam_RingModBalance, p.ringBalance),
            (kDistortionParam_RingModMix, p.ringMix), (kDistortionParam_SoftClipGain, p.softClip),
            (kDistortionParam_FinalMix, p.finalMix),
        ]
        for (id, value) in values { setParameter(id, value) }
    }

    /// dB, −80 … 20 (−6): the gain into the soft clipper, the last stage before the final mix
    /// (`kDistortionParam_SoftClipGain`).
    open var preGain: Float {
        get { parameter(kDistortionParam_SoftClipGain) }
        set { setParameter(kDistortionParam_SoftClipGain, newValue) }
    }

    /// Percent of distorted sound, 0 … 100 (50) (`kDistortionParam_FinalMix`).
    open var wetDryMix: Float {
        get { parameter(kDistortionParam_FinalMix) }
        set { setParameter(kDistortionParam_FinalMix, newValue) }
    }

    /// One preset's values, in the units' own (ms, percent, Hz, dB).
    private struct Values {
        var delay: Float = 0.1, decay: Float = 1, delayMix: Float = 0
        var decimation: Float = 0, rounding: Float = 0, decimationMix: Float = 0
        var linear: Float = 1, squared: Float = 0, cubic: Float = 0, polynomialMix: Float = 0
        var ring1: Float = 100, ring2: Float = 100, ringBalance: Float = 50, ringMix: Float = 0
        var softClip: Float = 0, finalMix: Float = 100
    }

    private static func presetValues(_ preset: AVAudioUnitDistortionPreset) -> Values {
        var v = Values()
        switch preset {
        case .drumsBitBrush:
            // Light bit crushing: fewer bits, a slightly lower rate.
            (v.decimation, v.rounding, v.decimationMix, v.softClip, v.finalMix) = (25, 60, 70, -3, 70)
        case .drumsBufferBeats:
            // A repeating buffer: a 120 ms echo that dies slowly, with some grit.
            (v.delay, v.decay, v.delayMix) = (120, 0.6, 60)
            (v.cubic, v.polynomialMix, v.softClip) = (2, 30, -3)
        case .drumsLoFi:
            (v.decimation, v.rounding, v.decimationMix) = (70, 70, 80)
            (v.squared, v.cubic, v.polynomialMix) = (1, 1, 30)
        case .multiBrokenSpeaker:
            (v.squared, v.cubic, v.polynomialMix) = (6, 10, 80)
            (v.ring1, v.ring2, v.ringMix) = (60, 120, 20)
            (v.decimation, v.rounding, v.decimationMix, v.softClip) = (30, 40, 30, 6)
        case .multiCellphoneConcert:
            (v.decimation, v.rounding, v.decimationMix) = (80, 70, 90)
            (v.delay, v.decay, v.delayMix) = (30, 5, 25)
            (v.cubic, v.polynomialMix) = (3, 40)
        case .multiDecimated1:
            (v.decimation, v.rounding, v.decimationMix, v.finalMix) = (30, 10, 100, 50)
        case .multiDecimated2:
            (v.decimation, v.rounding, v.decimationMix, v.finalMix) = (50, 25, 100, 65)
        case .multiDecimated3:
            (v.decimation, v.rounding, v.decimationMix, v.finalMix) = (70, 50, 100, 80)
        case .multiDecimated4:
            (v.decimation, v.rounding, v.decimationMix) = (90, 75, 100)
        case .multiDistortedFunk:
            (v.squared, v.cubic, v.polynomialMix) = (4, 4, 70)
            (v.ring1, v.ring2, v.ringBalance, v.ringMix) = (2, 4, 50, 30)
            (v.delay, v.decay, v.delayMix, v.softClip) = (8, 3, 20, 6)
        case .multiDistortedCubed:
            (v.cubic, v.polynomialMix) = (20, 100)
        case .multiDistortedSquared:
            (v.squared, v.polynomialMix) = (20, 100)
        case .multiEcho1:
            (v.delay, v.decay, v.delayMix) = (250, 1.5, 50)
        case .multiEcho2:
            (v.delay, v.decay, v.delayMix) = (400, 0.8, 60)
        case .multiEchoTight1:
            (v.delay, v.decay, v.delayMix) = (40, 3, 50)
        case .multiEchoTight2:
            (v.delay, v.decay, v.delayMix) = (80, 2, 60)
            (v.decimation, v.rounding, v.decimationMix) = (20, 20, 30)
        case .multiEverythingIsBroken:
            (v.delay, v.decay, v.delayMix) = (60, 1, 50)
            (v.decimation, v.rounding, v.decimationMix) = (80, 80, 80)
            (v.squared, v.cubic, v.polynomialMix) = (10, 15, 80)
            (v.ring1, v.ring2, v.ringMix, v.softClip) = (300, 777, 50, 12)
        case .speechAlienChatter:
            (v.ring1, v.ring2, v.ringBalance, v.ringMix) = (900, 1400, 50, 100)
            (v.delay, v.decay, v.delayMix) = (15, 4, 30)
        case .speechCosmicInterference:
            (v.ring1, v.ring2, v.ringBalance, v.ringMix) = (40, 3000, 40, 70)
            (v.decimation, v.rounding, v.decimationMix) = (50, 30, 40)
            (v.delay, v.decay, v.delayMix) = (200, 2, 30)
        case .speechGoldenPi:
            // Carriers at 100π and 100φ Hz.
            (v.ring1, v.ring2, v.ringBalance, v.ringMix) = (314.159, 161.803, 50, 60)
            (v.cubic, v.polynomialMix) = (3, 30)
        case .speechRadioTower:
            (v.decimation, v.rounding, v.decimationMix) = (60, 50, 70)
            (v.cubic, v.polynomialMix) = (6, 50)
            (v.ring1, v.ring2, v.ringMix, v.softClip) = (50, 50, 10, 6)
        case .speechWaves:
            // Slow carriers: the voice swells and fades as waves do; a short echo thickens it.
            (v.ring1, v.ring2, v.ringBalance, v.ringMix) = (0.5, 0.8, 50, 80)
            (v.delay, v.decay, v.delayMix) = (20, 1, 40)
        }
        return v
    }
}
