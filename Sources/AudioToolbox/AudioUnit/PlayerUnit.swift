package import AudioGraph
package import AudioHAL
internal import CAudioQueueTypes
package import CoreAudioTypes
package import Synchronization

/// One scheduled piece of audio: a run of a non-interleaved float buffer, or a file streamed
/// through a ring another thread fills (float interleaved).
package struct PlayerSegment: @unchecked Sendable, BitwiseCopyable {
    package var token: UInt64
    /// A buffer's `AudioBufferList` (kept alive by the scheduler until its completion), or nil.
    package var list: UnsafeMutablePointer<AudioBufferList>?
    /// A file's ring (an unretained `SampleRing` kept alive by the scheduler until its
    /// completion), or 0.
    var ringBits: UInt
    /// Posted after each read from the ring (an unretained `Wakeup` kept alive with the ring), or 0.
    var wakeBits: UInt = 0
    /// Posted by the ring's writer after each write (for offline rendering, which waits for it), or 0.
    var dataBits: UInt = 0
    package var channels: Int
    package var start: Int
    package var frames: Int
    package var loops = false
    package var interrupts = false
    package var interruptsAtLoop = false
    /// The player time (frames since play) it starts at, or nil for right after what came before.
    package var at: Int64?

    package init(
        token: UInt64, list: UnsafeMutablePointer<AudioBufferList>?, ring: SampleRing?, channels: Int, start: Int, frames: Int, wake: Wakeup? = nil,
        data: Wakeup? = nil
    ) {
        wakeBits = wake.map { UInt(bitPattern: Unmanaged.passUnretained($0).toOpaque()) } ?? 0
        dataBits = data.map { UInt(bitPattern: Unmanaged.passUnretained($0).toOpaque()) } ?? 0
        self.token = token
        self.list = list
        ringBits = ring.map { UInt(bitPattern: Unmanaged.passUnretained($0).toOpaque()) } ?? 0
        self.channels = channels
        self.start = start
        self.frames = frames
    }
}

/// A segment done with: all of it rendered, or dropped (stop, interruption).
package struct PlayerCompletion: Sendable, BitwiseCopyable {
    package var token: UInt64
    /// The host time at which its last frame leaves the graph (0 when dropped).
    package var hostTime: UInt64
}

private enum PlayerCommand: BitwiseCopyable {
    case schedule(PlayerSegment)
    case stop
}

/// The unit behind `AVAudioPlayerNode`: no inputs, one output, playing what is scheduled in
/// order. Schedules and stops go to the render side through a lock-free ring; segments done with
/// come back through another, with a semaphore post to wake whoever delivers completion handlers.
///
/// The render side's state is serviced by the render thread while the engine renders, and by the
/// control thread otherwise (``serviceWhileIdle()``, which the engine calls only while nothing
/// renders), never by both.
package final class PlayerUnit: AudioUnitObject, @unchecked Sendable {
    private let commands = SPSCRing<PlayerCommand>(minimumCapacity: 1024)
    package let completions = SPSCRing<PlayerCompletion>(minimumCapacity: 2048)
    package let completionWakeup = Wakeup()
    // Render side.
    private let queue = SegmentQueue(capacity: 1024)
    private var position = 0
    private var playerTime: Int64 = 0
    private let playing = Atomic<Bool>(false)
    /// Node sample time to start at (Int64.min: at once), set by ``play(atNodeSample:)``.
    private let startAt = Atomic<Int64>(Int64.min)
    private var started = false
    private let stopsRequested = Atomic<Int>(0)
    /// Stops carried out (by the render side, or the idle control side); read by ``stopsSettled``.
    private let stopsDone = Atomic<Int>(0)
    /// Posted each time a stop is carried out.
    package let stopWakeup = Wakeup()
    private let scratch = UnsafeMutablePointer<Float>.allocate(capacity: 4096 * 16)
    // What control threads read: the last render's node time, and the player time at it.
    private let timeSequence = Atomic<Int>(0)
    private let lastNodeSample = Atomic<Int64>(0)
    private let lastHostTime = Atomic<UInt64>(0)
    private let lastPlayerSample = Atomic<Int64>(-1)
    private let rendered = Atomic<Bool>(false)
    /// Set for offline rendering: a file's ring that runs short is waited for (up to a second),
    /// not played as silence. Never set while a real-time thread renders.
    package let waitsForFiles = Atomic<Bool>(false)

    package init(component: AudioComponentEntry, sampleRate: Double, channels: Int) {
        super.init(component: component, inputs: 0, outputs: 1, format: Self.canonical(sampleRate: sampleRate, channels: channels), parameters: [])
    }

    deinit { scratch.deallocate() }

    package static let playerComponent = AudioComponentEntry(kAudioUnitType_Generator, fourCC("sspl"), "Apple: AUScheduledSoundPlayer") {
        PlayerUnit(component: $0, sampleRate: 44100, channels: 2)
    }

    // MARK: Control side

    /// Queues a segment; false when a thousand wait already.
    package func schedule(_ segment: PlayerSegment) -> Bool { commands.push(PlayerCommand.schedule(segment)) }

    /// Drops everything scheduled (each completes) and stops; the player time goes back to 0.
    package func stop() {
        playing.store(false, ordering: .releasing)
        stopsRequested.add(1, ordering: .relaxed)
        _ = commands.push(PlayerCommand.stop)
    }

    package func play(atNodeSample sample: Int64?) {
        startAt.store(sample ?? Int64.min, ordering: .relaxed)
        playing.store(true, ordering: .releasing)
    }

    package func pause() { playing.store(false, ordering: .releasing) }

    package var isPlaying: Bool { playing.load(ordering: .acquiring) }

    /// Whether every stop asked for has been carried out by the render side.
    package var stopsSettled: Bool { stopsDone.load(ordering: .acquiring) >= stopsRequested.load(ordering: .relaxed) }

    /// The last render's node sample and host time, and the player's sample time at it (nil
    /// before the player has played since its last stop).
    package func lastTimes() -> (node: Int64, host: UInt64, player: Int64?)? {
        while true {
            let before = timeSequence.load(ordering: .acquiring)
            guard before & 1 == 0 else { continue }
            guard rendered.load(ordering: .relaxed) else { return nil }
            let node = lastNodeSample.load(ordering: .relaxed), host = lastHostTime.load(ordering: .relaxed)
            let player = lastPlayerSample.load(ordering: .relaxed)
            guard timeSequence.load(ordering: .acquiring) == before else { continue }
            return (node, host, player >= 0 ? player : nil)
        }
    }

    /// Applies pending commands from a control thread while nothing renders.
    package func serviceWhileIdle() { service() }

    // MARK: Render side

    private func service() {
        while let command = commands.pop() {
            switch command {
            case let .schedule(segment):
                if segment.interrupts {
                    while !queue.isEmpty { complete(queue.removeFirst(), hostTime: 0) }
                    position = 0
                }
                if !queue.append(segment) { complete(segment, hostTime: 0) }
            case .stop:
                while !queue.isEmpty { complete(queue.removeFirst(), hostTime: 0) }
                position = 0
                playerTime = 0
                started = false
                stopsDone.add(1, ordering: .releasing)
                stopWakeup.signal()
                lastPlayerSample.store(-1, ordering: .relaxed)
            }
        }
    }

    private func complete(_ segment: PlayerSegment, hostTime: UInt64) {
        _ = completions.push(PlayerCompletion(token: segment.token, hostTime: hostTime))
        completionWakeup.signal()
    }

    override package func renderOutput(
        flags: UnsafeMutablePointer<AudioUnitRenderActionFlags>, time: UnsafePointer<AudioTimeStamp>, bus: UInt32, frames: Int,
        output: UnsafeMutablePointer<AudioBufferList>
    ) -> OSStatus {
        service()
        let out = UnsafeMutableAudioBufferListPointer(output)
        let channels = out.count
        for c in 0..<channels { out[c].mData!.assumingMemoryBound(to: Float.self).update(repeating: 0, count: frames) }
        let node = Int64(time.pointee.mSampleTime)
        let rate = outputFormats[0].mSampleRate
        var offset = 0
        var audible = false
        if playing.load(ordering: .acquiring) {
            if !started {
                let at = startAt.load(ordering: .relaxed)
                if at == Int64.min || at <= node {
                    started = true
                } else if at < node + Int64(frames) {
                    started = true
                    offset = Int(at - node)
                }
            }
            if started {
                audible = fill(out, from: offset, frames: frames, hostTime: time.pointee.mHostTime, rate: rate)
            }
        }
        timeSequence.add(1, ordering: .acquiringAndReleasing)
        lastNodeSample.store(node, ordering: .relaxed)
        lastHostTime.store(time.pointee.mHostTime, ordering: .relaxed)
        lastPlayerSample.store(started ? playerTime - Int64(frames - offset) : -1, ordering: .relaxed)
        rendered.store(true, ordering: .relaxed)
        timeSequence.add(1, ordering: .acquiringAndReleasing)
        if !audible { flags.pointee.insert(.unitRenderAction_OutputIsSilence) }
        return noErr
    }

    /// Plays the queue into `out` from frame `first`; advances the player time by what it covers.
    private func fill(_ out: UnsafeMutableAudioBufferListPointer, from first: Int, frames: Int, hostTime: UInt64, rate: Double) -> Bool {
        var done = first
        var audible = false
        while done < frames, !queue.isEmpty {
            var segment = queue.first
            // A segment with a start time waits, silent, until the player time reaches it.
            if let at = segment.at, position == 0, at > playerTime + Int64(done - first) {
                let wait = Int(min(Int64(frames - done), at - (playerTime + Int64(done - first))))
                done += wait
                continue
            }
            let n = min(frames - done, segment.frames - position)
            if n > 0 {
                audible = true
                copy(segment, from: position, count: n, into: out, at: done)
                position += n
                done += n
            }
            if position >= segment.frames {
                let interrupted = queue.count > 1 && queue.second.interruptsAtLoop
                if segment.loops && !interrupted && segment.frames > 0 {
                    position = 0
                } else {
                    let end = hostTime + UInt64(Double(done) * 1e9 / rate)
                    segment = queue.removeFirst()
                    complete(segment, hostTime: end)
                    position = 0
                }
            }
        }
        playerTime += Int64(frames - first)
        return audible
    }

    private func copy(_ segment: PlayerSegment, from start: Int, count: Int, into out: UnsafeMutableAudioBufferListPointer, at offset: Int) {
        let channels = out.count
        if let list = segment.list {
            let source = UnsafeMutableAudioBufferListPointer(list)
            for c in 0..<channels {
                let from = source[min(c, source.count - 1)].mData!.assumingMemoryBound(to: Float.self) + segment.start + start
                (out[c].mData!.assumingMemoryBound(to: Float.self) + offset).update(from: from, count: count)
            }
        } else if segment.ringBits != 0 {
            // In runs of at most the scratch's 4096 frames.
            var at = 0
            while at < count {
                let n = min(count - at, 4096)
                copyFromRing(segment, count: n, into: out, at: offset + at)
                at += n
            }
        }
    }

    private func copyFromRing(_ segment: PlayerSegment, count: Int, into out: UnsafeMutableAudioBufferListPointer, at offset: Int) {
        let channels = out.count
        if let bits = UnsafeRawPointer(bitPattern: segment.ringBits) {
            let ring = Unmanaged<SampleRing>.fromOpaque(bits)
            let sc = min(segment.channels, 16)
            let wanted = min(count, 4096) * sc
            var got = ring._withUnsafeGuaranteedRef { $0.read(into: scratch, count: wanted) }
            let wake = UnsafeRawPointer(bitPattern: segment.wakeBits).map { Unmanaged<Wakeup>.fromOpaque($0) }
            // The feeder is woken once the ring is half empty, not on every read: a wake-up a
            // slice would cost a context switch a slice.
            if ring._withUnsafeGuaranteedRef({ $0.available < $0.capacity / 2 }) { wake?._withUnsafeGuaranteedRef { $0.signal() } }
            if got < wanted, waitsForFiles.load(ordering: .relaxed), let data = UnsafeRawPointer(bitPattern: segment.dataBits) {
                let more = Unmanaged<Wakeup>.fromOpaque(data)
                while got < wanted, more._withUnsafeGuaranteedRef({ $0.wait(timeout: 1) }) {
                    got += ring._withUnsafeGuaranteedRef { $0.read(into: scratch + got, count: wanted - got) }
                    wake?._withUnsafeGuaranteedRef { $0.signal() }
                }
            }
            got /= max(sc, 1)
            for c in 0..<channels {
                let d = out[c].mData!.assumingMemoryBound(to: Float.self) + offset
                let sourceChannel = min(c, sc - 1)
                for i in 0..<got { d[i] = scratch[i * sc + sourceChannel] }
            }
        }
    }
}

/// The render side's schedule: a fixed ring of segments (no allocation, no generic code paths
/// that instantiate metadata on first use).
private final class SegmentQueue {
    private let storage: UnsafeMutablePointer<PlayerSegment>
    let capacity: Int
    private var head = 0
    private(set) var count = 0

    init(capacity: Int) {
        self.capacity = capacity
        storage = .allocate(capacity: capacity)
    }

    deinit { storage.deallocate() }

    var isEmpty: Bool { count == 0 }
    var first: PlayerSegment { storage[head] }
    var second: PlayerSegment { storage[(head + 1) % capacity] }

    func append(_ segment: PlayerSegment) -> Bool {
        guard count < capacity else { return false }
        (storage + (head + count) % capacity).initialize(to: segment)
        count += 1
        return true
    }

    func removeFirst() -> PlayerSegment {
        let segment = storage[head]
        head = (head + 1) % capacity
        count -= 1
        return segment
    }
}
