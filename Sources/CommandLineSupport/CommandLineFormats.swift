public import AudioToolbox

/// The names macOS's afconvert, afrecord and afplay use on the command line for file types and
/// data formats.
public enum CommandLineFormats {
    /// File type names (`caff`, `WAVE`, `m4af`…, and extensions) to type IDs.
    public static let fileTypes: [String: AudioFileTypeID] = [
        "caff": kAudioFileCAFType, "caf": kAudioFileCAFType, "WAVE": kAudioFileWAVEType, "wav": kAudioFileWAVEType, "wave": kAudioFileWAVEType,
        "AIFF": kAudioFileAIFFType, "aiff": kAudioFileAIFFType, "aif": kAudioFileAIFFType, "AIFC": kAudioFileAIFCType, "aifc": kAudioFileAIFCType,
        "m4af": kAudioFileM4AType, "m4a": kAudioFileM4AType, "mp4f": kAudioFileMPEG4Type, "mp4": kAudioFileMPEG4Type,
        "adts": kAudioFileAAC_ADTSType, "aac": kAudioFileAAC_ADTSType, "flac": kAudioFileFLACType, "MPG3": kAudioFileMP3Type, "mp3": kAudioFileMP3Type,
    ]

    public static let knownFileTypes = "caff WAVE AIFF AIFC m4af mp4f adts flac MPG3"

    /// The usual extension of each writable type.
    public static let extensions: [AudioFileTypeID: String] = [
        kAudioFileCAFType: "caf", kAudioFileWAVEType: "wav", kAudioFileAIFFType: "aiff", kAudioFileAIFCType: "aifc", kAudioFileM4AType: "m4a",
        kAudioFileMPEG4Type: "mp4", kAudioFileAAC_ADTSType: "aac", kAudioFileFLACType: "flac", kAudioFileMP3Type: "mp3",
    ]

    public static func fileType(named name: String) -> AudioFileTypeID? { fileTypes[name] ?? fileTypes[name.lowercased()] }

    /// Splits `spec@rate` (as in `-d LEI16@44100`); the rate is `nil` when absent, and the call
    /// returns `nil` when it is not a positive number.
    public static func splitRate(_ spec: String) -> (format: String, rate: Double?)? {
        guard let at = spec.firstIndex(of: "@") else { return (spec, nil) }
        guard let rate = Double(spec[spec.index(after: at)...]), rate > 0, rate.isFinite else { return nil }
        return (String(spec[..<at]), rate)
    }

    /// A linear PCM spec such as LEI16, BEF32, I8, UI8.
    public static func pcm(_ spec: String, rate: Double, channels: UInt32) -> AudioStreamBasicDescription? {
        var s = Substring(spec)
        var big = false
        if s.hasPrefix("BE") {
            big = true
            s = s.dropFirst(2)
        } else if s.hasPrefix("LE") {
            s = s.dropFirst(2)
        }
        var flags: AudioFormatFlags = kAudioFormatFlagIsPacked
        if s.hasPrefix("UI") {
            s = s.dropFirst(2)
        } else if s.hasPrefix("I") {
            flags |= kAudioFormatFlagIsSignedInteger
            s = s.dropFirst()
        } else if s.hasPrefix("F") {
            flags |= kAudioFormatFlagIsFloat
            s = s.dropFirst()
        } else {
            return nil
        }
        guard let bits = UInt32(s), [8, 16, 24, 32, 64].contains(bits) else { return nil }
        if flags & kAudioFormatFlagIsFloat != 0 && bits < 32 { return nil }
        if flags & kAudioFormatFlagIsFloat == 0 && bits == 64 { return nil }
        if big && bits > 8 { flags |= kAudioFormatFlagIsBigEndian }
        let bytes = bits / 8 * channels
        return AudioStreamBasicDescription(
            mSampleRate: rate, mFormatID: kAudioFormatLinearPCM, mFormatFlags: flags, mBytesPerPacket: bytes, mFramesPerPacket: 1,
            mBytesPerFrame: bytes, mChannelsPerFrame: channels, mBitsPerChannel: bits, mReserved: 0)
    }

    /// The data format a type is written in when `-d` is not given (`aac` for M4A, MP4 and ADTS,
    /// `flac`, `.mp3`, `BEI16` for AIFF/AIFC, `LEI16` for WAVE); `nil` for types with no single
    /// answer (CAF), where each tool decides.
    public static func defaultDataFormat(for type: AudioFileTypeID) -> String? {
        switch type {
        case kAudioFileM4AType, kAudioFileMPEG4Type, kAudioFileAAC_ADTSType: "aac"
        case kAudioFileFLACType: "flac"
        case kAudioFileMP3Type: ".mp3"
        case kAudioFileAIFFType, kAudioFileAIFCType: "BEI16"
        case kAudioFileWAVEType: "LEI16"
        default: nil
        }
    }

    /// A codec name (`aac`, `ima4`, `ulaw`, `alaw`, `alac`, `flac`, `.mp3`, `opus`) to its format ID.
    public static func codec(_ spec: String) -> AudioFormatID? {
        switch spec {
        case "aac", "aac ": kAudioFormatMPEG4AAC
        case "ima4": kAudioFormatAppleIMA4
        case "ulaw": kAudioFormatULaw
        case "alaw": kAudioFormatALaw
        case "alac": kAudioFormatAppleLossless
        case "flac": kAudioFormatFLAC
        case ".mp3", "mp3": kAudioFormatMPEGLayer3
        case "opus": kAudioFormatOpus
        default: nil
        }
    }

    public static let knownDataFormats = "aac ima4 ulaw alaw alac flac .mp3 opus, or LEI16-style linear PCM"
}
