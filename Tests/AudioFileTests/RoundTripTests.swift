import AudioTestSupport
import AudioToolbox
import Foundation
import XCTest

/// Acceptance 1: every writable file type × format pair round-trips.
final class RoundTripTests: XCTestCase {
    var dir: URL!
    let rate = 44100.0
    /// Not a multiple of any packet size, so partial last packets are exercised.
    let frames = 44100 + 123

    override func setUpWithError() throws { dir = try temporaryDirectory() }
    override func tearDownWithError() throws { if ProcessInfo.processInfo.environment["OPENAVF_KEEP_FILES"] == nil { try? FileManager.default.removeItem(at: dir) } else { print("kept", dir.path) } }

    /// Linear PCM: bytes written with AudioFileWritePackets come back identical from
    /// AudioFileReadPacketData, the packet count is exact, and ExtAudioFile reads the signal
    /// exactly as the format quantizes it.
    func testLinearPCMInEveryContainerIsExact() throws {
        struct Case { let type: AudioFileTypeID; let ext: String; let format: AudioStreamBasicDescription; let exactBits: Int? }
        var cases: [Case] = []
        for channels: UInt32 in [1, 2] {
            for big in [false, true] {
                for bits: UInt32 in [8, 16, 24, 32] where !(bits == 8 && big) {
                    cases.append(Case(type: kAudioFileCAFType, ext: "caf", format: pcmFormat(channels: channels, bits: bits, bigEndian: big), exactBits: Int(bits)))
                }
                for bits: UInt32 in [32, 64] {
                    cases.append(Case(type: kAudioFileCAFType, ext: "caf", format: pcmFormat(channels: channels, bits: bits, float: true, bigEndian: big), exactBits: bits == 32 ? 0 : nil))
                }
            }
            cases.append(Case(type: kAudioFileWAVEType, ext: "wav", format: pcmFormat(channels: channels, bits: 8, signed: false), exactBits: 8))
            for bits: UInt32 in [16, 24, 32] {
                cases.append(Case(type: kAudioFileWAVEType, ext: "wav", format: pcmFormat(channels: channels, bits: bits), exactBits: Int(bits)))
                cases.append(Case(type: kAudioFileAIFFType, ext: "aif", format: pcmFormat(channels: channels, bits: bits, bigEndian: true), exactBits: Int(bits)))
                cases.append(Case(type: kAudioFileAIFCType, ext: "aifc", format: pcmFormat(channels: channels, bits: bits, bigEndian: true), exactBits: Int(bits)))
            }
            cases.append(Case(type: kAudioFileAIFFType, ext: "aif", format: pcmFormat(channels: channels, bits: 8, bigEndian: true), exactBits: 8))
            cases.append(Case(type: kAudioFileAIFCType, ext: "aifc", format: pcmFormat(channels: channels, bits: 16), exactBits: 16))
            for bits: UInt32 in [32, 64] {
                cases.append(Case(type: kAudioFileWAVEType, ext: "wav", format: pcmFormat(channels: channels, bits: bits, float: true), exactBits: bits == 32 ? 0 : nil))
                cases.append(Case(type: kAudioFileAIFCType, ext: "aifc", format: pcmFormat(channels: channels, bits: bits, float: true, bigEndian: true), exactBits: bits == 32 ? 0 : nil))
            }
        }
        cases.append(Case(type: kAudioFileWAVEType, ext: "wav", format: pcmFormat(channels: 6, bits: 24), exactBits: 24))
        cases.append(Case(type: kAudioFileCAFType, ext: "caf", format: pcmFormat(channels: 8, bits: 16), exactBits: 16))

        for (index, c) in cases.enumerated() {
            let label = "\(c.ext) \(c.format.mChannelsPerFrame) ch \(c.format.mBitsPerChannel)-bit flags 0x\(String(c.format.mFormatFlags, radix: 16))"
            let url = dir.appendingPathComponent("pcm\(index).\(c.ext)")
            let channels = Int(c.format.mChannelsPerFrame)
            let signal = testSignal(frames: frames, channels: channels, rate: rate)
            // Bytes in the file's format, made by the converter from float.
            var source = floatClient(rate: rate, channels: UInt32(channels))
            var target = c.format
            var converter: AudioConverterRef?
            try check(AudioConverterNew(&source, &target, &converter), "AudioConverterNew \(label)")
            var bytes = [UInt8](repeating: 0, count: frames * Int(c.format.mBytesPerFrame))
            var size = UInt32(bytes.count)
            try signal.withUnsafeBytes { s in
                try check(AudioConverterConvertBuffer(converter!, UInt32(s.count), s.baseAddress!, &size, &bytes), "ConvertBuffer \(label)")
            }
            AudioConverterDispose(converter!)
            XCTAssertEqual(Int(size), bytes.count, label)

            var file: AudioFileID?
            var format = c.format
            try check(AudioFileCreateWithURL(url as CFURL, c.type, &format, .eraseFile, &file), "create \(label)")
            // Two writes, to exercise appending.
            let half = frames / 2
            var n = UInt32(half)
            try check(AudioFileWritePackets(file!, false, UInt32(half) * c.format.mBytesPerFrame, nil, 0, &n, bytes), "write \(label)")
            n = UInt32(frames - half)
            try bytes.withUnsafeBytes { b in
                try check(AudioFileWritePackets(file!, false, n * c.format.mBytesPerFrame, nil, Int64(half), &n, b.baseAddress! + half * Int(c.format.mBytesPerFrame)), "write \(label)")
            }
            try check(AudioFileClose(file!), "close \(label)")

            try check(AudioFileOpenURL(url as CFURL, .readPermission, 0, &file), "open \(label)")
            XCTAssertEqual(try fileProperty(file!, kAudioFilePropertyFileFormat, UInt32(0)), c.type, label)
            let read = try fileProperty(file!, kAudioFilePropertyDataFormat, AudioStreamBasicDescription())
            XCTAssertEqual(read.mChannelsPerFrame, c.format.mChannelsPerFrame, label)
            XCTAssertEqual(read.mBitsPerChannel, c.format.mBitsPerChannel, label)
            XCTAssertEqual(read.mSampleRate, rate, label)
            XCTAssertEqual(try fileProperty(file!, kAudioFilePropertyAudioDataPacketCount, UInt64(0)), UInt64(frames), label)
            var back = [UInt8](repeating: 0, count: bytes.count + 64)
            var numBytes = UInt32(back.count)
            var packets = UInt32(frames + 10)
            try check(AudioFileReadPacketData(file!, false, &numBytes, nil, 0, &packets, &back), "read \(label)")
            XCTAssertEqual(packets, UInt32(frames), label)
            XCTAssertTrue(Array(back[0..<Int(numBytes)]) == bytes, "bytes differ: \(label)")
            AudioFileClose(file!)

            let decoded = try readWithExtAudioFile(url)
            XCTAssertEqual(decoded.samples.count, signal.count, "frame count: \(label)")
            XCTAssertEqual(decoded.lengthFrames, Int64(frames), label)
            switch c.exactBits {
            case .some(0), .none:
                assertSamplesEqual(decoded.samples, signal, "float content: \(label)")
            case .some(let bits):
                assertSamplesEqual(decoded.samples, quantized(signal, bits: bits), "content: \(label)")
            }
        }
    }

    /// Lossless codecs return the quantized signal exactly, with the exact length.
    func testLosslessCodecsAreExact() throws {
        let cases: [(AudioFileTypeID, String, AudioStreamBasicDescription, Int)] = [
            (kAudioFileM4AType, "m4a", compressed(kAudioFormatAppleLossless, flags: 1), 16),
            (kAudioFileM4AType, "m4a", compressed(kAudioFormatAppleLossless, flags: 3), 24),
            (kAudioFileCAFType, "caf", compressed(kAudioFormatAppleLossless, flags: 1), 16),
            (kAudioFileCAFType, "caf", compressed(kAudioFormatAppleLossless, flags: 3), 24),
            (kAudioFileFLACType, "flac", compressed(kAudioFormatFLAC, flags: 1), 16),
            (kAudioFileFLACType, "flac", compressed(kAudioFormatFLAC, flags: 3), 24),
        ]
        for (i, (type, ext, format, bits)) in cases.enumerated() {
            let label = "\(ext) '\(format.mFormatID.fourCharCodeString)' \(bits)-bit"
            let url = dir.appendingPathComponent("lossless\(i).\(ext)")
            let signal = quantized(testSignal(frames: frames, channels: 2, rate: rate), bits: bits)
            try writeWithExtAudioFile(url, type: type, format: format, samples: signal, channels: 2, rate: rate)
            let back = try readWithExtAudioFile(url)
            XCTAssertEqual(back.lengthFrames, Int64(frames), label)
            XCTAssertEqual(back.samples.count, signal.count, label)
            assertSamplesEqual(back.samples, signal, "content differs: \(label)")
        }
    }

    /// Lossy formats: the round trip is as faithful as FFmpeg's own encoder and decoder on the same
    /// signal (ffmpeg run in the same test), never below the format's floor, aligned to the frame
    /// (a priming error would collapse the SNR), and IMA4's length is exact.
    func testLossyCodecsMatchTheReferenceEncoder() throws {
        struct Case {
            let type: AudioFileTypeID; let ext: String; let id: AudioFormatID; let ffmpegCodec: String; let floor: Double; let exactLength: Bool
            /// ADTS records no encoder delay, so reading returns it (FFmpeg's AAC encoder: 1024 frames).
            var unrecordedDelay = 0
        }
        var cases = [
            Case(type: kAudioFileCAFType, ext: "caf", id: kAudioFormatULaw, ffmpegCodec: "pcm_mulaw", floor: 35, exactLength: true),
            Case(type: kAudioFileCAFType, ext: "caf", id: kAudioFormatALaw, ffmpegCodec: "pcm_alaw", floor: 35, exactLength: true),
            Case(type: kAudioFileWAVEType, ext: "wav", id: kAudioFormatULaw, ffmpegCodec: "pcm_mulaw", floor: 35, exactLength: true),
            Case(type: kAudioFileWAVEType, ext: "wav", id: kAudioFormatALaw, ffmpegCodec: "pcm_alaw", floor: 35, exactLength: true),
            Case(type: kAudioFileAIFCType, ext: "aifc", id: kAudioFormatULaw, ffmpegCodec: "pcm_mulaw", floor: 35, exactLength: true),
            Case(type: kAudioFileAIFCType, ext: "aifc", id: kAudioFormatALaw, ffmpegCodec: "pcm_alaw", floor: 35, exactLength: true),
            Case(type: kAudioFileCAFType, ext: "caf", id: kAudioFormatAppleIMA4, ffmpegCodec: "adpcm_ima_qt", floor: 30, exactLength: true),
            Case(type: kAudioFileAIFCType, ext: "aifc", id: kAudioFormatAppleIMA4, ffmpegCodec: "adpcm_ima_qt", floor: 30, exactLength: false),
            Case(type: kAudioFileM4AType, ext: "m4a", id: kAudioFormatMPEG4AAC, ffmpegCodec: "aac", floor: 15, exactLength: false),
            Case(type: kAudioFileMPEG4Type, ext: "mp4", id: kAudioFormatMPEG4AAC, ffmpegCodec: "aac", floor: 15, exactLength: false),
            Case(type: kAudioFileCAFType, ext: "caf", id: kAudioFormatMPEG4AAC, ffmpegCodec: "aac", floor: 15, exactLength: true),
            Case(type: kAudioFileAAC_ADTSType, ext: "aac", id: kAudioFormatMPEG4AAC, ffmpegCodec: "aac", floor: 15, exactLength: false, unrecordedDelay: 1024),
        ]
        if canEncode(kAudioFormatMPEGLayer3) {
            cases.append(Case(type: kAudioFileMP3Type, ext: "mp3", id: kAudioFormatMPEGLayer3, ffmpegCodec: "libmp3lame", floor: 10, exactLength: false))
        }
        let channels = 2
        for (i, c) in cases.enumerated() {
            let label = "\(c.ext) '\(c.id.fourCharCodeString)'"
            let signal = testSignal(frames: frames, channels: channels, rate: rate)
            let url = dir.appendingPathComponent("lossy\(i).\(c.ext)")
            try writeWithExtAudioFile(url, type: c.type, format: compressed(c.id, rate: rate), samples: signal, channels: channels, rate: rate)
            let back = try readWithExtAudioFile(url)
            if c.exactLength {
                XCTAssertEqual(back.lengthFrames, Int64(frames), "length: \(label)")
                XCTAssertEqual(back.samples.count, signal.count, "frames read: \(label)")
            } else {
                XCTAssertLessThan(abs(back.samples.count / channels - frames), 2048, "length: \(label)")
            }
            let ours = snrDB(signal, Array(back.samples.dropFirst(c.unrecordedDelay * channels)))

            // The reference: ffmpeg encodes and decodes the same float signal.
            let raw = dir.appendingPathComponent("ref\(i).f32")
            try writeFloatRaw(signal, to: raw)
            let encoded = dir.appendingPathComponent("ref\(i).\(c.ffmpegCodec == "aac" ? "m4a" : c.ext == "mp3" ? "mp3" : "caf")")
            try runTool("ffmpeg", ["-v", "error", "-y", "-f", "f32le", "-ar", "\(Int(rate))", "-ac", "\(channels)", "-i", raw.path, "-c:a", c.ffmpegCodec, encoded.path], in: dir)
            let reference = snrDB(signal, try decodeWithFFmpeg(encoded, in: dir))
            print("\(label): \(String(format: "%.1f", ours)) dB; ffmpeg \(String(format: "%.1f", reference)) dB")
            XCTAssertGreaterThanOrEqual(ours, c.floor, "SNR \(ours) dB below the floor: \(label)")
            XCTAssertGreaterThanOrEqual(ours, reference - 1, "SNR \(ours) dB vs ffmpeg's \(reference) dB: \(label)")
        }
    }
}
