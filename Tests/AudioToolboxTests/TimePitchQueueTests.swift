import AudioTestSupport
import AudioToolbox
import Foundation
import XCTest

/// A raw output queue with its time-pitch processor: rate changes the duration and keeps the
/// pitch, pitch changes the frequency and keeps the duration, measured on the speaker's monitor.
final class TimePitchQueueTests: XCTestCase {
    override func setUp() async throws {
        _ = try TestSound.server()
    }

    /// Plays 2 s of 440 Hz through a queue with time-pitch enabled and `rate`/`cents`; returns the
    /// seconds heard and the frequency in the middle.
    private func play(rate: Float, cents: Float, algorithm: UInt32 = kAudioQueueTimePitchAlgorithm_Spectral) throws -> (seconds: Double, frequency: Double) {
        let server = try TestSound.server()
        let capture = try SignalCapture(server: server, device: "speaker.monitor")
        let feeder = ToneFeeder.tone(frequency: 440, amplitude: 0.5, sampleRate: 48000, seconds: 2)
        let (queue, buffers) = try makeToneQueue(feeder, bufferSeconds: 0.1, count: 3)
        defer { AudioQueueDispose(queue, true) }
        var on: UInt32 = 1
        XCTAssertEqual(AudioQueueSetProperty(queue, kAudioQueueProperty_EnableTimePitch, &on, 4), noErr)
        var chosen = algorithm
        XCTAssertEqual(AudioQueueSetProperty(queue, kAudioQueueProperty_TimePitchAlgorithm, &chosen, 4), noErr)
        XCTAssertEqual(AudioQueueSetParameter(queue, kAudioQueueParam_PlayRate, rate), noErr)
        XCTAssertEqual(AudioQueueSetParameter(queue, kAudioQueueParam_Pitch, cents), noErr)
        for b in buffers { feeder.fill(queue, b) }
        XCTAssertEqual(AudioQueueStart(queue, nil), noErr)
        XCTAssertEqual(feeder.finished.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(AudioQueueStop(queue, false), noErr)
        XCTAssertEqual(feeder.stopped.wait(timeout: .now() + 5), .success)
        try capture.waitFor(frames: capture.frameCount + 4800, timeout: 5)
        let heard = capture.stop()[0]
        let start = try XCTUnwrap(SignalAnalysis.onset(heard, threshold: 0.05))
        let end = try XCTUnwrap(SignalAnalysis.offset(heard, threshold: 0.05))
        let sound = heard[start...end]
        let middle = sound[(sound.startIndex + sound.count / 4)..<(sound.endIndex - sound.count / 4)]
        return (Double(sound.count) / 48000, SignalAnalysis.frequency(middle, sampleRate: 48000))
    }

    func testRateTwoPlaysInHalfTheTimeAtTheSamePitch() throws {
        let heard = try play(rate: 2, cents: 0)
        XCTAssertEqual(heard.seconds, 1.0, accuracy: 0.05)
        XCTAssertEqual(heard.frequency, 440, accuracy: 3)
    }

    func testRateHalfPlaysInTwiceTheTime() throws {
        let heard = try play(rate: 0.5, cents: 0)
        XCTAssertEqual(heard.seconds, 4.0, accuracy: 0.1)
        XCTAssertEqual(heard.frequency, 440, accuracy: 3)
    }

    func testPitchAnOctaveUpKeepsTheDuration() throws {
        let heard = try play(rate: 1, cents: 1200)
        XCTAssertEqual(heard.seconds, 2.0, accuracy: 0.05)
        XCTAssertEqual(heard.frequency, 880, accuracy: 5)
    }

    func testVarispeedChangesPitchWithRate() throws {
        let heard = try play(rate: 2, cents: 0, algorithm: kAudioQueueTimePitchAlgorithm_Varispeed)
        XCTAssertEqual(heard.seconds, 1.0, accuracy: 0.05)
        XCTAssertEqual(heard.frequency, 880, accuracy: 5)
    }

    /// Without the processor the parameters are refused; the properties read back; bypass plays
    /// the audio as it is.
    func testParametersNeedTheProcessor() throws {
        var format = lpcm(rate: 48000, channels: 1)
        var queue: AudioQueueRef?
        XCTAssertEqual(AudioQueueNewOutput(&format, { _, _, _ in }, nil, nil, nil, 0, &queue), noErr)
        let q = try XCTUnwrap(queue)
        defer { AudioQueueDispose(q, true) }
        XCTAssertEqual(AudioQueueSetParameter(q, kAudioQueueParam_PlayRate, 2), kAudioQueueErr_InvalidParameter)
        var on: UInt32 = 1
        XCTAssertEqual(AudioQueueSetProperty(q, kAudioQueueProperty_EnableTimePitch, &on, 4), noErr)
        XCTAssertEqual(AudioQueueSetParameter(q, kAudioQueueParam_PlayRate, 5), noErr)
        var rate: Float = 0
        XCTAssertEqual(AudioQueueGetParameter(q, kAudioQueueParam_PlayRate, &rate), noErr)
        XCTAssertEqual(rate, 2, "clamped to 0.5…2")
        var algorithm: UInt32 = 0
        var size = UInt32(4)
        XCTAssertEqual(AudioQueueGetProperty(q, kAudioQueueProperty_TimePitchAlgorithm, &algorithm, &size), noErr)
        XCTAssertEqual(algorithm, kAudioQueueTimePitchAlgorithm_Spectral)
        var bad = fourCC("nope")
        XCTAssertEqual(AudioQueueSetProperty(q, kAudioQueueProperty_TimePitchAlgorithm, &bad, 4), kAudioQueueErr_InvalidPropertyValue)
        XCTAssertEqual(AudioQueueSetProperty(q, kAudioQueueProperty_TimePitchBypass, &on, 4), noErr)
        var bypass: UInt32 = 0
        XCTAssertEqual(AudioQueueGetProperty(q, kAudioQueueProperty_TimePitchBypass, &bypass, &size), noErr)
        XCTAssertEqual(bypass, 1)
    }
}
