import AVFAudio
import AudioTestSupport
import AudioToolbox
import Foundation
import XCTest

/// Counts what a player tells its delegate.
final class PlayerDelegateLog: @unchecked Sendable {
    private let lock = NSLock()
    private var finishes: [Bool] = []
    private var errors: [String] = []

    var finished: [Bool] { lock.withLock { finishes } }
    var decodeErrors: [String] { lock.withLock { errors } }
}

extension PlayerDelegateLog: AVAudioPlayerDelegate {
    nonisolated func audioPlayerDidFinishPlaying(_ player: AVAudioPlayer, successfully flag: Bool) {
        lock.withLock { finishes.append(flag) }
    }

    nonisolated func audioPlayerDecodeErrorDidOccur(_ player: AVAudioPlayer, error: (any Error)?) {
        lock.withLock { errors.append(error.map { "\($0)" } ?? "nil") }
    }
}

/// Files the player tests play, made by ffmpeg (an independent encoder) and sox.
enum PlayerFixtures {
    static func ffmpeg(_ arguments: [String]) throws {
        try runTool("ffmpeg", ["-nostdin", "-loglevel", "error", "-y"] + arguments, in: FileManager.default.temporaryDirectory)
    }

    /// A sine of `frequency` Hz for `seconds` at `amplitude` (of full scale), mono, 48 kHz.
    static func tone(_ url: URL, frequency: Double = 440, seconds: Double, amplitude: Double = 0.5, codec: [String] = []) throws {
        let expr = "\(amplitude)*sin(2*PI*\(frequency)*t)"
        try ffmpeg(["-f", "lavfi", "-i", "aevalsrc=\(expr):s=48000:d=\(seconds)"] + codec + [url.path])
    }
}

/// AVAudioPlayer on the private server: it sounds, loops, starts at a host time, pauses for a
/// call and plays on when its device goes; `currentTime` reads never wait for a decode. The rest
/// is VirtualAVAudioPlayerTests', exact on the virtual clock.
final class AVAudioPlayerTests: XCTestCase {
    var dir: URL!
    var server: PrivatePulseServer!

    override func setUpWithError() throws {
        server = try TestSound.server()
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("openavf-player-\(getpid())-\(UUID().uuidString.prefix(6))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: dir) }

    /// Starts a stereo capture of the speaker, runs `body`, waits until `done` holds, and returns
    /// the captured left and right channels.
    func capture(timeout: Double = 10, _ body: () throws -> Void, until done: () -> Bool) throws -> (left: [Float], right: [Float]) {
        let capture = try SignalCapture(server: server, device: "speaker.monitor", channels: 2)
        try body()
        if !waitUntil(timeout: timeout, done) {
            // What the server says of the streams, for whoever reads the failure.
            XCTFail("playback did not finish within \(timeout) s; the server's streams:\n\((try? server.pactl(["list", "sink-inputs"])) ?? "")")
        }
        try capture.waitFor(frames: capture.frameCount + 4800, timeout: 5)
        let heard = capture.stop()
        return (heard[0], heard[1])
    }

    /// The stretch from the first to the last sample above `threshold`.
    func sounding(_ x: [Float], threshold: Float = 0.05) throws -> ArraySlice<Float> {
        let start = try XCTUnwrap(SignalAnalysis.onset(x, threshold: threshold), "nothing was heard")
        let end = try XCTUnwrap(SignalAnalysis.offset(x, threshold: threshold))
        return x[start...end]
    }

    /// An MP3 with one loop plays on the server: twice its length, the loop's join without a gap
    /// longer than three server periods, the tone at its pitch, one successful end. (Lengths to
    /// the frame, seeks, M4A, volume, pan, rate, fades, meters and decode errors are
    /// VirtualAVAudioPlayerTests', on the virtual clock.)
    func testAnMP3PlaysAndLoopsOnTheServer() throws {
        let url = dir.appendingPathComponent("tone.mp3")
        try PlayerFixtures.tone(url, seconds: 2, codec: ["-c:a", "libmp3lame", "-b:a", "128k"])
        let player = try AVAudioPlayer(contentsOf: url)
        let log = PlayerDelegateLog()
        player.delegate = log
        player.numberOfLoops = 1
        let heard = try capture({ XCTAssertTrue(player.play()) }, until: { log.finished.count == 1 })
        let looped = try sounding(heard.left)
        XCTAssertEqual(Double(looped.count) / 48000, 4.0, accuracy: 0.05, "with one loop")
        XCTAssertLessThanOrEqual(SignalAnalysis.longestGap(looped, threshold: 0.002), TestSound.gapTolerance, "a gap at the loop")
        XCTAssertEqual(SignalAnalysis.frequency(looped, sampleRate: 48000), 440, accuracy: 2)
        XCTAssertEqual(log.finished, [true])
        XCTAssertEqual(log.decodeErrors, [])
    }

    /// Reading ``AVAudioPlayer/currentTime`` never waits for a decode: the player decodes on the
    /// queue's thread without the lock property reads take. An MP3 looping at rate 1.5 (decoding,
    /// a decoder restart at every loop, and the time-pitch processor) is read every 0.2 ms for 2 s;
    /// at most two reads may take 1 ms or more. Reads the scheduler preempted (an involuntary
    /// context switch of the reading thread during the read) say nothing about the code path and
    /// are left out; a read that waits for a lock switches voluntarily, and counts.
    ///
    /// A decode under the lock reads take (about 10–14 ms) would make the read that meets it
    /// wait: one slow read per overlapping decode, of the 60 the 2 s hold, so dozens. A lone slow
    /// read (a few ms) is not that: most likely the state lock's holder, which only copies the
    /// state, preempted while holding it on a 2-core machine. Such a read is rare; a decode under
    /// the lock is not.
    func testCurrentTimeReadsNeverWaitForADecode() throws {
        let url = dir.appendingPathComponent("loop.mp3")
        try PlayerFixtures.ffmpeg([
            "-f", "lavfi", "-i", "aevalsrc=0.5*sin(2*PI*440*t)|0.5*sin(2*PI*660*t):s=48000:d=0.5",
            "-c:a", "libmp3lame", "-b:a", "192k", url.path,
        ])
        let player = try AVAudioPlayer(contentsOf: url)
        player.enableRate = true
        player.rate = 1.5
        player.numberOfLoops = -1
        XCTAssertTrue(player.play())
        defer { player.stop() }

        func involuntarySwitches() -> Int {
            var usage = rusage()
            // RUSAGE_THREAD, which Glibc's header names only under _GNU_SOURCE.
            getrusage(__rusage_who_t(1), &usage)
            return usage.ru_nivcsw
        }
        var worst: UInt64 = 0
        var slow: [Double] = []
        var reads = 0
        var preempted = 0
        var latest = 0.0
        let end = DispatchTime.now().uptimeNanoseconds + 2_000_000_000
        while DispatchTime.now().uptimeNanoseconds < end {
            let switches = involuntarySwitches()
            let before = DispatchTime.now().uptimeNanoseconds
            latest = player.currentTime
            let took = DispatchTime.now().uptimeNanoseconds - before
            if involuntarySwitches() != switches {
                preempted += 1
            } else {
                worst = max(worst, took)
                if took >= 1_000_000 { slow.append(Double(took) / 1e6) }
                reads += 1
            }
            usleep(200)
        }
        XCTAssertTrue(player.isPlaying)
        XCTAssertGreaterThan(reads, 1000, "too few reads were not preempted (\(preempted) were)")
        XCTAssertGreaterThanOrEqual(latest, 0)
        XCTAssertLessThan(latest, 0.5 + 0.001, "the position wraps at each loop")
        XCTAssertLessThanOrEqual(slow.count, 2, "reads of currentTime of 1 ms or more, of \(reads) (ms): \(slow)")
        print("currentTime: the slowest of \(reads) reads \(Double(worst) / 1e6) ms; \(slow.count) of 1 ms or more")
    }

    /// `play(atTime: deviceCurrentTime + 0.5)`: the first sound reaches the sink 0.5 s after the
    /// call, on the server's clock.
    func testPlayAtTimeIsHeardThen() throws {
        let click = dir.appendingPathComponent("a1000.wav")
        try PlayerFixtures.tone(click, frequency: 1000, seconds: 0.2)
        let watch = try OnsetWatch()
        defer { watch.dispose() }
        let scheduled = try AVAudioPlayer(contentsOf: click)
        XCTAssertTrue(scheduled.prepareToPlay())
        let called = scheduled.deviceCurrentTime
        watch.arm(at: UInt64(called * 1e9))
        XCTAssertTrue(scheduled.play(atTime: called + 0.5))
        let delay = try XCTUnwrap(watch.wait(timeout: 3), "the scheduled player was not heard")
        XCTAssertEqual(delay / 1000, 0.5, accuracy: 0.02, "play(atTime: deviceCurrentTime + 0.5)")
        scheduled.stop()
    }

    func testAnInterruptionPausesWithoutFinishingAndPlayResumes() throws {
        try activateSession(.playback, mode: .default)
        let url = dir.appendingPathComponent("long.wav")
        try PlayerFixtures.tone(url, seconds: 5)
        let player = try AVAudioPlayer(contentsOf: url)
        let log = PlayerDelegateLog()
        player.delegate = log
        let interruptions = NotificationLog(AVAudioSession.interruptionNotification)
        XCTAssertTrue(player.play())
        XCTAssertTrue(waitUntil(timeout: 3) { player.currentTime >= 0.3 })

        // A call: another client's phone stream for one second.
        let call = try SignalPlayer(server: server, device: "speaker", samples: [Float](repeating: 0.001, count: 48000), sampleRate: 48000,
                                    properties: ["media.role": "phone"])
        XCTAssertTrue(waitUntil(timeout: 2) { !player.isPlaying }, "the interruption pauses the player")
        let at = player.currentTime
        call.waitUntilDone()
        XCTAssertTrue(waitUntil(timeout: 3) { interruptions.all.count >= 2 }, "the interruption ends")
        XCTAssertEqual(player.currentTime, at, accuracy: 0.01, "paused where it was")
        XCTAssertEqual(log.finished, [], "an interruption is not the end")

        XCTAssertTrue(player.play(), "resumes as an app does after .ended")
        XCTAssertTrue(waitUntil(timeout: 3) { player.currentTime >= at + 0.3 })
        player.stop()
        XCTAssertEqual(log.finished, [], "nor is stop")
    }

    func testHeadphonesUnpluggedKeepThePlayerPlaying() throws {
        let url = dir.appendingPathComponent("long.wav")
        try PlayerFixtures.tone(url, seconds: 6)
        let module = try server.pactl(["load-module", "module-null-sink", "sink_name=phones", "sink_properties=device.form_factor=headphone"])
            .trimmingCharacters(in: .whitespacesAndNewlines)
        _ = try server.pactl(["set-default-sink", "phones"])
        defer { _ = try? server.pactl(["set-default-sink", "speaker"]) }
        let player = try AVAudioPlayer(contentsOf: url)
        let log = PlayerDelegateLog()
        player.delegate = log
        XCTAssertTrue(player.play())
        XCTAssertTrue(waitUntil(timeout: 3) { player.currentTime >= 0.3 })
        // Unplugged: the sink goes away and the server moves the stream to the speaker.
        let capture = try SignalCapture(server: server, device: "speaker.monitor")
        _ = try server.pactl(["unload-module", module])
        let at = player.currentTime
        XCTAssertTrue(waitUntil(timeout: 3) { player.currentTime >= at + 0.5 }, "playback goes on")
        try capture.waitFor(frames: capture.frameCount + 9600, timeout: 5)
        let heard = capture.stop()[0].suffix(9600)
        XCTAssertGreaterThan(SignalAnalysis.rmsDB(heard), -15, "the tone is on the speaker now")
        XCTAssertEqual(SignalAnalysis.frequency(heard, sampleRate: 48000), 440, accuracy: 3)
        XCTAssertTrue(player.isPlaying)
        XCTAssertEqual(log.finished, [])
        player.stop()
    }
}
