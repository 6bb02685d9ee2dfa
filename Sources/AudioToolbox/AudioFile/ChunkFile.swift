internal import AudioCodecs
import CoreAudioTypes
internal import Foundation
import Glibc

/// CAF, WAVE, AIFF and AIFC: chunked files this library reads and writes itself, so packets are
/// byte ranges it can reach directly and a file being recorded stays valid on disk after every
/// write (CAF with a data chunk of unknown size; WAVE and AIFF with sizes updated per write).
final class ChunkFile: AudioFileContainer {
    enum Kind { case caf, wave, aiff, aifc }

    let kind: Kind
    private let fd: Int32
    private let writable: Bool
    private(set) var format: AudioStreamBasicDescription
    private(set) var dataOffset: Int64 = 0
    private(set) var dataByteCount: Int64 = 0
    private(set) var magicCookie: [UInt8] = []
    private(set) var channelLayout: [UInt8]?
    private(set) var info: [String: String] = [:]
    private var packetTable: AudioFilePacketTableInfo?
    /// VBR packets: offset from the data start, size, frames.
    private var packets: [(offset: Int64, size: Int32, frames: Int32)] = []
    private var headerWritten = false
    /// Bytes before `dataOffset` that belong to the data chunk header (CAF's edit count).
    private var dataChunkStart: Int64 = 0
    /// Chunks set after the audio started: written after the data when the file closes (CAF).
    private var lateChunks = false
    private var isVBR: Bool { format.isVariablePacketSize }

    var fileType: AudioFileTypeID {
        switch kind {
        case .caf: kAudioFileCAFType
        case .wave: kAudioFileWAVEType
        case .aiff: kAudioFileAIFFType
        case .aifc: kAudioFileAIFCType
        }
    }

    // MARK: Opening

    /// Parses the file open on `fd`.
    init(kind: Kind, fd: Int32, writable: Bool) throws(AudioFailure) {
        self.kind = kind
        self.fd = fd
        self.writable = writable
        format = AudioStreamBasicDescription()
        let size = Self.fileSize(fd)
        switch kind {
        case .caf: try parseCAF(fileSize: size)
        case .wave: try parseWAVE(fileSize: size)
        case .aiff, .aifc: try parseAIFF(fileSize: size)
        }
        headerWritten = true
    }

    /// A new, empty file of `kind` holding `format`, on `fd` (truncated).
    init(creating kind: Kind, fd: Int32, format: AudioStreamBasicDescription) throws(AudioFailure) {
        self.kind = kind
        self.fd = fd
        self.writable = true
        self.format = format
        try Self.check(format, fits: kind)
        try writeHeader()
    }

    private static func fileSize(_ fd: Int32) -> Int64 {
        var st = stat()
        return fstat(fd, &st) == 0 ? Int64(st.st_size) : 0
    }

    private func read(_ count: Int, at offset: Int64) -> [UInt8]? {
        guard count >= 0, offset >= 0 else { return nil }
        var buffer = [UInt8](repeating: 0, count: count)
        let got = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, count, off_t(offset)) }
        return got == count ? buffer : nil
    }

    private static func invalid(_ why: String) -> AudioFailure { AudioFailure(kAudioFileInvalidFileError, why) }
    /// Metadata chunks larger than this are refused rather than read into memory.
    private static let metadataLimit: Int64 = 64 << 20

    private func parseCAF(fileSize: Int64) throws(AudioFailure) {
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
                let total = isVBR ? packets.reduce(Int64(0)) { $0 + Int64($1.frames) } : packetCount * Int64(format.mFramesPerPacket)
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

    private func parseWAVE(fileSize: Int64) throws(AudioFailure) {
        var offset: Int64 = 12
        var sawFormat = false
        var sawData = false
        while offset + 8 <= fileSize {
            guard let h = read(8, at: offset) else { break }
            var hr = ByteReader(h)
            let type = hr.fourCC()!
            let size = Int64(hr.le(UInt32.self)!)
            let body = offset + 8
            let available = min(size, fileSize - body)
            if type == fourCC("fmt ") {
                guard size >= 16, size <= 4096, let bytes = read(Int(size), at: body) else {
                    throw AudioFailure(kAudioFileInvalidChunkError, "the WAVE fmt chunk is malformed")
                }
                format = try Self.waveFormat(bytes)
                sawFormat = true
            } else if type == fourCC("data") {
                dataOffset = body
                // A size of 0 or 0xFFFFFFFF with data following: a recording that was not finalized.
                dataByteCount = (size == 0 || size == 0xFFFF_FFFF) ? fileSize - body : available
                sawData = true
                if size == 0 || size == 0xFFFF_FFFF { break }
            }
            offset = body + size + (size & 1)
        }
        guard sawFormat else { throw Self.invalid("the WAVE file has no fmt chunk") }
        guard sawData else { throw Self.invalid("the WAVE file has no data chunk") }
        dataByteCount -= dataByteCount % Int64(max(format.mBytesPerPacket, 1))
    }

    private static func waveFormat(_ bytes: [UInt8]) throws(AudioFailure) -> AudioStreamBasicDescription {
        var r = ByteReader(bytes)
        var tag = r.le(UInt16.self)!
        let channels = UInt32(r.le(UInt16.self)!)
        let rate = Double(r.le(UInt32.self)!)
        _ = r.le(UInt32.self)
        let blockAlign = UInt32(r.le(UInt16.self)!)
        var bits = UInt32(r.le(UInt16.self)!)
        if tag == 0xFFFE {
            guard let _ = r.le(UInt16.self), let valid = r.le(UInt16.self), let _ = r.le(UInt32.self), let sub = r.le(UInt16.self) else {
                throw AudioFailure(kAudioFileInvalidChunkError, "the WAVE extensible fmt chunk is short")
            }
            tag = sub
            if valid > 0 && UInt32(valid) <= bits { bits = UInt32(valid) }
        }
        guard channels > 0, blockAlign > 0, blockAlign % channels == 0 else {
            throw Self.invalid("the WAVE fmt chunk declares \(channels) channels and \(blockAlign)-byte frames")
        }
        var asbd = AudioStreamBasicDescription(
            mSampleRate: rate, mFormatID: kAudioFormatLinearPCM, mFormatFlags: 0, mBytesPerPacket: blockAlign, mFramesPerPacket: 1,
            mBytesPerFrame: blockAlign, mChannelsPerFrame: channels, mBitsPerChannel: bits, mReserved: 0)
        switch tag {
        case 1:
            asbd.mFormatFlags = (bits > 8 ? kAudioFormatFlagIsSignedInteger : 0) | kAudioFormatFlagIsPacked
            if bits < (blockAlign / channels) * 8 { asbd.mFormatFlags = (asbd.mFormatFlags & ~kAudioFormatFlagIsPacked) | kAudioFormatFlagIsAlignedHigh }
        case 3: asbd.mFormatFlags = kAudioFormatFlagIsFloat | kAudioFormatFlagIsPacked
        case 6: asbd.mFormatID = kAudioFormatALaw
        case 7: asbd.mFormatID = kAudioFormatULaw
        default:
            throw AudioFailure(kAudioFileUnsupportedDataFormatError, String(format: "WAVE format tag 0x%04X is not supported", tag))
        }
        if asbd.mFormatID != kAudioFormatLinearPCM { asbd.mBitsPerChannel = 8 }
        try validate(asbd)
        return asbd
    }

    private func parseAIFF(fileSize: Int64) throws(AudioFailure) {
        var offset: Int64 = 12
        var sawCOMM = false
        var sawSSND = false
        var frames: Int64 = 0
        while offset + 8 <= fileSize {
            guard let h = read(8, at: offset) else { break }
            var hr = ByteReader(h)
            let type = hr.fourCC()!
            let size = Int64(hr.be(UInt32.self)!)
            let body = offset + 8
            let available = min(size, fileSize - body)
            if type == fourCC("COMM") {
                guard size >= 18, size <= 4096, let bytes = read(Int(size), at: body) else {
                    throw AudioFailure(kAudioFileInvalidChunkError, "the AIFF COMM chunk is malformed")
                }
                var r = ByteReader(bytes)
                let channels = UInt32(r.be(UInt16.self)!)
                frames = Int64(r.be(UInt32.self)!)
                let bits = UInt32(r.be(UInt16.self)!)
                let rate = r.extended80() ?? 0
                let compression = kind == .aifc ? (r.fourCC() ?? fourCC("NONE")) : fourCC("NONE")
                format = try Self.aiffFormat(compression: compression, channels: channels, bits: bits, rate: rate)
                sawCOMM = true
            } else if type == fourCC("SSND") {
                guard size >= 8, let bytes = read(8, at: body) else {
                    throw AudioFailure(kAudioFileInvalidChunkError, "the AIFF SSND chunk is malformed")
                }
                var r = ByteReader(bytes)
                let skip = Int64(r.be(UInt32.self)!)
                dataOffset = body + 8 + skip
                dataByteCount = max(available - 8 - skip, 0)
                sawSSND = true
            }
            offset = body + size + (size & 1)
        }
        guard sawCOMM else { throw Self.invalid("the AIFF file has no COMM chunk") }
        if !sawSSND { dataOffset = fileSize; dataByteCount = 0 }
        // COMM counts packets (frames for PCM, 64-frame blocks for IMA4); trust it unless the data is shorter.
        dataByteCount = min(dataByteCount, frames * Int64(format.mBytesPerPacket))
        dataByteCount -= dataByteCount % Int64(max(format.mBytesPerPacket, 1))
    }

    private static func aiffFormat(compression: UInt32, channels: UInt32, bits: UInt32, rate: Double) throws(AudioFailure) -> AudioStreamBasicDescription {
        guard channels > 0, channels <= 1024 else { throw invalid("the AIFF COMM chunk declares \(channels) channels") }
        let bytes = (bits + 7) / 8
        var asbd = AudioStreamBasicDescription(
            mSampleRate: rate, mFormatID: kAudioFormatLinearPCM,
            mFormatFlags: kAudioFormatFlagIsBigEndian | kAudioFormatFlagIsSignedInteger | kAudioFormatFlagIsPacked,
            mBytesPerPacket: bytes * channels, mFramesPerPacket: 1, mBytesPerFrame: bytes * channels,
            mChannelsPerFrame: channels, mBitsPerChannel: bits, mReserved: 0)
        switch compression {
        case fourCC("NONE"), fourCC("twos"): break
        case fourCC("sowt"): asbd.mFormatFlags = kAudioFormatFlagIsSignedInteger | kAudioFormatFlagIsPacked
        case fourCC("fl32"), fourCC("FL32"):
            asbd.mFormatFlags = kAudioFormatFlagIsBigEndian | kAudioFormatFlagIsFloat | kAudioFormatFlagIsPacked
            asbd.mBitsPerChannel = 32
            asbd.mBytesPerFrame = 4 * channels
            asbd.mBytesPerPacket = 4 * channels
        case fourCC("fl64"), fourCC("FL64"):
            asbd.mFormatFlags = kAudioFormatFlagIsBigEndian | kAudioFormatFlagIsFloat | kAudioFormatFlagIsPacked
            asbd.mBitsPerChannel = 64
            asbd.mBytesPerFrame = 8 * channels
            asbd.mBytesPerPacket = 8 * channels
        case fourCC("ulaw"), fourCC("ULAW"), fourCC("alaw"), fourCC("ALAW"):
            asbd.mFormatID = compression == fourCC("ulaw") || compression == fourCC("ULAW") ? kAudioFormatULaw : kAudioFormatALaw
            asbd.mFormatFlags = 0
            asbd.mBitsPerChannel = 8
            asbd.mBytesPerFrame = channels
            asbd.mBytesPerPacket = channels
        case fourCC("ima4"):
            asbd = AudioStreamBasicDescription(
                mSampleRate: rate, mFormatID: kAudioFormatAppleIMA4, mFormatFlags: 0, mBytesPerPacket: 34 * channels,
                mFramesPerPacket: 64, mBytesPerFrame: 0, mChannelsPerFrame: channels, mBitsPerChannel: 0, mReserved: 0)
        default:
            throw AudioFailure(kAudioFileUnsupportedDataFormatError, "AIFC compression '\(compression.fourCharCodeString)' is not supported")
        }
        try validate(asbd)
        return asbd
    }

    /// Refuses descriptions no real file has: the limits keep arithmetic and allocations bounded.
    private static func validate(_ asbd: AudioStreamBasicDescription) throws(AudioFailure) {
        try FormatLimits.check(asbd, status: kAudioFileUnsupportedDataFormatError)
        if asbd.mFormatID == kAudioFormatLinearPCM {
            guard asbd.mBitsPerChannel >= 1, asbd.mBytesPerPacket > 0, asbd.mFramesPerPacket == 1 else {
                throw AudioFailure(kAudioFileUnsupportedDataFormatError, "the linear PCM description is not valid")
            }
        }
    }

    /// Whether `kind` can hold `format`, as Apple's file types allow.
    static func check(_ f: AudioStreamBasicDescription, fits kind: Kind) throws(AudioFailure) {
        try validate(f)
        let pcm = f.mFormatID == kAudioFormatLinearPCM
        let float = f.mFormatFlags & kAudioFormatFlagIsFloat != 0
        let big = f.mFormatFlags & kAudioFormatFlagIsBigEndian != 0
        let signed = f.mFormatFlags & kAudioFormatFlagIsSignedInteger != 0
        let bits = f.mBitsPerChannel
        let packed = pcm && f.mBytesPerFrame == f.mChannelsPerFrame * ((bits + 7) / 8)
        let companded = f.mFormatID == kAudioFormatULaw || f.mFormatID == kAudioFormatALaw
        let ok: Bool
        switch kind {
        case .caf:
            ok = pcm ? (packed && (float ? bits == 32 || bits == 64 : signed && [8, 16, 24, 32].contains(bits)))
                : CodecCatalog.info(f.mFormatID) != nil
        case .wave:
            ok = pcm ? (packed && !big && (float ? bits == 32 || bits == 64 : (bits == 8 ? !signed : signed && [16, 24, 32].contains(bits)))) : companded
        case .aiff:
            ok = pcm && packed && !float && signed && (big || bits == 8) && [8, 16, 24, 32].contains(bits)
        case .aifc:
            ok = pcm ? (packed && (float ? big && (bits == 32 || bits == 64) : signed && (big || bits == 16 || bits == 8) && [8, 16, 24, 32].contains(bits)))
                : companded || f.mFormatID == kAudioFormatAppleIMA4
        }
        guard ok else {
            throw AudioFailure(kAudioFileUnsupportedDataFormatError, "\(Self.name(kind)) cannot hold \(f.formatSummary)")
        }
        if f.mFormatID == kAudioFormatAppleIMA4, f.mBytesPerPacket != 34 * f.mChannelsPerFrame || f.mFramesPerPacket != 64 {
            throw AudioFailure(kAudioFileUnsupportedDataFormatError, "IMA4 packets are 64 frames of 34 bytes per channel")
        }
    }

    static func name(_ kind: Kind) -> String {
        switch kind {
        case .caf: "CAF"
        case .wave: "WAVE"
        case .aiff: "AIFF"
        case .aifc: "AIFC"
        }
    }

    // MARK: Reading

    var packetCount: Int64 {
        isVBR ? Int64(packets.count) : dataByteCount / Int64(max(format.mBytesPerPacket, 1))
    }

    var maximumPacketSize: Int { isVBR ? Int(packets.map(\.size).max() ?? 0) : Int(format.mBytesPerPacket) }

    var packetTableInfo: AudioFilePacketTableInfo? {
        if let packetTable { return packetTable }
        guard kind == .caf, !format.isVariablePacketSize, format.mFormatID != kAudioFormatLinearPCM else { return nil }
        return AudioFilePacketTableInfo(mNumberValidFrames: packetCount * Int64(format.mFramesPerPacket), mPrimingFrames: 0, mRemainderFrames: 0)
    }

    var bitRate: Int {
        if !isVBR { return Int(Double(format.mBytesPerPacket) * 8 * format.mSampleRate / Double(max(format.mFramesPerPacket, 1))) }
        let frames = packets.reduce(Int64(0)) { $0 + Int64($1.frames) }
        return frames > 0 ? Int(Double(dataByteCount) * 8 * format.mSampleRate / Double(frames)) : 0
    }

    func packetSize(_ index: Int64) -> (bytes: Int, frames: Int)? {
        guard index >= 0, index < packetCount else { return nil }
        if isVBR {
            let p = packets[Int(index)]
            return (Int(p.size), Int(p.frames))
        }
        return (Int(format.mBytesPerPacket), Int(format.mFramesPerPacket))
    }

    func readPacketBytes(start: Int64, count: Int, into destination: UnsafeMutableRawPointer) throws(AudioFailure) -> Int {
        guard count > 0 else { return 0 }
        let from: Int64
        let length: Int
        if isVBR {
            let first = packets[Int(start)]
            let last = packets[Int(start) + count - 1]
            from = first.offset
            length = Int(last.offset + Int64(last.size) - first.offset)
        } else {
            from = start * Int64(format.mBytesPerPacket)
            length = count * Int(format.mBytesPerPacket)
        }
        return try readBytes(start: from, count: length, into: destination)
    }

    func readBytes(start: Int64, count: Int, into destination: UnsafeMutableRawPointer) throws(AudioFailure) -> Int {
        guard start >= 0 else { throw AudioFailure(kAudioFilePositionError, "negative byte position") }
        let n = Int(max(min(Int64(count), dataByteCount - start), 0))
        var done = 0
        while done < n {
            let got = pread(fd, destination + done, n - done, off_t(dataOffset + start + Int64(done)))
            if got < 0 && errno == EINTR { continue }
            guard got > 0 else { throw AudioFailure(kAudioFileEndOfFileError, "the file ended inside its audio data") }
            done += got
        }
        return n
    }

    // MARK: Writing

    func writePackets(
        start: Int64, count: Int, bytes: UnsafeRawBufferPointer, descriptions: UnsafePointer<AudioStreamPacketDescription>?
    ) throws(AudioFailure) {
        guard writable else { throw AudioFailure(kAudioFilePermissionsError, "the file is open for reading only") }
        guard start >= 0, start <= packetCount else {
            throw AudioFailure(kAudioFileInvalidPacketOffsetError, "packet \(start) is past the end (\(packetCount) packets)")
        }
        if isVBR {
            guard let descriptions else {
                throw AudioFailure(kAudioFileUnsupportedDataFormatError, "variable-size packets need packet descriptions")
            }
            guard start == packetCount else {
                throw AudioFailure(kAudioFileOperationNotSupportedError, "variable-size packets can only be appended")
            }
            var at = dataByteCount
            var entries: [(offset: Int64, size: Int32, frames: Int32)] = []
            for i in 0..<count {
                let d = descriptions[i]
                guard d.mStartOffset >= 0, Int(d.mStartOffset) + Int(d.mDataByteSize) <= bytes.count else {
                    throw AudioFailure(kAudioFileInvalidPacketOffsetError, "packet description \(i) points outside the buffer")
                }
                let frames = format.mFramesPerPacket != 0 ? Int32(format.mFramesPerPacket) : Int32(d.mVariableFramesInPacket)
                entries.append((at, Int32(d.mDataByteSize), frames))
                try writeBytes(start: at, bytes: UnsafeRawBufferPointer(rebasing: bytes[Int(d.mStartOffset)..<(Int(d.mStartOffset) + Int(d.mDataByteSize))]))
                at += Int64(d.mDataByteSize)
            }
            packets.append(contentsOf: entries)
        } else {
            let n = count * Int(format.mBytesPerPacket)
            guard n <= bytes.count else {
                throw AudioFailure(kAudio_ParamError, "\(count) packets need \(n) bytes; \(bytes.count) given")
            }
            try writeBytes(start: start * Int64(format.mBytesPerPacket), bytes: UnsafeRawBufferPointer(rebasing: bytes[0..<n]))
        }
    }

    func writeBytes(start: Int64, bytes: UnsafeRawBufferPointer) throws(AudioFailure) {
        guard writable else { throw AudioFailure(kAudioFilePermissionsError, "the file is open for reading only") }
        guard start >= 0, start <= dataByteCount else { throw AudioFailure(kAudioFilePositionError, "byte \(start) is past the end") }
        if !headerWritten { try writeHeader() }
        var done = 0
        while done < bytes.count {
            let got = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(dataOffset + start + Int64(done)))
            if got < 0 && errno == EINTR { continue }
            guard got > 0 else { throw AudioFailure(kAudioFileUnspecifiedError, "writing failed: \(String(cString: strerror(errno)))") }
            done += got
        }
        let end = start + Int64(bytes.count)
        if end > dataByteCount {
            dataByteCount = end
            try updateSizes()
        }
    }

    func setMagicCookie(_ cookie: [UInt8]) throws(AudioFailure) {
        guard writable else { throw AudioFailure(kAudioFilePermissionsError, "the file is open for reading only") }
        guard kind == .caf else { throw AudioFailure(kAudioFileUnsupportedPropertyError, "\(Self.name(kind)) files have no magic cookie") }
        magicCookie = cookie
        try headerChanged()
    }

    func setChannelLayout(_ layout: [UInt8]) throws(AudioFailure) {
        guard writable else { throw AudioFailure(kAudioFilePermissionsError, "the file is open for reading only") }
        guard kind == .caf else { throw AudioFailure(kAudioFileUnsupportedPropertyError, "\(Self.name(kind)) files keep no channel layout here") }
        channelLayout = layout
        try headerChanged()
    }

    func setPacketTableInfo(_ info: AudioFilePacketTableInfo) throws(AudioFailure) {
        guard writable else { throw AudioFailure(kAudioFilePermissionsError, "the file is open for reading only") }
        guard kind == .caf, format.mFormatID != kAudioFormatLinearPCM else {
            throw AudioFailure(kAudioFileUnsupportedPropertyError, "only CAF files of compressed formats have a packet table")
        }
        packetTable = info
        if !isVBR { lateChunks = true }
    }

    func setInfo(_ info: [String: String]) throws(AudioFailure) {
        guard writable else { throw AudioFailure(kAudioFilePermissionsError, "the file is open for reading only") }
        guard kind == .caf else { throw AudioFailure(kAudioFileUnsupportedPropertyError, "\(Self.name(kind)) files keep no info dictionary here") }
        self.info = info
        try headerChanged()
    }

    func setDataFormat(_ format: AudioStreamBasicDescription) throws(AudioFailure) {
        guard writable else { throw AudioFailure(kAudioFilePermissionsError, "the file is open for reading only") }
        guard dataByteCount == 0 else { throw AudioFailure(kAudioFileOperationNotSupportedError, "the data format cannot change once audio is written") }
        try Self.check(format, fits: kind)
        self.format = format
        try writeHeader()
    }

    private func headerChanged() throws(AudioFailure) {
        if dataByteCount == 0 {
            try writeHeader()
        } else {
            lateChunks = true
        }
    }

    /// Writes everything up to the audio data. Only while no audio is written, so the data may move.
    private func writeHeader() throws(AudioFailure) {
        var w = ByteWriter()
        switch kind {
        case .caf:
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
        case .wave:
            let extensible = format.mChannelsPerFrame > 2 && format.mFormatID == kAudioFormatLinearPCM
            let tag: UInt16 =
                format.mFormatID == kAudioFormatULaw ? 7 : format.mFormatID == kAudioFormatALaw ? 6
                : format.mFormatFlags & kAudioFormatFlagIsFloat != 0 ? 3 : 1
            w.fourCC("RIFF")
            w.le(UInt32(0))
            w.fourCC("WAVE")
            w.fourCC("fmt ")
            w.le(UInt32(extensible ? 40 : (tag == 1 ? 16 : 18)))
            w.le(extensible ? UInt16(0xFFFE) : tag)
            w.le(UInt16(format.mChannelsPerFrame))
            w.le(UInt32(format.mSampleRate))
            w.le(UInt32(format.mSampleRate) * format.mBytesPerFrame)
            w.le(UInt16(format.mBytesPerFrame))
            w.le(UInt16(format.mBitsPerChannel))
            if extensible {
                w.le(UInt16(22))
                w.le(UInt16(format.mBitsPerChannel))
                w.le(UInt32(Self.waveChannelMask(Int(format.mChannelsPerFrame))))
                w.le(tag)
                w.append([0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71])
            } else if tag != 1 {
                w.le(UInt16(0))
            }
            w.fourCC("data")
            w.le(UInt32(0))
        case .aiff, .aifc:
            w.fourCC("FORM")
            w.be(UInt32(0))
            w.fourCC(kind == .aifc ? "AIFC" : "AIFF")
            if kind == .aifc {
                w.fourCC("FVER")
                w.be(UInt32(4))
                w.be(UInt32(0xA280_5140))
            }
            let compression = Self.aifcCompression(format)
            w.fourCC("COMM")
            w.be(UInt32(kind == .aifc ? 18 + 4 + 2 : 18))
            w.be(UInt16(format.mChannelsPerFrame))
            w.be(UInt32(0))
            w.be(UInt16(format.mFormatID == kAudioFormatAppleIMA4 ? 16 : format.mBitsPerChannel))
            w.extended80(format.mSampleRate)
            if kind == .aifc {
                w.be(compression)
                w.append([0, 0])  // empty Pascal name, padded to even
            }
            w.fourCC("SSND")
            w.be(UInt32(8))
            w.be(UInt32(0))
            w.be(UInt32(0))
        }
        try pwriteAll(w.bytes, at: 0)
        dataOffset = Int64(w.bytes.count)
        headerWritten = true
        _ = ftruncate(fd, off_t(dataOffset + dataByteCount))
    }

    private static func aifcCompression(_ f: AudioStreamBasicDescription) -> UInt32 {
        switch f.mFormatID {
        case kAudioFormatULaw: return fourCC("ulaw")
        case kAudioFormatALaw: return fourCC("alaw")
        case kAudioFormatAppleIMA4: return fourCC("ima4")
        default:
            if f.mFormatFlags & kAudioFormatFlagIsFloat != 0 { return fourCC(f.mBitsPerChannel == 64 ? "fl64" : "fl32") }
            return f.mFormatFlags & kAudioFormatFlagIsBigEndian == 0 && f.mBitsPerChannel > 8 ? fourCC("sowt") : fourCC("NONE")
        }
    }

    private static func waveChannelMask(_ channels: Int) -> UInt32 {
        switch channels {
        case 3: 0x7
        case 4: 0x33
        case 5: 0x37
        case 6: 0x3F
        case 7: 0x13F
        case 8: 0x63F
        default: 0
        }
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

    /// Keeps WAVE and AIFF sizes true after each write, so a file cut short by a crash says how
    /// much audio it holds. CAF's data size stays "unknown" until close.
    private func updateSizes() throws(AudioFailure) {
        let end = dataOffset + dataByteCount
        switch kind {
        case .caf: return
        case .wave:
            var w = ByteWriter()
            w.le(UInt32(truncatingIfNeeded: end - 8))
            try pwriteAll(w.bytes, at: 4)
            var d = ByteWriter()
            d.le(UInt32(truncatingIfNeeded: dataByteCount))
            try pwriteAll(d.bytes, at: dataOffset - 4)
        case .aiff, .aifc:
            var w = ByteWriter()
            w.be(UInt32(truncatingIfNeeded: end - 8))
            try pwriteAll(w.bytes, at: 4)
            var s = ByteWriter()
            s.be(UInt32(truncatingIfNeeded: dataByteCount + 8))
            try pwriteAll(s.bytes, at: dataOffset - 12)
            var n = ByteWriter()
            n.be(UInt32(truncatingIfNeeded: packetCount))
            let commFrames: Int64 = kind == .aifc ? 12 + 12 + 8 + 2 : 12 + 8 + 2
            try pwriteAll(n.bytes, at: commFrames)
        }
    }

    private func pwriteAll(_ bytes: [UInt8], at offset: Int64) throws(AudioFailure) {
        let ok = bytes.withUnsafeBytes { b -> Bool in
            var done = 0
            while done < b.count {
                let got = pwrite(fd, b.baseAddress! + done, b.count - done, off_t(offset + Int64(done)))
                if got < 0 && errno == EINTR { continue }
                guard got > 0 else { return false }
                done += got
            }
            return true
        }
        guard ok else { throw AudioFailure(kAudioFileUnspecifiedError, "writing failed: \(String(cString: strerror(errno)))") }
    }

    func close() throws(AudioFailure) {
        defer { Glibc.close(fd) }
        guard writable else { return }
        let end = dataOffset + dataByteCount
        switch kind {
        case .caf:
            var size = ByteWriter()
            size.be(dataByteCount + 4)
            try pwriteAll(size.bytes, at: dataChunkStart - 8)
            var tail = ByteWriter()
            if isVBR || packetTable != nil && lateChunks {
                var body = ByteWriter()
                let frames = isVBR ? packets.reduce(Int64(0)) { $0 + Int64($1.frames) } : packetCount * Int64(format.mFramesPerPacket)
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
        case .wave, .aiff, .aifc:
            try updateSizes()
            if dataByteCount & 1 == 1 { try pwriteAll([0], at: end) }
        }
    }

    // MARK: Channel layouts

    /// CAF's `chan` (big-endian) to Apple's in-memory `AudioChannelLayout` bytes.
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


extension AudioStreamBasicDescription {
    /// "2 ch, 44100 Hz, 'lpcm' (0x0000000C) 16-bit little-endian signed integer", as afinfo prints.
    var formatSummary: String {
        var s = "\(mChannelsPerFrame) ch, \(Int(mSampleRate)) Hz, '\(mFormatID.fourCharCodeString)' (0x\(String(format: "%08X", mFormatFlags)))"
        if mFormatID == kAudioFormatLinearPCM {
            let float = mFormatFlags & kAudioFormatFlagIsFloat != 0
            let big = mFormatFlags & kAudioFormatFlagIsBigEndian != 0
            let signed = mFormatFlags & kAudioFormatFlagIsSignedInteger != 0
            s += " \(mBitsPerChannel)-bit \(mBitsPerChannel > 8 ? (big ? "big-endian " : "little-endian ") : "")"
            s += float ? "float" : (signed ? "signed integer" : "unsigned integer")
        } else {
            s += " \(mBitsPerChannel) bits/channel, \(mBytesPerPacket) bytes/packet, \(mFramesPerPacket) frames/packet, \(mBytesPerFrame) bytes/frame"
        }
        return s
    }
}
