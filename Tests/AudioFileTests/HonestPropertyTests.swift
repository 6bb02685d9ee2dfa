import AudioTestSupport
import AudioToolbox
import Foundation
import XCTest

/// Properties that report what the file or codec really holds: IsOptimized, AudioTrackCount,
/// DeferSizeUpdates, the converter's prime info and maximum packet sizes.
final class HonestPropertyTests: XCTestCase {
    var dir: URL!
    override func setUpWithError() throws { dir = try temporaryDirectory() }
    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: dir) }

    private func optimized(_ file: AudioFileID) throws -> UInt32 { try fileProperty(file, kAudioFilePropertyIsOptimized, UInt32(9)) }

    private func open(_ url: URL) throws -> AudioFileID {
        var file: AudioFileID?
        try check(AudioFileOpenURL(url as CFURL, .readPermission, 0, &file), "open \(url.lastPathComponent)")
        return try XCTUnwrap(file)
    }

    private func writePCM(_ file: AudioFileID, frames: Int, at start: Int64 = 0) throws {
        var samples = [Int16](repeating: 1000, count: 2 * frames)
        var n = UInt32(frames)
        try check(AudioFileWritePackets(file, false, UInt32(samples.count * 2), nil, start, &n, &samples), "write")
    }

    func testIsOptimizedFollowsWhereTheDataIs() throws {
        // A CAF being written: its data chunk's size is "unknown" (-1) until it closes.
        let caf = dir.appendingPathComponent("a.caf")
        var format = pcmFormat(channels: 2, bits: 16)
        var file: AudioFileID?
        try check(AudioFileCreateWithURL(caf as CFURL, kAudioFileCAFType, &format, .eraseFile, &file), "create")
        try writePCM(file!, frames: 100)
        XCTAssertEqual(try optimized(file!), 0, "a CAF being written has a data chunk of unknown size")
        try check(AudioFileClose(file!), "close")
        file = try open(caf)
        XCTAssertEqual(try optimized(file!), 1, "closed: the data chunk is sized and last")
        AudioFileClose(file!)

        // Metadata set after the audio started goes after the data chunk: the data is not last.
        let late = dir.appendingPathComponent("late.caf")
        try check(AudioFileCreateWithURL(late as CFURL, kAudioFileCAFType, &format, .eraseFile, &file), "create")
        try writePCM(file!, frames: 100)
        let info: NSDictionary = [kAFInfoDictionary_Title: "late"]
        var reference = Unmanaged.passUnretained(info).toOpaque()
        try check(AudioFileSetProperty(file!, kAudioFilePropertyInfoDictionary, UInt32(MemoryLayout<UnsafeMutableRawPointer>.size), &reference), "info")
        try check(AudioFileClose(file!), "close")
        file = try open(late)
        XCTAssertEqual(try optimized(file!), 0, "an info chunk after the audio data")
        AudioFileClose(file!)

        // A WAVE file keeps its sizes current: optimized while written and after.
        let wav = dir.appendingPathComponent("a.wav")
        try check(AudioFileCreateWithURL(wav as CFURL, kAudioFileWAVEType, &format, .eraseFile, &file), "create")
        try writePCM(file!, frames: 100)
        XCTAssertEqual(try optimized(file!), 1)
        try check(AudioFileClose(file!), "close")
        // A chunk appended after the data (as tag editors add LIST chunks) makes it not optimized.
        let handle = try FileHandle(forWritingTo: wav)
        handle.seekToEndOfFile()
        handle.write(Data("LIST".utf8) + Data([4, 0, 0, 0]) + Data("INFO".utf8))
        try handle.close()
        file = try open(wav)
        XCTAssertEqual(try optimized(file!), 0, "a LIST chunk after the data")
        AudioFileClose(file!)

        // AAC in a CAF: the packet table is written after the data when the file closes.
        let aac = dir.appendingPathComponent("aac.caf")
        try writeWithExtAudioFile(aac, type: kAudioFileCAFType, format: compressed(kAudioFormatMPEG4AAC), samples: testSignal(frames: 5000, channels: 2), channels: 2, rate: 44100)
        file = try open(aac)
        XCTAssertEqual(try optimized(file!), 0, "the pakt chunk follows the audio data")
        AudioFileClose(file!)

        // FFmpeg's M4A writer puts its index (moov) after the audio (mdat); ADTS is all audio.
        let m4a = dir.appendingPathComponent("a.m4a")
        try writeWithExtAudioFile(m4a, type: kAudioFileM4AType, format: compressed(kAudioFormatMPEG4AAC), samples: testSignal(frames: 5000, channels: 2), channels: 2, rate: 44100)
        file = try open(m4a)
        XCTAssertEqual(try optimized(file!), 0, "moov after mdat")
        AudioFileClose(file!)
        let adts = dir.appendingPathComponent("a.aac")
        try writeWithExtAudioFile(adts, type: kAudioFileAAC_ADTSType, format: compressed(kAudioFormatMPEG4AAC), samples: testSignal(frames: 5000, channels: 2), channels: 2, rate: 44100)
        file = try open(adts)
        XCTAssertEqual(try optimized(file!), 1, "ADTS frames to the end of the file")
        AudioFileClose(file!)
    }

    func testAudioTrackCountIsTheFilesAudioStreams() throws {
        let wav = dir.appendingPathComponent("one.wav")
        try writeWithExtAudioFile(wav, type: kAudioFileWAVEType, format: pcmFormat(channels: 1), samples: testSignal(frames: 1000, channels: 1), channels: 1, rate: 44100)
        var file = try open(wav)
        XCTAssertEqual(try fileProperty(file, kAudioFilePropertyAudioTrackCount, UInt32(0)), 1)
        var two: UInt32 = 2
        XCTAssertEqual(AudioFileSetProperty(file, kAudioFilePropertyAudioTrackCount, 4, &two), kAudioFileUnsupportedPropertyError, "read-only")
        AudioFileClose(file)

        // An MP4 with three audio tracks, written by ffmpeg itself.
        let mp4 = dir.appendingPathComponent("three.m4a")
        let ffmpeg = Process()
        ffmpeg.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        ffmpeg.arguments = [
            "-v", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=440:duration=0.5", "-f", "lavfi", "-i", "sine=frequency=660:duration=0.5",
            "-f", "lavfi", "-i", "sine=frequency=880:duration=0.5", "-map", "0", "-map", "1", "-map", "2", "-c:a", "aac", mp4.path,
        ]
        try ffmpeg.run()
        ffmpeg.waitUntilExit()
        XCTAssertEqual(ffmpeg.terminationStatus, 0, "ffmpeg")
        file = try open(mp4)
        defer { AudioFileClose(file) }
        XCTAssertEqual(try fileProperty(file, kAudioFilePropertyAudioTrackCount, UInt32(0)), 3)
    }

    /// The 32-bit little-endian field at `offset` of the file on disk.
    private func field(_ url: URL, at offset: Int) throws -> UInt32 {
        let data = try Data(contentsOf: url)
        return data[offset..<(offset + 4)].enumerated().reduce(0) { $0 | UInt32($1.element) << (8 * $1.offset) }
    }

    func testDeferSizeUpdatesWritesSizesOnlyWhenClosing() throws {
        let url = dir.appendingPathComponent("deferred.wav")
        var format = pcmFormat(channels: 2, bits: 16)
        var file: AudioFileID?
        try check(AudioFileCreateWithURL(url as CFURL, kAudioFileWAVEType, &format, .eraseFile, &file), "create")
        XCTAssertEqual(try fileProperty(file!, kAudioFilePropertyDeferSizeUpdates, UInt32(9)), 0, "off by default")
        let dataSizeOffset = Int(try fileProperty(file!, kAudioFilePropertyDataOffset, Int64(0))) - 4
        try writePCM(file!, frames: 100)
        XCTAssertEqual(try field(url, at: dataSizeOffset), 400, "kept current after each write by default")

        var on: UInt32 = 1
        try check(AudioFileSetProperty(file!, kAudioFilePropertyDeferSizeUpdates, 4, &on), "defer")
        XCTAssertEqual(try fileProperty(file!, kAudioFilePropertyDeferSizeUpdates, UInt32(0)), 1, "reads back")
        try writePCM(file!, frames: 100, at: 100)
        XCTAssertEqual(try field(url, at: dataSizeOffset), 400, "deferred: the header still says the old size")
        XCTAssertEqual(try field(url, at: 4), UInt32(dataSizeOffset + 4 + 400 - 8), "and so does RIFF's")
        XCTAssertEqual(try optimized(file!), 0, "the header is behind the data")
        XCTAssertEqual(try fileProperty(file!, kAudioFilePropertyAudioDataByteCount, UInt64(0)), 800, "the file object knows the real size")
        try check(AudioFileClose(file!), "close")
        XCTAssertEqual(try field(url, at: dataSizeOffset), 800, "written when the file closes")

        // Setting it back to 0 brings the sizes up to date at once.
        let second = dir.appendingPathComponent("second.wav")
        try check(AudioFileCreateWithURL(second as CFURL, kAudioFileWAVEType, &format, .eraseFile, &file), "create")
        try check(AudioFileSetProperty(file!, kAudioFilePropertyDeferSizeUpdates, 4, &on), "defer")
        try writePCM(file!, frames: 50)
        XCTAssertEqual(try field(second, at: dataSizeOffset), 0)
        var off: UInt32 = 0
        try check(AudioFileSetProperty(file!, kAudioFilePropertyDeferSizeUpdates, 4, &off), "undefer")
        XCTAssertEqual(try field(second, at: dataSizeOffset), 200)
        XCTAssertEqual(try optimized(file!), 1)
        try check(AudioFileClose(file!), "close")

        // A file being read has nothing to update; an M4A being written writes its sizes at close.
        file = try open(url)
        XCTAssertEqual(AudioFileSetProperty(file!, kAudioFilePropertyDeferSizeUpdates, 4, &on), kAudioFilePermissionsError)
        AudioFileClose(file!)
        var aac = compressed(kAudioFormatMPEG4AAC)
        try check(AudioFileCreateWithURL(dir.appendingPathComponent("x.m4a") as CFURL, kAudioFileM4AType, &aac, .eraseFile, &file), "create m4a")
        XCTAssertEqual(try fileProperty(file!, kAudioFilePropertyDeferSizeUpdates, UInt32(0)), 1, "the muxer writes sizes when it finishes")
        XCTAssertEqual(AudioFileSetProperty(file!, kAudioFilePropertyDeferSizeUpdates, 4, &off), kAudioFileOperationNotSupportedError)
        AudioFileClose(file!)
    }

    /// Encodes `frames` frames of a stereo tone to `format` through one converter; returns the
    /// packets' sizes and frames.
    private func encode(
        _ converter: AudioConverterRef, frames: Int, channels: Int, maxPacket: Int
    ) throws -> [(size: Int, frames: Int)] {
        let tone = testSignal(frames: frames, channels: channels)
        let input = ConverterInput(data: tone.withUnsafeBytes { Array($0) }, bytesPerPacket: 4 * channels, packetsPerCall: 4096)
        var out: [(size: Int, frames: Int)] = []
        var buffer = [UInt8](repeating: 0, count: 8 * maxPacket)
        var descriptions = [AudioStreamPacketDescription](repeating: .init(), count: 8)
        while true {
            var packets: UInt32 = 8
            let status = buffer.withUnsafeMutableBytes { raw in
                var list = AudioBufferList(mNumberBuffers: 1, mBuffers: AudioBuffer(mNumberChannels: UInt32(channels), mDataByteSize: UInt32(raw.count), mData: raw.baseAddress))
                return AudioConverterFillComplexBuffer(converter, ConverterInput.proc, input.context, &packets, &list, &descriptions)
            }
            try check(status, "encode")
            if packets == 0 { break }
            for d in descriptions[0..<Int(packets)] { out.append((Int(d.mDataByteSize), Int(d.mVariableFramesInPacket))) }
        }
        return out
    }

    private func primeInfo(_ converter: AudioConverterRef) throws -> AudioConverterPrimeInfo {
        var prime = AudioConverterPrimeInfo()
        var size = UInt32(MemoryLayout<AudioConverterPrimeInfo>.size)
        try check(AudioConverterGetProperty(converter, kAudioConverterPrimeInfo, &size, &prime), "prime info")
        return prime
    }

    private func maximumOutputPacketSize(_ converter: AudioConverterRef) throws -> Int {
        var value: UInt32 = 0
        var size: UInt32 = 4
        try check(AudioConverterGetProperty(converter, kAudioConverterPropertyMaximumOutputPacketSize, &size, &value), "maximum output packet size")
        return Int(value)
    }

    func testAACEncoderPrimeInfoHasTheStreamsRemainder() throws {
        var pcm = floatClient(rate: 44100, channels: 2)
        var aac = compressed(kAudioFormatMPEG4AAC, rate: 44100, channels: 2)
        var converter: AudioConverterRef?
        try check(AudioConverterNew(&pcm, &aac, &converter), "encoder")
        let c = try XCTUnwrap(converter)
        defer { AudioConverterDispose(c) }
        XCTAssertEqual(try maximumOutputPacketSize(c), 1536, "AAC's bound: 6144 bits per channel")
        let frames = 10_000
        let packets = try encode(c, frames: frames, channels: 2, maxPacket: 1536)
        let prime = try primeInfo(c)
        XCTAssertEqual(prime.leadingFrames, 1024)
        let emitted = packets.count * 1024
        XCTAssertGreaterThan(prime.trailingFrames, 0)
        XCTAssertEqual(Int(prime.leadingFrames) + frames + Int(prime.trailingFrames), emitted, "priming + input + remainder = the frames of every packet")
        XCTAssertLessThanOrEqual(packets.map(\.size).max() ?? 0, 1536)
    }

    func testSampleRateConversionReportsTheFramesItsFilterHolds() throws {
        var from = floatClient(rate: 44100, channels: 1)
        var to = floatClient(rate: 48000, channels: 1)
        var converter: AudioConverterRef?
        try check(AudioConverterNew(&from, &to, &converter), "converter")
        let c = try XCTUnwrap(converter)
        defer { AudioConverterDispose(c) }
        let tone = testSignal(frames: 4410, channels: 1)
        let input = ConverterInput(data: tone.withUnsafeBytes { Array($0) }, bytesPerPacket: 4, packetsPerCall: 4410)
        var out = [Float](repeating: 0, count: 1000)
        var n: UInt32 = 1000
        try out.withUnsafeMutableBytes { raw in
            var list = AudioBufferList(mNumberBuffers: 1, mBuffers: AudioBuffer(mNumberChannels: 1, mDataByteSize: UInt32(raw.count), mData: raw.baseAddress))
            try check(AudioConverterFillComplexBuffer(c, ConverterInput.proc, input.context, &n, &list, nil), "convert")
        }
        let prime = try primeInfo(c)
        XCTAssertGreaterThan(prime.trailingFrames, 0, "the resampler's filter holds input past what came out")
        XCTAssertLessThan(prime.trailingFrames, 200)
    }

    func testEncoderMaximumPacketSizeIsWhatTheEncoderCanProduce() throws {
        // ALAC's encoder declares its largest frame in its configuration (the magic cookie).
        var pcm = floatClient(rate: 44100, channels: 2)
        var alac = compressed(kAudioFormatAppleLossless, rate: 44100, channels: 2, flags: 1)
        var converter: AudioConverterRef?
        try check(AudioConverterNew(&pcm, &alac, &converter), "ALAC encoder")
        let c = try XCTUnwrap(converter)
        defer { AudioConverterDispose(c) }
        let maximum = try maximumOutputPacketSize(c)
        // 4096 frames of 2 × 16 bits stored verbatim, plus the frame's headers.
        XCTAssertGreaterThanOrEqual(maximum, 4096 * 2 * 2)
        XCTAssertLessThan(maximum, 4096 * 2 * 2 + 64)
        let packets = try encode(c, frames: 20_000, channels: 2, maxPacket: maximum)
        XCTAssertFalse(packets.isEmpty)
        XCTAssertLessThanOrEqual(packets.map(\.size).max() ?? 0, maximum)
    }

    func testFileMaximumPacketSizeIsTheLargestPacketInTheFile() throws {
        for (name, type) in [("v.caf", kAudioFileCAFType), ("v.m4a", kAudioFileM4AType)] {
            let url = dir.appendingPathComponent(name)
            try writeWithExtAudioFile(url, type: type, format: compressed(kAudioFormatMPEG4AAC), samples: testSignal(frames: 20_000, channels: 2), channels: 2, rate: 44100)
            let file = try open(url)
            defer { AudioFileClose(file) }
            let count = try fileProperty(file, kAudioFilePropertyAudioDataPacketCount, UInt64(0))
            var largest = 0
            for i in 0..<Int64(count) {
                var bytes: UInt32 = 0
                var descriptions = [AudioStreamPacketDescription](repeating: .init(), count: 1)
                var n: UInt32 = 1
                var room = [UInt8](repeating: 0, count: 4096)
                bytes = UInt32(room.count)
                try check(AudioFileReadPacketData(file, false, &bytes, &descriptions, i, &n, &room), "read packet \(i)")
                largest = max(largest, Int(bytes))
            }
            XCTAssertEqual(Int(try fileProperty(file, kAudioFilePropertyMaximumPacketSize, UInt32(0))), largest, name)
        }
    }

    func testExtAudioFileClientChannelLayoutReordersChannels() throws {
        // Left: a tone; right: silence.
        let frames = 4410
        let left = (0..<frames).map { Float(0.5 * sin(2 * Double.pi * 440 * Double($0) / 44100)) }
        let url = dir.appendingPathComponent("left.wav")
        try writeWithExtAudioFile(url, type: kAudioFileWAVEType, format: pcmFormat(channels: 2, bits: 16), samples: left.flatMap { x -> [Float] in [x, 0] }, channels: 2, rate: 44100)

        var ext: ExtAudioFileRef?
        try check(ExtAudioFileOpenURL(url as CFURL, &ext), "open")
        let e = try XCTUnwrap(ext)
        defer { ExtAudioFileDispose(e) }
        var client = floatClient(rate: 44100, channels: 2)
        try check(ExtAudioFileSetProperty(e, kExtAudioFileProperty_ClientDataFormat, UInt32(MemoryLayout.size(ofValue: client)), &client), "client format")
        var swapped = channelLayoutBytes([kAudioChannelLabel_Right, kAudioChannelLabel_Left])
        try check(ExtAudioFileSetProperty(e, kExtAudioFileProperty_ClientChannelLayout, UInt32(swapped.count), &swapped), "client layout")
        var size: UInt32 = 0
        try check(ExtAudioFileGetPropertyInfo(e, kExtAudioFileProperty_ClientChannelLayout, &size, nil), "size")
        var back = [UInt8](repeating: 0, count: Int(size))
        try check(ExtAudioFileGetProperty(e, kExtAudioFileProperty_ClientChannelLayout, &size, &back), "get")
        XCTAssertEqual(back, swapped, "reads back the layout set")
        var out = [Float](repeating: 0, count: frames * 2)
        var n = UInt32(frames)
        try out.withUnsafeMutableBytes { raw in
            var list = AudioBufferList(mNumberBuffers: 1, mBuffers: AudioBuffer(mNumberChannels: 2, mDataByteSize: UInt32(raw.count), mData: raw.baseAddress))
            try check(ExtAudioFileRead(e, &n, &list), "read")
        }
        XCTAssertEqual(Int(n), frames)
        let first = stride(from: 0, to: out.count, by: 2).map { out[$0] }
        let second = stride(from: 1, to: out.count, by: 2).map { out[$0] }
        XCTAssertTrue(first.allSatisfy { $0 == 0 }, "the client's first channel is the file's right: silent")
        XCTAssertGreaterThan(snrDB(left, second), 60, "the client's second channel is the file's left: the tone")

        // Layouts that are not a reordering of the file's are refused.
        var three = tagged(kAudioChannelLayoutTag_MPEG_3_0_A)
        XCTAssertEqual(ExtAudioFileSetProperty(e, kExtAudioFileProperty_ClientChannelLayout, UInt32(three.count), &three), kExtAudioFileError_InvalidChannelMap, "three channels for a stereo client")
        var centre = channelLayoutBytes([kAudioChannelLabel_Left, kAudioChannelLabel_Center])
        XCTAssertEqual(ExtAudioFileSetProperty(e, kExtAudioFileProperty_ClientChannelLayout, UInt32(centre.count), &centre), kExtAudioFileError_InvalidChannelMap, "the file has no centre")
        var unknown = tagged((999 << 16) | 2)
        XCTAssertEqual(ExtAudioFileSetProperty(e, kExtAudioFileProperty_ClientChannelLayout, UInt32(unknown.count), &unknown), kAudioFormatUnknownFormatError)

        // Writing: the client's [R, L] channels land in the file's L, R order.
        let written = dir.appendingPathComponent("swapped.wav")
        var fileFormat = pcmFormat(channels: 2, bits: 16)
        var w: ExtAudioFileRef?
        try check(ExtAudioFileCreateWithURL(written as CFURL, kAudioFileWAVEType, &fileFormat, nil, AudioFileFlags.eraseFile.rawValue, &w), "create")
        try check(ExtAudioFileSetProperty(w!, kExtAudioFileProperty_ClientDataFormat, UInt32(MemoryLayout.size(ofValue: client)), &client), "client format")
        try check(ExtAudioFileSetProperty(w!, kExtAudioFileProperty_ClientChannelLayout, UInt32(swapped.count), &swapped), "client layout")
        var samples = left.flatMap { x -> [Float] in [x, 0] }
        try samples.withUnsafeMutableBytes { raw in
            var list = AudioBufferList(mNumberBuffers: 1, mBuffers: AudioBuffer(mNumberChannels: 2, mDataByteSize: UInt32(raw.count), mData: raw.baseAddress))
            try check(ExtAudioFileWrite(w!, UInt32(frames), &list), "write")
        }
        XCTAssertEqual(ExtAudioFileSetProperty(w!, kExtAudioFileProperty_ClientChannelLayout, UInt32(swapped.count), &swapped), kExtAudioFileError_InvalidOperationOrder)
        try check(ExtAudioFileDispose(w!), "dispose")
        let read = try readWithExtAudioFile(written)
        XCTAssertTrue(stride(from: 0, to: read.samples.count, by: 2).allSatisfy { read.samples[$0] == 0 }, "the file's left is the client's channel labelled left: its silent second one")
        XCTAssertGreaterThan(snrDB(left, stride(from: 1, to: read.samples.count, by: 2).map { read.samples[$0] }), 60)
    }

    private func tagged(_ tag: AudioChannelLayoutTag) -> [UInt8] {
        var value = AudioChannelLayout()
        value.mChannelLayoutTag = tag
        return withUnsafeBytes(of: value) { Array($0) }
    }
}
