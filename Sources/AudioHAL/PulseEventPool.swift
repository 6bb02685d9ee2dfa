internal import CPulseAudio

/// The main-loop vtable libpulse gets for the audio connection: the threaded main loop's own,
/// except that I/O, time and deferred events are pooled, so that the real-time thread never frees.
///
/// Why: libpulse arms a time event (the reply timeout) for every request (`pa_stream_cork`,
/// `pa_stream_flush`, `pa_stream_update_timing_info`…) on the caller's thread and frees it when the
/// reply arrives, on the main-loop thread; PulseAudio's main loop then releases the event's memory
/// there, in `pa_mainloop_prepare`. With this vtable a freed event is only disarmed and kept for
/// the next `time_new`, which rearms it: memory is taken on the thread that first needs an event
/// (a control thread, with the lock held) and given back when the connection closes.
///
/// I/O events too: libpulse frees its socket's I/O event whenever the socket is both readable and
/// writable and makes a new one when it waits again (`pa_iochannel`'s `enable_events`). Against
/// PulseAudio the audio travels through shared memory and that is rare; against pipewire-pulse,
/// which has no shared memory, every request for audio is a packet, and the main loop allocated
/// and freed an event for each, hundreds a second. A freed I/O event is disabled and kept for the
/// next `io_new` on the same descriptor. One whose descriptor wakes it while kept (closed or hung
/// up: poll reports that even with no events asked) is freed then, once, as the connection ends.
///
/// Threads: libpulse calls the vtable with the main loop's lock held (its own thread while
/// dispatching, any other thread through ``PulseConnection/locked(_:)``), so the free lists need
/// no lock of their own. The trampolines the inner loop calls touch only raw memory: no Swift
/// object is retained or released on the real-time thread.
final class PulseEventPool: @unchecked Sendable {
    /// What libpulse is given (`pa_context_new`) and what the stream's own events come from.
    let api: UnsafeMutablePointer<pa_mainloop_api>
    private let shared: UnsafeMutablePointer<PoolState>

    /// `inner` is the threaded main loop's vtable (`pa_threaded_mainloop_get_api`).
    init(inner: UnsafeMutablePointer<pa_mainloop_api>) {
        api = .allocate(capacity: 1)
        shared = .allocate(capacity: 1)
        shared.initialize(to: PoolState(inner: inner, outer: api))
        api.initialize(to: pa_mainloop_api(
            userdata: UnsafeMutableRawPointer(shared),
            io_new: poolIONew, io_enable: poolIOEnable, io_free: poolIOFree, io_set_destroy: poolIOSetDestroy,
            time_new: poolTimeNew, time_restart: poolTimeRestart, time_free: poolTimeFree, time_set_destroy: poolTimeSetDestroy,
            defer_new: poolDeferNew, defer_enable: poolDeferEnable, defer_free: poolDeferFree, defer_set_destroy: poolDeferSetDestroy,
            quit: { a, retval in
                let state = a!.pointee.userdata.assumingMemoryBound(to: PoolState.self)
                state.pointee.inner.pointee.quit(state.pointee.inner, retval)
            }))
    }

    /// Releases the pooled records. Call after the context is gone and the main loop is freed
    /// (which frees the inner events).
    func release() {
        var io = shared.pointee.allIOs
        while let record = io {
            io = record.pointee.nextAll
            record.deallocate()
        }
        var time = shared.pointee.allTimes
        while let record = time {
            time = record.pointee.nextAll
            record.deallocate()
        }
        var deferred = shared.pointee.allDefers
        while let record = deferred {
            deferred = record.pointee.nextAll
            record.deallocate()
        }
        shared.deallocate()
        api.deallocate()
    }
}

/// The pool's state, reached from every record and from the vtable's user data.
private struct PoolState {
    var inner: UnsafeMutablePointer<pa_mainloop_api>
    var outer: UnsafeMutablePointer<pa_mainloop_api>
    var freeIOs: UnsafeMutablePointer<IORecord>?
    var allIOs: UnsafeMutablePointer<IORecord>?
    var freeTimes: UnsafeMutablePointer<TimeRecord>?
    var freeDefers: UnsafeMutablePointer<DeferRecord>?
    var allTimes: UnsafeMutablePointer<TimeRecord>?
    var allDefers: UnsafeMutablePointer<DeferRecord>?
}

private struct IORecord {
    var state: UnsafeMutablePointer<PoolState>
    var fd: Int32
    var inner: OpaquePointer?
    var callback: pa_io_event_cb_t?
    var userdata: UnsafeMutableRawPointer?
    var destroy: pa_io_event_destroy_cb_t?
    /// Kept for the next `io_new` on ``fd`` (on the free list).
    var kept: Bool
    var nextFree: UnsafeMutablePointer<IORecord>?
    var nextAll: UnsafeMutablePointer<IORecord>?
}

private struct TimeRecord {
    var state: UnsafeMutablePointer<PoolState>
    var inner: OpaquePointer?
    var callback: pa_time_event_cb_t?
    var userdata: UnsafeMutableRawPointer?
    var destroy: pa_time_event_destroy_cb_t?
    var nextFree: UnsafeMutablePointer<TimeRecord>?
    var nextAll: UnsafeMutablePointer<TimeRecord>?
}

private struct DeferRecord {
    var state: UnsafeMutablePointer<PoolState>
    var inner: OpaquePointer?
    var callback: pa_defer_event_cb_t?
    var userdata: UnsafeMutableRawPointer?
    var destroy: pa_defer_event_destroy_cb_t?
    var nextFree: UnsafeMutablePointer<DeferRecord>?
    var nextAll: UnsafeMutablePointer<DeferRecord>?
}

private func state(_ a: UnsafeMutablePointer<pa_mainloop_api>?) -> UnsafeMutablePointer<PoolState> {
    a!.pointee.userdata.assumingMemoryBound(to: PoolState.self)
}

// MARK: I/O events: pooled by descriptor.

/// Takes a kept record off the free list.
private func unlinkKept(_ record: UnsafeMutablePointer<IORecord>) {
    let s = record.pointee.state
    if s.pointee.freeIOs == record {
        s.pointee.freeIOs = record.pointee.nextFree
    } else {
        var previous = s.pointee.freeIOs
        while let p = previous, p.pointee.nextFree != record { previous = p.pointee.nextFree }
        previous?.pointee.nextFree = record.pointee.nextFree
    }
    record.pointee.nextFree = nil
    record.pointee.kept = false
}

private let poolIONew: @convention(c) (
    UnsafeMutablePointer<pa_mainloop_api>?, Int32, pa_io_event_flags_t, pa_io_event_cb_t?, UnsafeMutableRawPointer?
) -> OpaquePointer? = { a, fd, events, callback, userdata in
    let s = state(a)
    var kept = s.pointee.freeIOs
    while let record = kept, record.pointee.fd != fd { kept = record.pointee.nextFree }
    if let record = kept {
        unlinkKept(record)
        record.pointee.callback = callback
        record.pointee.userdata = userdata
        record.pointee.destroy = nil
        s.pointee.inner.pointee.io_enable(record.pointee.inner, events)
        return OpaquePointer(record)
    }
    let record = UnsafeMutablePointer<IORecord>.allocate(capacity: 1)
    record.initialize(to: IORecord(
        state: s, fd: fd, inner: nil, callback: callback, userdata: userdata, destroy: nil, kept: false, nextFree: nil, nextAll: s.pointee.allIOs))
    s.pointee.allIOs = record
    record.pointee.inner = s.pointee.inner.pointee.io_new(s.pointee.inner, fd, events, { _, _, fd, events, ud in
        let r = ud!.assumingMemoryBound(to: IORecord.self)
        if let callback = r.pointee.callback {
            callback(r.pointee.state.pointee.outer, OpaquePointer(r), fd, events, r.pointee.userdata)
        } else if r.pointee.kept, let inner = r.pointee.inner {
            // Kept, yet its descriptor woke it: closed or hung up. No next io_new will want it.
            unlinkKept(r)
            r.pointee.inner = nil
            r.pointee.state.pointee.inner.pointee.io_free(inner)
        }
    }, UnsafeMutableRawPointer(record))
    return OpaquePointer(record)
}

private let poolIOEnable: @convention(c) (OpaquePointer?, pa_io_event_flags_t) -> Void = { e, events in
    let r = UnsafeMutablePointer<IORecord>(e!)
    r.pointee.state.pointee.inner.pointee.io_enable(r.pointee.inner, events)
}

private let poolIOFree: @convention(c) (OpaquePointer?) -> Void = { e in
    let r = UnsafeMutablePointer<IORecord>(e!)
    let s = r.pointee.state
    r.pointee.destroy?(s.pointee.outer, e, r.pointee.userdata)
    // Disabled, not freed: kept for the next io_new on the same descriptor.
    s.pointee.inner.pointee.io_enable(r.pointee.inner, PA_IO_EVENT_NULL)
    r.pointee.callback = nil
    r.pointee.userdata = nil
    r.pointee.destroy = nil
    r.pointee.kept = true
    r.pointee.nextFree = s.pointee.freeIOs
    s.pointee.freeIOs = r
}

private let poolIOSetDestroy: @convention(c) (OpaquePointer?, pa_io_event_destroy_cb_t?) -> Void = { e, destroy in
    UnsafeMutablePointer<IORecord>(e!).pointee.destroy = destroy
}

// MARK: Time events: pooled.

private let poolTimeNew: @convention(c) (
    UnsafeMutablePointer<pa_mainloop_api>?, UnsafePointer<timeval>?, pa_time_event_cb_t?, UnsafeMutableRawPointer?
) -> OpaquePointer? = { a, tv, callback, userdata in
    let s = state(a)
    if let record = s.pointee.freeTimes {
        s.pointee.freeTimes = record.pointee.nextFree
        record.pointee.nextFree = nil
        record.pointee.callback = callback
        record.pointee.userdata = userdata
        record.pointee.destroy = nil
        s.pointee.inner.pointee.time_restart(record.pointee.inner, tv)
        return OpaquePointer(record)
    }
    let record = UnsafeMutablePointer<TimeRecord>.allocate(capacity: 1)
    record.initialize(to: TimeRecord(state: s, inner: nil, callback: callback, userdata: userdata, destroy: nil, nextFree: nil, nextAll: s.pointee.allTimes))
    s.pointee.allTimes = record
    record.pointee.inner = s.pointee.inner.pointee.time_new(s.pointee.inner, tv, { _, _, tv, ud in
        let r = ud!.assumingMemoryBound(to: TimeRecord.self)
        r.pointee.callback?(r.pointee.state.pointee.outer, OpaquePointer(r), tv, r.pointee.userdata)
    }, UnsafeMutableRawPointer(record))
    return OpaquePointer(record)
}

private let poolTimeRestart: @convention(c) (OpaquePointer?, UnsafePointer<timeval>?) -> Void = { e, tv in
    let r = UnsafeMutablePointer<TimeRecord>(e!)
    r.pointee.state.pointee.inner.pointee.time_restart(r.pointee.inner, tv)
}

private let poolTimeFree: @convention(c) (OpaquePointer?) -> Void = { e in
    let r = UnsafeMutablePointer<TimeRecord>(e!)
    let s = r.pointee.state
    r.pointee.destroy?(s.pointee.outer, e, r.pointee.userdata)
    // Disarmed, not freed: kept for the next time_new.
    s.pointee.inner.pointee.time_restart(r.pointee.inner, nil)
    r.pointee.callback = nil
    r.pointee.userdata = nil
    r.pointee.destroy = nil
    r.pointee.nextFree = s.pointee.freeTimes
    s.pointee.freeTimes = r
}

private let poolTimeSetDestroy: @convention(c) (OpaquePointer?, pa_time_event_destroy_cb_t?) -> Void = { e, destroy in
    UnsafeMutablePointer<TimeRecord>(e!).pointee.destroy = destroy
}

// MARK: Deferred events: pooled.

private let poolDeferNew: @convention(c) (
    UnsafeMutablePointer<pa_mainloop_api>?, pa_defer_event_cb_t?, UnsafeMutableRawPointer?
) -> OpaquePointer? = { a, callback, userdata in
    let s = state(a)
    if let record = s.pointee.freeDefers {
        s.pointee.freeDefers = record.pointee.nextFree
        record.pointee.nextFree = nil
        record.pointee.callback = callback
        record.pointee.userdata = userdata
        record.pointee.destroy = nil
        // A new deferred event starts enabled, as PulseAudio's own do.
        s.pointee.inner.pointee.defer_enable(record.pointee.inner, 1)
        return OpaquePointer(record)
    }
    let record = UnsafeMutablePointer<DeferRecord>.allocate(capacity: 1)
    record.initialize(to: DeferRecord(state: s, inner: nil, callback: callback, userdata: userdata, destroy: nil, nextFree: nil, nextAll: s.pointee.allDefers))
    s.pointee.allDefers = record
    record.pointee.inner = s.pointee.inner.pointee.defer_new(s.pointee.inner, { _, _, ud in
        let r = ud!.assumingMemoryBound(to: DeferRecord.self)
        r.pointee.callback?(r.pointee.state.pointee.outer, OpaquePointer(r), r.pointee.userdata)
    }, UnsafeMutableRawPointer(record))
    return OpaquePointer(record)
}

private let poolDeferEnable: @convention(c) (OpaquePointer?, Int32) -> Void = { e, enable in
    let r = UnsafeMutablePointer<DeferRecord>(e!)
    r.pointee.state.pointee.inner.pointee.defer_enable(r.pointee.inner, enable)
}

private let poolDeferFree: @convention(c) (OpaquePointer?) -> Void = { e in
    let r = UnsafeMutablePointer<DeferRecord>(e!)
    let s = r.pointee.state
    r.pointee.destroy?(s.pointee.outer, e, r.pointee.userdata)
    s.pointee.inner.pointee.defer_enable(r.pointee.inner, 0)
    r.pointee.callback = nil
    r.pointee.userdata = nil
    r.pointee.destroy = nil
    r.pointee.nextFree = s.pointee.freeDefers
    s.pointee.freeDefers = r
}

private let poolDeferSetDestroy: @convention(c) (OpaquePointer?, pa_defer_event_destroy_cb_t?) -> Void = { e, destroy in
    UnsafeMutablePointer<DeferRecord>(e!).pointee.destroy = destroy
}
