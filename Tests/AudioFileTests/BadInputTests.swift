import AudioTestSupport
import AudioToolbox
import Foundation
import XCTest

/// Acceptance 4 (the deterministic half; Fuzz/ holds the libFuzzer harness): bad input gets one
/// of Apple's AudioFile error codes, never a crash or a hang.
final class BadInputTests: XCTestCase {
    var dir: URL!
    override func setUpWithError() throws { dir = try temporaryDirectory() }
    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: dir) }

    static let appleErrors: Set<OSStatus> = [
        kAudioFileUnspecifiedError, kAudioFileUnsupportedFileTypeError, kAudioFileUnsupportedDataFormatError,
        kAudioFileInvalidChunkError, kAudioFileInvalidFileError, kAudioFileEndOfFileError, kAudioFilePositionError,
        kAudioFileInvalidPacketOffsetError, kAudioFileFileNotFoundError, kAudioFileNotOptimizedError,
    ]

    /// Opens `url` and reads every packet and (through ExtAudioFile) every frame. Returns the first
    /// failure status, or `noErr`. Fails the test on a status that is not one of Apple's codes or
    /// when one file takes more than 10 s.
    @discardableResult
    func readEverything(_ url: URL, _ label: String, file: StaticString = #filePath, line: UInt = #line) -> OSStatus {
        let start = Date()
        defer { XCTAssertLessThan(Date().timeIntervalSince(start), 10, "took too long: \(label)", file: file, line: line) }
        var id: AudioFileID?
        var status = AudioFileOpenURL(url as CFURL, .readPermission, 0, &id)
        if status == noErr, let id {
            var packets: UInt64 = 0
            var size = UInt32(8)
            _ = AudioFileGetProperty(id, kAudioFilePropertyAudioDataPacketCount, &size, &packets)
            var bound: UInt32 = 0
            size = 4
            _ = AudioFileGetProperty(id, kAudioFilePropertyPacketSizeUpperBound, &size, &bound)
            var buffer = [UInt8](repeating: 0, count: max(Int(bound), 1) * 64)
            var descriptions = [AudioStreamPacketDescription](repeating: .init(), count: 64)
            var at: Int64 = 0
            while status == noErr {
                var n: UInt32 = 64
                var bytes = UInt32(buffer.count)
                status = AudioFileReadPacketData(id, false, &bytes, &descriptions, at, &n, &buffer)
                if n == 0 { break }
                at += Int64(n)
            }
            AudioFileClose(id)
        }
        if status == noErr {
            var ext: ExtAudioFileRef?
            status = ExtAudioFileOpenURL(url as CFURL, &ext)
            if status == noErr, let ext {
                var client = floatClient(rate: 44100, channels: 2)
                status = ExtAudioFileSetProperty(ext, kExtAudioFileProperty_ClientDataFormat, UInt32(MemoryLayout<AudioStreamBasicDescription>.size), &client)
                var samples = [Float](repeating: 0, count: 8192)
                while status == noErr {
                    var n: UInt32 = 4096
                    status = samples.withUnsafeMutableBufferPointer { b in
                        var list = AudioBufferList(mNumberBuffers: 1, mBuffers: AudioBuffer(mNumberChannels: 2, mDataByteSize: UInt32(b.count * 4), mData: b.baseAddress))
                        return ExtAudioFileRead(ext, &n, &list)
                    }
                    if n == 0 { break }
                }
                ExtAudioFileDispose(ext)
            }
        }
        // Decoders report broken packets as the converter's 'what' and formats as 'fmt?'.
        let allowed = Self.appleErrors.union([kAudioConverterErr_UnspecifiedError, kAudioConverterErr_FormatNotSupported, kExtAudioFileError_InvalidDataFormat,
                                              kAudioConverterErr_InputSampleRateOutOfRange])
        XCTAssertTrue(status == noErr || allowed.contains(status), "unexpected status \(status.osStatusDescription): \(label)", file: file, line: line)
        return status
    }

    /// Small valid files of every readable type, written by this library and by ffmpeg.
    func seedFiles() throws -> [URL] {
        var seeds: [URL] = []
        let signal = testSignal(frames: 8000, channels: 2, rate: 44100)
        let ours: [(String, AudioFileTypeID, AudioStreamBasicDescription)] = [
            ("s.wav", kAudioFileWAVEType, pcmFormat(bits: 16)),
            ("s.caf", kAudioFileCAFType, pcmFormat(bits: 24)),
            ("aac.caf", kAudioFileCAFType, compressed(kAudioFormatMPEG4AAC)),
            ("s.aif", kAudioFileAIFFType, pcmFormat(bits: 16, bigEndian: true)),
            ("ima.aifc", kAudioFileAIFCType, compressed(kAudioFormatAppleIMA4)),
            ("aac.m4a", kAudioFileM4AType, compressed(kAudioFormatMPEG4AAC)),
            ("alac.m4a", kAudioFileM4AType, compressed(kAudioFormatAppleLossless, flags: 1)),
            ("s.flac", kAudioFileFLACType, compressed(kAudioFormatFLAC, flags: 1)),
            ("s.aac", kAudioFileAAC_ADTSType, compressed(kAudioFormatMPEG4AAC)),
        ]
        for (name, type, format) in ours {
            let url = dir.appendingPathComponent(name)
            try writeWithExtAudioFile(url, type: type, format: format, samples: signal, channels: 2, rate: 44100)
            seeds.append(url)
        }
        let raw = dir.appendingPathComponent("seed.f32")
        try writeFloatRaw(signal, to: raw)
        for (name, codec) in [("ff.mp3", "libmp3lame"), ("ff.ogg", "libopus")] {
            let url = dir.appendingPathComponent(name)
            try runTool("ffmpeg", ["-v", "error", "-y", "-f", "f32le", "-ar", "44100", "-ac", "2", "-i", raw.path, "-ar", "48000", "-c:a", codec, url.path], in: dir)
            seeds.append(url)
        }
        return seeds
    }

    func testTruncatedAtEveryPercent() throws {
        for seed in try seedFiles() {
            let data = try Data(contentsOf: seed)
            XCTAssertEqual(readEverything(seed, "intact \(seed.lastPathComponent)"), noErr, "the intact seed must read")
            for percent in 0..<100 {
                let cut = data.count * percent / 100
                let url = dir.appendingPathComponent("cut-\(percent)-\(seed.lastPathComponent)")
                try data.prefix(cut).write(to: url)
                readEverything(url, "\(seed.lastPathComponent) cut at \(percent) %")
                try FileManager.default.removeItem(at: url)
            }
        }
    }

    func testZeroLengthRandomBytesAndWrongExtensions() throws {
        let empty = dir.appendingPathComponent("empty.wav")
        try Data().write(to: empty)
        XCTAssertEqual(readEverything(empty, "zero-length .wav"), kAudioFileInvalidFileError)
        let emptyNoExtension = dir.appendingPathComponent("empty")
        try Data().write(to: emptyNoExtension)
        XCTAssertEqual(readEverything(emptyNoExtension, "zero-length"), kAudioFileUnsupportedFileTypeError)
        var missing: AudioFileID?
        XCTAssertEqual(AudioFileOpenURL(dir.appendingPathComponent("nothing.caf") as CFURL, .readPermission, 0, &missing), kAudioFileFileNotFoundError)
        XCTAssertEqual(AudioFileOpenURL(dir as CFURL, .readPermission, 0, &missing), kAudioFileUnsupportedFileTypeError, "a directory")

        var generator = SeededGenerator.fromEnvironment()
        print("random files from \(generator.replay)")  // before any of them, in case one crashes
        for i in 0..<150 {
            let size = [1, 3, 11, 12, 44, 100, 4096, 65_536][i % 8]
            let bytes = (0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let url = dir.appendingPathComponent("random\(i).\(["wav", "caf", "aif", "m4a", "mp3", "flac", "ogg", "bin"][i % 8])")
            try Data(bytes).write(to: url)
            XCTAssertNotEqual(readEverything(url, "random \(url.lastPathComponent), \(generator.replay)"), noErr)
        }

        // Content decides, not the name: a WAVE named .mp3, an M4A named .wav.
        let seeds = try seedFiles()
        for (seed, wrongName, type) in [(seeds[0], "wave.mp3", kAudioFileWAVEType), (seeds[5], "m4a.wav", kAudioFileM4AType), (seeds[1], "caf.aiff", kAudioFileCAFType)] {
            let url = dir.appendingPathComponent(wrongName)
            try FileManager.default.copyItem(at: seed, to: url)
            var id: AudioFileID?
            try check(AudioFileOpenURL(url as CFURL, .readPermission, 0, &id), wrongName)
            XCTAssertEqual(try fileProperty(id!, kAudioFilePropertyFileFormat, UInt32(0)), type, wrongName)
            AudioFileClose(id!)
        }
    }

    /// Headers that declare absurd sizes: each gets Apple's code, quickly, without allocating
    /// what the header asks for.
    func testHugeDeclaredSizes() throws {
        let seeds = try seedFiles()
        func patched(_ seed: URL, _ name: String, _ edit: (inout [UInt8]) -> Void) throws -> URL {
            var bytes = [UInt8](try Data(contentsOf: seed))
            edit(&bytes)
            let url = dir.appendingPathComponent(name)
            try Data(bytes).write(to: url)
            return url
        }
        func find(_ tag: String, in bytes: [UInt8]) -> Int {
            let t = Array(tag.utf8)
            return (0...(bytes.count - 4)).first { Array(bytes[$0..<($0 + 4)]) == t }!
        }
        func putBE32(_ v: UInt32, _ bytes: inout [UInt8], at i: Int) { for k in 0..<4 { bytes[i + k] = UInt8((v >> (24 - 8 * UInt32(k))) & 0xFF) } }
        func putLE16(_ v: UInt16, _ bytes: inout [UInt8], at i: Int) { bytes[i] = UInt8(v & 0xFF); bytes[i + 1] = UInt8(v >> 8) }

        // CAF desc: channels (offset 24 in the desc body) = 0xFFFFFFFF.
        let cafChannels = try patched(seeds[1], "channels.caf") { b in putBE32(0xFFFF_FFFF, &b, at: find("desc", in: b) + 12 + 24) }
        XCTAssertEqual(readEverything(cafChannels, "CAF with 4 billion channels"), kAudioFileUnsupportedDataFormatError)
        // CAF kuki chunk of 2^40 bytes.
        let cafCookie = try patched(seeds[2], "cookie.caf") { b in
            let i = find("kuki", in: b)
            for k in 0..<8 { b[i + 4 + k] = k == 3 ? 1 : 0 }
        }
        XCTAssertEqual(readEverything(cafCookie, "CAF cookie of 2^40 bytes"), kAudioFileInvalidChunkError)
        // CAF data chunk larger than the file: clamped to what is there.
        let cafData = try patched(seeds[1], "data.caf") { b in
            let i = find("data", in: b)
            for k in 0..<8 { b[i + 4 + k] = k == 0 ? 0x40 : 0 }
        }
        XCTAssertEqual(readEverything(cafData, "CAF data chunk of 2^62 bytes"), noErr)
        // CAF pakt declaring 2^62 packets.
        let cafPakt = try patched(seeds[2], "pakt.caf") { b in
            let i = find("pakt", in: b) + 12
            for k in 0..<8 { b[i + k] = k == 0 ? 0x40 : 0 }
        }
        readEverything(cafPakt, "CAF packet table of 2^62 packets")
        // A packet table promising 2^62 valid frames, read at twice the rate: clamped to what the
        // packets hold, no overflow.
        let cafValid = try patched(seeds[2], "valid.caf") { b in
            let i = find("pakt", in: b) + 12 + 8
            for k in 0..<8 { b[i + k] = k == 0 ? 0x40 : 0 }
        }
        let upsampled = try readWithExtAudioFile(cafValid, rate: 88200)
        XCTAssertLessThanOrEqual(upsampled.lengthFrames, 8000 + 2048, "valid frames clamped to the packets")
        // WAVE fmt: 65535 channels, block align 0.
        let wavChannels = try patched(seeds[0], "channels.wav") { b in
            let i = find("fmt ", in: b) + 8
            putLE16(0xFFFF, &b, at: i + 2)
            putLE16(0, &b, at: i + 12)
        }
        XCTAssertEqual(readEverything(wavChannels, "WAVE with 65535 channels and no block align"), kAudioFileInvalidFileError)
        // WAVE data chunk of 4 GB in a small file: clamped.
        let wavData = try patched(seeds[0], "data.wav") { b in
            let i = find("data", in: b) + 4
            for k in 0..<4 { b[i + k] = 0xF0 }
        }
        XCTAssertEqual(readEverything(wavData, "WAVE data size 0xF0F0F0F0"), noErr)
        // AIFF COMM: 60000 channels.
        let aiffChannels = try patched(seeds[3], "channels.aif") { b in
            let i = find("COMM", in: b) + 8
            b[i] = 0xEA
            b[i + 1] = 0x60
        }
        XCTAssertNotEqual(readEverything(aiffChannels, "AIFF with 60000 channels"), noErr)
        // AIFF COMM: sample rate exponent of an absurd value.
        let aiffRate = try patched(seeds[3], "rate.aif") { b in
            let i = find("COMM", in: b) + 8 + 8
            b[i] = 0x7F
            b[i + 1] = 0xFE
        }
        XCTAssertEqual(readEverything(aiffRate, "AIFF with an infinite sample rate"), kAudioFileUnsupportedDataFormatError)
    }

    /// Inputs the fuzzer found (`../shared/regressions` beside the package, as CI checks it out):
    /// each opens and reads to an Apple status or to the end, without trapping.
    func testFuzzerRegressions() throws {
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../../shared/regressions")
            .standardizedFileURL
        let files = (try? FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil)) ?? []
        XCTAssertFalse(files.isEmpty, "no regression inputs in \(folder.path)")
        for url in files.sorted(by: { $0.path < $1.path }) {
            readEverything(url, "regression \(url.lastPathComponent)")
        }
    }

    /// A CAF file with the given `desc` fields and 4 KiB of audio data.
    func caf(
        _ name: String, rate: Double, format: AudioFormatID = kAudioFormatLinearPCM, flags: UInt32 = 0, bytesPerPacket: UInt32 = 4,
        framesPerPacket: UInt32 = 1, channels: UInt32 = 2, bits: UInt32 = 16
    ) throws -> URL {
        var b: [UInt8] = Array("caff".utf8) + [0, 1, 0, 0]
        func be<T: FixedWidthInteger>(_ v: T) { for i in (0..<MemoryLayout<T>.size).reversed() { b.append(UInt8(truncatingIfNeeded: v >> (i * 8))) } }
        b += Array("desc".utf8)
        be(Int64(32))
        be(rate.bitPattern)
        for field in [format, flags, bytesPerPacket, framesPerPacket, channels, bits] { be(field) }
        b += Array("data".utf8)
        be(Int64(4 + 4096))
        be(UInt32(0))
        b += (0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 37) }
        let url = dir.appendingPathComponent(name)
        try Data(b).write(to: url)
        return url
    }

    /// Stream descriptions no real file has (the fuzzer's finds, and their relatives): Apple's
    /// 'fmt?' when the file opens, never a trap while converting.
    func testAbsurdStreamDescriptions() throws {
        let ima4 = kAudioFormatAppleIMA4
        let cases: [(String, URL)] = [
            ("rate 1e300", try caf("rate-huge.caf", rate: 1e300)),
            ("rate NaN", try caf("rate-nan.caf", rate: .nan)),
            ("rate infinity", try caf("rate-inf.caf", rate: .infinity)),
            ("rate -44100", try caf("rate-negative.caf", rate: -44100)),
            ("rate 0", try caf("rate-zero.caf", rate: 0)),
            ("rate 4.5e-69", try caf("rate-tiny.caf", rate: 4.527839539413356e-69)),
            ("rate 0.5", try caf("rate-half.caf", rate: 0.5)),
            ("rate 1e300 IMA4", try caf("rate-huge-ima4.caf", rate: 1e300, format: ima4, bytesPerPacket: 68, framesPerPacket: 64, bits: 0)),
            ("IMA4 bits 0xFFFFFC04", try caf("bits-ima4.caf", rate: 8000, format: ima4, bytesPerPacket: 68, framesPerPacket: 64, bits: 0xFFFF_FC04)),
            ("IMA4 bits 65", try caf("bits65-ima4.caf", rate: 8000, format: ima4, bytesPerPacket: 68, framesPerPacket: 64, bits: 65)),
            ("LPCM bits 0xFFFFFFFF", try caf("bits-lpcm.caf", rate: 44100, bits: 0xFFFF_FFFF)),
            ("channels 0", try caf("channels-zero.caf", rate: 44100, channels: 0)),
            ("channels 0xFFFFFFFF", try caf("channels-huge.caf", rate: 44100, channels: 0xFFFF_FFFF)),
            ("IMA4 channels 0xFFFFFFFF", try caf("channels-ima4.caf", rate: 8000, format: ima4, bytesPerPacket: 68, framesPerPacket: 64, channels: 0xFFFF_FFFF, bits: 0)),
            ("LPCM bytes per packet 0xFFFFFFFF", try caf("bpp-lpcm.caf", rate: 44100, bytesPerPacket: 0xFFFF_FFFF)),
            ("IMA4 bytes per packet 0xFFFFFFFF", try caf("bpp-ima4.caf", rate: 8000, format: ima4, bytesPerPacket: 0xFFFF_FFFF, framesPerPacket: 64, bits: 0)),
            ("IMA4 frames per packet 0xFFFFFFFF", try caf("fpp-ima4.caf", rate: 8000, format: ima4, bytesPerPacket: 68, framesPerPacket: 0xFFFF_FFFF, bits: 0)),
            ("u-law bits 0x80000000", try caf("bits-ulaw.caf", rate: 8000, format: kAudioFormatULaw, bytesPerPacket: 2, bits: 0x8000_0000)),
        ]
        for (label, url) in cases {
            XCTAssertEqual(readEverything(url, label), kAudioFileUnsupportedDataFormatError, label)
        }
        // The same descriptions handed to a converter directly: its own error, not a trap.
        let float = floatClient(rate: 44100, channels: 2)
        let sources: [(String, AudioStreamBasicDescription)] = [
            ("IMA4 bits 0xFFFFFC04", AudioStreamBasicDescription(
                mSampleRate: 8000, mFormatID: ima4, mFormatFlags: 0, mBytesPerPacket: 68, mFramesPerPacket: 64, mBytesPerFrame: 0,
                mChannelsPerFrame: 2, mBitsPerChannel: 0xFFFF_FC04, mReserved: 0)),
            ("IMA4 bytes per packet 0xFFFFFFFF", AudioStreamBasicDescription(
                mSampleRate: 8000, mFormatID: ima4, mFormatFlags: 0, mBytesPerPacket: 0xFFFF_FFFF, mFramesPerPacket: 64, mBytesPerFrame: 0,
                mChannelsPerFrame: 2, mBitsPerChannel: 0, mReserved: 0)),
            ("rate NaN", pcmFormat(rate: .nan)),
            ("rate 1e300", pcmFormat(rate: 1e300)),
        ]
        for (label, source) in sources {
            var input = source
            var output = float
            var converter: AudioConverterRef?
            let status = AudioConverterNew(&input, &output, &converter)
            XCTAssertNotEqual(status, noErr, label)
            XCTAssertTrue(
                [kAudioConverterErr_FormatNotSupported, kAudioConverterErr_InputSampleRateOutOfRange].contains(status),
                "\(label): \(status.osStatusDescription)")
            if let converter { AudioConverterDispose(converter) }
        }
    }

    /// Absurd values from callers rather than files: Apple's status, never a trap.
    func testAbsurdValuesFromCallers() throws {
        // A WAVE fmt chunk holds a 32-bit byte rate: 10 MHz × 1024 channels of 64-bit float does not fit.
        var wide = pcmFormat(rate: 10_000_000, channels: 1024, bits: 64, float: true)
        var id: AudioFileID?
        XCTAssertEqual(
            AudioFileCreateWithURL(dir.appendingPathComponent("wide.wav") as CFURL, kAudioFileWAVEType, &wide, .eraseFile, &id),
            kAudioFileUnsupportedDataFormatError)

        // FormatInfo completes partial descriptions; nonsense in them is 'fmt?'.
        for (label, format) in [
            ("LPCM bits 0xFFFFFFFF", AudioStreamBasicDescription(
                mSampleRate: 44100, mFormatID: kAudioFormatLinearPCM, mFormatFlags: kAudioFormatFlagIsSignedInteger, mBytesPerPacket: 0,
                mFramesPerPacket: 0, mBytesPerFrame: 0, mChannelsPerFrame: 2, mBitsPerChannel: 0xFFFF_FFFF, mReserved: 0)),
            ("IMA4 channels 0xFFFFFFFF", compressed(kAudioFormatAppleIMA4, channels: 0xFFFF_FFFF)),
        ] {
            var io = format
            var size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
            XCTAssertEqual(AudioFormatGetProperty(kAudioFormatProperty_FormatInfo, 0, nil, &size, &io), kAudioFormatUnsupportedDataFormatError, label)
        }

        // Packet descriptions pointing past any buffer, or declaring 2^32 - 1 frames.
        for (name, type) in [("packets.caf", kAudioFileCAFType), ("packets.m4a", kAudioFileM4AType)] {
            var format = compressed(kAudioFormatMPEG4AAC)
            var file: AudioFileID?
            try check(AudioFileCreateWithURL(dir.appendingPathComponent(name) as CFURL, type, &format, .eraseFile, &file), name)
            let bytes = [UInt8](repeating: 0x21, count: 64)
            let cases: [(AudioStreamPacketDescription, OSStatus)] = [
                (AudioStreamPacketDescription(mStartOffset: .max, mVariableFramesInPacket: 1024, mDataByteSize: 16), kAudioFileInvalidPacketOffsetError),
                (AudioStreamPacketDescription(mStartOffset: 0, mVariableFramesInPacket: 0xFFFF_FFFF, mDataByteSize: 16), kAudio_ParamError),
            ]
            for (description, expected) in cases {
                var d = description
                var n: UInt32 = 1
                XCTAssertEqual(AudioFileWritePackets(file!, false, 64, &d, 0, &n, bytes), expected, "\(name): \(description)")
            }
            AudioFileClose(file!)
        }
    }

    /// A converter's input callback handing a packet description that points past any buffer:
    /// kAudioConverterErr_InvalidInputSize, not a trap.
    func testConverterInputDescriptionOutsideTheBuffer() throws {
        var aac = compressed(kAudioFormatMPEG4AAC, rate: 44100, channels: 1)
        var pcm = floatClient(rate: 44100, channels: 1)
        var decoder: AudioConverterRef?
        try check(AudioConverterNew(&aac, &pcm, &decoder), "decoder")
        let d = try XCTUnwrap(decoder)
        defer { AudioConverterDispose(d) }
        let proc: AudioConverterComplexInputDataProc = { _, ioPackets, ioData, outDescriptions, userData in
            let input = userData!.assumingMemoryBound(to: UInt8.self)
            let list = UnsafeMutableAudioBufferListPointer(ioData)
            list[0].mData = UnsafeMutableRawPointer(input + MemoryLayout<AudioStreamPacketDescription>.stride)
            list[0].mDataByteSize = 16
            outDescriptions?.pointee = UnsafeMutableRawPointer(input).assumingMemoryBound(to: AudioStreamPacketDescription.self)
            ioPackets.pointee = 1
            return noErr
        }
        // One description (offset Int64.max) followed by 16 bytes of "packet".
        let input = UnsafeMutableRawPointer.allocate(byteCount: MemoryLayout<AudioStreamPacketDescription>.stride + 16, alignment: 16)
        defer { input.deallocate() }
        input.storeBytes(
            of: AudioStreamPacketDescription(mStartOffset: .max, mVariableFramesInPacket: 0, mDataByteSize: 16),
            as: AudioStreamPacketDescription.self)
        (input + MemoryLayout<AudioStreamPacketDescription>.stride).initializeMemory(as: UInt8.self, repeating: 0x21, count: 16)
        var out = [Float](repeating: 0, count: 4096)
        var packets: UInt32 = 4096
        let status = out.withUnsafeMutableBytes { raw in
            var list = AudioBufferList(mNumberBuffers: 1, mBuffers: AudioBuffer(mNumberChannels: 1, mDataByteSize: UInt32(raw.count), mData: raw.baseAddress))
            return AudioConverterFillComplexBuffer(d, proc, input, &packets, &list, nil)
        }
        XCTAssertEqual(status, kAudioConverterErr_InvalidInputSize)
    }
}
