import AudioHAL
import AudioTestSupport
import AudioToolbox
import CAllocCounter
import Foundation
import XCTest

/// The server thread allocates nothing in steady state: a malloc hook (CAllocCounter) counts the
/// allocations made on PulseAudio's main loop thread during 10 s of playback.
final class ServerThreadAllocationTests: XCTestCase {
    func testNoAllocationsOnTheServerThreadDuringPlayback() throws {
        _ = try TestSound.server()
        XCTAssertEqual(openavf_alloc_counter_active(), 1, "the counting malloc is not in effect, so this test would prove nothing")
        let feeder = ToneFeeder.tone(frequency: 440, amplitude: 0.3, sampleRate: 48000, seconds: 12)
        let (queue, buffers) = try makeToneQueue(feeder, bufferSeconds: 0.010, count: 3)
        defer { AudioQueueDispose(queue, true) }
        var level: UInt32 = 1
        XCTAssertEqual(AudioQueueSetProperty(queue, kAudioQueueProperty_EnableLevelMetering, &level, 4), noErr)
        for b in buffers { feeder.fill(queue, b) }
        XCTAssertEqual(AudioQueueStart(queue, nil), noErr)
        let backend = try XCTUnwrap(try HAL.backend() as? PulseBackend)
        // Warm up: the first second may allocate (stream setup, first timing updates).
        XCTAssertTrue(waitUntil(timeout: 5) { feeder.produced > 48000 })
        openavf_alloc_watch_thread(backend.serverThread())
        XCTAssertTrue(waitUntil(timeout: 15) { feeder.produced >= 11 * 48000 }, "playback stalled")
        let count = openavf_alloc_count()
        openavf_alloc_unwatch()
        var callers = [UnsafeMutableRawPointer?](repeating: nil, count: 16)
        let n = Int(openavf_alloc_callers(&callers, 16))
        let names = callers[0..<n].map { address -> String in
            var text = [CChar](repeating: 0, count: 256)
            openavf_alloc_describe(address, &text, 256)
            return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        XCTAssertEqual(count, 0, "allocations on the server thread during 10 s of playback, from: \(names)")
        XCTAssertGreaterThan(feeder.callbackCount, 900, "the queue really played")
    }
}
