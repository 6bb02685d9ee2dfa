public import AudioToolbox
public import Foundation
import CoreAudio
import Synchronization

public enum AVAudioEngineManualRenderingMode: Int, Sendable {
    case offline = 0
    case realtime = 1
}

public enum AVAudioEngineManualRenderingStatus: Int, Sendable {
    case error = -1
    case success = 0
    case insufficientDataFromInputNode = 1
    case cannotDoInCurrentContext = 2
}

public enum AVAudioEngineManualRenderingError: Int, Sendable {
    case invalidMode = -80800
    case initialized = -80801
    case notRunning = -80802
}

public typealias AVAudioEngineManualRenderingBlock = (
    _ numberOfFrames: AVAudioFrameCount, _ outputData: UnsafeMutablePointer<AudioBufferList>, _ outError: UnsafeMutablePointer<OSStatus>?
) -> AVAudioEngineManualRenderingStatus

extension NSNotification.Name {
    /// Posted when the engine's output or input device changes (the default device, or the
    /// device went away); the engine has stopped. Start it again to play on the new device.
    public static let AVAudioEngineConfigurationChange = NSNotification.Name("AVAudioEngineConfigurationChangeNotification")
}

/// Where a connection goes: a node and one of its busses.
open class AVAudioConnectionPoint: NSObject, @unchecked Sendable {
    open private(set) weak var node: AVAudioNode?
    public let bus: AVAudioNodeBus
    public init(node: AVAudioNode, bus: AVAudioNodeBus) {
        self.node = node
        self.bus = bus
        super.init()
    }
}

/// A graph of audio nodes rendered together: sources (players, source nodes, the input) through
/// effects and mixers to the output, pulled on a real-time thread when the server asks, in
/// slices of at most the I/O buffer (the audio session's preferred I/O buffer duration, else its
/// default 20 ms), or rendered by the caller in manual rendering mode.
///
/// Rewiring a running engine (connect, disconnect, attach, detach, taps) holds the render
/// thread for the moment it takes: the output is silent for that cycle.
open class AVAudioEngine: NSObject, @unchecked Sendable {
    private struct BusKey: Hashable {
        let node: ObjectIdentifier
        let bus: Int
    }

    private let lock = NSRecursiveLock()
    private var nodes: [ObjectIdentifier: AVAudioNode] = [:]
    /// Each connected input (destination node and bus) and its source.
    private var sources: [BusKey: (node: AVAudioNode, bus: Int)] = [:]
    let driver = EngineDriver()
    /// Renders the chains that start at the input node and end short of the output (taps, sink
    /// nodes) on the recording stream's thread, as each I/O buffer of input arrives (the I/O
    /// unit's input callback). Pulled by the output instead, they would hear the input through
    /// the play-through reader, which fills with silence whenever the input comes later than the
    /// output asks: a gap in what a tap records.
    let inputDriver = EngineDriver()
    /// Whether the installed plan has chains for ``inputDriver`` (the I/O unit's input callback is set).
    private var inputDriven = false
    private var prepared = false
    private var running = false
    private var manualMode: AVAudioEngineManualRenderingMode?
    private var manualFormat: AVAudioFormat?
    private var manualMaximumFrames: AVAudioFrameCount = 0
    /// The manual rendering sample time and whether manual renders may run: atomics, for the
    /// real-time block, which takes no lock.
    private let manualSample = Atomic<Int64>(0)
    private let rendersManually = Atomic<Bool>(false)
    private var deviceListener: AudioObjectPropertyListenerBlock?
    private let listenerQueue = DispatchQueue(label: "AVAudioEngine configuration")

    public override init() {
        super.init()
    }

    deinit {
        if let unit = madeIOUnit {
            if running { AudioOutputUnitStop(unit.ref) }
            AudioUnitObject.unregister(unit)
        }
        removeDeviceListener()
        for node in nodes.values {
            node.attachedEngine = nil
        }
    }

    private var madeIOUnit: AudioUnitObject?

    /// The I/O unit both I/O nodes stand on (RemoteIO), made on first use.
    var ioUnit: AudioUnitObject {
        if let unit = madeIOUnit { return unit }
        let unit = AudioUnitObject.make(type: kAudioUnitType_Output, subType: kAudioUnitSubType_RemoteIO)!
        var cb = AURenderCallbackStruct(inputProc: EngineDriver.callback, inputProcRefCon: Unmanaged.passUnretained(driver).toOpaque())
        AudioUnitSetProperty(unit.ref, kAudioUnitProperty_SetRenderCallback, kAudioUnitScope_Input, 0, &cb, UInt32(MemoryLayout<AURenderCallbackStruct>.size))
        madeIOUnit = unit
        return unit
    }

    // MARK: The three nodes every engine has

    private var _outputNode: AVAudioOutputNode?
    private var _inputNode: AVAudioInputNode?
    private var _mainMixerNode: AVAudioMixerNode?

    open var outputNode: AVAudioOutputNode {
        lock.lock()
        defer { lock.unlock() }
        if let node = _outputNode { return node }
        let node = AVAudioOutputNode(unit: ioUnit)
        _outputNode = node
        attachLocked(node)
        return node
    }

    /// The microphone (the default input, or the session's preferred one). Asking for it turns
    /// the input on: the engine records from then on when it runs.
    open var inputNode: AVAudioInputNode {
        lock.lock()
        defer { lock.unlock() }
        if let node = _inputNode { return node }
        _ = outputNode
        let node = AVAudioInputNode(unit: ioUnit)
        reconfigure(touchingIO: true) {
            var on: UInt32 = 1
            let wasInitialized = ioUnit.isInitialized
            if wasInitialized { AudioUnitUninitialize(ioUnit.ref) }
            AudioUnitSetProperty(ioUnit.ref, kAudioOutputUnitProperty_EnableIO, kAudioUnitScope_Input, 1, &on, 4)
            if wasInitialized { AudioUnitInitialize(ioUnit.ref) }
        }
        _inputNode = node
        attachLocked(node)
        return node
    }

    /// Voice processing on the engine's I/O (``AVAudioIONode/setVoiceProcessingEnabled(_:)``):
    /// both I/O nodes at once, the input turned on (when turning it on), the engine stopped.
    func setVoiceProcessing(_ on: Bool) throws {
        // Turning it on turns the microphone on; turning it off touches nothing else.
        if on { _ = inputNode }
        lock.lock()
        defer { lock.unlock() }
        guard !running else { throw statusError(kAudioUnitErr_CannotDoInCurrentContext, "setVoiceProcessingEnabled: the engine is running") }
        guard let unit = madeIOUnit else { return }
        var status = noErr
        reconfigure {
            let wasInitialized = unit.isInitialized
            if wasInitialized { AudioUnitUninitialize(unit.ref) }
            status = unit.setVoiceProcessing(on)
            if wasInitialized { AudioUnitInitialize(unit.ref) }
        }
        guard status == noErr else { throw statusError(status, "setVoiceProcessingEnabled: the I/O unit refused") }
    }

    var isVoiceProcessing: Bool {
        lock.lock()
        defer { lock.unlock() }
        return madeIOUnit?.isVoiceProcessing ?? false
    }

    /// A mixer connected to the output, made on first use, in the output's sample rate with two
    /// channels (or the manual rendering format).
    open var mainMixerNode: AVAudioMixerNode {
        lock.lock()
        defer { lock.unlock() }
        if let node = _mainMixerNode { return node }
        let node = AVAudioMixerNode()
        _mainMixerNode = node
        attachLocked(node)
        let output = outputNode
        let format = manualFormat ?? AVAudioFormat(standardFormatWithSampleRate: output.outputFormat(forBus: 0).sampleRate, channels: 2)!
        connect(node, to: output, fromBus: 0, toBus: 0, format: format)
        return node
    }

    open var isRunning: Bool {
        lock.lock()
        defer { lock.unlock() }
        return running
    }

    /// Kept for source compatibility; this engine never shuts itself down while idle.
    open var isAutoShutdownEnabled: Bool = false

    open var attachedNodes: Set<AVAudioNode> {
        lock.lock()
        defer { lock.unlock() }
        return Set(nodes.values)
    }

    // MARK: Attaching and connecting

    open func attach(_ node: AVAudioNode) {
        lock.lock()
        defer { lock.unlock() }
        attachLocked(node)
    }

    private func attachLocked(_ node: AVAudioNode) {
        guard nodes[ObjectIdentifier(node)] == nil else { return }
        precondition(node.attachedEngine == nil, "AVAudioEngine.attach: the node is attached to another engine")
        nodes[ObjectIdentifier(node)] = node
        node.attachedEngine = self
        node.didAttach(to: self)
        // In manual rendering, a node renders up to the manual maximum, however late it came.
        if manualMode != nil && node.unit !== madeIOUnit {
            var frames = manualMaximumFrames
            let wasInitialized = node.unit.isInitialized
            if wasInitialized { AudioUnitUninitialize(node.unit.ref) }
            AudioUnitSetProperty(node.unit.ref, kAudioUnitProperty_MaximumFramesPerSlice, kAudioUnitScope_Global, 0, &frames, 4)
            if wasInitialized { AudioUnitInitialize(node.unit.ref) }
        }
        if prepared { reconfigure { AudioUnitInitialize(node.unit.ref) } }
    }

    open func detach(_ node: AVAudioNode) {
        lock.lock()
        defer { lock.unlock() }
        guard nodes[ObjectIdentifier(node)] != nil, node !== _outputNode, node !== _inputNode, node !== _mainMixerNode else { return }
        reconfigure {
            disconnectLocked(input: node, bus: nil)
            disconnectLocked(output: node, bus: nil)
            nodes[ObjectIdentifier(node)] = nil
            node.attachedEngine = nil
            if let player = node as? AVAudioPlayerNode { player.engineStopped() }
        }
    }

    open func connect(_ node1: AVAudioNode, to node2: AVAudioNode, format: AVAudioFormat?) {
        let bus = (node2 as? AVAudioMixerNode)?.nextAvailableInputBus ?? 0
        connect(node1, to: node2, fromBus: 0, toBus: bus, format: format)
    }

    /// Connects output `bus1` of `node1` to input `bus2` of `node2` in `format` (nil: node1's
    /// output format). An input takes one connection and this call makes the output bus's only
    /// one: what either had before is replaced. Both nodes must be attached.
    open func connect(_ node1: AVAudioNode, to node2: AVAudioNode, fromBus bus1: AVAudioNodeBus, toBus bus2: AVAudioNodeBus, format: AVAudioFormat?) {
        lock.lock()
        defer { lock.unlock() }
        precondition(nodes[ObjectIdentifier(node1)] != nil && nodes[ObjectIdentifier(node2)] != nil, "AVAudioEngine.connect: both nodes must be attached")
        let format = format ?? node1.outputFormat(forBus: bus1)
        let touchingIO = node1.unit === madeIOUnit || node2.unit === madeIOUnit
        reconfigure(touchingIO: touchingIO) {
            disconnectLocked(output: node1, bus: bus1)
            connectLocked(node1, to: node2, fromBus: bus1, toBus: bus2, format: format)
        }
    }

    /// Connects `sourceNode`'s output bus to every point (one to many): the bus's connections
    /// become these. The source renders once per cycle and each destination hears the same
    /// audio, as long as the destinations pull it for the same time (a time effect or a
    /// converter pulls its own: a source shared with one renders again for it, and a player's
    /// schedule then moves on twice a cycle).
    open func connect(_ sourceNode: AVAudioNode, to destNodes: [AVAudioConnectionPoint], fromBus sourceBus: AVAudioNodeBus, format: AVAudioFormat?) {
        lock.lock()
        defer { lock.unlock() }
        let points = destNodes.compactMap { point in point.node.map { ($0, point.bus) } }
        precondition(nodes[ObjectIdentifier(sourceNode)] != nil && points.allSatisfy { nodes[ObjectIdentifier($0.0)] != nil },
                     "AVAudioEngine.connect: every node must be attached")
        let format = format ?? sourceNode.outputFormat(forBus: sourceBus)
        let touchingIO = sourceNode.unit === madeIOUnit || points.contains { $0.0.unit === madeIOUnit }
        reconfigure(touchingIO: touchingIO) {
            disconnectLocked(output: sourceNode, bus: sourceBus)
            for (node, bus) in points { connectLocked(sourceNode, to: node, fromBus: sourceBus, toBus: bus, format: format) }
        }
    }

    /// One connection, with the engine's lock held and no cycle running; `node1`'s other
    /// connections from `bus1` stay.
    private func connectLocked(_ node1: AVAudioNode, to node2: AVAudioNode, fromBus bus1: AVAudioNodeBus, toBus bus2: AVAudioNodeBus, format: AVAudioFormat) {
        disconnectLocked(input: node2, bus: bus2)
        var asbd = format.streamDescription.pointee
        let size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
        let sourceBus = node1.unitOutputBus(bus1), destinationBus = node2.unitInputBus(bus2)
        if let mixer = node2 as? AVAudioMixerNode { mixer.ensureInputs(destinationBus + 1) }
        for unit in [node1.unit, node2.unit] where unit.isInitialized { AudioUnitUninitialize(unit.ref) }
        var statuses = [AudioUnitSetProperty(node1.unit.ref, kAudioUnitProperty_StreamFormat, kAudioUnitScope_Output, UInt32(sourceBus), &asbd, size)]
        if node1.unit.isInPlaceEffect {
            statuses.append(AudioUnitSetProperty(node1.unit.ref, kAudioUnitProperty_StreamFormat, kAudioUnitScope_Input, 0, &asbd, size))
        }
        statuses.append(AudioUnitSetProperty(node2.unit.ref, kAudioUnitProperty_StreamFormat, kAudioUnitScope_Input, UInt32(destinationBus), &asbd, size))
        if node2.unit.isInPlaceEffect {
            statuses.append(AudioUnitSetProperty(node2.unit.ref, kAudioUnitProperty_StreamFormat, kAudioUnitScope_Output, 0, &asbd, size))
        }
        // Apple raises on a format a node cannot take; here the connection is not made, and
        // says why (the nodes render in the engine's standard format: 32-bit float,
        // non-interleaved).
        if let refused = statuses.first(where: { $0 != noErr && $0 != kAudioUnitErr_PropertyNotWritable }) {
            FileHandle.standardError.write(Data("AVAudioEngine.connect: \(format) cannot connect \(type(of: node1)) to \(type(of: node2)) (\(refused)); the nodes are not connected\n".utf8))
            if prepared { for unit in [node1.unit, node2.unit] { AudioUnitInitialize(unit.ref) } }
            return
        }
        if node2 !== _outputNode {
            var connection = AudioUnitConnection(sourceAudioUnit: node1.unit.ref, sourceOutputNumber: UInt32(sourceBus), destInputNumber: UInt32(destinationBus))
            AudioUnitSetProperty(node2.unit.ref, kAudioUnitProperty_MakeConnection, kAudioUnitScope_Input, UInt32(destinationBus), &connection, UInt32(MemoryLayout<AudioUnitConnection>.size))
        }
        sources[BusKey(node: ObjectIdentifier(node2), bus: bus2)] = (node1, bus1)
        if let mixer = node2 as? AVAudioMixerNode { node1.applyMixing(to: mixer, bus: destinationBus) }
        if prepared {
            for unit in [node1.unit, node2.unit] { AudioUnitInitialize(unit.ref) }
        }
    }

    open func disconnectNodeInput(_ node: AVAudioNode, bus: AVAudioNodeBus) {
        lock.lock()
        defer { lock.unlock() }
        reconfigure { disconnectLocked(input: node, bus: bus) }
    }

    open func disconnectNodeInput(_ node: AVAudioNode) {
        lock.lock()
        defer { lock.unlock() }
        reconfigure { disconnectLocked(input: node, bus: nil) }
    }

    open func disconnectNodeOutput(_ node: AVAudioNode, bus: AVAudioNodeBus) {
        lock.lock()
        defer { lock.unlock() }
        reconfigure { disconnectLocked(output: node, bus: bus) }
    }

    open func disconnectNodeOutput(_ node: AVAudioNode) {
        lock.lock()
        defer { lock.unlock() }
        reconfigure { disconnectLocked(output: node, bus: nil) }
    }

    open func inputConnectionPoint(for node: AVAudioNode, inputBus bus: AVAudioNodeBus) -> AVAudioConnectionPoint? {
        lock.lock()
        defer { lock.unlock() }
        return sources[BusKey(node: ObjectIdentifier(node), bus: bus)].map { AVAudioConnectionPoint(node: $0.node, bus: $0.bus) }
    }

    open func outputConnectionPoints(for node: AVAudioNode, outputBus bus: AVAudioNodeBus) -> [AVAudioConnectionPoint] {
        lock.lock()
        defer { lock.unlock() }
        return sources.compactMap { key, source in
            guard source.node === node, source.bus == bus, let destination = nodes[key.node] else { return nil }
            return AVAudioConnectionPoint(node: destination, bus: key.bus)
        }
    }

    private func disconnectLocked(input node: AVAudioNode, bus: AVAudioNodeBus?) {
        for (key, _) in sources where key.node == ObjectIdentifier(node) && (bus == nil || key.bus == bus) {
            sources[key] = nil
            if node !== _outputNode {
                var none = AudioUnitConnection(sourceAudioUnit: nil, sourceOutputNumber: 0, destInputNumber: UInt32(node.unitInputBus(key.bus)))
                AudioUnitSetProperty(node.unit.ref, kAudioUnitProperty_MakeConnection, kAudioUnitScope_Input, UInt32(node.unitInputBus(key.bus)), &none, UInt32(MemoryLayout<AudioUnitConnection>.size))
            }
        }
    }

    private func disconnectLocked(output node: AVAudioNode, bus: AVAudioNodeBus?) {
        for (key, source) in sources where source.node === node && (bus == nil || source.bus == bus) {
            guard let destination = nodes[key.node] else {
                sources[key] = nil
                continue
            }
            disconnectLocked(input: destination, bus: key.bus)
        }
    }

    /// The mixer inputs `node` feeds (for its volume and pan).
    func mixerDestinations(of node: AVAudioNode) -> [(AVAudioMixerNode, Int)] {
        lock.lock()
        defer { lock.unlock() }
        return sources.compactMap { key, source in
            guard source.node === node, let mixer = nodes[key.node] as? AVAudioMixerNode else { return nil }
            return (mixer, key.bus)
        }
    }

    /// Runs `body` (a node's change: a tap) with no render cycle in progress, and renews the plan.
    func rewire(_ body: () -> Void) {
        lock.lock()
        defer { lock.unlock() }
        reconfigure(body)
    }

    /// Runs `body` now if nothing renders (the engine stopped or paused), under the engine's
    /// lock so that a start waits for it; false when the engine renders (its render side will).
    func whileNotRendering(_ body: () -> Void) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        // Offline renders run on the app's thread under this lock, so they too are excluded.
        guard !running || manualMode == .offline || driver.cyclesHeld else { return false }
        body()
        return true
    }

    /// Runs a change with no render cycle in progress, then renews the plan. A change to the I/O
    /// unit's formats (a connection to or from an I/O node) restarts its streams when running.
    private func reconfigure(touchingIO: Bool = false, _ body: () -> Void) {
        inputDriver.withCyclesHeld {
            driver.withCyclesHeld {
                let restart = touchingIO && running && manualMode == nil
                if restart { AudioOutputUnitStop(ioUnit.ref) }
                body()
                if prepared { installPlan() }
                if restart && AudioOutputUnitStart(ioUnit.ref) != noErr { stopRendering() }
            }
        }
    }

    /// Whether `node`'s output reaches back to the input node (the node itself included).
    private func hearsInput(_ node: AVAudioNode) -> Bool {
        guard let input = _inputNode, manualMode == nil else { return false }
        var stack = [node]
        var seen = Set<ObjectIdentifier>()
        while let current = stack.popLast() {
            if current === input { return true }
            guard seen.insert(ObjectIdentifier(current)).inserted else { continue }
            for (key, source) in sources where key.node == ObjectIdentifier(current) { stack.append(source.node) }
        }
        return false
    }

    /// What a cycle pulls: the unit feeding the output, tapped chains that end elsewhere, sinks.
    private func installPlan() {
        var root: (AudioUnitObject, Int)?
        if let output = _outputNode, let source = sources[BusKey(node: ObjectIdentifier(output), bus: 0)] {
            root = (source.node.unit, source.node.unitOutputBus(source.bus))
        }
        // From each tap, follow the connections downstream: a chain that ends short of the
        // output is pulled on its own, so that its taps hear.
        var ends: [(AudioUnitObject, Int, Int)] = []
        var inputEnds: [(AudioUnitObject, Int, Int)] = []
        var seen = Set<BusKey>()
        for node in nodes.values {
            for bus in node.tappedBusses {
                var current = (node: node, bus: bus)
                var steps = 0
                while let next = sources.first(where: { $0.value.node === current.node && $0.value.bus == current.bus }), steps < 64 {
                    guard let destination = nodes[next.key.node] else { break }
                    current = (destination, 0)
                    steps += 1
                }
                guard current.node !== _outputNode, !(current.node is AVAudioSinkNode) else { continue }
                let key = BusKey(node: ObjectIdentifier(current.node), bus: current.bus)
                guard seen.insert(key).inserted, current.node.numberOfOutputs > current.bus else { continue }
                let channels = Int(current.node.outputFormat(forBus: current.bus).channelCount)
                let end = (current.node.unit, current.node.unitOutputBus(current.bus), channels)
                if hearsInput(current.node) { inputEnds.append(end) } else { ends.append(end) }
            }
        }
        var sinks: [SinkBlockUnit] = [], inputSinks: [SinkBlockUnit] = []
        for case let sink as AVAudioSinkNode in nodes.values {
            if hearsInput(sink) { inputSinks.append(sink.sinkUnit) } else { sinks.append(sink.sinkUnit) }
        }
        // An output bus that feeds several inputs renders once per cycle. Counted per unit bus:
        // the input and output nodes stand on one I/O unit.
        var fanOut: [BusKey: Int] = [:]
        for source in sources.values {
            fanOut[BusKey(node: ObjectIdentifier(source.node.unit), bus: source.node.unitOutputBus(source.bus)), default: 0] += 1
        }
        var units = Set<ObjectIdentifier>()
        for node in nodes.values where units.insert(ObjectIdentifier(node.unit)).inserted {
            let busCount = node.unit.lock.withLock { _ in node.unit.outputFormats.count }
            for bus in 0..<busCount {
                node.unit.setShared((fanOut[BusKey(node: ObjectIdentifier(node.unit), bus: bus)] ?? 0) > 1, bus: bus)
            }
        }
        driver.install(EngineDriver.Plan(root: root, ends: ends, sinks: sinks))
        inputDriver.install(EngineDriver.Plan(root: nil, ends: inputEnds, sinks: inputSinks))
        let wantsInput = !(inputEnds.isEmpty && inputSinks.isEmpty)
        if wantsInput != inputDriven, let unit = madeIOUnit {
            inputDriven = wantsInput
            var cb = AURenderCallbackStruct(
                inputProc: wantsInput ? EngineDriver.callback : nil, inputProcRefCon: wantsInput ? Unmanaged.passUnretained(inputDriver).toOpaque() : nil)
            AudioUnitSetProperty(unit.ref, kAudioOutputUnitProperty_SetInputCallback, kAudioUnitScope_Global, 0, &cb, UInt32(MemoryLayout<AURenderCallbackStruct>.size))
            // A chain that starts hearing the input mid-run hears it from now, not the backlog
            // that waited while no one read it.
            if wantsInput { unit.discardInputBacklog() }
        }
        inputDriver.rendering.store(running && manualMode == nil && inputDriven, ordering: .releasing)
    }

    // MARK: Running

    /// Makes every node ready to render (buffers for its formats).
    open func prepare() {
        lock.lock()
        defer { lock.unlock() }
        prepareLocked()
    }

    private func prepareLocked() {
        if _mainMixerNode == nil && manualMode == nil { _ = mainMixerNode }
        for node in nodes.values where !node.unit.isInitialized { AudioUnitInitialize(node.unit.ref) }
        driver.sampleRate = outputNode.inputFormat(forBus: 0).sampleRate
        prepared = true
        reconfigure {}
    }

    /// Starts rendering: the output pulls the graph from now on (or, in manual rendering mode,
    /// the engine is ready for ``renderOffline(_:to:)``). Throws when the server refuses.
    open func start() throws {
        lock.lock()
        defer { lock.unlock() }
        guard !running else { return }
        if _mainMixerNode == nil && manualMode == nil { _ = mainMixerNode }
        if !prepared { prepareLocked() }
        for node in nodes.values where !node.unit.isInitialized {
            let status = AudioUnitInitialize(node.unit.ref)
            guard status == noErr else { throw statusError(status, "AVAudioEngine.start: a node cannot render in its format") }
        }
        for case let player as AVAudioPlayerNode in nodes.values { player.rendersOffline(manualMode == .offline) }
        // Sample times start again: a shared bus's last render is not this cycle's.
        for node in nodes.values { node.unit.forgetSharedRenders() }
        // Real-time manual rendering renders on the app's real-time thread: rewiring holds it at
        // the gate as it holds the output's.
        if manualMode == .realtime { driver.rendering.store(true, ordering: .releasing) }
        if manualMode == nil {
            driver.rendering.store(true, ordering: .releasing)
            inputDriver.rendering.store(inputDriven, ordering: .releasing)
            // Read before the streams open: a change from here on is one the engine hears of.
            startedOn = Self.defaultDevices()
            let status = AudioOutputUnitStart(ioUnit.ref)
            guard status == noErr else {
                driver.rendering.store(false, ordering: .releasing)
                inputDriver.rendering.store(false, ordering: .releasing)
                throw statusError(status, "AVAudioEngine.start: the output cannot start")
            }
            addDeviceListener()
        }
        running = true
        rendersManually.store(manualMode != nil, ordering: .releasing)
    }

    /// Stops rendering; nodes keep their state and schedules, so ``start()`` goes on from here.
    open func pause() {
        lock.lock()
        defer { lock.unlock() }
        stopRendering()
    }

    /// Stops rendering and lets go of what rendering needed; players stop.
    open func stop() {
        lock.lock()
        defer { lock.unlock() }
        stopRendering()
        for node in nodes.values {
            (node as? AVAudioPlayerNode)?.engineStopped()
            if node.unit.isInitialized { AudioUnitUninitialize(node.unit.ref) }
        }
        prepared = false
        driver.resetTime()
    }

    private func stopRendering() {
        guard running else { return }
        running = false
        rendersManually.store(false, ordering: .releasing)
        if manualMode == .realtime { driver.rendering.store(false, ordering: .releasing) }
        if manualMode == nil {
            AudioOutputUnitStop(ioUnit.ref)
            driver.rendering.store(false, ordering: .releasing)
            inputDriver.rendering.store(false, ordering: .releasing)
            removeDeviceListener()
        }
        driver.releaseRetired()
        inputDriver.releaseRetired()
    }

    /// Resets every node (filter and delay memory, players' schedules).
    open func reset() {
        lock.lock()
        defer { lock.unlock() }
        reconfigure {
            for node in nodes.values {
                if let player = node as? AVAudioPlayerNode { player.stopWithCyclesHeld() }
                AudioUnitReset(node.unit.ref, kAudioUnitScope_Global, 0)
            }
        }
    }

    // MARK: Device changes

    /// The default output and input the engine started on.
    private var startedOn: [AudioObjectID] = []

    /// The default output and input devices now (the device API's IDs).
    private static func defaultDevices() -> [AudioObjectID] {
        [kAudioHardwarePropertyDefaultOutputDevice, kAudioHardwarePropertyDefaultInputDevice].map { selector in
            var address = AudioObjectPropertyAddress(mSelector: selector, mScope: kAudioObjectPropertyScopeGlobal, mElement: kAudioObjectPropertyElementMain)
            var device = AudioObjectID(kAudioObjectUnknown)
            var size = UInt32(MemoryLayout<AudioObjectID>.size)
            AudioObjectGetPropertyData(AudioObjectID(kAudioObjectSystemObject), &address, 0, nil, &size, &device)
            return device
        }
    }

    private func addDeviceListener() {
        guard deviceListener == nil else { return }
        let listener: AudioObjectPropertyListenerBlock = { [weak self] _, _ in self?.devicesChanged() }
        deviceListener = listener
        for selector in [kAudioHardwarePropertyDefaultOutputDevice, kAudioHardwarePropertyDefaultInputDevice] {
            var address = AudioObjectPropertyAddress(mSelector: selector, mScope: kAudioObjectPropertyScopeGlobal, mElement: kAudioObjectPropertyElementMain)
            AudioObjectAddPropertyListenerBlock(AudioObjectID(kAudioObjectSystemObject), &address, listenerQueue, listener)
        }
    }

    private func removeDeviceListener() {
        guard let listener = deviceListener else { return }
        deviceListener = nil
        for selector in [kAudioHardwarePropertyDefaultOutputDevice, kAudioHardwarePropertyDefaultInputDevice] {
            var address = AudioObjectPropertyAddress(mSelector: selector, mScope: kAudioObjectPropertyScopeGlobal, mElement: kAudioObjectPropertyElementMain)
            AudioObjectRemovePropertyListenerBlock(AudioObjectID(kAudioObjectSystemObject), &address, listenerQueue, listener)
        }
    }

    /// The default device changed under a running engine: it stops, as Apple's does, and says so.
    /// A notification that leaves the defaults the engine started on (one that was on its way
    /// when the engine started) changes nothing.
    private func devicesChanged() {
        // Read before the lock: the device API may ask the server.
        let now = Self.defaultDevices()
        lock.lock()
        let wasRunning = running && now != startedOn
        if wasRunning { stopRendering() }
        lock.unlock()
        guard wasRunning else { return }
        NotificationCenter.default.post(name: .AVAudioEngineConfigurationChange, object: self)
    }

    // MARK: Manual rendering

    /// Renders for the caller instead of the device: `.offline` through ``renderOffline(_:to:)``
    /// as fast as the caller asks, `.realtime` through ``manualRenderingBlock`` from the caller's
    /// own real-time thread. The engine must be stopped. The input node is not available in
    /// manual rendering mode here (`setManualRenderingInputPCMFormat` is not implemented).
    open func enableManualRenderingMode(_ mode: AVAudioEngineManualRenderingMode, format pcmFormat: AVAudioFormat, maximumFrameCount: AVAudioFrameCount) throws {
        lock.lock()
        defer { lock.unlock() }
        guard !running else { throw statusError(OSStatus(AVAudioEngineManualRenderingError.initialized.rawValue), "the engine is running") }
        guard pcmFormat.commonFormat == .pcmFormatFloat32, maximumFrameCount > 0, maximumFrameCount <= 1 << 16 else {
            throw statusError(kAudioUnitErr_FormatNotSupported, "manual rendering takes 32-bit float formats and up to 65536 frames")
        }
        manualMode = mode
        manualFormat = pcmFormat
        manualMaximumFrames = maximumFrameCount
        manualMaximumFrameLimit.store(maximumFrameCount, ordering: .relaxed)
        manualSample.store(0, ordering: .relaxed)
        reconfigure {
            for node in nodes.values where node.unit.isInitialized { AudioUnitUninitialize(node.unit.ref) }
            prepared = false
            for node in nodes.values {
                var frames = maximumFrameCount
                AudioUnitSetProperty(node.unit.ref, kAudioUnitProperty_MaximumFramesPerSlice, kAudioUnitScope_Global, 0, &frames, 4)
            }
        }
        let output = outputNode
        if let mixer = _mainMixerNode {
            connect(mixer, to: output, fromBus: 0, toBus: 0, format: pcmFormat)
        } else {
            var asbd = pcmFormat.streamDescription.pointee
            AudioUnitSetProperty(ioUnit.ref, kAudioUnitProperty_StreamFormat, kAudioUnitScope_Input, 0, &asbd, UInt32(MemoryLayout<AudioStreamBasicDescription>.size))
        }
        driver.sampleRate = pcmFormat.sampleRate
    }

    open func disableManualRenderingMode() {
        lock.lock()
        defer { lock.unlock() }
        guard manualMode != nil else { return }
        stopRendering()
        manualMode = nil
        manualFormat = nil
        for node in nodes.values where node.unit.isInitialized { AudioUnitUninitialize(node.unit.ref) }
        prepared = false
    }

    open var isInManualRenderingMode: Bool { lock.withLock { manualMode != nil } }
    open var manualRenderingMode: AVAudioEngineManualRenderingMode { lock.withLock { manualMode ?? .offline } }
    open var manualRenderingFormat: AVAudioFormat { lock.withLock { manualFormat ?? outputNode.inputFormat(forBus: 0) } }
    open var manualRenderingMaximumFrameCount: AVAudioFrameCount { lock.withLock { manualMaximumFrames } }
    open var manualRenderingSampleTime: AVAudioFramePosition { manualSample.load(ordering: .relaxed) }

    /// Renders `numberOfFrames` frames of the graph into `buffer` (in the manual rendering
    /// format) on the caller's thread.
    open func renderOffline(_ numberOfFrames: AVAudioFrameCount, to buffer: AVAudioPCMBuffer) throws -> AVAudioEngineManualRenderingStatus {
        lock.lock()
        defer { lock.unlock() }
        guard manualMode == .offline, let format = manualFormat else {
            throw statusError(OSStatus(AVAudioEngineManualRenderingError.invalidMode.rawValue), "the engine is not in offline manual rendering mode")
        }
        guard running else { throw statusError(OSStatus(AVAudioEngineManualRenderingError.notRunning.rawValue), "the engine is not running") }
        guard numberOfFrames <= manualMaximumFrames, numberOfFrames <= buffer.frameCapacity, buffer.format.isEqual(format) else {
            throw statusError(kAudio_ParamError, "renderOffline: more frames than the maximum or the buffer holds, or a buffer not in the manual rendering format")
        }
        var status = noErr
        let result = renderManual(numberOfFrames, into: buffer.mutableAudioBufferList, status: &status)
        buffer.frameLength = result == .success ? numberOfFrames : 0
        if result == .error { throw statusError(status, "renderOffline: a node failed to render") }
        return result
    }

    private func renderManual(_ frames: AVAudioFrameCount, into list: UnsafeMutablePointer<AudioBufferList>, status: inout OSStatus) -> AVAudioEngineManualRenderingStatus {
        guard rendersManually.load(ordering: .acquiring), frames <= manualMaximumFrameLimit.load(ordering: .relaxed) else {
            status = kAudioUnitErr_CannotDoInCurrentContext
            return .cannotDoInCurrentContext
        }
        let sample = manualSample.load(ordering: .relaxed)
        var time = AudioTimeStamp()
        time.mSampleTime = Double(sample)
        time.mHostTime = UInt64(Double(sample) / driver.sampleRate * 1e9)
        time.mRateScalar = 1
        time.mFlags = [.sampleTimeValid, .hostTimeValid, .rateScalarValid]
        let buffers = UnsafeMutableAudioBufferListPointer(list)
        for b in 0..<buffers.count { buffers[b].mDataByteSize = frames * 4 }
        var flags = AudioUnitRenderActionFlags()
        status = driver.render(flags: &flags, time: &time, frames: Int(frames), data: list)
        manualSample.store(sample + AVAudioFramePosition(frames), ordering: .relaxed)
        return status == noErr ? .success : .error
    }

    private let manualMaximumFrameLimit = Atomic<UInt32>(0)

    /// For `.realtime` manual rendering: render from the caller's real-time thread, which takes
    /// no lock and counts no references (the engine must outlive the block, as on Apple's
    /// platforms). `.cannotDoInCurrentContext` while the engine is not running.
    open var manualRenderingBlock: AVAudioEngineManualRenderingBlock {
        let me = Unmanaged.passUnretained(self)
        return { frames, data, error in
            me._withUnsafeGuaranteedRef { engine in
                var status = noErr
                let result = engine.renderManual(frames, into: data, status: &status)
                error?.pointee = status
                return result
            }
        }
    }
}
