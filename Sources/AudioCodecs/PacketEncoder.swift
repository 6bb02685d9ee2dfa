internal import CFFmpeg
package import CoreAudioTypes

/// Encodes interleaved 32-bit float into packets of one compressed format with FFmpeg.
///
/// Runs on the caller's thread and allocates; never use it on a real-time thread.
package final class PacketEncoder {
    package let formatID: AudioFormatID
    package let sampleRate: Int
    package let channels: Int
    /// Frames in each packet; `0` when the codec takes any number (µ-law, A-law).
    package let framesPerPacket: Int
    /// Frames of encoder delay at the start of the stream (AAC's priming), which a reader skips.
    package let primingFrames: Int
    /// The bit rate the encoder was opened with (0 for lossless and companded formats).
    package let bitRate: Int
    /// Frames given to ``encode(_:frames:_:)`` so far.
    package private(set) var framesIn = 0
    /// Frames the packets emitted so far decode to (priming and end padding included): whole
    /// packets for codecs of fixed packet size (FFmpeg shortens the last packets' durations to
    /// the input, but a decoder returns every frame of them).
    package private(set) var framesOut = 0
    /// Whether ``finish(_:)`` has drained the codec.
    package private(set) var finished = false
    private let bits: Int
    private var context: UnsafeMutablePointer<AVCodecContext>?
    private var frame: UnsafeMutablePointer<AVFrame>?
    private var packet: UnsafeMutablePointer<AVPacket>?
    private var pending: [Float] = []
    private var framesSent: Int64 = 0
    private let acceptsShortFrames: Bool

    /// Sample rates the encoder takes, or `nil` when it takes any.
    package static func supportedSampleRates(_ formatID: AudioFormatID) -> [Int]? {
        guard let info = CodecCatalog.info(formatID), let name = info.encoderName,
            let codec = avcodec_find_encoder_by_name(name), let list = codec.pointee.supported_samplerates
        else { return nil }
        var rates: [Int] = []
        var i = 0
        while list[i] != 0 {
            rates.append(Int(list[i]))
            i += 1
        }
        return rates
    }

    /// - Parameters:
    ///   - bitRate: bits per second for lossy formats; `nil` picks 64 kb/s per channel (AAC) or the codec's default.
    ///   - quality: Apple's codec quality, 0 (min) … 127 (max); trades speed for quality where the codec can.
    ///   - bitsPerSample: source depth for lossless formats (16, 20, 24 or 32).
    package init(
        formatID: AudioFormatID, sampleRate: Int, channels: Int, bitRate: Int? = nil, quality: Int? = nil,
        bitsPerSample: Int = 16
    ) throws {
        _ = quietFFmpeg
        guard let info = CodecCatalog.info(formatID), info.canEncode, let name = info.encoderName,
            let codec = avcodec_find_encoder_by_name(name)
        else { throw CodecError(.unsupported, "no encoder for format '\(formatID.fourCharCodeString)'") }
        guard (1...8).contains(channels) else { throw CodecError(.unsupported, "\(channels) channels cannot be encoded as \(info.name)") }
        if let rates = Self.supportedSampleRates(formatID), !rates.contains(sampleRate) {
            throw CodecError(.unsupported, "\(info.name) cannot be encoded at \(sampleRate) Hz (it takes \(rates.map(String.init).joined(separator: ", ")))")
        }
        guard sampleRate > 0, sampleRate <= 384_000 else { throw CodecError(.unsupported, "sample rate \(sampleRate) cannot be encoded") }
        self.formatID = formatID
        self.sampleRate = sampleRate
        self.channels = channels
        self.bits = bitsPerSample
        guard let context = avcodec_alloc_context3(codec), let frame = av_frame_alloc(), let packet = av_packet_alloc() else {
            throw CodecError(.other, "out of memory creating an encoder")
        }
        self.context = context
        self.frame = frame
        self.packet = packet
        context.pointee.sample_rate = Int32(sampleRate)
        context.pointee.time_base = AVRational(num: 1, den: Int32(sampleRate))
        av_channel_layout_default(&context.pointee.ch_layout, Int32(channels))
        context.pointee.sample_fmt = Self.sampleFormat(codec, lossless: formatID == kAudioFormatAppleLossless || formatID == kAudioFormatFLAC, bits: bitsPerSample)
        if context.pointee.sample_fmt == AV_SAMPLE_FMT_S32 || context.pointee.sample_fmt == AV_SAMPLE_FMT_S32P {
            context.pointee.bits_per_raw_sample = Int32(min(max(bitsPerSample, 17), 32))
        }
        switch formatID {
        case kAudioFormatMPEG4AAC:
            context.pointee.bit_rate = Int64(bitRate ?? min(64_000 * channels, 320_000))
            if let quality, quality < 64 { av_opt_set(context.pointee.priv_data, "aac_coder", "fast", 0) }
        case kAudioFormatMPEGLayer3, kAudioFormatOpus:
            context.pointee.bit_rate = Int64(bitRate ?? min(64_000 * channels, 320_000))
            if let quality { context.pointee.compression_level = Int32(min(max(quality * 10 / 127, 0), 10)) }
        case kAudioFormatAppleLossless, kAudioFormatFLAC:
            context.pointee.frame_size = 4096
            if let quality { context.pointee.compression_level = Int32(min(max(quality * 8 / 127, 0), 8)) }
        default:
            break
        }
        let status = avcodec_open2(context, codec, nil)
        guard status >= 0 else { throw CodecError("opening the \(info.name) encoder", code: status) }
        framesPerPacket = Int(context.pointee.frame_size)
        primingFrames = Int(context.pointee.initial_padding)
        self.bitRate = Int(context.pointee.bit_rate)
        acceptsShortFrames = (codec.pointee.capabilities & (AV_CODEC_CAP_SMALL_LAST_FRAME | AV_CODEC_CAP_VARIABLE_FRAME_SIZE)) != 0
    }

    deinit {
        avcodec_free_context(&context)
        av_frame_free(&frame)
        av_packet_free(&packet)
    }

    /// The largest packet this encoder can produce, in bytes, as the codec bounds it: AAC's 6144
    /// bits per channel (FFmpeg's encoder keeps to it), the maximum frame size ALAC's and FLAC's
    /// encoders declare in their configuration, a constant-bit-rate MP3 frame with its padding
    /// slot, Opus's largest packet per stream as FFmpeg's libopus wrapper allows it, or the
    /// constant packet size of the other formats. `nil` when the codec states no bound.
    package var maximumPacketSize: Int? {
        guard let context else { return nil }
        let extradata = context.pointee.extradata.map { Array(UnsafeBufferPointer(start: $0, count: Int(context.pointee.extradata_size))) } ?? []
        switch formatID {
        case kAudioFormatMPEG4AAC: return 768 * channels
        case kAudioFormatAppleLossless:
            // 'alac' atom (12 bytes) + ALACSpecificConfig: maxFrameBytes at byte 12 of the config.
            guard extradata.count >= 28 else { return nil }
            let bound = extradata[24..<28].reduce(0) { $0 << 8 | Int($1) }
            return bound > 0 ? bound : nil
        case kAudioFormatFLAC:
            // STREAMINFO: maximum frame size, 24 bits at byte 7 (known to the encoder from the start).
            guard extradata.count >= 10 else { return nil }
            let bound = extradata[7..<10].reduce(0) { $0 << 8 | Int($1) }
            return bound > 0 ? bound : nil
        case kAudioFormatMPEGLayer3:
            guard bitRate > 0 else { return nil }
            // 1152 frames (MPEG-1) or 576 (MPEG-2/2.5) at the bit rate, plus the padding slot.
            let samples = sampleRate >= 32000 ? 1152 : 576
            return samples / 8 * bitRate / sampleRate + 1
        case kAudioFormatOpus:
            // OpusHead: channel mapping family at byte 18; with one, the stream count at 19.
            let streams = extradata.count >= 21 && extradata[18] != 0 ? Int(extradata[19]) : 1
            return (1275 * 3 + 7) * max(streams, 1)
        default:
            let info = CodecCatalog.info(formatID)
            guard let info, info.bytesPerPacketPerChannel > 0 else { return nil }
            return info.bytesPerPacketPerChannel * channels
        }
    }

    /// Apple's magic cookie for the stream (AAC's ES descriptor, ALAC's config…), empty when the
    /// format has none. Known once the encoder is open.
    package var cookie: [UInt8] {
        guard let context, let data = context.pointee.extradata, context.pointee.extradata_size > 0 else { return [] }
        let bytes = Array(UnsafeBufferPointer(start: data, count: Int(context.pointee.extradata_size)))
        return MagicCookie.cookie(fromExtradata: bytes, formatID: formatID, bitRate: bitRate)
    }

    private static func sampleFormat(_ codec: UnsafePointer<AVCodec>, lossless: Bool, bits: Int) -> AVSampleFormat {
        var offered: [AVSampleFormat] = []
        if let list = codec.pointee.sample_fmts {
            var i = 0
            while list[i] != AV_SAMPLE_FMT_NONE {
                offered.append(list[i])
                i += 1
            }
        }
        let preference: [AVSampleFormat] =
            lossless && bits > 16
            ? [AV_SAMPLE_FMT_S32, AV_SAMPLE_FMT_S32P, AV_SAMPLE_FMT_S16, AV_SAMPLE_FMT_S16P]
            : lossless
                ? [AV_SAMPLE_FMT_S16, AV_SAMPLE_FMT_S16P, AV_SAMPLE_FMT_S32, AV_SAMPLE_FMT_S32P]
                : [AV_SAMPLE_FMT_FLTP, AV_SAMPLE_FMT_FLT, AV_SAMPLE_FMT_S16, AV_SAMPLE_FMT_S16P, AV_SAMPLE_FMT_S32, AV_SAMPLE_FMT_S32P]
        return preference.first { offered.contains($0) } ?? offered.first ?? AV_SAMPLE_FMT_S16
    }

    /// Encodes `frames` interleaved frames; `emit` receives each finished packet and its frame count.
    package func encode(
        _ samples: UnsafePointer<Float>, frames: Int, _ emit: (UnsafeRawBufferPointer, Int) throws -> Void
    ) throws {
        framesIn += frames
        var offset = 0
        if framesPerPacket == 0 {
            // Any size goes: send in slices of at most 4096 frames.
            while offset < frames {
                let n = min(4096, frames - offset)
                try send(samples + offset * channels, frames: n, emit)
                offset += n
            }
            return
        }
        if !pending.isEmpty {
            let need = min(framesPerPacket - pending.count / channels, frames)
            pending.append(contentsOf: UnsafeBufferPointer(start: samples, count: need * channels))
            offset = need
            if pending.count == framesPerPacket * channels {
                try pending.withUnsafeBufferPointer { try send($0.baseAddress!, frames: framesPerPacket, emit) }
                pending.removeAll(keepingCapacity: true)
            }
        }
        while frames - offset >= framesPerPacket {
            try send(samples + offset * channels, frames: framesPerPacket, emit)
            offset += framesPerPacket
        }
        if offset < frames {
            pending.append(contentsOf: UnsafeBufferPointer(start: samples + offset * channels, count: (frames - offset) * channels))
        }
    }

    /// Encodes what is pending (a short last packet, or one padded with silence when the codec
    /// needs whole packets) and drains the codec. Returns the frames of silence added.
    @discardableResult
    package func finish(_ emit: (UnsafeRawBufferPointer, Int) throws -> Void) throws -> Int {
        var padding = 0
        if !pending.isEmpty {
            var frames = pending.count / channels
            if !acceptsShortFrames {
                padding = framesPerPacket - frames
                pending.append(contentsOf: repeatElement(0, count: padding * channels))
                frames = framesPerPacket
            }
            try pending.withUnsafeBufferPointer { try send($0.baseAddress!, frames: frames, emit) }
            pending.removeAll()
        }
        guard let context else { return padding }
        let status = avcodec_send_frame(context, nil)
        guard status >= 0 || status == oav_averror_eof() else { throw CodecError("finishing the encoder", code: status) }
        try receive(emit)
        finished = true
        return padding
    }

    private func send(_ samples: UnsafePointer<Float>, frames: Int, _ emit: (UnsafeRawBufferPointer, Int) throws -> Void) throws {
        guard let context, let frame else { return }
        // The frame's buffers are reused from packet to packet (IMA4 sends 64-frame packets:
        // hundreds of thousands a minute); made writable again only if the codec kept a reference.
        var status: Int32
        if frame.pointee.nb_samples != Int32(frames) || frame.pointee.buf.0 == nil {
            av_frame_unref(frame)
            frame.pointee.nb_samples = Int32(frames)
            frame.pointee.format = context.pointee.sample_fmt.rawValue
            frame.pointee.sample_rate = context.pointee.sample_rate
            av_channel_layout_copy(&frame.pointee.ch_layout, &context.pointee.ch_layout)
            status = av_frame_get_buffer(frame, 0)
        } else {
            status = av_frame_make_writable(frame)
        }
        guard status >= 0 else { throw CodecError("allocating an audio frame", code: status) }
        SampleLayout.fill(frame, from: samples, frames: frames, channels: channels, bits: bits)
        frame.pointee.pts = framesSent
        framesSent += Int64(frames)
        status = avcodec_send_frame(context, frame)
        if status == oav_averror_eagain() {
            try receive(emit)
            status = avcodec_send_frame(context, frame)
        }
        guard status >= 0 else { throw CodecError("encoding", code: status) }
        try receive(emit)
    }

    private func receive(_ emit: (UnsafeRawBufferPointer, Int) throws -> Void) throws {
        guard let context, let packet else { return }
        while true {
            let status = avcodec_receive_packet(context, packet)
            if status == oav_averror_eagain() || status == oav_averror_eof() { return }
            guard status >= 0 else { throw CodecError("encoding", code: status) }
            defer { av_packet_unref(packet) }
            let frames = packet.pointee.duration > 0 ? Int(packet.pointee.duration) : framesPerPacket
            framesOut += framesPerPacket > 0 ? framesPerPacket : frames
            try emit(UnsafeRawBufferPointer(start: packet.pointee.data, count: Int(packet.pointee.size)), frames)
        }
    }
}
