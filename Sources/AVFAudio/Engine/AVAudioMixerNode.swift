import AudioToolbox
public import Foundation

/// A node whose output a mixer takes with a volume and a pan.
public protocol AVAudioStereoMixing: NSObjectProtocol {
    /// −1 (left) … 1 (right), at every mixer input the node feeds.
    var pan: Float { get set }
}

/// Volume and pan of a node's connections to mixers. (Apple's protocol also carries the 3D
/// mixing properties of `AVAudio3DMixing`; there is no 3D mixer here, so they are absent.)
public protocol AVAudioMixing: AVAudioStereoMixing {
    /// 0…1, at every mixer input the node feeds.
    var volume: Float { get set }
    /// The node's connection to input `bus` of `mixer`, whose own volume and pan override the
    /// node's; nil when the node does not feed that input.
    func destination(forMixer mixer: AVAudioNode, bus: AVAudioNodeBus) -> AVAudioMixingDestination?
}

/// One connection of a node to a mixer input, with its own volume and pan.
open class AVAudioMixingDestination: NSObject, AVAudioMixing, @unchecked Sendable {
    private weak var source: AVAudioNode?
    private weak var mixer: AVAudioMixerNode?
    private let bus: Int
    public let connectionPoint: AVAudioConnectionPoint

    init(source: AVAudioNode, mixer: AVAudioMixerNode, bus: Int) {
        self.source = source
        self.mixer = mixer
        self.bus = bus
        connectionPoint = AVAudioConnectionPoint(node: mixer, bus: bus)
        super.init()
    }

    private func values() -> (volume: Float, pan: Float) {
        guard let source, let mixer else { return (1, 0) }
        return source.destinationValues[ObjectIdentifier(mixer)]?[bus] ?? (source.mixVolume, source.mixPan)
    }

    private func set(_ v: (volume: Float, pan: Float)) {
        guard let source, let mixer else { return }
        source.destinationValues[ObjectIdentifier(mixer), default: [:]][bus] = v
        source.applyMixing(to: mixer, bus: bus)
    }

    open var volume: Float {
        get { values().volume }
        set { set((min(max(newValue, 0), 1), values().pan)) }
    }

    open var pan: Float {
        get { values().pan }
        set { set((values().volume, min(max(newValue, -1), 1))) }
    }

    open func destination(forMixer mixer: AVAudioNode, bus: AVAudioNodeBus) -> AVAudioMixingDestination? {
        mixer === self.mixer && bus == self.bus ? self : nil
    }
}

extension AVAudioNode {
    /// The AVAudioMixing conformances' shared ``AVAudioMixing/destination(forMixer:bus:)``.
    func mixingDestination(forMixer mixer: AVAudioNode, bus: AVAudioNodeBus) -> AVAudioMixingDestination? {
        guard let mixer = mixer as? AVAudioMixerNode, let engine = attachedEngine,
            engine.mixerDestinations(of: self).contains(where: { $0.0 === mixer && $0.1 == bus })
        else { return nil }
        return AVAudioMixingDestination(source: self, mixer: mixer, bus: bus)
    }
}

/// Mixes any number of inputs (each with its volume and pan) into one output, through
/// `AUMultiChannelMixer`. Inputs must run at the output's sample rate.
open class AVAudioMixerNode: AVAudioNode, AVAudioMixing, @unchecked Sendable {
    public init() {
        super.init(unit: AudioUnitObject.make(type: kAudioUnitType_Mixer, subType: kAudioUnitSubType_MultiChannelMixer)!)
        var one: UInt32 = 1
        AudioUnitSetProperty(unit.ref, kAudioUnitProperty_ElementCount, kAudioUnitScope_Input, 0, &one, 4)
    }

    deinit { AudioUnitObject.unregister(unit) }

    /// The mixer's own output volume (0…1).
    open var outputVolume: Float {
        get {
            var v: Float = 1
            AudioUnitGetParameter(unit.ref, kMultiChannelMixerParam_Volume, kAudioUnitScope_Output, 0, &v)
            return v
        }
        set { AudioUnitSetParameter(unit.ref, kMultiChannelMixerParam_Volume, kAudioUnitScope_Output, 0, newValue, 0) }
    }

    /// The first input bus with nothing connected.
    open var nextAvailableInputBus: AVAudioNodeBus {
        guard let engine = attachedEngine else { return 0 }
        var bus = 0
        while engine.inputConnectionPoint(for: self, inputBus: bus) != nil { bus += 1 }
        return bus
    }

    /// A mixer has as many inputs as are connected, up to 64.
    open override var numberOfInputs: Int { 64 }

    /// Grows the unit's input count to `count` (the engine holds rendering meanwhile).
    func ensureInputs(_ count: Int) {
        var current: UInt32 = 0
        var size = UInt32(4)
        AudioUnitGetProperty(unit.ref, kAudioUnitProperty_ElementCount, kAudioUnitScope_Input, 0, &current, &size)
        guard Int(current) < count else { return }
        let initialized = unit.isInitialized
        if initialized { AudioUnitUninitialize(unit.ref) }
        var n = UInt32(min(count, 64))
        AudioUnitSetProperty(unit.ref, kAudioUnitProperty_ElementCount, kAudioUnitScope_Input, 0, &n, 4)
        if initialized { AudioUnitInitialize(unit.ref) }
    }

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
