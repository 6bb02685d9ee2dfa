// AudioToolbox re-exports CoreAudio (and through it CoreAudioTypes), as Apple's does, and the C
// structs of AudioQueue.h.
@_exported public import CoreAudioTypes
@_exported public import CoreAudio
@_exported public import CAudioQueueTypes

// MARK: - Threads, what each may do, and the lock order
//
// A newcomer's map of the running library (DESIGN.md, "Threads and real time", is the rule; this
// is how the code keeps it). `openavf-rtcheck` and the idle wake-up test check the first and the
// third rows; ThreadSanitizer (`Scripts/sanitize`) checks the locking.
//
// Threads:
// 1. The server thread: the audio connection's libpulse main loop (`PulseConnection`, named
//    "threaded-ml", SCHED_FIFO where the system allows). Carries streams only. Runs
//    `PulseStream`'s write/read callbacks, which call the stream's `HALStreamClient`
//    (`AudioQueueEngine.render`/`capture`). May: move samples between lock-free rings
//    (`SPSCRing`) and the server's buffers, read and write atomics, post a semaphore (`Wakeup`).
//    May not: allocate, free, retain or release, take any lock but the main loop's own (libpulse
//    holds it while dispatching; it is a priority-inheriting mutex), log, or call user code.
//    Control calls reach it through atomics and, for cork/uncork prefill, a pooled main-loop
//    event (`PulseEventPool`), never by rendering on the caller's thread.
// 2. The control thread: the control connection's main loop. Introspection replies (devices,
//    other clients' streams, modules), the event subscription, the audio session's policy stream
//    (cork requests) and the ducking trigger. May allocate; never waits on another thread. Raises
//    `HALEvents` bits for the session's event thread.
// 3. A queue's callback thread (one per queue, "AudioQueue output"/"AudioQueue input", nice −10
//    where allowed): sleeps on the engine's `Wakeup` until a buffer completes, a stop progresses
//    or work is posted; converts captured audio, runs the user's callbacks and property listeners
//    (or hands them to the run loop or dispatch queue the user gave). User code runs here, as on
//    Apple's "internal thread of the audio queue". AVAudioPlayer decodes and AVAudioRecorder
//    writes here.
// 4. The session's event thread ("AVAudioSession events", one per process): sleeps on
//    `HALEvents.wakeup`; turns server events into interruption, route change and media services
//    notifications (posted from it), reconnects after a loss, and follows the audio environment
//    (`AudioSystem.current`) when a test sets another (the old backend's events wake it; the
//    session's own reset runs on the thread that set it, through `AudioSystem.observeChanges`).
// 5. The app's threads: every public call. A control call takes the queue's lock for its
//    bookkeeping and, for a stream request (cork, flush, timing), the audio main loop's lock for
//    the request alone, waiting for the reply with that lock released.
// 6. Delegates of AVAudioPlayer and AVAudioRecorder: a private serial dispatch queue each.
// 7. A device's I/O thread (`import CoreAudio`'s IOProcs): the main-loop thread of a connection of
//    the device's own (`HALStreamRequest.ownThread`), SCHED_FIFO where allowed, one per device
//    with running IOProcs. Runs `DeviceIOClient`, which calls the user's IOProcs (Apple documents
//    them as real-time callbacks): the same rules as the server thread for everything of ours,
//    and a late IOProc delays only its own device. Checked by openavf-rtcheck's `ioproc` scenario.
// 8. The device API's notification thread ("CoreAudio notifications", one per process, from the
//    first use of `AudioObject*`): sleeps on its own subscription to the backend's `HALEvents`,
//    reads the server's devices after each event and calls property listeners (procs there,
//    blocks on their queue). System sounds' completions come from the control thread through a
//    private queue (blocks) or the run loop given.
// 9. An I/O unit's render threads (`AudioOutputUnitStart`; an AVAudioEngine's output and input):
//    the main-loop threads of two connections of the unit's own (playing and recording),
//    SCHED_FIFO where allowed. The playing one pulls the render callback (an engine: its whole
//    graph, source and sink node blocks included, as Apple documents them real-time); the
//    recording one calls the input callback. The same rules as the server thread: units render
//    from atomics and memory made at initialize, reach each other through unretained references
//    (`RenderRegistry` for `AudioUnitRender` by reference), and hand taps, completions and file
//    reads to threads 10–12 through rings and semaphore posts. Rewiring an engine holds its
//    cycles at a gate (`EngineDriver`), never a lock. Checked by openavf-rtcheck's `engine`.
// 10. A tap's thread ("AVAudioNode tap", one per installed tap): sleeps on the tap's semaphore,
//    gathers `bufferSize` frames and calls the tap block.
// 11. A player node's completion thread ("AVAudioPlayerNode", one per player node): sleeps on
//    the unit's completion semaphore and calls completion handlers, each once.
// 12. A file feeder's thread ("AVAudioPlayerNode file", one per scheduled file segment while it
//    plays): decodes about a second ahead into a ring, woken by the render side's reads.
//
// Lock order, outermost first: a thread holding one of these never takes one above it.
// 1. AVAudioPlayer's decode lock (`PlayerDecoder.lock`: held while decoding and enqueueing, and
//    while stop and seek turn feeding off), then its core lock (never held while decoding);
//    AVAudioRecorder's core lock.
// 2. AVAudioSession's route-check lock, then its state lock.
// 3. `AudioQueueObject.lock` (the queue's state).
// 4. The audio environment's lock (taken when a queue first opens a stream and connects).
// 5. `PulseBackend`'s ducking-trigger lock; CoreAudio's IOProc table (`DeviceIO`), then its
//    device snapshot (`Hardware`); the system sounds' table. An AVAudioEngine's lock, then an
//    audio unit's lock (`AudioUnitObject.lock`), then `RenderRegistry`'s writer lock.
// 6. A `PulseConnection`'s main-loop lock (control or audio): innermost. Nothing of ours is
//    taken while it is held, on any thread.
// Leaves (held only around their own data, never while taking another): AVAudioPlayer's
// published position (what `currentTime` and `isPlaying` read), `AudioSessionHost`'s state (a
// queue reads the session's stream properties and route under its own lock), the handle tables
// (`LiveObjects`), a queue's inbox and reset condition (its `CallbackExecutor`'s). `HALEvents`
// and the rings are atomics, not locks.
//
// A queue's transport (which call leads where, and which of Apple's errors refuses it) is one
// table: `QueueTransport.swift`. A queue is its parts: `QueueTransport`, `QueueBufferPool`,
// `CallbackExecutor`, the stream binding in `AudioQueueObject`, and the server-thread half,
// `AudioQueueEngine`.
