@testable import AudioHAL
import AudioTestSupport
import AudioToolbox
import Foundation
import XCTest

/// The voice-processing I/O unit on the virtual backend, in a room the test makes: the microphone
/// hears what the unit played, `delay` later at `gain`, plus a talker and noise. Every sample of
/// the call is known, so each echo path (levels and delays the test server's loopback never has,
/// a path that moves, double talk) is measured the same way on every run and on any machine.
///
/// The criteria are floors that catch a broken canceller (one that cancels nothing reads about
/// 0 dB), not tuned figures: `openavf-bench --only voice` prints those. The real server's echo,
/// a stream the server moves and a late render are `VoiceIOUnitTests`'.
final class VirtualVoiceIOUnitTests: XCTestCase {
    private var environment: VirtualAudioSystem!
    private var virtual: VirtualBackend { environment.backend }
    private var dir: URL!
    /// The least echo loss that passes, dB (as `VoiceIOUnitTests.floor`).
    static let floor = VoiceIOUnitTests.floor
    static let rate = 48000

    override func setUpWithError() throws {
        environment = VirtualAudioSystem()
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("vpio-virtual-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    override func tearDown() {
        environment.restore()
        try? FileManager.default.removeItem(at: dir)
    }

    /// The room: the microphone hears the speaker (its first channel) through `paths` (each from
    /// its device frame on: the echo `delay` frames late at `gain`), plus `near` and `noise`
    /// (by device frame from the room's start). Runs on the thread that advances the clock.
    final class Room: @unchecked Sendable {
        struct Path {
            var from: Int
            var delay: Int
            var gain: Float
        }

        private let lock = NSLock()
        private var paths: [Path]
        private var near: [Float] = []
        private var nearFrom = 0
        private var noise: [Float] = []
        /// What the speaker played and what the microphone heard, by device frame.
        private(set) var speaker: [Float] = []
        private(set) var microphone: [Float] = []
        private var now = 0

        init(delay: Int, gain: Float) { paths = [Path(from: 0, delay: delay, gain: gain)] }

        /// From device frame `at` on, the echo comes `delay` frames late at `gain`.
        func move(at: Int, delay: Int, gain: Float) { lock.withLock { paths.append(Path(from: at, delay: delay, gain: gain)) } }
        /// A talker says `words` from device frame `at` on.
        func talk(_ words: [Float], at: Int) { lock.withLock { (near, nearFrom) = (words, at) } }
        func hiss(_ samples: [Float]) { lock.withLock { noise = samples } }
        var frame: Int { lock.withLock { now } }

        /// The microphone's next frames into `buffer` (`channels` interleaved, all alike).
        func hear(into buffer: UnsafeMutableBufferPointer<Float>, channels: Int) {
            lock.withLock {
                let frames = buffer.count / channels
                for i in 0..<frames {
                    let t = now + i
                    let path = paths.last { $0.from <= t }!
                    let source = t - path.delay
                    // The path is at least one advance long: the speaker's frame is known.
                    var x: Float = source >= 0 && source < speaker.count ? path.gain * speaker[source] : 0
                    if t >= nearFrom && t - nearFrom < near.count { x += near[t - nearFrom] }
                    if t < noise.count { x += noise[t] }
                    for c in 0..<channels { buffer[i * channels + c] = x }
                    if t == microphone.count { microphone.append(x) }
                }
            }
        }

        /// What the speaker played over one advance of `frames` (all output streams: the unit's).
        func played(_ rendered: [ObjectIdentifier: [Float]], frames: Int) {
            lock.withLock {
                var mono = [Float](repeating: 0, count: frames)
                for samples in rendered.values {
                    let channels = max(1, samples.count / frames)
                    for i in 0..<min(frames, samples.count / channels) { mono[i] += samples[i * channels] }
                }
                speaker += mono
                now += frames
            }
        }
    }

    /// A room set as the virtual microphone.
    private func room(delayMs: Int, gainDB: Double) -> Room {
        let room = Room(delay: Self.rate * delayMs / 1000, gain: Float(pow(10, gainDB / 20)))
        virtual.inputSignal = { format, _, buffer in room.hear(into: buffer, channels: format.channels) }
        return room
    }

    /// Advances the clock `seconds` in 10 ms steps, the speaker's sound going into the room.
    private func run(_ room: Room, seconds: Double) {
        let step = Self.rate / 100
        for _ in 0..<Int(seconds * 100) { room.played(virtual.advance(frames: step), frames: step) }
    }

    /// Speech at −20 dBFS, 48 kHz, its first `seconds`.
    private func speech(_ text: String, _ voice: String, seconds: Int) throws -> [Float] {
        let words = try VoiceSignals.speech(text, voice: voice, sampleRate: Self.rate, in: dir)
        return Array(VoiceSignals.scaled(words, toSpeechRMS: -20, sampleRate: Self.rate).prefix(Self.rate * seconds))
    }

    /// A call: the unit started, half a second of the room, then the far end played once and
    /// half a second more. Returns the recording and where the far end began in it; the room
    /// has what the microphone heard, frame for frame with the recording.
    private func call(_ far: [Float], in room: Room, agc: Bool = false, bypass: Bool = false, during: (() -> Void)? = nil) throws -> (recording: [Float], farStart: Int) {
        let call = try VoiceUnitCall(far: far, recordSeconds: far.count / Self.rate + 4)
        call.set(kAUVoiceIOProperty_VoiceProcessingEnableAGC, agc)
        call.set(kAUVoiceIOProperty_BypassVoiceProcessing, bypass)
        try call.start()
        defer { call.stop() }
        run(room, seconds: 0.5)
        call.playFarEnd()
        run(room, seconds: Double(far.count) / Double(Self.rate) + 0.5)
        let farStart = try XCTUnwrap(call.farStart, "the far end never played")
        XCTAssertEqual(call.playedFrames, far.count, "the whole far end played")
        return (call.recording, farStart)
    }

    /// The echo's loss (dB) over the microphone's loud 10 ms frames (within 30 dB of its loudest:
    /// where there is echo to lose) from `from` to `to` (frames of the recording).
    private func echoLoss(_ recording: [Float], _ microphone: [Float], from: Int, to: Int) -> Double {
        let span = from..<min(to, recording.count, microphone.count)
        let heard = Array(microphone[span]), sent = Array(recording[span])
        let mask = VoiceSignals.speaking(heard, sampleRate: Self.rate)
        return VoiceSignals.erle(input: heard, output: sent, where: mask, sampleRate: Self.rate, from: 0)
    }

    /// Far-end speech only, on echo paths of other lengths and levels than the test server's
    /// (20 to 150 ms, −24 to 0 dB): after 2 s the unit takes the echo down by at least the floor
    /// on each. Gain control off, as the echo's loss is measured.
    func testTheEchoIsCancelledOnPathsOfEveryLengthAndLevel() throws {
        let far = try speech(VoiceSignals.farText, VoiceSignals.farVoice, seconds: 6)
        for (delayMs, gainDB) in [(20, 0.0), (40, -6.0), (40, -18.0), (150, -24.0)] {
            let room = room(delayMs: delayMs, gainDB: gainDB)
            let (recording, farStart) = try call(far, in: room)
            let loss = echoLoss(recording, room.microphone, from: farStart + 2 * Self.rate, to: farStart + far.count)
            print("echo path \(delayMs) ms at \(gainDB) dB: loss \(String(format: "%.1f", loss)) dB")
            XCTAssertGreaterThanOrEqual(loss, Self.floor, "echo path \(delayMs) ms at \(gainDB) dB")
        }
    }

    /// The path moves at once, 3 s into the far end (40 ms at −6 dB to 90 ms at −10 dB, as when
    /// the sound goes to another speaker): the echo is cancelled again within 2 s.
    func testTheCancellerFollowsAPathThatMoves() throws {
        let far = try speech(VoiceSignals.farText, VoiceSignals.farVoice, seconds: 8)
        let room = room(delayMs: 40, gainDB: -6)
        let moveAt = Self.rate / 2 + 3 * Self.rate  // device frames: half a second of room, then 3 s of far end
        room.move(at: moveAt, delay: Self.rate * 90 / 1000, gain: Float(pow(10, -10.0 / 20)))
        let (recording, farStart) = try call(far, in: room)
        // The recording's frames are the microphone's: the move is at the same frame in both,
        // give or take the far end's start (checked: it began half a second in).
        XCTAssertEqual(Double(farStart), Double(Self.rate / 2), accuracy: Double(Self.rate) / 50)
        let before = echoLoss(recording, room.microphone, from: farStart + 2 * Self.rate, to: moveAt)
        let after = echoLoss(recording, room.microphone, from: moveAt + 2 * Self.rate, to: farStart + far.count)
        print("echo loss before the move \(String(format: "%.1f", before)) dB, from 2 s after it \(String(format: "%.1f", after)) dB")
        XCTAssertGreaterThanOrEqual(before, Self.floor, "before the move")
        XCTAssertGreaterThanOrEqual(after, Self.floor, "2 s after the move")
    }

    /// Double talk: a near talker comes through while the far end plays and its echo is
    /// cancelled, at about its own level (within 6 dB), with gain control on or off.
    func testANearTalkerComesThroughDoubleTalk() throws {
        let far = try speech(VoiceSignals.farText, VoiceSignals.farVoice, seconds: 7)
        let near = try speech(VoiceSignals.nearText, VoiceSignals.nearVoice, seconds: 3)
        for agc in [false, true] {
            let room = room(delayMs: 40, gainDB: -6)
            let nearAt = Self.rate / 2 + 3 * Self.rate
            room.talk(near, at: nearAt)
            let (recording, _) = try call(far, in: room, agc: agc)
            // The words are the talker's: what the unit sends follows them, a few ms late (its
            // own delay), found within 20 ms.
            let found = SignalAnalysis.align(Array(near.prefix(2 * Self.rate)), in: Array(recording[nearAt...]), maxLag: Self.rate / 50)
            XCTAssertGreaterThan(found.correlation, 0.7, "the near talker's words, gain control \(agc ? "on" : "off")")
            let mask = VoiceSignals.speaking(near, sampleRate: Self.rate)
            let span = (nearAt + found.lag)..<min(recording.count, nearAt + found.lag + near.count)
            let said = VoiceSignals.speechRMS(near, where: mask, sampleRate: Self.rate)
            let sent = VoiceSignals.speechRMS(Array(recording[span]), where: mask, sampleRate: Self.rate)
            print("double talk, gain control \(agc ? "on" : "off"): the near talker at \(String(format: "%.1f", sent - said)) dB of its level, "
                + "\(found.lag) frames late, correlation \(String(format: "%.2f", found.correlation))")
            XCTAssertEqual(sent, said, accuracy: 6, "the near talker's level through double talk, gain control \(agc ? "on" : "off")")
        }
    }

    /// Bypassed, the unit hands over the microphone sample for sample.
    func testBypassGivesTheMicrophoneBitForBit() throws {
        let far = try speech(VoiceSignals.farText, VoiceSignals.farVoice, seconds: 2)
        let room = room(delayMs: 40, gainDB: -6)
        room.hiss(VoiceSignals.noise(count: Self.rate * 4, dBFS: -50, seed: 7))
        let (recording, _) = try call(far, in: room, bypass: true)
        let heard = room.microphone
        XCTAssertGreaterThan(recording.count, Self.rate * 2)
        XCTAssertGreaterThanOrEqual(heard.count, recording.count, "the microphone fed every frame recorded")
        let differing = zip(recording, heard).filter { $0 != $1 }.count
        XCTAssertEqual(differing, 0, "of \(min(recording.count, heard.count)) samples, \(differing) differ from the microphone's")
    }
}
