public import Foundation
import AudioHAL
internal import AudioCodecs

// Audio Queue Services (Apple's AudioQueue.h): creating, feeding and controlling queues.
//
// Linux mapping: each queue owns one stream on the sound server (PulseAudio's `pa_stream`, or
// PipeWire through pipewire-pulse), opened at `AudioQueuePrime` or `AudioQueueStart`. Linear PCM
// of 8–32-bit integers or 32/64-bit float, 1–8 channels, either byte order, is converted to float
// when a buffer is enqueued (playback) or delivered (recording); the server converts and resamples
// between that stream and the device, so callbacks never see the device's format. Compressed
// descriptions (AAC, ALAC, IMA4, MP3, µ-law, A-law, FLAC, Opus; encoding where FFmpeg can) are
// decoded when a buffer is enqueued and encoded before a recording callback, off the server
// thread; callbacks handle only packets.
//
// Invalid objects: an AudioQueueRef that is not a live queue (disposed, never one, or another kind
// of reference) gets `kAudio_ParamError`, AudioQueue.h having no error of its own for it; a buffer
// that is not the queue's (freed, another queue's, or of a disposed queue) gets
// `kAudioQueueErr_InvalidBuffer`. Neither is ever reused: queue references are serials
// (``newObjectReference(_:)``) and buffer headers never share an address (``BufferHeaderArena``),
// so a stale one stays invalid for the life of the process.

private func validate(
    _ inFormat: UnsafePointer<AudioStreamBasicDescription>?, isOutput: Bool
) -> Result<(AudioStreamBasicDescription, LinearPCMFormat, AudioQueueCodec?), StatusError> {
    guard let inFormat else { return .failure(StatusError(kAudio_ParamError)) }
    let asbd = inFormat.pointee
    if let pcm = LinearPCMFormat(asbd) { return .success((asbd, pcm, nil)) }
    // Malformed linear PCM and formats nobody knows: 'fmt?'; a known format without a codec here
    // (MP3 encoding without LAME, say): kAudioQueueErr_CodecNotFound.
    guard asbd.mFormatID != kAudioFormatLinearPCM, CodecCatalog.info(asbd.mFormatID) != nil else {
        return .failure(StatusError(kAudioFormatUnsupportedDataFormatError))
    }
    do {
        let codec = try AudioQueueCodec(format: asbd, isOutput: isOutput)
        let float = AudioQueueCodec.floatFormat(rate: codec.format.mSampleRate, channels: codec.format.mChannelsPerFrame)
        guard let pcm = LinearPCMFormat(float) else { return .failure(StatusError(kAudioFormatUnsupportedDataFormatError)) }
        return .success((codec.format, pcm, codec))
    } catch {
        return .failure(StatusError(error.status == kAudioConverterErr_FormatNotSupported ? kAudioQueueErr_CodecNotFound : kAudioFormatUnsupportedDataFormatError))
    }
}

private func makeQueue(
    _ inFormat: UnsafePointer<AudioStreamBasicDescription>?, isOutput: Bool, callback: QueueCallback,
    target: CallbackTarget, _ outAQ: UnsafeMutablePointer<AudioQueueRef?>?
) -> OSStatus {
    guard let outAQ else { return kAudio_ParamError }
    switch validate(inFormat, isOutput: isOutput) {
    case .failure(let error):
        outAQ.pointee = nil
        return error.status
    case .success(let (asbd, pcm, codec)):
        let queue = AudioQueueObject(format: asbd, pcm: pcm, codec: codec, isOutput: isOutput, callback: callback, target: target)
        liveQueues.add(queue)
        outAQ.pointee = queue.ref
        return noErr
    }
}

private func target(_ runLoop: CFRunLoop?, _ mode: CFString?) -> CallbackTarget {
    guard let runLoop else { return .ownThread }
    return .runLoop(runLoop.runLoop, RunLoop.Mode(mode.map { $0 as String } ?? RunLoop.Mode.common.rawValue))
}

/// Creates a playback queue.
///
/// The callback runs on the queue's own thread when `inCallbackRunLoop` is `nil`, else on that run
/// loop in `inCallbackRunLoopMode` (common modes when `nil`). `inFlags` must be 0.
@discardableResult
public func AudioQueueNewOutput(
    _ inFormat: UnsafePointer<AudioStreamBasicDescription>, _ inCallbackProc: AudioQueueOutputCallback,
    _ inUserData: UnsafeMutableRawPointer?, _ inCallbackRunLoop: CFRunLoop?, _ inCallbackRunLoopMode: CFString?,
    _ inFlags: UInt32, _ outAQ: UnsafeMutablePointer<AudioQueueRef?>
) -> OSStatus {
    makeQueue(inFormat, isOutput: true, callback: .outputProc(inCallbackProc, inUserData),
              target: target(inCallbackRunLoop, inCallbackRunLoopMode), outAQ)
}

/// Creates a recording queue; see ``AudioQueueNewOutput(_:_:_:_:_:_:_:)`` for where callbacks run.
@discardableResult
public func AudioQueueNewInput(
    _ inFormat: UnsafePointer<AudioStreamBasicDescription>, _ inCallbackProc: AudioQueueInputCallback,
    _ inUserData: UnsafeMutableRawPointer?, _ inCallbackRunLoop: CFRunLoop?, _ inCallbackRunLoopMode: CFString?,
    _ inFlags: UInt32, _ outAQ: UnsafeMutablePointer<AudioQueueRef?>
) -> OSStatus {
    makeQueue(inFormat, isOutput: false, callback: .inputProc(inCallbackProc, inUserData),
              target: target(inCallbackRunLoop, inCallbackRunLoopMode), outAQ)
}

/// Creates a playback queue whose callback block runs on `inCallbackDispatchQueue`.
@discardableResult
public func AudioQueueNewOutputWithDispatchQueue(
    _ outAQ: UnsafeMutablePointer<AudioQueueRef?>, _ inFormat: UnsafePointer<AudioStreamBasicDescription>,
    _ inFlags: UInt32, _ inCallbackDispatchQueue: DispatchQueue, _ inCallbackBlock: @escaping AudioQueueOutputCallbackBlock
) -> OSStatus {
    makeQueue(inFormat, isOutput: true, callback: .outputBlock(inCallbackBlock), target: .dispatch(inCallbackDispatchQueue), outAQ)
}

/// Creates a recording queue whose callback block runs on `inCallbackDispatchQueue`.
@discardableResult
public func AudioQueueNewInputWithDispatchQueue(
    _ outAQ: UnsafeMutablePointer<AudioQueueRef?>, _ inFormat: UnsafePointer<AudioStreamBasicDescription>,
    _ inFlags: UInt32, _ inCallbackDispatchQueue: DispatchQueue, _ inCallbackBlock: @escaping AudioQueueInputCallbackBlock
) -> OSStatus {
    makeQueue(inFormat, isOutput: false, callback: .inputBlock(inCallbackBlock), target: .dispatch(inCallbackDispatchQueue), outAQ)
}

/// Disposes of a queue and its buffers. With `inImmediate` false, a playing queue first plays out
/// what is enqueued.
@discardableResult
public func AudioQueueDispose(_ inAQ: AudioQueueRef, _ inImmediate: Bool) -> OSStatus {
    guard let queue = liveQueues.lookup(inAQ) else { return kAudio_ParamError }
    return queue.dispose(immediate: inImmediate)
}

/// Allocates a buffer of `inBufferByteSize` bytes owned by the queue.
@discardableResult
public func AudioQueueAllocateBuffer(
    _ inAQ: AudioQueueRef, _ inBufferByteSize: UInt32, _ outBuffer: UnsafeMutablePointer<AudioQueueBufferRef?>
) -> OSStatus {
    AudioQueueAllocateBufferWithPacketDescriptions(inAQ, inBufferByteSize, 0, outBuffer)
}

/// Allocates a buffer with room for `inNumberPacketDescriptions` packet descriptions.
@discardableResult
public func AudioQueueAllocateBufferWithPacketDescriptions(
    _ inAQ: AudioQueueRef, _ inBufferByteSize: UInt32, _ inNumberPacketDescriptions: UInt32,
    _ outBuffer: UnsafeMutablePointer<AudioQueueBufferRef?>
) -> OSStatus {
    guard let queue = liveQueues.lookup(inAQ) else { return kAudio_ParamError }
    switch queue.allocateBuffer(byteSize: inBufferByteSize, packetDescriptions: inNumberPacketDescriptions) {
    case .success(let buffer):
        outBuffer.pointee = buffer
        return noErr
    case .failure(let error):
        outBuffer.pointee = nil
        return error.status
    }
}

/// Frees a buffer that is not enqueued.
@discardableResult
public func AudioQueueFreeBuffer(_ inAQ: AudioQueueRef, _ inBuffer: AudioQueueBufferRef) -> OSStatus {
    guard let queue = liveQueues.lookup(inAQ) else { return kAudio_ParamError }
    return queue.freeBuffer(inBuffer)
}

/// Adds a buffer to the queue: audio to play (its `mAudioDataByteSize` bytes), or room to record into.
///
/// Playback audio is converted to the stream's float layout here, on the calling thread (usually
/// the queue's callback thread), so the server thread only copies.
@discardableResult
public func AudioQueueEnqueueBuffer(
    _ inAQ: AudioQueueRef, _ inBuffer: AudioQueueBufferRef, _ inNumPacketDescs: UInt32,
    _ inPacketDescs: UnsafePointer<AudioStreamPacketDescription>?
) -> OSStatus {
    guard let queue = liveQueues.lookup(inAQ) else { return kAudio_ParamError }
    var options = AudioQueueObject.EnqueueOptions()
    options.packetDescriptions = UnsafeBufferPointer(start: inPacketDescs, count: inPacketDescs == nil ? 0 : Int(inNumPacketDescs))
    switch queue.enqueue(inBuffer, options) {
    case .success: return noErr
    case .failure(let error): return error.status
    }
}

/// Adds a playback buffer with trimming, per-buffer parameters and a start time.
///
/// `inTrimFramesAtStart`/`AtEnd` frames are left out. Parameter events apply to this buffer only:
/// `kAudioQueueParam_Volume` is a gain on its samples, `kAudioQueueParam_Pan` its stereo position,
/// and `kAudioQueueParam_VolumeRampTime` (seconds) makes the gain change at this buffer ramp,
/// linearly from the gain the previous buffer ended at (1 for a buffer without a volume event) to
/// this buffer's, starting at its first frame; a ramp longer than the buffer reaches only part of
/// the way, and the next buffer starts its own change from there.
/// `inStartTime` (sample time on the queue's timeline) delays the buffer until then, with silence
/// before it; `outActualStartTime` receives the queue sample time it will start at.
@discardableResult
public func AudioQueueEnqueueBufferWithParameters(
    _ inAQ: AudioQueueRef, _ inBuffer: AudioQueueBufferRef, _ inNumPacketDescs: UInt32,
    _ inPacketDescs: UnsafePointer<AudioStreamPacketDescription>?, _ inTrimFramesAtStart: UInt32,
    _ inTrimFramesAtEnd: UInt32, _ inNumParamValues: UInt32, _ inParamValues: UnsafePointer<AudioQueueParameterEvent>?,
    _ inStartTime: UnsafePointer<AudioTimeStamp>?, _ outActualStartTime: UnsafeMutablePointer<AudioTimeStamp>?
) -> OSStatus {
    guard let queue = liveQueues.lookup(inAQ) else { return kAudio_ParamError }
    if inNumParamValues > 0 && inParamValues == nil { return kAudio_ParamError }
    var options = AudioQueueObject.EnqueueOptions()
    options.trimStart = inTrimFramesAtStart
    options.trimEnd = inTrimFramesAtEnd
    options.parameters = UnsafeBufferPointer(start: inParamValues, count: Int(inNumParamValues))
    options.startTime = inStartTime?.pointee
    options.packetDescriptions = UnsafeBufferPointer(start: inPacketDescs, count: inPacketDescs == nil ? 0 : Int(inNumPacketDescs))
    switch queue.enqueue(inBuffer, options) {
    case .success(let actual):
        outActualStartTime?.pointee = actual
        return noErr
    case .failure(let error): return error.status
    }
}

/// Starts (or resumes) playing or recording, now or at `inStartTime` (host time, or sample time on
/// the device's timeline).
@discardableResult
public func AudioQueueStart(_ inAQ: AudioQueueRef, _ inStartTime: UnsafePointer<AudioTimeStamp>?) -> OSStatus {
    guard let queue = liveQueues.lookup(inAQ) else { return kAudio_ParamError }
    return queue.start(at: inStartTime?.pointee)
}

/// Opens the device stream and gets enqueued audio ready, so that ``AudioQueueStart(_:_:)``
/// starts at once. `outNumberOfFramesPrepared` receives the frames ready to play.
@discardableResult
public func AudioQueuePrime(
    _ inAQ: AudioQueueRef, _ inNumberOfFramesToPrepare: UInt32, _ outNumberOfFramesPrepared: UnsafeMutablePointer<UInt32>?
) -> OSStatus {
    guard let queue = liveQueues.lookup(inAQ) else { return kAudio_ParamError }
    switch queue.prime(frames: inNumberOfFramesToPrepare) {
    case .success(let frames):
        outNumberOfFramesPrepared?.pointee = frames
        return noErr
    case .failure(let error): return error.status
    }
}

/// Stops. Immediate: queued audio is dropped and every enqueued buffer returns through the
/// callback. Otherwise (playback) the call returns at once and the queue stops after playing
/// everything enqueued; `kAudioQueueProperty_IsRunning` turns 0 then.
@discardableResult
public func AudioQueueStop(_ inAQ: AudioQueueRef, _ inImmediate: Bool) -> OSStatus {
    guard let queue = liveQueues.lookup(inAQ) else { return kAudio_ParamError }
    return queue.stop(immediate: inImmediate)
}

/// Pauses; ``AudioQueueStart(_:_:)`` resumes at the very next frame, with nothing lost or repeated.
///
/// On Linux the queue stops consuming its buffers at once and the server stream plays silence;
/// what the server already holds (at most the stream's buffer duration) is heard first. The
/// stream is not corked, because the server would then rewind and replay or drop a little audio.
@discardableResult
public func AudioQueuePause(_ inAQ: AudioQueueRef) -> OSStatus {
    guard let queue = liveQueues.lookup(inAQ) else { return kAudio_ParamError }
    return queue.pause()
}

/// Makes sure everything enqueued gets played. Linear PCM is converted when it is enqueued, so
/// nothing is held back and this returns at once.
@discardableResult
public func AudioQueueFlush(_ inAQ: AudioQueueRef) -> OSStatus {
    guard liveQueues.lookup(inAQ) != nil else { return kAudio_ParamError }
    return noErr
}

/// Drops everything queued (returning each buffer through the callback) without stopping.
@discardableResult
public func AudioQueueReset(_ inAQ: AudioQueueRef) -> OSStatus {
    guard let queue = liveQueues.lookup(inAQ) else { return kAudio_ParamError }
    return queue.reset()
}

/// Waits until the buffers an ``AudioQueueStop(_:_:)`` (immediate) or ``AudioQueueReset(_:)``
/// handed back have been through the callback, so that they can be enqueued again; `false` after
/// `timeout` seconds or for a disposed queue. For AVFAudio's player, which refills from its own
/// thread after a seek. Never call it from the queue's callback.
package func AudioQueueWaitForReturnedBuffers(_ inAQ: AudioQueueRef, timeout: Double) -> Bool {
    guard let queue = liveQueues.lookup(inAQ) else { return false }
    return queue.waitForResetCallbacks(timeout: timeout)
}

/// Sets a recording queue's encoder bit rate (bits per second) and quality (Apple's 0…127), as
/// AVAudioRecorder's `AVEncoderBitRateKey` and `AVEncoderAudioQualityKey` ask; before the queue
/// starts. Linear PCM queues ignore it.
package func AudioQueueSetEncoderOptions(_ inAQ: AudioQueueRef, bitRate: Int?, quality: Int?) {
    guard let queue = liveQueues.lookup(inAQ) else { return }
    queue.lock.lock()
    defer { queue.lock.unlock() }
    queue.codec?.setEncoder(bitRate: bitRate, quality: quality)
}
