import AudioGraph
import AudioTestSupport
import Foundation
import XCTest

/// The voice processor both libraries stand behind (issue 14), offline on the measurement
/// set-up's voices: deterministic, no server.
final class VoiceProcessorTests: XCTestCase {
    private var dir: URL!

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("voice-tests-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    override func tearDown() { try? FileManager.default.removeItem(at: dir) }

    /// Far-end speech only, its echo 40 ms later at −6 dB (and a reflection): after 2 s each
    /// library leaves the echo at least 30 dB down (issue 14's first line; the benchmark prints
    /// 38–48 dB), and the processor's frames are 10 ms.
    func testEachLibraryCancelsTheEchoOfFarEndSpeech() throws {
        let rate = 16000
        let far = VoiceSignals.scaled(
            try VoiceSignals.speech(VoiceSignals.farText, voice: VoiceSignals.farVoice, sampleRate: rate, in: dir), toSpeechRMS: -20, sampleRate: rate)
        var near = try VoiceSignals.speech(VoiceSignals.nearText, voice: VoiceSignals.nearVoice, sampleRate: rate, in: dir)
        var farEnd = far
        let length = max(farEnd.count, near.count)
        farEnd += [Float](repeating: 0, count: length - farEnd.count)
        near += [Float](repeating: 0, count: length - near.count)
        let echo = VoiceSignals.echo(of: farEnd, sampleRate: rate)
        let microphone = zip(echo, VoiceSignals.noise(count: echo.count, dBFS: -70, seed: 1)).map { $0 + $1 }
        let echoing = VoiceSignals.speaking(echo, sampleRate: rate)
        for library in VoiceProcessor.Library.allCases {
            let processor = try XCTUnwrap(
                VoiceProcessor(library: library, sampleRate: rate, stages: .init(echoCancellation: true, noiseSuppression: true, gainControl: false)))
            XCTAssertEqual(processor.frameLength, 160)
            let out = VoiceSignals.process(processor, near: microphone, far: farEnd)
            let erle = VoiceSignals.erle(input: microphone, output: out, where: echoing, sampleRate: rate, from: 200)
            XCTAssertGreaterThanOrEqual(erle, 30, "\(library): the echo is \(erle) dB down")
            // Without the far end, the same stages cancel little: the loss came from the reference.
            let blind = try XCTUnwrap(VoiceProcessor(library: library, sampleRate: rate, stages: .init(echoCancellation: true, noiseSuppression: true, gainControl: false)))
            let kept = VoiceSignals.erle(input: microphone, output: VoiceSignals.process(blind, near: microphone, far: nil), where: echoing, sampleRate: rate, from: 200)
            XCTAssertLessThan(kept, 10, "\(library) removed \(kept) dB of an echo it had no reference for")
            // A near talker over the echo comes through: not cancelled with it. (The benchmark
            // prints each library's figures against the issue's; this holds what both reach.)
            let both = try XCTUnwrap(VoiceProcessor(library: library, sampleRate: rate, stages: .init(echoCancellation: true, noiseSuppression: true, gainControl: false)))
            let talker = VoiceSignals.scaled(near, toSpeechRMS: -26, sampleRate: rate)
            let talking = VoiceSignals.speaking(talker, sampleRate: rate)
            let heard = VoiceSignals.process(both, near: zip(microphone, talker).map { $0 + $1 }, far: farEnd)
            let alone = VoiceSignals.process(
                try XCTUnwrap(VoiceProcessor(library: library, sampleRate: rate, stages: .init(echoCancellation: true, noiseSuppression: true, gainControl: false))),
                near: zip(VoiceSignals.noise(count: talker.count, dBFS: -70, seed: 1), talker).map { $0 + $1 }, far: nil)
            let lag = VoiceSignals.latency(of: alone, clean: talker, sampleRate: rate)
            let correlation = VoiceSignals.correlation(heard, talker, where: talking, sampleRate: rate, from: 200, lag: lag)
            XCTAssertGreaterThan(correlation, 0.5, "\(library): the near talker's correlation through double talk")
            let level = VoiceSignals.speechRMS(heard, where: talking, sampleRate: rate, from: 200) - VoiceSignals.speechRMS(alone, where: talking, sampleRate: rate, from: 200)
            XCTAssertGreaterThan(level, -10, "\(library): the near talker is \(level) dB down through double talk")
        }
    }

    /// speex, the library the voice-processing unit runs (chosen by these figures; the
    /// benchmark prints both libraries'), meets issue 14's lines 1–4 on the set-up's signals at
    /// a call's 16 kHz and the output's 48 kHz.
    func testTheChosenLibraryMeetsTheIssuesLines() throws {
        for rate in [16000, 48000] {
            let f = try VoiceSignals.figures(.speex, rate: rate, in: dir)
            print("\(rate) Hz: \(f)")
            XCTAssertGreaterThanOrEqual(f.erle, 30, "\(rate) Hz: echo loss")
            XCTAssertGreaterThanOrEqual(f.doubleTalkCorrelation, 0.9, "\(rate) Hz: the near voice through double talk")
            XCTAssertGreaterThanOrEqual(f.doubleTalkLevel, -3, "\(rate) Hz: the near voice's level through double talk")
            XCTAssertGreaterThanOrEqual(f.noiseReduction, 15, "\(rate) Hz: noise between words")
            XCTAssertGreaterThanOrEqual(f.wordsKept, 0.9, "\(rate) Hz: words under noise")
            XCTAssertEqual(f.quietTalkerLevel, -20, accuracy: 6, "\(rate) Hz: a talker at -40 dBFS after 3 s")
            XCTAssertLessThan(f.loudTalkerPeak, 0, "\(rate) Hz: a talker peaking at -6 dBFS clips")
        }
    }

    /// An echo path that lengthens or shortens at once (the test server's loopback grows by
    /// 17–239 samples now and then), 5 ms into a frame (a move seldom falls on a frame's start;
    /// at 48 kHz the band split shifts even those): the follower finds the move in the frame it
    /// falls in, speex's filter keeps its taps (replayed on the moved alignment, a shortened path
    /// on the reference that follows) and the echo stays down in the second after each move
    /// (16 kHz: 74–79 dB; 48 kHz: 51–91 dB, the 22-sample move a third of a band sample off),
    /// where left alone it is 4–6 dB down in that second while the filter re-learns.
    func testTheCancellerFollowsAnEchoPathThatMovesAtOnce() throws {
        for rate in [16000, 48000] {
            var far = try VoiceSignals.speech(VoiceSignals.farText, voice: VoiceSignals.farVoice, sampleRate: rate, in: dir)
            far = VoiceSignals.scaled(far, toSpeechRMS: -20, sampleRate: rate)
            // Samples at 48 kHz: +22, +120, −60 (0.46, 2.5, −1.25 ms), 5 ms into a frame.
            let into = rate / 200
            let moves = [(at: 4 * rate + into, by: 22 * rate / 48000), (at: 7 * rate + into, by: 120 * rate / 48000), (at: 10 * rate + into, by: -60 * rate / 48000)]
            let echo = VoiceSignals.echo(of: far, sampleRate: rate, moves: moves)
            let microphone = zip(echo, VoiceSignals.noise(count: echo.count, dBFS: -70, seed: 1)).map { $0 + $1 }
            let echoing = VoiceSignals.speaking(echo, sampleRate: rate)
            func secondAfter(_ out: [Float], _ at: Int) -> Double {
                let first = at / (rate / 100)
                var mask = echoing
                for f in mask.indices where f < first || f >= first + 100 { mask[f] = false }
                return VoiceSignals.erle(input: microphone, output: out, where: mask, sampleRate: rate, from: first)
            }
            var figures: [Bool: [Double]] = [:]
            for follows in [true, false] {
                let processor = try XCTUnwrap(
                    VoiceProcessor(library: .speex, sampleRate: rate, stages: .init(echoCancellation: true, noiseSuppression: true, gainControl: false)))
                processor.followsEchoShifts = follows
                let out = VoiceSignals.process(processor, near: microphone, far: far)
                XCTAssertEqual(processor.movesFollowed, follows ? 3 : 0, "\(rate) Hz: the moves followed")
                figures[follows] = moves.map { secondAfter(out, $0.at) } + [VoiceSignals.erle(input: microphone, output: out, where: echoing, sampleRate: rate, from: 200)]
            }
            let f = { (v: [Double]) in v.map { String(format: "%.1f", $0) }.joined(separator: " / ") }
            print("\(rate) Hz: the echo's loss in the second after each move, then from 2 s on (dB): followed \(f(figures[true]!)), left alone \(f(figures[false]!))")
            for (k, erle) in figures[true]!.dropLast().enumerated() {
                XCTAssertGreaterThanOrEqual(erle, 35, "\(rate) Hz: the echo in the second after the path moved by \(moves[k].by)")
            }
            XCTAssertGreaterThanOrEqual(figures[true]!.last!, 45, "\(rate) Hz: the echo from 2 s on, through three moves")
        }
    }

    /// The far end's echo (40 ms, −6 dB and a reflection) over −70 dBFS noise, its path moved `by`
    /// samples `at` its sample, through speex with the follower: the echo's loss over the
    /// `frames` 10 ms frames from the move where it sounds, and the processor.
    private func lossAfterAMove(of far: [Float], rate: Int, at: Int, by: Int, frames: Int) throws -> (Double, VoiceProcessor) {
        let echo = VoiceSignals.echo(of: far, sampleRate: rate, moves: [(at: at, by: by)])
        let microphone = zip(echo, VoiceSignals.noise(count: echo.count, dBFS: -70, seed: 1)).map { $0 + $1 }
        let processor = try XCTUnwrap(
            VoiceProcessor(library: .speex, sampleRate: rate, stages: .init(echoCancellation: true, noiseSuppression: true, gainControl: false)))
        let out = VoiceSignals.process(processor, near: microphone, far: far)
        var mask = VoiceSignals.speaking(echo, sampleRate: rate)
        let first = at / (rate / 100)
        for f in mask.indices where f < first || f >= first + frames { mask[f] = false }
        return (VoiceSignals.erle(input: microphone, output: out, where: mask, sampleRate: rate, from: first), processor)
    }

    /// A path that shortens by pipewire-pulse's graph cycle (256 samples at 48 kHz, 5.3 ms, as
    /// its streams jump back now and then), and by 120, each in the middle of a word: the
    /// follower finds the move in its frame with the reference's tail (the echo of the frame's
    /// last samples comes from reference after it). Without the tail a voice's pitch period the
    /// other way explained the frame better: the reference moved by +179 (+315 for −120), the
    /// echo came back 2 dB down until the delay estimate started the canceller over a second
    /// later.
    func testAPathThatShortensByAGraphCycleIsFollowed() throws {
        let rate = 48000
        var far = VoiceSignals.scaled(
            try VoiceSignals.speech(VoiceSignals.farText, voice: VoiceSignals.farVoice, sampleRate: rate, in: dir), toSpeechRMS: -20, sampleRate: rate)
        far = Array(far.prefix(9 * rate))
        for by in [-256, -120] {
            let (after, processor) = try lossAfterAMove(of: far, rate: rate, at: 73 * rate / 10, by: by, frames: 50)
            let events = processor.referenceEvents.map(\.description)
            print(String(format: "a path %d samples shorter at 7.3 s: the echo's loss in the half second after %.1f dB; ", by, after) + events.joined(separator: "; "))
            XCTAssertEqual(processor.movesFollowed, 1, "\(by): the move followed")
            XCTAssertTrue(events.contains { $0.hasSuffix("follower \(by)") }, "\(by): the move found as it was: \(events)")
            XCTAssertFalse(events.contains { $0.contains("startOver") }, "\(by): the canceller started over: \(events)")
            XCTAssertGreaterThanOrEqual(after, 35, "\(by): the echo in the half second after the path shortened")
        }
    }

    /// A path that lengthens by a whole number of wide samples between the band's (20 at
    /// 48 kHz: 6⅔ at 16 kHz), 13 s into a call, where speex's filter has long converged and
    /// re-learns slowly: the follower finds it to the wide sample and the filter's history is
    /// replayed on it. Found only to the nearest band sample, it left 9 dB in the second after,
    /// found a frame late and a third of a sample off (the test server's loopback lengthens so).
    func testAMoveBetweenBandSamplesLateInACallIsFollowed() throws {
        let rate = 48000
        var far = VoiceSignals.scaled(
            try VoiceSignals.speech(VoiceSignals.farText, voice: VoiceSignals.farVoice, sampleRate: rate, in: dir), toSpeechRMS: -20, sampleRate: rate)
        while far.count < 16 * rate { far += far }
        far = Array(far.prefix(16 * rate))
        let (after, processor) = try lossAfterAMove(of: far, rate: rate, at: 27 * rate / 2, by: 20, frames: 100)
        print(String(format: "a move of 20 samples at 13.5 s: the echo's loss in the second after %.1f dB", after))
        XCTAssertEqual(processor.movesFollowed, 1, "the move followed")
        XCTAssertGreaterThanOrEqual(after, 40, "the echo in the second after the path moved by 20 samples")
    }

    /// The test server's loopback as the recorded calls had it: a delay alone, a third of a
    /// band sample past a whole one (1921 samples at 48 kHz, 640⅓ at 16 kHz), nothing else in
    /// the microphone, lengthened by 20 samples 27.5 s into the call. speex's strongest taps
    /// describe such a delay badly (the sinc's tail is below 20 dB, and its filter holds noise
    /// near the band's top where the reference has nothing), and the move was found ten frames
    /// late and a sample off: 23 dB in the second after (11 in a recorded call's, at 47.5 s);
    /// the taps fitted by least squares (``EchoShiftFollower/takeModel()``) find it in its frame.
    func testAMovedDelayBetweenBandSamplesIsFoundInItsFrame() throws {
        let after = try lossAfterMovedDelay(at: 27.5, gap: false)
        print(String(format: "a delay of 1921 samples lengthened by 20 at 27.5 s: the echo's loss in the second after %.1f dB", after))
        XCTAssertGreaterThanOrEqual(after, 40, "the echo in the second after the delay grew by 20 samples")
    }

    /// The same delay lengthened as a loopback that ran dry does it: 20 samples of silence,
    /// then the sound where it stopped. No lag explains the silence, so the move's frame leaked
    /// whole and the move was found a frame late: at 27.2 s, 32 dB in the second after (a
    /// recorded call's at 47.5 s: 21 dB in its second). A split with a silent stretch of the
    /// move's length between the unmoved and the moved parts finds it in its frame (97 dB).
    func testADelayThatGrowsByAGapIsFoundInItsFrame() throws {
        let after = try lossAfterMovedDelay(at: 27.2, gap: true)
        print(String(format: "a delay of 1921 samples grown by a gap of 20 at 27.2 s: the echo's loss in the second after %.1f dB", after))
        XCTAssertGreaterThanOrEqual(after, 40, "the echo in the second after the delay grew by a gap of 20 samples")
    }

    /// A 30 s call through a delay of 1921 samples at −6 dB at 48 kHz that grows by 20
    /// `seconds` in (with `gap`, silence fills them): the echo's loss in the second after (dB).
    private func lossAfterMovedDelay(at seconds: Double, gap: Bool) throws -> Double {
        let rate = 48000
        var far = VoiceSignals.scaled(
            try VoiceSignals.speech(VoiceSignals.farText, voice: VoiceSignals.farVoice, sampleRate: rate, in: dir), toSpeechRMS: -20, sampleRate: rate)
        while far.count < 30 * rate { far += far }
        far = Array(far.prefix(30 * rate))
        let at = Int(seconds * Double(rate)), delay = 1921, by = 20
        let microphone = (0..<far.count).map { i -> Float in
            if gap && i >= at && i < at + by { return 0 }
            let back = i < at ? delay : delay + by
            return i >= back ? 0.5 * far[i - back] : 0
        }
        let processor = try XCTUnwrap(
            VoiceProcessor(library: .speex, sampleRate: rate, stages: .init(echoCancellation: true, noiseSuppression: true, gainControl: false)))
        let out = VoiceSignals.process(processor, near: microphone, far: far)
        XCTAssertEqual(processor.movesFollowed, 1, "the move followed")
        var mask = VoiceSignals.speaking(microphone, sampleRate: rate)
        let first = at / (rate / 100)
        for f in mask.indices where f < first || f >= first + 100 { mask[f] = false }
        return VoiceSignals.erle(input: microphone, output: out, where: mask, sampleRate: rate, from: first)
    }

    /// The processor takes 8, 16, 32 and 48 kHz (webrtc's rates) from either library; anything
    /// else is refused, not processed at a rate the caller did not give.
    func testRatesOutsideTheFourAreRefused() {
        for library in VoiceProcessor.Library.allCases {
            for rate in [8000, 16000, 32000, 48000] { XCTAssertNotNil(VoiceProcessor(library: library, sampleRate: rate), "\(library) \(rate)") }
            for rate in [11025, 22050, 44100, 96000] { XCTAssertNil(VoiceProcessor(library: library, sampleRate: rate), "\(library) \(rate)") }
        }
    }
}
