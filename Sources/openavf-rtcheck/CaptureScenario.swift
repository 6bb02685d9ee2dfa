// capture: a recording queue whose callback re-enqueues every buffer (LPCM and IMA4) starts, pauses, resumes and stops.
import AudioToolbox
import Foundation

/// A recording queue whose callback re-enqueues every buffer.
final class Capture: @unchecked Sendable {
    let queue: AudioQueueRef
    private let lock = NSLock()
    private var callbacks = 0
    var callbackCount: Int { lock.withLock { callbacks } }

    init(format: AudioStreamBasicDescription, bufferBytes: UInt32) throws {
        var format = format
        var made: AudioQueueRef?
        let box = Box()
        try check(AudioQueueNewInputWithDispatchQueue(&made, &format, 0, DispatchQueue(label: "rtcheck.capture")) { q, b, _, _, _ in
            box.owner?.lock.withLock { box.owner?.callbacks += 1 }
            _ = AudioQueueEnqueueBuffer(q, b, 0, nil)
        }, "AudioQueueNewInputWithDispatchQueue")
        queue = made!
        box.owner = self
        for _ in 0..<3 {
            var buffer: AudioQueueBufferRef?
            try check(AudioQueueAllocateBufferWithPacketDescriptions(queue, bufferBytes, 512, &buffer), "AudioQueueAllocateBuffer")
            buffers.append(buffer!)
        }
        try reenqueue()
    }

    private var buffers: [AudioQueueBufferRef] = []

    /// Enqueues every buffer again, as an app does after a stop (whose callbacks may not enqueue).
    func reenqueue() throws {
        guard AudioQueueWaitForReturnedBuffers(queue, timeout: 5) else { throw Failure("the buffers did not come back") }
        for b in buffers { try check(AudioQueueEnqueueBuffer(queue, b, 0, nil), "AudioQueueEnqueueBuffer") }
    }

    final class Box: @unchecked Sendable { weak var owner: Capture? }

    func waitForCallbacks(_ n: Int) throws {
        let target = callbackCount + n
        try wait("\(n) capture callbacks") { callbackCount >= target }
    }
}

@MainActor let captureScenario = Scenario(
    name: "capture",
    libpulseOwn: capturedBlockRelease
) { _, _, thread in
    var ima4 = AudioStreamBasicDescription()
    ima4.mSampleRate = 48000
    ima4.mFormatID = kAudioFormatAppleIMA4
    ima4.mChannelsPerFrame = 1
    var total = Count()
    for (format, bytes) in [(mono16, UInt32(1920)), (ima4, UInt32(34 * 30))] {
        let capture = try Capture(format: format, bufferBytes: bytes)
        defer { AudioQueueDispose(capture.queue, true) }
        // The first run opens the stream; the watched run starts, pauses, resumes and stops.
        try check(AudioQueueStart(capture.queue, nil), "AudioQueueStart (capture)")
        try capture.waitForCallbacks(3)
        try check(AudioQueueStop(capture.queue, true), "AudioQueueStop (capture)")
        try capture.reenqueue()
        let count = try watching(thread) {
            try check(AudioQueueStart(capture.queue, nil), "AudioQueueStart (capture)")
            try capture.waitForCallbacks(20)
            try check(AudioQueuePause(capture.queue), "AudioQueuePause (capture)")
            hold(0.1)
            try check(AudioQueueStart(capture.queue, nil), "AudioQueueStart (capture, resume)")
            try capture.waitForCallbacks(20)
            try check(AudioQueueStop(capture.queue, true), "AudioQueueStop (capture)")
        }
        total = total + count
    }
    return total
}
