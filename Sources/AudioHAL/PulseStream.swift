import CoreAudioTypes
internal import CPulseAudio
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One PulseAudio playback or record stream (`pa_stream`), owned by this object.
///
/// Callbacks run on the server thread and call only the render source or capture sink, which
/// follow ``HALRenderSource``'s rules; everything here on that path is allocation-free
/// (`pa_stream_begin_write` hands out the server's own memory, written in place) and retains
/// nothing (`openavf-rtcheck` counts both).
final class PulseStream: HALStream, @unchecked Sendable {
    let backend: PulseBackend
    /// The connection the stream lives on: the audio connection (the real-time server thread),
    /// except for streams that carry no sound (``HALStreamRequest/carriesSound``): the audio
    /// session's policy stream, which only hears the server's cork requests (libpulse allocates
    /// to parse those), and the trigger that makes the server duck others.
    let connection: PulseConnection
    /// The connection is the stream's own (``HALStreamRequest/ownThread``): it goes when the
    /// stream closes.
    private let ownsConnection: Bool
    let format: HALStreamFormat
    private(set) var device: HALDeviceInfo
    private var stream: OpaquePointer?
    private let playback: (HALStreamClient)?
    private let capture: (HALStreamClient)?
    /// The same two for the server thread, unretained (the stream owns them above, and ``close()``
    /// unhooks every callback first): called through `_withUnsafeGuaranteedRef`, so the server
    /// thread does no reference counting on objects other threads also hold.
    private let renderClient: Unmanaged<HALStreamClient>?
    private let captureClient: Unmanaged<HALStreamClient>?
    private let frameBytes: Int
    /// Server thread only: frames written (playback) or read (capture) since the stream opened.
    private var position: Int64 = 0
    private let xruns = Atomic<Int>(0)
    private(set) var grantedBufferDuration: Double = 0
    /// Whether a C string is PulseAudio's event name `event` (`PA_STREAM_EVENT_REQUEST_CORK`…),
    /// compared without allocating.
    static func isEvent(_ name: UnsafePointer<CChar>, _ event: StaticString) -> Bool {
        strcmp(name, UnsafeRawPointer(event.utf8Start).assumingMemoryBound(to: CChar.self)) == 0
    }
    private var selfReference: Unmanaged<PulseStream>?
    /// The pending `pa_stream_drain`, kept so that `close` can cancel it (libpulse may otherwise
    /// call back into a freed stream). Guarded by the main loop lock.
    private var drainOperation: OpaquePointer?
    /// The render source returned short: it has ended, and the server running dry from here on is
    /// how playback ends, not an underrun. Guarded by the main loop lock.
    private var sourceEnded = false
    /// The main-loop event through which ``setCorked(_:)`` asks the server thread to prefill.
    /// Guarded by the main loop lock.
    private var prefillEvent: OpaquePointer?
    /// The latest `pa_stream_update_timing_info` of ``refreshTiming()``. Guarded by the main loop lock.
    private var timingOperation: OpaquePointer?
    /// Our own reckoning of when a written frame is heard, for the writes made while the server's
    /// timing is unknown (libpulse answers `PA_ERR_NODATA` after a flush until its next timing
    /// update): the frame `estimatePosition` is heard at `estimateHost`, and the frames after it
    /// follow at the stream's rate. Set from every known latency, by a flush (nothing queued: the
    /// next frame is heard now), and moved by a cork (what was queued waits) and an uncork.
    /// Guarded by the main loop lock.
    private var estimatePosition: Int64 = 0
    private var estimateHost: UInt64 = 0
    /// What was queued ahead of the next frame when the stream was corked (ns).
    private var queuedWhenCorked: UInt64 = 0

    init(backend: PulseBackend, request: HALStreamRequest, playback: (HALStreamClient)?, capture: (HALStreamClient)?) throws(HALError) {
        self.backend = backend
        if request.ownThread {
            let connection = try PulseConnection(
                server: backend.server, applicationName: backend.applicationName, purpose: "device io", events: backend.events)
            connection.onLoopThread(PulseBackend.makeRealTime)
            self.connection = connection
        } else {
            self.connection = request.carriesSound ? backend.audio : backend.control
        }
        ownsConnection = request.ownThread
        self.format = request.format
        self.playback = playback
        self.capture = capture
        renderClient = playback.map { Unmanaged.passUnretained($0) }
        captureClient = capture.map { Unmanaged.passUnretained($0) }
        self.frameBytes = 4 * request.format.channels
        self.device = HALDeviceInfo(name: "", description: "", sampleRate: request.format.sampleRate, channels: request.format.channels)
        estimateHost = hostNow()
        try open(request)
    }

    private var isPlayback: Bool { playback != nil }

    private static func paPosition(_ p: HALChannelPosition) -> pa_channel_position_t {
        switch p {
        case .mono: PA_CHANNEL_POSITION_MONO
        case .frontLeft: PA_CHANNEL_POSITION_FRONT_LEFT
        case .frontRight: PA_CHANNEL_POSITION_FRONT_RIGHT
        case .frontCenter: PA_CHANNEL_POSITION_FRONT_CENTER
        case .lfe: PA_CHANNEL_POSITION_LFE
        case .rearLeft: PA_CHANNEL_POSITION_REAR_LEFT
        case .rearRight: PA_CHANNEL_POSITION_REAR_RIGHT
        case .rearCenter: PA_CHANNEL_POSITION_REAR_CENTER
        case .frontLeftOfCenter: PA_CHANNEL_POSITION_FRONT_LEFT_OF_CENTER
        case .frontRightOfCenter: PA_CHANNEL_POSITION_FRONT_RIGHT_OF_CENTER
        case .sideLeft: PA_CHANNEL_POSITION_SIDE_LEFT
        case .sideRight: PA_CHANNEL_POSITION_SIDE_RIGHT
        case .topCenter: PA_CHANNEL_POSITION_TOP_CENTER
        case .aux(let n): pa_channel_position_t(rawValue: PA_CHANNEL_POSITION_AUX0.rawValue + Int32(min(max(n, 0), 31)))
        }
    }

    private func open(_ request: HALStreamRequest) throws(HALError) {
        var spec = pa_sample_spec(format: PA_SAMPLE_FLOAT32LE, rate: UInt32(request.format.sampleRate), channels: UInt8(request.format.channels))
        guard pa_sample_spec_valid(&spec) != 0 else {
            throw HALError(.notSupported, "the server cannot carry \(request.format.channels) channels at \(request.format.sampleRate) Hz")
        }
        var map = pa_channel_map()
        pa_channel_map_init_extend(&map, UInt32(request.format.channels), PA_CHANNEL_MAP_DEFAULT)
        if let positions = request.channelPositions, positions.count == request.format.channels {
            var custom = pa_channel_map()
            custom.channels = UInt8(positions.count)
            withUnsafeMutableBytes(of: &custom.map) { raw in
                let slots = raw.bindMemory(to: pa_channel_position_t.self)
                for (i, p) in positions.enumerated() { slots[i] = Self.paPosition(p) }
            }
            // The server remaps from the stream's channel map to the sink's.
            if pa_channel_map_valid(&custom) != 0 { map = custom }
        }
        let props = pa_proplist_new()
        defer { pa_proplist_free(props) }
        for (key, value) in PulseBackend.streamProperties(request) { pa_proplist_sets(props, key, value) }

        let bytes = UInt32(Double(frameBytes) * (request.bufferDuration * request.format.sampleRate).rounded(.up))
        var attr = pa_buffer_attr(maxlength: UInt32.max, tlength: UInt32.max, prebuf: UInt32.max, minreq: UInt32.max, fragsize: UInt32.max)
        if isPlayback { attr.tlength = bytes } else { attr.fragsize = bytes }
        if isPlayback && request.keepsTimeline { attr.prebuf = 0 }
        if backend.isPipeWire {
            if isPlayback {
                // pipewire-pulse holds an uncorked stream until its buffer reaches the prebuffer
                // (two thirds of it), and asks for more only as the graph plays it: a stream a
                // little short when uncorked never starts. The queue corks and uncorks its stream
                // itself (prebuf 0: the server starts on uncork and never stops on an underrun),
                // as PulseAudio's manual control.
                attr.prebuf = 0
            } else {
                // pipewire-pulse runs a capture stream's graph at the largest power-of-two cycle
                // within its fragment and delivers whole cycles: a 30 ms fragment made 1024-frame
                // (21.3 ms) deliveries, and 30 ms buffers came after 21 and 42 ms by turns.
                // Fragments of at most 10 ms (256-frame cycles) keep the buffers' completions
                // within a few ms of their duration, as PulseAudio's fragments of the buffer's
                // size do.
                attr.fragsize = min(bytes, UInt32(Double(frameBytes) * (0.01 * request.format.sampleRate).rounded(.up)))
            }
        }
        // A long playback buffer (a music player's) is refilled in thirds rather than the server's
        // default quarters: fewer wake-ups, and still two thirds of the buffer in hand when asked.
        //
        // No request is larger than a third of the buffer: PulseAudio gives the sink what two
        // requests leave of the total, halved (protocol-native's fix_playback_buffer_attr), so
        // requests of half the buffer ran the sink at its minimum latency (0.5 ms), its thread
        // waking every half millisecond for as long as the stream played. A third leaves the sink
        // a sixth of the total.
        let thirds = (bytes / 3 / UInt32(frameBytes)) * UInt32(frameBytes)
        if isPlayback && request.bufferDuration >= 0.05 { attr.minreq = thirds }
        if isPlayback, let piece = request.requestDuration {
            attr.minreq = max(UInt32(frameBytes), min(thirds, UInt32(Double(frameBytes) * (piece * request.format.sampleRate).rounded())))
        }
        // No PA_STREAM_AUTO_TIMING_UPDATE: libpulse would allocate an operation on the server thread
        // for each update; the owner calls refreshTiming() from its own thread instead.
        //
        // Every buffer size lets the server split it between the sink and the stream
        // (PA_STREAM_ADJUST_LATENCY), so what the stream adds is the duration asked for, as pacat's
        // --latency-msec does. Asking for early requests instead (PA_STREAM_EARLY_REQUESTS, the
        // sink run at one request's latency) adds about a sixth of the buffer to the round trip
        // even with the buffer cut to keep the total at what was asked (openavf-bench: 11.8 ms
        // against pacat | parec's 10.7 at 5 ms), and saves few dropouts: none either way at 5 ms
        // idle or at 10 ms with every core busy; at 5 ms with every core busy, about 9 in 100 s
        // with the adjustment, 3 with early requests, 1 from pacat, whose feed waits in a pipe
        // rather than on an app's callback. At 5 ms idle the sink itself (about 1.25 ms of
        // latency) runs dry now and then on a 2-core VM, 10–12 times a minute for a queue as for
        // pacat.
        var flags = PA_STREAM_INTERPOLATE_TIMING.rawValue | PA_STREAM_ADJUST_LATENCY.rawValue
        if request.startCorked { flags |= PA_STREAM_START_CORKED.rawValue }

        let me = Unmanaged.passRetained(self)
        selfReference = me
        let ud = me.toOpaque()
        var failure: HALError?
        connection.locked {
            guard let s = pa_stream_new_with_proplist(connection.context, request.name, &spec, &map, props) else {
                let code = pa_context_errno(connection.context)
                failure = HALError(.streamFailed, code: code, "pa_stream_new: \(PulseBackend.message(code))")
                return
            }
            stream = s
            if request.reportsPolicyEvents {
                pa_stream_set_event_callback(s, { _, name, _, ud in
                    // Server thread: compare without allocating, raise, return.
                    guard let name else { return }
                    Unmanaged<HALEvents>.fromOpaque(ud!)._withUnsafeGuaranteedRef { events in
                        if PulseStream.isEvent(name, "request-cork") { events.raise(.corkRequested) }
                        if PulseStream.isEvent(name, "request-uncork") { events.raise(.uncorkRequested) }
                    }
                }, Unmanaged.passUnretained(backend.events).toOpaque())
            }
            pa_stream_set_state_callback(s, { _, ud in
                Unmanaged<PulseStream>.fromOpaque(ud!)._withUnsafeGuaranteedRef { pa_threaded_mainloop_signal($0.connection.mainloop, 0) }
            }, ud)
            let result: Int32
            if isPlayback {
                pa_stream_set_write_callback(s, { _, nbytes, ud in
                    Unmanaged<PulseStream>.fromOpaque(ud!)._withUnsafeGuaranteedRef { $0.serverWantsData(nbytes) }
                }, ud)
                pa_stream_set_underflow_callback(s, { _, ud in
                    Unmanaged<PulseStream>.fromOpaque(ud!)._withUnsafeGuaranteedRef { me in
                        if !me.sourceEnded { me.xruns.add(1, ordering: .relaxed) }
                    }
                }, ud)
                result = pa_stream_connect_playback(s, request.device, &attr, pa_stream_flags_t(rawValue: flags), nil, nil)
            } else {
                pa_stream_set_read_callback(s, { _, _, ud in
                    Unmanaged<PulseStream>.fromOpaque(ud!)._withUnsafeGuaranteedRef { $0.serverHasData() }
                }, ud)
                pa_stream_set_overflow_callback(s, { _, ud in
                    Unmanaged<PulseStream>.fromOpaque(ud!)._withUnsafeGuaranteedRef { _ = $0.xruns.add(1, ordering: .relaxed) }
                }, ud)
                result = pa_stream_connect_record(s, request.device, &attr, pa_stream_flags_t(rawValue: flags))
            }
            if result < 0 {
                let code = pa_context_errno(connection.context)
                failure = HALError(.streamFailed, code: code, "cannot connect the stream: \(PulseBackend.message(code))")
                return
            }
            while true {
                let state = pa_stream_get_state(s)
                if state == PA_STREAM_READY { break }
                if state == PA_STREAM_FAILED || state == PA_STREAM_TERMINATED {
                    let code = pa_context_errno(connection.context)
                    failure = HALError(.streamFailed, code: code, "the stream failed: \(PulseBackend.message(code))")
                    return
                }
                pa_threaded_mainloop_wait(connection.mainloop)
            }
            if let a = pa_stream_get_buffer_attr(s)?.pointee {
                let granted = isPlayback ? a.tlength : a.fragsize
                grantedBufferDuration = Double(granted) / Double(frameBytes) / format.sampleRate
            }
            if isPlayback { makePrefillEvent(ud) }
        }
        if let failure {
            close()
            throw failure
        }
        let deviceName = connection.locked { pa_stream_get_device_name(stream).map { String(cString: $0) } ?? "" }
        if let info = try? (isPlayback ? backend.sinkInfo(deviceName) : backend.sourceInfo(deviceName)) {
            device = info
        }
    }

    // MARK: Server thread

    /// Write callback: render straight into the server's buffer.
    private func serverWantsData(_ nbytes: Int) {
        guard let stream, let source = renderClient else { return }
        var remaining = nbytes
        while remaining >= frameBytes {
            var data: UnsafeMutableRawPointer?
            var size = remaining
            guard pa_stream_begin_write(stream, &data, &size) == 0, let data, size >= frameBytes else { return }
            let frames = size / frameBytes
            size = frames * frameBytes
            var latency: pa_usec_t = 0
            var negative: Int32 = 0
            let now = hostNow()
            let ahead: UInt64
            if pa_stream_get_latency(stream, &latency, &negative) == 0 && negative == 0 {
                ahead = latency * 1000
                estimatePosition = position
                estimateHost = now &+ ahead
            } else {
                let heard = estimatedHearing(of: position)
                ahead = heard > now ? heard - now : 0
            }
            let time = HALRenderTime(sampleTime: position, hostTime: now &+ ahead)
            let produced = source._withUnsafeGuaranteedRef { $0.render(data.assumingMemoryBound(to: Float.self), frames: frames, time: time) }
            sourceEnded = produced < frames
            guard produced > 0 else {
                pa_stream_cancel_write(stream)
                return
            }
            pa_stream_write(stream, data, produced * frameBytes, nil, 0, PA_SEEK_RELATIVE)
            position += Int64(produced)
            if produced < frames { return }
            remaining -= size
        }
    }

    /// Read callback: hand every complete fragment to the capture sink.
    private func serverHasData() {
        guard let stream, let sink = captureClient else { return }
        while pa_stream_readable_size(stream) > 0 {
            var data: UnsafeRawPointer?
            var size = 0
            guard pa_stream_peek(stream, &data, &size) == 0, size > 0 else { return }
            if let data {
                let frames = size / frameBytes
                var latency: pa_usec_t = 0
                var negative: Int32 = 0
                let now = hostNow()
                let behind: UInt64 = pa_stream_get_latency(stream, &latency, &negative) == 0 && negative == 0 ? latency * 1000 : 0
                let time = HALRenderTime(sampleTime: position, hostTime: now &- min(behind, now))
                sink._withUnsafeGuaranteedRef { $0.capture(data.assumingMemoryBound(to: Float.self), frames: frames, time: time) }
                position += Int64(frames)
            }
            pa_stream_drop(stream)
        }
    }

    /// Server thread: the prefill ``setCorked(_:)`` asked for. Fills the room the server has, then
    /// sleeps until asked again.
    private func prefill() {
        guard let stream, let event = prefillEvent else { return }
        let api = connection.api
        api.pointee.defer_enable(event, 0)
        let writable = pa_stream_writable_size(stream)
        if writable != Int(bitPattern: UInt(bitPattern: -1)) && writable >= frameBytes { serverWantsData(writable) }
    }

    /// When frame `frame` is heard, by ``estimatePosition`` and ``estimateHost``. Call with the
    /// main loop lock held.
    private func estimatedHearing(of frame: Int64) -> UInt64 {
        let offset = Double(frame - estimatePosition) * 1e9 / format.sampleRate
        return offset >= 0 ? estimateHost &+ UInt64(offset) : estimateHost &- min(estimateHost, UInt64(-offset))
    }

    /// Creates the (disabled) main-loop event through which control calls ask the server thread to
    /// prefill. Made once per stream, so that asking allocates nothing. Call with the lock held.
    private func makePrefillEvent(_ ud: UnsafeMutableRawPointer) {
        let api = connection.api
        prefillEvent = api.pointee.defer_new(api, { _, _, ud in
            Unmanaged<PulseStream>.fromOpaque(ud!)._withUnsafeGuaranteedRef { $0.prefill() }
        }, ud)
        if let prefillEvent { api.pointee.defer_enable(prefillEvent, 0) }
    }

    // MARK: Control

    var xrunCount: Int { xruns.load(ordering: .relaxed) }

    func currentTime() -> HALRenderTime? {
        connection.locked {
            guard let stream else { return nil }
            var usec: pa_usec_t = 0
            guard pa_stream_get_time(stream, &usec) == 0 else { return nil }
            return HALRenderTime(sampleTime: Int64(Double(usec) * format.sampleRate / 1e6), hostTime: hostNow())
        }
    }

    /// The corresponding PulseAudio call is `pa_stream_cork`.
    ///
    /// Uncorking a playback stream also fills the room the server has: it asks for data once, and
    /// room it asked for and did not get (the end of the previous run left it unfilled) is never
    /// asked for again. The caller does not render: it wakes the server thread, which does.
    func setCorked(_ corked: Bool) {
        let connection = connection
        connection.locked {
            guard let stream else { return }
            // Running again: a drain still pending belongs to the previous run.
            if !corked {
                cancelDrain()
                sourceEnded = false
            }
            let now = hostNow()
            if corked {
                let heard = estimatedHearing(of: position)
                queuedWhenCorked = heard > now ? heard - now : 0
            } else {
                estimatePosition = position
                estimateHost = now &+ queuedWhenCorked
            }
            connection.performOnStream { done, ud in pa_stream_cork(stream, corked ? 1 : 0, done, ud) }
            if !corked && playback != nil {
                // Fresh timing first: the latency the render is stamped with must be today's.
                connection.performOnStream { done, ud in pa_stream_update_timing_info(stream, done, ud) }
                if let prefillEvent { connection.api.pointee.defer_enable(prefillEvent, 1) }
            }
        }
    }

    /// Enables the prefill event: the server thread writes what the stream has room for.
    func refill() {
        connection.locked {
            guard stream != nil, let prefillEvent else { return }
            connection.api.pointee.defer_enable(prefillEvent, 1)
        }
    }

    /// The corresponding PulseAudio call is `pa_stream_flush`.
    func flush() {
        let connection = connection
        connection.locked {
            guard let stream else { return }
            estimatePosition = position
            estimateHost = hostNow()
            queuedWhenCorked = 0
            connection.performOnStream { done, ud in pa_stream_flush(stream, done, ud) }
        }
    }

    /// The corresponding PulseAudio call is `pa_stream_update_timing_info`. Does not wait; the
    /// stream keeps the operation until it is done, so that it is freed here and not on the server
    /// thread, and asks nothing while one is still on its way.
    func refreshTiming() {
        connection.locked {
            guard let stream else { return }
            if let op = timingOperation {
                guard pa_operation_get_state(op) != PA_OPERATION_RUNNING else { return }
                pa_operation_unref(op)
            }
            timingOperation = pa_stream_update_timing_info(stream, nil, nil)
        }
    }

    /// The corresponding PulseAudio call is `pa_stream_drain`; completion reaches
    /// ``HALRenderSource/streamDidDrain()`` on the server thread.
    func drain() {
        connection.locked {
            guard let stream, let ud = selfReference?.toOpaque() else { return }
            cancelDrain()
            // A drain the server refuses ends the stream's playing all the same (pipewire-pulse
            // refuses some; PulseAudio only for a dying stream): either way nothing more will
            // play, and the owner must hear the end. A drain cancelled here calls nothing.
            drainOperation = pa_stream_drain(stream, { _, _, ud in
                Unmanaged<PulseStream>.fromOpaque(ud!)._withUnsafeGuaranteedRef { me in me.renderClient?._withUnsafeGuaranteedRef { $0.streamDidDrain() } }
            }, ud)
        }
    }

    /// Call with the main loop lock held.
    private func cancelDrain() {
        if let op = drainOperation {
            pa_operation_cancel(op)
            pa_operation_unref(op)
            drainOperation = nil
        }
    }

    func withCallbacksBlocked<T>(_ body: () throws -> T) rethrows -> T {
        try connection.locked(body)
    }

    func close() {
        // A connection of the stream's own stops first: the stream's teardown (libpulse frees it
        // when the server confirms the disconnect) then happens here, not on its real-time thread.
        if ownsConnection { connection.stopLoop() }
        connection.locked {
            cancelDrain()
            if let op = timingOperation {
                pa_operation_cancel(op)
                pa_operation_unref(op)
                timingOperation = nil
            }
            if let event = prefillEvent {
                connection.api.pointee.defer_free(event)
                prefillEvent = nil
            }
            if let s = stream {
                pa_stream_set_state_callback(s, nil, nil)
                pa_stream_set_write_callback(s, nil, nil)
                pa_stream_set_read_callback(s, nil, nil)
                pa_stream_set_underflow_callback(s, nil, nil)
                pa_stream_set_overflow_callback(s, nil, nil)
                pa_stream_set_event_callback(s, nil, nil)
                pa_stream_disconnect(s)
                pa_stream_unref(s)
                stream = nil
            }
        }
        if ownsConnection { connection.shutDown() }
        selfReference?.release()
        selfReference = nil
    }
}

/// CLOCK_MONOTONIC in nanoseconds; the host clock of ``HALRenderTime`` (on the virtual backend,
/// its clock).
@inline(__always)
package func hostNow() -> UInt64 {
    if let virtual = currentVirtualHostTime() { return virtual }
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}
