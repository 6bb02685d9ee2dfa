import AudioHAL
import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The I/O thread's side of a device's IOProcs: the stream client that calls them, a fixed
/// number of slots (claimed and switched on and off from other threads through atomics), and the
/// buffers and time stamps they are called with, all made before the I/O starts.
///
/// The server asks for (or hands over) as many frames as it likes; IOProcs are called for exactly
/// the device's buffer frame size each time, so output rendered beyond what the server asked for
/// waits in ``carry`` for its next request, and input gathers there until a buffer is full.
final class DeviceIOClient: HALStreamClient, @unchecked Sendable {
    static let slotCount = 8

    /// One IOProc's place. Written only while the slot is inactive; read by the I/O thread while
    /// active. A proc is a C function and a pointer, so that calling it counts no references; a
    /// block sits in a box the slot keeps retained, reached unretained.
    final class Slot: @unchecked Sendable {
        let active = Atomic<Bool>(false)
        var proc: AudioDeviceIOProc?
        var clientData: UnsafeMutableRawPointer?
        var block: Unmanaged<BlockBox>?
    }

    final class BlockBox {
        let queue: DispatchQueue?
        let block: AudioDeviceIOBlock
        init(_ queue: DispatchQueue?, _ block: @escaping AudioDeviceIOBlock) {
            self.queue = queue
            self.block = block
        }
    }

    let device: AudioObjectID
    let isOutput: Bool
    private let slots = (0..<DeviceIOClient.slotCount).map { _ in Slot() }
    /// The same slots for the I/O thread, unretained (``slots`` owns them).
    private let slotRefs: UnsafeMutablePointer<Unmanaged<Slot>>
    private let claimed = Mutex<[Bool]>(Array(repeating: false, count: DeviceIOClient.slotCount))
    private let ioThread = Atomic<UInt>(0)
    /// The last cycle's time (its first frame's sample and host time), for
    /// ``AudioDeviceGetCurrentTime(_:_:)``; written by the I/O thread under a sequence count.
    private let anchorSequence = Atomic<Int>(0)
    private let anchorSample = Atomic<Int64>(0)
    private let anchorHost = Atomic<UInt64>(0)

    // The I/O thread's own, set up by `prepare` before the stream opens.
    private var frames = 0
    private var channels = 0
    private var rate = 48000.0
    private var carry: UnsafeMutablePointer<Float>
    private var scratch: UnsafeMutablePointer<Float>
    /// Frames in `carry` not yet handed over (output) or gathered so far (input), and where.
    private var carryFrames = 0
    private var carryOffset = 0
    /// The time of the first frame in `carry` (input).
    private var carryTime = HALRenderTime(sampleTime: 0, hostTime: 0)
    private let data = AudioBufferList.allocate(maximumBuffers: 1)
    private let empty = AudioBufferList.allocate(maximumBuffers: 1)
    private let now = UnsafeMutablePointer<AudioTimeStamp>.allocate(capacity: 1)
    private let ioTime = UnsafeMutablePointer<AudioTimeStamp>.allocate(capacity: 1)
    private let noTime = UnsafeMutablePointer<AudioTimeStamp>.allocate(capacity: 1)
    /// Made once here: an option set built from a literal allocates in a debug build.
    private let validFlags: AudioTimeStampFlags = [.sampleTimeValid, .hostTimeValid, .rateScalarValid]

    init(device: AudioObjectID, output: Bool) {
        self.device = device
        self.isOutput = output
        carry = .allocate(capacity: 1)
        scratch = .allocate(capacity: 1)
        slotRefs = .allocate(capacity: DeviceIOClient.slotCount)
        for (n, slot) in slots.enumerated() { (slotRefs + n).initialize(to: .passUnretained(slot)) }
        empty.unsafeMutablePointer.pointee.mNumberBuffers = 0
        noTime.initialize(to: AudioTimeStamp())
        now.initialize(to: AudioTimeStamp())
        ioTime.initialize(to: AudioTimeStamp())
        super.init()
    }

    deinit {
        for slot in slots { slot.block?.release() }
        slotRefs.deallocate()
        carry.deallocate()
        scratch.deallocate()
        UnsafeMutableRawPointer(data.unsafeMutablePointer).deallocate()
        UnsafeMutableRawPointer(empty.unsafeMutablePointer).deallocate()
        now.deallocate()
        ioTime.deallocate()
        noTime.deallocate()
    }

    /// Sizes the buffers for `frames` frames of `channels` channels; the stream is not open.
    func prepare(frames: Int, channels: Int, rate: Double) {
        carry.deallocate()
        scratch.deallocate()
        self.frames = frames
        self.channels = channels
        self.rate = rate
        carry = .allocate(capacity: frames * channels)
        scratch = .allocate(capacity: frames * channels)
        carryFrames = 0
        carryOffset = 0
    }

    // MARK: Slots (any thread but the I/O thread, except setActive)

    func claimSlot(_ callback: DeviceIO.Callback) -> Int? {
        claimed.withLock { claimed in
            guard let n = claimed.firstIndex(of: false) else { return nil }
            claimed[n] = true
            switch callback {
            case let .proc(proc, clientData):
                slots[n].proc = proc
                slots[n].clientData = clientData
            case let .block(queue, block):
                slots[n].block = .passRetained(BlockBox(queue, block))
            }
            return n
        }
    }

    func releaseSlot(_ n: Int) {
        claimed.withLock { claimed in
            slots[n].active.store(false, ordering: .releasing)
            slots[n].proc = nil
            slots[n].clientData = nil
            slots[n].block?.release()
            slots[n].block = nil
            claimed[n] = false
        }
    }

    func setActive(_ n: Int, _ active: Bool) { slots[n].active.store(active, ordering: .releasing) }

    var activeCount: Int { slots.count { $0.active.load(ordering: .acquiring) } }

    /// Whether the caller is the I/O thread (an IOProc calling back into the API).
    var isIOThread: Bool { ioThread.load(ordering: .relaxed) == UInt(pthread_self()) }

    // MARK: The I/O thread

    override func render(_ output: UnsafeMutablePointer<Float>, frames count: Int, time: HALRenderTime) -> Int {
        ioThread.store(UInt(pthread_self()), ordering: .relaxed)
        var done = 0
        while done < count {
            if carryFrames == 0 {
                let at = HALRenderTime(sampleTime: time.sampleTime + Int64(done), hostTime: time.hostTime + UInt64(Double(done) * 1e9 / rate))
                cycle(output: true, at: at)
                carryFrames = frames
                carryOffset = 0
            }
            let n = min(carryFrames, count - done)
            (output + done * channels).update(from: carry + carryOffset * channels, count: n * channels)
            carryFrames -= n
            carryOffset += n
            done += n
        }
        return count
    }

    override func capture(_ input: UnsafePointer<Float>, frames count: Int, time: HALRenderTime) {
        ioThread.store(UInt(pthread_self()), ordering: .relaxed)
        var done = 0
        while done < count {
            if carryFrames == 0 {
                carryTime = HALRenderTime(sampleTime: time.sampleTime + Int64(done), hostTime: time.hostTime + UInt64(Double(done) * 1e9 / rate))
            }
            let n = min(frames - carryFrames, count - done)
            (carry + carryFrames * channels).update(from: input + done * channels, count: n * channels)
            carryFrames += n
            done += n
            if carryFrames == frames {
                cycle(output: false, at: carryTime)
                carryFrames = 0
            }
        }
    }

    /// The device's time now, reckoned from the last cycle's at the device's rate; `nil` before
    /// the first cycle.
    func currentTime() -> HALRenderTime? {
        while true {
            let before = anchorSequence.load(ordering: .acquiring)
            guard before > 0 else { return nil }
            let sample = anchorSample.load(ordering: .relaxed), host = anchorHost.load(ordering: .relaxed)
            guard before & 1 == 0, anchorSequence.load(ordering: .acquiring) == before else { continue }
            let now = hostNow()
            return HALRenderTime(sampleTime: sample + Int64(((Double(now) - Double(host)) * rate / 1e9).rounded()), hostTime: now)
        }
    }

    /// One I/O cycle: every active IOProc once, over ``carry``.
    private func cycle(output: Bool, at time: HALRenderTime) {
        anchorSequence.add(1, ordering: .acquiringAndReleasing)
        anchorSample.store(time.sampleTime, ordering: .relaxed)
        anchorHost.store(time.hostTime, ordering: .relaxed)
        anchorSequence.add(1, ordering: .acquiringAndReleasing)
        let samples = frames * channels
        let bytes = UInt32(samples * MemoryLayout<Float>.size)
        let host = hostNow()
        stamp(ioTime, time)
        let ahead = (Double(time.hostTime) - Double(host)) * rate / 1e9
        now.pointee = ioTime.pointee
        now.pointee.mSampleTime = Double(time.sampleTime) - ahead
        now.pointee.mHostTime = host
        if output { carry.update(repeating: 0, count: samples) }
        var first = true
        for n in 0..<Self.slotCount {
            slotRefs[n]._withUnsafeGuaranteedRef { slot in
                guard slot.active.load(ordering: .acquiring), slot.proc != nil || slot.block != nil else { return }
                // The first output IOProc writes in place; the others into scratch, mixed in after.
                let target = output && !first ? scratch : carry
                if output && !first { scratch.update(repeating: 0, count: samples) }
                data.unsafeMutablePointer.pointee.mNumberBuffers = 1
                data[0] = AudioBuffer(mNumberChannels: UInt32(channels), mDataByteSize: bytes, mData: UnsafeMutableRawPointer(target))
                let input = output ? empty.unsafePointer : data.unsafePointer
                let outputList = output ? data.unsafeMutablePointer : empty.unsafeMutablePointer
                let inputTime = output ? UnsafePointer(noTime) : UnsafePointer(ioTime)
                let outputTime = output ? UnsafePointer(ioTime) : UnsafePointer(noTime)
                if let proc = slot.proc {
                    _ = proc(device, UnsafePointer(now), input, inputTime, outputList, outputTime, slot.clientData)
                } else if let box = slot.block {
                    box._withUnsafeGuaranteedRef { box in
                        if let queue = box.queue {
                            queue.sync { box.block(UnsafePointer(now), input, inputTime, outputList, outputTime) }
                        } else {
                            box.block(UnsafePointer(now), input, inputTime, outputList, outputTime)
                        }
                    }
                }
                if output && !first { for k in 0..<samples { carry[k] += scratch[k] } }
                first = false
            }
        }
    }

    private func stamp(_ p: UnsafeMutablePointer<AudioTimeStamp>, _ time: HALRenderTime) {
        p.pointee = AudioTimeStamp(
            mSampleTime: Double(time.sampleTime), mHostTime: time.hostTime, mRateScalar: 1, mWordClockTime: 0, mSMPTETime: SMPTETime(),
            mFlags: validFlags, mReserved: 0)
    }
}
