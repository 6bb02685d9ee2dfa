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

/// AVAudioPlayer on the private server: what reaches the sink, measured.
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

    func testDurationEndLoopsAndSeekOnMP3AndM4A() throws {
        for (name, codec) in [("tone.mp3", ["-c:a", "libmp3lame", "-b:a", "128k"]), ("tone.m4a", ["-c:a", "aac", "-b:a", "128k"])] {
            let url = dir.appendingPathComponent(name)
            try PlayerFixtures.tone(url, seconds: 2, codec: codec)
            let player = try AVAudioPlayer(contentsOf: url)
            XCTAssertEqual(player.duration, 2, accuracy: 0.01, "\(name) duration")
            XCTAssertEqual(player.numberOfChannels, 1)
            XCTAssertEqual(player.url, url)
            let log = PlayerDelegateLog()
            player.delegate = log

            // To the end, once.
            var heard = try capture({ XCTAssertTrue(player.play()) }, until: { log.finished.count == 1 })
            XCTAssertEqual(Double(try sounding(heard.left).count) / 48000, 2, accuracy: 0.03, "\(name) played length")
            XCTAssertEqual(log.finished, [true])
            XCTAssertFalse(player.isPlaying)
            XCTAssertEqual(player.currentTime, 0, "back at the start after finishing")

            // One loop: twice.
            player.numberOfLoops = 1
            heard = try capture({ XCTAssertTrue(player.play()) }, until: { log.finished.count == 2 })
            let looped = try sounding(heard.left)
            XCTAssertEqual(Double(looped.count) / 48000, 4.0, accuracy: 0.05, "\(name) with one loop")
            XCTAssertLessThanOrEqual(SignalAnalysis.longestGap(looped, threshold: 0.002), TestSound.gapTolerance, "\(name): a gap at the loop")
            player.numberOfLoops = 0

            // Seek to 1.0 s: 1.0 s left.
            player.currentTime = 1.0
            XCTAssertEqual(player.currentTime, 1.0, accuracy: 0.001)
            heard = try capture({ XCTAssertTrue(player.play()) }, until: { log.finished.count == 3 })
            XCTAssertEqual(Double(try sounding(heard.left).count) / 48000, 1.0, accuracy: 0.03, "\(name) after seeking to 1.0 s")
            XCTAssertEqual(log.finished, [true, true, true], "once per play, always with success")
            XCTAssertEqual(log.decodeErrors, [])
        }
    }

    func testSeekWhilePlayingPauseAndStop() throws {
        let url = dir.appendingPathComponent("long.wav")
        try PlayerFixtures.tone(url, seconds: 3)
        let player = try AVAudioPlayer(contentsOf: url)
        let log = PlayerDelegateLog()
        player.delegate = log
        let heard = try capture({
            XCTAssertTrue(player.prepareToPlay())
            XCTAssertTrue(player.play())
            XCTAssertTrue(waitUntil(timeout: 3) { player.currentTime >= 0.5 })
            if self.server.kind == .pulseaudio {
                // The player's long buffer is asked for in thirds, which leaves the sink its
                // latency (the keepers' 2.5 ms); halves forced the sink's 0.5 ms minimum.
                XCTAssertGreaterThanOrEqual(try self.server.configuredLatency("sinks", "speaker"), 0.002, "the sink runs at its minimum latency")
            }
            player.currentTime = 2.0  // 1 s left
            XCTAssertEqual(player.currentTime, 2.0, accuracy: 0.05)
            XCTAssertTrue(player.isPlaying)
        }, until: { log.finished.count == 1 })
        let played = Double(try sounding(heard.left).count) / 48000
        // The seek itself takes a few ms; silence the server held ahead of the new audio (one
        // server buffer, 50–100 ms) would show here. PipeWire's graph plays out what it already
        // took from the stream before the flush (up to three 1024-frame cycles: 64 ms more).
        let extra = server.kind == .pipewire ? 3 * 1024.0 / 48000 : 0
        XCTAssertEqual(played, 1.5 + extra / 2, accuracy: 0.035 + Double(TestSound.gapTolerance) / 48000 + extra / 2, "0.5 s, then the last second after the seek, with no gap")

        // Pause keeps the position; stop keeps it too and never reports finishing.
        XCTAssertTrue(player.play())
        XCTAssertTrue(waitUntil(timeout: 3) { player.currentTime >= 0.4 })
        player.pause()
        XCTAssertFalse(player.isPlaying)
        let paused = player.currentTime
        XCTAssertEqual(player.currentTime, paused, accuracy: 0.001, "the position holds while paused")
        XCTAssertTrue(player.play())
        XCTAssertTrue(waitUntil(timeout: 3) { player.currentTime >= paused + 0.2 })
        player.stop()
        let stopped = player.currentTime
        XCTAssertGreaterThan(stopped, paused + 0.2)
        XCTAssertFalse(player.isPlaying)
        XCTAssertEqual(log.finished.count, 1, "stop does not report finishing")
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

    func testScheduledStartVolumePanAndRate() throws {
        let url = dir.appendingPathComponent("a440.wav")
        try PlayerFixtures.tone(url, seconds: 1)
        let click = dir.appendingPathComponent("a1000.wav")
        try PlayerFixtures.tone(click, frequency: 1000, seconds: 0.2)

        // Scheduled: the first sound reaches the sink 0.5 s after play(atTime: now + 0.5).
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

        // Volume 0.5: −6.02 dB against volume 1.
        let player = try AVAudioPlayer(contentsOf: url)
        let log = PlayerDelegateLog()
        player.delegate = log
        var heard = try capture({ XCTAssertTrue(player.play()) }, until: { log.finished.count == 1 })
        let full = try sounding(heard.left)
        player.volume = 0.5
        heard = try capture({ XCTAssertTrue(player.play()) }, until: { log.finished.count == 2 })
        let half = try sounding(heard.left, threshold: 0.025)
        let mid = { (x: ArraySlice<Float>) in x.dropFirst(4800).dropLast(4800) }
        XCTAssertEqual(SignalAnalysis.rmsDB(mid(half)) - SignalAnalysis.rmsDB(mid(full)), -6.02, accuracy: 0.2, "volume 0.5")
        player.volume = 1

        // Pan −1: the right channel stays below −40 dB.
        player.pan = -1
        heard = try capture({ XCTAssertTrue(player.play()) }, until: { log.finished.count == 3 })
        let left = try sounding(heard.left)
        let right = heard.right[left.indices]
        XCTAssertLessThan(SignalAnalysis.rmsDB(right), -40, "right channel with pan −1")
        XCTAssertGreaterThan(SignalAnalysis.rmsDB(mid(left)), -10, "left channel with pan −1")
        player.pan = 0

        // Rate 2 with enableRate: half the time, same pitch.
        player.enableRate = true
        player.rate = 2
        heard = try capture({ XCTAssertTrue(player.play()) }, until: { log.finished.count == 4 })
        let fast = try sounding(heard.left)
        XCTAssertEqual(Double(fast.count) / 48000, 0.5, accuracy: 0.03, "rate 2 halves the time")
        XCTAssertEqual(SignalAnalysis.frequency(mid(fast), sampleRate: 48000), 440, accuracy: 3, "pitch kept")
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

    func testVolumeFadesLinearlyOverTheGivenDuration() throws {
        let url = dir.appendingPathComponent("fade.wav")
        try PlayerFixtures.tone(url, seconds: 2)
        let player = try AVAudioPlayer(contentsOf: url)
        let log = PlayerDelegateLog()
        player.delegate = log
        let heard = try capture({
            XCTAssertTrue(player.play())
            XCTAssertTrue(waitUntil(timeout: 3) { player.currentTime >= 0.5 })
            player.setVolume(0, fadeDuration: 0.5)
            XCTAssertEqual(player.volume, 0)
        }, until: { log.finished.count == 1 })
        // The envelope in 5 ms windows: from 90 % to 10 % of full level takes 0.4 s of a linear 0.5 s fade.
        let start = try XCTUnwrap(SignalAnalysis.onset(heard.left, threshold: 0.05))
        let windows = stride(from: start, to: heard.left.count - 240, by: 240).map { i in heard.left[i..<(i + 240)].map { abs($0) }.max() ?? 0 }
        let full = windows[10..<50].max() ?? 0
        let high = try XCTUnwrap(windows.lastIndex { $0 > 0.9 * full })
        // The last window above 10 %, not the first below: a window the server left silent
        // inside the fade (a dropout, its own matter) does not end the fade early.
        let low = try XCTUnwrap(windows.lastIndex { $0 >= 0.1 * full }) + 1
        let dips = windows[high..<low].indices.filter { windows[$0] < 0.1 * full }
        if !dips.isEmpty || abs(Double(low - high) * 0.005 - 0.4) > 0.03 {
            print("fade: envelope by 25 ms from 90 % (\(high)) to 10 % (\(low)): "
                + stride(from: high, to: min(low + 5, windows.count), by: 5).map { String(format: "%.2f", windows[$0] / full) }.joined(separator: " ")
                + "; windows under 10 % inside it: \(dips)")
        }
        XCTAssertEqual(Double(low - high) * 0.005, 0.4, accuracy: 0.03, "the fade's slope")
        XCTAssertLessThan(SignalAnalysis.rmsDB(heard.left[(start + (low + 40) * 240)...].prefix(24000)), -60, "silent after the fade")
    }

    func testMetersMatchSoxStats() throws {
        guard let sox = PrivatePulseServer.which("sox") else { throw PrivatePulseServer.Failure(description: "sox is not installed") }
        let sine = dir.appendingPathComponent("fullscale.wav")
        let quiet = dir.appendingPathComponent("quiet.wav")
        let silence = dir.appendingPathComponent("silence.wav")
        // A full-scale sine (16-bit full scale is 32767/32768) and one at −20 dB.
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
            XCTAssertTrue(waitUntil(timeout: 3) { player.currentTime >= 0.5 })
            var values: [(Float, Float)] = []
            for _ in 0..<5 {
                let before = player.currentTime
                XCTAssertTrue(waitUntil(timeout: 2) { player.currentTime >= before + 0.1 })
                player.updateMeters()
                values.append((player.averagePower(forChannel: 0), player.peakPower(forChannel: 0)))
            }
            return values.last!
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

    func testBadDataThrowsAndBrokenDataReportsADecodeError() throws {
        // Not audio at all: init throws, with Apple's status in NSOSStatusErrorDomain.
        let junk = dir.appendingPathComponent("junk.m4a")
        try Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 7919 &+ 13) }).write(to: junk)
        XCTAssertThrowsError(try AVAudioPlayer(contentsOf: junk)) { error in
            XCTAssertEqual((error as NSError).domain, NSOSStatusErrorDomain)
        }
        XCTAssertThrowsError(try AVAudioPlayer(data: Data()))
        XCTAssertThrowsError(try AVAudioPlayer(contentsOf: dir.appendingPathComponent("missing.wav")))

        // In-memory data plays like the file.
        let url = dir.appendingPathComponent("tone.m4a")
        try PlayerFixtures.tone(url, seconds: 1, codec: ["-c:a", "aac", "-b:a", "128k"])
        let fromData = try AVAudioPlayer(data: try Data(contentsOf: url))
        XCTAssertNil(fromData.url)
        XCTAssertEqual(fromData.duration, 1, accuracy: 0.01)

        // A file that breaks part way: the AAC packets of its second half are overwritten.
        var bytes = try Data(contentsOf: url)
        let player0 = try AVAudioPlayer(data: bytes)
        XCTAssertEqual(player0.duration, 1, accuracy: 0.01)
        let mdat = try XCTUnwrap(bytes.range(of: Data("mdat".utf8)))
        let body = mdat.upperBound..<bytes.count
        let from = body.lowerBound + body.count / 2
        for i in from..<min(from + 4000, bytes.count) { bytes[i] = 0xFF }
        let broken = try AVAudioPlayer(data: bytes)
        let log = PlayerDelegateLog()
        broken.delegate = log
        XCTAssertTrue(broken.play())
        XCTAssertTrue(waitUntil(timeout: 5) { !log.finished.isEmpty }, "playback stops")
        XCTAssertEqual(log.decodeErrors.count, 1, "audioPlayerDecodeErrorDidOccur")
        XCTAssertEqual(log.finished, [false], "finished unsuccessfully")
    }
}
