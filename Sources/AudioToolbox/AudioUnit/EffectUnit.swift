internal import CAudioQueueTypes
import CoreAudioTypes

/// A unit of one input and one output of the same format that works in place: pulls its input
/// into the output buffers, then processes them unless bypassed. Apple's effect units take only
/// the canonical format (32-bit float, non-interleaved), 44.1 kHz stereo until told otherwise.
class EffectUnit: AudioUnitObject, @unchecked Sendable {
    init(component: AudioComponentEntry, parameters: [ParameterSpec]) {
        super.init(component: component, inputs: 1, outputs: 1, format: Self.canonical(sampleRate: 44100, channels: 2), parameters: parameters)
    }

    override func initialize() -> OSStatus {
        let i = inputFormats[0], o = outputFormats[0]
        guard i.mSampleRate == o.mSampleRate, i.mChannelsPerFrame == o.mChannelsPerFrame else { return kAudioUnitErr_FormatNotSupported }
        return super.initialize()
    }

    override func prepareRendering() -> OSStatus {
        prepare(channels: Int(outputFormats[0].mChannelsPerFrame), sampleRate: outputFormats[0].mSampleRate)
        return noErr
    }

    /// Makes the kind's state for `channels` channels at `sampleRate` (control thread).
    func prepare(channels: Int, sampleRate: Double) {}

    override package func renderOutput(
        flags: UnsafeMutablePointer<AudioUnitRenderActionFlags>, time: UnsafePointer<AudioTimeStamp>, bus: UInt32, frames: Int,
        output: UnsafeMutablePointer<AudioBufferList>
    ) -> OSStatus {
        let status = pull(input: 0, flags: flags, time: time, frames: frames, into: output)
        guard status == noErr else { return status }
        if bypassFlag.load(ordering: .relaxed) { return noErr }
        let list = UnsafeMutableAudioBufferListPointer(output)
        process(list, frames: frames)
        return noErr
    }

    /// Processes the channels in `list` in place (the render thread).
    func process(_ list: UnsafeMutableAudioBufferListPointer, frames: Int) {}

    /// Channel `c`'s samples in `list`.
    @inline(__always)
    final func channel(_ list: UnsafeMutableAudioBufferListPointer, _ c: Int) -> UnsafeMutablePointer<Float> {
        list[c].mData!.assumingMemoryBound(to: Float.self)
    }
}
