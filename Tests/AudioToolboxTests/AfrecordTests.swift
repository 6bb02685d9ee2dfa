import AudioTestSupport
import AudioToolbox
import Foundation
import XCTest

/// afrecord as a user runs it: the private server's microphone carries a 440 Hz tone; the files
/// are checked with ffprobe, ffmpeg and afinfo.
final class AfrecordTests: ToolProcessTestCase {
    var microphone: SignalPlayer?

    override func setUpWithError() throws {
        try super.setUpWithError()
        microphone = try SignalPlayer(
            server: try TestSound.server(), device: "micfeed",
            samples: SignalAnalysis.sine(frequency: 440, sampleRate: 48000, seconds: 30, amplitude: 0.5), sampleRate: 48000)
        try microphone?.waitUntilHeard()
    }

    override func tearDownWithError() throws {
        microphone?.stop()
        try super.tearDownWithError()
    }

    func testFlagsMakeTheAskedForFiles() throws {
        let wav = dir.appendingPathComponent("take.wav")
        var r = try run("afrecord", ["-f", "WAVE", "-d", "LEI16@48000", "-c", "1", "-t", "0.5", wav.path])
        XCTAssertEqual(r.code, 0, r.err)
        var probe = try probeWithFFprobe(wav, in: dir)
        XCTAssertEqual(probe.codec, "pcm_s16le")
        XCTAssertEqual(probe.rate, 48000)
        XCTAssertEqual(probe.channels, 1)
        XCTAssertEqual(probe.duration, 0.5, accuracy: 0.001)
        let audio = try decodeWithFFmpeg(wav, in: dir)
        XCTAssertEqual(SignalAnalysis.frequency(audio[2400..<21600], sampleRate: 48000), 440, accuracy: 3, "the microphone's tone")

        let caf = dir.appendingPathComponent("memo.caf")
        r = try run("afrecord", ["-d", "ima4", "-r", "44100", "-c", "2", "-t", "1", caf.path])
        XCTAssertEqual(r.code, 0, r.err)
        probe = try probeWithFFprobe(caf, in: dir)
        XCTAssertEqual(probe.codec, "adpcm_ima_qt")
        XCTAssertEqual(probe.rate, 44100)
        XCTAssertEqual(probe.channels, 2)
        XCTAssertEqual(probe.duration, 1.0, accuracy: 0.01)

        let m4a = dir.appendingPathComponent("note.m4a")
        r = try run("afrecord", ["-t", "1", "-b", "96000", "-q", "96", m4a.path])
        XCTAssertEqual(r.code, 0, r.err)
        probe = try probeWithFFprobe(m4a, in: dir)
        XCTAssertEqual(probe.codec, "aac", "AAC by default in .m4a")
        XCTAssertEqual(probe.duration, 1.0, accuracy: 0.05)
    }

    func testCtrlCLeavesACompleteFileAndAKillLeavesAReadableOne() throws {
        let afinfo = try tool("afinfo")
        for (sig, name) in [(SIGINT, "interrupted.caf"), (SIGKILL, "killed.caf")] {
            let url = dir.appendingPathComponent(name)
            let err = dir.appendingPathComponent("\(name).err").path
            let child = try ChildProcess(try tool("afrecord"), ["-d", "ima4", url.path], environment: try TestSound.server().environment, stderr: .file(err))
            // About a second of IMA4 (34 bytes per 64 frames at 44.1 kHz ≈ 23 kB/s).
            XCTAssertTrue(waitUntil(timeout: 10) { ((try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int) ?? 0) > 24_000 })
            kill(child.pid, sig)
            XCTAssertTrue(waitUntil(timeout: 5) { !child.isRunning }, "afrecord ends on signal \(sig)")
            let code = child.wait()
            if sig == SIGINT { XCTAssertEqual(code, 0, (try? String(contentsOfFile: err, encoding: .utf8)) ?? "") }
            let info = try ChildProcess.run(afinfo, [url.path], environment: try TestSound.server().environment, scratch: dir.appendingPathComponent("afinfo-\(name)").path)
            XCTAssertTrue(info.contains("ima4"), info)
            let probe = try probeWithFFprobe(url, in: dir)
            XCTAssertGreaterThan(probe.duration, 0.9, "\(name): what was recorded before the signal is in the file")
            let audio = try decodeWithFFmpeg(url, in: dir)
            XCTAssertEqual(SignalAnalysis.frequency(audio[4410..<30870], sampleRate: 44100), 440, accuracy: 3, name)
        }
    }

    /// A disk that fills up (here a file size limit, with SIGXFSZ ignored so that writes fail
    /// with EFBIG): the recorder reports the write error, afrecord exits 1, and the file keeps
    /// every buffer written before.
    func testAFullDiskReportsTheErrorAndKeepsWhatWasWritten() throws {
        if runsUnderThreadSanitizer {
            // Under `ulimit -f` a ThreadSanitizer process dies of SIGBUS in the sanitizer's own
            // shadow memory as soon as libdispatch starts a thread (any Swift program does); the
            // plain and AddressSanitizer runs check this.
            throw XCTSkip("afrecord built with ThreadSanitizer cannot run under a file size limit")
        }
        let url = dir.appendingPathComponent("full.caf")
        let err = dir.appendingPathComponent("full.err").path
        let command = "trap '' XFSZ; ulimit -f 40; exec '\(try tool("afrecord"))' -d ima4 -t 5 '\(url.path)'"
        let child = try ChildProcess("/bin/sh", ["-c", command], environment: try TestSound.server().environment, stderr: .file(err))
        XCTAssertTrue(waitUntil(timeout: 10) { !child.isRunning })
        XCTAssertEqual(child.wait(), 1)
        let message = try String(contentsOfFile: err, encoding: .utf8)
        XCTAssertTrue(message.contains("afrecord: recording into") && message.contains("File too large"), message)
        let size = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int)
        XCTAssertLessThanOrEqual(size, 20480)
        let probe = try probeWithFFprobe(url, in: dir)
        XCTAssertEqual(probe.codec, "adpcm_ima_qt")
        XCTAssertGreaterThan(probe.duration, 0.8, "the buffers written before the disk filled")
        let audio = try decodeWithFFmpeg(url, in: dir)
        XCTAssertEqual(SignalAnalysis.frequency(audio[4410..<30870], sampleRate: 44100), 440, accuracy: 3)
    }

    func testErrorsAndExitCodes() throws {
        var r = try run("afrecord", [])
        XCTAssertEqual(r.code, 2)
        XCTAssertTrue(r.err.contains("usage: afrecord"), r.err)
        r = try run("afrecord", ["--loud", "x.caf"])
        XCTAssertEqual(r.code, 2)
        r = try run("afrecord", ["-d", "mp9", dir.appendingPathComponent("x.caf").path])
        XCTAssertEqual(r.code, 1)
        XCTAssertTrue(r.err.contains("unknown data format 'mp9'"), r.err)
        r = try run("afrecord", ["-d", "aac", "-t", "1", dir.appendingPathComponent("x.wav").path])
        XCTAssertEqual(r.code, 1)
        XCTAssertTrue(r.err.contains("cannot hold 'aac "), r.err)
        r = try run("afrecord", ["-c", "9", dir.appendingPathComponent("x.caf").path])
        XCTAssertEqual(r.code, 1)
        XCTAssertTrue(r.err.contains("-c takes 1 … 8"), r.err)
        r = try run("afrecord", [dir.appendingPathComponent("x.unknown").path])
        XCTAssertEqual(r.code, 1)
        XCTAssertTrue(r.err.contains("give -f"), r.err)
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.appendingPathComponent("x.wav").path), "no file left after an error")
    }
}
