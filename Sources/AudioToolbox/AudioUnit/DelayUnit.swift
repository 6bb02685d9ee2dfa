import AudioGraph
import CoreAudioTypes

/// Apple's `AUDelay`: wet/dry mix (0–100 %, 50), delay time (0–2 s, 1 s), feedback (−100–100 %,
/// 50) and a low pass in the echo path (10 Hz – Nyquist, 15 kHz).
final class DelayUnit: EffectUnit, @unchecked Sendable {
    private var lines: [DelayLine] = []
    private var lineRefs = UnsafeMutablePointer<Unmanaged<DelayLine>>.allocate(capacity: 1)
    private var lineCount = 0
    private var rate = 44100.0

    init(component: AudioComponentEntry) {
        super.init(component: component, parameters: [
            ParameterSpec(id: kDelayParam_WetDryMix, minimum: 0, maximum: 100, defaultValue: 50),
            ParameterSpec(id: kDelayParam_DelayTime, minimum: 0, maximum: 2, defaultValue: 1),
            ParameterSpec(id: kDelayParam_Feedback, minimum: -100, maximum: 100, defaultValue: 50),
            ParameterSpec(id: kDelayParam_LopassCutoff, minimum: 10, maximum: 22050, defaultValue: 15000),
        ])
    }

    deinit { lineRefs.deallocate() }

    override func prepare(channels: Int, sampleRate: Double) {
        rate = sampleRate
        lines = (0..<channels).map { _ in DelayLine(maximumSeconds: 2, sampleRate: sampleRate) }
        lineRefs.deallocate()
        lineRefs = .allocate(capacity: max(channels, 1))
        for (i, line) in lines.enumerated() { (lineRefs + i).initialize(to: .passUnretained(line)) }
        lineCount = channels
    }

    override func reset(scope: AudioUnitScope, element: AudioUnitElement) -> OSStatus {
        // On the render thread: the unretained references, as rendering uses.
        for c in 0..<lineCount { lineRefs[c]._withUnsafeGuaranteedRef { $0.reset() } }
        return noErr
    }

    override var tailTime: Double { Double(parameters[1]) * 10 }

    override func process(_ list: UnsafeMutableAudioBufferListPointer, frames: Int) {
        let wet = parameters[0] / 100, delay = Double(parameters[1]) * rate, feedback = parameters[2] / 100
        let cutoff = Double(parameters[3])
        for c in 0..<min(lineCount, list.count) {
            lineRefs[c]._withUnsafeGuaranteedRef {
                $0.process(channel(list, c), count: frames, delay: delay, feedback: feedback, wet: wet, cutoff: cutoff, sampleRate: rate)
            }
        }
    }
}
