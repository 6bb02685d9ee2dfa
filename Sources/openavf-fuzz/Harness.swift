import AudioToolbox
import Foundation

/// Feeds one input to every reader: AudioFile (properties, every packet) and ExtAudioFile
/// (decoding and converting to float). Any outcome but a crash or a hang is fine; an error must
/// be one of Apple's codes, which the deterministic tests check.
enum FuzzHarness {
    /// Each input is written to this file (memory-backed where /dev/shm exists).
    nonisolated(unsafe) static var path: String = {
        let dir = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
        return "\(dir)/openavf-fuzz-\(getpid()).bin"
    }()

    static func exercise(_ data: UnsafeRawBufferPointer) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        if let base = data.baseAddress, data.count > 0 { _ = write(fd, base, data.count) }
        close(fd)
        let url = URL(fileURLWithPath: path)

        var id: AudioFileID?
        if AudioFileOpenURL(url as CFURL, .readPermission, 0, &id) == noErr, let id {
            for property in [kAudioFilePropertyDataFormat, kAudioFilePropertyMagicCookieData, kAudioFilePropertyChannelLayout,
                             kAudioFilePropertyPacketTableInfo, kAudioFilePropertyEstimatedDuration, kAudioFilePropertyBitRate] {
                var size: UInt32 = 0
                guard AudioFileGetPropertyInfo(id, property, &size, nil) == noErr, size < 1 << 20 else { continue }
                var bytes = [UInt8](repeating: 0, count: Int(size))
                _ = AudioFileGetProperty(id, property, &size, &bytes)
            }
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            var descriptions = [AudioStreamPacketDescription](repeating: .init(), count: 32)
            var at: Int64 = 0
            // Bounded: a valid but long file is not what is being searched for.
            for _ in 0..<4096 {
                var n: UInt32 = 32
                var bytes = UInt32(buffer.count)
                guard AudioFileReadPacketData(id, false, &bytes, &descriptions, at, &n, &buffer) == noErr, n > 0 else { break }
                at += Int64(n)
            }
            AudioFileClose(id)
        }

        var ext: ExtAudioFileRef?
        if ExtAudioFileOpenURL(url as CFURL, &ext) == noErr, let ext {
            var client = AudioStreamBasicDescription(
                mSampleRate: 44100, mFormatID: kAudioFormatLinearPCM, mFormatFlags: kAudioFormatFlagsNativeFloatPacked,
                mBytesPerPacket: 8, mFramesPerPacket: 1, mBytesPerFrame: 8, mChannelsPerFrame: 2, mBitsPerChannel: 32, mReserved: 0)
            if ExtAudioFileSetProperty(ext, kExtAudioFileProperty_ClientDataFormat, UInt32(MemoryLayout<AudioStreamBasicDescription>.size), &client) == noErr {
                var samples = [Float](repeating: 0, count: 8192)
                for _ in 0..<64 {
                    var n: UInt32 = 4096
                    let status = samples.withUnsafeMutableBufferPointer { b in
                        var list = AudioBufferList(mNumberBuffers: 1, mBuffers: AudioBuffer(mNumberChannels: 2, mDataByteSize: UInt32(b.count * 4), mData: b.baseAddress))
                        return ExtAudioFileRead(ext, &n, &list)
                    }
                    guard status == noErr, n > 0 else { break }
                }
                _ = ExtAudioFileSeek(ext, 1000)
            }
            ExtAudioFileDispose(ext)
        }
    }
}
