internal import CPulseAudio
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The PulseAudio backend: libpulse's asynchronous API on threaded main loops.
///
/// Two connections (``PulseConnection``) per process. The *audio* connection's main-loop thread
/// is *the server thread*: it carries only streams, every stream callback runs there, and those
/// callbacks only move samples between lock-free rings and the server (see ``HALRenderSource``).
/// The *control* connection runs device queries, policy operations and the event subscription on
/// a thread of its own, so that their replies, which build strings and dictionaries, never run on
/// the real-time thread. PipeWire's pipewire-pulse speaks the same protocol, so this backend
/// serves PipeWire machines too.
///
/// The server is the one libpulse finds by its usual rules: `PULSE_SERVER`, then the user's
/// runtime directory (`$XDG_RUNTIME_DIR/pulse/native`), then X11 properties. Autospawn is off: a
/// machine without a server gets an error, never a surprise daemon.
package final class PulseBackend: AudioBackend, @unchecked Sendable {
    package let name = "pulse"
    package let events: HALEvents
    /// Streams only; its main-loop thread is the real-time server thread.
    let audio: PulseConnection
    /// Introspection, policy and subscriptions.
    let control: PulseConnection
    /// The control connection's context, for the queries below and in extensions (each asks
    /// through ``PulseConnection/query(_:context:_:)``).
    var context: OpaquePointer { control.context }
    /// The stream that makes the server duck others while it lives (``setDuckingOthers(_:device:)``).
    let duckTrigger = Mutex<(stream: any HALStream, level: DuckLevel)?>(nil)
    /// What to call when a sample playing from the cache ends, by its stream's index
    /// (``playSample(_:device:completion:)``).
    let samplesPlaying = Mutex<[UInt32: @Sendable (Bool) -> Void]>([:])
    /// Whether the server has `module-role-cork`, once asked (``corksStreamsForCalls``).
    let roleCorkLoaded = Mutex<Bool?>(nil)
    /// Whether the server ducks through `module-role-ducking`, once asked; `false` where the
    /// library ducks by volume (``volumeDucking``).
    let duckingByModule = Mutex<Bool?>(nil)
    /// Whether the server is PipeWire's pipewire-pulse, once asked (``isPipeWire``).
    let pipeWireServer = Mutex<Bool?>(nil)
    /// The other clients' streams this process lowered, and their guard, while it ducks by volume.
    let volumeDucking = Mutex<VolumeDucking?>(nil)
    /// The name the process's connections give the server, for connections of a stream's own
    /// (``HALStreamRequest/ownThread``).
    let applicationName: String
    let server: String?

    /// Connects to the server at `server` (a libpulse server string), or the default one.
    package init(server: String? = nil, applicationName: String = ProcessInfo.processInfo.processName) throws(HALError) {
        let events = HALEvents()
        self.events = events
        self.applicationName = applicationName
        self.server = server
        audio = try PulseConnection(server: server, applicationName: applicationName, purpose: "audio", events: events)
        control = try PulseConnection(server: server, applicationName: applicationName, purpose: "control", events: events)
        // Device and default changes, for the audio session's routes; playback streams coming and
        // going, for its view of other sessions. Replies run on the control connection's thread.
        // Sample playbacks end when their stream goes.
        control.locked {
            pa_context_set_subscribe_callback(context, { _, type, index, userData in
                let backend = Unmanaged<PulseBackend>.fromOpaque(userData!).takeUnretainedValue()
                let facility = type.rawValue & PA_SUBSCRIPTION_EVENT_FACILITY_MASK.rawValue
                backend.events.raise(facility == PA_SUBSCRIPTION_EVENT_SINK_INPUT.rawValue ? .streams : .devices)
                if facility == PA_SUBSCRIPTION_EVENT_SINK_INPUT.rawValue
                    && type.rawValue & PA_SUBSCRIPTION_EVENT_TYPE_MASK.rawValue == PA_SUBSCRIPTION_EVENT_REMOVE.rawValue
                {
                    backend.samplePlayback(ended: index)
                }
            }, Unmanaged.passUnretained(self).toOpaque())
            let mask =
                PA_SUBSCRIPTION_MASK_SINK.rawValue | PA_SUBSCRIPTION_MASK_SOURCE.rawValue | PA_SUBSCRIPTION_MASK_SERVER.rawValue
                | PA_SUBSCRIPTION_MASK_SINK_INPUT.rawValue
            if let op = pa_context_subscribe(context, pa_subscription_mask_t(rawValue: mask), nil, nil) { pa_operation_unref(op) }
        }
        // Real-time scheduling of the server thread (SCHED_FIFO), as PulseAudio's own clients get
        // through rtkit, so that a busy machine does not starve it. Where the system refuses (an
        // unprivileged process without an RLIMIT_RTPRIO allowance), it keeps normal scheduling.
        audio.onLoopThread(Self.makeRealTime)
    }

    /// Gives the calling thread real-time scheduling (SCHED_FIFO), where the system allows it.
    @Sendable static func makeRealTime() {
        var param = sched_param()
        param.sched_priority = 10
        _ = pthread_setschedparam(pthread_self(), Int32(SCHED_FIFO), &param)
    }

    deinit {
        // The control connection's subscription reaches `events` until it is shut down.
        control.shutDown()
        audio.shutDown()
    }

    static func message(_ code: Int32) -> String { PulseConnection.message(code) }

    /// The server thread (the audio connection's main-loop thread), for tests that watch what it
    /// does. The corresponding PulseAudio call is `pa_threaded_mainloop_once_unlocked`.
    package func serverThread() -> UInt {
        final class Found: Sendable { let thread = Atomic<UInt>(0) }
        let found = Found()
        audio.onLoopThread { found.thread.store(UInt(pthread_self()), ordering: .releasing) }
        return found.thread.load(ordering: .acquiring)
    }

    // MARK: Devices

    /// The sink named `name` (`@DEFAULT_SINK@` for the default). The corresponding PulseAudio call
    /// is `pa_context_get_sink_info_by_name`.
    func sinkInfo(_ name: String) throws(HALError) -> HALDeviceInfo {
        let found = control.query(HALDeviceInfo?.none) { ud in
            pa_context_get_sink_info_by_name(context, name, { _, info, eol, ud in
                let box = PulseQuery<HALDeviceInfo?, Void>.from(ud)
                if eol == 0, let info { box.value = PulseBackend.device(sink: info) }
                box.finish()
            }, ud)
        }
        guard let found else { throw HALError(.deviceNotFound, "no sink named \(name)") }
        return found
    }

    /// The source named `name` (`@DEFAULT_SOURCE@` for the default). The corresponding PulseAudio
    /// call is `pa_context_get_source_info_by_name`.
    func sourceInfo(_ name: String) throws(HALError) -> HALDeviceInfo {
        let found = control.query(HALDeviceInfo?.none) { ud in
            pa_context_get_source_info_by_name(context, name, { _, info, eol, ud in
                let box = PulseQuery<HALDeviceInfo?, Void>.from(ud)
                if eol == 0, let info { box.value = PulseBackend.device(source: info) }
                box.finish()
            }, ud)
        }
        guard let found else { throw HALError(.deviceNotFound, "no source named \(name)") }
        return found
    }

    package func outputDevice(named name: String?) throws(HALError) -> HALDeviceInfo { try sinkInfo(name ?? "@DEFAULT_SINK@") }
    package func inputDevice(named name: String?) throws(HALError) -> HALDeviceInfo { try sourceInfo(name ?? "@DEFAULT_SOURCE@") }

    // MARK: Streams

    package func openOutput(_ request: HALStreamRequest, source: HALStreamClient) throws(HALError) -> any HALStream {
        try PulseStream(backend: self, request: request, playback: source, capture: nil)
    }

    package func openInput(_ request: HALStreamRequest, sink: HALStreamClient) throws(HALError) -> any HALStream {
        try PulseStream(backend: self, request: request, playback: nil, capture: sink)
    }
}
