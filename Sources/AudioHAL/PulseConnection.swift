internal import CPulseAudio
import Synchronization

/// One connection to the PulseAudio server: a `pa_context` on its own threaded main loop.
///
/// The backend keeps two (see ``PulseBackend``): the *audio* connection, whose main-loop thread
/// is the real-time server thread and carries nothing but streams, and the *control* connection,
/// whose thread runs introspection replies and event subscriptions, which build strings and
/// dictionaries and so must stay off the real-time thread.
///
/// Every `pa_*` call on this connection from another thread holds the main loop's lock
/// (``locked(_:)``); a caller waiting for an operation releases it while it waits (``await(_:)``).
final class PulseConnection: @unchecked Sendable {
    let mainloop: OpaquePointer
    let context: OpaquePointer
    /// The main-loop vtable the context runs on: the threaded main loop's, with pooled time and
    /// deferred events (``PulseEventPool``), so that this connection's thread frees nothing.
    private let pool: PulseEventPool
    var api: UnsafeMutablePointer<pa_mainloop_api> { pool.api }
    /// What the context's state callback reaches: the main loop to signal and the events to raise.
    private let state: StateCallbacks
    private var started = false
    private var isShutDown = false

    private final class StateCallbacks: @unchecked Sendable {
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

    /// Connects to `server` (a libpulse server string, or `nil` for libpulse's usual rules) and
    /// waits until the context is ready. A later failure of the connection raises
    /// ``HALEvents/Kind/serverLost`` on `events`. The corresponding PulseAudio calls are
    /// `pa_context_new_with_proplist` and `pa_context_connect` (without autospawn).
    init(server: String?, applicationName: String, purpose: String, events: HALEvents) throws(HALError) {
        guard let ml = pa_threaded_mainloop_new() else {
            throw HALError(.noServer, "pa_threaded_mainloop_new failed")
        }
        let props = pa_proplist_new()
        pa_proplist_sets(props, "application.name", applicationName)
        pa_proplist_sets(props, "application.process.binary", applicationName)
        // Which of the process's two connections this is, for someone reading `pactl list clients`.
        pa_proplist_sets(props, "openavf.connection", purpose)
        let pool = PulseEventPool(inner: pa_threaded_mainloop_get_api(ml))
        guard let ctx = pa_context_new_with_proplist(pool.api, applicationName, props) else {
            pa_proplist_free(props)
            pa_threaded_mainloop_free(ml)
            pool.release()
            throw HALError(.noServer, "pa_context_new failed")
        }
        pa_proplist_free(props)
        self.pool = pool
        mainloop = ml
        context = ctx
        state = StateCallbacks(mainloop: ml, events: events)
        pa_context_set_state_callback(ctx, { c, userData in
            let box = Unmanaged<StateCallbacks>.fromOpaque(userData!).takeUnretainedValue()
            let state = pa_context_get_state(c)
            if (state == PA_CONTEXT_FAILED || state == PA_CONTEXT_TERMINATED) && box.connected.exchange(false, ordering: .relaxed) {
                box.events.raise(.serverLost)
            }
            pa_threaded_mainloop_signal(box.mainloop, 0)
        }, Unmanaged.passUnretained(state).toOpaque())

        if pa_context_connect(ctx, server, PA_CONTEXT_NOAUTOSPAWN, nil) < 0 {
            let code = pa_context_errno(ctx)
            shutDown()
            throw HALError(.noServer, code: code, "cannot connect to the sound server: \(Self.message(code))")
        }
        pa_threaded_mainloop_lock(ml)
        pa_threaded_mainloop_start(ml)
        started = true
        while true {
            let s = pa_context_get_state(ctx)
            if s == PA_CONTEXT_READY { break }
            if s == PA_CONTEXT_FAILED || s == PA_CONTEXT_TERMINATED {
                let code = pa_context_errno(ctx)
                pa_threaded_mainloop_unlock(ml)
                shutDown()
                throw HALError(.noServer, code: code, "cannot connect to the sound server: \(Self.message(code))")
            }
            pa_threaded_mainloop_wait(ml)
        }
        state.connected.store(true, ordering: .relaxed)
        Self.warmSendQueueFreeList(ctx)
        pa_threaded_mainloop_unlock(ml)
    }

    private static let sendQueueWarmed = Atomic<Bool>(false)

    /// Fills libpulse's free list of send-queue entries before any stream runs.
    ///
    /// Every connection of a process takes the entries of its send queue (a command, a stream's
    /// write, a captured block's release) from one free list libpulse keeps in a static
    /// (pstream.c), and allocates an entry when that list is empty; a sent entry goes back to the
    /// list (which keeps up to 256). So the first moment the entries in flight on all threads
    /// outnumber those of every earlier moment, whichever thread queues one allocates it, and that
    /// can be a stream's write on a device's real-time I/O thread (`pa_stream_write` →
    /// `pa_pstream_send_memblock` → `pa_xmalloc`, openavf-rtcheck's ioproc scenario on
    /// PipeWire). The process's first connection therefore queues 64 server-info requests
    /// while it holds the lock, so that 64 entries are in flight at once and then wait in the list:
    /// a busy moment later takes from the list instead. Call with the lock held, once ready.
    private static func warmSendQueueFreeList(_ context: OpaquePointer) {
        guard !sendQueueWarmed.exchange(true, ordering: .relaxed) else { return }
        for _ in 0..<64 {
            if let operation = pa_context_get_server_info(context, nil, nil) { pa_operation_unref(operation) }
        }
    }

    deinit { shutDown() }

    /// Stops the main loop's thread, so that nothing of this connection runs there any more (its
    /// teardown happens on the caller's thread); ``shutDown()`` does it too.
    func stopLoop() {
        guard started else { return }
        started = false
        state.connected.store(false, ordering: .relaxed)
        pa_threaded_mainloop_stop(mainloop)
    }

    /// Disconnects and stops the main loop; the second call does nothing.
    func shutDown() {
        guard !isShutDown else { return }
        isShutDown = true
        state.connected.store(false, ordering: .relaxed)
        stopLoop()
        pa_context_set_subscribe_callback(context, nil, nil)
        pa_context_set_state_callback(context, nil, nil)
        pa_context_disconnect(context)
        pa_context_unref(context)
        pa_threaded_mainloop_free(mainloop)
        pool.release()
    }

    static func message(_ code: Int32) -> String { String(cString: pa_strerror(code)) }

    /// The server's index of this connection's client (`pa_context_get_index`).
    var clientIndex: UInt32 { locked { pa_context_get_index(context) } }

    /// Runs `body` holding the main loop's lock: no callback of this connection runs meanwhile.
    func locked<T>(_ body: () throws -> T) rethrows -> T {
        pa_threaded_mainloop_lock(mainloop)
        defer { pa_threaded_mainloop_unlock(mainloop) }
        return try body()
    }

    /// Waits, with the lock held, until `operation` completes; the lock is released while waiting.
    /// The operation's callback must signal the main loop (``wakeStreamCaller``, a ``PulseQuery``'s
    /// `finish()`, or `pa_threaded_mainloop_signal` itself). The caller drops the last reference, so the
    /// operation is freed on the caller's thread, not the main loop's.
    func await(_ operation: OpaquePointer?) {
        guard let operation else { return }
        while pa_operation_get_state(operation) == PA_OPERATION_RUNNING {
            pa_threaded_mainloop_wait(mainloop)
        }
        pa_operation_unref(operation)
    }

    /// Issues a stream operation whose completion only has to wake the caller (`pa_stream_cork`,
    /// `pa_stream_flush`…) and waits for it: `start` gets the completion and the user data it
    /// needs. Call with the lock held.
    func performOnStream(_ start: (pa_stream_success_cb_t, UnsafeMutableRawPointer) -> OpaquePointer?) {
        self.await(start(wakeStreamCaller, UnsafeMutableRawPointer(mainloop)))
    }

    /// Runs `body` once on the main loop's thread (with the lock, as every callback there) and
    /// waits for it (5 s at most). Made of a pooled deferred event, so that nothing is freed there.
    func onLoopThread(_ body: @escaping @Sendable () -> Void) {
        final class Box: @unchecked Sendable {
            let body: @Sendable () -> Void
            let done = Wakeup()
            init(_ body: @escaping @Sendable () -> Void) { self.body = body }
        }
        let box = Box(body)
        let ud = Unmanaged.passRetained(box)
        locked {
            _ = api.pointee.defer_new(api, { a, event, ud in
                a!.pointee.defer_free(event)
                let box = Unmanaged<Box>.fromOpaque(ud!).takeUnretainedValue()
                box.body()
                box.done.signal()
            }, ud.toOpaque())
        }
        // The box outlives a wait that times out: the callback may still run.
        if box.done.wait(timeout: 5) { ud.release() }
    }
}

/// An operation's completion that only wakes the caller waiting in ``PulseConnection/await(_:)``;
/// the user data is the main loop.
private let wakeStreamCaller: pa_stream_success_cb_t = { _, _, ud in pa_threaded_mainloop_signal(OpaquePointer(ud), 0) }

/// What a query's callbacks fill in while the caller waits (``PulseConnection/query(_:context:_:)``):
/// the answer so far and what the callbacks need to know. The callbacks run on the connection's
/// thread with its lock held; the caller reads the answer after the wait.
final class PulseQuery<Value, Context>: @unchecked Sendable {
    let mainloop: OpaquePointer
    let context: Context
    var value: Value
    init(_ mainloop: OpaquePointer, _ value: Value, _ context: Context) {
        self.mainloop = mainloop
        self.value = value
        self.context = context
    }

    /// The query a callback's user data points to.
    static func from(_ userData: UnsafeMutableRawPointer?) -> PulseQuery { Unmanaged.fromOpaque(userData!).takeUnretainedValue() }

    /// Wakes the waiting caller: call at the end of the answer (`eol`, or the single reply).
    func finish() { pa_threaded_mainloop_signal(mainloop, 0) }
}

extension PulseConnection {
    /// Issues a query (`start` gets the user data its callbacks receive, a ``PulseQuery`` holding
    /// `initial` and `context`), waits until it completes, and returns what the callbacks left.
    /// The one way this backend asks the server something and waits.
    func query<Value, Context>(_ initial: Value, context: Context, _ start: (UnsafeMutableRawPointer) -> OpaquePointer?) -> Value {
        let box = PulseQuery(mainloop, initial, context)
        locked { self.await(start(Unmanaged.passUnretained(box).toOpaque())) }
        return box.value
    }

    func query<Value>(_ initial: Value, _ start: (UnsafeMutableRawPointer) -> OpaquePointer?) -> Value {
        query(initial, context: (), start)
    }
}
