internal import CPulseAudio
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The PulseAudio backend: libpulse's asynchronous API on a threaded main loop.
///
/// One connection (`pa_context`) per process. The main loop's thread is *the server thread*: every
/// stream callback runs there, and those callbacks only move samples between lock-free rings and
/// the server (see ``HALRenderSource``). PipeWire's pipewire-pulse speaks the same protocol, so
/// this backend serves PipeWire machines too.
///
/// The server is the one libpulse finds by its usual rules: `PULSE_SERVER`, then the user's
/// runtime directory (`$XDG_RUNTIME_DIR/pulse/native`), then X11 properties. Autospawn is off: a
/// machine without a server gets an error, never a surprise daemon.
package final class PulseBackend: AudioBackend, @unchecked Sendable {
    package let name = "pulse"
    package let events: HALEvents
    let mainloop: OpaquePointer
    let context: OpaquePointer
    /// What the context's callbacks reach: the main loop to signal and the events to raise.
    private let callbacks: ContextCallbacks

    private final class ContextCallbacks: @unchecked Sendable {
        let mainloop: OpaquePointer
        let events: HALEvents
        /// Set once connected, cleared before our own disconnect: a failure in between is the
        /// server going away.
        let connected = Atomic<Bool>(false)
        init(mainloop: OpaquePointer, events: HALEvents) {
            self.mainloop = mainloop
            self.events = events
        }
    }

    /// Connects to the server at `server` (a libpulse server string), or the default one.
    package init(server: String? = nil, applicationName: String = ProcessInfo.processInfo.processName) throws(HALError) {
        guard let ml = pa_threaded_mainloop_new() else {
            throw HALError(.noServer, "pa_threaded_mainloop_new failed")
        }
        let props = pa_proplist_new()
        pa_proplist_sets(props, "application.name", applicationName)
        pa_proplist_sets(props, "application.process.binary", applicationName)
        guard let ctx = pa_context_new_with_proplist(pa_threaded_mainloop_get_api(ml), applicationName, props) else {
            pa_proplist_free(props)
            pa_threaded_mainloop_free(ml)
            throw HALError(.noServer, "pa_context_new failed")
        }
        pa_proplist_free(props)
        mainloop = ml
        context = ctx
        let events = HALEvents()
        self.events = events
        let callbacks = ContextCallbacks(mainloop: ml, events: events)
        self.callbacks = callbacks
        let box = Unmanaged.passUnretained(callbacks).toOpaque()
        pa_context_set_state_callback(ctx, { c, userData in
            let box = Unmanaged<ContextCallbacks>.fromOpaque(userData!).takeUnretainedValue()
            let state = pa_context_get_state(c)
            if (state == PA_CONTEXT_FAILED || state == PA_CONTEXT_TERMINATED) && box.connected.exchange(false, ordering: .relaxed) {
                box.events.raise(.serverLost)
            }
            pa_threaded_mainloop_signal(box.mainloop, 0)
        }, box)

        if pa_context_connect(ctx, server, PA_CONTEXT_NOAUTOSPAWN, nil) < 0 {
            let code = pa_context_errno(ctx)
            shutDown(started: false)
            throw HALError(.noServer, code: code, "cannot connect to the sound server: \(Self.message(code))")
        }
        pa_threaded_mainloop_lock(ml)
        pa_threaded_mainloop_start(ml)
        while true {
            let state = pa_context_get_state(ctx)
            if state == PA_CONTEXT_READY { break }
            if state == PA_CONTEXT_FAILED || state == PA_CONTEXT_TERMINATED {
                let code = pa_context_errno(ctx)
                pa_threaded_mainloop_unlock(ml)
                shutDown(started: true)
                throw HALError(.noServer, code: code, "cannot connect to the sound server: \(Self.message(code))")
            }
            pa_threaded_mainloop_wait(ml)
        }
        callbacks.connected.store(true, ordering: .relaxed)
        // Device and default changes, for the audio session's routes.
        pa_context_set_subscribe_callback(ctx, { _, type, _, userData in
            let events = Unmanaged<ContextCallbacks>.fromOpaque(userData!).takeUnretainedValue().events
            let facility = type.rawValue & PA_SUBSCRIPTION_EVENT_FACILITY_MASK.rawValue
            events.raise(facility == PA_SUBSCRIPTION_EVENT_SINK_INPUT.rawValue ? .streams : .devices)
        }, box)
        let mask =
            PA_SUBSCRIPTION_MASK_SINK.rawValue | PA_SUBSCRIPTION_MASK_SOURCE.rawValue | PA_SUBSCRIPTION_MASK_SERVER.rawValue
            | PA_SUBSCRIPTION_MASK_SINK_INPUT.rawValue
        if let op = pa_context_subscribe(ctx, pa_subscription_mask_t(rawValue: mask), nil, nil) { pa_operation_unref(op) }
        pa_threaded_mainloop_unlock(ml)
        requestRealTimeScheduling()
    }

    deinit { shutDown(started: true) }

    /// Asks for real-time scheduling of the server thread (SCHED_FIFO), as PulseAudio's own
    /// clients do through rtkit, so that a busy machine does not starve it. Where the system
    /// refuses (an unprivileged process without an RLIMIT_RTPRIO allowance), the thread keeps
    /// normal scheduling.
    private func requestRealTimeScheduling() {
        final class Box: @unchecked Sendable { let done = Wakeup() }
        let box = Box()
        // Scheduling the one-shot changes the main loop, so it needs the lock; the callback runs
        // on the server thread without it.
        pa_threaded_mainloop_lock(mainloop)
        pa_threaded_mainloop_once_unlocked(mainloop, { _, ud in
            var param = sched_param()
            param.sched_priority = 10
            _ = pthread_setschedparam(pthread_self(), Int32(SCHED_FIFO), &param)
            Unmanaged<Box>.fromOpaque(ud!).takeUnretainedValue().done.signal()
        }, Unmanaged.passUnretained(box).toOpaque())
        pa_threaded_mainloop_unlock(mainloop)
        box.done.wait(timeout: 5)
    }

    /// Set by the first ``shutDown(started:)``: an initializer that fails after setting every
    /// property shuts down, and then `deinit` runs too; the second call must do nothing.
    private var isShutDown = false

    private func shutDown(started: Bool) {
        guard !isShutDown else { return }
        isShutDown = true
        callbacks.connected.store(false, ordering: .relaxed)
        if started { pa_threaded_mainloop_stop(mainloop) }
        pa_context_set_subscribe_callback(context, nil, nil)
        pa_context_set_state_callback(context, nil, nil)
        pa_context_disconnect(context)
        pa_context_unref(context)
        pa_threaded_mainloop_free(mainloop)
    }

    static func message(_ code: Int32) -> String { String(cString: pa_strerror(code)) }

    /// Runs `body` holding the main loop's lock: no callback of this connection runs meanwhile.
    func locked<T>(_ body: () throws -> T) rethrows -> T {
        pa_threaded_mainloop_lock(mainloop)
        defer { pa_threaded_mainloop_unlock(mainloop) }
        return try body()
    }

    /// Waits, with the lock held, until `operation` completes; the lock is released while waiting.
    func await(_ operation: OpaquePointer?) {
        guard let operation else { return }
        while pa_operation_get_state(operation) == PA_OPERATION_RUNNING {
            pa_threaded_mainloop_wait(mainloop)
        }
        pa_operation_unref(operation)
    }

    /// The server thread (the main loop's thread), for tests that watch what it does. The
    /// corresponding PulseAudio call is `pa_threaded_mainloop_once_unlocked`.
    package func serverThread() -> UInt {
        final class Box: @unchecked Sendable {
            var thread = pthread_t()
            let done = Wakeup()
        }
        let box = Box()
        pa_threaded_mainloop_lock(mainloop)
        pa_threaded_mainloop_once_unlocked(mainloop, { _, ud in
            let box = Unmanaged<Box>.fromOpaque(ud!).takeUnretainedValue()
            box.thread = pthread_self()
            box.done.signal()
        }, Unmanaged.passUnretained(box).toOpaque())
        pa_threaded_mainloop_unlock(mainloop)
        box.done.wait(timeout: 5)
        return UInt(box.thread)
    }

    // MARK: Devices

    /// Where an introspection callback leaves what it found, and how it wakes the caller.
    private final class InfoBox: @unchecked Sendable {
        let mainloop: OpaquePointer
        var info: HALDeviceInfo?
        init(_ mainloop: OpaquePointer) { self.mainloop = mainloop }

        /// Called on the server thread by the sink and source callbacks alike.
        func found(
            _ name: UnsafePointer<CChar>, _ description: UnsafePointer<CChar>?, _ spec: pa_sample_spec, _ proplist: OpaquePointer?,
            port: (name: UnsafePointer<CChar>?, type: UInt32)?
        ) {
            info = PulseBackend.deviceInfo(name, description, spec, proplist, port: port)
        }
    }

    /// A sink's or source's description as the layers above see it.
    static func deviceInfo(
        _ name: UnsafePointer<CChar>, _ description: UnsafePointer<CChar>?, _ spec: pa_sample_spec, _ proplist: OpaquePointer?,
        port: (name: UnsafePointer<CChar>?, type: UInt32)?
    ) -> HALDeviceInfo {
        HALDeviceInfo(
            name: String(cString: name), description: description.map { String(cString: $0) } ?? "",
            sampleRate: Double(spec.rate), channels: Int(spec.channels), properties: properties(proplist),
            portName: port?.name.map { String(cString: $0) }, portType: port.flatMap { HALPortType(rawValue: Int($0.type)) })
    }

    /// A property list as a dictionary. Server thread or with the lock held.
    static func properties(_ list: OpaquePointer?) -> [String: String] {
        guard let list else { return [:] }
        var result: [String: String] = [:]
        var state: UnsafeMutableRawPointer?
        while let key = pa_proplist_iterate(list, &state) {
            if let value = pa_proplist_gets(list, key) { result[String(cString: key)] = String(cString: value) }
        }
        return result
    }

    /// Runs one introspection query (`start` issues it with the box as user data) and waits.
    private func query(_ what: String, _ start: (UnsafeMutableRawPointer) -> OpaquePointer?) throws(HALError) -> HALDeviceInfo {
        let box = InfoBox(mainloop)
        locked { self.await(start(Unmanaged.passUnretained(box).toOpaque())) }
        guard let info = box.info else { throw HALError(.deviceNotFound, "no \(what)") }
        return info
    }

    /// The sink named `name` (`@DEFAULT_SINK@` for the default). The corresponding PulseAudio call
    /// is `pa_context_get_sink_info_by_name`.
    func sinkInfo(_ name: String) throws(HALError) -> HALDeviceInfo {
        try query("sink named \(name)") { ud in
            pa_context_get_sink_info_by_name(context, name, { _, info, eol, ud in
                let box = Unmanaged<InfoBox>.fromOpaque(ud!).takeUnretainedValue()
                if eol == 0, let i = info?.pointee {
                    box.found(i.name, i.description, i.sample_spec, i.proplist, port: i.active_port.map { ($0.pointee.name, $0.pointee.type) })
                }
                pa_threaded_mainloop_signal(box.mainloop, 0)
            }, ud)
        }
    }

    /// The source named `name` (`@DEFAULT_SOURCE@` for the default). The corresponding PulseAudio
    /// call is `pa_context_get_source_info_by_name`.
    func sourceInfo(_ name: String) throws(HALError) -> HALDeviceInfo {
        try query("source named \(name)") { ud in
            pa_context_get_source_info_by_name(context, name, { _, info, eol, ud in
                let box = Unmanaged<InfoBox>.fromOpaque(ud!).takeUnretainedValue()
                if eol == 0, let i = info?.pointee {
                    box.found(i.name, i.description, i.sample_spec, i.proplist, port: i.active_port.map { ($0.pointee.name, $0.pointee.type) })
                }
                pa_threaded_mainloop_signal(box.mainloop, 0)
            }, ud)
        }
    }

    package func outputDevice(named name: String?) throws(HALError) -> HALDeviceInfo { try sinkInfo(name ?? "@DEFAULT_SINK@") }
    package func inputDevice(named name: String?) throws(HALError) -> HALDeviceInfo { try sourceInfo(name ?? "@DEFAULT_SOURCE@") }

    // MARK: Streams

    package func openOutput(_ request: HALStreamRequest, source: any HALRenderSource) throws(HALError) -> any HALStream {
        try PulseStream(backend: self, request: request, playback: source, capture: nil)
    }

    package func openInput(_ request: HALStreamRequest, sink: any HALCaptureSink) throws(HALError) -> any HALStream {
        try PulseStream(backend: self, request: request, playback: nil, capture: sink)
    }
}
