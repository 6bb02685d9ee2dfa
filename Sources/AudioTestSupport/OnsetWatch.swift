import AudioToolbox
import Foundation

/// Watches the default sink's monitor through an input queue of 5 ms buffers stamped with host
/// time, and reports when the first sample above 0.01 arrives after ``arm(at:)``: the time from a
/// call to the first sound on the sink, on the same clock as `AudioGetCurrentHostTime()`.
public final class OnsetWatch: @unchecked Sendable {
    private let lock = NSLock()
    private var armedAt: UInt64 = .max
    private var onset: UInt64?
    private var queue: AudioQueueRef?
    static let rate = 48000.0

    public init() throws {
        var format = AudioStreamBasicDescription(
            mSampleRate: Self.rate, mFormatID: kAudioFormatLinearPCM, mFormatFlags: kAudioFormatFlagsNativeFloatPacked,
            mBytesPerPacket: 4, mFramesPerPacket: 1, mBytesPerFrame: 4, mChannelsPerFrame: 1, mBitsPerChannel: 32, mReserved: 0)
        var q: AudioQueueRef?
        let status = AudioQueueNewInput(&format, Self.callback, Unmanaged.passUnretained(self).toOpaque(), nil, nil, 0, &q)
        guard status == noErr else { throw PrivatePulseServer.Failure(description: "AudioQueueNewInput failed: \(status)") }
        queue = q
        let monitor: CFString? = defaultMonitorName() as CFString
        _ = withUnsafePointer(to: monitor) { AudioQueueSetProperty(q!, kAudioQueueProperty_CurrentDevice, $0, UInt32(MemoryLayout<CFString?>.size)) }
        for _ in 0..<8 {
            var b: AudioQueueBufferRef?
            AudioQueueAllocateBuffer(q!, UInt32(240 * 4), &b)  // 5 ms
            AudioQueueEnqueueBuffer(q!, b!, 0, nil)
        }
        guard AudioQueueStart(q!, nil) == noErr else { throw PrivatePulseServer.Failure(description: "the monitor does not start") }
    }

    public func dispose() { if let queue { AudioQueueDispose(queue, true) } }

    static let callback: AudioQueueInputCallback = { userData, queue, buffer, start, _, _ in
        let me = Unmanaged<OnsetWatch>.fromOpaque(userData!).takeUnretainedValue()
        let n = Int(buffer.pointee.mAudioDataByteSize) / 4
        let samples = buffer.pointee.mAudioData.assumingMemoryBound(to: Float.self)
        let base = start.pointee.mHostTime
        me.lock.lock()
        if me.onset == nil && base != 0 {
            for i in 0..<n where abs(samples[i]) > 0.01 {
                let t = base + UInt64(Double(i) / rate * 1e9)
                if t >= me.armedAt { me.onset = t }
                break
            }
        }
        me.lock.unlock()
        AudioQueueEnqueueBuffer(queue, buffer, 0, nil)
    }

    public func arm(at time: UInt64) {
        lock.withLock {
            armedAt = time
            onset = nil
        }
    }

    /// Milliseconds from the armed time to the onset; `nil` if nothing sounded in `timeout` s.
    public func wait(timeout: Double) -> Double? {
        let deadline = Date(timeIntervalSinceNow: timeout)
        while Date() < deadline {
            if let t = lock.withLock({ onset }) { return Double(t &- armedAt) / 1e6 }
            usleep(1000)
        }
        return nil
    }
}
