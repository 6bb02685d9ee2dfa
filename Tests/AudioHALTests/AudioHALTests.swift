@testable import AudioHAL
import XCTest

final class SPSCRingTests: XCTestCase {
    func testOrderCapacityAndWraparound() {
        let ring = SPSCRing<Int>(minimumCapacity: 5)
        XCTAssertEqual(ring.capacity, 8)
        for round in 0..<10 {
            for i in 0..<8 { XCTAssertTrue(ring.push(round * 8 + i)) }
            XCTAssertFalse(ring.push(-1), "full")
            for i in 0..<8 { XCTAssertEqual(ring.pop(), round * 8 + i) }
            XCTAssertNil(ring.pop())
        }
    }

    func testTwoThreadsLoseNothing() {
        let ring = SPSCRing<Int>(minimumCapacity: 64)
        let count = 200_000
        let producer = Thread {
            var i = 0
            while i < count { if ring.push(i) { i += 1 } }
        }
        producer.start()
        var expected = 0
        while expected < count {
            if let v = ring.pop() {
                XCTAssertEqual(v, expected)
                if v != expected { break }
                expected += 1
            }
        }
        XCTAssertEqual(expected, count)
    }

    func testTimeAnchor() {
        let anchor = TimeAnchor()
        XCTAssertNil(anchor.load())
        anchor.store(sampleTime: 480, hostTime: 10_000_000)
        let value = anchor.load()
        XCTAssertEqual(value?.sampleTime, 480)
        XCTAssertEqual(value?.hostTime, 10_000_000)
    }
}

/// The virtual backend: a clock the test advances; streams render exactly on demand.
final class VirtualBackendTests: XCTestCase {
    final class Ramp: HALStreamClient, @unchecked Sendable {
        var next: Float = 0
        var captured: [Float] = []
        var times: [Int64] = []
        override func render(_ output: UnsafeMutablePointer<Float>, frames: Int, time: HALRenderTime) -> Int {
            times.append(time.sampleTime)
            for i in 0..<frames {
                output[i] = next
                next += 1
            }
            return frames
        }
        override func capture(_ input: UnsafePointer<Float>, frames: Int, time: HALRenderTime) {
            captured += UnsafeBufferPointer(start: input, count: frames)
        }
    }

    func testAdvanceRendersAndCapturesExactly() throws {
        let backend = VirtualBackend(sampleRate: 48000, channels: 1)
        let source = Ramp()
        let output = try backend.openOutput(HALStreamRequest(format: .init(sampleRate: 48000, channels: 1), bufferDuration: 0.01, name: "t", startCorked: false), source: source)
        let sink = Ramp()
        let input = try backend.openInput(HALStreamRequest(format: .init(sampleRate: 24000, channels: 1), bufferDuration: 0.01, name: "t", startCorked: false), sink: sink)
        backend.inputSignal = { _, first, buffer in
            for i in 0..<buffer.count { buffer[i] = Float(first) + Float(i) }
        }
        let first = backend.advance(frames: 480)
        XCTAssertEqual(first[ObjectIdentifier(output)], (0..<480).map(Float.init))
        backend.advance(frames: 96)
        XCTAssertEqual(source.times, [0, 480])
        XCTAssertEqual(sink.captured, (0..<288).map(Float.init), "the input runs at its own rate: half as many frames")
        output.setCorked(true)
        let corked = backend.advance(frames: 10)
        XCTAssertEqual(corked[ObjectIdentifier(output)], [Float](repeating: 0, count: 10), "a corked stream renders silence")
        XCTAssertEqual(backend.hostTime, VirtualBackend.epoch + UInt64(586.0 / 48000 * 1e9), "the clock counts every frame advanced from its epoch")
        output.close()
        input.close()
    }
}

/// The semaphore the queues' callback threads sleep on: a post wakes a waiter, and a timed wait
/// ends on the monotonic clock.
final class WakeupTests: XCTestCase {
    func testSignalWakesAndTimeoutEnds() {
        let wakeup = Wakeup()
        wakeup.signal()
        XCTAssertTrue(wakeup.wait(timeout: 0), "a post made before the wait is taken at once")
        let start = hostNow()
        XCTAssertFalse(wakeup.wait(timeout: 0.05), "nothing posted")
        let waited = Double(hostNow() - start) / 1e9
        XCTAssertGreaterThanOrEqual(waited, 0.05, "the wait ended before its timeout")
        XCTAssertLessThan(waited, 5, "the wait outlived its timeout by seconds")
        XCTAssertFalse(wakeup.wait(timeout: -1), "a negative timeout ends at once")
        XCTAssertFalse(wakeup.wait(timeout: .nan), "so does NaN")
        Thread { wakeup.signal() }.start()
        XCTAssertTrue(wakeup.wait(timeout: 5), "another thread's post wakes the waiter")
    }
}
