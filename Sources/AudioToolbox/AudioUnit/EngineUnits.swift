import AudioGraph
package import AudioHAL
internal import CAudioQueueTypes
package import CoreAudioTypes
package import Foundation
import Synchronization

/// The unit behind `AVAudioSourceNode`: its output is what the user's render block writes.
/// The block runs on the render thread, as Apple documents it.
package final class SourceBlockUnit: AudioUnitObject, @unchecked Sendable {
    package typealias Block = (
        _ isSilence: UnsafeMutablePointer<ObjCBool>, _ timestamp: UnsafePointer<AudioTimeStamp>, _ frameCount: UInt32,
        _ outputData: UnsafeMutablePointer<AudioBufferList>
    ) -> OSStatus

    private final class Box {
        let block: Block
        init(_ block: @escaping Block) { self.block = block }
    }

    private let box: Box
    private let silence = UnsafeMutablePointer<ObjCBool>.allocate(capacity: 1)

    package init(format: AudioStreamBasicDescription, block: @escaping Block) {
        box = Box(block)
        silence.initialize(to: false)
        super.init(component: Self.entry, inputs: 0, outputs: 1, format: format, parameters: [])
    }

    deinit { silence.deallocate() }

    static let entry = AudioComponentEntry(kAudioUnitType_Generator, fourCC("srcn"), "Apple: AVAudioSourceNode") { _ in
        fatalError("made by AVAudioSourceNode only")
    }

    override package func renderOutput(
        flags: UnsafeMutablePointer<AudioUnitRenderActionFlags>, time: UnsafePointer<AudioTimeStamp>, bus: UInt32, frames: Int,
        output: UnsafeMutablePointer<AudioBufferList>
    ) -> OSStatus {
        silence.pointee = false
        let status = Unmanaged.passUnretained(box)._withUnsafeGuaranteedRef { $0.block(silence, time, UInt32(frames), output) }
        if silence.pointee.boolValue { flags.pointee.insert(.unitRenderAction_OutputIsSilence) }
        return status
    }
}

/// The unit behind `AVAudioSinkNode`: pulls its input each cycle and hands it to the user's
/// receiver block on the render thread, as Apple documents it. It has no output; the engine pulls
/// it through ``pullAsRoot(time:frames:)``.
package final class SinkBlockUnit: AudioUnitObject, @unchecked Sendable {
    package typealias Block = (_ timestamp: UnsafePointer<AudioTimeStamp>, _ frameCount: UInt32, _ inputData: UnsafePointer<AudioBufferList>) -> OSStatus

    private final class Box {
        let block: Block
        init(_ block: @escaping Block) { self.block = block }
    }

    private let box: Box
    private let flags = UnsafeMutablePointer<AudioUnitRenderActionFlags>.allocate(capacity: 1)

    package init(format: AudioStreamBasicDescription, block: @escaping Block) {
        box = Box(block)
        flags.initialize(to: [])
        super.init(component: Self.entry, inputs: 1, outputs: 0, format: format, parameters: [])
    }

    deinit { flags.deallocate() }

    static let entry = AudioComponentEntry(kAudioUnitType_Output, fourCC("sink"), "Apple: AVAudioSinkNode") { _ in
        fatalError("made by AVAudioSinkNode only")
    }

    /// Pulls the input and calls the block (the render thread).
    package func pullAsRoot(time: UnsafePointer<AudioTimeStamp>, frames: Int) {
        guard isInitialized, frames <= maximumFrames.load(ordering: .relaxed) else { return }
        flags.pointee = []
        guard pull(input: 0, flags: flags, time: time, frames: frames) == noErr else { return }
        _ = Unmanaged.passUnretained(box)._withUnsafeGuaranteedRef { $0.block(time, UInt32(frames), inputList(0)) }
    }
}

/// What a tap on a unit's output hears, handed from the render thread to the tap's own thread:
/// the samples (float interleaved) through one ring, each slice's time through another, and a
/// semaphore post per slice.
package final class RenderTap: @unchecked Sendable {
    package struct Slice: Sendable, BitwiseCopyable {
        package var sampleTime: Int64
        package var hostTime: UInt64
        package var frames: Int
    }

    package let channels: Int
    let samples: SampleRing
    let slices = SPSCRing<Slice>(minimumCapacity: 4096)
    package let wakeup = Wakeup()
    private let scratch: UnsafeMutablePointer<Float>
    private let scratchFrames = 4096

    package init(channels: Int, sampleRate: Double) {
        self.channels = max(channels, 1)
        samples = SampleRing(capacity: Int(sampleRate * 4) * max(channels, 1))
        scratch = .allocate(capacity: scratchFrames * max(channels, 1))
    }

    deinit { scratch.deallocate() }

    /// The render thread: keeps a slice whole or not at all (a consumer that falls behind sees
    /// a jump in sample time, never torn audio).
    func capture(_ list: UnsafeMutablePointer<AudioBufferList>, frames: Int, time: UnsafePointer<AudioTimeStamp>) {
        let buffers = UnsafeMutableAudioBufferListPointer(list)
        let n = min(frames, scratchFrames)
        guard samples.capacity - samples.available >= n * channels, !buffers.isEmpty else { return }
        for c in 0..<channels {
            let from = buffers[min(c, buffers.count - 1)].mData!.assumingMemoryBound(to: Float.self)
            for i in 0..<n { scratch[i * channels + c] = from[i] }
        }
        samples.write(scratch, count: n * channels)
        _ = slices.push(Slice(sampleTime: Int64(time.pointee.mSampleTime), hostTime: time.pointee.mHostTime, frames: n))
        wakeup.signal()
    }

    /// The tap's thread: the next slice's time, then its samples through ``read(into:frames:)``.
    package func nextSlice() -> Slice? { slices.pop() }

    package func read(into out: UnsafeMutablePointer<Float>, frames: Int) -> Int { samples.read(into: out, count: frames * channels) / channels }
}

extension AudioUnitObject {
    /// Makes `unit` reachable through the C API (its reference works in `AudioUnit…` calls).
    package static func register(_ unit: AudioUnitObject) { liveUnits.add(unit) }

    /// Takes `unit` out of the C API's table and uninitializes it.
    package static func unregister(_ unit: AudioUnitObject) {
        _ = liveUnits.remove(unit.ref)
        unit.dispose()
    }
}

extension AudioUnitObject {
    /// The unit behind a reference the C API handed out (control threads).
    package static func object(_ ref: AudioUnit?) -> AudioUnitObject? { liveUnits.lookup(ref) }

    /// Whether the unit is a one-in, one-out effect whose two sides share one format.
    package var isInPlaceEffect: Bool { self is EffectUnit }

    /// Makes a unit of an Apple component by description (control threads).
    package static func make(type: OSType, subType: OSType) -> AudioUnitObject? {
        var d = AudioComponentDescription(componentType: type, componentSubType: subType, componentManufacturer: kAudioUnitManufacturer_Apple, componentFlags: 0, componentFlagsMask: 0)
        guard let component = AudioComponentFindNext(nil, &d) else { return nil }
        var ref: AudioUnit?
        guard AudioComponentInstanceNew(component, &ref) == noErr else { return nil }
        return liveUnits.lookup(ref)
    }
}
