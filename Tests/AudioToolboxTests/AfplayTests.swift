import AudioTestSupport
import AudioToolbox
import Foundation
import XCTest

/// The package's command-line tools run as subprocesses on the private server.
class ToolProcessTestCase: XCTestCase {
    var dir: URL!
    override func setUpWithError() throws {
        _ = try TestSound.server()
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("openavf-tool-\(getpid())-\(UUID().uuidString.prefix(6))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }
    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: dir) }

    /// A tool built beside the tests.
    func tool(_ name: String) throws -> String {
        let path = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent(name).path
        guard FileManager.default.isExecutableFile(atPath: path) else { throw QueueTestError.timeout("\(name) is not built beside the tests: run swift build --build-tests") }
        return path
    }

    /// Runs `name` to the end (20 s at most) and returns its exit code and standard error.
    func run(_ name: String, _ arguments: [String]) throws -> (code: Int32, err: String) {
        let err = dir.appendingPathComponent("err-\(UUID().uuidString.prefix(6)).txt").path
        let child = try ChildProcess(try tool(name), arguments, environment: try TestSound.server().environment, stderr: .file(err))
        if !waitUntil(timeout: 20, { !child.isRunning }) {
            child.terminate()
            XCTFail("\(name) \(arguments.joined(separator: " ")) did not finish within 20 s")
        }
        let code = child.wait()
        return (code, (try? String(contentsOfFile: err, encoding: .utf8)) ?? "")
    }
}

/// afplay as a user runs it, on the private server: what reaches the sink, flags, errors.
final class AfplayTests: ToolProcessTestCase {

    /// A 1 kHz tone at half scale as a 16-bit WAV.
    func toneFile(seconds: Double) throws -> URL {
        let url = dir.appendingPathComponent("tone.wav")
        var format = lpcm(rate: 48000, channels: 1)
        var file: AudioFileID?
        XCTAssertEqual(AudioFileCreateWithURL(url as CFURL, kAudioFileWAVEType, &format, .eraseFile, &file), noErr)
        var samples = SignalAnalysis.sine(frequency: 1000, sampleRate: 48000, seconds: seconds, amplitude: 0.5).map { Int16(($0 * 32767).rounded()) }
        var n = UInt32(samples.count)
        XCTAssertEqual(AudioFileWritePackets(file!, false, n * 2, nil, 0, &n, &samples), noErr)
        XCTAssertEqual(AudioFileClose(file!), noErr)
        return url
    }

    func run(_ arguments: [String]) throws -> (code: Int32, err: String) { try run("afplay", arguments) }

    /// Plays with `arguments` and returns the tone heard on the sink (onset to offset).
    func playAndCapture(_ arguments: [String], threshold: Float) throws -> [Float] {
        let capture = try SignalCapture(server: try TestSound.server(), device: "speaker.monitor")
        let result = try run(arguments)
        XCTAssertEqual(result.code, 0, result.err)
        try capture.waitFor(frames: capture.frameCount + 4800, timeout: 5)
        let heard = capture.stop()[0]
        let start = try XCTUnwrap(SignalAnalysis.onset(heard, threshold: threshold), "nothing was heard")
        let end = try XCTUnwrap(SignalAnalysis.offset(heard, threshold: threshold))
        return Array(heard[start...end])
    }

    func testPlaysTheFileAndHonoursVolumeAndTime() throws {
        let file = try toneFile(seconds: 1)
        let full = try playAndCapture([file.path], threshold: 0.05)
        XCTAssertEqual(Double(full.count) / 48000, 1.0, accuracy: 0.02, "played length")
        XCTAssertEqual(SignalAnalysis.frequency(full[4800..<(full.count - 4800)], sampleRate: 48000), 1000, accuracy: 2)
        XCTAssertLessThanOrEqual(SignalAnalysis.longestGap(full[...], threshold: 0.002), TestSound.gapTolerance, "a gap longer than three server periods")
        let half = try playAndCapture(["-v", "0.5", file.path], threshold: 0.025)
        let difference = SignalAnalysis.rmsDB(half[4800..<(half.count - 4800)]) - SignalAnalysis.rmsDB(full[4800..<(full.count - 4800)])
        XCTAssertEqual(difference, -6.02, accuracy: 0.2, "-v 0.5")
        let short = try playAndCapture(["-t", "0.3", file.path], threshold: 0.05)
        XCTAssertEqual(Double(short.count) / 48000, 0.3, accuracy: 0.02, "-t 0.3")
        let fast = try playAndCapture(["-r", "2", "-q", "1", file.path], threshold: 0.05)
        XCTAssertEqual(Double(fast.count) / 48000, 0.5, accuracy: 0.03, "-r 2")
        XCTAssertEqual(SignalAnalysis.frequency(fast[4800..<(fast.count - 4800)], sampleRate: 48000), 1000, accuracy: 3, "-r 2 keeps the pitch")
    }

    func testErrorsAndExitCodes() throws {
        var r = try run([dir.appendingPathComponent("missing.wav").path])
        XCTAssertEqual(r.code, 1)
        XCTAssertTrue(r.err.contains("cannot open") && r.err.contains("-43"), r.err)
        let file = try toneFile(seconds: 0.1)
        r = try run(["-r", "3", file.path])
        XCTAssertEqual(r.code, 1)
        XCTAssertTrue(r.err.contains("-r takes a rate from 0.5 to 2"), r.err)
        r = try run([])
        XCTAssertEqual(r.code, 2)
        XCTAssertTrue(r.err.contains("usage: afplay"), r.err)
        r = try run(["-v", "loud", file.path])
        XCTAssertEqual(r.code, 1)
        XCTAssertTrue(r.err.contains("-v takes a volume"), r.err)
        r = try run(["-d", file.path])
        XCTAssertEqual(r.code, 0, r.err)
        XCTAssertTrue(r.err.contains("Duration: 0.100 s"), r.err)
    }
}
