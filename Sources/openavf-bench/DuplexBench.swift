import AVFAudio
import AudioTestSupport
import AudioToolbox
import CPulseAudio
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Duplex round trip, measured as a loop: a client records the speaker's monitor and plays what
/// it hears back to the speaker at half level, and one click is put in. The click comes round
/// again and again, each time 6 dB quieter; the spacing of the echoes on the monitor is the round
/// trip (speaker → monitor → input → output → speaker). Measured for a RemoteIO unit whose
/// render callback copies bus 1 to its output, an engine `inputNode → mainMixerNode` (with a
/// source node for the click), and a raw libpulse duplex client that writes when the server asks
/// (what it has recorded, nothing held back), at the same buffer.
enum DuplexBench {
    static let rate = 48000.0

    /// The echo spacing in ms (median over `clicks` clicks) of the loop `run` keeps going while
    /// `inject` puts a click in.
    static func loopSpacing(server: ServerHandle, clicks: Int, inject: () -> Void) throws -> Double? {
        let capture = try SignalCapture(environment: server.environment, device: "speaker.monitor")
        var spacings: [Double] = []
        pause(0.5)
        for _ in 0..<clicks {
            inject()
            pause(0.6)
        }
        let heard = capture.stop().first ?? []
        // Each click: the first sample over 0.3, then each echo's first sample over half its
        // expected level (0.4, 0.2, 0.1 …), after the previous one's 1 ms burst.
        var i = 0
        while i < heard.count {
            guard abs(heard[i]) > 0.3 else {
                i += 1
                continue
            }
            var onsets = [i]
            var level: Float = 0.8
            var at = i + 60
            for _ in 0..<3 {
                level /= 2
                guard let next = (at..<min(heard.count, at + Int(rate * 0.25))).first(where: { abs(heard[$0]) > level / 2 }) else { break }
                onsets.append(next)
                at = next + 60
            }
            for (a, b) in zip(onsets, onsets.dropFirst()) { spacings.append(Double(b - a) / rate * 1000) }
            if ProcessInfo.processInfo.environment["OPENAVF_BENCH_DEBUG"] != nil { print("echo onsets", onsets.map { Double($0 - onsets[0]) / rate * 1000 }, onsets.map { heard[$0] }) }
            i = at + Int(rate * 0.3)
        }
        guard !spacings.isEmpty else { return nil }
        return spacings.sorted()[spacings.count / 2]
    }

    static func pause(_ seconds: Double) { _ = DispatchSemaphore(value: 0).wait(timeout: .now() + seconds) }

    // MARK: RemoteIO

    final class Loop: @unchecked Sendable {
        var unit: AudioUnit?
        let click = Atomic<Int>(0)
        let list = AudioBufferList.allocate(maximumBuffers: 1)
        deinit { free(list.unsafeMutablePointer) }

        static let render: AURenderCallback = { refCon, flags, time, _, frames, data in
            Unmanaged<Loop>.fromOpaque(refCon)._withUnsafeGuaranteedRef { loop in
                let out = UnsafeMutableAudioBufferListPointer(data!)
                let samples = out[0].mData!.assumingMemoryBound(to: Float.self)
                // What the microphone (the monitor) brought, at half level, and the click when asked.
                let status = AudioUnitRender(loop.unit!, flags, time, 1, frames, data!)
                if status != noErr { samples.update(repeating: 0, count: Int(frames)) }
                for i in 0..<Int(frames) { samples[i] *= 0.5 }
                if loop.click.exchange(0, ordering: .relaxed) == 1 {
                    for i in 0..<min(48, Int(frames)) { samples[i] = i % 2 == 0 ? 0.8 : -0.8 }
                }
                return noErr
            }
        }
    }

    /// A RemoteIO unit at the session's preferred I/O buffer of `milliseconds`.
    static func remoteIO(server: ServerHandle, milliseconds: Int, clicks: Int) throws -> Double? {
        let session = AVAudioSession.sharedInstance()
        try session.setCategory(.playAndRecord)
        try session.setPreferredIOBufferDuration(Double(milliseconds) / 1000)
        try session.setActive(true)
        defer { try? session.setActive(false) }
        var d = AudioComponentDescription(componentType: kAudioUnitType_Output, componentSubType: kAudioUnitSubType_RemoteIO, componentManufacturer: kAudioUnitManufacturer_Apple, componentFlags: 0, componentFlagsMask: 0)
        var unit: AudioUnit?
        guard let component = AudioComponentFindNext(nil, &d), AudioComponentInstanceNew(component, &unit) == noErr, let unit else { throw BenchError("no RemoteIO") }
        defer { AudioComponentInstanceDispose(unit) }
        var on: UInt32 = 1
        AudioUnitSetProperty(unit, kAudioOutputUnitProperty_EnableIO, kAudioUnitScope_Input, 1, &on, 4)
        var mono = AudioStreamBasicDescription(
            mSampleRate: rate, mFormatID: kAudioFormatLinearPCM, mFormatFlags: kAudioFormatFlagsNativeFloatPacked | kAudioFormatFlagIsNonInterleaved,
            mBytesPerPacket: 4, mFramesPerPacket: 1, mBytesPerFrame: 4, mChannelsPerFrame: 1, mBitsPerChannel: 32, mReserved: 0)
        let size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
        AudioUnitSetProperty(unit, kAudioUnitProperty_StreamFormat, kAudioUnitScope_Input, 0, &mono, size)
        AudioUnitSetProperty(unit, kAudioUnitProperty_StreamFormat, kAudioUnitScope_Output, 1, &mono, size)
        // The microphone is the speaker's monitor.
        guard var device = AudioDevices.id(uid: "speaker.monitor") else { throw BenchError("no device for speaker.monitor") }
        AudioUnitSetProperty(unit, kAudioOutputUnitProperty_CurrentDevice, kAudioUnitScope_Global, 1, &device, 4)
        let loop = Loop()
        loop.unit = unit
        var cb = AURenderCallbackStruct(inputProc: Loop.render, inputProcRefCon: Unmanaged.passUnretained(loop).toOpaque())
        AudioUnitSetProperty(unit, kAudioUnitProperty_SetRenderCallback, kAudioUnitScope_Input, 0, &cb, UInt32(MemoryLayout<AURenderCallbackStruct>.size))
        guard AudioUnitInitialize(unit) == noErr, AudioOutputUnitStart(unit) == noErr else { throw BenchError("RemoteIO did not start") }
        defer { AudioOutputUnitStop(unit) }
        return try loopSpacing(server: server, clicks: clicks) { loop.click.store(1, ordering: .relaxed) }
    }

    // MARK: AVAudioEngine

    /// An engine whose input node (the speaker's monitor, made the default input for the run)
    /// feeds the main mixer at half volume, a source node adding the click.
    static func engine(server: ServerHandle, pactl: ([String]) throws -> String, milliseconds: Int, clicks: Int) throws -> Double? {
        let session = AVAudioSession.sharedInstance()
        try session.setCategory(.playAndRecord)
        try session.setPreferredIOBufferDuration(Double(milliseconds) / 1000)
        try session.setActive(true)
        defer { try? session.setActive(false) }
        let previous = try pactl(["get-default-source"]).trimmingCharacters(in: .whitespacesAndNewlines)
        _ = try pactl(["set-default-source", "speaker.monitor"])
        defer { _ = try? pactl(["set-default-source", previous]) }
        let engine = AVAudioEngine()
        let click = Atomic<Int>(0)
        let mono = AVAudioFormat(standardFormatWithSampleRate: rate, channels: 1)!
        let source = AVAudioSourceNode(format: mono) { _, _, frames, data in
            let samples = UnsafeMutableAudioBufferListPointer(data)[0].mData!.assumingMemoryBound(to: Float.self)
            samples.update(repeating: 0, count: Int(frames))
            if click.exchange(0, ordering: .relaxed) == 1 {
                for i in 0..<min(48, Int(frames)) { samples[i] = i % 2 == 0 ? 0.8 : -0.8 }
            }
            return noErr
        }
        engine.attach(source)
        engine.connect(source, to: engine.mainMixerNode, format: mono)
        engine.connect(engine.inputNode, to: engine.mainMixerNode, format: mono)
        engine.inputNode.volume = 0.5
        try engine.start()
        defer { engine.stop() }
        return try loopSpacing(server: server, clicks: clicks) { click.store(1, ordering: .relaxed) }
    }

    // MARK: The anchor: a raw libpulse duplex client

    /// Records the monitor (fragments of `milliseconds`) and plays to the speaker (a buffer of
    /// `milliseconds`, the server splitting it as pacat's does), writing what it has recorded
    /// when the server asks, nothing held back.
    final class RawClient: @unchecked Sendable {
        let mainloop: OpaquePointer
        var context: OpaquePointer?
        var record: OpaquePointer?
        var playback: OpaquePointer?
        let ring = UnsafeMutablePointer<Float>.allocate(capacity: 1 << 16)
        var head = 0, tail = 0
        let click = Atomic<Int>(0)

        init(milliseconds: Int) throws {
            mainloop = pa_threaded_mainloop_new()
            pa_threaded_mainloop_start(mainloop)
            pa_threaded_mainloop_lock(mainloop)
            defer { pa_threaded_mainloop_unlock(mainloop) }
            context = pa_context_new(pa_threaded_mainloop_get_api(mainloop), "openavf-bench duplex anchor")
            let me = Unmanaged.passUnretained(self).toOpaque()
            pa_context_set_state_callback(context, { _, data in
                pa_threaded_mainloop_signal(Unmanaged<RawClient>.fromOpaque(data!).takeUnretainedValue().mainloop, 0)
            }, me)
            guard pa_context_connect(context, nil, PA_CONTEXT_NOFLAGS, nil) >= 0 else { throw BenchError("the anchor cannot connect") }
            while true {
                let state = pa_context_get_state(context)
                if state == PA_CONTEXT_READY { break }
                guard state != PA_CONTEXT_FAILED && state != PA_CONTEXT_TERMINATED else { throw BenchError("the anchor's connection failed") }
                pa_threaded_mainloop_wait(mainloop)
            }
            var spec = pa_sample_spec(format: PA_SAMPLE_FLOAT32LE, rate: UInt32(rate), channels: 1)
            let bytes = UInt32(Int(rate) * milliseconds / 1000 * 4)
            record = pa_stream_new(context, "duplex in", &spec, nil)
            playback = pa_stream_new(context, "duplex out", &spec, nil)
            pa_stream_set_read_callback(record, { stream, _, data in
                Unmanaged<RawClient>.fromOpaque(data!).takeUnretainedValue().read(stream)
            }, me)
            pa_stream_set_write_callback(playback, { _, nbytes, data in
                Unmanaged<RawClient>.fromOpaque(data!).takeUnretainedValue().write(nbytes)
            }, me)
            var recordAttr = pa_buffer_attr(maxlength: UInt32.max, tlength: UInt32.max, prebuf: UInt32.max, minreq: UInt32.max, fragsize: bytes)
            var playAttr = pa_buffer_attr(maxlength: UInt32.max, tlength: bytes, prebuf: UInt32.max, minreq: UInt32.max, fragsize: UInt32.max)
            let flags = pa_stream_flags_t(PA_STREAM_ADJUST_LATENCY.rawValue | PA_STREAM_INTERPOLATE_TIMING.rawValue | PA_STREAM_AUTO_TIMING_UPDATE.rawValue)
            guard pa_stream_connect_record(record, "speaker.monitor", &recordAttr, flags) >= 0,
                pa_stream_connect_playback(playback, "speaker", &playAttr, flags, nil, nil) >= 0
            else { throw BenchError("the anchor's streams did not connect") }
        }

        func read(_ stream: OpaquePointer?) {
            var data: UnsafeRawPointer?
            var length = 0
            while pa_stream_peek(stream, &data, &length) == 0, length > 0 {
                if let data {
                    let samples = data.assumingMemoryBound(to: Float.self)
                    for i in 0..<(length / 4) where tail - head < (1 << 16) {
                        ring[tail & 0xFFFF] = samples[i]
                        tail += 1
                    }
                }
                pa_stream_drop(stream)
            }
        }

        func write(_ nbytes: Int) {
            var buffer: UnsafeMutableRawPointer?
            var size = nbytes
            guard pa_stream_begin_write(playback, &buffer, &size) == 0, let buffer else { return }
            let out = buffer.assumingMemoryBound(to: Float.self)
            let n = size / 4
            for i in 0..<n {
                if head < tail {
                    out[i] = 0.5 * ring[head & 0xFFFF]
                    head += 1
                } else {
                    out[i] = 0
                }
            }
            if click.exchange(0, ordering: .relaxed) == 1 { for i in 0..<min(48, n) { out[i] = i % 2 == 0 ? 0.8 : -0.8 } }
            pa_stream_write(playback, buffer, size, nil, 0, PA_SEEK_RELATIVE)
        }

        func close() {
            pa_threaded_mainloop_lock(mainloop)
            for stream in [record, playback] where stream != nil {
                pa_stream_disconnect(stream)
                pa_stream_unref(stream)
            }
            pa_context_disconnect(context)
            pa_context_unref(context)
            pa_threaded_mainloop_unlock(mainloop)
            pa_threaded_mainloop_stop(mainloop)
            pa_threaded_mainloop_free(mainloop)
            ring.deallocate()
        }
    }

    static func anchor(server: ServerHandle, milliseconds: Int, clicks: Int) throws -> Double? {
        let client = try RawClient(milliseconds: milliseconds)
        defer { client.close() }
        return try loopSpacing(server: server, clicks: clicks) { client.click.store(1, ordering: .relaxed) }
    }
}
