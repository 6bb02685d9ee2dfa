// Offline rendering of a playback queue on the virtual backend (AudioQueueSetOfflineRenderFormat,
// AudioQueueOfflineRender).
import AudioHAL
import Synchronization

extension AudioQueueObject {
    func setOfflineRenderFormat(_ renderFormat: AudioStreamBasicDescription?) -> OSStatus {
        lock.lock()
        defer { lock.unlock() }
        guard isOutput else { return kAudioQueueErr_InvalidQueueType }
        if isRunning == 1 { return kAudioQueueErr_InvalidRunState }
        offline?.stream.close()
        offline = nil
        stream?.close()
        stream = nil
        engine.signalsWakeup.store(true, ordering: .relaxed)
        engine.streamChannels = pcm.channels == 1 ? 2 : pcm.channels
        guard let renderFormat else { return noErr }
        guard let render = LinearPCMFormat(renderFormat) else { return kAudioFormatUnsupportedDataFormatError }
        // Offline rendering does not resample: the render rate must be the queue's.
        guard render.sampleRate == pcm.sampleRate else { return kAudioFormatUnsupportedDataFormatError }
        engine.streamChannels = render.channels
        engine.signalsWakeup.store(false, ordering: .relaxed)
        let backend = VirtualBackend(sampleRate: pcm.sampleRate, channels: render.channels)
        let request = HALStreamRequest(
            format: HALStreamFormat(sampleRate: pcm.sampleRate, channels: render.channels),
            bufferDuration: preferredBufferDuration, name: "offline", startCorked: true)
        guard let virtual = try? backend.openOutput(request, source: engine) as? VirtualStream else {
            return kAudioQueueErr_CannotStart
        }
        offline = (virtual, render)
        stream = virtual
        return noErr
    }

    func offlineRender(into buffer: AudioQueueBufferRef, frames: Int) -> OSStatus {
        lock.lock()
        guard let offline else {
            lock.unlock()
            return kAudioQueueErr_InvalidOfflineMode
        }
        guard slots[buffer] != nil else {
            lock.unlock()
            return kAudioQueueErr_InvalidBuffer
        }
        guard frames * offline.format.bytesPerFrame <= Int(buffer.pointee.mAudioDataBytesCapacity) else {
            lock.unlock()
            return kAudio_ParamError
        }
        lock.unlock()
        if frames > 0 {
            var samples = [Float](repeating: 0, count: frames * offline.format.channels)
            samples.withUnsafeMutableBufferPointer { p in
                offline.stream.render(into: p.baseAddress!, frames: frames)
                offline.format.encode(p.baseAddress!, frames: frames, into: buffer.pointee.mAudioData)
            }
        }
        buffer.pointee.mAudioDataByteSize = UInt32(frames * offline.format.bytesPerFrame)
        // Callbacks for the buffers this render finished run now, on the caller's thread, so that
        // offline rendering is deterministic.
        while collectCompletions(inline: true) > 0 {}
        return noErr
    }

}
