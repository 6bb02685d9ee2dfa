import AVFAudio
import AudioTestSupport
import Foundation
import Synchronization
import XCTest

/// An engine with voice processing on, as a VoIP app sets it up (issue 14): a `.voiceChat`
/// session with 30 ms I/O buffers, the microphone recorded at 44.1 kHz, the far end played at
/// 48 kHz; the echo comes back through the test server's acoustic path (40 ms, −6 dB).
final class VoiceProcessingEngineTests: XCTestCase {
    private var dir: URL!

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("vp-engine-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    override func tearDown() { try? FileManager.default.removeItem(at: dir) }

    func testTheSeedsVoIPShapeCancelsTheEcho() throws {
        let server = try TestSound.server()
        let path = try AcousticPath(server: server)
        defer { path.close() }
        let session = AVAudioSession.sharedInstance()
        try session.setCategory(.playAndRecord, mode: .voiceChat)
        try session.setPreferredIOBufferDuration(0.03)
        try session.setActive(true)
        defer {
            try? session.setActive(false)
            try? session.setPreferredIOBufferDuration(0)
            try? session.setCategory(.soloAmbient, mode: .default)
        }

        var words = try VoiceSignals.speech(VoiceSignals.farText, voice: VoiceSignals.farVoice, sampleRate: 48000, in: dir)
        words = Array(VoiceSignals.scaled(words, toSpeechRMS: -20, sampleRate: 48000).prefix(48000 * 6))
        let farFormat = AVAudioFormat(standardFormatWithSampleRate: 48000, channels: 1)!
        let far = AVAudioPCMBuffer(pcmFormat: farFormat, frameCapacity: AVAudioFrameCount(words.count))!
        far.frameLength = AVAudioFrameCount(words.count)
        words.withUnsafeBufferPointer { far.floatChannelData![0].update(from: $0.baseAddress!, count: words.count) }

        let engine = AVAudioEngine()
        XCTAssertFalse(engine.inputNode.isVoiceProcessingEnabled)
        try engine.inputNode.setVoiceProcessingEnabled(true)
        XCTAssertTrue(engine.inputNode.isVoiceProcessingEnabled)
        XCTAssertTrue(engine.outputNode.isVoiceProcessingEnabled, "on both I/O nodes, as Apple's")
        XCTAssertTrue(engine.inputNode.isVoiceProcessingAGCEnabled, "gain control is on by default")
        engine.inputNode.isVoiceProcessingAGCEnabled = false
        XCTAssertFalse(engine.inputNode.isVoiceProcessingAGCEnabled)
        // Ducking of other audio: Apple's default, then a level of the app's (the unit's tests
        // measure the ducking itself).
        XCTAssertFalse(engine.inputNode.voiceProcessingOtherAudioDuckingConfiguration.enableAdvancedDucking.boolValue)
        XCTAssertEqual(engine.inputNode.voiceProcessingOtherAudioDuckingConfiguration.duckingLevel, .default)
        engine.inputNode.voiceProcessingOtherAudioDuckingConfiguration = AVAudioVoiceProcessingOtherAudioDuckingConfiguration(
            enableAdvancedDucking: true, duckingLevel: .min)
        XCTAssertTrue(engine.inputNode.voiceProcessingOtherAudioDuckingConfiguration.enableAdvancedDucking.boolValue)
        XCTAssertEqual(engine.inputNode.voiceProcessingOtherAudioDuckingConfiguration.duckingLevel, .min)

        // The microphone at 44.1 kHz, into a silent mixer (heard by the tap, not played).
        let micFormat = AVAudioFormat(standardFormatWithSampleRate: 44100, channels: 1)!
        let sink = AVAudioMixerNode()
        engine.attach(sink)
        engine.connect(engine.inputNode, to: sink, format: micFormat)
        engine.connect(sink, to: engine.mainMixerNode, format: micFormat)
        sink.outputVolume = 0
        let player = AVAudioPlayerNode()
        engine.attach(player)
        engine.connect(player, to: engine.mainMixerNode, format: farFormat)
        XCTAssertEqual(engine.outputNode.outputFormat(forBus: 0).sampleRate, 48000, "the output runs at 48 kHz")

        let recorded = Mutex<[Float]>([])
        engine.inputNode.installTap(onBus: 0, bufferSize: 1323, format: nil) { buffer, _ in
            recorded.withLock { $0 += UnsafeBufferPointer(start: buffer.floatChannelData![0], count: Int(buffer.frameLength)) }
        }
        XCTAssertEqual(engine.inputNode.outputFormat(forBus: 0).sampleRate, 44100)

        /// Plays the far end once; returns what the microphone gave from when it started.
        func call(bypassed: Bool) throws -> [Float] {
            engine.inputNode.isVoiceProcessingBypassed = bypassed
            recorded.withLock { $0.removeAll() }
            try engine.start()
            XCTAssertThrowsError(try engine.outputNode.setVoiceProcessingEnabled(false), "a running engine refuses the switch")
            XCTAssertTrue(waitUntil(timeout: 5) { recorded.withLock { $0.count } >= 22050 }, "no input")
            // The call is described to the server (role phone), and its canceller is not asked
            // for: one canceller, the engine's.
            let recording = try server.pactl(["list", "source-outputs"]).components(separatedBy: "Source Output #").first { $0.contains("AudioUnit input") }
            XCTAssertEqual(recording?.contains("media.role = \"phone\""), true, "the recording stream's role")
            XCTAssertEqual(recording?.contains("filter.want"), false, "the server's echo canceller was asked for")
            let done = DispatchSemaphore(value: 0)
            let start = recorded.withLock { $0.count }
            player.scheduleBuffer(far, at: nil, options: [], completionCallbackType: .dataPlayedBack) { _ in done.signal() }
            player.play()
            XCTAssertEqual(done.wait(timeout: .now() + 15), .success, "the far end did not play")
            let end = recorded.withLock { $0.count } + 44100 / 2
            XCTAssertTrue(waitUntil(timeout: 5) { recorded.withLock { $0.count } >= end }, "the input stopped")
            player.stop()
            engine.stop()
            return recorded.withLock { Array($0[start...]) }
        }
        let raw = try call(bypassed: true)
        let processed = try call(bypassed: false)
        engine.inputNode.removeTap(onBus: 0)

        // The echo in the bypassed run, at 44.1 kHz: where it starts, then the level of each
        // run over the same span (2 s into the far end to its end; each run's span starts
        // where its far end did, so a cycle's difference in timing moves it by 30 ms at most).
        let onset = try XCTUnwrap(SignalAnalysis.onset(raw, threshold: 0.01), "no echo in the bypassed run")
        let span = (onset + 44100 * 2)..<(onset + words.count * 441 / 480 - 4410)
        XCTAssertLessThanOrEqual(span.upperBound, min(raw.count, processed.count))
        let echo = SignalAnalysis.rmsDB(raw[span]), left = SignalAnalysis.rmsDB(processed[span])
        // Each second of the span alone: which seconds lost the echo says whether the canceller
        // diverged once (a path move) or never converged.
        let seconds = stride(from: span.lowerBound, to: span.upperBound - 44099, by: 44100).map { from in
            String(format: "%.1f", SignalAnalysis.rmsDB(raw[from..<(from + 44100)]) - SignalAnalysis.rmsDB(processed[from..<(from + 44100)]))
        }
        print("engine at 44.1/48 kHz, 30 ms: echo \(echo) dBFS, left \(left) dBFS, loss \(echo - left) dB; by second [\(seconds.joined(separator: ", "))]")
        XCTAssertGreaterThan(echo, -40, "the echo is too quiet to measure")
        XCTAssertGreaterThanOrEqual(echo - left, 15, "echo return loss enhancement (a loose floor: cancelling nothing reads about 0 dB; openavf-bench --only voice prints the figure)")
    }
}
