@testable import AudioHAL
import AVFAudio
import AudioTestSupport
import AudioToolbox
import Foundation
import XCTest

/// AVAudioPlayer on the virtual backend: the test advances the clock, and after each step the
/// player's queue refills what the step used (``VirtualAudioSystem/run(frames:step:until:)``),
/// so what the speaker gets is exact: lengths to the frame, loops without a gap, seeks, volume,
/// pan, rate, fades, meters, decode errors. That a player really sounds on PulseAudio and
/// PipeWire, and starts at a host time there, is `AVAudioPlayerTests`'.
final class VirtualAVAudioPlayerTests: XCTestCase {
    private var environment: VirtualAudioSystem!
    private var dir: URL!

    override func setUpWithError() throws {
        environment = VirtualAudioSystem()
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("openavf-vplayer-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    override func tearDown() {
        XCTAssertEqual(environment.stalls, 0, "steps after which the player's queue had not refilled")
        environment.restore()
        try? FileManager.default.removeItem(at: dir)
    }

    /// Runs the clock until `done` holds (at most `seconds`) and returns the speaker's left and
    /// right channels.
    private func play(seconds: Double = 10, until done: @escaping () -> Bool) -> (left: [Float], right: [Float]) {
        let stereo = environment.run(frames: Int(seconds * 48000), until: done)
        XCTAssertTrue(done(), "not done within \(seconds) s of the virtual clock")
        return VirtualAudioSystem.channels(stereo)
    }

    /// Runs the clock `seconds` and returns the speaker's channels.
    private func advance(seconds: Double) -> (left: [Float], right: [Float]) {
        VirtualAudioSystem.channels(environment.run(frames: Int(seconds * 48000)))
    }

    /// A player of `url` whose delegate calls are logged.
    private func logged(_ url: URL) throws -> (AVAudioPlayer, PlayerDelegateLog) {
        let player = try AVAudioPlayer(contentsOf: url)
        let log = PlayerDelegateLog()
        player.delegate = log
        return (player, log)
    }

    /// The frames from the first to the last sample above `threshold`.
    private func sounding(_ x: [Float], threshold: Float = 0.05) throws -> ArraySlice<Float> {
        let start = try XCTUnwrap(SignalAnalysis.onset(x, threshold: threshold), "nothing was heard")
        let end = try XCTUnwrap(SignalAnalysis.offset(x, threshold: threshold))
        return x[start...end]
    }

    /// A 440 Hz sine at half scale: the first and last frames above 0.05 are within a period
    /// (2.3 ms) of the ends, so a length is right to 5 ms.
    private let lengthTolerance = 0.005

    /// MP3 and M4A: duration, once to the end, one loop (twice, no gap at the join), and from a
    /// seek to 1.0 s; the delegate hears each end once, successfully.
    func testDurationEndLoopsAndSeekOnMP3AndM4A() throws {
        for (name, codec) in [("tone.mp3", ["-c:a", "libmp3lame", "-b:a", "128k"]), ("tone.m4a", ["-c:a", "aac", "-b:a", "128k"])] {
            let url = dir.appendingPathComponent(name)
            try PlayerFixtures.tone(url, seconds: 2, codec: codec)
            let player = try AVAudioPlayer(contentsOf: url)
            XCTAssertEqual(player.duration, 2, accuracy: 0.01, "\(name) duration")
            let log = PlayerDelegateLog()
            player.delegate = log

            XCTAssertTrue(player.play())
            var heard = play { log.finished.count == 1 }
            XCTAssertEqual(Double(try sounding(heard.left).count) / 48000, 2, accuracy: lengthTolerance, "\(name) played length")
            XCTAssertEqual(log.finished, [true])
            XCTAssertFalse(player.isPlaying)
            XCTAssertEqual(player.currentTime, 0, "back at the start after finishing")

            player.numberOfLoops = 1
            XCTAssertTrue(player.play())
            heard = play { log.finished.count == 2 }
            let looped = try sounding(heard.left)
            XCTAssertEqual(Double(looped.count) / 48000, 4, accuracy: lengthTolerance, "\(name) with one loop")
            // A sine's samples stay under 0.002 for a frame or two at each zero crossing.
            XCTAssertLessThanOrEqual(SignalAnalysis.longestGap(looped, threshold: 0.002), 4, "\(name): a gap at the loop")
            player.numberOfLoops = 0

            player.currentTime = 1.0
            XCTAssertEqual(player.currentTime, 1.0, accuracy: 0.001)
            XCTAssertTrue(player.play())
            heard = play { log.finished.count == 3 }
            XCTAssertEqual(Double(try sounding(heard.left).count) / 48000, 1, accuracy: lengthTolerance, "\(name) after seeking to 1.0 s")
            XCTAssertEqual(log.finished, [true, true, true], "once per play, always with success")
            XCTAssertEqual(log.decodeErrors, [])
        }
    }

    /// A seek while playing goes on from the new place at once; pause holds the position; stop
    /// holds it too and is not an end.
    func testSeekWhilePlayingPauseAndStop() throws {
        let url = dir.appendingPathComponent("long.wav")
        try PlayerFixtures.tone(url, seconds: 3)
        let (player, log) = try logged(url)
        XCTAssertTrue(player.play())
        var heard = play { player.currentTime >= 0.5 }
        player.currentTime = 2.0
        XCTAssertEqual(player.currentTime, 2.0, accuracy: 0.001)
        XCTAssertTrue(player.isPlaying)
        let rest = play { log.finished.count == 1 }
        heard.left += rest.left
        XCTAssertEqual(Double(try sounding(heard.left).count) / 48000, 1.5, accuracy: 0.01 + lengthTolerance, "0.5 s, then the last second, no gap")
        XCTAssertLessThanOrEqual(SignalAnalysis.longestGap(try sounding(heard.left), threshold: 0.002), 4, "a gap at the seek")

        XCTAssertTrue(player.play())
        _ = play { player.currentTime >= 0.4 }
        player.pause()
        XCTAssertFalse(player.isPlaying)
        let paused = player.currentTime
        let silence = advance(seconds: 0.3)
        XCTAssertEqual(player.currentTime, paused, accuracy: 1e-9, "the position holds while paused")
        XCTAssertLessThan(SignalAnalysis.rmsDB(silence.left[...]), -100, "silent while paused")
        XCTAssertTrue(player.play())
        _ = play { player.currentTime >= paused + 0.2 }
        player.stop()
        XCTAssertGreaterThanOrEqual(player.currentTime, paused + 0.2)
        XCTAssertFalse(player.isPlaying)
        _ = advance(seconds: 0.1)
        XCTAssertEqual(log.finished, [true], "stop does not report finishing")
    }

    /// Volume 0.5 is −6.02 dB; pan −1 leaves the right channel silent; rate 2 (with enableRate)
    /// halves the time and keeps the pitch.
    func testVolumePanAndRate() throws {
        let url = dir.appendingPathComponent("a440.wav")
        try PlayerFixtures.tone(url, seconds: 1)
        let (player, log) = try logged(url)
        let mid = { (x: ArraySlice<Float>) in x.dropFirst(4800).dropLast(4800) }

        XCTAssertTrue(player.play())
        let full = try sounding(play { log.finished.count == 1 }.left)
        player.volume = 0.5
        XCTAssertTrue(player.play())
        let half = try sounding(play { log.finished.count == 2 }.left, threshold: 0.025)
        XCTAssertEqual(SignalAnalysis.rmsDB(mid(half)) - SignalAnalysis.rmsDB(mid(full)), -6.02, accuracy: 0.05, "volume 0.5")
        player.volume = 1

        player.pan = -1
        XCTAssertTrue(player.play())
        let panned = play { log.finished.count == 3 }
        let left = try sounding(panned.left)
        XCTAssertLessThan(SignalAnalysis.rmsDB(panned.right[left.indices]), -60, "right channel with pan −1")
        XCTAssertGreaterThan(SignalAnalysis.rmsDB(mid(left)), -10, "left channel with pan −1")
        player.pan = 0

        player.enableRate = true
        player.rate = 2
        XCTAssertTrue(player.play())
        let fast = try sounding(play { log.finished.count == 4 }.left)
        XCTAssertEqual(Double(fast.count) / 48000, 0.5, accuracy: 0.01, "rate 2 halves the time")
        XCTAssertEqual(SignalAnalysis.frequency(mid(fast), sampleRate: 48000), 440, accuracy: 1, "pitch kept")
    }

    /// `setVolume(0, fadeDuration: 0.5)`: the envelope falls linearly, 90 % to 10 % in 0.4 s, and
    /// stays silent after.
    func testVolumeFadesLinearlyOverTheGivenDuration() throws {
        let url = dir.appendingPathComponent("fade.wav")
        try PlayerFixtures.tone(url, seconds: 2)
        let (player, log) = try logged(url)
        XCTAssertTrue(player.play())
        var heard = play { player.currentTime >= 0.5 }.left
        player.setVolume(0, fadeDuration: 0.5)
        XCTAssertEqual(player.volume, 0)
        heard += play { log.finished.count == 1 }.left
        let start = try XCTUnwrap(SignalAnalysis.onset(heard, threshold: 0.05))
        let windows = stride(from: start, to: heard.count - 240, by: 240).map { i in heard[i..<(i + 240)].map { abs($0) }.max() ?? 0 }
        let full = windows[10..<50].max() ?? 0
        let high = try XCTUnwrap(windows.lastIndex { $0 > 0.9 * full })
        let low = try XCTUnwrap(windows.indices.first { $0 > high && windows[$0] < 0.1 * full })
        XCTAssertEqual(Double(low - high) * 0.005, 0.4, accuracy: 0.011, "the fade's slope")
        XCTAssertLessThan(SignalAnalysis.rmsDB(heard[(start + (low + 20) * 240)...].prefix(24000)), -100, "silent after the fade")
    }

    /// Meters while playing agree with sox's `stats` on the file: a full-scale sine (average
    /// −3.01 dB, peak 0), one at −20 dB, and silence (−160).
    func testMetersMatchSoxStats() throws {
        guard let sox = PrivatePulseServer.which("sox") else { throw PrivatePulseServer.Failure(description: "sox is not installed") }
        let sine = dir.appendingPathComponent("fullscale.wav")
        let quiet = dir.appendingPathComponent("quiet.wav")
        let silence = dir.appendingPathComponent("silence.wav")
        try PlayerFixtures.tone(sine, frequency: 1000, seconds: 1.5, amplitude: 1, codec: ["-c:a", "pcm_s16le"])
        try PlayerFixtures.tone(quiet, frequency: 1000, seconds: 1.5, amplitude: 0.1, codec: ["-c:a", "pcm_s16le"])
        try PlayerFixtures.ffmpeg(["-f", "lavfi", "-i", "anullsrc=r=48000:cl=mono", "-t", "1.5", "-c:a", "pcm_s16le", silence.path])

        func soxStats(_ url: URL) throws -> (rms: Double, peak: Double) {
            let out = dir.appendingPathComponent("stats.txt").path
            let p = try ChildProcess(sox, [url.path, "-n", "stats"], environment: ProcessInfo.processInfo.environment, stderr: .file(out))
            XCTAssertEqual(p.wait(), 0)
            let text = try String(contentsOfFile: out, encoding: .utf8)
            func value(_ label: String) -> Double? {
                text.split(separator: "\n").first { $0.hasPrefix(label) }.flatMap { Double($0.split(separator: " ").last ?? "") }
            }
            return (try XCTUnwrap(value("RMS lev dB")), try XCTUnwrap(value("Pk lev dB")))
        }

        func meters(_ url: URL) throws -> (average: Float, peak: Float) {
            let player = try AVAudioPlayer(contentsOf: url)
            player.isMeteringEnabled = true
            XCTAssertEqual(player.averagePower(forChannel: 0), -160, "before playing")
            XCTAssertTrue(player.play())
            defer { player.stop() }
            _ = play { player.currentTime >= 1.0 }
            player.updateMeters()
            return (player.averagePower(forChannel: 0), player.peakPower(forChannel: 0))
        }

        let fullMeters = try meters(sine)
        XCTAssertEqual(fullMeters.average, -3.01, accuracy: 0.1, "full-scale sine, average")
        XCTAssertEqual(fullMeters.peak, 0, accuracy: 0.1, "full-scale sine, peak")
        for (url, measured) in [(sine, fullMeters), (quiet, try meters(quiet))] {
            let stats = try soxStats(url)
            XCTAssertEqual(Double(measured.average), stats.rms, accuracy: 0.1, "\(url.lastPathComponent): average vs sox RMS lev dB")
            XCTAssertEqual(Double(measured.peak), stats.peak, accuracy: 0.1, "\(url.lastPathComponent): peak vs sox Pk lev dB")
        }
        let silent = try meters(silence)
        XCTAssertEqual(silent.average, -160)
        XCTAssertEqual(silent.peak, -160)
    }

    /// Not audio: init throws with Apple's status; in-memory data plays like the file; a file
    /// that breaks part way reports one decode error and finishes unsuccessfully.
    func testBadDataThrowsAndBrokenDataReportsADecodeError() throws {
        let junk = dir.appendingPathComponent("junk.m4a")
        try Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 7919 &+ 13) }).write(to: junk)
        XCTAssertThrowsError(try AVAudioPlayer(contentsOf: junk)) { error in
            XCTAssertEqual((error as NSError).domain, NSOSStatusErrorDomain)
        }
        XCTAssertThrowsError(try AVAudioPlayer(data: Data()))
        XCTAssertThrowsError(try AVAudioPlayer(contentsOf: dir.appendingPathComponent("missing.wav")))

        let url = dir.appendingPathComponent("tone.m4a")
        try PlayerFixtures.tone(url, seconds: 1, codec: ["-c:a", "aac", "-b:a", "128k"])
        let fromData = try AVAudioPlayer(data: try Data(contentsOf: url))
        XCTAssertNil(fromData.url)
        XCTAssertEqual(fromData.duration, 1, accuracy: 0.01)

        var bytes = try Data(contentsOf: url)
        let mdat = try XCTUnwrap(bytes.range(of: Data("mdat".utf8)))
        let body = mdat.upperBound..<bytes.count
        let from = body.lowerBound + body.count / 2
        for i in from..<min(from + 4000, bytes.count) { bytes[i] = 0xFF }
        let broken = try AVAudioPlayer(data: bytes)
        let log = PlayerDelegateLog()
        broken.delegate = log
        XCTAssertTrue(broken.play())
        _ = play(seconds: 3) { !log.finished.isEmpty }
        XCTAssertEqual(log.decodeErrors.count, 1, "audioPlayerDecodeErrorDidOccur")
        XCTAssertEqual(log.finished, [false], "finished unsuccessfully")
    }
}
