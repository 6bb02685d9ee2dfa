import AudioGraph
import CoreAudioTypes
#if canImport(Glibc)
import Glibc
#endif

/// Apple's `AUNBandEQ`: up to 16 bands, each a biquad of one of eleven shapes, and a global gain.
/// Bands start bypassed, as `AVAudioUnitEQ`'s do; set `kAUNBandEQParam_BypassBand` + n to 0.
/// Coefficients are worked out on the render thread when a band's parameters change (no
/// allocation: a few sines and a power).
final class EQUnit: EffectUnit, @unchecked Sendable {
    static let maximumBands = 16
    static let maximumChannels = 16
    var bandCount = 2
    private let states: UnsafeMutablePointer<BiquadState>
    private let coefficients: UnsafeMutablePointer<BiquadCoefficients>
    private let settings: UnsafeMutablePointer<BandSettings>
    private var activeChannels = 0
    private var rate = 44100.0
    // The render thread's copy of the band count (set at initialize).
    private var renderBands = 0

    init(component: AudioComponentEntry) {
        var specs = [ParameterSpec(id: kAUNBandEQParam_GlobalGain, minimum: -96, maximum: 24, defaultValue: 0)]
        for b in 0..<Self.maximumBands {
            let n = AudioUnitParameterID(b)
            // Default centres spread over the audible range, as Apple's are.
            let f = Float(20 * pow(1000, Double(b + 1) / Double(Self.maximumBands + 1)))
            specs += [
                ParameterSpec(id: kAUNBandEQParam_BypassBand + n, minimum: 0, maximum: 1, defaultValue: 1),
                ParameterSpec(id: kAUNBandEQParam_FilterType + n, minimum: 0, maximum: Float(kNumAUNBandEQFilterTypes - 1), defaultValue: 0),
                ParameterSpec(id: kAUNBandEQParam_Frequency + n, minimum: 10, maximum: 24000, defaultValue: f),
                ParameterSpec(id: kAUNBandEQParam_Gain + n, minimum: -96, maximum: 24, defaultValue: 0),
                ParameterSpec(id: kAUNBandEQParam_Bandwidth + n, minimum: 0.05, maximum: 5, defaultValue: 0.5),
            ]
        }
        states = .allocate(capacity: Self.maximumBands * Self.maximumChannels)
        states.initialize(repeating: BiquadState(), count: Self.maximumBands * Self.maximumChannels)
        coefficients = .allocate(capacity: Self.maximumBands)
        coefficients.initialize(repeating: BiquadCoefficients(), count: Self.maximumBands)
        settings = .allocate(capacity: Self.maximumBands)
        settings.initialize(repeating: BandSettings(shape: .parametric, frequency: -1, gain: 0, bandwidth: 0), count: Self.maximumBands)
        super.init(component: component, parameters: specs)
    }

    deinit {
        states.deallocate()
        coefficients.deallocate()
        settings.deallocate()
    }

    override func prepare(channels: Int, sampleRate: Double) {
        activeChannels = min(channels, Self.maximumChannels)
        rate = sampleRate
        renderBands = bandCount
        for i in 0..<Self.maximumBands * Self.maximumChannels { states[i].reset() }
        for b in 0..<Self.maximumBands { settings[b].frequency = -1 }
    }

    override func reset(scope: AudioUnitScope, element: AudioUnitElement) -> OSStatus {
        // Filter memory only (on the render thread, before a slice).
        for i in 0..<Self.maximumBands * Self.maximumChannels { states[i].reset() }
        return noErr
    }

    override var tailTime: Double { 0.01 }

    override func process(_ list: UnsafeMutableAudioBufferListPointer, frames: Int) {
        let channels = min(activeChannels, list.count)
        for b in 0..<renderBands {
            let base = 1 + b * 5
            guard parameters[base] < 0.5 else { continue }
            let s = BandSettings(
                shape: FilterShape(rawValue: Int(parameters[base + 1])) ?? .parametric, frequency: Double(parameters[base + 2]),
                gain: Double(parameters[base + 3]), bandwidth: Double(parameters[base + 4]))
            if s != settings[b] {
                settings[b] = s
                coefficients[b] = BiquadCoefficients(s, sampleRate: rate)
            }
            for c in 0..<channels { states[b * Self.maximumChannels + c].process(coefficients[b], channel(list, c), count: frames) }
        }
        let global = parameters[0]
        if global != 0 {
            let g = Float(pow(10, Double(global) / 20))
            for c in 0..<channels {
                let p = channel(list, c)
                for i in 0..<frames { p[i] *= g }
            }
        }
    }

    override func propertyInfo(_ id: AudioUnitPropertyID, scope: AudioUnitScope, element: AudioUnitElement) -> (size: Int, writable: Bool)? {
        switch id {
        case kAUNBandEQProperty_NumberOfBands: return (4, true)
        case kAUNBandEQProperty_MaxNumberOfBands: return (4, false)
        default: return super.propertyInfo(id, scope: scope, element: element)
        }
    }

    override func getProperty(_ id: AudioUnitPropertyID, scope: AudioUnitScope, element: AudioUnitElement) -> Result<[UInt8], StatusError> {
        switch id {
        case kAUNBandEQProperty_NumberOfBands: return .success(bytes(of: UInt32(bandCount)))
        case kAUNBandEQProperty_MaxNumberOfBands: return .success(bytes(of: UInt32(Self.maximumBands)))
        default: return super.getProperty(id, scope: scope, element: element)
        }
    }

    override func setProperty(_ id: AudioUnitPropertyID, scope: AudioUnitScope, element: AudioUnitElement, data: UnsafeRawPointer?, size: UInt32) -> OSStatus {
        guard id == kAUNBandEQProperty_NumberOfBands else { return super.setProperty(id, scope: scope, element: element, data: data, size: size) }
        guard let n = PropertyData.load(UInt32.self, from: data, size: size) else { return kAudio_ParamError }
        guard !isInitialized else { return kAudioUnitErr_Initialized }
        guard n >= 1, n <= Self.maximumBands else { return kAudioUnitErr_InvalidPropertyValue }
        bandCount = Int(n)
        return noErr
    }
}
