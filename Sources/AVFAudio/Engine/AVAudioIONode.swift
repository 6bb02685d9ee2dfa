import AudioToolbox
public import Foundation

/// The engine's connection to a device.
open class AVAudioIONode: AVAudioNode, @unchecked Sendable {
    /// How long audio takes between the device and this node: for the output, what the server
    /// holds ahead of the device (the unit's latency); 0 before the engine has run.
    open var presentationLatency: TimeInterval {
        var v = 0.0
        var size = UInt32(8)
        AudioUnitGetProperty(unit.ref, kAudioUnitProperty_Latency, kAudioUnitScope_Global, 0, &v, &size)
        return v
    }
}

/// The engine's output: the default output device (or the session's route), pulled on a
/// real-time thread of its own. Its input is the graph's end, usually the main mixer.
open class AVAudioOutputNode: AVAudioIONode, @unchecked Sendable {}

/// The engine's microphone: its output carries what the default input (or the session's
/// preferred input) records, at the device's rate and channel count unless connected in
/// another format (the server converts).
open class AVAudioInputNode: AVAudioIONode, AVAudioMixing, @unchecked Sendable {
    override func unitOutputBus(_ bus: AVAudioNodeBus) -> Int { 1 }
    override func unitInputBus(_ bus: AVAudioNodeBus) -> Int { 1 }

    open override var numberOfOutputs: Int { 1 }
    open override var numberOfInputs: Int { 1 }

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
