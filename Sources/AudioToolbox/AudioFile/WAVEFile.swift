import CoreAudioTypes
internal import Foundation

/// Microsoft's RIFF WAVE: linear PCM (WAVE_FORMAT_EXTENSIBLE beyond two channels), µ-law and
/// A-law. The RIFF and data sizes are brought up to date after every write, so a file cut short by
/// a crash says how much audio it holds.
final class WAVEFile: ChunkFile {
    override class var name: String { "WAVE" }
    override var fileType: AudioFileTypeID { kAudioFileWAVEType }

    // MARK: Reading

    override func parse(fileSize: Int64) throws(AudioFailure) {
        var sawFormat = false
        var sawData = false
        try walkChunks(from: 12, fileSize: fileSize, bigEndian: false) { type, size, body throws(AudioFailure) in
            if type == fourCC("fmt ") {
                guard size >= 16, size <= 4096, let bytes = read(Int(size), at: body) else {
                    throw AudioFailure(kAudioFileInvalidChunkError, "the WAVE fmt chunk is malformed")
                }
                format = try Self.waveFormat(bytes)
                sawFormat = true
            } else if type == fourCC("data") {
                dataOffset = body
                // A size of 0 or 0xFFFFFFFF with data following: a recording that was not finalized.
                let unfinished = size == 0 || size == 0xFFFF_FFFF
                dataByteCount = unfinished ? fileSize - body : min(size, fileSize - body)
                dataSizeUnknown = unfinished
                sawData = true
                if unfinished { return false }
            }
            return true
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

    override class func holds(_ f: AudioStreamBasicDescription, _ t: FormatTraits) -> Bool {
        // The fmt chunk's fields: 16-bit channels and block align, a 32-bit byte rate.
        guard f.mChannelsPerFrame <= UInt32(UInt16.max), f.mBytesPerFrame <= UInt32(UInt16.max),
            UInt64(f.mSampleRate) * UInt64(f.mBytesPerFrame) <= UInt64(UInt32.max)
        else { return false }
        return t.pcm
            ? (t.packed && !t.bigEndian
                && (t.float ? t.bits == 32 || t.bits == 64 : (t.bits == 8 ? !t.signed : t.signed && [16, 24, 32].contains(t.bits))))
            : t.companded
    }

    // MARK: Writing

    override func header() -> [UInt8] {
        var w = ByteWriter()
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
        return w.bytes
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

    override func updateSizes() throws(AudioFailure) {
        try writeField32(dataOffset + dataByteCount - 8, at: 4, bigEndian: false)  // RIFF
        try writeField32(dataByteCount, at: dataOffset - 4, bigEndian: false)  // data
        dataSizeUnknown = false
    }
}
