import AudioTestSupport
import AudioToolbox
import Foundation
import XCTest

/// Acceptance 6: afinfo and afconvert as a user runs them: output, error messages, exit codes.
final class ToolTests: XCTestCase {
    var dir: URL!
    override func setUpWithError() throws { dir = try temporaryDirectory() }
    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: dir) }

    struct Result {
        let code: Int32
        let out: String
        let err: String
    }

    func run(_ tool: String, _ arguments: [String]) throws -> Result {
        let path = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent(tool).path
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw FileTestError("finding \(tool) beside the tests (run swift build --build-tests)", -1)
        }
        let out = dir.appendingPathComponent("\(tool).out").path
        let err = dir.appendingPathComponent("\(tool).err").path
        let child = try ChildProcess(path, arguments, environment: [:], stdout: .file(out), stderr: .file(err))
        let code = child.wait()
        return Result(
            code: code, out: (try? String(contentsOfFile: out, encoding: .utf8)) ?? "", err: (try? String(contentsOfFile: err, encoding: .utf8)) ?? "")
    }

    func makeWAV(seconds: Double = 1, rate: Double = 44100) throws -> URL {
        let url = dir.appendingPathComponent("in.wav")
        let frames = Int(seconds * rate)
        try writeWithExtAudioFile(url, type: kAudioFileWAVEType, format: pcmFormat(rate: rate, bits: 16), samples: testSignal(frames: frames, channels: 2, rate: rate), channels: 2, rate: rate)
        return url
    }

    func testAfinfoDescribesFiles() throws {
        let wav = try makeWAV()
        var r = try run("afinfo", [wav.path])
        XCTAssertEqual(r.code, 0, r.err)
        XCTAssertTrue(r.out.contains("File type ID:   WAVE"), r.out)
        XCTAssertTrue(r.out.contains("Data format:     2 ch,  44100 Hz, 'lpcm' (0x0000000C) 16-bit little-endian signed integer"), r.out)
        XCTAssertTrue(r.out.contains("Channel layout: Stereo (L R)"), r.out)
        XCTAssertTrue(r.out.contains("estimated duration: 1.000000 sec"), r.out)
        XCTAssertTrue(r.out.contains("audio packets: 44100"), r.out)
        XCTAssertTrue(r.out.contains("bit rate: 1411200 bits per second"), r.out)

        let m4a = dir.appendingPathComponent("aac.m4a")
        try writeWithExtAudioFile(m4a, type: kAudioFileM4AType, format: compressed(kAudioFormatMPEG4AAC), samples: testSignal(frames: 44100, channels: 2), channels: 2, rate: 44100)
        r = try run("afinfo", [m4a.path])
        XCTAssertEqual(r.code, 0, r.err)
        XCTAssertTrue(r.out.contains("File type ID:   m4af"), r.out)
        XCTAssertTrue(r.out.contains("'aac '"), r.out)
        XCTAssertTrue(r.out.contains("1024 frames/packet"), r.out)
        XCTAssertTrue(r.out.contains("priming"), r.out)

        r = try run("afinfo", ["-b", wav.path, m4a.path])
        XCTAssertEqual(r.code, 0)
        XCTAssertEqual(r.out.split(separator: "\n").count, 2, r.out)
    }

    func testAfinfoErrors() throws {
        var r = try run("afinfo", [dir.appendingPathComponent("missing.wav").path])
        XCTAssertEqual(r.code, 1)
        XCTAssertTrue(r.err.contains("AudioFileOpenURL failed (-43)"), r.err)
        let junk = dir.appendingPathComponent("junk.bin")
        try Data((0..<4000).map { UInt8(truncatingIfNeeded: $0 &* 37) }).write(to: junk)
        r = try run("afinfo", [junk.path])
        XCTAssertEqual(r.code, 1)
        XCTAssertTrue(r.err.contains("'typ?'"), r.err)
        r = try run("afinfo", [])
        XCTAssertEqual(r.code, 2)
        XCTAssertTrue(r.err.contains("usage: afinfo"), r.err)
        r = try run("afinfo", ["--bogus", "x"])
        XCTAssertEqual(r.code, 2)
        XCTAssertTrue(r.err.contains("unknown option --bogus"), r.err)
    }

    func testAfconvertConverts() throws {
        let wav = try makeWAV()
        // AAC at a new rate and channel count and a chosen bit rate.
        let m4a = dir.appendingPathComponent("out.m4a")
        var r = try run("afconvert", ["-f", "m4af", "-d", "aac@22050", "-c", "1", "-b", "64000", wav.path, m4a.path])
        XCTAssertEqual(r.code, 0, r.err)
        var id: AudioFileID?
        try check(AudioFileOpenURL(m4a as CFURL, .readPermission, 0, &id), "open")
        let format = try fileProperty(id!, kAudioFilePropertyDataFormat, AudioStreamBasicDescription())
        let bitRate = try fileProperty(id!, kAudioFilePropertyBitRate, UInt32(0))
        AudioFileClose(id!)
        XCTAssertEqual(format.mFormatID, kAudioFormatMPEG4AAC)
        XCTAssertEqual(format.mSampleRate, 22050)
        XCTAssertEqual(format.mChannelsPerFrame, 1)
        XCTAssertGreaterThan(bitRate, 40_000)
        XCTAssertLessThan(bitRate, 80_000)

        // ALAC there and back is lossless; the type follows the output name.
        let alac = dir.appendingPathComponent("out.caf")
        r = try run("afconvert", ["-d", "alac", wav.path, alac.path])
        XCTAssertEqual(r.code, 0, r.err)
        let back = dir.appendingPathComponent("back.wav")
        r = try run("afconvert", ["-d", "LEI16", alac.path, back.path])
        XCTAssertEqual(r.code, 0, r.err)
        let original = try readWithExtAudioFile(wav)
        let restored = try readWithExtAudioFile(back)
        assertSamplesEqual(restored.samples, original.samples, "WAV → ALAC → WAV")

        // PCM specs, IMA4, verbose progress.
        r = try run("afconvert", ["-v", "-f", "AIFC", "-d", "BEF32", wav.path, dir.appendingPathComponent("f.aifc").path])
        XCTAssertEqual(r.code, 0, r.err)
        XCTAssertTrue(r.err.contains("progress: 100%"), r.err)
        XCTAssertTrue(r.err.contains("Output format: 2 ch, 44100 Hz, 'lpcm' 32-bit big-endian float"), r.err)
        r = try run("afconvert", ["-d", "ima4", wav.path, dir.appendingPathComponent("i.caf").path])
        XCTAssertEqual(r.code, 0, r.err)
        let ima = try readWithExtAudioFile(dir.appendingPathComponent("i.caf"))
        XCTAssertEqual(ima.lengthFrames, 44100)
        r = try run("afconvert", ["-d", "LEI24@48000", wav.path, dir.appendingPathComponent("r.wav").path])
        XCTAssertEqual(r.code, 0, r.err)
        let resampled = try readWithExtAudioFile(dir.appendingPathComponent("r.wav"))
        XCTAssertEqual(resampled.rate, 48000)
        XCTAssertEqual(Int(resampled.lengthFrames), 48000)
    }

    func testAfconvertErrors() throws {
        let wav = try makeWAV(seconds: 0.2)
        let out = dir.appendingPathComponent("x.wav").path
        var r = try run("afconvert", ["-f", "WAVE", "-d", "aac", wav.path, out])
        XCTAssertEqual(r.code, 1)
        XCTAssertTrue(r.err.contains("WAVE cannot hold"), r.err)
        XCTAssertFalse(FileManager.default.fileExists(atPath: out), "no file is left behind")
        r = try run("afconvert", ["-d", "wobble", wav.path, out])
        XCTAssertEqual(r.code, 1)
        XCTAssertTrue(r.err.contains("unknown data format 'wobble'"), r.err)
        r = try run("afconvert", ["-f", "m4af", "-d", "aac@7000", wav.path, dir.appendingPathComponent("x.m4a").path])
        XCTAssertEqual(r.code, 1)
        XCTAssertTrue(r.err.contains("7000 Hz"), r.err)
        r = try run("afconvert", [dir.appendingPathComponent("missing.wav").path, out])
        XCTAssertEqual(r.code, 1)
        XCTAssertTrue(r.err.contains("cannot open"), r.err)
        r = try run("afconvert", ["-q", "500", wav.path, out])
        XCTAssertEqual(r.code, 1)
        XCTAssertTrue(r.err.contains("quality is 0 … 127"), r.err)
        r = try run("afconvert", ["--frobnicate", wav.path])
        XCTAssertEqual(r.code, 2)
        XCTAssertTrue(r.err.contains("usage: afconvert"), r.err)
        r = try run("afconvert", [wav.path, dir.appendingPathComponent("x.unknown").path])
        XCTAssertEqual(r.code, 1)
        XCTAssertTrue(r.err.contains("give -f"), r.err)
    }
}
