import AudioTestSupport
import Foundation
import XCTest

/// The real-time server thread neither allocates nor frees, from the first render of a run to its
/// end, whatever the public API does: `openavf-rtcheck` (built beside the tests, with the counting
/// malloc of CAllocCounter) runs every scenario (LPCM and compressed playback, capture, pan,
/// ramps, timed starts, pause and resume, both stops, reset, flush, drain, the player's loops and
/// seeks, an active session through a call and a route change, IOProcs on a device's own I/O thread) and exits 1 on any count of the
/// project's own, or of libpulse's where libpulse has no reason to. Scripts/test runs the
/// release build too.
final class ServerThreadAllocationTests: XCTestCase {
    func testTheRealTimeThreadNeitherAllocatesNorFrees() throws {
        let tool = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("openavf-rtcheck").path
        guard FileManager.default.isExecutableFile(atPath: tool) else {
            return XCTFail("openavf-rtcheck is not built beside the tests: run swift build --build-tests")
        }
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("rtcheck-\(UUID().uuidString.prefix(8))")
        let out = scratch.path + ".out", err = scratch.path + ".err"
        defer {
            unlink(out)
            unlink(err)
        }
        let child = try ChildProcess(tool, [], environment: ProcessInfo.processInfo.environment, stdout: .file(out), stderr: .file(err))
        XCTAssertTrue(waitUntil(timeout: 120) { !child.isRunning }, "openavf-rtcheck did not finish")
        let code = child.wait()
        let report = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
        let problems = (try? String(contentsOfFile: err, encoding: .utf8)) ?? ""
        print(report)
        if report.contains("not in effect") {
            // A sanitizer build: its runtime owns malloc, so nothing is counted; the normal build
            // runs this test, and the sanitizer run is the other proof of the real-time rules.
            throw XCTSkip("allocation counting is off under a sanitizer (Scripts/sanitize); the normal build checks it")
        }
        XCTAssertEqual(code, 0, "allocations or frees on the real-time thread:\n\(report)\(problems)")
        // Capture and the session may show libpulse's own bookkeeping (the tool says why); the
        // rest must be clean outright.
        for scenario in ["lpcm-playback", "timed-start-reset-stop", "compressed-playback", "player", "ioproc", "engine", "engine-timepitch", "voice-processing"] {
            XCTAssertTrue(report.contains("\(scenario) ") && report.split(separator: "\n").contains {
                $0.contains(scenario) && $0.contains("allocations 0  frees 0  ")
            }, "\(scenario) is not clean:\n\(report)")
        }
        for scenario in ["capture", "session"] { XCTAssertTrue(report.contains("  \(scenario) "), "\(scenario) did not run:\n\(report)") }
    }
}
