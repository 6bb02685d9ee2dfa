internal import CFFmpeg
package import CoreAudioTypes
internal import Glibc

/// A compressed audio file read through libavformat (M4A, MP3, FLAC, Ogg, ADTS…): its first
/// audio stream's description and a table of every packet, built once when the file opens, so
/// packets can be read in any order as Apple's `AudioFileReadPacketData` reads them.
///
/// Packets whose bytes sit in the file as they are (MP4, MP3, FLAC, ADTS) are read from the file
/// when asked for; packets a container splits or wraps (Ogg pages) are kept in memory.
package final class MediaReader {
    package struct Packet: Sendable {
        /// Byte offset in the file, or in the in-memory store.
        package var offset: Int64
        package var size: Int32
        package var frames: Int32
    }

    /// libavformat's name for the container (`"mov,mp4,m4a,3gp,3g2,mj2"`, `"mp3"`, `"ogg"`…).
    package let containerName: String
    package let formatID: AudioFormatID
    package let sampleRate: Double
    package let channels: Int
    package let bitsPerSample: Int
    package let framesPerPacket: Int
    /// Apple's magic cookie for the stream (empty when the format has none).
    package let cookie: [UInt8]
    /// Bits per second the container declares, or what the packets add up to.
    package let bitRate: Int
    package let primingFrames: Int
    package let remainderFrames: Int
    /// Tags of the file and of the stream (title, artist…), FFmpeg's lower-case keys.
    package let metadata: [String: String]
    package let packets: [Packet]
    /// Packet bytes, when packets are not plain byte ranges of the file.
    private let store: [UInt8]
    private let inMemory: Bool
    private let fd: Int32

    package var packetCount: Int { packets.count }
    /// The packets' frames added up (computed once: ExtAudioFile asks on every read).
    package let totalFrames: Int
    package let dataByteCount: Int64
    /// The largest packet in the file (from the packet table built when it opened).
    package let maximumPacketSize: Int
    /// Audio streams in the file (the first is the one read).
    package let audioStreamCount: Int
    /// Whether the audio data ends the file: its packets are plain byte ranges of the file and
    /// the last of them ends where the file ends (MP4 with its index after the audio, MP3 with a
    /// trailing tag, Ogg's pages: no).
    package let audioDataIsLast: Bool

    package init(path: String) throws(CodecError) {
        _ = quietFFmpeg
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        self.fd = fd
        guard fd >= 0 else { throw CodecError(.io, "cannot open \(path): \(String(cString: strerror(errno)))") }
        var context: UnsafeMutablePointer<AVFormatContext>?
        var status = avformat_open_input(&context, path, nil, nil)
        guard status >= 0, let ctx = context else {
            close(fd)
            throw CodecError("reading \(path)", code: status)
        }
        defer { avformat_close_input(&context) }
        status = avformat_find_stream_info(ctx, nil)
        guard status >= 0 else {
            close(fd)
            throw CodecError("reading the streams of \(path)", code: status)
        }
        let index = av_find_best_stream(ctx, AVMEDIA_TYPE_AUDIO, -1, -1, nil, 0)
        guard index >= 0, let stream = ctx.pointee.streams[Int(index)], let par = stream.pointee.codecpar else {
            close(fd)
            throw CodecError(.invalidData, "\(path) holds no audio stream")
        }
        let codec = par.pointee.codec_id
        guard let id = CodecCatalog.formatID(for: codec, profile: par.pointee.profile) else {
            close(fd)
            throw CodecError(.unsupported, "\(path): audio in \(String(cString: avcodec_get_name(codec))) has no Apple format ID")
        }
        let channels = Int(par.pointee.ch_layout.nb_channels)
        guard par.pointee.sample_rate > 0, (1...64).contains(channels) else {
            close(fd)
            throw CodecError(.invalidData, "\(path): the audio stream declares \(par.pointee.sample_rate) Hz and \(channels) channels")
        }
        var audioStreams = 0
        for i in 0..<Int(ctx.pointee.nb_streams) where ctx.pointee.streams[i]?.pointee.codecpar?.pointee.codec_type == AVMEDIA_TYPE_AUDIO {
            audioStreams += 1
        }
        audioStreamCount = audioStreams
        containerName = String(cString: ctx.pointee.iformat.pointee.name)
        formatID = id
        sampleRate = Double(par.pointee.sample_rate)
        self.channels = channels
        bitsPerSample = Int(par.pointee.bits_per_raw_sample)
        let extradata = par.pointee.extradata.map { Array(UnsafeBufferPointer(start: $0, count: Int(par.pointee.extradata_size))) } ?? []
        cookie = MagicCookie.cookie(fromExtradata: extradata, formatID: id, bitRate: Int(par.pointee.bit_rate))
        var tags: [String: String] = [:]
        for dict in [ctx.pointee.metadata, stream.pointee.metadata] {
            var entry: UnsafeMutablePointer<AVDictionaryEntry>?
            while true {
                entry = av_dict_get(dict, "", entry, AV_DICT_IGNORE_SUFFIX)
                guard let e = entry else { break }
                tags[String(cString: e.pointee.key).lowercased()] = String(cString: e.pointee.value)
            }
        }
        metadata = tags

        // Scan every packet once: sizes, durations, where the bytes are, trims.
        var priming = 0
        var remainder = 0
        let timeBase = stream.pointee.time_base
        let framesPerTick = timeBase.den > 0 ? Double(timeBase.num) * sampleRate / Double(timeBase.den) : 0
        guard let packet = av_packet_alloc() else {
            close(fd)
            throw CodecError(.other, "out of memory")
        }
        var pkt: UnsafeMutablePointer<AVPacket>? = packet
        defer { av_packet_free(&pkt) }
        var check: [UInt8] = []
        var table: [Packet] = []
        var memory: [UInt8] = []
        var inMemory = false
        let fallbackFrames = CodecCatalog.info(id)?.framesPerPacket ?? 0
        while true {
            status = av_read_frame(ctx, packet)
            if status == oav_averror_eof() { break }
            guard status >= 0 else {
                // A damaged tail: keep what was read, as Apple's reader does with a truncated file.
                if table.isEmpty {
                    close(fd)
                    throw CodecError("reading packets of \(path)", code: status)
                }
                break
            }
            defer { av_packet_unref(packet) }
            guard packet.pointee.stream_index == index, packet.pointee.size > 0 else { continue }
            // Bounded: a damaged header can declare any duration.
            let declaredFrames = (Double(packet.pointee.duration) * framesPerTick).rounded()
            var frames = declaredFrames > 0 && declaredFrames < 16_777_216 ? Int32(declaredFrames) : Int32(fallbackFrames)
            var skipSize: Int = 0
            if let side = av_packet_get_side_data(packet, AV_PKT_DATA_SKIP_SAMPLES, &skipSize), skipSize >= 8 {
                let start = Int(UInt32(side[0]) | UInt32(side[1]) << 8 | UInt32(side[2]) << 16 | UInt32(side[3]) << 24)
                let end = Int(UInt32(side[4]) | UInt32(side[5]) << 8 | UInt32(side[6]) << 16 | UInt32(side[7]) << 24)
                if table.count <= 4 { priming += start }
                remainder = end
                // Some demuxers (Ogg) already shorten the last packet's duration by its end trim;
                // the decoder still produces the whole packet, so count it whole.
                if end > 0, let typical = table.first?.frames, Int(frames) + end <= Int(typical) { frames += Int32(end) }
            }
            let size = Int(packet.pointee.size)
            let data = UnsafeRawBufferPointer(start: packet.pointee.data, count: size)
            if !inMemory {
                let pos = packet.pointee.pos
                var same = false
                // Checked packet by packet at first, then every 64th: a container either keeps its
                // packets as plain byte ranges (MP4, MP3, FLAC, ADTS) or does not (Ogg).
                if pos >= 0 && table.count > 32 && table.count % 64 != 0 {
                    same = true
                } else if pos >= 0 {
                    if check.count < size { check = [UInt8](repeating: 0, count: size) }
                    let got = check.withUnsafeMutableBytes { pread(fd, $0.baseAddress, size, off_t(pos)) }
                    same = got == size && check.withUnsafeBytes { memcmp($0.baseAddress!, data.baseAddress!, size) == 0 }
                }
                if same {
                    table.append(Packet(offset: pos, size: Int32(size), frames: frames))
                    continue
                }
                // Packets so far were file ranges; from here on they are kept in memory.
                inMemory = true
                for (i, p) in table.enumerated() {
                    let start = memory.count
                    memory.append(contentsOf: repeatElement(0, count: Int(p.size)))
                    let got = memory.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + start, Int(p.size), off_t(p.offset)) }
                    guard got == Int(p.size) else {
                        close(fd)
                        throw CodecError(.io, "\(path) changed while it was read")
                    }
                    table[i].offset = Int64(start)
                }
            }
            table.append(Packet(offset: Int64(memory.count), size: Int32(size), frames: frames))
            memory.append(contentsOf: data)
        }
        packets = table
        store = memory
        self.inMemory = inMemory
        let total = table.reduce(0) { $0 + Int($1.frames) }
        totalFrames = total
        dataByteCount = table.reduce(0) { $0 + Int64($1.size) }
        maximumPacketSize = Int(table.map(\.size).max() ?? 0)
        primingFrames = min(max(priming, 0), total)
        remainderFrames = min(max(remainder, 0), total - primingFrames)
        let declared = Int(par.pointee.frame_size)
        framesPerPacket = declared > 0 ? declared : (table.first.map { Int($0.frames) } ?? fallbackFrames)
        let seconds = Double(total) / sampleRate
        let bytes = Int(dataByteCount)
        // Bounded: a damaged stream can declare a rate that makes its packets last almost no time.
        let measured = seconds > 0 ? Double(bytes) * 8 / seconds : 0
        bitRate = par.pointee.bit_rate > 0 ? Int(par.pointee.bit_rate) : (measured < Double(Int.max) ? Int(measured) : Int.max)
        var st = stat()
        let fileSize = fstat(fd, &st) == 0 ? Int64(st.st_size) : -1
        let dataEnd = table.map { $0.offset + Int64($0.size) }.max() ?? -1
        audioDataIsLast = !inMemory && !table.isEmpty && dataEnd == fileSize
        if inMemory { close(fd) }
    }

    deinit {
        if !inMemory { close(fd) }
    }

    /// Copies packets `first..<first+count` back to back to `destination`, one read per run of
    /// packets that are adjacent in the file. Returns false when the bytes cannot be read (the
    /// file shrank underneath).
    package func copyPackets(_ first: Int, count: Int, to destination: UnsafeMutableRawPointer) -> Bool {
        var i = first
        var at = 0
        let end = first + count
        while i < end {
            var j = i + 1
            var length = Int(packets[i].size)
            while !inMemory && j < end && packets[j].offset == packets[j - 1].offset + Int64(packets[j - 1].size) {
                length += Int(packets[j].size)
                j += 1
            }
            if inMemory {
                guard copyPacket(i, to: destination + at) else { return false }
                at += Int(packets[i].size)
                i += 1
                continue
            }
            guard pread(fd, destination + at, length, off_t(packets[i].offset)) == length else { return false }
            at += length
            i = j
        }
        return true
    }

    /// Copies packet `index`'s bytes to `destination` (room for its size). Returns false when the
    /// bytes cannot be read (the file shrank underneath).
    package func copyPacket(_ index: Int, to destination: UnsafeMutableRawPointer) -> Bool {
        let p = packets[index]
        if inMemory {
            store.withUnsafeBytes { destination.copyMemory(from: $0.baseAddress! + Int(p.offset), byteCount: Int(p.size)) }
            return true
        }
        return pread(fd, destination, Int(p.size), off_t(p.offset)) == Int(p.size)
    }
}
