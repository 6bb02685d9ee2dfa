import CoreAudioTypes
internal import AudioCodecs
internal import Foundation
import Glibc

/// Apple's Core Audio Format: any format the codecs know, with its magic cookie, channel layout,
/// info dictionary and packet table. A file being written has a data chunk of unknown size
/// (valid if the process dies mid-recording); its size and the chunks set after the audio
/// started are written when it closes.
final class CAFFile: ChunkFile {
    /// Bytes before `dataOffset` that belong to the data chunk header (CAF's edit count).
    private var dataChunkStart: Int64 = 0
    /// Chunks set after the audio started: written after the data when the file closes.
    private var lateChunks = false

    override class var name: String { "CAF" }
    override var fileType: AudioFileTypeID { kAudioFileCAFType }

    /// Metadata chunks larger than this are refused rather than read into memory.
    private static let metadataLimit: Int64 = 64 << 20

    // MARK: Reading

    override func parse(fileSize: Int64) throws(AudioFailure) {
        guard let head = read(8, at: 0) else { throw Self.invalid("the file is shorter than a CAF header") }
        var r = ByteReader(head, at: 4)
        guard r.be(UInt16.self) == 1 else { throw AudioFailure(kAudioFileUnsupportedFileTypeError, "CAF version is not 1") }
        var offset: Int64 = 8
        var sawDesc = false
        var sawData = false
        var paktBytes: [UInt8]?
        while offset + 12 <= fileSize {
            guard let h = read(12, at: offset) else { break }
            var hr = ByteReader(h)
            let type = hr.fourCC()!
            var size = hr.be(Int64.self)!
            let body = offset + 12
            if size == -1 {
                guard type == fourCC("data") else { throw AudioFailure(kAudioFileInvalidChunkError, "a CAF chunk other than data has unknown size") }
                size = fileSize - body
                dataSizeUnknown = true
            }
            guard size >= 0 else { throw AudioFailure(kAudioFileInvalidChunkError, "a CAF chunk has a negative size") }
            let available = min(size, fileSize - body)
            func load() throws(AudioFailure) -> [UInt8] {
                guard size <= Self.metadataLimit, size == available, let bytes = read(Int(size), at: body) else {
                    throw AudioFailure(kAudioFileInvalidChunkError, "CAF chunk '\(type.fourCharCodeString)' is larger than the file")
                }
                return bytes
            }
            switch type {
            case fourCC("desc"):
                var d = ByteReader(try load())
                guard let rate = d.beDouble(), let id = d.be(UInt32.self), let flags = d.be(UInt32.self),
                    let bpp = d.be(UInt32.self), let fpp = d.be(UInt32.self), let ch = d.be(UInt32.self), let bits = d.be(UInt32.self)
                else { throw Self.invalid("the CAF desc chunk is short") }
                var asbd = AudioStreamBasicDescription(
                    mSampleRate: rate, mFormatID: id, mFormatFlags: 0, mBytesPerPacket: bpp, mFramesPerPacket: fpp,
                    mBytesPerFrame: 0, mChannelsPerFrame: ch, mBitsPerChannel: bits, mReserved: 0)
                if id == kAudioFormatLinearPCM {
                    // CAF: bit 0 float, bit 1 little-endian.
                    asbd.mFormatFlags =
                        (flags & 1 != 0 ? kAudioFormatFlagIsFloat : kAudioFormatFlagIsSignedInteger)
                        | (flags & 2 != 0 ? 0 : kAudioFormatFlagIsBigEndian) | kAudioFormatFlagIsPacked
                    if bits == 8 && flags & 1 == 0 { asbd.mFormatFlags |= kAudioFormatFlagIsSignedInteger }
                    asbd.mBytesPerFrame = bpp
                } else {
                    asbd.mFormatFlags = flags
                    if fpp == 1 { asbd.mBytesPerFrame = bpp }
                }
                try Self.validate(asbd)
                format = asbd
                sawDesc = true
            case fourCC("data"):
                guard size >= 4 else { throw AudioFailure(kAudioFileInvalidChunkError, "the CAF data chunk is shorter than its edit count") }
                dataChunkStart = body
                dataOffset = body + 4
                dataByteCount = max(available - 4, 0)
                sawData = true
            case fourCC("pakt"): paktBytes = try load()
            case fourCC("kuki"): magicCookie = try load()
            case fourCC("chan"):
                let c = try load()
                channelLayout = Self.layoutFromCAF(c)
            case fourCC("info"):
                var ir = ByteReader(try load())
                if let n = ir.be(UInt32.self) {
                    for _ in 0..<min(Int(n), 10_000) {
                        guard let k = Self.cString(&ir), let v = Self.cString(&ir) else { break }
                        info[k] = v
                    }
                }
            default: break
            }
            if size > fileSize - body { break }
            offset = body + size
        }
        guard sawDesc else { throw Self.invalid("the CAF file has no desc chunk") }
        guard sawData else { throw Self.invalid("the CAF file has no data chunk") }
        if isVBR || paktBytes != nil {
            guard let paktBytes else {
                throw Self.invalid("the CAF file holds variable-size packets but no packet table (pakt)")
            }
            var p = ByteReader(paktBytes)
            guard let n = p.be(Int64.self), let valid = p.be(Int64.self), let priming = p.be(Int32.self), let remainder = p.be(Int32.self),
                n >= 0
            else { throw AudioFailure(kAudioFileInvalidChunkError, "the CAF packet table is short") }
            packetTable = AudioFilePacketTableInfo(mNumberValidFrames: valid, mPrimingFrames: priming, mRemainderFrames: remainder)
            if isVBR {
                var at: Int64 = 0
                let count = min(n, Int64(p.remaining))  // every entry takes at least one byte
                packets.reserveCapacity(Int(count))
                for _ in 0..<count {
                    var size = Int64(format.mBytesPerPacket)
                    var frames = Int64(format.mFramesPerPacket)
                    if format.mBytesPerPacket == 0 { guard let v = p.cafVarint() else { break }; size = v }
                    if format.mFramesPerPacket == 0 { guard let v = p.cafVarint() else { break }; frames = v }
                    guard size <= Int64(Int32.max), frames <= Int64(Int32.max), at + size <= dataByteCount else { break }
                    packets.append((at, Int32(size), Int32(frames)))
                    at += size
                }
            }
            // A table cannot promise more frames than its packets hold.
            if var table = packetTable {
                let total = isVBR ? packets.reduce(Int64(0)) { $0 + Int64($1.frames) } : packetCount.saturatingMultiplied(by: Int64(format.mFramesPerPacket))
                table.mPrimingFrames = Int32(clamping: min(max(Int64(table.mPrimingFrames), 0), total))
                table.mRemainderFrames = Int32(clamping: min(max(Int64(table.mRemainderFrames), 0), total - Int64(table.mPrimingFrames)))
                table.mNumberValidFrames = min(max(table.mNumberValidFrames, 0), total - Int64(table.mPrimingFrames))
                packetTable = table
            }
        }
    }

    private static func cString(_ r: inout ByteReader) -> String? {
        var bytes: [UInt8] = []
        while let b = r.u8() {
            if b == 0 { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(b)
        }
        return nil
    }

    override var packetTableInfo: AudioFilePacketTableInfo? {
        if let packetTable { return packetTable }
        guard !format.isVariablePacketSize, format.mFormatID != kAudioFormatLinearPCM else { return nil }
        return AudioFilePacketTableInfo(mNumberValidFrames: packetCount.saturatingMultiplied(by: Int64(format.mFramesPerPacket)), mPrimingFrames: 0, mRemainderFrames: 0)
    }

    override class func holds(_ f: AudioStreamBasicDescription, _ t: FormatTraits) -> Bool {
        t.pcm ? (t.packed && (t.float ? t.bits == 32 || t.bits == 64 : t.signed && [8, 16, 24, 32].contains(t.bits)))
            : CodecCatalog.info(f.mFormatID) != nil
    }

    // MARK: Writing

    override func setMagicCookie(_ cookie: [UInt8]) throws(AudioFailure) {
        guard writable else { throw AudioFailure(kAudioFilePermissionsError, "the file is open for reading only") }
        magicCookie = cookie
        try headerChanged()
    }

    override func setChannelLayout(_ layout: [UInt8]) throws(AudioFailure) {
        guard writable else { throw AudioFailure(kAudioFilePermissionsError, "the file is open for reading only") }
        channelLayout = layout
        try headerChanged()
    }

    override func setPacketTableInfo(_ info: AudioFilePacketTableInfo) throws(AudioFailure) {
        guard writable else { throw AudioFailure(kAudioFilePermissionsError, "the file is open for reading only") }
        guard format.mFormatID != kAudioFormatLinearPCM else {
            throw AudioFailure(kAudioFileUnsupportedPropertyError, "only CAF files of compressed formats have a packet table")
        }
        packetTable = info
        if !isVBR { lateChunks = true }
    }

    override func setInfo(_ info: [String: String]) throws(AudioFailure) {
        guard writable else { throw AudioFailure(kAudioFilePermissionsError, "the file is open for reading only") }
        self.info = info
        try headerChanged()
    }

    private func headerChanged() throws(AudioFailure) {
        if dataByteCount == 0 {
            try writeHeader()
        } else {
            lateChunks = true
        }
    }

    override var allowedTrailingBytes: Int64 { 0 }

    /// A file opened to append whose data chunk states a size keeps it current (a new file's
    /// says "unknown" until it closes).
    override func updateSizes() throws(AudioFailure) {
        guard !dataSizeUnknown, dataChunkStart > 0 else { return }
        var size = ByteWriter()
        size.be(dataByteCount + 4)
        try pwriteAll(size.bytes, at: dataChunkStart - 8)
    }

    override func writeHeader() throws(AudioFailure) {
        try super.writeHeader()
        dataSizeUnknown = true  // the data chunk's size is -1 until the file closes
    }

    override func header() -> [UInt8] {
        var w = ByteWriter()
        w.fourCC("caff")
        w.be(UInt16(1))
        w.be(UInt16(0))
        w.fourCC("desc")
        w.be(Int64(32))
        w.beDouble(format.mSampleRate)
        w.be(format.mFormatID)
        if format.mFormatID == kAudioFormatLinearPCM {
            let float = format.mFormatFlags & kAudioFormatFlagIsFloat != 0
            let little = format.mFormatFlags & kAudioFormatFlagIsBigEndian == 0 && format.mBitsPerChannel > 8
            w.be(UInt32((float ? 1 : 0) | (little ? 2 : 0)))
        } else {
            w.be(format.mFormatFlags)
        }
        w.be(format.mBytesPerPacket)
        w.be(format.mFramesPerPacket)
        w.be(format.mChannelsPerFrame)
        w.be(format.mBitsPerChannel)
        appendMetadataChunks(&w)
        dataChunkStart = Int64(w.bytes.count + 12)
        w.fourCC("data")
        w.be(Int64(-1))  // unknown until the file closes: valid if the process dies mid-recording
        w.be(UInt32(0))  // edit count
        return w.bytes
    }

    private func appendMetadataChunks(_ w: inout ByteWriter) {
        if let channelLayout {
            let chan = Self.layoutToCAF(channelLayout)
            w.fourCC("chan")
            w.be(Int64(chan.count))
            w.append(chan)
        }
        if !magicCookie.isEmpty {
            w.fourCC("kuki")
            w.be(Int64(magicCookie.count))
            w.append(magicCookie)
        }
        if !info.isEmpty {
            var body = ByteWriter()
            body.be(UInt32(info.count))
            for (k, v) in info.sorted(by: { $0.key < $1.key }) {
                body.append(Array(k.utf8) + [0])
                body.append(Array(v.utf8) + [0])
            }
            w.fourCC("info")
            w.be(Int64(body.bytes.count))
            w.append(body.bytes)
        }
    }


    override func finish() throws(AudioFailure) {
        let end = dataOffset + dataByteCount
        var size = ByteWriter()
        size.be(dataByteCount + 4)
        try pwriteAll(size.bytes, at: dataChunkStart - 8)
        dataSizeUnknown = false
        var tail = ByteWriter()
        if isVBR || packetTable != nil && lateChunks {
            var body = ByteWriter()
            let frames = isVBR ? packets.reduce(Int64(0)) { $0 + Int64($1.frames) } : packetCount.saturatingMultiplied(by: Int64(format.mFramesPerPacket))
            let table = packetTable ?? AudioFilePacketTableInfo(mNumberValidFrames: frames, mPrimingFrames: 0, mRemainderFrames: 0)
            body.be(isVBR ? Int64(packets.count) : packetCount)
            body.be(table.mNumberValidFrames)
            body.be(table.mPrimingFrames)
            body.be(table.mRemainderFrames)
            if isVBR {
                for p in packets {
                    if format.mBytesPerPacket == 0 { body.cafVarint(Int64(p.size)) }
                    if format.mFramesPerPacket == 0 { body.cafVarint(Int64(p.frames)) }
                }
            }
            tail.fourCC("pakt")
            tail.be(Int64(body.bytes.count))
            tail.append(body.bytes)
        }
        if lateChunks { appendMetadataChunks(&tail) }
        _ = ftruncate(fd, off_t(end))
        if !tail.bytes.isEmpty { try pwriteAll(tail.bytes, at: end) }
    }

    // MARK: Channel layouts

    private static func layoutFromCAF(_ c: [UInt8]) -> [UInt8]? {
        var r = ByteReader(c)
        guard let tag = r.be(UInt32.self), let bitmap = r.be(UInt32.self), let n = r.be(UInt32.self), n <= 1024,
            r.remaining >= Int(n) * 20
        else { return nil }
        var w = ByteWriter()
        w.le(tag)
        w.le(bitmap)
        w.le(n)
        for _ in 0..<n {
            for _ in 0..<5 { w.le(r.be(UInt32.self)!) }
        }
        if n == 0 { w.append([UInt8](repeating: 0, count: 20)) }
        return w.bytes
    }

    private static func layoutToCAF(_ l: [UInt8]) -> [UInt8] {
        var r = ByteReader(l)
        var w = ByteWriter()
        guard let tag = r.le(UInt32.self), let bitmap = r.le(UInt32.self), let n = r.le(UInt32.self) else { return [] }
        w.be(tag)
        w.be(bitmap)
        w.be(n)
        for _ in 0..<min(n, UInt32(r.remaining / 20)) {
            for _ in 0..<5 { w.be(r.le(UInt32.self)!) }
        }
        return w.bytes
    }
}
