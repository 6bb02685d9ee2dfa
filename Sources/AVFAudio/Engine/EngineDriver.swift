import AudioHAL
import AudioToolbox
import Foundation
import Synchronization

/// The engine's render side: what one render cycle pulls (a ``Plan``), the gate the control side
/// closes while it rewires the graph, and the time of the last cycle.
///
/// Real time: ``render(flags:time:frames:data:)`` takes no lock, allocates nothing and counts no
/// references; the plan is read through an atomic and walked through unretained references. A
/// plan replaced while a render may still be in it (the render thread did not pass the gate in
/// time) is kept in ``retired`` until rendering stops.
final class EngineDriver: @unchecked Sendable {
    /// What a cycle pulls: the unit feeding the output (into the output's buffers), the ends of
    /// tapped chains that do not reach the output (into scratch buffers, so their taps hear), and
    /// the sink nodes.
    final class Plan: @unchecked Sendable {
        let units: [AudioUnitObject]
        let root: Unmanaged<AudioUnitObject>?
        let rootBus: UInt32
        let ends: UnsafeMutablePointer<Unmanaged<AudioUnitObject>>
        let endBusses: UnsafeMutablePointer<UInt32>
        let endChannels: UnsafeMutablePointer<UInt32>
        let endCount: Int
        let sinks: UnsafeMutablePointer<Unmanaged<SinkBlockUnit>>
        let sinkCount: Int
        let scratch = AudioBufferList.allocate(maximumBuffers: 16)

        init(root: (AudioUnitObject, Int)?, ends: [(AudioUnitObject, Int, Int)], sinks: [SinkBlockUnit]) {
            units = (root.map { [$0.0] } ?? []) + ends.map(\.0) + sinks
            self.root = root.map { .passUnretained($0.0) }
            rootBus = UInt32(root?.1 ?? 0)
            endCount = ends.count
            self.ends = .allocate(capacity: max(ends.count, 1))
            endBusses = .allocate(capacity: max(ends.count, 1))
            endChannels = .allocate(capacity: max(ends.count, 1))
            for (i, end) in ends.enumerated() {
                (self.ends + i).initialize(to: .passUnretained(end.0))
                endBusses[i] = UInt32(end.1)
                endChannels[i] = UInt32(min(max(end.2, 1), 16))
            }
            sinkCount = sinks.count
            self.sinks = .allocate(capacity: max(sinks.count, 1))
            for (i, sink) in sinks.enumerated() { (self.sinks + i).initialize(to: .passUnretained(sink)) }
        }

        deinit {
            ends.deallocate()
            endBusses.deallocate()
            endChannels.deallocate()
            sinks.deallocate()
            free(scratch.unsafeMutablePointer)
        }
    }

    private let planBits = Atomic<UInt>(0)
    /// The plan in force (the render side reads it unretained).
    private var current: Plan?
    /// Plans replaced while a cycle may have been in them; freed by ``releaseRetired()``.
    private var retired: [Plan] = []
    /// Closed (odd) while the control side rewires; the render side answers with ``acknowledged``.
    private let gate = Atomic<Int>(0)
    private let acknowledged = Atomic<Int>(0)
    /// Posted by the render side each time it answers a closed gate.
    private let passedGate = Wakeup()
    let rendering = Atomic<Bool>(false)
    // The last cycle's time.
    private let timeSequence = Atomic<Int>(0)
    private let lastSample = Atomic<Int64>(0)
    private let lastHost = Atomic<UInt64>(0)
    private let hasRendered = Atomic<Bool>(false)
    var sampleRate = 48000.0

    /// Makes `plan` the one cycles pull from now on. Call with the cycles held
    /// (``withCyclesHeld(_:)``) or nothing rendering. The plan replaced goes at once when no
    /// cycle can be in it: nothing renders, or the render thread passed the closed gate. Otherwise
    /// (the wait for the gate gave up: a real-time manual rendering thread that the app holds up,
    /// say) it is retired until rendering stops.
    func install(_ plan: Plan) {
        let g = gate.load(ordering: .acquiring)
        let passed = g & 1 == 1 && acknowledged.load(ordering: .acquiring) == g
        if rendering.load(ordering: .acquiring) && !passed, let old = current { retired.append(old) }
        planBits.store(UInt(bitPattern: Unmanaged.passUnretained(plan).toOpaque()), ordering: .releasing)
        current = plan
    }

    /// Frees the retired plans. Call once rendering has stopped (the output unit stopped, or the
    /// app told that manual rendering stopped).
    func releaseRetired() { retired.removeAll() }

    /// Whether a control thread is inside ``withCyclesHeld(_:)`` (the render side is out of the plan).
    var cyclesHeld: Bool { gate.load(ordering: .acquiring) & 1 == 1 }

    /// Runs `body` with no cycle in progress: while rendering, closes the gate and waits (at most
    /// half a second) for the render thread to pass it; cycles meanwhile are silent.
    func withCyclesHeld<T>(_ body: () throws -> T) rethrows -> T {
        guard rendering.load(ordering: .acquiring) else { return try body() }
        let closed = gate.add(1, ordering: .acquiringAndReleasing).newValue
        defer { gate.add(1, ordering: .acquiringAndReleasing) }
        // The render side posts when it meets the closed gate; a render thread that has stopped
        // never will, so the wait gives up after half a second.
        let deadline = Date(timeIntervalSinceNow: 0.5)
        while acknowledged.load(ordering: .acquiring) != closed && rendering.load(ordering: .acquiring) {
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { break }
            passedGate.wait(timeout: left)
        }
        return try body()
    }

    func lastRenderTime() -> AVAudioTime? {
        while true {
            let before = timeSequence.load(ordering: .acquiring)
            guard before & 1 == 0 else { continue }
            guard hasRendered.load(ordering: .relaxed) else { return nil }
            let sample = lastSample.load(ordering: .relaxed), host = lastHost.load(ordering: .relaxed)
            guard timeSequence.load(ordering: .acquiring) == before else { continue }
            return AVAudioTime(hostTime: host, sampleTime: sample, atRate: sampleRate)
        }
    }

    func resetTime() { hasRendered.store(false, ordering: .relaxed) }

    /// The I/O unit's render callback.
    static let callback: AURenderCallback = { refCon, flags, time, _, frames, data in
        Unmanaged<EngineDriver>.fromOpaque(refCon)._withUnsafeGuaranteedRef { $0.render(flags: flags, time: time, frames: Int(frames), data: data) }
    }

    /// One cycle: the output's audio into `data` (nil: pulled for taps and sinks only).
    func render(
        flags: UnsafeMutablePointer<AudioUnitRenderActionFlags>, time: UnsafePointer<AudioTimeStamp>, frames: Int,
        data: UnsafeMutablePointer<AudioBufferList>?
    ) -> OSStatus {
        timeSequence.add(1, ordering: .acquiringAndReleasing)
        lastSample.store(Int64(time.pointee.mSampleTime), ordering: .relaxed)
        lastHost.store(time.pointee.mHostTime, ordering: .relaxed)
        hasRendered.store(true, ordering: .relaxed)
        timeSequence.add(1, ordering: .acquiringAndReleasing)
        let g = gate.load(ordering: .acquiring)
        let bits = planBits.load(ordering: .acquiring)
        guard g & 1 == 0, let raw = UnsafeRawPointer(bitPattern: bits) else {
            // The first cycle to meet this closed gate wakes the control side (a semaphore post).
            if acknowledged.exchange(g, ordering: .acquiringAndReleasing) != g && g & 1 == 1 { passedGate.signal() }
            if let data { silence(data, frames: frames) }
            flags.pointee.insert(.unitRenderAction_OutputIsSilence)
            return noErr
        }
        return Unmanaged<Plan>.fromOpaque(raw)._withUnsafeGuaranteedRef { plan in
            var status = noErr
            if let data {
                if let root = plan.root {
                    status = root._withUnsafeGuaranteedRef { $0.render(flags: flags, time: time, bus: plan.rootBus, frames: UInt32(frames), data: data) }
                    if status != noErr { silence(data, frames: frames) }
                } else {
                    silence(data, frames: frames)
                    flags.pointee.insert(.unitRenderAction_OutputIsSilence)
                }
            }
            for i in 0..<plan.endCount {
                let list = plan.scratch
                list.unsafeMutablePointer.pointee.mNumberBuffers = plan.endChannels[i]
                for b in 0..<Int(plan.endChannels[i]) { list[b] = AudioBuffer(mNumberChannels: 1, mDataByteSize: 0, mData: nil) }
                plan.ends[i]._withUnsafeGuaranteedRef { end in
                    var f = AudioUnitRenderActionFlags()
                    _ = end.render(flags: &f, time: time, bus: plan.endBusses[i], frames: UInt32(frames), data: plan.scratch.unsafeMutablePointer)
                }
            }
            for i in 0..<plan.sinkCount { plan.sinks[i]._withUnsafeGuaranteedRef { $0.pullAsRoot(time: time, frames: frames) } }
            return data == nil ? noErr : status
        }
    }

    private func silence(_ data: UnsafeMutablePointer<AudioBufferList>, frames: Int) {
        let list = UnsafeMutableAudioBufferListPointer(data)
        for b in 0..<list.count {
            if let p = list[b].mData { memset(p, 0, Int(list[b].mDataByteSize)) }
        }
    }
}
