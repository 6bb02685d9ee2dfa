internal import CPulseAudio
import Foundation

/// The server's sample cache: sounds uploaded once and played by name, each playback a stream the
/// server makes itself (with the `event` role), so that a sound starts without this process
/// opening a stream. The corresponding PulseAudio calls are `pa_stream_connect_upload`,
/// `pa_stream_finish_upload`, `pa_context_play_sample_with_proplist` and
/// `pa_context_remove_sample`; a playback ends when its stream is removed (a subscription event).
extension PulseBackend {
    package func uploadSample(_ name: String, format: HALStreamFormat, samples: [Float]) throws(HALError) {
        var spec = pa_sample_spec(format: PA_SAMPLE_FLOAT32LE, rate: UInt32(format.sampleRate), channels: UInt8(format.channels))
        guard pa_sample_spec_valid(&spec) != 0, !samples.isEmpty, samples.count % format.channels == 0 else {
            throw HALError(.notSupported, "the server cannot store \(samples.count) samples of \(format.channels) channels at \(format.sampleRate) Hz")
        }
        // pipewire-pulse (0.3.65) plays a cached sample in whole graph cycles and drops the last,
        // partial one: a 5 ms click (240 frames) plays nothing at all while the graph runs 256-frame
        // cycles, a 10 ms one only its first 256 frames. Silence up to a whole number of
        // 1024-frame blocks at 48 kHz (the largest default cycle, 21.3 ms) lets all of it play;
        // the sound's end (and its completion) moves by less than that.
        var samples = samples
        if isPipeWire {
            let block = Int((1024 / 48000 * format.sampleRate).rounded(.up)) * format.channels
            let remainder = samples.count % block
            if remainder != 0 { samples += repeatElement(0, count: block - remainder) }
        }
        let bytes = samples.count * MemoryLayout<Float>.size
        let failure: HALError? = control.locked {
            guard let stream = pa_stream_new(context, name, &spec, nil) else {
                let code = pa_context_errno(context)
                return HALError(.streamFailed, code: code, "pa_stream_new: \(Self.message(code))")
            }
            defer {
                pa_stream_set_state_callback(stream, nil, nil)
                pa_stream_unref(stream)
            }
            pa_stream_set_state_callback(stream, { _, ud in pa_threaded_mainloop_signal(OpaquePointer(ud), 0) }, UnsafeMutableRawPointer(control.mainloop))
            /// Waits for the upload stream to reach `wanted`; the server's error otherwise.
            func wait(for wanted: pa_stream_state_t) -> HALError? {
                while true {
                    let state = pa_stream_get_state(stream)
                    if state == wanted { return nil }
                    if state == PA_STREAM_FAILED || state == PA_STREAM_TERMINATED {
                        let code = pa_context_errno(context)
                        return HALError(.streamFailed, code: code, "uploading \(name): \(Self.message(code))")
                    }
                    pa_threaded_mainloop_wait(control.mainloop)
                }
            }
            guard pa_stream_connect_upload(stream, bytes) == 0 else {
                let code = pa_context_errno(context)
                return HALError(.streamFailed, code: code, "uploading \(name): \(Self.message(code))")
            }
            if let error = wait(for: PA_STREAM_READY) { return error }
            let written = samples.withUnsafeBytes { pa_stream_write(stream, $0.baseAddress, bytes, nil, 0, PA_SEEK_RELATIVE) }
            guard written == 0, pa_stream_finish_upload(stream) == 0 else {
                let code = pa_context_errno(context)
                return HALError(.streamFailed, code: code, "uploading \(name): \(Self.message(code))")
            }
            // The server ends an upload stream once it has stored the sample.
            return wait(for: PA_STREAM_TERMINATED)
        }
        if let failure { throw failure }
    }

    package func playSample(_ name: String, device: String?, purpose: HALStreamPurpose?, completion: @escaping @Sendable (Bool) -> Void) {
        final class Request: @unchecked Sendable {
            let backend: PulseBackend
            let completion: @Sendable (Bool) -> Void
            init(_ backend: PulseBackend, _ completion: @escaping @Sendable (Bool) -> Void) {
                self.backend = backend
                self.completion = completion
            }
        }
        let request = Unmanaged.passRetained(Request(self, completion))
        control.locked {
            let props = pa_proplist_new()
            defer { pa_proplist_free(props) }
            if let purpose { pa_proplist_sets(props, "media.role", Self.role(purpose)) }
            pa_proplist_sets(props, "media.name", name)
            pa_proplist_sets(props, "event.id", name)
            // PA_VOLUME_INVALID: the sample's own volume (as stored: unchanged).
            let op = pa_context_play_sample_with_proplist(context, name, device, PA_VOLUME_INVALID, props, { _, index, ud in
                // The control thread: the stream exists now; its removal ends the playback.
                let request = Unmanaged<Request>.fromOpaque(ud!).takeRetainedValue()
                if index == UInt32.max {  // PA_INVALID_INDEX
                    request.completion(false)
                } else {
                    request.backend.samplesPlaying.withLock { $0[index] = request.completion }
                }
            }, request.toOpaque())
            if let op { pa_operation_unref(op) } else { request.takeRetainedValue().completion(false) }
        }
    }

    /// The control thread: the stream `index` was removed; if it played a sample, that ended.
    func samplePlayback(ended index: UInt32) {
        samplesPlaying.withLock { $0.removeValue(forKey: index) }?(true)
    }

    package func removeSample(_ name: String) {
        control.locked {
            if let op = pa_context_remove_sample(context, name, nil, nil) { pa_operation_unref(op) }
        }
    }
}
