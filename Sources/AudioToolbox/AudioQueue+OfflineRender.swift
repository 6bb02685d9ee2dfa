// Offline rendering (AudioQueue.h): a playback queue renders into memory instead of a device,
// faster than real time, on the virtual backend.

/// Switches a stopped playback queue to offline rendering in `inFormat` (linear PCM at the queue's
/// sample rate; any channel count 1–8), or back to the device with `nil`. The channel layout is
/// not used. Offline rendering does not resample: another rate gets
/// `kAudioFormatUnsupportedDataFormatError`.
@discardableResult
public func AudioQueueSetOfflineRenderFormat(
    _ inAQ: AudioQueueRef, _ inFormat: UnsafePointer<AudioStreamBasicDescription>?, _ inLayout: UnsafePointer<AudioChannelLayout>?
) -> OSStatus {
    guard let queue = liveQueues.lookup(inAQ) else { return kAudio_ParamError }
    return queue.setOfflineRenderFormat(inFormat?.pointee)
}

/// Renders the next `inNumberFrames` frames of a started offline queue into `ioBuffer` (a buffer
/// of this queue). Frames follow one another from call to call; `inTimestamp` is not used to seek.
/// Output callbacks for buffers this call finished run on the calling thread before it returns,
/// so rendering is deterministic.
@discardableResult
public func AudioQueueOfflineRender(
    _ inAQ: AudioQueueRef, _ inTimestamp: UnsafePointer<AudioTimeStamp>, _ ioBuffer: AudioQueueBufferRef, _ inNumberFrames: UInt32
) -> OSStatus {
    guard let queue = liveQueues.lookup(inAQ) else { return kAudio_ParamError }
    return queue.offlineRender(into: ioBuffer, frames: Int(inNumberFrames))
}
