import AVFAudio
import AudioToolbox
import AudioTestSupport
import Foundation
import XCTest

extension AudioSessionServerTests {
    /// The duck level: 20 % on the server's volume scale, which is cubic (−41.9 dB).
    static let duckDB = 20 * log10(pow(0.2, 3.0))

    /// Acceptance 5: `duckOthers` lowers another client's music stream by the server's duck level
    /// while the session is active, measured on the sink, and leaves this process's own playback
    /// alone; deactivation restores the music.
    func testDuckOthersLowersAnotherClientsMusic() throws {
        let server = try TestSound.server()
        let session = AVAudioSession.sharedInstance()
        let capture = try SignalCapture(server: server, device: "speaker.monitor")
        defer { _ = capture.stop() }
        let tone = SignalAnalysis.sine(frequency: 440, sampleRate: 48000, seconds: 8, amplitude: 0.3)
        let music = try SignalPlayer(
            server: server, device: "speaker", samples: tone, sampleRate: 48000, properties: ["media.role": "music"], latencyMsec: 100)
        defer { music.stop() }
        /// The 440 Hz music's and the 1 kHz own tone's levels over the latest 250 ms, `frames` from now.
        func levels(after frames: Int) throws -> (music: Double, own: Double) {
            let mark = capture.frameCount
            try capture.waitFor(frames: mark + max(frames, 12000), timeout: 5)
            let window = capture.samples()[0].suffix(12000)
            return (SignalAnalysis.medianDB(window, window: 2400, frequency: 440), SignalAnalysis.medianDB(window, window: 2400, frequency: 1000))
        }
        XCTAssertTrue(waitUntil(timeout: 3) { (try? levels(after: 4800).music) ?? -200 > -20 }, "the music plays")
        let before = try levels(after: 9600).music
        XCTAssertTrue(session.isOtherAudioPlaying)
        try session.setCategory(.playback, options: .duckOthers)
        try session.setActive(true)
        defer {
            // Even when an assertion fails midway: a session left ducking would duck later tests.
            try? session.setActive(false)
            try? session.setCategory(.soloAmbient)
        }
        let own = TonePlayer()
        try own.start()
        defer { own.stop() }
        let ducked = try levels(after: 14400)
        XCTAssertTrue(session.isOtherAudioPlaying, "the ducked music still plays")
        // Music that starts while the session ducks is ducked too (its 660 Hz, alone at first).
        let late = try SignalPlayer(
            server: server, device: "speaker", samples: SignalAnalysis.sine(frequency: 660, sampleRate: 48000, seconds: 3, amplitude: 0.3),
            sampleRate: 48000, properties: ["media.role": "music"], latencyMsec: 100)
        defer { late.stop() }
        XCTAssertTrue(
            waitUntil(timeout: 3) {
                let mark = capture.frameCount
                guard (try? capture.waitFor(frames: mark + 4800, timeout: 1)) != nil else { return false }
                let level = SignalAnalysis.medianDB(capture.samples()[0].suffix(4800), window: 2400, frequency: 660)
                return abs(level - (before + Self.duckDB)) < 1.5
            }, "music that starts while the session ducks is not ducked")
        late.stop()
        if server.kind == .pulseaudio {
            XCTAssertTrue(try server.pactl(["list", "modules", "short"]).contains("module-role-ducking"), "the library loaded the server's ducking module")
        }
        let deactivated = Date()
        try session.setActive(false)
        XCTAssertTrue(
            waitUntil(timeout: 1) {
                let mark = capture.frameCount
                guard (try? capture.waitFor(frames: mark + 2400, timeout: 1)) != nil else { return false }
                return abs(SignalAnalysis.toneDB(capture.samples()[0].suffix(2400), frequency: 440, sampleRate: 48000) - before) < 0.5
            }, "not restored within 1 s of deactivation")
        let restoredAfter = Date().timeIntervalSince(deactivated)
        let after = try levels(after: 12000).music
        XCTAssertEqual(ducked.music - before, Self.duckDB, accuracy: 1.5, "ducked by the server's duck level")
        XCTAssertEqual(ducked.own, 20 * log10(0.4 / 2.0.squareRoot()), accuracy: 1.5, "this process's own playback is not ducked")
        XCTAssertEqual(after, before, accuracy: 0.5, "restored when the session deactivates")
        print("music at \(before) dBFS, ducked \(ducked.music - before) dB, own tone at \(ducked.own) dBFS, restored to \(after) dBFS (seen \(String(format: "%.3f", restoredAfter)) s after deactivation)")
    }

    /// A process that ducks others and is killed (SIGKILL: no chance to undo anything) leaves the
    /// other clients at their own volume within 1 s: on PulseAudio the ducking is the server's,
    /// tied to the killed process's connection; on PipeWire the killed process's guard puts the
    /// volume back.
    func testDuckingEndsWhenTheDuckingProcessIsKilled() throws {
        try duckingEndsWhenThePeerIsKilled(mode: "duck")
    }

    /// The same for a process whose voice-processing unit ducks others (issue 14: "crash-safe as
    /// the session's ducking is").
    func testVoiceUnitDuckingEndsWhenItsProcessIsKilled() throws {
        try duckingEndsWhenThePeerIsKilled(mode: "voice")
    }

    private func duckingEndsWhenThePeerIsKilled(mode: String) throws {
        let server = try TestSound.server()
        let peer = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("openavf-sessionpeer").path
        guard FileManager.default.isExecutableFile(atPath: peer) else {
            return XCTFail("openavf-sessionpeer is not built beside the tests: run swift build --build-tests")
        }
        let capture = try SignalCapture(server: server, device: "speaker.monitor")
        defer { _ = capture.stop() }
        let tone = SignalAnalysis.sine(frequency: 440, sampleRate: 48000, seconds: 10, amplitude: 0.3)
        let music = try SignalPlayer(
            server: server, device: "speaker", samples: tone, sampleRate: 48000, properties: ["media.role": "music"], latencyMsec: 100)
        defer { music.stop() }
        /// The music's level over the latest 250 ms, `frames` from now.
        func level(after frames: Int) throws -> Double {
            let mark = capture.frameCount
            try capture.waitFor(frames: mark + max(frames, 12000), timeout: 5)
            return SignalAnalysis.medianDB(capture.samples()[0].suffix(12000), window: 2400, frequency: 440)
        }
        XCTAssertTrue(waitUntil(timeout: 3) { (try? level(after: 4800)) ?? -200 > -20 }, "the music plays")
        let before = try level(after: 9600)

        let output = FileManager.default.temporaryDirectory.appendingPathComponent("duckpeer-\(getpid()).out").path
        defer { unlink(output) }
        let child = try ChildProcess(peer, [mode, "30"], environment: server.environment, stdout: .file(output), stderr: .inherit)
        defer { child.terminate(SIGKILL) }
        XCTAssertTrue(
            waitUntil(timeout: 10) { ((try? String(contentsOfFile: output, encoding: .utf8)) ?? "").contains("active") }, "the peer's session did not activate")
        XCTAssertTrue(waitUntil(timeout: 3) { ((try? level(after: 2400)) ?? 0) < before + Self.duckDB + 3 }, "the peer does not duck the music")
        let ducked = try level(after: 9600)
        XCTAssertEqual(ducked - before, Self.duckDB, accuracy: 1.5, "ducked by the server's duck level")

        // SIGKILL; wait (at most 1 s) until the monitor's latest 20 ms are at the music's own level.
        let window = 960
        let killed = Date()
        kill(child.pid, SIGKILL)
        let back = waitUntil(timeout: 1) {
            let mark = capture.frameCount
            guard (try? capture.waitFor(frames: mark + window, timeout: 1)) != nil else { return false }
            return abs(SignalAnalysis.rmsDB(capture.samples()[0].suffix(window)) - before) < 1.5
        }
        let seen = Date().timeIntervalSince(killed)
        XCTAssertTrue(back, "other clients not back at their own volume within 1 s of SIGKILL")
        print("\(mode): music at \(before) dBFS, ducked \(ducked - before) dB; at its own level again on the monitor \(String(format: "%.3f", seen)) s after SIGKILL")
        XCTAssertEqual(try level(after: 9600), before, accuracy: 0.5, "and it stays there")
        XCTAssertEqual(child.wait(), 128 + SIGKILL)
    }
}
