import AVFAudio
import Foundation
import XCTest

final class AVAudioFormatTests: XCTestCase {
    func testStandardAndCommonFormats() throws {
        let standard = try XCTUnwrap(AVAudioFormat(standardFormatWithSampleRate: 48000, channels: 2))
        XCTAssertTrue(standard.isStandard)
        XCTAssertFalse(standard.isInterleaved)
        XCTAssertEqual(standard.commonFormat, .pcmFormatFloat32)
        XCTAssertEqual(standard.streamDescription.pointee.mBytesPerFrame, 4)
        XCTAssertEqual(standard.channelLayout?.layoutTag, kAudioChannelLayoutTag_Stereo)
        let int16 = try XCTUnwrap(AVAudioFormat(commonFormat: .pcmFormatInt16, sampleRate: 44100, channels: 2, interleaved: true))
        XCTAssertEqual(int16.commonFormat, .pcmFormatInt16)
        XCTAssertTrue(int16.isInterleaved)
        XCTAssertEqual(int16.streamDescription.pointee.mBytesPerFrame, 4)
        XCTAssertFalse(int16.isStandard)
        XCTAssertNil(AVAudioFormat(commonFormat: .otherFormat, sampleRate: 44100, channels: 2, interleaved: true))
        XCTAssertNil(AVAudioFormat(standardFormatWithSampleRate: 44100, channels: 0))
        XCTAssertEqual(standard, AVAudioFormat(standardFormatWithSampleRate: 48000, channels: 2))
        XCTAssertNotEqual(standard, int16)
    }

    /// One channel: the standard format is deinterleaved and standard, one made `interleaved:
    /// true` is interleaved and not standard, and the two compare equal (the same bytes).
    func testMonoFormatsReportTheirInterleavingAndCompareEqual() throws {
        let standard = try XCTUnwrap(AVAudioFormat(standardFormatWithSampleRate: 48000, channels: 1))
        XCTAssertTrue(standard.isStandard)
        XCTAssertFalse(standard.isInterleaved)
        XCTAssertNotEqual(standard.streamDescription.pointee.mFormatFlags & kAudioFormatFlagIsNonInterleaved, 0)
        XCTAssertEqual(standard.settings[AVLinearPCMIsNonInterleaved] as? Bool, true)
        let interleaved = try XCTUnwrap(AVAudioFormat(commonFormat: .pcmFormatFloat32, sampleRate: 48000, channels: 1, interleaved: true))
        XCTAssertTrue(interleaved.isInterleaved)
        XCTAssertFalse(interleaved.isStandard)
        XCTAssertEqual(interleaved.streamDescription.pointee.mBytesPerFrame, 4)
        XCTAssertEqual(standard, interleaved)
        XCTAssertEqual(AVAudioPCMBuffer(pcmFormat: interleaved, frameCapacity: 16)?.stride, 1)
    }

    func testSettingsRoundTrip() throws {
        let pcm: [String: Any] = [
            AVFormatIDKey: kAudioFormatLinearPCM, AVSampleRateKey: 44100.0, AVNumberOfChannelsKey: 2,
            AVLinearPCMBitDepthKey: 24, AVLinearPCMIsFloatKey: false, AVLinearPCMIsBigEndianKey: true, AVLinearPCMIsNonInterleaved: false,
        ]
        let format = try XCTUnwrap(AVAudioFormat(settings: pcm))
        XCTAssertEqual(format.streamDescription.pointee.mBitsPerChannel, 24)
        XCTAssertEqual(format.streamDescription.pointee.mBytesPerFrame, 6)
        XCTAssertNotEqual(format.streamDescription.pointee.mFormatFlags & kAudioFormatFlagIsBigEndian, 0)
        let again = try XCTUnwrap(AVAudioFormat(settings: format.settings))
        XCTAssertEqual(again, format)

        let aac: [String: Any] = [AVFormatIDKey: NSNumber(value: kAudioFormatMPEG4AAC), AVSampleRateKey: NSNumber(value: 48000), AVNumberOfChannelsKey: NSNumber(value: 1)]
        let compressed = try XCTUnwrap(AVAudioFormat(settings: aac))
        XCTAssertEqual(compressed.streamDescription.pointee.mFormatID, kAudioFormatMPEG4AAC)
        XCTAssertEqual(compressed.streamDescription.pointee.mFramesPerPacket, 1024, "completed from the format's info")
        XCTAssertEqual(compressed.commonFormat, .otherFormat)
        XCTAssertEqual(AVAudioFormat(settings: compressed.settings), compressed)

        XCTAssertNil(AVAudioFormat(settings: [AVFormatIDKey: kAudioFormatLinearPCM]), "no sample rate")
        XCTAssertNil(AVAudioFormat(settings: [AVSampleRateKey: 44100, AVNumberOfChannelsKey: 2, AVLinearPCMBitDepthKey: 12]), "12-bit")

        let six = try XCTUnwrap(AVAudioChannelLayout(layoutTag: (121 << 16) | 6))  // MPEG 5.1 A
        let surround = AVAudioFormat(standardFormatWithSampleRate: 48000, channelLayout: six)
        XCTAssertEqual(surround.channelCount, 6)
        let restored = try XCTUnwrap(AVAudioFormat(settings: surround.settings))
        XCTAssertEqual(restored.channelLayout?.layoutTag, six.layoutTag)
    }
}

final class AVAudioBufferTests: XCTestCase {
    func testPCMBufferLayouts() throws {
        let standard = try XCTUnwrap(AVAudioFormat(standardFormatWithSampleRate: 48000, channels: 2))
        let buffer = try XCTUnwrap(AVAudioPCMBuffer(pcmFormat: standard, frameCapacity: 100))
        XCTAssertEqual(buffer.audioBufferList.pointee.mNumberBuffers, 2)
        XCTAssertEqual(buffer.stride, 1)
        let channels = try XCTUnwrap(buffer.floatChannelData)
        XCTAssertNotEqual(channels[0], channels[1])
        XCTAssertNil(buffer.int16ChannelData)
        channels[1][99] = 0.5
        buffer.frameLength = 100
        let list = UnsafeMutableAudioBufferListPointer(buffer.mutableAudioBufferList)
        XCTAssertEqual(list[1].mData!.assumingMemoryBound(to: Float.self)[99], 0.5)
        XCTAssertEqual(list[0].mDataByteSize, 400)
        buffer.frameLength = 500
        XCTAssertEqual(buffer.frameLength, 100, "clamped to the capacity")

        let interleaved = try XCTUnwrap(AVAudioFormat(commonFormat: .pcmFormatInt16, sampleRate: 44100, channels: 2, interleaved: true))
        let b2 = try XCTUnwrap(AVAudioPCMBuffer(pcmFormat: interleaved, frameCapacity: 10))
        XCTAssertEqual(b2.stride, 2)
        let samples = try XCTUnwrap(b2.int16ChannelData)
        XCTAssertEqual(UnsafeRawPointer(samples[1]) - UnsafeRawPointer(samples[0]), 2, "right follows left in one buffer")
        XCTAssertNil(AVAudioPCMBuffer(pcmFormat: interleaved, frameCapacity: 0))

        var aac = AudioStreamBasicDescription(
            mSampleRate: 44100, mFormatID: kAudioFormatMPEG4AAC, mFormatFlags: 0, mBytesPerPacket: 0, mFramesPerPacket: 1024,
            mBytesPerFrame: 0, mChannelsPerFrame: 2, mBitsPerChannel: 0, mReserved: 0)
        let compressedFormat = try XCTUnwrap(AVAudioFormat(streamDescription: &aac))
        XCTAssertNil(AVAudioPCMBuffer(pcmFormat: compressedFormat, frameCapacity: 10))
        let packets = AVAudioCompressedBuffer(format: compressedFormat, packetCapacity: 8, maximumPacketSize: 1536)
        XCTAssertEqual(packets.byteCapacity, 8 * 1536)
        XCTAssertNotNil(packets.packetDescriptions)
    }
}

final class AVAudioFileTests: XCTestCase {
    var dir: URL!
    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("openavf-avfile-\(getpid())-\(UUID().uuidString.prefix(6))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }
    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: dir) }

    func sine(_ frames: Int, channel: Int) -> [Float] {
        (0..<frames).map { Float(0.5 * sin(2 * Double.pi * 440 * Double(channel + 1) * Double($0) / 44100)) }
    }

    func writeFile(_ url: URL, settings: [String: Any], frames: Int) throws {
        let file = try AVAudioFile(forWriting: url, settings: settings)
        XCTAssertTrue(file.processingFormat.isStandard)
        let chunk = try XCTUnwrap(AVAudioPCMBuffer(pcmFormat: file.processingFormat, frameCapacity: 1000))
        let left = sine(frames, channel: 0), right = sine(frames, channel: 1)
        var at = 0
        while at < frames {
            let n = min(1000, frames - at)
            for i in 0..<n {
                chunk.floatChannelData![0][i] = left[at + i]
                chunk.floatChannelData![1][i] = right[at + i]
            }
            chunk.frameLength = AVAudioFrameCount(n)
            try file.write(from: chunk)
            at += n
        }
        XCTAssertEqual(file.length, AVAudioFramePosition(frames))
        file.close()
    }

    func testWriteAndReadBackInFramesWithSeeking() throws {
        let url = dir.appendingPathComponent("s24.wav")
        let frames = 44100 + 17
        try writeFile(url, settings: [AVFormatIDKey: kAudioFormatLinearPCM, AVSampleRateKey: 44100, AVNumberOfChannelsKey: 2, AVLinearPCMBitDepthKey: 24], frames: frames)
        let file = try AVAudioFile(forReading: url)
        XCTAssertEqual(file.length, AVAudioFramePosition(frames))
        XCTAssertEqual(file.fileFormat.streamDescription.pointee.mBitsPerChannel, 24)
        XCTAssertEqual(file.fileFormat.commonFormat, .otherFormat)
        XCTAssertTrue(file.processingFormat.isStandard)
        let buffer = try XCTUnwrap(AVAudioPCMBuffer(pcmFormat: file.processingFormat, frameCapacity: AVAudioFrameCount(frames + 100)))
        try file.read(into: buffer)
        XCTAssertEqual(buffer.frameLength, AVAudioFrameCount(frames))
        let right = sine(frames, channel: 1)
        for i in Swift.stride(from: 0, to: frames, by: 97) {
            XCTAssertEqual(buffer.floatChannelData![1][i], right[i], accuracy: 1.0 / 8_388_608)
        }
        // At the end: nothing more, no error.
        try file.read(into: buffer)
        XCTAssertEqual(buffer.frameLength, 0)
        // Seek into the middle and read what is there.
        file.framePosition = 30000
        XCTAssertEqual(file.framePosition, 30000)
        let part = try XCTUnwrap(AVAudioPCMBuffer(pcmFormat: file.processingFormat, frameCapacity: 100))
        try file.read(into: part)
        XCTAssertEqual(part.frameLength, 100)
        XCTAssertEqual(part.floatChannelData![1][0], right[30000], accuracy: 1.0 / 8_388_608)
        XCTAssertEqual(file.framePosition, 30100)
        // A buffer in another format is refused with Apple's parameter error.
        let other = try XCTUnwrap(AVAudioPCMBuffer(pcmFormat: AVAudioFormat(standardFormatWithSampleRate: 48000, channels: 2)!, frameCapacity: 10))
        XCTAssertThrowsError(try file.read(into: other)) { error in
            XCTAssertEqual((error as NSError).domain, NSOSStatusErrorDomain)
            XCTAssertEqual((error as NSError).code, Int(kAudio_ParamError))
        }
    }

    /// Seeking a file being written: the next write overwrites from the new position, the length
    /// stays what was written; a compressed file being written keeps its position.
    func testFramePositionSetWhileWriting() throws {
        let url = dir.appendingPathComponent("overwrite.wav")
        let file = try AVAudioFile(forWriting: url, settings: [AVFormatIDKey: kAudioFormatLinearPCM, AVSampleRateKey: 44100, AVNumberOfChannelsKey: 1, AVLinearPCMBitDepthKey: 16])
        let buffer = try XCTUnwrap(AVAudioPCMBuffer(pcmFormat: file.processingFormat, frameCapacity: 1000))
        func fill(_ value: Float, _ n: Int) {
            for i in 0..<n { buffer.floatChannelData![0][i] = value }
            buffer.frameLength = AVAudioFrameCount(n)
        }
        fill(0.25, 1000)
        try file.write(from: buffer)
        XCTAssertEqual(file.framePosition, 1000)
        file.framePosition = 400
        XCTAssertEqual(file.framePosition, 400, "the position moved back")
        fill(-0.5, 100)
        try file.write(from: buffer)
        XCTAssertEqual(file.framePosition, 500)
        XCTAssertEqual(file.length, 1000, "overwriting does not lengthen the file")
        file.framePosition = 1000
        fill(0.75, 200)
        try file.write(from: buffer)
        XCTAssertEqual(file.length, 1200)
        file.close()

        let back = try AVAudioFile(forReading: url)
        XCTAssertEqual(back.length, 1200)
        let all = try XCTUnwrap(AVAudioPCMBuffer(pcmFormat: back.processingFormat, frameCapacity: 1200))
        try back.read(into: all)
        let x = Array(UnsafeBufferPointer(start: all.floatChannelData![0], count: 1200))
        XCTAssertTrue(x[0..<400].allSatisfy { $0 == 0.25 })
        XCTAssertTrue(x[400..<500].allSatisfy { $0 == -0.5 }, "overwritten after the seek")
        XCTAssertTrue(x[500..<1000].allSatisfy { $0 == 0.25 })
        XCTAssertTrue(x[1000..<1200].allSatisfy { $0 == 0.75 })

        let aac = try AVAudioFile(forWriting: dir.appendingPathComponent("keep.m4a"), settings: [AVFormatIDKey: kAudioFormatMPEG4AAC, AVSampleRateKey: 44100, AVNumberOfChannelsKey: 1])
        let chunk = try XCTUnwrap(AVAudioPCMBuffer(pcmFormat: aac.processingFormat, frameCapacity: 1000))
        chunk.frameLength = 1000
        try aac.write(from: chunk)
        aac.framePosition = 10
        XCTAssertEqual(aac.framePosition, 1000, "compressed packets cannot be rewritten in place")
        aac.close()
    }

    func testCompressedFileWithEncoderSettings() throws {
        let url = dir.appendingPathComponent("aac.m4a")
        try writeFile(url, settings: [AVFormatIDKey: kAudioFormatMPEG4AAC, AVSampleRateKey: 44100, AVNumberOfChannelsKey: 2, AVEncoderBitRateKey: 96000], frames: 44100)
        let file = try AVAudioFile(forReading: url)
        XCTAssertEqual(file.fileFormat.streamDescription.pointee.mFormatID, kAudioFormatMPEG4AAC)
        XCTAssertEqual(Double(file.length), 44100, accuracy: 1024)
        let buffer = try XCTUnwrap(AVAudioPCMBuffer(pcmFormat: file.processingFormat, frameCapacity: 50000))
        try file.read(into: buffer)
        let left = sine(Int(buffer.frameLength), channel: 0)
        var signal = 0.0, noise = 0.0
        for i in 2048..<(Int(buffer.frameLength) - 2048) {
            signal += Double(left[i] * left[i])
            let d = Double(left[i] - buffer.floatChannelData![0][i])
            noise += d * d
        }
        XCTAssertGreaterThan(10 * log10(signal / noise), 20, "the AAC round trip through AVAudioFile is aligned and faithful")

        XCTAssertThrowsError(try AVAudioFile(forWriting: dir.appendingPathComponent("x.wav"), settings: [AVFormatIDKey: kAudioFormatMPEG4AAC, AVSampleRateKey: 44100, AVNumberOfChannelsKey: 2])) { error in
            XCTAssertEqual((error as NSError).code, Int(kAudioFileUnsupportedDataFormatError), "WAVE cannot hold AAC")
        }
        XCTAssertThrowsError(try AVAudioFile(forReading: dir.appendingPathComponent("missing.caf"))) { error in
            XCTAssertEqual((error as NSError).code, Int(kAudioFileFileNotFoundError))
        }
    }
}
