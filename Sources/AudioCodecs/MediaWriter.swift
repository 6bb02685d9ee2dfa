internal import CFFmpeg
package import CoreAudioTypes
internal import Glibc

/// Writes packets of one audio stream into a container through libavformat (M4A/MP4, FLAC, MP3,
/// ADTS, Ogg). The caller encodes; this only muxes.
package final class MediaWriter {
    private var context: UnsafeMutablePointer<AVFormatContext>?
    private var packet: UnsafeMutablePointer<AVPacket>?
    private let stream: UnsafeMutablePointer<AVStream>
    private let sampleRate: Int
    private let container: String
    private let path: String
    private var pts: Int64
    private var finished = false
    private let primingFrames: Int
    /// The last packet is held back one call, so the end trim can ride on it (muxers such as
    /// MP3's LAME tag read encoder delay and padding from packet side data).
    private var held: [UInt8] = []
    private var heldFrames = 0
    private var hasHeld = false
    private var written = 0

    /// - Parameters:
    ///   - container: libavformat's muxer name (`"ipod"`, `"mp4"`, `"flac"`, `"mp3"`, `"adts"`, `"ogg"`).
    ///   - primingFrames: encoder delay; the first packet starts that many frames before zero, so
    ///     the container records the trim (an MP4 edit list).
    package init(
        path: String, container: String, formatID: AudioFormatID, sampleRate: Int, channels: Int,
        framesPerPacket: Int, cookie: [UInt8], bitRate: Int, bitsPerSample: Int = 0, primingFrames: Int = 0
    ) throws(CodecError) {
        _ = quietFFmpeg
        guard let info = CodecCatalog.info(formatID) else {
            throw CodecError(.unsupported, "no codec for format '\(formatID.fourCharCodeString)'")
        }
        var ctx: UnsafeMutablePointer<AVFormatContext>?
        var status = avformat_alloc_output_context2(&ctx, nil, container, path)
        guard status >= 0, let ctx else { throw CodecError("creating a \(container) file", code: status) }
        context = ctx
        guard let stream = avformat_new_stream(ctx, nil), let par = stream.pointee.codecpar, let packet = av_packet_alloc() else {
            avformat_free_context(ctx)
            throw CodecError(.other, "out of memory")
        }
        self.stream = stream
        self.packet = packet
        self.sampleRate = sampleRate
        self.container = container
        self.path = path
        par.pointee.codec_type = AVMEDIA_TYPE_AUDIO
        par.pointee.codec_id = info.codec
        par.pointee.sample_rate = Int32(sampleRate)
        av_channel_layout_default(&par.pointee.ch_layout, Int32(channels))
        par.pointee.frame_size = Int32(framesPerPacket)
        par.pointee.bit_rate = Int64(bitRate)
        par.pointee.bits_per_raw_sample = Int32(bitsPerSample)
        par.pointee.initial_padding = Int32(primingFrames)
        let extradata = MagicCookie.extradata(fromCookie: cookie, formatID: formatID)
        if !extradata.isEmpty {
            guard let bytes = av_mallocz(extradata.count + Int(oav_input_buffer_padding())) else {
                avformat_free_context(ctx)
                throw CodecError(.other, "out of memory")
            }
            bytes.copyMemory(from: extradata, byteCount: extradata.count)
            par.pointee.extradata = bytes.assumingMemoryBound(to: UInt8.self)
            par.pointee.extradata_size = Int32(extradata.count)
        }
        stream.pointee.time_base = AVRational(num: 1, den: Int32(sampleRate))
        pts = -Int64(primingFrames)
        self.primingFrames = primingFrames
        status = avio_open(&ctx.pointee.pb, path, AVIO_FLAG_WRITE)
        guard status >= 0 else {
            avformat_free_context(ctx)
            context = nil
            throw CodecError("creating \(path)", code: status)
        }
        status = avformat_write_header(ctx, nil)
        guard status >= 0 else {
            avio_closep(&ctx.pointee.pb)
            avformat_free_context(ctx)
            context = nil
            throw CodecError("writing the \(container) header", code: status)
        }
    }

    deinit {
        if !finished { try? finish() }
        if let context {
            avio_closep(&context.pointee.pb)
            avformat_free_context(context)
        }
        av_packet_free(&packet)
    }

    /// Appends one packet of `frames` frames.
    package func write(_ bytes: UnsafeRawBufferPointer, frames: Int) throws(CodecError) {
        guard !finished else { throw CodecError(.io, "the file is closed") }
        if hasHeld { try emit(endTrim: 0) }
        held.removeAll(keepingCapacity: true)
        held.append(contentsOf: bytes)
        heldFrames = frames
        hasHeld = true
    }

    private func emit(endTrim: Int) throws(CodecError) {
        guard let context, let packet else { throw CodecError(.io, "the file is closed") }
        hasHeld = false
        let frames = heldFrames
        var status = av_new_packet(packet, Int32(held.count))
        guard status >= 0 else { throw CodecError("allocating a packet", code: status) }
        held.withUnsafeBytes { bytes in
            if !bytes.isEmpty { packet.pointee.data.update(from: bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), count: bytes.count) }
        }
        let skipStart = written == 0 ? primingFrames : 0
        written += 1
        if skipStart > 0 || endTrim > 0, let side = av_packet_new_side_data(packet, AV_PKT_DATA_SKIP_SAMPLES, 10) {
            for i in 0..<4 {
                side[i] = UInt8(truncatingIfNeeded: skipStart >> (8 * i))
                side[4 + i] = UInt8(truncatingIfNeeded: endTrim >> (8 * i))
            }
            side[8] = 0
            side[9] = 0
        }
        packet.pointee.stream_index = stream.pointee.index
        let tb = stream.pointee.time_base
        let scale = { (frames: Int64) -> Int64 in av_rescale_q(frames, AVRational(num: 1, den: Int32(self.sampleRate)), tb) }
        packet.pointee.pts = scale(pts)
        packet.pointee.dts = packet.pointee.pts
        packet.pointee.duration = scale(Int64(frames))
        pts += Int64(frames)
        status = av_write_frame(context, packet)
        av_packet_unref(packet)
        guard status >= 0 else { throw CodecError("writing a packet to \(path)", code: status) }
    }

    /// Writes the trailer and closes the file. `remainderFrames` is the padding in the last packet.
    /// For FLAC, `finalCookie` (the encoder's STREAMINFO after the last packet: length, frame
    /// sizes, MD5) replaces the provisional one.
    package func finish(remainderFrames: Int = 0, finalCookie: [UInt8] = []) throws(CodecError) {
        guard let context, !finished else { return }
        if hasHeld { try emit(endTrim: remainderFrames) }
        finished = true
        let status = av_write_trailer(context)
        avio_closep(&context.pointee.pb)
        guard status >= 0 else { throw CodecError("finishing \(path)", code: status) }
        if container == "flac", finalCookie.count == 34 {
            // "fLaC", then the STREAMINFO block header (4 bytes), then its 34 bytes.
            let fd = open(path, O_WRONLY | O_CLOEXEC)
            guard fd >= 0 else { throw CodecError(.io, "cannot reopen \(path)") }
            defer { close(fd) }
            let wrote = finalCookie.withUnsafeBytes { pwrite(fd, $0.baseAddress, 34, 8) }
            guard wrote == 34 else { throw CodecError(.io, "cannot update the FLAC stream info of \(path)") }
        }
    }
}
