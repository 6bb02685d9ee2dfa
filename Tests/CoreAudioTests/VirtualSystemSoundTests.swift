@testable import AudioHAL
import AudioTestSupport
import AudioToolbox
import Foundation
import Synchronization
import XCTest

/// System sounds on the virtual backend: each play is one whole play of the cached sound and one
/// completion, however many are asked for at once. (That they sound on a real server, and how
/// they overlap there, is `SystemSoundTests`'.)
final class VirtualSystemSoundTests: XCTestCase {
    private var environment: VirtualAudioSystem!
    private var virtual: VirtualBackend { environment.backend }
    private var scratch: URL!

    override func setUpWithError() throws {
        environment = VirtualAudioSystem()
        scratch = FileManager.default.temporaryDirectory.appendingPathComponent("openavf-vsounds-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    }

    override func tearDown() {
        environment.restore()
        try? FileManager.default.removeItem(at: scratch)
    }

    /// Fifty plays asked for at once: fifty sample streams, each of which renders the whole
    /// click and closes, and fifty completions once the clock has moved past them.
    func testFiftySoundsAtOnceEachPlayWholeAndCompleteOnce() throws {
        let url = scratch.appendingPathComponent("click.wav")
        _ = try runTool("sox", ["-n", "-r", "48000", "-c", "1", "-b", "16", url.path, "synth", "0.005", "sine", "2000", "vol", "0.5"], in: scratch)
        var click: SystemSoundID = 0
        XCTAssertEqual(AudioServicesCreateSystemSoundID(url as CFURL, &click), kAudioServicesNoError)
        defer { AudioServicesDisposeSystemSoundID(click) }
        let completed = Mutex(0)
        for _ in 0..<50 { AudioServicesPlaySystemSoundWithCompletion(click) { completed.withLock { $0 += 1 } } }
        XCTAssertTrue(virtual.wait(timeout: 5) { $0.openRequests.count == 50 }, "sample streams open: \(virtual.openRequests.count)")
        let rendered = virtual.advance(frames: 480)
        XCTAssertEqual(rendered.count, 50, "one stream per play")
        for samples in rendered.values {
            let channels = samples.count / 480
            let sounding = samples.prefix(240 * channels).filter { abs($0) > 0.01 }.count
            XCTAssertGreaterThan(sounding, 200 * channels, "each play renders the 240-frame click")
            XCTAssertTrue(samples.dropFirst(240 * channels).allSatisfy { $0 == 0 }, "and nothing after it")
        }
        XCTAssertTrue(waitUntil(timeout: 5) { completed.withLock { $0 } == 50 }, "completions: \(completed.withLock { $0 })")
        XCTAssertTrue(virtual.openRequests.isEmpty, "every sample stream closed")
    }
}
