import AudioTestSupport
import AudioToolbox
import Foundation
import XCTest

/// Where callbacks run: the queue's own thread, the run loop given, or the dispatch queue given.
/// On the virtual backend: a buffer comes back when the test advances the clock past it.
final class CallbackContextTests: XCTestCase {
    private var environment: VirtualAudioSystem!
    override func setUp() { environment = VirtualAudioSystem() }
    override func tearDown() { environment.restore() }

    final class Probe: @unchecked Sendable {
        let lock = NSLock()
        var threads: [Thread] = []
        var onQueue: [Bool] = []
        var count: Int {
            lock.lock()
            defer { lock.unlock() }
            return threads.count
        }
    }

    /// A playback queue whose callback records the thread it runs on.
    private func makeProbeQueue(_ probe: Probe, _ runLoop: CFRunLoop?, _ mode: CFString?) throws -> AudioQueueRef {
        var format = lpcm(rate: 48000, channels: 1)
        var q: AudioQueueRef?
        XCTAssertEqual(AudioQueueNewOutput(&format, { userData, _, _ in
            let probe = Unmanaged<Probe>.fromOpaque(userData!).takeUnretainedValue()
            probe.lock.lock()
            probe.threads.append(Thread.current)
            probe.lock.unlock()
        }, Unmanaged.passUnretained(probe).toOpaque(), runLoop, mode, 0, &q), noErr)
        return try XCTUnwrap(q)
    }

    private func enqueueShortBuffer(_ queue: AudioQueueRef) {
        var b: AudioQueueBufferRef?
        AudioQueueAllocateBuffer(queue, 960 * 2, &b)
        b!.pointee.mAudioDataByteSize = 960 * 2
        AudioQueueEnqueueBuffer(queue, b!, 0, nil)
    }

    func testCallbackRunsOnTheGivenRunLoop() throws {
        let probe = Probe()
        let queue = try makeProbeQueue(probe, CFRunLoopGetCurrent(), CFRunLoopMode.commonModes.rawValue)
        defer { AudioQueueDispose(queue, true) }
        enqueueShortBuffer(queue)
        XCTAssertEqual(AudioQueueStart(queue, nil), noErr)
        XCTAssertEqual(probe.count, 0, "no buffer comes back before the clock moves")
        environment.backend.advance(frames: 960)
        let deadline = Date(timeIntervalSinceNow: 5)
        while probe.count == 0 && Date() < deadline { CFRunLoopRunInMode(.defaultMode, 0.05, true) }
        XCTAssertEqual(probe.count, 1)
        XCTAssertTrue(probe.threads.first === Thread.current, "the callback ran on the run loop's thread")
    }

    func testBlockRunsOnTheGivenDispatchQueue() throws {
        let probe = Probe()
        let key = DispatchSpecificKey<Int>()
        let dispatchQueue = DispatchQueue(label: "callbacks")
        dispatchQueue.setSpecific(key: key, value: 7)
        var format = lpcm(rate: 48000, channels: 1)
        var q: AudioQueueRef?
        XCTAssertEqual(AudioQueueNewOutputWithDispatchQueue(&q, &format, 0, dispatchQueue) { _, _ in
            probe.lock.lock()
            probe.threads.append(Thread.current)
            probe.onQueue.append(DispatchQueue.getSpecific(key: key) == 7)
            probe.lock.unlock()
        }, noErr)
        let queue = try XCTUnwrap(q)
        defer { AudioQueueDispose(queue, true) }
        enqueueShortBuffer(queue)
        XCTAssertEqual(AudioQueueStart(queue, nil), noErr)
        XCTAssertEqual(probe.count, 0, "no buffer comes back before the clock moves")
        environment.backend.advance(frames: 960)
        XCTAssertTrue(waitUntil(timeout: 5) { probe.count == 1 })
        XCTAssertEqual(probe.onQueue, [true])
    }

    func testCallbackRunsOnTheQueuesOwnThreadWithoutARunLoop() throws {
        let probe = Probe()
        let queue = try makeProbeQueue(probe, nil, nil)
        defer { AudioQueueDispose(queue, true) }
        enqueueShortBuffer(queue)
        enqueueShortBuffer(queue)
        XCTAssertEqual(AudioQueueStart(queue, nil), noErr)
        XCTAssertEqual(probe.count, 0, "no buffer comes back before the clock moves")
        environment.backend.advance(frames: 1920)
        XCTAssertTrue(waitUntil(timeout: 5) { probe.count == 2 })
        XCTAssertFalse(probe.threads[0] === Thread.current)
        XCTAssertTrue(probe.threads[0] === probe.threads[1], "one callback thread per queue")
    }
}
