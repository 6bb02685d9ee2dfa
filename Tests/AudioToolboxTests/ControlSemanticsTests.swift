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

/// Transport on a real server, measured on the speaker's monitor: an asynchronous stop plays
/// every frame enqueued, and a start at a host time is heard then. The exact rules (trims, gain
/// events, pause and resume, immediate stop, start and enqueue at a sample time) are
/// VirtualEnvironmentTests', on the virtual clock.
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
