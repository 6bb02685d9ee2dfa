import CoreAudioTypes
internal import Foundation

/// Apple's AIFF: big-endian (or 8-bit) signed linear PCM. The FORM, SSND and frame-count fields
/// are brought up to date after every write, so a file cut short by a crash says how much audio it
/// holds. ``AIFCFile`` is its compressed variant.
class AIFFFile: ChunkFile {
    /// AIFC: a FVER chunk and a compression type in COMM.
    class var isAIFC: Bool { false }
    override class var name: String { "AIFF" }
    override var fileType: AudioFileTypeID { kAudioFileAIFFType }

    // MARK: Reading

    override func parse(fileSize: Int64) throws(AudioFailure) {
        var sawCOMM = false
        var sawSSND = false
        var frames: Int64 = 0
        try walkChunks(from: 12, fileSize: fileSize, bigEndian: true) { type, size, body throws(AudioFailure) in
            if type == fourCC("COMM") {
                guard size >= 18, size <= 4096, let bytes = read(Int(size), at: body) else {
                    throw AudioFailure(kAudioFileInvalidChunkError, "the AIFF COMM chunk is malformed")
                }
                var r = ByteReader(bytes)
                let channels = UInt32(r.be(UInt16.self)!)
                frames = Int64(r.be(UInt32.self)!)
                let bits = UInt32(r.be(UInt16.self)!)
                let rate = r.extended80() ?? 0
                let compression = Self.isAIFC ? (r.fourCC() ?? fourCC("NONE")) : fourCC("NONE")
                format = try Self.aiffFormat(compression: compression, channels: channels, bits: bits, rate: rate)
                sawCOMM = true
            } else if type == fourCC("SSND") {
                guard size >= 8, let bytes = read(8, at: body) else {
                    throw AudioFailure(kAudioFileInvalidChunkError, "the AIFF SSND chunk is malformed")
                }
                var r = ByteReader(bytes)
                let skip = Int64(r.be(UInt32.self)!)
                dataOffset = body + 8 + skip
                dataByteCount = max(min(size, fileSize - body) - 8 - skip, 0)
                sawSSND = true
            }
            return true
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


    override class func holds(_ f: AudioStreamBasicDescription, _ t: FormatTraits) -> Bool {
        t.pcm && t.packed && !t.float && t.signed && (t.bigEndian || t.bits == 8) && [8, 16, 24, 32].contains(t.bits)
    }

    // MARK: Writing

    override func header() -> [UInt8] {
        var w = ByteWriter()
        w.fourCC("FORM")
        w.be(UInt32(0))
        w.fourCC(Self.isAIFC ? "AIFC" : "AIFF")
        if Self.isAIFC {
            w.fourCC("FVER")
            w.be(UInt32(4))
            w.be(UInt32(0xA280_5140))
        }
        let compression = Self.aifcCompression(format)
        w.fourCC("COMM")
        w.be(UInt32(Self.isAIFC ? 18 + 4 + 2 : 18))
        w.be(UInt16(format.mChannelsPerFrame))
        w.be(UInt32(0))
        w.be(UInt16(format.mFormatID == kAudioFormatAppleIMA4 ? 16 : format.mBitsPerChannel))
        w.extended80(format.mSampleRate)
        if Self.isAIFC {
            w.be(compression)
            w.append([0, 0])  // empty Pascal name, padded to even
        }
        w.fourCC("SSND")
        w.be(UInt32(8))
        w.be(UInt32(0))
        w.be(UInt32(0))
        return w.bytes
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

    override func updateSizes() throws(AudioFailure) {
        try writeField32(dataOffset + dataByteCount - 8, at: 4, bigEndian: true)  // FORM
        try writeField32(dataByteCount + 8, at: dataOffset - 12, bigEndian: true)  // SSND
        let commFrames: Int64 = Self.isAIFC ? 12 + 12 + 8 + 2 : 12 + 8 + 2
        try writeField32(packetCount, at: commFrames, bigEndian: true)  // COMM's frame count
    }
}

/// AIFF-C: AIFF with a compression type: little-endian (`sowt`) and float PCM, µ-law, A-law and IMA4.
final class AIFCFile: AIFFFile {
    override class var isAIFC: Bool { true }
    override class var name: String { "AIFC" }
    override var fileType: AudioFileTypeID { kAudioFileAIFCType }

    override class func holds(_ f: AudioStreamBasicDescription, _ t: FormatTraits) -> Bool {
        t.pcm
            ? (t.packed
                && (t.float
                    ? t.bigEndian && (t.bits == 32 || t.bits == 64)
                    : t.signed && (t.bigEndian || t.bits == 16 || t.bits == 8) && [8, 16, 24, 32].contains(t.bits)))
            : t.companded || f.mFormatID == kAudioFormatAppleIMA4
    }
}
