import AudioToolbox
public import Foundation
import AudioHAL
import Synchronization

public typealias AVAudioNodeBus = Int
/// Called on a tap's own thread (never the render thread) with each buffer the tap heard and
/// the time of its first frame.
public typealias AVAudioNodeTapBlock = @Sendable (AVAudioPCMBuffer, AVAudioTime) -> Void
public typealias AVAudioNodeCompletionHandler = @Sendable () -> Void

/// A node of an ``AVAudioEngine``: a unit of the render graph with inputs and outputs (busses).
///
/// Every node renders through an audio unit of this library's AudioToolbox; the engine connects
/// their busses and pulls the graph from the output on the real-time thread.
open class AVAudioNode: NSObject, @unchecked Sendable {
    /// The unit that renders for this node.
    let unit: AudioUnitObject
    /// Set by ``AVAudioEngine/attach(_:)``.
    weak var attachedEngine: AVAudioEngine?
    private var taps: [AVAudioNodeBus: TapRunner] = [:]
    private let tapLock = NSLock()

    init(unit: AudioUnitObject) {
        self.unit = unit
        super.init()
    }

    deinit {
        for tap in taps.values { tap.finish() }
    }

    /// The engine the node is attached to, if any.
    open var engine: AVAudioEngine? { attachedEngine }

    open var numberOfInputs: Int { unit.lock.withLock { _ in unit.inputFormats.count } }
    open var numberOfOutputs: Int { unit.lock.withLock { _ in unit.outputFormats.count } }

    open func inputFormat(forBus bus: AVAudioNodeBus) -> AVAudioFormat {
        let bus = unitInputBus(bus)
        var d = unit.lock.withLock { _ in bus >= 0 && bus < unit.inputFormats.count ? unit.inputFormats[bus] : unit.outputFormats.first ?? AudioStreamBasicDescription() }
        return AVAudioFormat(streamDescription: &d) ?? AVAudioFormat(standardFormatWithSampleRate: 44100, channels: 2)!
    }

    open func outputFormat(forBus bus: AVAudioNodeBus) -> AVAudioFormat {
        let bus = unitOutputBus(bus)
        var d = unit.lock.withLock { _ in bus >= 0 && bus < unit.outputFormats.count ? unit.outputFormats[bus] : unit.inputFormats.first ?? AudioStreamBasicDescription() }
        return AVAudioFormat(streamDescription: &d) ?? AVAudioFormat(standardFormatWithSampleRate: 44100, channels: 2)!
    }

    open func name(forInputBus bus: AVAudioNodeBus) -> String? { bus >= 0 && bus < numberOfInputs ? "in\(bus)" : nil }
    open func name(forOutputBus bus: AVAudioNodeBus) -> String? { bus >= 0 && bus < numberOfOutputs ? "out\(bus)" : nil }

    /// Clears the node's memory of past audio (filter and delay state, a player's schedule).
    open func reset() { AudioUnitReset(unit.ref, kAudioUnitScope_Global, 0) }

    /// The time of the node's last render, in the engine's sample time; nil while not rendering.
    open var lastRenderTime: AVAudioTime? {
        guard let engine = attachedEngine, engine.isRunning || engine.isInManualRenderingMode else { return nil }
        return engine.driver.lastRenderTime()
    }

    /// The node's own processing delay, in seconds.
    open var latency: TimeInterval {
        var v = 0.0
        var size = UInt32(8)
        AudioUnitGetProperty(unit.ref, kAudioUnitProperty_Latency, kAudioUnitScope_Global, 0, &v, &size)
        return v
    }

    /// How long the node's output takes to be heard: the output's latency downstream.
    open var outputPresentationLatency: TimeInterval { attachedEngine?.outputNode.presentationLatency ?? 0 }

    /// Hears the node's output `bus`: `block` is called on the tap's own thread with buffers of
    /// `bufferSize` frames in the bus's format (the size is honoured exactly). The tap does not
    /// convert: `format` other than the bus's is not used, the buffers come in the bus's format.
    /// One tap per bus; a second install on the same bus is ignored.
    open func installTap(onBus bus: AVAudioNodeBus, bufferSize: AVAudioFrameCount, format: AVAudioFormat?, block tapBlock: @escaping AVAudioNodeTapBlock) {
        let busFormat = outputFormat(forBus: bus)
        guard bus >= 0, bus < numberOfOutputs else { return }
        tapLock.lock()
        guard taps[bus] == nil else {
            tapLock.unlock()
            return
        }
        let runner = TapRunner(format: busFormat, bufferSize: Int(max(bufferSize, 1)), block: tapBlock)
        taps[bus] = runner
        tapLock.unlock()
        let unitBus = unitOutputBus(bus)
        if let engine = attachedEngine {
            engine.rewire { unit.setTap(runner.tap, bus: unitBus) }
        } else {
            unit.setTap(runner.tap, bus: unitBus)
        }
    }

    open func removeTap(onBus bus: AVAudioNodeBus) {
        tapLock.lock()
        let runner = taps.removeValue(forKey: bus)
        tapLock.unlock()
        guard let runner else { return }
        let unitBus = unitOutputBus(bus)
        // With the engine's cycles held, no render is inside the tap when it goes.
        if let engine = attachedEngine {
            engine.rewire { unit.setTap(nil, bus: unitBus) }
        } else {
            unit.setTap(nil, bus: unitBus)
        }
        runner.finish()
    }

    /// The busses with a tap (for the engine's plan).
    var tappedBusses: [AVAudioNodeBus] {
        tapLock.lock()
        defer { tapLock.unlock() }
        return Array(taps.keys)
    }

    /// Called when the node is attached to an engine (kinds prepare what they need).
    func didAttach(to engine: AVAudioEngine) {}

    /// The unit's bus behind the node's output `bus` (the input node's is the I/O unit's 1).
    func unitOutputBus(_ bus: AVAudioNodeBus) -> Int { bus }
    /// The unit's bus behind the node's input `bus`.
    func unitInputBus(_ bus: AVAudioNodeBus) -> Int { bus }

    // MARK: Mixing (AVAudioMixing, for the kinds that conform)

    /// The volume and pan this node has at every mixer input it feeds.
    var mixVolume: Float = 1 { didSet { applyMixingEverywhere() } }
    var mixPan: Float = 0 { didSet { applyMixingEverywhere() } }
    /// Per-connection values set through ``AVAudioMixingDestination``, by mixer input.
    var destinationValues: [ObjectIdentifier: [Int: (volume: Float, pan: Float)]] = [:]

    func applyMixing(to mixer: AVAudioMixerNode, bus: Int) {
        let own = destinationValues[ObjectIdentifier(mixer)]?[bus]
        AudioUnitSetParameter(mixer.unit.ref, kMultiChannelMixerParam_Volume, kAudioUnitScope_Input, UInt32(bus), own?.volume ?? mixVolume, 0)
        AudioUnitSetParameter(mixer.unit.ref, kMultiChannelMixerParam_Pan, kAudioUnitScope_Input, UInt32(bus), own?.pan ?? mixPan, 0)
    }

    private func applyMixingEverywhere() {
        guard let engine = attachedEngine else { return }
        for (mixer, bus) in engine.mixerDestinations(of: self) {
            destinationValues[ObjectIdentifier(mixer)]?[bus] = nil
            applyMixing(to: mixer, bus: bus)
        }
    }
}

/// A tap's thread: sleeps until the render thread posts a slice, gathers `bufferSize` frames,
/// and calls the block with a fresh buffer and the time of its first frame.
final class TapRunner: @unchecked Sendable {
    let tap: RenderTap
    private let format: AVAudioFormat
    private let bufferSize: Int
    private let block: AVAudioNodeTapBlock
    private let finished = Atomic<Bool>(false)
    private let done = Wakeup()

    init(format: AVAudioFormat, bufferSize: Int, block: @escaping AVAudioNodeTapBlock) {
        self.format = format
        self.bufferSize = bufferSize
        self.block = block
        tap = RenderTap(channels: Int(format.channelCount), sampleRate: format.sampleRate)
        let thread = Thread { [self] in run() }
        thread.name = "AVAudioNode tap"
        thread.start()
    }

    func finish() {
        guard !finished.exchange(true, ordering: .acquiringAndReleasing) else { return }
        tap.wakeup.signal()
    }

    private func run() {
        nameCurrentThread("AVAudioNode tap")
        let channels = tap.channels
        let interleaved = UnsafeMutablePointer<Float>.allocate(capacity: bufferSize * channels)
        defer { interleaved.deallocate() }
        var gathered = 0
        var firstSample: Int64 = 0, firstHost: UInt64 = 0
        var expected: Int64?
        while !finished.load(ordering: .acquiring) {
            tap.wakeup.wait()
            while let slice = tap.nextSlice() {
                // A slice that does not follow the last (the tap fell behind): start afresh.
                if let e = expected, e != slice.sampleTime { gathered = 0 }
                var offset = 0
                while offset < slice.frames {
                    if gathered == 0 {
                        firstSample = slice.sampleTime + Int64(offset)
                        firstHost = slice.hostTime + UInt64(Double(offset) * 1e9 / format.sampleRate)
                    }
                    let n = min(slice.frames - offset, bufferSize - gathered)
                    let got = tap.read(into: interleaved + gathered * channels, frames: n)
                    gathered += got
                    offset += n
                    if gathered == bufferSize {
                        deliver(interleaved, frames: gathered, sample: firstSample, host: firstHost)
                        gathered = 0
                    }
                }
                expected = slice.sampleTime + Int64(slice.frames)
            }
        }
    }

    private func deliver(_ samples: UnsafeMutablePointer<Float>, frames: Int, sample: Int64, host: UInt64) {
        guard let buffer = AVAudioPCMBuffer(pcmFormat: format, frameCapacity: AVAudioFrameCount(frames)), let data = buffer.floatChannelData else { return }
        let channels = Int(format.channelCount)
        let stride = buffer.stride
        for c in 0..<channels {
            let d = data[c]
            for i in 0..<frames { d[i * stride] = samples[i * channels + c] }
        }
        buffer.frameLength = AVAudioFrameCount(frames)
        block(buffer, AVAudioTime(hostTime: host, sampleTime: sample, atRate: format.sampleRate))
    }
}
