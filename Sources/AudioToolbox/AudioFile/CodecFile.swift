internal import AudioCodecs
import CoreAudioTypes
internal import Foundation

/// File types whose containers FFmpeg's libavformat reads and writes (M4A/MP4, MP3, FLAC, ADTS,
/// Ogg…). A file is opened for reading or created for writing, not both: Apple's
/// read-write access to these types is `kAudioFileOperationNotSupportedError` here.
final class CodecFile: AudioFileContainer {
    let fileType: AudioFileTypeID
    private(set) var format: AudioStreamBasicDescription
    private let reader: MediaReader?
    private let path: String
    private var writer: MediaWriter?
    private var cookie: [UInt8] = []
    private var table: AudioFilePacketTableInfo?
    private var written: [(size: Int32, frames: Int32)] = []
    private var writtenBytes: Int64 = 0
    private var closed = false

    /// Types this class writes, with the formats each holds and libavformat's muxer for it.
    static let writable: [AudioFileTypeID: (muxer: String, formats: [AudioFormatID])] = {
        var map: [AudioFileTypeID: (muxer: String, formats: [AudioFormatID])] = [
            kAudioFileM4AType: ("ipod", [kAudioFormatMPEG4AAC, kAudioFormatAppleLossless]),
            kAudioFileMPEG4Type: ("mp4", [kAudioFormatMPEG4AAC, kAudioFormatAppleLossless]),
            kAudioFileAAC_ADTSType: ("adts", [kAudioFormatMPEG4AAC]),
            kAudioFileFLACType: ("flac", [kAudioFormatFLAC]),
        ]
        if CodecCatalog.info(kAudioFormatMPEGLayer3)?.canEncode == true {
            map[kAudioFileMP3Type] = ("mp3", [kAudioFormatMPEGLayer3])
        }
        return map
    }()

    /// Opens `path` for reading.
    init(reading path: String) throws(AudioFailure) {
        self.path = path
        let reader: MediaReader
        do {
            reader = try MediaReader(path: path)
        } catch {
            switch error.kind {
            case .unsupported: throw AudioFailure(kAudioFileUnsupportedDataFormatError, error.message)
            case .io: throw AudioFailure(kAudioFileUnspecifiedError, error.message)
            case .invalidData, .other: throw AudioFailure(kAudioFileUnsupportedFileTypeError, error.message)
            }
        }
        self.reader = reader
        guard let type = Self.fileType(container: reader.containerName, path: path) else {
            throw AudioFailure(kAudioFileUnsupportedFileTypeError, "\(path): the \(reader.containerName) container is not an audio file type")
        }
        fileType = type
        let info = CodecCatalog.info(reader.formatID)
        let constant = info?.isConstantBitRate ?? false
        var flags: UInt32 = 0
        switch reader.formatID {
        case kAudioFormatMPEG4AAC: flags = 2  // kMPEG4Object_AAC_LC
        case kAudioFormatMPEG4AAC_HE: flags = 5  // kMPEG4Object_AAC_SBR
        case kAudioFormatMPEG4AAC_HE_V2: flags = 29
        case kAudioFormatAppleLossless, kAudioFormatFLAC:
            flags = [16: 1, 20: 2, 24: 3, 32: 4][reader.bitsPerSample] ?? 1
        default: break
        }
        format = AudioStreamBasicDescription(
            mSampleRate: reader.sampleRate, mFormatID: reader.formatID, mFormatFlags: flags,
            mBytesPerPacket: constant ? UInt32((info?.bytesPerPacketPerChannel ?? 0) * reader.channels) : 0,
            mFramesPerPacket: UInt32(reader.framesPerPacket), mBytesPerFrame: 0,
            mChannelsPerFrame: UInt32(reader.channels), mBitsPerChannel: 0, mReserved: 0)
        try FormatLimits.check(format, status: kAudioFileUnsupportedDataFormatError)
        cookie = reader.cookie
    }

    /// Creates `path` of `type` for writing `format`.
    init(creating path: String, type: AudioFileTypeID, format: AudioStreamBasicDescription) throws(AudioFailure) {
        guard let entry = Self.writable[type] else {
            throw AudioFailure(kAudioFileUnsupportedFileTypeError, "files of type '\(type.fourCharCodeString)' cannot be written")
        }
        guard entry.formats.contains(format.mFormatID) else {
            let names = entry.formats.map { "'\($0.fourCharCodeString)'" }.joined(separator: ", ")
            throw AudioFailure(
                kAudioFileUnsupportedDataFormatError,
                "a '\(type.fourCharCodeString)' file cannot hold '\(format.mFormatID.fourCharCodeString)' (it holds \(names))")
        }
        try Self.checkWritable(format)
        self.path = path
        fileType = type
        self.format = format
        reader = nil
    }

    /// Whether `format` is one the muxers take: FFmpeg's fields are 32-bit, and rates and channels
    /// are bounded by what the encoders support.
    private static func checkWritable(_ format: AudioStreamBasicDescription) throws(AudioFailure) {
        try FormatLimits.check(format, status: kAudioFileUnsupportedDataFormatError)
        guard format.mSampleRate <= 384_000, format.mChannelsPerFrame <= 8 else {
            throw AudioFailure(kAudioFileUnsupportedDataFormatError, "\(format.formatSummary) cannot be written")
        }
    }

    static func fileType(container: String, path: String) -> AudioFileTypeID? {
        let ext = (path as NSString).pathExtension.lowercased()
        switch container {
        case let c where c.hasPrefix("mov,mp4"):
            switch ext {
            case "mp4": return kAudioFileMPEG4Type
            case "m4b": return kAudioFileM4BType
            case "3gp": return kAudioFile3GPType
            case "3g2": return kAudioFile3GP2Type
            default: return kAudioFileM4AType
            }
        case "mp3": return kAudioFileMP3Type
        case "flac": return kAudioFileFLACType
        case "aac": return kAudioFileAAC_ADTSType
        case "ogg": return kAudioFileOggType
        case "amr": return kAudioFileAMRType
        case "ac3": return kAudioFileAC3Type
        case "w64": return kAudioFileWave64Type
        case "au": return kAudioFileNextType
        default: return nil
        }
    }

    var packetCount: Int64 { reader.map { Int64($0.packetCount) } ?? Int64(written.count) }
    var dataByteCount: Int64 { reader?.dataByteCount ?? writtenBytes }
    var maximumPacketSize: Int { reader?.maximumPacketSize ?? Int(written.map(\.size).max() ?? 0) }
    var dataOffset: Int64 { 0 }
    var magicCookie: [UInt8] { cookie }
    var channelLayout: [UInt8]? { nil }
    var info: [String: String] { reader?.metadata ?? [:] }

    /// Read: whether the audio data ends the file (see ``MediaReader/audioDataIsLast``). Written:
    /// never before it closes, as the muxer writes its index (MP4's `moov`, FLAC's STREAMINFO
    /// sizes, MP3's Xing frame) when it finishes.
    var isOptimized: Bool { reader?.audioDataIsLast ?? false }

    /// What FFmpeg finds in the file; a file written here holds one stream.
    var audioTrackCount: Int { reader?.audioStreamCount ?? 1 }

    /// A file being written always updates its sizes only when it closes (the muxers write them
    /// in their trailer), so that is what it reports; one being read updates nothing.
    var deferSizeUpdates: Bool { reader == nil }

    /// 1 is what the muxers do; 0 (sizes current after every write) cannot be honoured:
    /// `kAudioFileOperationNotSupportedError`.
    func setDeferSizeUpdates(_ deferred: Bool) throws(AudioFailure) {
        guard reader == nil else { throw AudioFailure(kAudioFilePermissionsError, "the file is open for reading only") }
        guard deferred else {
            throw AudioFailure(kAudioFileOperationNotSupportedError, "'\(fileType.fourCharCodeString)' files record their sizes when they close")
        }
    }

    var packetTableInfo: AudioFilePacketTableInfo? {
        if let table { return table }
        guard let reader else { return nil }
        let total = Int64(reader.totalFrames)
        return AudioFilePacketTableInfo(
            mNumberValidFrames: max(total - Int64(reader.primingFrames) - Int64(reader.remainderFrames), 0),
            mPrimingFrames: Int32(clamping: reader.primingFrames), mRemainderFrames: Int32(clamping: reader.remainderFrames))
    }

    var bitRate: Int {
        if let reader { return reader.bitRate }
        let frames = written.reduce(0) { $0 + Int($1.frames) }
        return frames > 0 ? Int(Double(writtenBytes) * 8 * format.mSampleRate / Double(frames)) : 0
    }

    func packetSize(_ index: Int64) -> (bytes: Int, frames: Int)? {
        guard index >= 0, index < packetCount else { return nil }
        if let reader {
            let p = reader.packets[Int(index)]
            return (Int(p.size), Int(p.frames))
        }
        let p = written[Int(index)]
        return (Int(p.size), Int(p.frames))
    }

    func readPacketBytes(start: Int64, count: Int, into destination: UnsafeMutableRawPointer) throws(AudioFailure) -> Int {
        guard let reader else { throw AudioFailure(kAudioFilePermissionsError, "the file is open for writing only") }
        guard reader.copyPackets(Int(start), count: count, to: destination) else {
            throw AudioFailure(kAudioFileEndOfFileError, "the file ended inside packets \(start)…\(Int(start) + count - 1)")
        }
        return (Int(start)..<(Int(start) + count)).reduce(0) { $0 + Int(reader.packets[$1].size) }
    }

    func writePackets(
        start: Int64, count: Int, bytes: UnsafeRawBufferPointer, descriptions: UnsafePointer<AudioStreamPacketDescription>?
    ) throws(AudioFailure) {
        guard reader == nil, !closed else { throw AudioFailure(kAudioFilePermissionsError, "the file is open for reading only") }
        guard start == packetCount else {
            throw AudioFailure(kAudioFileOperationNotSupportedError, "packets can only be appended to a '\(fileType.fourCharCodeString)' file")
        }
        let writer = try openWriter()
        let fixedSize = Int(format.mBytesPerPacket)
        var offset = 0
        for i in 0..<count {
            let size: Int
            let from: Int
            var frames = Int(format.mFramesPerPacket)
            if let descriptions {
                size = Int(descriptions[i].mDataByteSize)
                from = Int(descriptions[i].mStartOffset)
                if descriptions[i].mVariableFramesInPacket > 0 { frames = Int(descriptions[i].mVariableFramesInPacket) }
            } else {
                guard fixedSize > 0 else {
                    throw AudioFailure(kAudioFileUnsupportedDataFormatError, "variable-size packets need packet descriptions")
                }
                size = fixedSize
                from = offset
                offset += fixedSize
            }
            guard from >= 0, size >= 0, from <= bytes.count - size else {
                throw AudioFailure(kAudioFileInvalidPacketOffsetError, "packet \(i) points outside the buffer")
            }
            guard let packetSize = Int32(exactly: size), let packetFrames = Int32(exactly: frames) else {
                throw AudioFailure(kAudio_ParamError, "packet \(i) of \(size) bytes declares \(frames) frames")
            }
            do {
                try writer.write(UnsafeRawBufferPointer(rebasing: bytes[from..<(from + size)]), frames: frames)
            } catch {
                throw AudioFailure(kAudioFileUnspecifiedError, error.message)
            }
            written.append((packetSize, packetFrames))
            writtenBytes += Int64(size)
        }
    }

    private func openWriter() throws(AudioFailure) -> MediaWriter {
        if let writer { return writer }
        guard let entry = Self.writable[fileType] else { throw AudioFailure(kAudioFileUnsupportedFileTypeError, "not writable") }
        if (format.mFormatID == kAudioFormatAppleLossless || format.mFormatID == kAudioFormatFLAC) && cookie.isEmpty {
            throw AudioFailure(kAudioFileInvalidFileError, "set the magic cookie before writing '\(format.mFormatID.fourCharCodeString)' packets")
        }
        let bits = [1: 16, 2: 20, 3: 24, 4: 32][format.mFormatFlags] ?? 0
        do {
            let w = try MediaWriter(
                path: path, container: entry.muxer, formatID: format.mFormatID, sampleRate: Int(format.mSampleRate),
                channels: Int(format.mChannelsPerFrame), framesPerPacket: Int(format.mFramesPerPacket), cookie: cookie,
                bitRate: 0, bitsPerSample: bits, primingFrames: Int(table?.mPrimingFrames ?? 0))
            writer = w
            return w
        } catch {
            throw AudioFailure(kAudioFileUnspecifiedError, error.message)
        }
    }

    func readBytes(start: Int64, count: Int, into destination: UnsafeMutableRawPointer) throws(AudioFailure) -> Int {
        throw AudioFailure(kAudioFileOperationNotSupportedError, "'\(fileType.fourCharCodeString)' files are read by packets")
    }

    func writeBytes(start: Int64, bytes: UnsafeRawBufferPointer) throws(AudioFailure) {
        throw AudioFailure(kAudioFileOperationNotSupportedError, "'\(fileType.fourCharCodeString)' files are written by packets")
    }

    func setMagicCookie(_ cookie: [UInt8]) throws(AudioFailure) {
        guard reader == nil else { throw AudioFailure(kAudioFilePermissionsError, "the file is open for reading only") }
        if writer != nil && format.mFormatID != kAudioFormatFLAC && cookie != self.cookie {
            // The container's header already holds the cookie: the same one again is fine (AQRecord
            // copies it at the start and at the end), a different one cannot be honoured.
            throw AudioFailure(kAudioFileOperationNotSupportedError, "the magic cookie must be set before the first packet")
        }
        self.cookie = cookie
    }

    func setChannelLayout(_ layout: [UInt8]) throws(AudioFailure) {
        throw AudioFailure(kAudioFileUnsupportedPropertyError, "'\(fileType.fourCharCodeString)' files keep no channel layout here")
    }

    func setPacketTableInfo(_ info: AudioFilePacketTableInfo) throws(AudioFailure) {
        guard reader == nil else { throw AudioFailure(kAudioFilePermissionsError, "the file is open for reading only") }
        table = info
    }

    func setInfo(_ info: [String: String]) throws(AudioFailure) {
        throw AudioFailure(kAudioFileUnsupportedPropertyError, "'\(fileType.fourCharCodeString)' files take no info dictionary here")
    }

    func setDataFormat(_ format: AudioStreamBasicDescription) throws(AudioFailure) {
        guard reader == nil, writer == nil else {
            throw AudioFailure(kAudioFileOperationNotSupportedError, "the data format cannot change once audio is written")
        }
        try Self.checkWritable(format)
        self.format = format
    }

    func close() throws(AudioFailure) {
        guard !closed else { return }
        closed = true
        guard reader == nil else { return }
        let writer = try openWriter()
        do {
            try writer.finish(remainderFrames: Int(table?.mRemainderFrames ?? 0), finalCookie: format.mFormatID == kAudioFormatFLAC ? cookie : [])
        } catch {
            throw AudioFailure(kAudioFileUnspecifiedError, error.message)
        }
    }
}
