import AudioGraph
import CoreAudioTypes
#if canImport(Glibc)
import Glibc
#endif

/// Apple's `AUReverb2`: dry/wet mix (0–100 %, 100), gain (−20–20 dB, 0), shortest and longest
/// delay (0.0001–1 s; 0.008 and 0.050), decay time at DC and at Nyquist (0.001–20 s; 1.0 and
/// 0.5), randomize reflections (1–1000, 1), over a feedback delay network (``Reverberator``).
/// Stereo in and out (a mono input is reverberated into both sides of a stereo output only when
/// the unit is connected in stereo; in mono the two sides are summed).
final class ReverbUnit: EffectUnit, @unchecked Sendable {
    private var reverb: Reverberator?
    private var reverbRef: Unmanaged<Reverberator>?
    private var wet = UnsafeMutablePointer<Float>.allocate(capacity: 2)
    private var wetFrames = 0

    init(component: AudioComponentEntry) {
        super.init(component: component, parameters: [
            ParameterSpec(id: kReverb2Param_DryWetMix, minimum: 0, maximum: 100, defaultValue: 100),
            ParameterSpec(id: kReverb2Param_Gain, minimum: -20, maximum: 20, defaultValue: 0),
            ParameterSpec(id: kReverb2Param_MinDelayTime, minimum: 0.0001, maximum: 1, defaultValue: 0.008),
            ParameterSpec(id: kReverb2Param_MaxDelayTime, minimum: 0.0001, maximum: 1, defaultValue: 0.050),
            ParameterSpec(id: kReverb2Param_DecayTimeAt0Hz, minimum: 0.001, maximum: 20, defaultValue: 1.0),
            ParameterSpec(id: kReverb2Param_DecayTimeAtNyquist, minimum: 0.001, maximum: 20, defaultValue: 0.5),
            ParameterSpec(id: kReverb2Param_RandomizeReflections, minimum: 1, maximum: 1000, defaultValue: 1),
        ])
    }

    deinit { wet.deallocate() }

    override func prepare(channels: Int, sampleRate: Double) {
        let r = Reverberator(sampleRate: sampleRate)
        reverb = r
        reverbRef = .passUnretained(r)
        wet.deallocate()
        wetFrames = Int(maximumFramesPerSlice)
        wet = .allocate(capacity: 2 * wetFrames)
        wet.initialize(repeating: 0, count: 2 * wetFrames)
    }

    override func reset(scope: AudioUnitScope, element: AudioUnitElement) -> OSStatus {
        reverbRef?._withUnsafeGuaranteedRef { $0.reset() }
        return noErr
    }

    override var tailTime: Double { Double(max(parameters[4], parameters[5])) * 1.5 }

    override func process(_ list: UnsafeMutableAudioBufferListPointer, frames: Int) {
        guard let reverbRef, list.count >= 1 else { return }
        let mix = parameters[0] / 100, gain = Float(pow(10, Double(parameters[1]) / 20))
        let settings = Reverberator.Settings(
            minimumDelay: Double(parameters[2]), maximumDelay: Double(parameters[3]), decayAtDC: Double(parameters[4]),
            decayAtNyquist: Double(parameters[5]), seed: Int(parameters[6]))
        let left = channel(list, 0), right = channel(list, list.count > 1 ? 1 : 0)
        let wl = wet, wr = wet + wetFrames
        wl.update(repeating: 0, count: frames)
        wr.update(repeating: 0, count: frames)
        reverbRef._withUnsafeGuaranteedRef { r in
            r.configure(settings)
            r.process(left: left, right: right, wetLeft: wl, wetRight: wr, count: frames)
        }
        if list.count > 1 {
            for i in 0..<frames {
                left[i] = (left[i] * (1 - mix) + wl[i] * mix) * gain
                right[i] = (right[i] * (1 - mix) + wr[i] * mix) * gain
            }
            for c in 2..<max(list.count, 2) { channel(list, c).update(from: left, count: frames) }
        } else {
            for i in 0..<frames { left[i] = (left[i] * (1 - mix) + (wl[i] + wr[i]) * 0.5 * mix) * gain }
        }
    }
}
