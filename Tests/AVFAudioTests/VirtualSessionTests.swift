@testable import AudioHAL
import AVFAudio
import AudioToolbox
import AudioTestSupport
import Foundation
import XCTest

/// The audio session on the virtual backend, set as the process's audio environment: the test
/// plays the server's part (a call starts and ends, headphones are plugged in and pulled out,
/// another app plays) through the backend's scripted events, and checks Apple's notifications.
/// Deterministic: the session's event thread posts them; the test waits on a condition (bounded),
/// never by sleeping.
final class VirtualSessionTests: XCTestCase {
    private var virtual: VirtualBackend!
    private var environment: VirtualAudioSystem!
    private var observers: [any NSObjectProtocol] = []
    private let log = NotificationLog()

    /// The session's notifications, in the order they were posted, with a condition to wait on.
    final class NotificationLog: @unchecked Sendable {
        private let condition = NSCondition()
        private var posted: [Notification] = []

        func add(_ n: Notification) {
            condition.lock()
            posted.append(n)
            condition.broadcast()
            condition.unlock()
        }

        var all: [Notification] {
            condition.lock()
            defer { condition.unlock() }
            return posted
        }

        /// Waits until `count` notifications named `name` were posted; returns them.
        func wait(for name: Notification.Name, count: Int = 1, timeout: Double = 5) -> [Notification] {
            let deadline = Date(timeIntervalSinceNow: timeout)
            condition.lock()
            defer { condition.unlock() }
            while posted.filter({ $0.name == name }).count < count {
                if !condition.wait(until: deadline) { break }
            }
            return posted.filter { $0.name == name }
        }
    }

    override func setUp() {
        let session = AVAudioSession.sharedInstance()
        environment = VirtualAudioSystem()
        virtual = environment.backend
        let names: [Notification.Name] = [
            AVAudioSession.interruptionNotification, AVAudioSession.routeChangeNotification,
            AVAudioSession.silenceSecondaryAudioHintNotification, AVAudioSession.mediaServicesWereLostNotification,
            AVAudioSession.mediaServicesWereResetNotification,
        ]
        let log = self.log
        observers = names.map { NotificationCenter.default.addObserver(forName: $0, object: session, queue: nil) { log.add($0) } }
    }

    override func tearDown() {
        let session = AVAudioSession.sharedInstance()
        try? session.setActive(false)
        try? session.setCategory(.soloAmbient, mode: .default, options: [])
        for o in observers { NotificationCenter.default.removeObserver(o) }
        environment.restore()
        virtual = nil
    }

    func testActivationAsksForWhatTheCategorySays() throws {
        let session = AVAudioSession.sharedInstance()
        try session.setCategory(.playAndRecord, mode: .voiceChat)
        try session.setPreferredIOBufferDuration(0.01)
        try session.setActive(true)
        defer { try? session.setPreferredIOBufferDuration(0) }
        let request = try XCTUnwrap(virtual.openRequests.first)
        XCTAssertEqual(request.purpose, .voiceCommunication)
        XCTAssertTrue(request.echoCancellation)
        XCTAssertTrue(request.exclusiveSession, "a call does not mix")
        XCTAssertTrue(request.reportsPolicyEvents)
        XCTAssertEqual(session.ioBufferDuration, 0.01, accuracy: 1e-9, "what the backend granted")
        XCTAssertEqual(session.sampleRate, 48000)
        XCTAssertEqual(session.currentRoute.outputs.map(\.portType), [.builtInSpeaker])
        XCTAssertEqual(session.currentRoute.inputs.map(\.portType), [.builtInMic])
        try session.setActive(false)
        XCTAssertTrue(virtual.openRequests.isEmpty, "deactivation closes the session's stream")

        try session.setCategory(.ambient, mode: .default)
        try session.setActive(true)
        XCTAssertEqual(virtual.openRequests.first?.purpose, .mixable)
        XCTAssertEqual(virtual.openRequests.first?.exclusiveSession, false)
    }

    func testCallInterruptsAndEnds() throws {
        let session = AVAudioSession.sharedInstance()
        try session.setCategory(.playback)
        XCTAssertFalse(virtual.beginInterruption(), "no session stream: nobody to interrupt")
        try session.setActive(true)
        XCTAssertTrue(virtual.beginInterruption())
        let began = log.wait(for: AVAudioSession.interruptionNotification)
        XCTAssertEqual(began.count, 1)
        XCTAssertEqual(began.first?.userInfo?[AVAudioSessionInterruptionTypeKey] as? UInt, AVAudioSession.InterruptionType.began.rawValue)
        virtual.endInterruption()
        let both = log.wait(for: AVAudioSession.interruptionNotification, count: 2)
        XCTAssertEqual(both.count, 2)
        XCTAssertEqual(both.last?.userInfo?[AVAudioSessionInterruptionTypeKey] as? UInt, AVAudioSession.InterruptionType.ended.rawValue)
        XCTAssertEqual(both.last?.userInfo?[AVAudioSessionInterruptionOptionKey] as? UInt, AVAudioSession.InterruptionOptions.shouldResume.rawValue)
    }

    func testHeadphonesComeAndGo() throws {
        let session = AVAudioSession.sharedInstance()
        try session.setCategory(.playback)
        try session.setActive(true)
        XCTAssertEqual(session.currentRoute.outputs.map(\.portType), [.builtInSpeaker])

        virtual.plug(HALDeviceInfo(name: "phones", description: "Headphones", sampleRate: 48000, channels: 2, kind: .headphones))
        let plugged = log.wait(for: AVAudioSession.routeChangeNotification)
        XCTAssertEqual(plugged.count, 1)
        XCTAssertEqual(plugged.first?.userInfo?[AVAudioSessionRouteChangeReasonKey] as? UInt, AVAudioSession.RouteChangeReason.newDeviceAvailable.rawValue)
        let before = plugged.first?.userInfo?[AVAudioSessionRouteChangePreviousRouteKey] as? AVAudioSessionRouteDescription
        XCTAssertEqual(before?.outputs.map(\.portType), [.builtInSpeaker])
        XCTAssertEqual(session.currentRoute.outputs.map(\.portType), [.headphones])
        XCTAssertEqual(session.currentRoute.outputs.first?.portName, "Headphones")

        virtual.unplug("phones")
        let pulled = log.wait(for: AVAudioSession.routeChangeNotification, count: 2)
        XCTAssertEqual(pulled.count, 2)
        XCTAssertEqual(pulled.last?.userInfo?[AVAudioSessionRouteChangeReasonKey] as? UInt, AVAudioSession.RouteChangeReason.oldDeviceUnavailable.rawValue)
        let then = pulled.last?.userInfo?[AVAudioSessionRouteChangePreviousRouteKey] as? AVAudioSessionRouteDescription
        XCTAssertEqual(then?.outputs.map(\.portType), [.headphones])
        XCTAssertEqual(session.currentRoute.outputs.map(\.portType), [.builtInSpeaker])
    }

    func testOtherAudioAndOutputVolume() throws {
        let session = AVAudioSession.sharedInstance()
        try session.setCategory(.playback)
        try session.setActive(true)
        XCTAssertFalse(session.isOtherAudioPlaying)
        virtual.setOtherStreams([HALPlaybackStream(index: 7, purpose: .media)])
        let begin = log.wait(for: AVAudioSession.silenceSecondaryAudioHintNotification)
        XCTAssertEqual(begin.first?.userInfo?[AVAudioSessionSilenceSecondaryAudioHintTypeKey] as? UInt, AVAudioSession.SilenceSecondaryAudioHintType.begin.rawValue)
        XCTAssertTrue(session.isOtherAudioPlaying)
        virtual.setOtherStreams([HALPlaybackStream(index: 7, purpose: .media, corked: true)])
        let end = log.wait(for: AVAudioSession.silenceSecondaryAudioHintNotification, count: 2)
        XCTAssertEqual(end.last?.userInfo?[AVAudioSessionSilenceSecondaryAudioHintTypeKey] as? UInt, AVAudioSession.SilenceSecondaryAudioHintType.end.rawValue)
        XCTAssertFalse(session.isOtherAudioPlaying, "a corked stream is not heard")

        virtual.setOutputVolume(0.5)
        XCTAssertEqual(session.outputVolume, 0.5)
    }

    func testServerLossAndReset() throws {
        let session = AVAudioSession.sharedInstance()
        try session.setCategory(.playback)
        try session.setActive(true)
        virtual.loseServer()
        XCTAssertEqual(log.wait(for: AVAudioSession.mediaServicesWereLostNotification).count, 1)
        XCTAssertEqual(log.wait(for: AVAudioSession.mediaServicesWereResetNotification).count, 1)
        XCTAssertEqual(virtual.openRequests.count, 1, "the session was active: it activates again")
    }

    /// What a recorder tells its delegate, with a condition to wait on.
    final class FinishLog: NSObject, AVAudioRecorderDelegate, @unchecked Sendable {
        private let condition = NSCondition()
        private var finishes: [Bool] = []

        func audioRecorderDidFinishRecording(_ recorder: AVAudioRecorder, successfully flag: Bool) {
            condition.lock()
            finishes.append(flag)
            condition.broadcast()
            condition.unlock()
        }

        /// Waits (bounded) for the first finish and returns every finish so far.
        func waitForFinish(timeout: Double = 5) -> [Bool] {
            let deadline = Date(timeIntervalSinceNow: timeout)
            condition.lock()
            defer { condition.unlock() }
            while finishes.isEmpty {
                if !condition.wait(until: deadline) { break }
            }
            return finishes
        }
    }

    /// AVAudioRecorder through its input queue: `record(forDuration:)` writes exactly the virtual
    /// microphone's samples, as many as asked for, then tells the delegate.
    func testRecorderRecordsTheVirtualMicrophone() throws {
        virtual.inputSignal = { format, first, buffer in
            for i in 0..<buffer.count { buffer[i] = Float((Int(first) * format.channels + i) % 2000 - 1000) / 32768 }
        }
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("virtual-recorder-\(getpid()).wav")
        defer { try? FileManager.default.removeItem(at: url) }
        let recorder = try AVAudioRecorder(url: url, settings: [
            AVFormatIDKey: kAudioFormatLinearPCM, AVSampleRateKey: 48000, AVNumberOfChannelsKey: 1, AVLinearPCMBitDepthKey: 16,
        ])
        let finishes = FinishLog()
        recorder.delegate = finishes
        XCTAssertTrue(recorder.record(forDuration: 0.1))
        XCTAssertEqual(virtual.openRequests.count, 1, "one capture stream")
        // The recorder's buffers hold 2401 frames; two of them pass the 4800 asked for.
        virtual.advance(frames: 2401)
        virtual.advance(frames: 2401)
        XCTAssertEqual(finishes.waitForFinish(), [true])
        XCTAssertTrue(virtual.wait(timeout: 5) { $0.openRequests.isEmpty }, "the queue is gone once finished")

        let file = try AVAudioFile(forReading: url)
        XCTAssertEqual(file.length, 4800, "exactly the duration asked for")
        let buffer = try XCTUnwrap(AVAudioPCMBuffer(pcmFormat: file.processingFormat, frameCapacity: 4800))
        try file.read(into: buffer)
        let samples = Array(UnsafeBufferPointer(start: buffer.floatChannelData![0], count: Int(buffer.frameLength)))
        XCTAssertEqual(samples, (0..<4800).map { Float($0 % 2000 - 1000) / 32768 }, "the microphone's samples, exactly")
    }
}
