import AVFAudio
import AudioTestSupport
import AudioToolbox
import Foundation
import XCTest

/// Counts what a recorder tells its delegate.
final class RecorderDelegateLog: AVAudioRecorderDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var finishes: [Bool] = []
    private var errors: [String] = []
    private(set) var finishedAt: Date?

    func audioRecorderDidFinishRecording(_ recorder: AVAudioRecorder, successfully flag: Bool) {
        lock.withLock {
            finishes.append(flag)
            finishedAt = Date()
        }
    }

    func audioRecorderEncodeErrorDidOccur(_ recorder: AVAudioRecorder, error: (any Error)?) {
        lock.withLock { errors.append(error.map { "\($0)" } ?? "nil") }
    }

    var finished: [Bool] { lock.withLock { finishes } }
    var encodeErrors: [String] { lock.withLock { errors } }
}

/// AVAudioRecorder on the private server: the microphone carries a known tone; the files are
/// checked with ffprobe and decoded with ffmpeg.
final class AVAudioRecorderTests: XCTestCase {
    var dir: URL!
    var server: PrivatePulseServer!
    var microphone: SignalPlayer?

    override func setUpWithError() throws {
        server = try TestSound.server()
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("openavf-recorder-\(getpid())-\(UUID().uuidString.prefix(6))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        microphone?.stop()
        try? FileManager.default.removeItem(at: dir)
    }

    /// The default microphone (the `micfeed` sink's monitor) carries a 440 Hz tone at half scale,
    /// heard before this returns: a recording begun while `pacat` is still filling its buffer
    /// reads the wrong frequency in windows near its start.
    func feedMicrophone(seconds: Double = 30) throws {
        microphone = try SignalPlayer(
            server: server, device: "micfeed", samples: SignalAnalysis.sine(frequency: 440, sampleRate: 48000, seconds: seconds, amplitude: 0.5),
            sampleRate: 48000)
        try microphone?.waitUntilHeard()
    }

    func testSeedSettingsRecordPauseRecordToIMA4CAF() throws {
        try feedMicrophone()
        let url = dir.appendingPathComponent("memo.caf")
        let settings: [String: Any] = [
            AVFormatIDKey: Int(kAudioFormatAppleIMA4), AVSampleRateKey: 44100.0, AVNumberOfChannelsKey: 1,
            AVEncoderBitDepthHintKey: 16, AVEncoderAudioQualityKey: AVAudioQuality.medium,
        ]
        let recorder = try AVAudioRecorder(url: url, settings: settings)
        XCTAssertEqual(recorder.format.streamDescription.pointee.mFormatID, kAudioFormatAppleIMA4)
        XCTAssertEqual(recorder.settings[AVAudioFileTypeKey] as? Int, Int(kAudioFileCAFType))
        let log = RecorderDelegateLog()
        recorder.delegate = log
        recorder.isMeteringEnabled = true
        XCTAssertTrue(recorder.prepareToRecord())
        XCTAssertTrue(FileManager.default.fileExists(atPath: url.path), "prepareToRecord creates the file")
        XCTAssertTrue(recorder.record())
        XCTAssertTrue(recorder.isRecording)
        XCTAssertTrue(waitUntil(timeout: 5) { recorder.currentTime >= 2.0 })
        // Meters read as an app's timer reads them. This read takes in the recording's first
        // milliseconds, where the server's resampler (48 kHz source, 44.1 kHz stream) starts on
        // the tone mid-wave and overshoots to -5.7 dBFS; that peak's hold has fallen away by the
        // next read.
        recorder.updateMeters()
        recorder.pause()
        XCTAssertFalse(recorder.isRecording)
        let paused = recorder.currentTime
        Thread.sleep(forTimeInterval: 1)  // the scenario's one-second pause (not a synchronisation)
        XCTAssertEqual(recorder.currentTime, paused, accuracy: 0.001, "time does not run while paused")
        XCTAssertTrue(recorder.record())
        XCTAssertTrue(waitUntil(timeout: 5) { recorder.currentTime >= 3.0 })
        recorder.updateMeters()
        let average = recorder.averagePower(forChannel: 0)
        let peak = recorder.peakPower(forChannel: 0)
        let recorded = recorder.currentTime
        recorder.stop()
        XCTAssertEqual(recorded, 3.0, accuracy: 0.05, "currentTime counts recorded time only")
        XCTAssertEqual(recorder.currentTime, 0, "0 once stopped")
        XCTAssertTrue(waitUntil(timeout: 5) { !log.finished.isEmpty })
        XCTAssertEqual(log.finished, [true])
        XCTAssertEqual(average, -9.03, accuracy: 0.3, "a half-scale sine's average")
        // The peak holds the largest sample of the last read's span, which on a busy machine can
        // include a resampler transient at the resume or a late buffer's edge (−5.1 dBFS seen in
        // a busy soak): the real-server criterion is ±1 dB. The meter the recorder shares with
        // the player (AVAudioPowerMeter) is checked exactly on the virtual clock, through the
        // player (VirtualAVAudioPlayerTests).
        XCTAssertEqual(peak, -6.02, accuracy: 1, "a half-scale sine's peak")

        let probe = try probeWithFFprobe(url, in: dir)
        XCTAssertEqual(probe.codec, "adpcm_ima_qt")
        XCTAssertEqual(probe.rate, 44100)
        XCTAssertEqual(probe.channels, 1)
        XCTAssertEqual(probe.duration, 3.0, accuracy: 0.1)
        let audio = try decodeWithFFmpeg(url, in: dir)
        XCTAssertEqual(Double(audio.count) / 44100, 3.0, accuracy: 0.1)
        // The microphone's tone throughout, both before and after the pause.
        for second in [0.5, 1.5, 2.5] {
            let part = audio[Int(second * 44100)..<Int((second + 0.4) * 44100)]
            XCTAssertEqual(SignalAnalysis.frequency(part, sampleRate: 44100), 440, accuracy: 3, "at \(second) s")
            XCTAssertEqual(SignalAnalysis.rmsDB(part), -9.03, accuracy: 0.6, "level at \(second) s")
        }
        XCTAssertTrue(recorder.deleteRecording())
        XCTAssertFalse(FileManager.default.fileExists(atPath: url.path))
    }

    func testDurationStartTimeContainersAndBadSettings() throws {
        try feedMicrophone()
        // record(atTime:forDuration:) into a 16-bit WAV: starts half a second later, lasts 0.5 s.
        let wav = dir.appendingPathComponent("take.wav")
        let recorder = try AVAudioRecorder(url: wav, settings: [AVSampleRateKey: 48000, AVNumberOfChannelsKey: 1, AVLinearPCMBitDepthKey: 16])
        let log = RecorderDelegateLog()
        recorder.delegate = log
        let asked = Date()
        XCTAssertTrue(recorder.record(atTime: recorder.deviceCurrentTime + 0.5, forDuration: 0.5))
        XCTAssertTrue(waitUntil(timeout: 5) { !log.finished.isEmpty })
        XCTAssertEqual(log.finished, [true])
        XCTAssertGreaterThanOrEqual(try XCTUnwrap(log.finishedAt).timeIntervalSince(asked), 0.95, "0.5 s wait + 0.5 s recording")
        XCTAssertFalse(recorder.isRecording)
        let probe = try probeWithFFprobe(wav, in: dir)
        XCTAssertEqual(probe.codec, "pcm_s16le")
        XCTAssertEqual(probe.duration, 0.5, accuracy: 0.001, "record(forDuration:) is exact for linear PCM")
        let audio = try decodeWithFFmpeg(wav, in: dir)
        XCTAssertEqual(SignalAnalysis.frequency(audio[2400..<21600], sampleRate: 48000), 440, accuracy: 3)

        // AAC in M4A, the quality given as a raw value and a bit rate.
        let m4a = dir.appendingPathComponent("take.m4a")
        let aac = try AVAudioRecorder(url: m4a, settings: [
            AVFormatIDKey: kAudioFormatMPEG4AAC, AVSampleRateKey: 44100, AVNumberOfChannelsKey: 1,
            AVEncoderAudioQualityKey: AVAudioQuality.high.rawValue, AVEncoderBitRateKey: 96000,
        ])
        aac.delegate = log
        XCTAssertTrue(aac.record(forDuration: 1.0))
        XCTAssertTrue(waitUntil(timeout: 5) { log.finished.count == 2 })
        let aacProbe = try probeWithFFprobe(m4a, in: dir)
        XCTAssertEqual(aacProbe.codec, "aac")
        XCTAssertEqual(aacProbe.duration, 1.0, accuracy: 0.05)
        let aacAudio = try decodeWithFFmpeg(m4a, in: dir)
        XCTAssertEqual(SignalAnalysis.frequency(aacAudio[8820..<35280], sampleRate: 44100), 440, accuracy: 3)

        // A .wav cannot hold AAC; unknown extensions need a file type; no rate, no format.
        XCTAssertThrowsError(try AVAudioRecorder(url: dir.appendingPathComponent("bad.wav"), settings: [AVFormatIDKey: kAudioFormatMPEG4AAC])) { error in
            XCTAssertEqual((error as NSError).code, Int(kAudioFileUnsupportedDataFormatError))
            XCTAssertTrue("\(error)".contains("cannot hold"), "\(error)")
        }
        XCTAssertThrowsError(try AVAudioRecorder(url: dir.appendingPathComponent("take.xyz"), settings: [:])) { error in
            XCTAssertEqual((error as NSError).code, Int(kAudioFileUnsupportedFileTypeError))
        }
        let typed = try AVAudioRecorder(url: dir.appendingPathComponent("take.xyz"), settings: [AVAudioFileTypeKey: kAudioFileAIFFType])
        XCTAssertEqual(typed.settings[AVAudioFileTypeKey] as? Int, Int(kAudioFileAIFFType))
        let fromFormat = try AVAudioRecorder(url: dir.appendingPathComponent("f.caf"), format: try XCTUnwrap(AVAudioFormat(standardFormatWithSampleRate: 22050, channels: 2)))
        XCTAssertEqual(fromFormat.format.sampleRate, 22050)
        XCTAssertEqual(fromFormat.format.channelCount, 2)
    }
}
