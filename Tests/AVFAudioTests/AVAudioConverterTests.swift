import AVFAudio
import AudioTestSupport
import AudioToolbox
import Foundation
import XCTest

/// AVAudioConverter against AudioConverter (the same output, bit for bit) and an AAC round trip
/// against ffmpeg's own.
final class AVAudioConverterTests: XCTestCase {
    static let stereo441 = AVAudioFormat(standardFormatWithSampleRate: 44100, channels: 2)!

    /// A 1 s stereo chirp at 44.1 kHz, in blocks of 4096 frames.
    static func chirpBlocks() -> [AVAudioPCMBuffer] {
        let left = SignalAnalysis.chirp(from: 100, to: 8000, sampleRate: 44100, seconds: 1)
        let right = SignalAnalysis.chirp(from: 300, to: 5000, sampleRate: 44100, seconds: 1)
        return stride(from: 0, to: left.count, by: 4096).map { start in
            let n = min(4096, left.count - start)
            let b = AVAudioPCMBuffer(pcmFormat: stereo441, frameCapacity: AVAudioFrameCount(n))!
            for i in 0..<n {
                b.floatChannelData![0][i] = left[start + i]
                b.floatChannelData![1][i] = right[start + i]
            }
            b.frameLength = AVAudioFrameCount(n)
            return b
        }
    }

    /// Feeds `blocks` one per call, then the end of the stream.
    final class Feed: @unchecked Sendable {
        var blocks: [AVAudioPCMBuffer]
        init(_ blocks: [AVAudioPCMBuffer]) { self.blocks = blocks }
        func next(_ status: UnsafeMutablePointer<AVAudioConverterInputStatus>) -> AVAudioBuffer? {
            guard !blocks.isEmpty else {
                status.pointee = .endOfStream
                return nil
            }
            status.pointee = .haveData
            return blocks.removeFirst()
        }
    }

    func testResamplingToMonoInt16EqualsAudioConverterBitForBit() throws {
        let int16 = AVAudioFormat(commonFormat: .pcmFormatInt16, sampleRate: 48000, channels: 1, interleaved: true)!
        let converter = try XCTUnwrap(AVAudioConverter(from: Self.stereo441, to: int16))
        let feed = Feed(Self.chirpBlocks())
        var ours: [Int16] = []
        let out = AVAudioPCMBuffer(pcmFormat: int16, frameCapacity: 1000)!
        var error: NSError?
        loop: while true {
            let status = converter.convert(to: out, error: &error) { _, s in feed.next(s) }
            ours += UnsafeBufferPointer(start: out.int16ChannelData![0], count: Int(out.frameLength))
            switch status {
            case .haveData: continue
            case .endOfStream: break loop
            default: return XCTFail("status \(status) \(String(describing: error))")
            }
        }
        XCTAssertEqual(Double(ours.count), 48000, accuracy: 48, "one second at 48 kHz")
        // AudioConverter with the same formats and the same input blocks.
        var ref: AudioConverterRef?
        XCTAssertEqual(AudioConverterNew(Self.stereo441.streamDescription, int16.streamDescription, &ref), noErr)
        let direct = try XCTUnwrap(ref)
        defer { AudioConverterDispose(direct) }
        final class Source {
            var blocks = AVAudioConverterTests.chirpBlocks()
            var current: AVAudioPCMBuffer?
        }
        let source = Source()
        let proc: AudioConverterComplexInputDataProc = { _, packets, data, _, user in
            let source = Unmanaged<Source>.fromOpaque(user!).takeUnretainedValue()
            guard !source.blocks.isEmpty else {
                packets.pointee = 0
                return noErr
            }
            let b = source.blocks.removeFirst()
            source.current = b
            let list = UnsafeMutableAudioBufferListPointer(data), from = UnsafeMutableAudioBufferListPointer(b.mutableAudioBufferList)
            for i in 0..<list.count { list[i] = from[i] }
            packets.pointee = b.frameLength
            return noErr
        }
        var theirs: [Int16] = []
        var chunk = [Int16](repeating: 0, count: 1000)
        while true {
            var count: UInt32 = 1000
            let n = chunk.withUnsafeMutableBytes { raw -> UInt32 in
                var list = AudioBufferList(mNumberBuffers: 1, mBuffers: AudioBuffer(mNumberChannels: 1, mDataByteSize: 2000, mData: raw.baseAddress))
                XCTAssertEqual(AudioConverterFillComplexBuffer(direct, proc, Unmanaged.passUnretained(source).toOpaque(), &count, &list, nil), noErr)
                return count
            }
            theirs += chunk.prefix(Int(n))
            if n < 1000 { break }
        }
        XCTAssertEqual(ours, theirs)
        XCTAssertGreaterThan(ours.map { abs(Int($0)) }.max() ?? 0, 10000, "the chirp came through")
    }

    func testPCMConversionAtOneRateAndErrors() throws {
        let int16 = AVAudioFormat(commonFormat: .pcmFormatInt16, sampleRate: 44100, channels: 2, interleaved: true)!
        let converter = try XCTUnwrap(AVAudioConverter(from: Self.stereo441, to: int16))
        let input = Self.chirpBlocks()[0]
        let out = AVAudioPCMBuffer(pcmFormat: int16, frameCapacity: 4096)!
        try converter.convert(to: out, from: input)
        XCTAssertEqual(out.frameLength, input.frameLength)
        XCTAssertEqual(Int(out.int16ChannelData![0][100 * 2 + 1]), Int((input.floatChannelData![1][100] * 32768).rounded()), accuracy: 1)
        let resampling = try XCTUnwrap(AVAudioConverter(from: Self.stereo441, to: AVAudioFormat(standardFormatWithSampleRate: 48000, channels: 2)!))
        XCTAssertThrowsError(try resampling.convert(to: AVAudioPCMBuffer(pcmFormat: resampling.outputFormat, frameCapacity: 4096)!, from: input))
        // No data now: the output holds what there was, and the conversion goes on afterwards.
        var error: NSError?
        var calls = 0
        let status = resampling.convert(to: AVAudioPCMBuffer(pcmFormat: resampling.outputFormat, frameCapacity: 48000)!, error: &error) { _, s in
            calls += 1
            if calls == 1 {
                s.pointee = .haveData
                return input
            }
            s.pointee = .noDataNow
            return nil
        }
        XCTAssertEqual(status, .inputRanDry)
        var unknown = AudioStreamBasicDescription(
            mSampleRate: 44100, mFormatID: fourCC("zzzz"), mFormatFlags: 0, mBytesPerPacket: 0, mFramesPerPacket: 1024, mBytesPerFrame: 0,
            mChannelsPerFrame: 2, mBitsPerChannel: 0, mReserved: 0)
        let nowhere = try XCTUnwrap(AVAudioFormat(streamDescription: &unknown))
        XCTAssertNil(AVAudioConverter(from: Self.stereo441, to: nowhere), "no codec for that format")
    }

    /// AAC at 128 kb/s through compressed buffers and back: the signal-to-noise ratio beside
    /// ffmpeg encoding and decoding the same signal at the same bit rate.
    func testAACRoundTripThroughCompressedBuffers() throws {
        let aac = try XCTUnwrap(AVAudioFormat(settings: [AVFormatIDKey: kAudioFormatMPEG4AAC, AVSampleRateKey: 44100, AVNumberOfChannelsKey: 2]))
        let encoder = try XCTUnwrap(AVAudioConverter(from: Self.stereo441, to: aac))
        encoder.bitRate = 128_000
        let feed = Feed(Self.chirpBlocks())
        var packets: [AVAudioCompressedBuffer] = []
        var error: NSError?
        while true {
            let buffer = AVAudioCompressedBuffer(format: aac, packetCapacity: 8, maximumPacketSize: max(encoder.maximumOutputPacketSize, 1536))
            let status = encoder.convert(to: buffer, error: &error) { _, s in feed.next(s) }
            if buffer.packetCount > 0 { packets.append(buffer) }
            if status == .endOfStream { break }
            guard status == .haveData else { return XCTFail("encode status \(status) \(String(describing: error))") }
        }
        XCTAssertGreaterThan(packets.count, 5)
        let leading = Int(encoder.primeInfo.leadingFrames)
        let decoder = try XCTUnwrap(AVAudioConverter(from: aac, to: Self.stereo441))
        if let cookie = encoder.magicCookie { decoder.magicCookie = cookie }
        var pending = packets
        var decoded: [Float] = []
        let out = AVAudioPCMBuffer(pcmFormat: Self.stereo441, frameCapacity: 4096)!
        while true {
            let status = decoder.convert(to: out, error: &error) { _, s in
                guard !pending.isEmpty else {
                    s.pointee = .endOfStream
                    return nil
                }
                s.pointee = .haveData
                return pending.removeFirst()
            }
            decoded += UnsafeBufferPointer(start: out.floatChannelData![0], count: Int(out.frameLength))
            if status == .endOfStream { break }
            guard status == .haveData else { return XCTFail("decode status \(status) \(String(describing: error))") }
        }
        let original = SignalAnalysis.chirp(from: 100, to: 8000, sampleRate: 44100, seconds: 1)
        let ours = Self.snr(original, decoded, expectedLag: leading)
        let theirs = try Self.ffmpegSNR(original)
        print(String(format: "AAC 128 kb/s round trip SNR: AVAudioConverter %.1f dB, ffmpeg %.1f dB", ours, theirs))
        XCTAssertGreaterThanOrEqual(ours, theirs - 0.5)
        XCTAssertGreaterThan(ours, 15)
    }

    /// SNR of `decoded` against `original` at the lag that lines them up best (near `expectedLag`).
    static func snr(_ original: [Float], _ decoded: [Float], expectedLag: Int) -> Double {
        let found = SignalAnalysis.align(Array(original[4410..<30000]), in: decoded, maxLag: min(decoded.count - 25590, expectedLag + 8000))
        let lag = found.lag - 4410
        var signal = 0.0, noise = 0.0
        for i in 4410..<(original.count - 4410) where i + lag >= 0 && i + lag < decoded.count {
            let d = Double(decoded[i + lag]) - Double(original[i])
            signal += Double(original[i]) * Double(original[i])
            noise += d * d
        }
        return 10 * log10(signal / max(noise, 1e-20))
    }

    /// ffmpeg's AAC encoder and decoder on the same left channel (as a stereo pair), 128 kb/s.
    static func ffmpegSNR(_ left: [Float]) throws -> Double {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("avconv-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let right = SignalAnalysis.chirp(from: 300, to: 5000, sampleRate: 44100, seconds: 1)
        var interleaved = [Float](repeating: 0, count: left.count * 2)
        for i in 0..<left.count {
            interleaved[2 * i] = left[i]
            interleaved[2 * i + 1] = right[i]
        }
        let raw = dir.appendingPathComponent("in.raw"), m4a = dir.appendingPathComponent("out.m4a"), back = dir.appendingPathComponent("back.raw")
        try interleaved.withUnsafeBytes { Data($0) }.write(to: raw)
        _ = try runTool("ffmpeg", ["-nostdin", "-loglevel", "error", "-y", "-f", "f32le", "-ar", "44100", "-ac", "2", "-i", raw.path, "-c:a", "aac", "-b:a", "128k", m4a.path], in: dir)
        _ = try runTool("ffmpeg", ["-nostdin", "-loglevel", "error", "-y", "-i", m4a.path, "-f", "f32le", "-ac", "2", back.path], in: dir)
        let bytes = try Data(contentsOf: back)
        let decoded = bytes.withUnsafeBytes { raw in (0..<(bytes.count / 8)).map { raw.load(fromByteOffset: $0 * 8, as: Float.self) } }
        return snr(left, decoded, expectedLag: 0)
    }
}
