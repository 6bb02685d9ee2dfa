import CoreAudioTypes

/// The transport of an audio queue: where it is between created and disposed, and what each
/// `AudioQueue…` call does from there. Read this first.
///
/// Every control call is one ``Operation``; ``QueueTransport/outcome(of:in:)`` is the one table
/// that says, for each state, which state the call leads to and what the queue must do on the
/// way (the ``Effect``), or which of Apple's errors refuses it. The queue
/// (``AudioQueueObject``) looks the call up, performs the effect, and only then enters the new
/// state, all under its lock; the table itself touches nothing.
///
/// ```
///            allocate  prime     start     pause     stop      stop      reset     dispose   dispose   drained
///            enqueue                                 (sync)    (async)             (sync)    (async)
/// stopped    ·         primed    running   ·         stopped¹  stopped¹  ·²        disposed  disposed  ·
/// primed     ·         ·         running   ·         stopped¹  stopped¹  ·²        disposed  disposed  ·
/// running    ·         ·         ·         paused    stopped¹  stopping  ·²        disposed  toDispose ·
/// paused     ·         ·         running³  ·         stopped¹  stopped¹  ·²        disposed  disposed⁴ ·
/// stopping   ·         ·         running   pausedWS  stopped¹  ·         stopped²  disposed  toDispose stopped
/// pausedWS   ·         ·         stopping³ ·         stopped¹  stopped¹  stopped²  disposed  disposed⁴ stopped
/// toDispose  DP        DP        DP        DP        DP        DP        DP        disposed  ·         disposed⁵
/// disposed   DP        DP        DP        DP        DP        DP        DP        ·         ·         ·
///
/// ·   stays, noErr     DP  kAudioQueueErr_DisposalPending
/// pausedWS  pausedWhileStopping          toDispose  stoppingToDispose
/// ¹ every enqueued buffer comes back through the callback; the timeline starts again at 0
/// ² queued audio is dropped and its buffers come back; a running queue keeps running
/// ³ resumes at the very next frame     ⁴ a paused queue would never play out: it goes now
/// ⁵ the last callbacks run, then the queue is torn down on its callback thread
/// ```
///
/// `stop(async)` and `dispose(async)` are their synchronous forms for a recording queue and for a
/// queue with no stream (the queue maps them before it looks them up). `drained` is not a call: it
/// is the engine reporting that an asynchronous stop has played everything out. `prime` on a
/// recording queue is `kAudioQueueErr_InvalidQueueType` in every state short of disposal (a
/// property of the queue, not of its transport). `kAudioQueueProperty_IsRunning` is 1 in running, paused,
/// stopping, pausedWhileStopping and stoppingToDispose (``isRunning``); its listeners hear each
/// change.
///
/// Threads: a value type with no locking of its own; the queue keeps it under its lock.
struct QueueTransport: Equatable, Sendable {
    enum State: CaseIterable, Sendable {
        /// Created, or stopped: nothing plays, buffers may be enqueued for the next start.
        case stopped
        /// `AudioQueuePrime` opened the stream; not yet started.
        case primed
        /// Playing or recording.
        case running
        /// `AudioQueuePause`: holds at the paused frame.
        case paused
        /// `AudioQueueStop(async)`: playing out what is enqueued, then stopped.
        case stopping
        /// Paused during an asynchronous stop; `start` resumes the stop.
        case pausedWhileStopping
        /// `AudioQueueDispose(async)`: playing out what is enqueued, then disposed.
        case stoppingToDispose
        /// Gone: no further callbacks, every call but dispose refused.
        case disposed
    }

    enum Operation: CaseIterable, Sendable {
        /// `AudioQueueAllocateBuffer…`
        case allocate
        /// `AudioQueueEnqueueBuffer…`
        case enqueue
        /// `AudioQueuePrime`
        case prime
        /// `AudioQueueStart`
        case start
        /// `AudioQueuePause`
        case pause
        /// `AudioQueueStop(_, true)`
        case stopImmediately
        /// `AudioQueueStop(_, false)` on a playing output queue
        case stopAfterPlaying
        /// `AudioQueueReset`
        case reset
        /// `AudioQueueDispose(_, true)`
        case disposeImmediately
        /// `AudioQueueDispose(_, false)` on a playing output queue
        case disposeAfterPlaying
        /// Not a call: the engine has played out everything an asynchronous stop waited for.
        case drained
    }

    /// What the queue does on a transition, before it enters the next state.
    enum Effect: Equatable, Sendable {
        /// Nothing (a call that is legal and changes nothing here).
        case none
        /// Opens the stream if there is none (`prime`).
        case openStream
        /// Opens the stream, arms the engine and uncorks: a fresh start (at a start time).
        case begin
        /// Lets the engine consume again after a pause.
        case resume
        /// Stops the engine consuming; the time holds.
        case pause
        /// Tells the engine to stop when its queue is empty, and waits for ``Operation/drained``.
        case drain
        /// Disarms, drops queued audio and hands every buffer back; the timeline restarts.
        case halt
        /// Drops queued audio and hands every buffer back, keeping the timeline and the run state.
        case reset
        /// The drain is complete: halt (nothing is left to hand back).
        case finishDrain
        /// The drain is complete: halt, then tear the queue down after the last callbacks.
        case finishDrainAndTeardown
        /// Closes the stream and ends the callback thread, now.
        case teardown
    }

    enum Outcome: Equatable, Sendable {
        /// Legal: do `Effect`, then enter `State`.
        case to(State, Effect)
        /// Illegal: return this `OSStatus`, state unchanged.
        case refused(OSStatus)
    }

    /// The transport table (see the type's documentation for it drawn as a grid).
    static func outcome(of operation: Operation, in state: State) -> Outcome {
        switch (state, operation) {
        // Gone, or going: Apple's "cannot act on the audio queue because it is being
        // asynchronously disposed of"; disposing again is harmless.
        case (.disposed, .disposeImmediately), (.disposed, .disposeAfterPlaying), (.disposed, .drained):
            return .to(.disposed, .none)
        case (.disposed, _):
            return .refused(kAudioQueueErr_DisposalPending)
        case (.stoppingToDispose, .disposeImmediately): return .to(.disposed, .teardown)
        case (.stoppingToDispose, .disposeAfterPlaying): return .to(.stoppingToDispose, .none)
        case (.stoppingToDispose, .drained): return .to(.disposed, .finishDrainAndTeardown)
        case (.stoppingToDispose, _): return .refused(kAudioQueueErr_DisposalPending)

        // Buffers come and go in every live state.
        case (_, .allocate), (_, .enqueue): return .to(state, .none)

        case (.stopped, .prime), (.primed, .prime): return .to(.primed, .openStream)
        case (_, .prime): return .to(state, .openStream)

        case (.stopped, .start), (.primed, .start), (.stopping, .start): return .to(.running, .begin)
        case (.running, .start): return .to(.running, .none)
        case (.paused, .start): return .to(.running, .resume)
        case (.pausedWhileStopping, .start): return .to(.stopping, .resume)

        case (.running, .pause): return .to(.paused, .pause)
        case (.stopping, .pause): return .to(.pausedWhileStopping, .pause)
        case (_, .pause): return .to(state, .none)

        case (_, .stopImmediately): return .to(.stopped, .halt)
        case (.running, .stopAfterPlaying), (.stopping, .stopAfterPlaying): return .to(.stopping, .drain)
        case (_, .stopAfterPlaying): return .to(.stopped, .halt)

        case (.running, .reset), (.paused, .reset), (.stopped, .reset), (.primed, .reset): return .to(state, .reset)
        case (.stopping, .reset), (.pausedWhileStopping, .reset): return .to(.stopped, .reset)

        case (_, .disposeImmediately): return .to(.disposed, .teardown)
        case (.running, .disposeAfterPlaying), (.stopping, .disposeAfterPlaying): return .to(.stoppingToDispose, .drain)
        case (_, .disposeAfterPlaying): return .to(.disposed, .teardown)

        case (.stopping, .drained), (.pausedWhileStopping, .drained): return .to(.stopped, .finishDrain)
        case (_, .drained): return .to(state, .none)
        }
    }

    private(set) var state: State = .stopped

    /// The outcome of `operation` from the current state.
    func outcome(of operation: Operation) -> Outcome { Self.outcome(of: operation, in: state) }

    /// Enters `next`, once the effect of the transition that leads there is done.
    mutating func enter(_ next: State) { state = next }

    /// `kAudioQueueProperty_IsRunning`.
    var isRunning: Bool { Self.isRunning(state) }

    static func isRunning(_ state: State) -> Bool {
        switch state {
        case .running, .paused, .stopping, .pausedWhileStopping, .stoppingToDispose: return true
        case .stopped, .primed, .disposed: return false
        }
    }

    /// Paused, the engine consuming nothing.
    var isPaused: Bool { state == .paused || state == .pausedWhileStopping }

    /// Waiting for an asynchronous stop or dispose to play out.
    var isDraining: Bool { state == .stopping || state == .pausedWhileStopping || state == .stoppingToDispose }
}
