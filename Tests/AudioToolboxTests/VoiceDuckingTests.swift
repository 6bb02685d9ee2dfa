import AudioTestSupport
import AudioToolbox
import Foundation
import XCTest

/// A voice-processing unit ducks other clients' playback while it runs
/// (`kAUVoiceIOProperty_OtherAudioDuckingConfiguration`), measured on the speaker's monitor: a
/// 440 Hz "music" stream of another client, its level before, during and after.
final class VoiceDuckingTests: XCTestCase {
    private static let size = UInt32(MemoryLayout<AUVoiceIOOtherAudioDuckingConfiguration>.size)

    private func configure(_ call: VoiceUnitCall, advanced: Bool, _ level: AUVoiceIOOtherAudioDuckingLevel) -> OSStatus {
        var value = AUVoiceIOOtherAudioDuckingConfiguration(mEnableAdvancedDucking: DarwinBoolean(advanced), mDuckingLevel: level)
        return AudioUnitSetProperty(call.unit, kAUVoiceIOProperty_OtherAudioDuckingConfiguration, kAudioUnitScope_Global, 0, &value, Self.size)
    }

    /// Another client's music on the test server's speaker, and a way to read its level there.
    private struct Music {
        let capture: SignalCapture
        let player: SignalPlayer
        /// The music's level (dBFS at 440 Hz) over the latest 250 ms, `frames` from now.
        func level(after frames: Int = 4800) throws -> Double {
            let mark = capture.frameCount
            try capture.waitFor(frames: mark + max(frames, 2400), timeout: 5)
            return SignalAnalysis.medianDB(capture.samples()[0].suffix(12000), window: 2400, frequency: 440)
        }
        /// Waits (at most `timeout` s) until the level over the latest 50 ms is `expected` ± 1.5 dB.
        func settles(at expected: Double, timeout: Double) -> Bool {
            waitUntil(timeout: timeout) {
                let mark = capture.frameCount
                guard (try? capture.waitFor(frames: mark + 2400, timeout: 1)) != nil else { return false }
                return abs(SignalAnalysis.toneDB(capture.samples()[0].suffix(2400), frequency: 440, sampleRate: 48000) - expected) < 1.5
            }
        }
        func stop() {
            player.stop()
            _ = capture.stop()
        }
    }

    private func music(_ server: PrivatePulseServer, seconds: Double) throws -> (Music, Double) {
        let music = try song(server, seconds: seconds)
        XCTAssertTrue(waitUntil(timeout: 3) { (try? music.level()) ?? -200 > -20 }, "the music plays")
        return (music, try music.level(after: 9600))
    }

    /// Another client's music stream (role `music`), and its capture, at whatever level it starts.
    private func song(_ server: PrivatePulseServer, seconds: Double) throws -> Music {
        let capture = try SignalCapture(server: server, device: "speaker.monitor")
        let tone = SignalAnalysis.sine(frequency: 440, sampleRate: 48000, seconds: seconds, amplitude: 0.3)
        let player = try SignalPlayer(
            server: server, device: "speaker", samples: tone, sampleRate: 48000, properties: ["media.role": "music"], latencyMsec: 100)
        return Music(capture: capture, player: player)
    }

    /// Another client's music (20 s), ducked at the default level by a running voice unit's call:
    /// the music, its level before, the call, and the ducked level. The caller stops both.
    private func musicDuckedByACall(_ server: PrivatePulseServer) throws -> (Music, Double, VoiceUnitCall, Double) {
        let (music, before) = try music(server, seconds: 20)
        let call: VoiceUnitCall
        do {
            call = try VoiceUnitCall(far: [], recordSeconds: 2)
            XCTAssertEqual(configure(call, advanced: false, .default), noErr)
            try call.start()
        } catch {
            music.stop()
            throw error
        }
        let ducked = before + 60 * log10(0.2)
        XCTAssertTrue(music.settles(at: ducked, timeout: 3), "not ducked while the unit runs")
        return (music, before, call, ducked)
    }

    /// Ducked by the configured level for as long as the unit runs, the level changed while it
    /// runs, the deepest asker winning while the session ducks too, and the music back when the
    /// unit stops.
    func testTheUnitDucksOthersByItsLevelWhileItRuns() throws {
        let server = try TestSound.server()
        let (music, before) = try music(server, seconds: 20)
        defer { music.stop() }
        let call = try VoiceUnitCall(far: [], recordSeconds: 2)
        var read = AUVoiceIOOtherAudioDuckingConfiguration(mEnableAdvancedDucking: true, mDuckingLevel: .max)
        var size = Self.size
        XCTAssertEqual(AudioUnitGetProperty(call.unit, kAUVoiceIOProperty_OtherAudioDuckingConfiguration, kAudioUnitScope_Global, 0, &read, &size), noErr)
        XCTAssertEqual(read, AUVoiceIOOtherAudioDuckingConfiguration(), "Apple's default: no advanced ducking, the default level")
        XCTAssertEqual(configure(call, advanced: false, .mid), noErr)
        XCTAssertEqual(AudioUnitGetProperty(call.unit, kAUVoiceIOProperty_OtherAudioDuckingConfiguration, kAudioUnitScope_Global, 0, &read, &size), noErr)
        XCTAssertEqual(read.mDuckingLevel, .mid)
        XCTAssertEqual(AudioUnitSetProperty(call.unit, kAUVoiceIOProperty_OtherAudioDuckingConfiguration, kAudioUnitScope_Global, 0, &read, 4), kAudio_ParamError)
        XCTAssertEqual(try music.level(after: 4800), before, accuracy: 0.5, "ducked before the unit runs")

        try call.start()
        defer { call.stop() }
        XCTAssertTrue(music.settles(at: before - 20, timeout: 3), "not ducked by 20 dB (mid) while the unit runs")
        let mid = try music.level(after: 9600) - before
        XCTAssertEqual(configure(call, advanced: false, .min), noErr)
        XCTAssertTrue(music.settles(at: before - 10, timeout: 3), "not ducked by 10 dB (min) after the change")
        let min = try music.level(after: 9600) - before
        XCTAssertEqual(configure(call, advanced: false, .default), noErr)
        let full = 60 * log10(0.2)
        XCTAssertTrue(music.settles(at: before + full, timeout: 3), "not ducked to the session's level (default)")
        let deflt = try music.level(after: 9600) - before
        call.stop()
        XCTAssertTrue(music.settles(at: before, timeout: 1), "not back within 1 s of the unit's stop")
        print("music at \(before) dBFS, ducked by the unit: mid \(mid) dB, min \(min) dB, default \(deflt) dB")
        XCTAssertEqual(mid, -20, accuracy: 1.5)
        XCTAssertEqual(min, -10, accuracy: 1.5)
        XCTAssertEqual(deflt, full, accuracy: 1.5)
    }

    /// A music stream that ends while the unit ducks it leaves no trace: the next music stream
    /// starts at the music's own level. PipeWire's session manager remembers a stream's last
    /// volume by its role and starts the next stream of that role at it; the library sets that
    /// memory back when ducking ends. Without that, every later song played at −42 dB. Only a
    /// real server has a session manager that remembers.
    func testMusicThatEndedWhileDuckedLeavesTheNextMusicAtItsLevel() throws {
        let server = try TestSound.server()
        let (music, before, call, _) = try musicDuckedByACall(server)
        defer {
            call.stop()
            music.stop()
        }
        music.player.stop()
        call.stop()
        // Started while ducking still ends, it is lowered and then put back: either way it settles
        // at the music's level.
        let next = try song(server, seconds: 5)
        defer { next.stop() }
        XCTAssertTrue(next.settles(at: before, timeout: 3), "the next music stream is not at the music's level: \((try? next.level()) ?? -200) dBFS against \(before)")
    }

    /// The next song, started during the call after the ducked one ended, starts at the lowered
    /// level the session manager remembers, stays ducked with the call, and is back at the
    /// music's level when the call ends; so is the song after it. Only a real server has a session
    /// manager that remembers.
    func testTheNextSongDuringACallComesBackWhenTheCallEnds() throws {
        let server = try TestSound.server()
        let (music, before, call, ducked) = try musicDuckedByACall(server)
        defer {
            call.stop()
            music.stop()
        }
        let streams = { ((try? server.pactl(["list", "short", "sink-inputs"])) ?? "").split(separator: "\n").count }
        let playing = streams()
        music.player.stop()
        XCTAssertTrue(waitUntil(timeout: 5) { streams() == playing - 1 }, "the first song's stream did not end")
        let next = try song(server, seconds: 10)
        defer { next.stop() }
        XCTAssertTrue(next.settles(at: ducked, timeout: 3), "the next song is not ducked with the call: \((try? next.level()) ?? -200) dBFS")
        call.stop()
        XCTAssertTrue(next.settles(at: before, timeout: 3), "the next song is not back when the call ends: \((try? next.level()) ?? -200) dBFS")
        next.player.stop()
        let third = try song(server, seconds: 5)
        defer { third.stop() }
        XCTAssertTrue(third.settles(at: before, timeout: 3), "the song after it does not start at the music's level: \((try? third.level()) ?? -200) dBFS")
    }

    /// Advanced ducking: the music stays up while the call is silent, goes down by the level
    /// while the far end plays (a 1 kHz tone: the detector listens for level, not words), and comes
    /// back up after it.
    func testAdvancedDuckingFollowsTheCallsVoice() throws {
        let server = try TestSound.server()
        let (music, before) = try music(server, seconds: 20)
        defer { music.stop() }
        let far = SignalAnalysis.sine(frequency: 1000, sampleRate: 48000, seconds: 2, amplitude: 0.1)
        let call = try VoiceUnitCall(far: far, recordSeconds: 8)
        XCTAssertEqual(configure(call, advanced: true, .mid), noErr)
        try call.start()
        defer { call.stop() }
        XCTAssertTrue(waitUntil(timeout: 5) { call.recordedFrames >= 48000 }, "no input")
        XCTAssertEqual(try music.level(after: 4800), before, accuracy: 1, "ducked while nobody speaks")
        call.playFarEnd()
        XCTAssertTrue(music.settles(at: before - 20, timeout: 2), "not ducked while the far end plays")
        XCTAssertTrue(waitUntil(timeout: 5) { call.playedFrames >= call.farCount }, "the far end did not play")
        XCTAssertTrue(music.settles(at: before, timeout: 2), "not back up after the far end")
    }
}
