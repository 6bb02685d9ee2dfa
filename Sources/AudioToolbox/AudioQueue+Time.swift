import AudioHAL
import Foundation
import Synchronization

// Timelines and time stamps of audio queues (AudioQueue.h).

/// Tracks discontinuities of one queue's timeline between reads.
final class AudioQueueTimeline: ReferencedObject, @unchecked Sendable {
    /// Weak: a timeline outlives its queue when the user keeps it past `AudioQueueDispose`
    /// (which also removes the queue's timelines from ``liveTimelines``).
    weak var queue: AudioQueueObject?
    /// The ``AudioQueueTimelineRef`` handed to the user, never reused.
    let ref: AudioQueueTimelineRef = newObjectReference(.audioQueueTimeline)
    var seenDiscontinuities: Int
    init(queue: AudioQueueObject) {
        self.queue = queue
        seenDiscontinuities = queue.engine.discontinuities.load(ordering: .relaxed)
    }
}

/// Creates a timeline object for ``AudioQueueGetCurrentTime(_:_:_:_:)`` to report discontinuities
/// (an underrun, a reset, a stop) through.
@discardableResult
public func AudioQueueCreateTimeline(_ inAQ: AudioQueueRef, _ outTimeline: UnsafeMutablePointer<AudioQueueTimelineRef?>) -> OSStatus {
    guard let queue = liveQueues.lookup(inAQ) else { return kAudio_ParamError }
    let timeline = AudioQueueTimeline(queue: queue)
    liveTimelines.add(timeline)
    outTimeline.pointee = timeline.ref
    return noErr
}

/// Disposes of a timeline object.
@discardableResult
public func AudioQueueDisposeTimeline(_ inAQ: AudioQueueRef, _ inTimeline: AudioQueueTimelineRef) -> OSStatus {
    guard liveQueues.lookup(inAQ) != nil else { return kAudio_ParamError }
    return liveTimelines.remove(inTimeline) == nil ? kAudio_ParamError : noErr
}

/// The queue's current time: `mSampleTime` is the frame being heard (playback) or captured
/// (recording) on the queue's timeline, which starts at 0 when the queue starts, and `mHostTime`
/// is now. Before the queue has run, `kAudioQueueErr_InvalidRunState`.
@discardableResult
public func AudioQueueGetCurrentTime(
    _ inAQ: AudioQueueRef, _ inTimeline: AudioQueueTimelineRef?, _ outTimeStamp: UnsafeMutablePointer<AudioTimeStamp>?,
    _ outTimelineDiscontinuity: UnsafeMutablePointer<DarwinBoolean>?
) -> OSStatus {
    guard let queue = liveQueues.lookup(inAQ) else { return kAudio_ParamError }
    guard let sample = queue.currentSampleTime() else { return kAudioQueueErr_InvalidRunState }
    if let inTimeline {
        guard let timeline = liveTimelines.lookup(inTimeline), timeline.queue === queue else { return kAudio_ParamError }
        let count = queue.engine.discontinuities.load(ordering: .relaxed)
        outTimelineDiscontinuity?.pointee = DarwinBoolean(count != timeline.seenDiscontinuities)
        timeline.seenDiscontinuities = count
    } else {
        outTimelineDiscontinuity?.pointee = false
    }
    var stamp = AudioTimeStamp()
    stamp.mSampleTime = Double(sample)
    stamp.mHostTime = hostNow()
    stamp.mRateScalar = 1
    stamp.mFlags = [.sampleTimeValid, .hostTimeValid, .rateScalarValid]
    outTimeStamp?.pointee = stamp
    return noErr
}

/// The device's current time: `mSampleTime` on the device's timeline (at the device's sample rate,
/// counted from when the queue's stream opened) and `mHostTime` now. Before the stream opens
/// (``AudioQueuePrime(_:_:_:)`` or ``AudioQueueStart(_:_:)``) only the host time is valid.
@discardableResult
public func AudioQueueDeviceGetCurrentTime(_ inAQ: AudioQueueRef, _ outTimeStamp: UnsafeMutablePointer<AudioTimeStamp>) -> OSStatus {
    guard let queue = liveQueues.lookup(inAQ) else { return kAudio_ParamError }
    queue.lock.lock()
    let stream = queue.stream
    queue.lock.unlock()
    var stamp = AudioTimeStamp()
    stamp.mHostTime = hostNow()
    stamp.mFlags = [.hostTimeValid]
    if let stream, let now = stream.currentTime() {
        stamp.mSampleTime = Double(now.sampleTime) * stream.device.sampleRate / stream.format.sampleRate
        stamp.mHostTime = now.hostTime
        stamp.mRateScalar = 1
        stamp.mFlags = [.sampleTimeValid, .hostTimeValid, .rateScalarValid]
    }
    outTimeStamp.pointee = stamp
    return noErr
}
