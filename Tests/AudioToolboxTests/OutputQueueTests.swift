import AudioTestSupport
import AudioToolbox
import Foundation
import XCTest

/// Integration: playback queues on the private PulseAudio server, measured on the speaker's monitor.
final class OutputQueueTests: XCTestCase {
    override func setUp() async throws {
        _ = try TestSound.server()
    }

    /// Plays `seconds` of a 1 kHz tone at `volume` and returns the captured tone (onset to offset).
    private func playTone(volume: Float, seconds: Double = 2) throws -> [Float] {
        let server = try TestSound.server()
        let capture = try SignalCapture(server: server, device: "speaker.monitor")
        let feeder = ToneFeeder.tone(frequency: 1000, amplitude: 0.5, sampleRate: 48000, seconds: seconds)
        let (queue, buffers) = try makeToneQueue(feeder, bufferSeconds: 0.030, count: 3)
        XCTAssertEqual(AudioQueueSetParameter(queue, kAudioQueueParam_Volume, volume), noErr)
        for b in buffers { feeder.fill(queue, b) }
        XCTAssertEqual(AudioQueueStart(queue, nil), noErr)
        XCTAssertEqual(feeder.finished.wait(timeout: .now() + seconds + 5), .success)
        XCTAssertEqual(AudioQueueStop(queue, false), noErr)
        XCTAssertEqual(feeder.stopped.wait(timeout: .now() + 5), .success, "IsRunning did not turn 0 after an asynchronous stop")
        AudioQueueDispose(queue, true)
        try capture.waitFor(frames: capture.frameCount + 4800, timeout: 5)
        let captured = capture.stop()[0]
        let start = try XCTUnwrap(SignalAnalysis.onset(captured, threshold: 0.05 * volume))
        let end = try XCTUnwrap(SignalAnalysis.offset(captured, threshold: 0.05 * volume))
        return Array(captured[start...end])
    }

    func testToneFrequencyGapsAndVolume() throws {
        let full = try playTone(volume: 1)
        XCTAssertEqual(Double(full.count) / 48000, 2.0, accuracy: 0.01 + Double(TestSound.gapTolerance) / 48000, "played length (a dropout on a busy machine lengthens it)")
        let middle = full[4800..<(full.count - 4800)]
        let frequency = SignalAnalysis.frequency(middle, sampleRate: 48000)
        XCTAssertEqual(frequency, 1000, accuracy: 2)
        let gap = SignalAnalysis.longestGap(full[...], threshold: 0.002)
        XCTAssertLessThanOrEqual(gap, TestSound.gapTolerance, "a gap longer than three server periods")
        let half = try playTone(volume: 0.5)
        let difference = SignalAnalysis.rmsDB(half[4800..<(half.count - 4800)]) - SignalAnalysis.rmsDB(middle)
        XCTAssertEqual(difference, -6.02, accuracy: 0.2, "volume 0.5 relative to volume 1")
        print("output tone: \(frequency) Hz, longest run below -54 dBFS \(gap) samples, volume 0.5 at \(difference) dB, length \(Double(full.count) / 48000) s")
    }
}
