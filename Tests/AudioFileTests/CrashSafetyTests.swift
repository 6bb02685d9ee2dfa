import AudioTestSupport
import AudioToolbox
import Foundation
import XCTest

/// Acceptance 3: a CAF being written by a process killed with SIGKILL opens and holds every
/// packet written before the last completed write call.
final class CrashSafetyTests: XCTestCase {
    var dir: URL!
    override func setUpWithError() throws { dir = try temporaryDirectory() }
    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: dir) }

    /// The executables built beside this test bundle.
    var productsDirectory: URL { URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent() }

    func packetBytes(_ index: Int, size: Int) -> [UInt8] {
        (0..<size).map { UInt8(truncatingIfNeeded: index &* 131 &+ $0 &* 7 &+ ($0 >> 3)) }
    }

    func testKilledRecordingKeepsEveryCompletedWrite() throws {
        let writer = productsDirectory.appendingPathComponent("openavf-crashwriter").path
        guard FileManager.default.isExecutableFile(atPath: writer) else {
            return XCTFail("openavf-crashwriter is not built beside the tests: run swift build --build-tests")
        }
        for (kind, size) in [("lpcm", 4), ("ima4", 68), ("ulaw", 1)] {
            let url = dir.appendingPathComponent("crash-\(kind).caf")
            let progress = dir.appendingPathComponent("progress-\(kind).txt")
            let child = try ChildProcess(writer, [url.path, kind], environment: [:], stdout: .file(progress.path), stderr: .inherit)
            // Wait (bounded) until at least 30 write calls completed, then kill without warning.
            let started = waitUntil(timeout: 20) {
                let text = (try? String(contentsOf: progress, encoding: .utf8)) ?? ""
                return text.split(separator: "\n").count >= 30
            }
            kill(child.pid, SIGKILL)
            _ = child.wait()
            XCTAssertTrue(started, "the writer did not get going: \(kind)")
            // The last complete line is the last completed write call.
            let text = try String(contentsOf: progress, encoding: .utf8)
            let lines = text.split(separator: "\n", omittingEmptySubsequences: true)
            let complete = text.hasSuffix("\n") ? lines : lines.dropLast()
            let promised = Int(complete.last ?? "0") ?? 0
            XCTAssertGreaterThanOrEqual(promised, 3000, kind)

            var file: AudioFileID?
            try check(AudioFileOpenURL(url as CFURL, .readPermission, kAudioFileCAFType, &file), "open killed \(kind) recording")
            defer { AudioFileClose(file!) }
            let packets = Int(try fileProperty(file!, kAudioFilePropertyAudioDataPacketCount, UInt64(0)))
            XCTAssertGreaterThanOrEqual(packets, promised, "\(kind): \(packets) packets survived, \(promised) were written")
            var buffer = [UInt8](repeating: 0, count: promised * size)
            var bytes = UInt32(buffer.count)
            var n = UInt32(promised)
            try check(AudioFileReadPacketData(file!, false, &bytes, nil, 0, &n, &buffer), "read \(kind)")
            XCTAssertEqual(Int(n), promised, kind)
            var expected: [UInt8] = []
            expected.reserveCapacity(buffer.count)
            for i in 0..<promised { expected += packetBytes(i, size: size) }
            XCTAssertTrue(buffer == expected, "\(kind): surviving packets differ from what was written")
        }
    }
}
