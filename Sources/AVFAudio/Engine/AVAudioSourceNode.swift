public import AudioToolbox
public import Foundation

/// Renders audio for the graph: called on the render thread, as Apple documents it. Set
/// `isSilence` when the output is silence.
public typealias AVAudioSourceNodeRenderBlock = (
    _ isSilence: UnsafeMutablePointer<ObjCBool>, _ timestamp: UnsafePointer<AudioTimeStamp>, _ frameCount: AVAudioFrameCount,
    _ outputData: UnsafeMutablePointer<AudioBufferList>
) -> OSStatus

/// A node whose output the user's block renders, on the render thread.
open class AVAudioSourceNode: AVAudioNode, AVAudioMixing, @unchecked Sendable {
    /// Renders in the format of the connection from this node (the engine's standard format).
    public convenience init(renderBlock block: @escaping AVAudioSourceNodeRenderBlock) {
        self.init(format: AVAudioFormat(standardFormatWithSampleRate: 44100, channels: 2)!, renderBlock: block)
    }

    /// Renders in `format` (32-bit float, non-interleaved).
    public init(format: AVAudioFormat, renderBlock block: @escaping AVAudioSourceNodeRenderBlock) {
        let unit = SourceBlockUnit(format: format.streamDescription.pointee, block: block)
        AudioUnitObject.register(unit)
        super.init(unit: unit)
    }

    deinit { AudioUnitObject.unregister(unit) }

    open var volume: Float {
        get { mixVolume }
        set { mixVolume = min(max(newValue, 0), 1) }
    }

    open var pan: Float {
        get { mixPan }
        set { mixPan = min(max(newValue, -1), 1) }
    }

    open func destination(forMixer mixer: AVAudioNode, bus: AVAudioNodeBus) -> AVAudioMixingDestination? {
        mixingDestination(forMixer: mixer, bus: bus)
    }
}

/// Receives the audio that reaches it: called on the render thread, as Apple documents it.
public typealias AVAudioSinkNodeReceiverBlock = (
    _ timestamp: UnsafePointer<AudioTimeStamp>, _ frameCount: AVAudioFrameCount, _ inputData: UnsafePointer<AudioBufferList>
) -> OSStatus

/// A node that hands what it is connected from to the user's block each render cycle, with no
/// output of its own (pulled by the engine as the output is).
open class AVAudioSinkNode: AVAudioNode, @unchecked Sendable {
    let sinkUnit: SinkBlockUnit

    public init(receiverBlock block: @escaping AVAudioSinkNodeReceiverBlock) {
        let unit = SinkBlockUnit(format: AudioUnitObject.canonical(sampleRate: 44100, channels: 2), block: block)
        AudioUnitObject.register(unit)
        sinkUnit = unit
        super.init(unit: unit)
    }

    deinit { AudioUnitObject.unregister(unit) }
}
