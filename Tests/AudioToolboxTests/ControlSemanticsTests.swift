import AudioTestSupport
import AudioToolbox
import Foundation
import XCTest

/// A float32 mono 48 kHz playback queue whose buffers the test enqueues by hand; the callback
/// only records which buffers came back.
final class ManualQueue: @unchecked Sendable {
    let rate = 48000.0
    let queue: AudioQueueRef
    let lock = NSLock()
    var returned: [AudioQueueBufferRef] = []
    let runningLog = RunningLog()
    var running: [UInt32] { runningLog.values }
    var stopped: DispatchSemaphore { runningLog.stopped }
    var enqueueDuringCallback: OSStatus?
    var tryEnqueueInCallback = false

    init() throws {
        var format = lpcm(rate: 48000, channels: 1, bits: 32, float: true)
        var q: AudioQueueRef?
        let holder = Holder()
        let status = AudioQueueNewOutput(&format, { userData, queue, buffer in
            let me = Unmanaged<Holder>.fromOpaque(userData!).takeUnretainedValue().owner!
            me.lock.lock()
            me.returned.append(buffer)
            let tryAgain = me.tryEnqueueInCallback
            me.lock.unlock()
            if tryAgain {
                let status = AudioQueueEnqueueBuffer(queue, buffer, 0, nil)
                me.lock.lock()
                me.enqueueDuringCallback = status
                me.lock.unlock()
            }
        }, Unmanaged.passUnretained(holder).toOpaque(), nil, nil, 0, &q)
        guard status == noErr, let q else { throw QueueTestError.status(status) }
        queue = q
        holder.owner = self
        self.holder = holder
        runningLog.listen(to: q)
    }

    /// Breaks the reference cycle a C context would otherwise need.
    final class Holder: @unchecked Sendable { weak var owner: ManualQueue? }
    private var holder: Holder?

    /// Allocates a buffer holding `samples`.
    func buffer(_ samples: [Float]) -> AudioQueueBufferRef {
        var b: AudioQueueBufferRef?
        AudioQueueAllocateBuffer(queue, UInt32(samples.count * 4), &b)
        samples.withUnsafeBytes { b!.pointee.mAudioData.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        b!.pointee.mAudioDataByteSize = UInt32(samples.count * 4)
        return b!
    }

    @discardableResult
    func enqueue(_ samples: [Float]) -> AudioQueueBufferRef {
        let b = buffer(samples)
        AudioQueueEnqueueBuffer(queue, b, 0, nil)
        return b
    }

    var returnedCount: Int {
        lock.lock()
        defer { lock.unlock() }
        return returned.count
    }

    func dispose() { AudioQueueDispose(queue, true) }
}

/// Integration: transport controls, measured on the speaker's monitor.
final class ControlSemanticsTests: XCTestCase {
    var server: PrivatePulseServer!
    override func setUp() async throws { server = try TestSound.server() }

    private func tone(_ seconds: Double, _ amplitude: Float = 0.5, frequency: Double = 1000) -> [Float] {
        SignalAnalysis.sine(frequency: frequency, sampleRate: 48000, seconds: seconds, amplitude: amplitude)
    }

    /// Captures the speaker while `body` runs, then `tail` seconds more.
    private func capture(tail: Double = 0.3, _ body: () throws -> Void) throws -> [Float] {
        try capture(tail: tail) { (_: SignalCapture) in try body() }
    }

    /// ``capture(tail:_:)`` whose body sees the capture (to wait on the server's clock).
    private func capture(tail: Double = 0.3, _ body: (SignalCapture) throws -> Void) throws -> [Float] {
        let capture = try SignalCapture(server: server, device: "speaker.monitor")
        try body(capture)
        try capture.waitFor(frames: capture.frameCount + Int(tail * 48000), timeout: 5)
        return capture.stop()[0]
    }

    func testAsynchronousStopPlaysEverythingAndReportsIsRunning() throws {
        let q = try ManualQueue()
        defer { q.dispose() }
        let frames = [4800, 7000, 1234, 9999]
        let captured = try capture {
            for n in frames { q.enqueue(tone(Double(n) / 48000)) }
            XCTAssertEqual(AudioQueueStart(q.queue, nil), noErr)
            XCTAssertEqual(AudioQueueStop(q.queue, false), noErr)
            XCTAssertEqual(q.stopped.wait(timeout: .now() + 5), .success)
        }
        XCTAssertEqual(q.running, [1, 0], "IsRunning listener: on start, and at the end of the asynchronous stop")
        XCTAssertEqual(q.returnedCount, frames.count)
        let start = try XCTUnwrap(SignalAnalysis.onset(captured, threshold: 0.001))
        let end = try XCTUnwrap(SignalAnalysis.offset(captured, threshold: 0.001))
        // Each buffer restarts the sine at phase 0, so the signal is continuous at the joins except
        // for tiny values; the whole length must be every frame enqueued, within 1 ms.
        XCTAssertEqual(end - start + 1, frames.reduce(0, +), accuracy: 48)
    }

    func testImmediateStopDropsQueuedAudio() throws {
        let q = try ManualQueue()
        defer { q.dispose() }
        let captured = try capture {
            for _ in 0..<4 { q.enqueue(tone(0.5)) }
            XCTAssertEqual(AudioQueueStart(q.queue, nil), noErr)
            XCTAssertTrue(waitUntil(timeout: 5) { q.returnedCount >= 1 }, "first buffer never finished")
            XCTAssertEqual(AudioQueueStop(q.queue, true), noErr)
            XCTAssertTrue(waitUntil(timeout: 5) { q.returnedCount == 4 }, "every buffer comes back after an immediate stop")
        }
        let start = try XCTUnwrap(SignalAnalysis.onset(captured, threshold: 0.01))
        let end = try XCTUnwrap(SignalAnalysis.offset(captured, threshold: 0.01))
        let played = Double(end - start) / 48000
        XCTAssertGreaterThan(played, 0.1)
        XCTAssertLessThan(played, 1.0, "an immediate stop must not play out the queue (2 s enqueued)")
        XCTAssertEqual(q.running.last, 0)
    }

    func testPauseThenStartContinuesWithoutLossOrRepeat() throws {
        let q = try ManualQueue()
        defer { q.dispose() }
        let source = SignalAnalysis.chirp(from: 300, to: 3000, sampleRate: 48000, seconds: 1.2)
        let captured = try capture { (monitor: SignalCapture) in
            for i in stride(from: 0, to: source.count, by: 2400) { q.enqueue(Array(source[i..<min(i + 2400, source.count)])) }
            XCTAssertEqual(AudioQueueStart(q.queue, nil), noErr)
            XCTAssertTrue(waitUntil(timeout: 5) { q.returnedCount >= 8 })
            XCTAssertEqual(AudioQueuePause(q.queue), noErr)
            let returnedAtPause = q.returnedCount
            // Paused for 0.3 s of the server's own clock (what the speaker's monitor delivers);
            // then nothing more has been consumed but the buffer playing when it paused.
            try monitor.waitFor(frames: monitor.frameCount + 14400, timeout: 5)
            XCTAssertLessThanOrEqual(q.returnedCount, returnedAtPause + 1, "a paused queue consumed buffers")
            XCTAssertEqual(AudioQueueStart(q.queue, nil), noErr)
            XCTAssertTrue(waitUntil(timeout: 5) { q.returnedCount == 20 })
            XCTAssertEqual(AudioQueueStop(q.queue, false), noErr)
            XCTAssertEqual(q.stopped.wait(timeout: .now() + 5), .success)
        }
        let start = try XCTUnwrap(SignalAnalysis.onset(captured, threshold: 0.001))
        let end = try XCTUnwrap(SignalAnalysis.offset(captured, threshold: 0.001))
        let played = Array(captured[start...end])
        // Remove the silent stretch of the pause (exact zeros), then compare with the source.
        var joined: [Float] = []
        var run: [Float] = []
        var longestSilence = 0
        for x in played {
            if x == 0 { run.append(x) } else {
                if run.count < 240 { joined += run } else { longestSilence = max(longestSilence, run.count) }
                run = []
                joined.append(x)
            }
        }
        XCTAssertGreaterThan(longestSilence, 48000 / 10, "the pause left no silence")
        // The float path is exact: every source frame (after its leading zero) comes back once.
        // Where the first sound falls in the source is found first: pipewire-pulse may lose the
        // first frames of a stream as it starts, up to 255 (a partial graph cycle; REMAINING.md,
        // "On PipeWire"), which is the start, not the pause this test is about.
        var expected = Array(source.drop { $0 == 0 })
        if let lag = (0..<2048).first(where: { lag in
            lag + 256 <= expected.count && joined.count >= 256 && (0..<256).allSatisfy { abs(joined[$0] - expected[lag + $0]) <= 1e-6 }
        }) {
            if lag > 0 { print("the first \(lag) frames were not heard") }
            expected.removeFirst(lag)
        }
        XCTAssertEqual(joined.count, expected.count, "frames lost or repeated across the pause")
        let mismatches = zip(joined, expected).filter { abs($0 - $1) > 1e-6 }.count
        XCTAssertEqual(mismatches, 0, "frames differ from the source after the pause")
    }

    func testTrimmedFramesAreExactlyAbsent() throws {
        let q = try ManualQueue()
        defer { q.dispose() }
        let source = tone(0.1, 0.5, frequency: 440)
        let captured = try capture {
            let b = q.buffer(source)
            XCTAssertEqual(AudioQueueEnqueueBufferWithParameters(q.queue, b, 0, nil, 1000, 800, 0, nil, nil, nil), noErr)
            XCTAssertEqual(AudioQueueStart(q.queue, nil), noErr)
            XCTAssertEqual(AudioQueueStop(q.queue, false), noErr)
            XCTAssertEqual(q.stopped.wait(timeout: .now() + 5), .success)
        }
        let start = try XCTUnwrap(captured.firstIndex { $0 != 0 })
        let end = try XCTUnwrap(captured.lastIndex { $0 != 0 })
        let expected = Array(source[1000..<(source.count - 800)])
        // The kept frames are exact (float through a 48 kHz float sink), so the trim is exact too.
        var first = try XCTUnwrap(expected.firstIndex { $0 != 0 })
        let last = try XCTUnwrap(expected.lastIndex { $0 != 0 })
        // pipewire-pulse may lose a stream's first frames as it starts (a partial graph cycle;
        // REMAINING.md, "On PipeWire"): that is the start, not the trim this test is about, so
        // where the first sound heard falls in the kept frames is found first.
        let lag = try XCTUnwrap((0..<2048).first { lag in
            first + lag + 64 <= expected.count && start + 64 <= captured.count
                && (0..<64).allSatisfy { abs(captured[start + $0] - expected[first + lag + $0]) <= 1e-6 }
        }, "the kept frames were not heard")
        if lag > 0 {
            print("the first \(lag) frames were not heard")
            XCTAssertEqual(PrivatePulseServer.Kind.fromEnvironment, .pipewire, "frames lost as the stream started")
        }
        first += lag
        XCTAssertEqual(end - start, last - first)
        XCTAssertEqual(captured[start], expected[first], accuracy: 1e-6)
        XCTAssertEqual(captured[end], expected[last], accuracy: 1e-6)
    }

    func testParameterEventGainAppliesToItsBufferOnly() throws {
        let q = try ManualQueue()
        defer { q.dispose() }
        let captured = try capture {
            q.enqueue(tone(0.3))
            var event = AudioQueueParameterEvent(mID: kAudioQueueParam_Volume, mValue: 0.5)
            let b = q.buffer(tone(0.3))
            XCTAssertEqual(AudioQueueEnqueueBufferWithParameters(q.queue, b, 0, nil, 0, 0, 1, &event, nil, nil), noErr)
            q.enqueue(tone(0.3))
            XCTAssertEqual(AudioQueueStart(q.queue, nil), noErr)
            XCTAssertEqual(AudioQueueStop(q.queue, false), noErr)
            XCTAssertEqual(q.stopped.wait(timeout: .now() + 5), .success)
        }
        let start = try XCTUnwrap(SignalAnalysis.onset(captured, threshold: 0.01))
        let part = 14400
        let level = { (i: Int) in SignalAnalysis.rmsDB(captured[(start + i * part + 1000)..<(start + (i + 1) * part - 1000)]) }
        XCTAssertEqual(level(1) - level(0), -6.02, accuracy: 0.05)
        XCTAssertEqual(level(2) - level(0), 0, accuracy: 0.05)
    }

    func testStartTimeInTheFuture() throws {
        let q = try ManualQueue()
        defer { q.dispose() }
        // The reference clock: an input queue on the speaker's monitor, whose buffers carry the
        // host time of their first frame.
        let rate = 48000.0
        var format = lpcm(rate: rate, channels: 1)
        let sink = RecordingSink()
        var input: AudioQueueRef?
        XCTAssertEqual(AudioQueueNewInput(&format, RecordingSink.callback, sink.context, nil, nil, 0, &input), noErr)
        let inQ = try XCTUnwrap(input)
        let device: CFString? = "speaker.monitor"
        XCTAssertEqual(withUnsafePointer(to: device) {
            AudioQueueSetProperty(inQ, kAudioQueueProperty_CurrentDevice, $0, UInt32(MemoryLayout<CFString?>.size))
        }, noErr)
        for _ in 0..<8 {
            var b: AudioQueueBufferRef?
            AudioQueueAllocateBuffer(inQ, 480 * 2, &b)
            AudioQueueEnqueueBuffer(inQ, b!, 0, nil)
        }
        XCTAssertEqual(AudioQueueStart(inQ, nil), noErr)
        XCTAssertTrue(waitUntil(timeout: 5) { sink.callbackCount > 20 })

        q.enqueue(tone(0.2))
        XCTAssertEqual(AudioQueuePrime(q.queue, 0, nil), noErr)
        var start = AudioTimeStamp()
        start.mHostTime = AudioGetCurrentHostTime() + 400_000_000
        start.mFlags = .hostTimeValid
        XCTAssertEqual(AudioQueueStart(q.queue, &start), noErr)
        XCTAssertEqual(AudioQueueStop(q.queue, false), noErr)
        XCTAssertEqual(q.stopped.wait(timeout: .now() + 5), .success)
        XCTAssertTrue(waitUntil(timeout: 5) { sink.callbackCount > 60 })
        sink.lock.lock()
        sink.keepGoing = false
        let samples = sink.samples
        let stamps = sink.stamps
        sink.lock.unlock()
        AudioQueueDispose(inQ, true)

        let onset = try XCTUnwrap(SignalAnalysis.onset(samples, threshold: 0.05))
        // The capture clock: each buffer's stamp less its place in the recording, the median of
        // them all. One buffer's stamp can be a server period (5.3 ms) off when the server's
        // latency estimate moves, so a single stamp can put the start that much early.
        let origins = stamps.indices.map { Double(stamps[$0].mHostTime) - Double($0 * 480) / rate * 1e9 }.sorted()
        let heard = origins[origins.count / 2] + Double(onset) / rate * 1e9
        let error = (heard - Double(start.mHostTime)) / 1e6
        print("start time error: \(error) ms")
        // pipewire-pulse's timing moves in whole graph cycles (256 frames): there a start can be
        // one cycle off (REMAINING.md, "On PipeWire"); PulseAudio is held to 2 ms. Under
        // ThreadSanitizer (CI's race check) the client runs several times slower and libpulse's
        // latency estimates, interpolated between the server's timing replies, drift by a few
        // milliseconds: there the start is held to 10 ms, which still fails a start time ignored
        // (400 ms early) or misread; the plain suites hold the 2 ms.
        let cycle = PrivatePulseServer.Kind.fromEnvironment == .pipewire ? 256 / rate * 1000 : 0
        let tolerance = (runsUnderThreadSanitizer ? 10 : 2) + cycle
        XCTAssertEqual(error, 0, accuracy: tolerance, "started \(error) ms from the requested time")
    }
}
