import AudioTestSupport
import AudioToolbox
import Foundation
import Synchronization
import XCTest

/// System sounds on the private server: played from its sample cache, completions once each, 50
/// in a second all heard, UI sounds with the event role, Apple's errors for what is not a sound.
final class SystemSoundTests: XCTestCase {
    private var scratch: URL!

    override func setUpWithError() throws {
        scratch = FileManager.default.temporaryDirectory.appendingPathComponent("openavf-sounds-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    }

    override func tearDown() { try? FileManager.default.removeItem(at: scratch) }

    /// A WAVE file of a sine, made by sox.
    private func tone(_ name: String, seconds: Double, frequency: Int, amplitude: Double = 0.5) throws -> URL {
        let url = scratch.appendingPathComponent(name)
        _ = try runTool("sox", ["-n", "-r", "48000", "-c", "1", "-b", "16", url.path, "synth", "\(seconds)", "sine", "\(frequency)", "vol", "\(amplitude)"], in: scratch)
        return url
    }

    private func create(_ url: URL) throws -> SystemSoundID {
        var id: SystemSoundID = 0
        XCTAssertEqual(AudioServicesCreateSystemSoundID(url as CFURL, &id), kAudioServicesNoError)
        XCTAssertNotEqual(id, 0)
        return id
    }

    func testSoundPlaysAndItsCompletionFiresOnceAfterIt() throws {
        let server = try TestSound.server()
        let sound = try create(try tone("beep.wav", seconds: 0.3, frequency: 1000))
        defer { AudioServicesDisposeSystemSoundID(sound) }
        let capture = try SignalCapture(server: server, device: "speaker.monitor")
        let completions = Mutex<[Date]>([])
        let started = Date()
        AudioServicesPlaySystemSoundWithCompletion(sound) { completions.withLock { $0.append(Date()) } }
        XCTAssertTrue(waitUntil(timeout: 3) { !completions.withLock { $0.isEmpty } }, "no completion")
        let ended = completions.withLock { $0[0] }.timeIntervalSince(started)
        XCTAssertGreaterThanOrEqual(ended, 0.3, "the completion came before the sound could end")
        XCTAssertLessThan(ended, 0.8)
        let target = capture.frameCount + 48000 / 2
        try capture.waitFor(frames: target, timeout: 3)
        XCTAssertEqual(completions.withLock { $0.count }, 1, "exactly one completion")
        let heard = capture.stop()[0]
        let onset = try XCTUnwrap(SignalAnalysis.onset(heard, threshold: 0.1))
        let end = try XCTUnwrap(SignalAnalysis.offset(heard, threshold: 0.1))
        XCTAssertEqual(Double(end - onset) / 48000, 0.3, accuracy: 0.01, "the whole sound")
        XCTAssertEqual(SignalAnalysis.frequency(heard[(onset + 480)..<(end - 480)], sampleRate: 48000), 1000, accuracy: 2)

        // A completion routine on a run loop, for each play.
        final class Count: @unchecked Sendable { var value = 0 }
        let count = Count()
        let routine: AudioServicesSystemSoundCompletionProc = { id, data in
            Unmanaged<Count>.fromOpaque(data!).takeUnretainedValue().value += 1
        }
        XCTAssertEqual(
            AudioServicesAddSystemSoundCompletion(sound, CFRunLoopGetCurrent(), nil, routine, Unmanaged.passUnretained(count).toOpaque()),
            kAudioServicesNoError)
        AudioServicesPlaySystemSound(sound)
        AudioServicesPlayAlertSound(sound)
        let deadline = Date(timeIntervalSinceNow: 3)
        while count.value < 2 && Date() < deadline { _ = RunLoop.current.run(mode: .default, before: Date(timeIntervalSinceNow: 0.05)) }
        XCTAssertEqual(count.value, 2)
        AudioServicesRemoveSystemSoundCompletion(sound)
    }

    /// Fifty plays in a second each sound once, whole. Each click is one positive lobe (half a
    /// 100 Hz sine, 5 ms), so the server's mix of overlapping clicks adds their areas exactly: the
    /// area heard, in units of one click heard alone, is the number of whole clicks played,
    /// however the plays bunch on a busy machine or share a graph cycle. A dropped or cut play
    /// reads below 50, a play heard twice above. Their order and timing on the clock are
    /// VirtualSystemSoundTests'.
    func testFiftySoundsInOneSecondAllPlay() throws {
        let server = try TestSound.server()
        // 50 stacked in one cycle still stay below full scale.
        let click = try create(try tone("click.wav", seconds: 0.005, frequency: 100, amplitude: 0.02))
        defer { AudioServicesDisposeSystemSoundID(click) }
        let capture = try SignalCapture(server: server, device: "speaker.monitor")
        let played = Mutex(0)
        AudioServicesPlaySystemSoundWithCompletion(click) { played.withLock { $0 += 1 } }
        XCTAssertTrue(waitUntil(timeout: 3) { played.withLock { $0 } == 1 }, "the lone click's completion")
        // What the monitor had not yet delivered of the lone click arrives within 0.5 s.
        try capture.waitFor(frames: capture.frameCount + 24000, timeout: 3)
        let split = capture.frameCount
        let start = Date()
        for n in 0..<50 {
            // Pacing the stimulus: one sound every 20 ms.
            let due = start.addingTimeInterval(Double(n) * 0.02)
            let wait = due.timeIntervalSinceNow
            if wait > 0 { usleep(UInt32(wait * 1e6)) }
            AudioServicesPlaySystemSoundWithCompletion(click) { played.withLock { $0 += 1 } }
        }
        XCTAssertTrue(waitUntil(timeout: 5) { played.withLock { $0 } == 51 }, "completions: \(played.withLock { $0 } - 1) of 50")
        try capture.waitFor(frames: capture.frameCount + 24000, timeout: 3)
        let heard = capture.stop()[0]
        let alone = heard[..<split].reduce(0.0) { $0 + Double($1) }
        let burst = heard[split...].reduce(0.0) { $0 + Double($1) }
        XCTAssertGreaterThan(alone, 0, "the lone click was not heard")
        XCTAssertEqual(burst / alone, 50, accuracy: 0.5, "whole clicks heard")
    }

    func testPropertiesRolesAndErrors() throws {
        let server = try TestSound.server()
        let sound = try create(try tone("long.wav", seconds: 1, frequency: 500, amplitude: 0.1))
        var id = sound
        var value: UInt32 = 9
        var size: UInt32 = 4
        XCTAssertEqual(AudioServicesGetProperty(kAudioServicesPropertyIsUISound, 4, &id, &size, &value), kAudioServicesNoError)
        XCTAssertEqual(value, 1, "a UI sound unless told otherwise")
        /// The `media.role` of the server's sample-playback streams now.
        func roles() -> [String] {
            ((try? server.pactl(["list", "sink-inputs"])) ?? "").split(separator: "\n")
                .compactMap { line in line.contains("media.role") ? line.split(separator: "\"").dropFirst().first.map(String.init) : nil }
        }
        AudioServicesPlaySystemSound(sound)
        XCTAssertTrue(waitUntil(timeout: 2) { roles().contains("event") }, "a UI sound plays with the event role")
        XCTAssertTrue(waitUntil(timeout: 3) { !roles().contains("event") })
        var off: UInt32 = 0
        XCTAssertEqual(AudioServicesSetProperty(kAudioServicesPropertyIsUISound, 4, &id, 4, &off), kAudioServicesNoError)
        XCTAssertEqual(AudioServicesGetProperty(kAudioServicesPropertyIsUISound, 4, &id, &size, &value), kAudioServicesNoError)
        XCTAssertEqual(value, 0)
        let done = Mutex(false)
        AudioServicesPlaySystemSoundWithCompletion(sound) { done.withLock { $0 = true } }
        var seen: Set<String> = []
        XCTAssertTrue(waitUntil(timeout: 3) {
            seen.formUnion(roles())
            return done.withLock { $0 }
        })
        XCTAssertFalse(seen.contains("event"), "a sound that is no UI sound has no event role")
        XCTAssertTrue(seen.contains("game"), "it plays as an app's sound effect: \(seen)")
        XCTAssertEqual(AudioServicesSetProperty(kAudioServicesPropertyCompletePlaybackIfAppDies, 4, &id, 4, &off), kAudioServicesUnsupportedPropertyError)
        XCTAssertEqual(AudioServicesGetProperty(kAudioServicesPropertyCompletePlaybackIfAppDies, 4, &id, &size, &value), kAudioServicesNoError)
        XCTAssertEqual(value, 1, "the server finishes every sound")
        XCTAssertEqual(AudioServicesGetProperty(fourCC("nope"), 4, &id, &size, &value), kAudioServicesUnsupportedPropertyError)
        var short: UInt16 = 0
        XCTAssertEqual(AudioServicesGetProperty(kAudioServicesPropertyIsUISound, 2, &short, &size, &value), kAudioServicesBadSpecifierSizeError)

        XCTAssertEqual(AudioServicesDisposeSystemSoundID(sound), kAudioServicesNoError)
        XCTAssertEqual(AudioServicesDisposeSystemSoundID(sound), kAudioServicesSystemSoundUnspecifiedError, "disposed already")
        XCTAssertEqual(AudioServicesGetProperty(kAudioServicesPropertyIsUISound, 4, &id, &size, &value), kAudioServicesSystemSoundUnspecifiedError)
        let noop: AudioServicesSystemSoundCompletionProc = { _, _ in }
        XCTAssertEqual(AudioServicesAddSystemSoundCompletion(sound, nil, nil, noop, nil), kAudioServicesSystemSoundUnspecifiedError)

        // Files that cannot be system sounds.
        var bad: SystemSoundID = 0
        XCTAssertNotEqual(AudioServicesCreateSystemSoundID(scratch.appendingPathComponent("missing.wav") as CFURL, &bad), kAudioServicesNoError)
        let long = try tone("too-long.wav", seconds: 31, frequency: 100, amplitude: 0.01)
        XCTAssertEqual(AudioServicesCreateSystemSoundID(long as CFURL, &bad), kAudioServicesSystemSoundExceededMaximumDurationError)
        // Vibrate is accepted, silent, and completes.
        let vibrated = Mutex(false)
        AudioServicesPlaySystemSoundWithCompletion(kSystemSoundID_Vibrate) { vibrated.withLock { $0 = true } }
        XCTAssertTrue(waitUntil(timeout: 1) { vibrated.withLock { $0 } })
    }
}
