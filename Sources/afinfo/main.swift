// afinfo: prints what an audio file holds, as macOS's afinfo does.
import AudioToolbox
import Foundation

struct AFInfo {
    static func usage() -> Never {
        FileHandle.standardError.write(Data("""
            usage: afinfo [-b | --brief] [-h | --help] audio_file...
              -b, --brief   one line per file: type, format, duration
            Prints the file type, data format, channel layout, duration, packets and bit rate.

            """.utf8))
        exit(2)
    }

    static func property<T>(_ file: AudioFileID, _ id: AudioFilePropertyID, _ initial: T) -> T? {
        var value = initial
        var size = UInt32(MemoryLayout<T>.size)
        let status = withUnsafeMutableBytes(of: &value) { AudioFileGetProperty(file, id, &size, $0.baseAddress!) }
        return status == noErr ? value : nil
    }

    static func layoutDescription(_ file: AudioFileID) -> String {
        var size: UInt32 = 0
        guard AudioFileGetPropertyInfo(file, kAudioFilePropertyChannelLayout, &size, nil) == noErr, size >= 12 else {
            return "no channel layout."
        }
        var bytes = [UInt8](repeating: 0, count: Int(size))
        guard AudioFileGetProperty(file, kAudioFilePropertyChannelLayout, &size, &bytes) == noErr else { return "no channel layout." }
        let tag = bytes.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }
        switch tag {
        case kAudioChannelLayoutTag_Mono: return "Channel layout: Mono"
        case kAudioChannelLayoutTag_Stereo: return "Channel layout: Stereo (L R)"
        case kAudioChannelLayoutTag_UseChannelBitmap: return "Channel layout: bitmap"
        case kAudioChannelLayoutTag_UseChannelDescriptions:
            let n = bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 8, as: UInt32.self) }
            return "Channel layout: \(n) channel descriptions"
        default: return "Channel layout: tag \(tag >> 16), \(tag & 0xFFFF) channels"
        }
    }

    /// macOS's data format line: "2 ch,  44100 Hz, 'lpcm' (0x0000000C) 16-bit little-endian signed integer".
    static func formatLine(_ f: AudioStreamBasicDescription) -> String {
        var s = String(format: "%2u ch, %6.0f Hz, '%@' (0x%08X) ", f.mChannelsPerFrame, f.mSampleRate, f.mFormatID.fourCharCodeString, f.mFormatFlags)
        if f.mFormatID == kAudioFormatLinearPCM {
            let float = f.mFormatFlags & kAudioFormatFlagIsFloat != 0
            let big = f.mFormatFlags & kAudioFormatFlagIsBigEndian != 0
            let signed = f.mFormatFlags & kAudioFormatFlagIsSignedInteger != 0
            s += "\(f.mBitsPerChannel)-bit "
            if f.mBitsPerChannel > 8 { s += big ? "big-endian " : "little-endian " }
            s += float ? "float" : signed ? "signed integer" : "unsigned integer"
        } else {
            s += "\(f.mBitsPerChannel) bits/channel, \(f.mBytesPerPacket) bytes/packet, \(f.mFramesPerPacket) frames/packet, \(f.mBytesPerFrame) bytes/frame"
        }
        return s
    }

    static func describe(_ path: String, brief: Bool) -> Bool {
        var file: AudioFileID?
        let status = AudioFileOpenURL(URL(fileURLWithPath: path) as CFURL, .readPermission, 0, &file)
        guard status == noErr, let file else {
            FileHandle.standardError.write(Data("afinfo: \(path): AudioFileOpenURL failed (\(status.osStatusDescription)): \(AudioFileLastFailureReason())\n".utf8))
            return false
        }
        defer { AudioFileClose(file) }
        let type = property(file, kAudioFilePropertyFileFormat, UInt32(0)) ?? 0
        let format = property(file, kAudioFilePropertyDataFormat, AudioStreamBasicDescription()) ?? AudioStreamBasicDescription()
        let duration = property(file, kAudioFilePropertyEstimatedDuration, Double(0)) ?? 0
        if brief {
            print("\(path): '\(type.fourCharCodeString)', \(formatLine(format)), \(String(format: "%.6f", duration)) sec")
            return true
        }
        let bytes = property(file, kAudioFilePropertyAudioDataByteCount, UInt64(0)) ?? 0
        let packets = property(file, kAudioFilePropertyAudioDataPacketCount, UInt64(0)) ?? 0
        let bitRate = property(file, kAudioFilePropertyBitRate, UInt32(0)) ?? 0
        print("File:           \(path)")
        print("File type ID:   \(type.fourCharCodeString)")
        print("Num Tracks:     1")
        print("----")
        print("Data format:    \(formatLine(format))")
        print("                \(layoutDescription(file))")
        print("estimated duration: \(String(format: "%.6f", duration)) sec")
        print("audio bytes: \(bytes)")
        print("audio packets: \(packets)")
        print("bit rate: \(bitRate) bits per second")
        if let bound = property(file, kAudioFilePropertyPacketSizeUpperBound, UInt32(0)) { print("packet size upper bound: \(bound)") }
        if let maximum = property(file, kAudioFilePropertyMaximumPacketSize, UInt32(0)) { print("maximum packet size: \(maximum)") }
        if let offset = property(file, kAudioFilePropertyDataOffset, Int64(0)), offset > 0 { print("audio data file offset: \(offset)") }
        print("optimized")
        if let table = property(file, kAudioFilePropertyPacketTableInfo, AudioFilePacketTableInfo()) {
            let total = table.mNumberValidFrames + Int64(table.mPrimingFrames) + Int64(table.mRemainderFrames)
            print("audio \(table.mNumberValidFrames) valid frames + \(table.mPrimingFrames) priming + \(table.mRemainderFrames) remainder = \(total)")
        }
        if let bits = property(file, kAudioFilePropertySourceBitDepth, Int32(0)) {
            print("source bit depth: \(format.mFormatFlags & kAudioFormatFlagIsFloat != 0 ? "F" : "I")\(bits)")
        }
        print("----")
        return true
    }

    static func main() {
        var brief = false
        var paths: [String] = []
        for argument in CommandLine.arguments.dropFirst() {
            switch argument {
            case "-h", "--help": usage()
            case "-b", "--brief": brief = true
            case let a where a.hasPrefix("-") && a.count > 1:
                FileHandle.standardError.write(Data("afinfo: unknown option \(a)\n".utf8))
                usage()
            default: paths.append(argument)
            }
        }
        guard !paths.isEmpty else { usage() }
        var ok = true
        for path in paths where !describe(path, brief: brief) { ok = false }
        exit(ok ? 0 : 1)
    }
}

AFInfo.main()
