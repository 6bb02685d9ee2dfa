@testable import AudioHAL
import AudioToolbox
import AudioTestSupport
import Foundation
import XCTest

/// The public queue API end to end on the virtual backend, set as the process's audio environment:
/// the test advances the clock by hand and checks every sample. Deterministic: where the queue's
/// callback thread has something to do first, the test waits for it on a condition (bounded),
/// never by sleeping.
final class VirtualEnvironmentTests: XCTestCase {
    private var virtual: VirtualBackend!
    private var environment: VirtualAudioSystem!

    override func setUp() {
        environment = VirtualAudioSystem()
        virtual = environment.backend
    }

    override func tearDown() {
        environment.restore()
        virtual = nil
    }

    /// What a queue's callbacks handed back, in order, with a condition to wait on.
    final class Log: @unchecked Sendable {
        struct State {
            var returned: [AudioQueueBufferRef] = []
            var captured: [[Float]] = []
            var running: [UInt32] = []
        }
        private let condition = NSCondition()
        private var state = State()

        var returned: [AudioQueueBufferRef] { locked { $0.returned } }
        var captured: [[Float]] { locked { $0.captured } }
        var running: [UInt32] { locked { $0.running } }

        func add(_ buffer: AudioQueueBufferRef, captured: [Float]? = nil) {
            locked {
                $0.returned.append(buffer)
                if let captured { $0.captured.append(captured) }
            }
        }

        func addRunning(_ value: UInt32) { locked { $0.running.append(value) } }

        /// Waits until `condition` holds; `false` after `timeout` seconds.
        func wait(timeout: Double = 5, until condition: (State) -> Bool) -> Bool {
            let deadline = Date(timeIntervalSinceNow: timeout)
            self.condition.lock()
            defer { self.condition.unlock() }
            while !condition(state) {
                if !self.condition.wait(until: deadline) { return condition(state) }
            }
            return true
        }

        private func locked<T>(_ body: (inout State) -> T) -> T {
            condition.lock()
            defer {
                condition.broadcast()
                condition.unlock()
            }
            return body(&state)
        }
    }

    private func makeOutput(_ log: Log) throws -> AudioQueueRef {
        var format = lpcm(rate: 48000, channels: 2, bits: 32, float: true)
        var q: AudioQueueRef?
        XCTAssertEqual(AudioQueueNewOutput(&format, { userData, _, buffer in
            Unmanaged<Log>.fromOpaque(userData!).takeUnretainedValue().add(buffer)
        }, Unmanaged.passUnretained(log).toOpaque(), nil, nil, 0, &q), noErr)
        let queue = try XCTUnwrap(q)
        AudioQueueAddPropertyListener(queue, kAudioQueueProperty_IsRunning, { userData, queue, id in
            var value: UInt32 = 0
            var size = UInt32(4)
            AudioQueueGetProperty(queue, id, &value, &size)
            Unmanaged<Log>.fromOpaque(userData!).takeUnretainedValue().addRunning(value)
        }, Unmanaged.passUnretained(log).toOpaque())
        return queue
    }

    /// A stereo buffer whose every sample is different: `base`, `base` + 1, … (scaled to stay small).
    private func buffer(_ queue: AudioQueueRef, frames: Int, base: Int) -> (AudioQueueBufferRef, [Float]) {
        let samples = (0..<(frames * 2)).map { Float(base + $0) / 65536 }
        var b: AudioQueueBufferRef?
        AudioQueueAllocateBuffer(queue, UInt32(samples.count * 4), &b)
        samples.withUnsafeBytes { b!.pointee.mAudioData.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        b!.pointee.mAudioDataByteSize = UInt32(samples.count * 4)
        return (b!, samples)
    }

    /// Advances the clock and returns what the one playback stream rendered.
    private func advance(_ frames: Int, file: StaticString = #filePath, line: UInt = #line) -> [Float] {
        let rendered = virtual.advance(frames: frames)
        XCTAssertEqual(rendered.count, 1, "one playback stream", file: file, line: line)
        return rendered.values.first ?? []
    }

    private func silence(_ frames: Int) -> [Float] { [Float](repeating: 0, count: frames * 2) }

    /// Fails with the first differing sample (not two whole arrays) when `actual` is not `expected`.
    private func assertSamples(_ actual: [Float], _ expected: [Float], _ message: String = "", file: StaticString = #filePath, line: UInt = #line) {
        guard actual != expected else { return }
        let first = (0..<min(actual.count, expected.count)).first { actual[$0] != expected[$0] } ?? min(actual.count, expected.count)
        let shown = { (x: [Float]) in first < x.count ? "\(x[first])" : "none" }
        XCTFail("\(message): \(actual.count) samples against \(expected.count); first difference at sample \(first) (frame \(first / 2)): "
            + "\(shown(actual)) against \(shown(expected))", file: file, line: line)
    }

    func testPrimeStartPauseResumeRenderExactly() throws {
        let log = Log()
        let queue = try makeOutput(log)
        defer { AudioQueueDispose(queue, true) }
        let (a, sa) = buffer(queue, frames: 480, base: 0)
        let (b, sb) = buffer(queue, frames: 480, base: 10_000)
        let (c, sc) = buffer(queue, frames: 240, base: 20_000)
        for x in [a, b, c] { XCTAssertEqual(AudioQueueEnqueueBuffer(queue, x, 0, nil), noErr) }
        var prepared: UInt32 = 0
        XCTAssertEqual(AudioQueuePrime(queue, 0, &prepared), noErr)
        XCTAssertEqual(prepared, 1200, "everything enqueued is ready")
        XCTAssertEqual(virtual.openRequests.map(\.purpose), [.media], "playback without a session is media")
        assertSamples(advance(480), silence(480), "primed, not started: nothing plays")

        XCTAssertEqual(AudioQueueStart(queue, nil), noErr)
        assertSamples(advance(480), sa)
        XCTAssertTrue(log.wait { $0.returned == [a] }, "the first buffer comes back once played")

        XCTAssertEqual(AudioQueuePause(queue), noErr)
        assertSamples(advance(240), silence(240), "paused: silence, nothing consumed")
        XCTAssertEqual(log.returned, [a])
        XCTAssertEqual(log.running, [1], "pausing does not stop")

        XCTAssertEqual(AudioQueueStart(queue, nil), noErr)
        assertSamples(advance(600), sb + Array(sc[0..<240]), "resumed where it paused, buffers back to back")
        assertSamples(advance(120), Array(sc[240...]) + silence(0))
        XCTAssertTrue(log.wait { $0.returned == [a, b, c] }, "every buffer back, in enqueue order")
        assertSamples(advance(96), silence(96), "run dry: silence")
    }

    func testFlushAndAsynchronousStopPlayEverythingThenStop() throws {
        let log = Log()
        let queue = try makeOutput(log)
        defer { AudioQueueDispose(queue, true) }
        let (a, sa) = buffer(queue, frames: 480, base: 0)
        let (b, sb) = buffer(queue, frames: 300, base: 5_000)
        for x in [a, b] { XCTAssertEqual(AudioQueueEnqueueBuffer(queue, x, 0, nil), noErr) }
        XCTAssertEqual(AudioQueueStart(queue, nil), noErr)
        XCTAssertEqual(AudioQueueFlush(queue), noErr)
        XCTAssertEqual(AudioQueueStop(queue, false), noErr)
        XCTAssertTrue(log.wait { $0.running == [1] })
        assertSamples(advance(480), sa)
        assertSamples(advance(480), sb + silence(180), "the rest, then silence")
        // The queue's thread asks the stream to drain once the last buffer has played.
        XCTAssertTrue(virtual.wait(timeout: 5) { $0.pendingDrains == 1 }, "no drain asked for")
        XCTAssertEqual(log.running, [1], "still running until the stream has drained")
        _ = advance(48)
        XCTAssertTrue(log.wait { $0.running == [1, 0] }, "stopped once drained")
        XCTAssertEqual(log.returned, [a, b])
    }

    func testDisposeNotImmediateDisposesAfterPlayingOut() throws {
        let log = Log()
        let queue = try makeOutput(log)
        let (a, sa) = buffer(queue, frames: 480, base: 0)
        XCTAssertEqual(AudioQueueEnqueueBuffer(queue, a, 0, nil), noErr)
        XCTAssertEqual(AudioQueueStart(queue, nil), noErr)
        XCTAssertEqual(AudioQueueDispose(queue, false), noErr)
        assertSamples(advance(480), sa, "what was enqueued plays")
        XCTAssertEqual(virtual.pendingDrains, 0, "the queue cannot know yet that nothing follows")
        assertSamples(advance(48), silence(48))
        XCTAssertTrue(virtual.wait(timeout: 5) { $0.pendingDrains == 1 }, "no drain asked for")
        XCTAssertEqual(virtual.openRequests.count, 1, "not disposed before it has played out")
        _ = advance(48)
        XCTAssertTrue(virtual.wait(timeout: 5) { $0.openRequests.isEmpty }, "the queue's stream closes with it")
        XCTAssertTrue(log.wait { $0.running == [1, 0] })
        XCTAssertEqual(log.returned, [a])
    }

    /// `AudioQueueEnqueueBufferWithParameters`' trims: exactly the frames named are left out,
    /// at both ends.
    func testTrimAtEnqueueLeavesOutExactlyTheTrimmedFrames() throws {
        let log = Log()
        let queue = try makeOutput(log)
        defer { AudioQueueDispose(queue, true) }
        let (a, sa) = buffer(queue, frames: 480, base: 0)
        XCTAssertEqual(AudioQueueEnqueueBufferWithParameters(queue, a, 0, nil, 100, 50, 0, nil, nil, nil), noErr)
        XCTAssertEqual(AudioQueueStart(queue, nil), noErr)
        assertSamples(advance(480), Array(sa[200..<860]) + silence(150), "frames 100..<430 of 480, then silence")
        XCTAssertTrue(log.wait { $0.returned == [a] })
        let (b, _) = buffer(queue, frames: 480, base: 0)
        XCTAssertEqual(AudioQueueEnqueueBufferWithParameters(queue, b, 0, nil, 300, 200, 0, nil, nil, nil), kAudio_ParamError, "trims longer than the buffer")
    }

    /// A parameter event at enqueue sets the gain of its own buffer, exactly, and not of the
    /// buffers around it (no ramp time asked for).
    func testParameterEventGainAppliesToItsBufferOnly() throws {
        let log = Log()
        let queue = try makeOutput(log)
        defer { AudioQueueDispose(queue, true) }
        let (a, sa) = buffer(queue, frames: 480, base: 0)
        let (b, sb) = buffer(queue, frames: 480, base: 1_000)
        let (c, sc) = buffer(queue, frames: 480, base: 2_000)
        var half = AudioQueueParameterEvent(mID: kAudioQueueParam_Volume, mValue: 0.5)
        XCTAssertEqual(AudioQueueEnqueueBuffer(queue, a, 0, nil), noErr)
        XCTAssertEqual(AudioQueueEnqueueBufferWithParameters(queue, b, 0, nil, 0, 0, 1, &half, nil, nil), noErr)
        XCTAssertEqual(AudioQueueEnqueueBuffer(queue, c, 0, nil), noErr)
        XCTAssertEqual(AudioQueueStart(queue, nil), noErr)
        assertSamples(advance(480), sa)
        assertSamples(advance(480), sb.map { $0 * 0.5 }, "its own buffer at half")
        assertSamples(advance(480), sc, "the next at the queue's gain again")
    }

    /// An immediate stop drops what is queued: nothing more plays, every buffer comes back, and
    /// IsRunning goes to 0.
    func testImmediateStopDropsQueuedAudio() throws {
        let log = Log()
        let queue = try makeOutput(log)
        defer { AudioQueueDispose(queue, true) }
        let (a, sa) = buffer(queue, frames: 480, base: 0)
        let (b, _) = buffer(queue, frames: 480, base: 1_000)
        let (c, _) = buffer(queue, frames: 480, base: 2_000)
        for x in [a, b, c] { XCTAssertEqual(AudioQueueEnqueueBuffer(queue, x, 0, nil), noErr) }
        XCTAssertEqual(AudioQueueStart(queue, nil), noErr)
        XCTAssertTrue(log.wait { $0.running == [1] }, "the listener reads IsRunning 1 once started")
        assertSamples(advance(480), sa)
        XCTAssertEqual(AudioQueueStop(queue, true), noErr)
        XCTAssertTrue(log.wait { Set($0.returned) == Set([a, b, c]) && $0.returned.count == 3 }, "every buffer back: \(log.returned)")
        XCTAssertTrue(log.wait { $0.running == [1, 0] }, "IsRunning: \(log.running)")
        let after = virtual.advance(frames: 480).values.flatMap { $0 }
        XCTAssertTrue(after.allSatisfy { $0 == 0 }, "nothing plays after an immediate stop")
    }

    /// `AudioQueueStart` at a sample time of the device: silence until that frame, then the first
    /// buffer's first frame exactly there.
    func testStartAtASampleTimeBeginsOnThatFrame() throws {
        let log = Log()
        let queue = try makeOutput(log)
        defer { AudioQueueDispose(queue, true) }
        let (a, sa) = buffer(queue, frames: 480, base: 0)
        XCTAssertEqual(AudioQueueEnqueueBuffer(queue, a, 0, nil), noErr)
        var at = AudioTimeStamp()
        at.mSampleTime = 1000
        at.mFlags = .sampleTimeValid
        XCTAssertEqual(AudioQueueStart(queue, &at), noErr)
        assertSamples(advance(480), silence(480))
        assertSamples(advance(960), silence(520) + Array(sa[0..<880]), "the first frame on device frame 1000")
        assertSamples(advance(480), Array(sa[880...]) + silence(440))
    }

    /// A buffer enqueued with a start time on the queue's timeline plays from that sample time:
    /// silence fills the gap after the buffer before it.
    func testEnqueueAtASampleTimeLeavesTheGapSilent() throws {
        let log = Log()
        let queue = try makeOutput(log)
        defer { AudioQueueDispose(queue, true) }
        let (a, sa) = buffer(queue, frames: 480, base: 0)
        let (b, sb) = buffer(queue, frames: 480, base: 1_000)
        XCTAssertEqual(AudioQueueEnqueueBuffer(queue, a, 0, nil), noErr)
        var at = AudioTimeStamp()
        at.mSampleTime = 1000
        at.mFlags = .sampleTimeValid
        var actual = AudioTimeStamp()
        XCTAssertEqual(AudioQueueEnqueueBufferWithParameters(queue, b, 0, nil, 0, 0, 0, nil, &at, &actual), noErr)
        XCTAssertEqual(actual.mSampleTime, 1000, "the time it will play at")
        XCTAssertEqual(AudioQueueStart(queue, nil), noErr)
        assertSamples(advance(1480), sa + silence(520) + sb)
    }

    func testInputQueueCapturesTheVirtualSignal() throws {
        let log = Log()
        virtual.inputSignal = { format, first, buffer in
            for i in 0..<buffer.count { buffer[i] = Float((Int(first) * format.channels + i) % 1000) / 1000 }
        }
        var format = lpcm(rate: 48000, channels: 1, bits: 32, float: true)
        var q: AudioQueueRef?
        XCTAssertEqual(AudioQueueNewInput(&format, { userData, _, buffer, _, _, _ in
            let bytes = Int(buffer.pointee.mAudioDataByteSize)
            let samples = Array(UnsafeBufferPointer(start: buffer.pointee.mAudioData.assumingMemoryBound(to: Float.self), count: bytes / 4))
            Unmanaged<Log>.fromOpaque(userData!).takeUnretainedValue().add(buffer, captured: samples)
        }, Unmanaged.passUnretained(log).toOpaque(), nil, nil, 0, &q), noErr)
        let queue = try XCTUnwrap(q)
        defer { AudioQueueDispose(queue, true) }
        var buffers: [AudioQueueBufferRef] = []
        for _ in 0..<2 {
            var b: AudioQueueBufferRef?
            XCTAssertEqual(AudioQueueAllocateBuffer(queue, 480 * 4, &b), noErr)
            XCTAssertEqual(AudioQueueEnqueueBuffer(queue, b!, 0, nil), noErr)
            buffers.append(b!)
        }
        XCTAssertEqual(AudioQueueStart(queue, nil), noErr)
        XCTAssertEqual(virtual.openRequests.count, 1)
        virtual.advance(frames: 480)
        XCTAssertTrue(log.wait { $0.returned == [buffers[0]] })
        virtual.advance(frames: 480)
        XCTAssertTrue(log.wait { $0.returned == buffers })
        let expected = (0..<960).map { Float($0 % 1000) / 1000 }
        XCTAssertEqual(log.captured, [Array(expected[0..<480]), Array(expected[480...])], "exactly the microphone's samples, in order")
        XCTAssertEqual(AudioQueueStop(queue, true), noErr)
    }
}
