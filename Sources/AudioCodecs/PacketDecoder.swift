internal import CFFmpeg
internal import COpus
internal import Glibc
package import CoreAudioTypes

/// Decodes packets of one compressed format to interleaved 32-bit float with FFmpeg, and mono or
/// stereo Opus of one stream (mapping family 0) at Opus's own rates with libopus: an empty Opus packet is a lost one, and comes
/// out as libopus's concealment of it (as long as the packet before it), which FFmpeg's decoders
/// cannot give (an empty packet ends their stream). Any other format's empty packet gives nothing.
///
/// Runs on the caller's thread and allocates; never use it on a real-time thread.
package final class PacketDecoder {
    package let formatID: AudioFormatID
    package let channels: Int
    /// The rate decoded audio comes out at; HE-AAC may report half of it in its description,
    /// so this is updated from the first decoded frame.
    package private(set) var sampleRate: Double
    private var context: UnsafeMutablePointer<AVCodecContext>?
    private var frame: UnsafeMutablePointer<AVFrame>?
    private var packet: UnsafeMutablePointer<AVPacket>?
    /// libopus's decoder (Opus, one or two channels), in place of FFmpeg's.
    private var opus: OpaquePointer?
    /// The last Opus packet's frames: what a lost one conceals.
    private var opusPacketFrames = 0
    private var opusScratch: [Float] = []
    /// The stream's output gain (OpusHead's), as a factor.
    private var opusGain: Float = 1

    /// - Parameters:
    ///   - bytesPerPacket: the constant packet size (IMA4's block), or 0.
    ///   - bitsPerSample: the source bit depth where the codec needs it, or 0.
    ///   - cookie: Apple's magic cookie for the format, if it has one.
    package init(
        formatID: AudioFormatID, sampleRate: Double, channels: Int, bytesPerPacket: Int = 0,
        bitsPerSample: Int = 0, cookie: [UInt8] = []
    ) throws {
        _ = quietFFmpeg
        guard let info = CodecCatalog.info(formatID), info.canDecode, let codec = avcodec_find_decoder(info.codec) else {
            throw CodecError(.unsupported, "no decoder for format '\(formatID.fourCharCodeString)'")
        }
        guard (1...64).contains(channels) else { throw CodecError(.unsupported, "\(channels) channels cannot be decoded") }
        guard sampleRate >= 1, sampleRate <= 768_000 else { throw CodecError(.unsupported, "sample rate \(sampleRate) cannot be decoded") }
        // FFmpeg's fields are 32-bit: a description's value that does not fit is no real stream.
        guard let blockAlign = Int32(exactly: bytesPerPacket), blockAlign >= 0,
            let bitsPerCodedSample = Int32(exactly: bitsPerSample), (0...64).contains(bitsPerCodedSample)
        else {
            throw CodecError(.unsupported, "packets of \(bytesPerPacket) bytes with \(bitsPerSample)-bit samples cannot be decoded")
        }
        self.formatID = formatID
        self.channels = channels
        self.sampleRate = sampleRate
        // OpusHead (the cookie's Ogg form): its channel mapping family (0: one stream, what
        // libopus's plain decoder takes) and its output gain (Q7.8 dB, which FFmpeg applies).
        let head = formatID == kAudioFormatOpus ? MagicCookie.extradata(fromCookie: cookie, formatID: formatID) : []
        let family = head.count >= 19 ? head[18] : 0
        if formatID == kAudioFormatOpus, channels <= 2, family == 0, [8000.0, 12000, 16000, 24000, 48000].contains(sampleRate) {
            if head.count >= 18 {
                let q78 = Int16(bitPattern: UInt16(head[16]) | UInt16(head[17]) << 8)
                opusGain = Float(pow(10, Double(q78) / 256 / 20))
            }
            var error: Int32 = 0
            guard let decoder = opus_decoder_create(Int32(sampleRate), Int32(channels), &error), error == OPUS_OK else {
                throw CodecError(.other, "libopus refused a \(channels)-channel decoder at \(sampleRate) Hz (\(error))")
            }
            opus = decoder
            // 120 ms, the longest Opus packet.
            opusScratch = [Float](repeating: 0, count: Int(sampleRate) * 12 / 100 * channels)
            opusPacketFrames = Int(sampleRate) / 50
            return
        }
        guard let context = avcodec_alloc_context3(codec), let frame = av_frame_alloc(), let packet = av_packet_alloc() else {
            throw CodecError(.other, "out of memory creating a decoder")
        }
        self.context = context
        self.frame = frame
        self.packet = packet
        context.pointee.sample_rate = Int32(sampleRate)
        av_channel_layout_default(&context.pointee.ch_layout, Int32(channels))
        context.pointee.block_align = blockAlign
        context.pointee.bits_per_coded_sample = bitsPerCodedSample
        var extradata = MagicCookie.extradata(fromCookie: cookie, formatID: formatID)
        if formatID == kAudioFormatOpus && extradata.count >= 12 {
            // FFmpeg's Opus decoder would drop OpusHead's pre-skip itself; callers trim priming
            // from the packet table (as for every other format), so the decoder must not.
            extradata[10] = 0
            extradata[11] = 0
        }
        if !extradata.isEmpty {
            let padded = Int(oav_input_buffer_padding())
            guard let bytes = av_mallocz(extradata.count + padded) else { throw CodecError(.other, "out of memory") }
            bytes.copyMemory(from: extradata, byteCount: extradata.count)
            context.pointee.extradata = bytes.assumingMemoryBound(to: UInt8.self)
            context.pointee.extradata_size = Int32(extradata.count)
        }
        let status = avcodec_open2(context, codec, nil)
        guard status >= 0 else {
            throw CodecError("opening the '\(formatID.fourCharCodeString)' decoder", code: status)
        }
    }

    deinit {
        if let opus { opus_decoder_destroy(opus) }
        avcodec_free_context(&context)
        av_frame_free(&frame)
        av_packet_free(&packet)
    }

    /// Decodes one packet and appends what comes out to `output` (interleaved float, `channels`
    /// per frame). Returns the frames appended; a codec with delay may return 0 for early packets.
    @discardableResult
    package func decode(_ bytes: UnsafeRawBufferPointer, into output: inout [Float]) throws -> Int {
        if let opus { return try decodeOpus(opus, bytes, into: &output) }
        guard let context, let packet else { return 0 }
        guard !bytes.isEmpty else { return 0 }
        guard let size = Int32(exactly: bytes.count) else { throw CodecError(.unsupported, "a packet of \(bytes.count) bytes cannot be decoded") }
        let status = av_new_packet(packet, size)
        guard status >= 0 else { throw CodecError("allocating a packet", code: status) }
        packet.pointee.data.update(from: bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), count: bytes.count)
        defer { av_packet_unref(packet) }
        var sent = avcodec_send_packet(context, packet)
        var total = 0
        if sent == oav_averror_eagain() {
            total += try receive(into: &output)
            sent = avcodec_send_packet(context, packet)
        }
        guard sent >= 0 else { throw CodecError("decoding a '\(formatID.fourCharCodeString)' packet", code: sent) }
        total += try receive(into: &output)
        return total
    }

    /// Drains what the codec still holds at the end of the stream.
    @discardableResult
    package func finish(into output: inout [Float]) throws -> Int {
        guard let context else { return 0 }
        _ = avcodec_send_packet(context, nil)
        return try receive(into: &output)
    }

    /// Forgets codec state (a seek or a reset).
    package func reset() {
        if let opus {
            // Cannot fail for a rate and channel count the decoder was made with.
            _ = opus_decoder_init(opus, Int32(sampleRate), Int32(channels))
            opusPacketFrames = Int(sampleRate) / 50
        }
        if let context { avcodec_flush_buffers(context) }
    }

    /// One Opus packet through libopus; an empty one is concealed.
    private func decodeOpus(_ decoder: OpaquePointer, _ bytes: UnsafeRawBufferPointer, into output: inout [Float]) throws -> Int {
        guard let size = Int32(exactly: bytes.count) else { throw CodecError(.unsupported, "a packet of \(bytes.count) bytes cannot be decoded") }
        let capacity = Int32(opusScratch.count / channels)
        let frames = opusScratch.withUnsafeMutableBufferPointer { out -> Int32 in
            if bytes.isEmpty {
                return opus_decode_float(decoder, nil, 0, out.baseAddress!, Int32(opusPacketFrames), 0)
            }
            return opus_decode_float(decoder, bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), size, out.baseAddress!, capacity, 0)
        }
        guard frames >= 0 else {
            let reason = String(cString: opus_strerror(frames))
            throw CodecError(.other, "decoding an Opus packet: \(reason)")
        }
        if !bytes.isEmpty { opusPacketFrames = Int(frames) }
        if opusGain == 1 {
            output.append(contentsOf: opusScratch[0..<(Int(frames) * channels)])
        } else {
            output.append(contentsOf: opusScratch[0..<(Int(frames) * channels)].map { $0 * opusGain })
        }
        return Int(frames)
    }

    private func receive(into output: inout [Float]) throws -> Int {
        guard let context, let frame else { return 0 }
        var total = 0
        while true {
            let status = avcodec_receive_frame(context, frame)
            if status == oav_averror_eagain() || status == oav_averror_eof() { break }
            guard status >= 0 else { throw CodecError("decoding '\(formatID.fourCharCodeString)'", code: status) }
            defer { av_frame_unref(frame) }
            if frame.pointee.sample_rate > 0 { sampleRate = Double(frame.pointee.sample_rate) }
            let got = Int(frame.pointee.ch_layout.nb_channels)
            if got == channels {
                SampleLayout.appendInterleaved(frame, to: &output)
            } else {
                // The stream changed its channel count (an HE-AAC v2 parametric-stereo stream declared
                // mono, say): map onto the declared count so callers keep one layout.
                var temp: [Float] = []
                SampleLayout.appendInterleaved(frame, to: &temp)
                let frames = Int(frame.pointee.nb_samples)
                ChannelMapper.map(temp, from: got, to: channels, frames: frames, into: &output)
            }
            total += Int(frame.pointee.nb_samples)
        }
        return total
    }
}
