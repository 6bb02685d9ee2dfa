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

    /// The I/O unit under the node (both I/O nodes share it, as on macOS): for its device
    /// (`kAudioOutputUnitProperty_CurrentDevice`) and the like.
    open var audioUnit: AudioUnit? { unit.ref }

    /// Whether the engine's I/O processes voice (``setVoiceProcessingEnabled(_:)``).
    open var isVoiceProcessingEnabled: Bool { attachedEngine?.isVoiceProcessing ?? false }

    /// Turns voice processing on or off for the engine's I/O, as Apple's: on either I/O node it
    /// applies to both, and the input is turned on (the microphone is what gets processed, with
    /// what the engine plays as the echo's reference). The engine must be stopped.
    ///
    /// The processing is the voice-processing I/O unit's (`kAudioUnitSubType_VoiceProcessingIO`):
    /// speex's echo canceller, noise suppressor and automatic gain control, in-process; the sound
    /// server's own echo canceller is not asked for while it runs.
    open func setVoiceProcessingEnabled(_ enabled: Bool) throws {
        guard let engine = attachedEngine else {
            throw statusError(kAudioUnitErr_Uninitialized, "setVoiceProcessingEnabled: the node is not in an engine")
        }
        try engine.setVoiceProcessing(enabled)
    }
}

/// Apple's `AVAudioVoiceProcessingSpeechActivityEvent`: speech into a muted input started or ended.
public enum AVAudioVoiceProcessingSpeechActivityEvent: Int, @unchecked Sendable {
    case started = 0
    case ended = 1
}

/// Apple's `AVAudioVoiceProcessingOtherAudioDuckingConfiguration`: how other audio is ducked
/// while voice processing runs (``AVAudioInputNode/voiceProcessingOtherAudioDuckingConfiguration``).
public struct AVAudioVoiceProcessingOtherAudioDuckingConfiguration: @unchecked Sendable {
    /// Apple's `AVAudioVoiceProcessingOtherAudioDuckingLevel`.
    public enum Level: Int, @unchecked Sendable {
        case `default` = 0
        case min = 10
        case mid = 20
        case max = 30
    }

    /// Ducks only while someone in the call speaks.
    public var enableAdvancedDucking: ObjCBool
    public var duckingLevel: Level

    public init() {
        enableAdvancedDucking = false
        duckingLevel = .default
    }

    public init(enableAdvancedDucking: ObjCBool, duckingLevel: Level) {
        self.enableAdvancedDucking = enableAdvancedDucking
        self.duckingLevel = duckingLevel
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

    // MARK: Voice processing (meaningful once it is enabled; false, and set in vain, before)

    /// Whether the microphone bypasses the processing (`kAUVoiceIOProperty_BypassVoiceProcessing`).
    open var isVoiceProcessingBypassed: Bool {
        get { voiceSwitch(kAUVoiceIOProperty_BypassVoiceProcessing) }
        set { setVoiceSwitch(kAUVoiceIOProperty_BypassVoiceProcessing, newValue) }
    }

    /// Whether automatic gain control runs (`kAUVoiceIOProperty_VoiceProcessingEnableAGC`; on by
    /// default).
    open var isVoiceProcessingAGCEnabled: Bool {
        get { voiceSwitch(kAUVoiceIOProperty_VoiceProcessingEnableAGC) }
        set { setVoiceSwitch(kAUVoiceIOProperty_VoiceProcessingEnableAGC, newValue) }
    }

    /// Whether the processed input is muted: the node gives silence (`kAUVoiceIOProperty_MuteOutput`).
    open var isVoiceProcessingInputMuted: Bool {
        get { voiceSwitch(kAUVoiceIOProperty_MuteOutput) }
        set { setVoiceSwitch(kAUVoiceIOProperty_MuteOutput, newValue) }
    }

    /// Sets the block called when speech starts or ends while the input is muted (nil removes
    /// it); it runs on a thread of the engine's, not the render thread. False when voice
    /// processing is not enabled.
    @discardableResult
    open func setMutedSpeechActivityEventListener(_ listenerBlock: (@Sendable (AVAudioVoiceProcessingSpeechActivityEvent) -> Void)?) -> Bool {
        guard isVoiceProcessingEnabled else { return false }
        let status: OSStatus
        if let listenerBlock {
            let listener: AUVoiceIOMutedSpeechActivityEventListener = { event in
                listenerBlock(event == .hasStarted ? .started : .ended)
            }
            status = withUnsafePointer(to: listener) {
                AudioUnitSetProperty(
                    unit.ref, kAUVoiceIOProperty_MutedSpeechActivityEventListener, kAudioUnitScope_Global, 0, $0,
                    UInt32(MemoryLayout<AUVoiceIOMutedSpeechActivityEventListener>.size))
            }
        } else {
            status = AudioUnitSetProperty(unit.ref, kAUVoiceIOProperty_MutedSpeechActivityEventListener, kAudioUnitScope_Global, 0, nil, 0)
        }
        return status == noErr
    }

    /// How other clients' playback is ducked while the engine runs with voice processing
    /// (`kAUVoiceIOProperty_OtherAudioDuckingConfiguration`: the levels are described at
    /// `AUVoiceIOOtherAudioDuckingLevel`). Set in vain before voice processing is enabled.
    open var voiceProcessingOtherAudioDuckingConfiguration: AVAudioVoiceProcessingOtherAudioDuckingConfiguration {
        get {
            var value = AUVoiceIOOtherAudioDuckingConfiguration()
            var size = UInt32(MemoryLayout<AUVoiceIOOtherAudioDuckingConfiguration>.size)
            _ = AudioUnitGetProperty(unit.ref, kAUVoiceIOProperty_OtherAudioDuckingConfiguration, kAudioUnitScope_Global, 0, &value, &size)
            return AVAudioVoiceProcessingOtherAudioDuckingConfiguration(
                enableAdvancedDucking: ObjCBool(value.mEnableAdvancedDucking.boolValue),
                duckingLevel: AVAudioVoiceProcessingOtherAudioDuckingConfiguration.Level(rawValue: Int(value.mDuckingLevel.rawValue)) ?? .default)
        }
        set {
            var value = AUVoiceIOOtherAudioDuckingConfiguration(
                mEnableAdvancedDucking: DarwinBoolean(newValue.enableAdvancedDucking.boolValue),
                mDuckingLevel: AUVoiceIOOtherAudioDuckingLevel(rawValue: UInt32(newValue.duckingLevel.rawValue)) ?? .default)
            AudioUnitSetProperty(
                unit.ref, kAUVoiceIOProperty_OtherAudioDuckingConfiguration, kAudioUnitScope_Global, 0, &value,
                UInt32(MemoryLayout<AUVoiceIOOtherAudioDuckingConfiguration>.size))
        }
    }

    private func voiceSwitch(_ id: AudioUnitPropertyID) -> Bool {
        var value: UInt32 = 0
        var size = UInt32(4)
        return AudioUnitGetProperty(unit.ref, id, kAudioUnitScope_Global, 0, &value, &size) == noErr && value != 0
    }

    private func setVoiceSwitch(_ id: AudioUnitPropertyID, _ on: Bool) {
        var value: UInt32 = on ? 1 : 0
        AudioUnitSetProperty(unit.ref, id, kAudioUnitScope_Global, 0, &value, 4)
    }
}
