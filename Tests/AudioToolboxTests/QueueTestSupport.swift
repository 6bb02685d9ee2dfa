import AudioToolbox
import Foundation

/// A 16-bit (or float) LPCM description.
func lpcm(rate: Double, channels: UInt32, bits: UInt32 = 16, float: Bool = false) -> AudioStreamBasicDescription {
    let bytes = bits / 8 * channels
    return AudioStreamBasicDescription(
        mSampleRate: rate, mFormatID: kAudioFormatLinearPCM,
        mFormatFlags: float ? kAudioFormatFlagsNativeFloatPacked : (kAudioFormatFlagIsSignedInteger | kAudioFormatFlagIsPacked),
        mBytesPerPacket: bytes, mFramesPerPacket: 1, mBytesPerFrame: bytes, mChannelsPerFrame: channels,
        mBitsPerChannel: bits, mReserved: 0)
}

/// Feeds a playback queue from its callback: a tone, or any generator, for a fixed number of
/// frames; then stops re-enqueueing and signals `finished`.
final class ToneFeeder: @unchecked Sendable {
    let sampleRate: Double
    let totalFrames: Int
    let generator: (Int) -> Float
    private(set) var produced = 0
    let finished = DispatchSemaphore(value: 0)
    let running = RunningLog()
    var stopped: DispatchSemaphore { running.stopped }
    var callbackCount = 0
    let lock = NSLock()

    init(sampleRate: Double, seconds: Double, generator: @escaping (Int) -> Float) {
        self.sampleRate = sampleRate
        self.totalFrames = Int(seconds * sampleRate)
        self.generator = generator
    }

    static func tone(frequency: Double, amplitude: Float, sampleRate: Double, seconds: Double) -> ToneFeeder {
        ToneFeeder(sampleRate: sampleRate, seconds: seconds) { i in
            amplitude * Float(sin(2 * Double.pi * frequency * Double(i) / sampleRate))
        }
    }

    var context: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    /// Fills and enqueues `buffer` with 16-bit mono samples; returns false when there is nothing left.
    @discardableResult
    func fill(_ queue: AudioQueueRef, _ buffer: AudioQueueBufferRef) -> Bool {
        lock.lock()
        callbackCount += 1
        let capacity = Int(buffer.pointee.mAudioDataBytesCapacity) / 2
        let n = min(capacity, totalFrames - produced)
        guard n > 0 else {
            lock.unlock()
            return false
        }
        let out = buffer.pointee.mAudioData.assumingMemoryBound(to: Int16.self)
        for i in 0..<n { out[i] = Int16(max(-32768, min(32767, (generator(produced + i) * 32768).rounded()))) }
        produced += n
        let done = produced >= totalFrames
        lock.unlock()
        buffer.pointee.mAudioDataByteSize = UInt32(n * 2)
        AudioQueueEnqueueBuffer(queue, buffer, 0, nil)
        if done { finished.signal() }
        return true
    }

    static let callback: AudioQueueOutputCallback = { userData, queue, buffer in
        Unmanaged<ToneFeeder>.fromOpaque(userData!).takeUnretainedValue().fill(queue, buffer)
    }

}

/// Records every value `kAudioQueueProperty_IsRunning` takes, through a property listener.
final class RunningLog: @unchecked Sendable {
    private let lock = NSLock()
    private var recorded: [UInt32] = []
    /// Signalled each time the queue stops.
    let stopped = DispatchSemaphore(value: 0)

    var values: [UInt32] {
        lock.lock()
        defer { lock.unlock() }
        return recorded
    }

    /// Adds the listener to `queue`; `self` must outlive the queue.
    func listen(to queue: AudioQueueRef) {
        AudioQueueAddPropertyListener(queue, kAudioQueueProperty_IsRunning, { userData, queue, id in
            let me = Unmanaged<RunningLog>.fromOpaque(userData!).takeUnretainedValue()
            var running: UInt32 = 0
            var size = UInt32(4)
            AudioQueueGetProperty(queue, id, &running, &size)
            me.lock.lock()
            me.recorded.append(running)
            me.lock.unlock()
            if running == 0 { me.stopped.signal() }
        }, Unmanaged.passUnretained(self).toOpaque())
    }
}

/// Creates a 16-bit mono playback queue fed by `feeder`, with `count` buffers of `bufferSeconds`.
func makeToneQueue(_ feeder: ToneFeeder, bufferSeconds: Double, count: Int) throws -> (AudioQueueRef, [AudioQueueBufferRef]) {
    var format = lpcm(rate: feeder.sampleRate, channels: 1)
    var queue: AudioQueueRef?
    let status = AudioQueueNewOutput(&format, ToneFeeder.callback, feeder.context, nil, nil, 0, &queue)
    guard status == noErr, let queue else { throw QueueTestError.status(status) }
    var buffers: [AudioQueueBufferRef] = []
    for _ in 0..<count {
        var buffer: AudioQueueBufferRef?
        AudioQueueAllocateBuffer(queue, UInt32(bufferSeconds * feeder.sampleRate) * 2, &buffer)
        buffers.append(buffer!)
    }
    feeder.running.listen(to: queue)
    return (queue, buffers)
}

enum QueueTestError: Error { case status(OSStatus), timeout(String) }
