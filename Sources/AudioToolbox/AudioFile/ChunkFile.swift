internal import AudioCodecs
import CoreAudioTypes
internal import Foundation
import Glibc

/// The chunk reader and writer behind CAF, WAVE and AIFF/AIFC: files this library reads and writes
/// itself, so packets are byte ranges it can reach directly and a file being recorded stays valid
/// on disk after every write. This class keeps the file descriptor, the audio data region and the
/// packets in it; each container (``CAFFile``, ``WAVEFile``, ``AIFFFile``, ``AIFCFile``) parses and
/// writes its own chunks by overriding the hooks marked below.
class ChunkFile: AudioFileContainer {
    let fd: Int32
    let writable: Bool
    var format: AudioStreamBasicDescription
    var dataOffset: Int64 = 0
    var dataByteCount: Int64 = 0
    var magicCookie: [UInt8] = []
    var channelLayout: [UInt8]?
    var info: [String: String] = [:]
    var packetTable: AudioFilePacketTableInfo?
    /// VBR packets: offset from the data start, size, frames.
    var packets: [(offset: Int64, size: Int32, frames: Int32)] = []
    private var headerWritten = false
    var isVBR: Bool { format.isVariablePacketSize }
    /// `kAudioFilePropertyDeferSizeUpdates`: the header's sizes are written when the file closes
    /// instead of after every write.
    private(set) var deferSizeUpdates = false
    /// Sizes deferred by ``deferSizeUpdates`` and not yet written.
    private var sizesPending = false
    /// The data chunk on disk says "size unknown, to the end of the file": CAF's -1 while it is
    /// written, WAVE's 0 of a recording that was never finished.
    var dataSizeUnknown = false

    // MARK: What each container defines

    /// The container's name in messages ("CAF").
    class var name: String { preconditionFailure("each container names itself") }

    var fileType: AudioFileTypeID { preconditionFailure("each container has its file type") }

    /// Reads the chunks of a file of `fileSize` bytes: sets ``format``, the data region and metadata.
    func parse(fileSize: Int64) throws(AudioFailure) { preconditionFailure("each container parses its chunks") }

    /// Everything up to the audio data, for the current format and metadata.
    func header() -> [UInt8] { preconditionFailure("each container writes its header") }

    /// Whether the container can hold `f` (already within ``FormatLimits``), as Apple's file types allow.
    class func holds(_ f: AudioStreamBasicDescription, _ t: FormatTraits) -> Bool { preconditionFailure("each container has its rules") }

    /// Brings the header's sizes up to date after a write; nothing by default (CAF's stays
    /// "unknown" until close).
    func updateSizes() throws(AudioFailure) {}

    /// Bytes after the audio data that a finished file of this container may hold and still
    /// have its data last (IFF's pad byte after an odd-sized chunk).
    var allowedTrailingBytes: Int64 { dataByteCount & 1 }

    /// Finishes the headers of a writable file when it closes: by default the sizes, and the pad
    /// byte an odd-sized data chunk takes.
    func finish() throws(AudioFailure) {
        try updateSizes()
        sizesPending = false
        if dataByteCount & 1 == 1 { try pwriteAll([0], at: dataOffset + dataByteCount) }
    }

    // MARK: Opening

    /// Parses the file open on `fd`.
    required init(fd: Int32, writable: Bool) throws(AudioFailure) {
        self.fd = fd
        self.writable = writable
        format = AudioStreamBasicDescription()
        try parse(fileSize: Self.fileSize(fd))
        headerWritten = true
    }

    /// A new, empty file holding `format`, on `fd` (truncated).
    required init(creating fd: Int32, format: AudioStreamBasicDescription) throws(AudioFailure) {
        self.fd = fd
        self.writable = true
        self.format = format
        try Self.check(format)
        try writeHeader()
    }

    private static func fileSize(_ fd: Int32) -> Int64 {
        var st = stat()
        return fstat(fd, &st) == 0 ? Int64(st.st_size) : 0
    }

    /// `count` bytes at `offset`, or `nil` when the file ends first.
    func read(_ count: Int, at offset: Int64) -> [UInt8]? {
        guard count >= 0, offset >= 0 else { return nil }
        var buffer = [UInt8](repeating: 0, count: count)
        let got = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, count, off_t(offset)) }
        return got == count ? buffer : nil
    }

    /// Walks IFF-style chunks (WAVE's and AIFF's: a four-character type and a 32-bit size in the
    /// container's byte order, bodies padded to even) from `start` to the end of the file. `visit`
    /// gets each chunk's type, declared size and body offset, and returns false to stop.
    func walkChunks(
        from start: Int64, fileSize: Int64, bigEndian: Bool, _ visit: (_ type: UInt32, _ size: Int64, _ body: Int64) throws(AudioFailure) -> Bool
    ) throws(AudioFailure) {
        var offset = start
        while offset + 8 <= fileSize {
            guard let h = read(8, at: offset) else { break }
            var r = ByteReader(h)
            let type = r.fourCC()!
            let size = Int64(bigEndian ? r.be(UInt32.self)! : r.le(UInt32.self)!)
            let body = offset + 8
            guard try visit(type, size, body) else { break }
            offset = body + size + (size & 1)
        }
    }

    static func invalid(_ why: String) -> AudioFailure { AudioFailure(kAudioFileInvalidFileError, why) }

    /// Refuses descriptions no real file has: the limits keep arithmetic and allocations bounded.
    static func validate(_ asbd: AudioStreamBasicDescription) throws(AudioFailure) {
        try FormatLimits.check(asbd, status: kAudioFileUnsupportedDataFormatError)
        if asbd.mFormatID == kAudioFormatLinearPCM {
            guard asbd.mBitsPerChannel >= 1, asbd.mBytesPerPacket > 0, asbd.mFramesPerPacket == 1 else {
                throw AudioFailure(kAudioFileUnsupportedDataFormatError, "the linear PCM description is not valid")
            }
        }
    }

    /// Whether this container can hold `f`, as Apple's file types allow.
    static func check(_ f: AudioStreamBasicDescription) throws(AudioFailure) {
        try validate(f)
        guard holds(f, FormatTraits(f)) else {
            throw AudioFailure(kAudioFileUnsupportedDataFormatError, "\(name) cannot hold \(f.formatSummary)")
        }
        if f.mFormatID == kAudioFormatAppleIMA4, f.mBytesPerPacket != 34 * f.mChannelsPerFrame || f.mFramesPerPacket != 64 {
            throw AudioFailure(kAudioFileUnsupportedDataFormatError, "IMA4 packets are 64 frames of 34 bytes per channel")
        }
    }

    // MARK: Reading

    var packetCount: Int64 {
        isVBR ? Int64(packets.count) : dataByteCount / Int64(max(format.mBytesPerPacket, 1))
    }

    var maximumPacketSize: Int { isVBR ? Int(packets.map(\.size).max() ?? 0) : Int(format.mBytesPerPacket) }

    /// The packet table the file holds (CAF's `pakt`); a container may derive one (see ``CAFFile``).
    var packetTableInfo: AudioFilePacketTableInfo? { packetTable }

    var bitRate: Int {
        if !isVBR { return Int(Double(format.mBytesPerPacket) * 8 * format.mSampleRate / Double(max(format.mFramesPerPacket, 1))) }
        let frames = packets.reduce(Int64(0)) { $0 + Int64($1.frames) }
        return frames > 0 ? Int(saturating: Double(dataByteCount) * 8 * format.mSampleRate / Double(frames)) : 0
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
                guard d.mStartOffset >= 0, d.mStartOffset <= Int64(bytes.count) - Int64(d.mDataByteSize) else {
                    throw AudioFailure(kAudioFileInvalidPacketOffsetError, "packet description \(i) points outside the buffer")
                }
                guard let frames = Int32(exactly: format.mFramesPerPacket != 0 ? format.mFramesPerPacket : d.mVariableFramesInPacket) else {
                    throw AudioFailure(kAudio_ParamError, "packet description \(i) declares \(d.mVariableFramesInPacket) frames")
                }
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
            if deferSizeUpdates {
                sizesPending = true
            } else {
                try updateSizes()
            }
        }
    }

    /// Sets `kAudioFilePropertyDeferSizeUpdates`. Turning it off brings deferred sizes up to date.
    func setDeferSizeUpdates(_ deferred: Bool) throws(AudioFailure) {
        guard writable else { throw AudioFailure(kAudioFilePermissionsError, "the file is open for reading only") }
        deferSizeUpdates = deferred
        if !deferred && sizesPending {
            try updateSizes()
            sizesPending = false
        }
    }

    /// `kAudioFilePropertyIsOptimized`: the audio data is the file's last chunk and the header
    /// states its size, so more audio can be appended at the end with nothing to move.
    var isOptimized: Bool {
        guard !sizesPending, !dataSizeUnknown else { return false }
        let trailing = Self.fileSize(fd) - (dataOffset + dataByteCount)
        return trailing >= 0 && trailing <= allowedTrailingBytes
    }

    var audioTrackCount: Int { 1 }

    func setMagicCookie(_ cookie: [UInt8]) throws(AudioFailure) {
        guard writable else { throw AudioFailure(kAudioFilePermissionsError, "the file is open for reading only") }
        throw AudioFailure(kAudioFileUnsupportedPropertyError, "\(Self.name) files have no magic cookie")
    }

    func setChannelLayout(_ layout: [UInt8]) throws(AudioFailure) {
        guard writable else { throw AudioFailure(kAudioFilePermissionsError, "the file is open for reading only") }
        throw AudioFailure(kAudioFileUnsupportedPropertyError, "\(Self.name) files keep no channel layout here")
    }

    func setPacketTableInfo(_ info: AudioFilePacketTableInfo) throws(AudioFailure) {
        guard writable else { throw AudioFailure(kAudioFilePermissionsError, "the file is open for reading only") }
        throw AudioFailure(kAudioFileUnsupportedPropertyError, "only CAF files of compressed formats have a packet table")
    }

    func setInfo(_ info: [String: String]) throws(AudioFailure) {
        guard writable else { throw AudioFailure(kAudioFilePermissionsError, "the file is open for reading only") }
        throw AudioFailure(kAudioFileUnsupportedPropertyError, "\(Self.name) files keep no info dictionary here")
    }

    func setDataFormat(_ format: AudioStreamBasicDescription) throws(AudioFailure) {
        guard writable else { throw AudioFailure(kAudioFilePermissionsError, "the file is open for reading only") }
        guard dataByteCount == 0 else { throw AudioFailure(kAudioFileOperationNotSupportedError, "the data format cannot change once audio is written") }
        try Self.check(format)
        self.format = format
        try writeHeader()
    }

    /// Writes everything up to the audio data. Only while no audio is written, so the data may move.
    func writeHeader() throws(AudioFailure) {
        let bytes = header()
        try pwriteAll(bytes, at: 0)
        dataOffset = Int64(bytes.count)
        headerWritten = true
        _ = ftruncate(fd, off_t(dataOffset + dataByteCount))
    }

    func pwriteAll(_ bytes: [UInt8], at offset: Int64) throws(AudioFailure) {
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

    /// Writes a 32-bit field of an IFF-style header (a chunk size, AIFF's frame count) at `offset`,
    /// in the container's byte order; a larger value wraps, as those headers cannot say more.
    func writeField32(_ value: Int64, at offset: Int64, bigEndian: Bool) throws(AudioFailure) {
        var w = ByteWriter()
        if bigEndian { w.be(UInt32(truncatingIfNeeded: value)) } else { w.le(UInt32(truncatingIfNeeded: value)) }
        try pwriteAll(w.bytes, at: offset)
    }

    func close() throws(AudioFailure) {
        defer { Glibc.close(fd) }
        guard writable else { return }
        try finish()
    }
}

/// The traits of a description the containers' rules are written in.
struct FormatTraits {
    let pcm: Bool
    let float: Bool
    let bigEndian: Bool
    let signed: Bool
    let bits: UInt32
    /// Linear PCM whose frames are the channels' samples, each in whole bytes.
    let packed: Bool
    /// µ-law or A-law.
    let companded: Bool

    init(_ f: AudioStreamBasicDescription) {
        pcm = f.mFormatID == kAudioFormatLinearPCM
        float = f.mFormatFlags & kAudioFormatFlagIsFloat != 0
        bigEndian = f.mFormatFlags & kAudioFormatFlagIsBigEndian != 0
        signed = f.mFormatFlags & kAudioFormatFlagIsSignedInteger != 0
        bits = f.mBitsPerChannel
        packed = pcm && f.mBytesPerFrame == f.mChannelsPerFrame * ((bits + 7) / 8)
        companded = f.mFormatID == kAudioFormatULaw || f.mFormatID == kAudioFormatALaw
    }
}



extension AudioStreamBasicDescription {
    /// "2 ch, 44100 Hz, 'lpcm' (0x0000000C) 16-bit little-endian signed integer", as afinfo prints.
    var formatSummary: String {
        var s = "\(mChannelsPerFrame) ch, \(Int(saturating: mSampleRate)) Hz, '\(mFormatID.fourCharCodeString)' (0x\(String(format: "%08X", mFormatFlags)))"
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
