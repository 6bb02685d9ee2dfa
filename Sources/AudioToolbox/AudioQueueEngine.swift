import AudioHAL
import Synchronization

/// One enqueued buffer as the server thread sees it: converted float samples and where to start.
struct QueueItem: BitwiseCopyable {
    /// Identifies the buffer (``AudioQueueObject``'s slot token).
    var token: Int
    /// Interleaved float samples in the queue's channel count (playback: the audio; capture: room).
    var samples: UnsafeMutablePointer<Float>
    /// Frames of audio (playback) or of room (capture).
    var frames: Int
    /// The queue sample time the buffer must start at, or −1 for "after the previous one".
    var startSample: Int64
    /// A per-buffer pan, or NaN to use the queue's.
    var pan: Float
}

/// A buffer the server thread has finished with.
struct CompletedItem: BitwiseCopyable {
    var token: Int
    /// Frames consumed (playback) or captured (capture).
    var frames: Int
    /// Queue sample time of the buffer's first frame.
    var sampleTime: Int64
    /// Host time at which the first frame is heard (playback) or was captured (capture).
    var hostTime: UInt64
}

/// Per-channel peak and sum of squares over at least ``AudioQueueEngine/meterBlockSeconds`` of
/// render or capture calls.
struct MeterBlock: BitwiseCopyable {
    var peak: (Float, Float, Float, Float, Float, Float, Float, Float) = (0, 0, 0, 0, 0, 0, 0, 0)
    var sumSquares: (Float, Float, Float, Float, Float, Float, Float, Float) = (0, 0, 0, 0, 0, 0, 0, 0)
    var frames: Int = 0
}

/// The part of a queue that runs on the server thread: it moves samples between the queue's
/// buffers and the stream, applies volume and pan, and reports finished buffers.
///
/// Rings and who may touch them:
/// - `pending`: producer is the thread that enqueues (under the queue's lock); consumer is the
///   server thread.
/// - `completed`: producer is the server thread; consumer is the queue's callback thread (under
///   the queue's lock).
/// - `meters`: producer is the server thread; consumer is whoever reads the level meter property
///   (under the queue's lock).
///
/// Fields without an atomic are the server thread's own; the control side touches them only inside
/// ``HALStream/withCallbacksBlocked(_:)`` (or before a stream exists).
final class AudioQueueEngine: HALStreamClient, @unchecked Sendable {
    let isOutput: Bool
    /// Channels of the queue's format.
    let queueChannels: Int
    /// Channels of the stream (a mono playback queue feeds a stereo stream so that pan works).
    var streamChannels: Int
    let sampleRate: Double

    let pending: SPSCRing<QueueItem>
    let completed: SPSCRing<CompletedItem>
    /// Levels in blocks of at least ``meterBlockSeconds``: the ring's 256 hold five seconds, so a
    /// reader that waits a second between reads still gets that whole second (one block per
    /// server period would hold only 0.64 s at 2.5 ms periods).
    let meters = SPSCRing<MeterBlock>(minimumCapacity: 256)
    static let meterBlockSeconds = 0.02
    let wakeup = Wakeup()
    /// Frame `sampleTime` of the queue timeline is heard (or was captured) at `hostTime`.
    let anchor = TimeAnchor()

    // Control → server thread.
    let armed = Atomic<Bool>(false)
    /// Paused: playback renders silence and capture discards input, without consuming buffers or
    /// advancing the timeline, so that resuming continues at the very next frame. (Corking the
    /// server stream instead lets the server rewind and replay or drop a few milliseconds.)
    let paused = Atomic<Bool>(false)
    let startHostTime = Atomic<UInt64>(0)
    let volumeBits = Atomic<UInt32>(Float(1).bitPattern)
    let rampTimeBits = Atomic<UInt32>(Float(0).bitPattern)
    let panBits = Atomic<UInt32>(Float(0).bitPattern)
    let metering = Atomic<Bool>(false)
    /// When set, the server thread reports ``reachedEnd`` once every pending buffer has played.
    let stopWhenEmpty = Atomic<Bool>(false)
    /// Whether callbacks go through the wake-up (false in offline mode, where the caller polls).
    let signalsWakeup = Atomic<Bool>(true)

    // Server thread → control.
    let reachedEnd = Atomic<Bool>(false)
    let drained = Atomic<Bool>(false)
    let starvedFrames = Atomic<Int>(0)
    let droppedFrames = Atomic<Int>(0)
    let discontinuities = Atomic<Int>(0)

    // Server thread's own.
    private var current: QueueItem?
    private var offset = 0
    private var currentStartSample: Int64 = 0
    private var currentStartHost: UInt64 = 0
    private var started = false
    /// Started with no buffer to play: the render wrote nothing, so that the server holds no
    /// silence ahead of the first buffer (after a start or a reset while running), and the next
    /// enqueue asks the stream to refill (``takeRefillRequest()``).
    private let awaitingBuffer = Atomic<Bool>(false)
    private var starving = false
    private(set) var sampleTime: Int64 = 0
    private var volume: Float = 1
    private var volumeTarget: Float = 1
    private var volumeStep: Float = 0
    /// The meter block being gathered; pushed once it spans ``meterBlockSeconds`` and the ring has
    /// room (while full, later calls go on adding to it).
    private var meterBlock = MeterBlock()

    init(isOutput: Bool, channels: Int, sampleRate: Double, capacity: Int) {
        self.isOutput = isOutput
        self.queueChannels = channels
        self.streamChannels = isOutput && channels == 1 ? 2 : channels
        self.sampleRate = sampleRate
        pending = SPSCRing(minimumCapacity: capacity)
        completed = SPSCRing(minimumCapacity: capacity)
        super.init()
    }

    @inline(__always) private func notify() {
        if signalsWakeup.load(ordering: .relaxed) { wakeup.signal() }
    }

    // MARK: Playback (server thread)

    override func render(_ output: UnsafeMutablePointer<Float>, frames: Int, time: HALRenderTime) -> Int {
        let sc = streamChannels
        var written = 0
        var produced = frames
        var signal = false
        defer {
            if written < frames { (output + written * sc).update(repeating: 0, count: (frames - written) * sc) }
            if metering.load(ordering: .relaxed) { measure(output, frames: produced, channels: sc) } else { meterBlock = MeterBlock() }
            if signal { notify() }
        }
        // Not started: write nothing, so that the server holds no silence ahead of the first
        // buffer; the stream fills the room when it is uncorked. Paused: silence.
        guard armed.load(ordering: .acquiring) else {
            produced = 0
            return 0
        }
        guard !paused.load(ordering: .acquiring) else { return frames }
        let nanosPerFrame = 1e9 / sampleRate
        if !started {
            // Nothing to play yet: write nothing rather than silence the first buffer would wait
            // behind. Looked at again after raising the flag, so that a buffer pushed meanwhile
            // is either seen here or sees the flag.
            if current == nil, let next = pending.pop() {
                current = next
                offset = 0
            }
            if current == nil {
                awaitingBuffer.store(true, ordering: .sequentiallyConsistent)
                guard let next = pending.pop() else {
                    produced = 0
                    return 0
                }
                awaitingBuffer.store(false, ordering: .relaxed)
                current = next
                offset = 0
            }
            // Each render re-estimates when its first frame is heard, so a change of the sink's
            // latency while waiting (another stream starting) moves the start with it.
            let target = startHostTime.load(ordering: .relaxed)
            if target > time.hostTime {
                // Rounded: a start on a frame's host time (a sample time converted) is that frame.
                let wait = Int((Double(target - time.hostTime) / nanosPerFrame).rounded())
                if wait >= frames { return frames }
                written = wait
            }
            started = true
        }
        let firstHeard = time.hostTime &+ UInt64(Double(written) * nanosPerFrame)
        anchor.store(sampleTime: sampleTime, hostTime: firstHeard)
        updateVolumeTarget()
        while written < frames {
            if current == nil {
                guard let next = pending.pop() else { break }
                current = next
                offset = 0
                starving = false
            }
            let item = current!
            if offset == 0, item.startSample > sampleTime {
                let gap = Int(min(Int64(frames - written), item.startSample - sampleTime))
                (output + written * sc).update(repeating: 0, count: gap * sc)
                written += gap
                sampleTime += Int64(gap)
                continue
            }
            if offset == 0 {
                currentStartSample = sampleTime
                currentStartHost = time.hostTime &+ UInt64(Double(written) * nanosPerFrame)
            }
            let n = min(frames - written, item.frames - offset)
            mix(item, from: offset, frames: n, into: output + written * sc)
            offset += n
            written += n
            sampleTime += Int64(n)
            if offset == item.frames {
                completed.push(CompletedItem(token: item.token, frames: item.frames, sampleTime: currentStartSample, hostTime: currentStartHost))
                current = nil
                signal = true
            }
        }
        if written < frames {
            let idle = frames - written
            if stopWhenEmpty.load(ordering: .relaxed) {
                // Ended: play only what was written, so that the stream can drain.
                produced = written
                if !reachedEnd.exchange(true, ordering: .acquiringAndReleasing) { signal = true }
            } else {
                sampleTime += Int64(idle)
                starvedFrames.add(idle, ordering: .relaxed)
                if !starving {
                    starving = true
                    discontinuities.add(1, ordering: .relaxed)
                }
            }
        }
        return produced
    }

    /// Whether the render is waiting for a first buffer; clears the request. Call after pushing
    /// a buffer: `true` means the stream must be asked to refill.
    func takeRefillRequest() -> Bool {
        awaitingBuffer.exchange(false, ordering: .sequentiallyConsistent)
    }

    override func streamDidDrain() {
        drained.store(true, ordering: .releasing)
        notify()
    }

    private func updateVolumeTarget() {
        let target = Float(bitPattern: volumeBits.load(ordering: .relaxed))
        guard target != volumeTarget else { return }
        volumeTarget = target
        let ramp = Float(bitPattern: rampTimeBits.load(ordering: .relaxed))
        let rampFrames = ramp * Float(sampleRate)
        if rampFrames >= 1 {
            volumeStep = (target - volume) / rampFrames
        } else {
            volume = target
            volumeStep = 0
        }
    }

    /// Copies `frames` frames of `item` from `start` into the stream's layout, with volume and pan.
    private func mix(_ item: QueueItem, from start: Int, frames: Int, into out: UnsafeMutablePointer<Float>) {
        let qc = queueChannels
        let sc = streamChannels
        let pan = item.pan.isNaN ? Float(bitPattern: panBits.load(ordering: .relaxed)) : item.pan
        let left: Float = pan > 0 ? 1 - pan : 1
        let right: Float = pan < 0 ? 1 + pan : 1
        var src = item.samples + start * qc
        var dst = out
        if volumeStep == 0 && left == 1 && right == 1 && qc == sc {
            // The common case: same layout, steady volume, centred: a copy or one multiply.
            let n = frames * qc
            if volume == 1 {
                dst.update(from: src, count: n)
            } else {
                let v = volume
                for i in 0..<n { dst[i] = src[i] * v }
            }
            return
        }
        for _ in 0..<frames {
            if volumeStep != 0 {
                volume += volumeStep
                if (volumeStep > 0 && volume >= volumeTarget) || (volumeStep < 0 && volume <= volumeTarget) {
                    volume = volumeTarget
                    volumeStep = 0
                }
            }
            let v = volume
            if qc == 1 && sc == 2 {
                let x = src[0] * v
                dst[0] = x * left
                dst[1] = x * right
            } else {
                for c in 0..<sc {
                    var x = c < qc ? src[c] * v : 0
                    if sc >= 2 { x *= c == 0 ? left : (c == 1 ? right : 1) }
                    dst[c] = x
                }
            }
            src += qc
            dst += sc
        }
    }

    // MARK: Capture (server thread)

    override func capture(_ input: UnsafePointer<Float>, frames: Int, time: HALRenderTime) {
        let qc = queueChannels
        var consumed = 0
        var signal = false
        defer { if signal { notify() } }
        guard armed.load(ordering: .acquiring), !paused.load(ordering: .acquiring) else { return }
        // An app that muted its input records silence (and meters it).
        let muted = processInputMuted.load(ordering: .relaxed)
        if !metering.load(ordering: .relaxed) {
            meterBlock = MeterBlock()
        } else if !muted {
            measure(input, frames: frames, channels: qc)
        }
        let nanosPerFrame = 1e9 / sampleRate
        if !started {
            // A start time (host clock): frames captured before it are not recorded.
            let target = startHostTime.load(ordering: .relaxed)
            if target > time.hostTime {
                let skip = Int((Double(target - time.hostTime) / nanosPerFrame).rounded())
                if skip >= frames { return }
                consumed = skip
            }
            started = true
        }
        anchor.store(sampleTime: sampleTime, hostTime: time.hostTime &+ UInt64(Double(consumed) * nanosPerFrame))
        while consumed < frames {
            if current == nil {
                guard let next = pending.pop() else { break }
                current = next
                offset = 0
            }
            let item = current!
            if offset == 0 {
                currentStartSample = sampleTime
                currentStartHost = time.hostTime &+ UInt64(Double(consumed) * nanosPerFrame)
            }
            let n = min(frames - consumed, item.frames - offset)
            if muted {
                (item.samples + offset * qc).update(repeating: 0, count: n * qc)
            } else {
                (item.samples + offset * qc).update(from: input + consumed * qc, count: n * qc)
            }
            offset += n
            consumed += n
            sampleTime += Int64(n)
            if offset == item.frames {
                completed.push(CompletedItem(token: item.token, frames: item.frames, sampleTime: currentStartSample, hostTime: currentStartHost))
                current = nil
                signal = true
            }
        }
        if consumed < frames {
            droppedFrames.add(frames - consumed, ordering: .relaxed)
            sampleTime += Int64(frames - consumed)
        }
    }

    private func measure(_ samples: UnsafePointer<Float>, frames: Int, channels: Int) {
        var block = meterBlock
        block.frames += frames
        withUnsafeMutableBytes(of: &block.peak) { peakRaw in
            withUnsafeMutableBytes(of: &block.sumSquares) { sumRaw in
                let peak = peakRaw.bindMemory(to: Float.self)
                let sum = sumRaw.bindMemory(to: Float.self)
                let measured = min(channels, 8)
                for f in 0..<frames {
                    let frame = samples + f * channels
                    for c in 0..<measured {
                        let x = frame[c]
                        peak[c] = max(peak[c], abs(x))
                        sum[c] += x * x
                    }
                }
            }
        }
        // Offline rendering (no wake-ups: the caller renders and reads in turn) hands over each call.
        let whole = Double(block.frames) >= Self.meterBlockSeconds * sampleRate || !signalsWakeup.load(ordering: .relaxed)
        meterBlock = whole && meters.push(block) ? MeterBlock() : block
    }

    // MARK: Control side (inside withCallbacksBlocked, or before the stream exists)

    /// Takes back everything the server thread holds: the buffer in progress (with the frames it
    /// got so far) and every pending one, in order. Resets start gating, and with
    /// `restartTimeline` the queue's sample time.
    ///
    /// `heard`: an output's sample time being heard as the stream was flushed. The timeline goes
    /// on from there, not from what was written: the dropped frames are never heard, and the
    /// next buffer is scheduled at the time heard.
    func reclaim(restartTimeline: Bool, heard: Int64? = nil) -> (partial: CompletedItem?, untouched: [Int]) {
        var partial: CompletedItem?
        var tokens: [Int] = []
        if let item = current {
            if !isOutput && offset > 0 {
                partial = CompletedItem(token: item.token, frames: offset, sampleTime: currentStartSample, hostTime: currentStartHost)
            } else {
                tokens.append(item.token)
            }
        }
        current = nil
        offset = 0
        while let item = pending.pop() { tokens.append(item.token) }
        started = false
        starving = false
        discontinuities.add(1, ordering: .relaxed)
        if restartTimeline {
            sampleTime = 0
            anchor.reset()
        } else if let heard, heard < sampleTime {
            sampleTime = heard
        }
        return (partial, tokens)
    }
}
