import CoreAudioTypes

/// The codec of a queue created with a compressed description (AAC, IMA4, MP3, ALAC, µ-law…).
///
/// Playback: the packets of each enqueued buffer are decoded on the enqueueing thread into the
/// buffer's float staging area, so the server thread only ever sees float, as for linear PCM.
/// Recording: captured float is encoded into packets on the queue's callback thread before the
/// callback runs. Callbacks handle only packets; the server thread never touches a codec.
final class AudioQueueCodec {
    let isOutput: Bool
    /// The compressed description, completed (frames per packet, constant packet size).
    let format: AudioStreamBasicDescription
    private var core: ConverterCore
    /// The last converter failure, for `kAudioQueueProperty_ConverterError`.
    private(set) var lastError: OSStatus = noErr

    /// Float interleaved at the stream's rate and channel count: what the engine plays or captures.
    static func floatFormat(rate: Double, channels: UInt32) -> AudioStreamBasicDescription {
        AudioStreamBasicDescription(
            mSampleRate: rate, mFormatID: kAudioFormatLinearPCM, mFormatFlags: kAudioFormatFlagsNativeFloatPacked,
            mBytesPerPacket: 4 * channels, mFramesPerPacket: 1, mBytesPerFrame: 4 * channels, mChannelsPerFrame: channels,
            mBitsPerChannel: 32, mReserved: 0)
    }

    init(format: AudioStreamBasicDescription, isOutput: Bool) throws(AudioFailure) {
        self.isOutput = isOutput
        let completed = try ConverterCore.complete(format, sampleRateFrom: nil)
        guard (1...8).contains(completed.mChannelsPerFrame) else {
            throw AudioFailure(kAudioFormatUnsupportedDataFormatError, "queues carry 1 … 8 channels")
        }
        let pcm = Self.floatFormat(rate: completed.mSampleRate, channels: completed.mChannelsPerFrame)
        core = isOutput ? try ConverterCore(from: completed, to: pcm) : try ConverterCore(from: pcm, to: completed)
        self.format = isOutput ? core.source : core.destination
    }

    /// The magic cookie: for playback the decoder's (set it before the first buffer), for
    /// recording the encoder's (write it to the file).
    var magicCookie: [UInt8] {
        get { isOutput ? core.decompressionCookie : core.compressionCookie }
        set {
            guard isOutput else { return }
            core.decompressionCookie = newValue
            core.reset()
        }
    }

    /// The largest packet of the format (recording buffers are sized from it): for recording,
    /// what the encoder can produce (``ConverterCore/maximumOutputPacketSize``); for playback,
    /// the format's bound (AAC's 6144 bits per channel).
    var maximumPacketSize: Int {
        if format.mBytesPerPacket > 0 { return Int(format.mBytesPerPacket) }
        if !isOutput, let size = core.maximumOutputPacketSize { return size }
        switch format.mFormatID {
        case kAudioFormatMPEG4AAC: return 768 * Int(format.mChannelsPerFrame)
        default: return max(8192, 1536 * Int(format.mChannelsPerFrame))
        }
    }

    var framesPerPacket: Int { max(Int(format.mFramesPerPacket), 1) }

    /// Recording: the encoder's bit rate (bits per second) and quality (0…127), before the first
    /// buffer is encoded.
    func setEncoder(bitRate: Int?, quality: Int?) {
        guard !isOutput else { return }
        if let bitRate { core.bitRate = bitRate }
        if let quality { core.codecQuality = min(max(quality, 0), 0x7F) }
    }

    /// Decodes a playback buffer's packets into `staging`, growing it when needed; returns the
    /// frames decoded, or the status to return from the enqueue call.
    func decode(
        _ buffer: AudioQueueBufferRef, descriptions: UnsafeBufferPointer<AudioStreamPacketDescription>,
        into staging: inout UnsafeMutablePointer<Float>, capacity: inout Int
    ) -> Result<Int, StatusError> {
        let bytes = Int(buffer.pointee.mAudioDataByteSize)
        let data: UnsafeMutableRawPointer = buffer.pointee.mAudioData
        do {
            if descriptions.isEmpty {
                let fixed = Int(format.mBytesPerPacket)
                guard fixed > 0 else { return .failure(StatusError(kAudio_ParamError)) }
                guard bytes % fixed == 0 else { return .failure(StatusError(kAudio_ParamError)) }
                try core.pushPacket(UnsafeRawBufferPointer(start: data, count: bytes))
            } else {
                for d in descriptions {
                    guard d.mStartOffset >= 0, d.mStartOffset <= Int64(bytes) - Int64(d.mDataByteSize) else {
                        return .failure(StatusError(kAudio_ParamError))
                    }
                    try core.pushPacket(UnsafeRawBufferPointer(start: data + Int(d.mStartOffset), count: Int(d.mDataByteSize)))
                }
            }
        } catch {
            lastError = error.status
            return .failure(StatusError(kAudioQueueErr_InvalidCodecAccess))
        }
        let frames = core.availableFrames
        let channels = Int(format.mChannelsPerFrame)
        if frames > capacity {
            staging.deallocate()
            staging = .allocate(capacity: frames * channels)
            capacity = frames
        }
        var list = AudioBufferList(
            mNumberBuffers: 1,
            mBuffers: AudioBuffer(mNumberChannels: UInt32(channels), mDataByteSize: UInt32(frames * channels * 4), mData: staging))
        return .success(core.takeFrames(frames, into: UnsafeMutableAudioBufferListPointer(&list)))
    }

    /// Encodes `frames` captured frames and fills a recording buffer with as many whole packets as
    /// fit (the rest wait for the next buffer). Returns the packet count and whether the buffer's
    /// packet descriptions were filled.
    func encode(_ staging: UnsafeMutablePointer<Float>, frames: Int, into buffer: AudioQueueBufferRef) -> (packets: UInt32, described: Bool) {
        let channels = Int(format.mChannelsPerFrame)
        var list = AudioBufferList(
            mNumberBuffers: 1,
            mBuffers: AudioBuffer(mNumberChannels: UInt32(channels), mDataByteSize: UInt32(frames * channels * 4), mData: staging))
        do {
            try core.pushPCM(UnsafeMutableAudioBufferListPointer(&list), frames: frames)
        } catch {
            lastError = error.status
        }
        let variable = format.isVariablePacketSize
        let descriptionRoom = Int(buffer.pointee.mPacketDescriptionCapacity)
        let maxPackets = variable ? descriptionRoom : Int.max
        let taken = core.takePackets(
            max: maxPackets, capacity: Int(buffer.pointee.mAudioDataBytesCapacity), into: buffer.pointee.mAudioData,
            descriptions: variable ? buffer.pointee.mPacketDescriptions : nil, variableFrames: format.mFramesPerPacket == 0)
        buffer.pointee.mAudioDataByteSize = UInt32(taken.bytes)
        buffer.pointee.mPacketDescriptionCount = variable ? UInt32(taken.packets) : 0
        return (UInt32(taken.packets), variable)
    }

    /// Forgets codec state and buffered audio (reset, stop).
    func reset() { core.reset() }
}
