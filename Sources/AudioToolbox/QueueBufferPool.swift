import AudioHAL

/// A buffer allocated by a queue, with its float staging area (converted audio, or captured audio
/// before it is converted to the queue's format).
final class BufferSlot {
    let token: Int
    let buffer: AudioQueueBufferRef
    /// Reallocated only while the buffer is not enqueued (a compressed buffer may decode to more
    /// frames than it was allocated for).
    var staging: UnsafeMutablePointer<Float>
    var capacityFrames: Int
    var enqueued = false

    init(token: Int, buffer: AudioQueueBufferRef, staging: UnsafeMutablePointer<Float>, capacityFrames: Int) {
        self.token = token
        self.buffer = buffer
        self.staging = staging
        self.capacityFrames = capacityFrames
    }

    /// Frees the buffer's memory and retires its header (whose address is never reused, see
    /// ``BufferHeaderArena``). The pool calls this once, when the buffer goes away.
    func free() {
        buffer.pointee.mAudioData.deallocate()
        buffer.pointee.mPacketDescriptions?.deallocate()
        buffer.deinitialize(count: 1)
        BufferHeaderArena.shared.retire(buffer)
        staging.deallocate()
    }
}

/// The buffers of one queue: allocation, freeing, which are enqueued, and the tokens the engine
/// knows them by (the server thread never sees a buffer's address, only its token).
///
/// Buffers are found by address: a buffer header's address is never reused
/// (``BufferHeaderArena``), so a freed buffer, or another queue's, is never found here.
///
/// Threads: guarded by the owning queue's lock; the pool frees every buffer when it goes away.
final class QueueBufferPool {
    private let pcm: LinearPCMFormat
    private let codec: AudioQueueCodec?
    private(set) var slots: [AudioQueueBufferRef: BufferSlot] = [:]
    private var slotsByToken: [Int: BufferSlot] = [:]
    private var nextToken = 1

    init(pcm: LinearPCMFormat, codec: AudioQueueCodec?) {
        self.pcm = pcm
        self.codec = codec
    }

    deinit {
        for slot in slots.values { slot.free() }
    }

    /// The buffer's slot, when it is one of this pool's.
    subscript(buffer: AudioQueueBufferRef) -> BufferSlot? { slots[buffer] }

    /// `kAudioQueueProperty_DecodeBufferSizeFrames` as set: the least frames each buffer's
    /// staging area (the buffer its audio is decoded into) holds; 0 when unset.
    private(set) var minimumStagingFrames = 0

    /// The decode buffer size really in use: the smallest staging area of the queue's buffers, or
    /// the set minimum while there are none.
    var decodeBufferFrames: Int { slots.values.map(\.capacityFrames).min() ?? minimumStagingFrames }

    /// Makes every buffer's staging area hold at least `frames` frames: idle buffers now, enqueued
    /// ones when they are next enqueued (``grow(_:)``), new ones when allocated.
    func setMinimumStagingFrames(_ frames: Int) {
        minimumStagingFrames = frames
        for slot in slots.values where !slot.enqueued { grow(slot) }
    }

    /// Brings an idle buffer's staging area up to ``minimumStagingFrames`` (its contents are not kept).
    func grow(_ slot: BufferSlot) {
        guard slot.capacityFrames < minimumStagingFrames else { return }
        let count = minimumStagingFrames * pcm.channels
        let staging = UnsafeMutablePointer<Float>.allocate(capacity: count)
        staging.initialize(repeating: 0, count: count)
        slot.staging.deallocate()
        slot.staging = staging
        slot.capacityFrames = minimumStagingFrames
    }

    /// How many buffers are enqueued.
    var enqueuedCount: Int { slots.values.filter(\.enqueued).count }

    /// A new buffer of `byteSize` bytes with room for `packetDescriptions` descriptions, and a
    /// staging area for the frames it holds.
    func allocate(byteSize: UInt32, packetDescriptions: UInt32) -> Result<AudioQueueBufferRef, StatusError> {
        guard slots.count < maximumBuffersPerQueue else { return .failure(StatusError(kAudio_MemFullError)) }
        let frames: Int
        if let codec {
            // Playback: what the packets decode to is known at enqueue (the staging area grows
            // then); recording: as many frames as whole packets of the largest size fit.
            guard byteSize > 0 else { return .failure(StatusError(kAudio_ParamError)) }
            let packets = max(Int(byteSize) / codec.maximumPacketSize, 1)
            frames = packets * codec.framesPerPacket
        } else {
            guard Int(byteSize) >= pcm.bytesPerFrame else { return .failure(StatusError(kAudio_ParamError)) }
            frames = Int(byteSize) / pcm.bytesPerFrame
        }
        guard let buffer = BufferHeaderArena.shared.allocate() else { return .failure(StatusError(kAudio_MemFullError)) }
        let data = UnsafeMutableRawPointer.allocate(byteCount: Int(byteSize), alignment: 16)
        data.initializeMemory(as: UInt8.self, repeating: 0, count: Int(byteSize))
        let packets: UnsafeMutablePointer<AudioStreamPacketDescription>? =
            packetDescriptions > 0 ? .allocate(capacity: Int(packetDescriptions)) : nil
        packets?.initialize(repeating: AudioStreamPacketDescription(), count: Int(packetDescriptions))
        buffer.initialize(to: AudioQueueBuffer(
            mAudioDataBytesCapacity: byteSize, mAudioData: data, mAudioDataByteSize: 0, mUserData: nil,
            mPacketDescriptionCapacity: packetDescriptions, mPacketDescriptions: packets, mPacketDescriptionCount: 0))
        let stagingFrames = max(frames, minimumStagingFrames)
        let staging = UnsafeMutablePointer<Float>.allocate(capacity: stagingFrames * pcm.channels)
        staging.initialize(repeating: 0, count: stagingFrames * pcm.channels)
        let slot = BufferSlot(token: nextToken, buffer: buffer, staging: staging, capacityFrames: stagingFrames)
        nextToken += 1
        slots[buffer] = slot
        slotsByToken[slot.token] = slot
        return .success(buffer)
    }

    /// Frees a buffer that is not enqueued.
    func free(_ buffer: AudioQueueBufferRef) -> OSStatus {
        guard let slot = slots[buffer] else { return kAudioQueueErr_InvalidBuffer }
        if slot.enqueued { return kAudioQueueErr_BufferInQueue }
        slots[buffer] = nil
        slotsByToken[slot.token] = nil
        slot.free()
        return noErr
    }

    /// The engine has given back the buffer it knows as `token`: no longer enqueued. `nil` when
    /// the buffer was freed meanwhile.
    func takeBack(token: Int) -> BufferSlot? {
        guard let slot = slotsByToken[token] else { return nil }
        slot.enqueued = false
        return slot
    }
}
