public import AudioToolbox
public import Foundation

/// A node that is an audio unit of the system's (`audioUnit` is its reference for the C API).
open class AVAudioUnit: AVAudioNode, @unchecked Sendable {
    /// The unit's reference: `AudioUnitGetParameter`, `AudioUnitSetProperty`… work on it.
    open var audioUnit: AudioUnit { unit.ref }
    public let audioComponentDescription: AudioComponentDescription
    open var name: String {
        var d = audioComponentDescription
        guard let component = AudioComponentFindNext(nil, &d) else { return "" }
        var name = Unmanaged.passRetained("" as CFString)
        AudioComponentCopyName(component, &name)
        return name.takeRetainedValue() as String
    }
    open var manufacturerName: String { "Apple" }
    open var version: Int { 0x0001_0000 }

    init?(description: AudioComponentDescription) {
        guard let unit = AudioUnitObject.make(type: description.componentType, subType: description.componentSubType) else { return nil }
        audioComponentDescription = description
        super.init(unit: unit)
    }

    deinit { AudioUnitObject.unregister(unit) }

    /// The unit's `kAudioUnitProperty_BypassEffect`, for the kinds that have a bypass.
    var unitBypass: Bool {
        get {
            var v: UInt32 = 0
            var size = UInt32(4)
            AudioUnitGetProperty(unit.ref, kAudioUnitProperty_BypassEffect, kAudioUnitScope_Global, 0, &v, &size)
            return v != 0
        }
        set {
            var v: UInt32 = newValue ? 1 : 0
            AudioUnitSetProperty(unit.ref, kAudioUnitProperty_BypassEffect, kAudioUnitScope_Global, 0, &v, 4)
        }
    }

    func parameter(_ id: AudioUnitParameterID, element: AudioUnitElement = 0) -> Float {
        var v: Float = 0
        AudioUnitGetParameter(unit.ref, id, kAudioUnitScope_Global, element, &v)
        return v
    }

    func setParameter(_ id: AudioUnitParameterID, _ value: Float, element: AudioUnitElement = 0) {
        AudioUnitSetParameter(unit.ref, id, kAudioUnitScope_Global, element, value, 0)
    }
}

/// An effect: one input, one output of the same format, and a bypass.
open class AVAudioUnitEffect: AVAudioUnit, @unchecked Sendable {
    public init(audioComponentDescription: AudioComponentDescription) {
        super.init(description: audioComponentDescription)!
    }

    /// Passes the input through unchanged, bit for bit.
    open var bypass: Bool {
        get { unitBypass }
        set { unitBypass = newValue }
    }
}

public enum AVAudioUnitEQFilterType: Int, Sendable {
    case parametric = 0
    case lowPass = 1
    case highPass = 2
    case resonantLowPass = 3
    case resonantHighPass = 4
    case bandPass = 5
    case bandStop = 6
    case lowShelf = 7
    case highShelf = 8
    case resonantLowShelf = 9
    case resonantHighShelf = 10
}

/// One band of an ``AVAudioUnitEQ``: its parameters are the unit's, set as they change.
open class AVAudioUnitEQFilterParameters: NSObject, @unchecked Sendable {
    private unowned let eq: AVAudioUnitEQ
    private let band: AudioUnitParameterID

    init(eq: AVAudioUnitEQ, band: Int) {
        self.eq = eq
        self.band = AudioUnitParameterID(band)
        super.init()
    }

    open var filterType: AVAudioUnitEQFilterType {
        get { AVAudioUnitEQFilterType(rawValue: Int(eq.parameter(kAUNBandEQParam_FilterType + band))) ?? .parametric }
        set { eq.setParameter(kAUNBandEQParam_FilterType + band, Float(newValue.rawValue)) }
    }
    /// Hz, 20 … half the sample rate.
    open var frequency: Float {
        get { eq.parameter(kAUNBandEQParam_Frequency + band) }
        set { eq.setParameter(kAUNBandEQParam_Frequency + band, newValue) }
    }
    /// Octaves, 0.05 … 5.
    open var bandwidth: Float {
        get { eq.parameter(kAUNBandEQParam_Bandwidth + band) }
        set { eq.setParameter(kAUNBandEQParam_Bandwidth + band, newValue) }
    }
    /// dB, −96 … 24.
    open var gain: Float {
        get { eq.parameter(kAUNBandEQParam_Gain + band) }
        set { eq.setParameter(kAUNBandEQParam_Gain + band, newValue) }
    }
    /// Bands start bypassed, as Apple's do.
    open var bypass: Bool {
        get { eq.parameter(kAUNBandEQParam_BypassBand + band) != 0 }
        set { eq.setParameter(kAUNBandEQParam_BypassBand + band, newValue ? 1 : 0) }
    }
}

/// A multi-band equalizer (`AUNBandEQ`): up to 16 bands.
open class AVAudioUnitEQ: AVAudioUnitEffect, @unchecked Sendable {
    open private(set) var bands: [AVAudioUnitEQFilterParameters] = []

    public convenience init() { self.init(numberOfBands: 1) }

    public init(numberOfBands: Int) {
        super.init(audioComponentDescription: AudioComponentDescription(
            componentType: kAudioUnitType_Effect, componentSubType: kAudioUnitSubType_NBandEQ, componentManufacturer: kAudioUnitManufacturer_Apple,
            componentFlags: 0, componentFlagsMask: 0))
        var n = UInt32(min(max(numberOfBands, 1), 16))
        AudioUnitSetProperty(unit.ref, kAUNBandEQProperty_NumberOfBands, kAudioUnitScope_Global, 0, &n, 4)
        bands = (0..<Int(n)).map { AVAudioUnitEQFilterParameters(eq: self, band: $0) }
    }

    /// dB, −96 … 24, applied after the bands.
    open var globalGain: Float {
        get { parameter(kAUNBandEQParam_GlobalGain) }
        set { setParameter(kAUNBandEQParam_GlobalGain, newValue) }
    }
}

/// An echo (`AUDelay`).
open class AVAudioUnitDelay: AVAudioUnitEffect, @unchecked Sendable {
    public init() {
        super.init(audioComponentDescription: AudioComponentDescription(
            componentType: kAudioUnitType_Effect, componentSubType: kAudioUnitSubType_Delay, componentManufacturer: kAudioUnitManufacturer_Apple,
            componentFlags: 0, componentFlagsMask: 0))
        wetDryMix = 100
    }

    /// Seconds, 0 … 2 (1).
    open var delayTime: TimeInterval {
        get { TimeInterval(parameter(kDelayParam_DelayTime)) }
        set { setParameter(kDelayParam_DelayTime, Float(newValue)) }
    }
    /// Percent, −100 … 100 (50).
    open var feedback: Float {
        get { parameter(kDelayParam_Feedback) }
        set { setParameter(kDelayParam_Feedback, newValue) }
    }
    /// Hz, 10 … half the sample rate (15000).
    open var lowPassCutoff: Float {
        get { parameter(kDelayParam_LopassCutoff) }
        set { setParameter(kDelayParam_LopassCutoff, newValue) }
    }
    /// Percent, 0 … 100 (100 for AVAudioUnitDelay, as Apple's).
    open var wetDryMix: Float {
        get { parameter(kDelayParam_WetDryMix) }
        set { setParameter(kDelayParam_WetDryMix, newValue) }
    }
}

public enum AVAudioUnitReverbPreset: Int, Sendable {
    case smallRoom = 0
    case mediumRoom = 1
    case largeRoom = 2
    case mediumHall = 3
    case largeHall = 4
    case plate = 5
    case mediumChamber = 6
    case largeChamber = 7
    case cathedral = 8
    case largeRoom2 = 9
    case mediumHall2 = 10
    case mediumHall3 = 11
    case largeHall2 = 12
}

/// A reverberation (`AUReverb2`) with Apple's factory presets and a wet/dry mix.
open class AVAudioUnitReverb: AVAudioUnitEffect, @unchecked Sendable {
    public init() {
        super.init(audioComponentDescription: AudioComponentDescription(
            componentType: kAudioUnitType_Effect, componentSubType: kAudioUnitSubType_Reverb2, componentManufacturer: kAudioUnitManufacturer_Apple,
            componentFlags: 0, componentFlagsMask: 0))
        loadFactoryPreset(.mediumHall)
    }

    /// Sets the room: each preset is a shortest and longest reflection delay and decay times at
    /// DC and at Nyquist, in the spirit of Apple's names (their exact values are not published).
    open func loadFactoryPreset(_ preset: AVAudioUnitReverbPreset) {
        let (minimum, maximum, dc, nyquist): (Float, Float, Float, Float) = switch preset {
        case .smallRoom: (0.004, 0.020, 0.5, 0.25)
        case .mediumRoom: (0.006, 0.030, 0.8, 0.4)
        case .largeRoom: (0.008, 0.045, 1.2, 0.6)
        case .largeRoom2: (0.010, 0.050, 1.4, 0.8)
        case .mediumHall: (0.010, 0.060, 1.8, 0.9)
        case .mediumHall2: (0.012, 0.065, 2.0, 1.0)
        case .mediumHall3: (0.012, 0.070, 2.2, 1.2)
        case .largeHall: (0.015, 0.090, 2.8, 1.4)
        case .largeHall2: (0.018, 0.100, 3.2, 1.8)
        case .plate: (0.002, 0.015, 1.6, 1.4)
        case .mediumChamber: (0.008, 0.040, 1.2, 0.5)
        case .largeChamber: (0.010, 0.055, 1.8, 0.7)
        case .cathedral: (0.025, 0.150, 6.0, 3.0)
        }
        setParameter(kReverb2Param_MinDelayTime, minimum)
        setParameter(kReverb2Param_MaxDelayTime, maximum)
        setParameter(kReverb2Param_DecayTimeAt0Hz, dc)
        setParameter(kReverb2Param_DecayTimeAtNyquist, nyquist)
    }

    /// Percent of reverberated sound, 0 … 100.
    open var wetDryMix: Float {
        get { parameter(kReverb2Param_DryWetMix) }
        set { setParameter(kReverb2Param_DryWetMix, newValue) }
    }
}

/// A unit that changes the pace of what passes through it (time pitch, varispeed).
open class AVAudioUnitTimeEffect: AVAudioUnit, @unchecked Sendable {
    public init(audioComponentDescription: AudioComponentDescription) {
        super.init(description: audioComponentDescription)!
    }

    open var bypass: Bool {
        get { unitBypass }
        set { unitBypass = newValue }
    }
}

/// Changes the duration and the pitch independently (`AUNewTimePitch`, through libsonic).
open class AVAudioUnitTimePitch: AVAudioUnitTimeEffect, @unchecked Sendable {
    public init() {
        super.init(audioComponentDescription: AudioComponentDescription(
            componentType: kAudioUnitType_FormatConverter, componentSubType: kAudioUnitSubType_NewTimePitch,
            componentManufacturer: kAudioUnitManufacturer_Apple, componentFlags: 0, componentFlagsMask: 0))
    }

    /// Playback rate, 1/32 … 32 (1); here held within 1/4 … 4 when rendering.
    open var rate: Float {
        get { parameter(kNewTimePitchParam_Rate) }
        set { setParameter(kNewTimePitchParam_Rate, newValue) }
    }
    /// Pitch shift in cents, −2400 … 2400 (0).
    open var pitch: Float {
        get { parameter(kNewTimePitchParam_Pitch) }
        set { setParameter(kNewTimePitchParam_Pitch, newValue) }
    }
    /// Overlap of the analysis windows, 3 … 32 (8): kept, without effect on libsonic.
    open var overlap: Float {
        get { parameter(kNewTimePitchParam_Overlap) }
        set { setParameter(kNewTimePitchParam_Overlap, newValue) }
    }
}

/// Plays faster or slower with the pitch following (`AUVarispeed`).
open class AVAudioUnitVarispeed: AVAudioUnitTimeEffect, @unchecked Sendable {
    public init() {
        super.init(audioComponentDescription: AudioComponentDescription(
            componentType: kAudioUnitType_FormatConverter, componentSubType: kAudioUnitSubType_Varispeed,
            componentManufacturer: kAudioUnitManufacturer_Apple, componentFlags: 0, componentFlagsMask: 0))
    }

    /// 0.25 … 4 (1).
    open var rate: Float {
        get { parameter(kVarispeedParam_PlaybackRate) }
        set { setParameter(kVarispeedParam_PlaybackRate, newValue) }
    }
}
