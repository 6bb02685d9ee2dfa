import AudioHAL
import Foundation
import Synchronization

/// The user's callback, as a C function with its context or as a block.
enum QueueCallback {
    case outputProc(AudioQueueOutputCallback, UnsafeMutableRawPointer?)
    case inputProc(AudioQueueInputCallback, UnsafeMutableRawPointer?)
    case outputBlock(AudioQueueOutputCallbackBlock)
    case inputBlock(AudioQueueInputCallbackBlock)
}

/// A pointer handed to a user callback (packet descriptions that live in the buffer).
struct CallbackPointer<T>: @unchecked Sendable {
    let pointer: UnsafePointer<T>?
    init(_ pointer: UnsafePointer<T>?) { self.pointer = pointer }
}

/// A failed queue operation's `OSStatus`, for `Result`.
struct StatusError: Error {
    let status: OSStatus
    init(_ status: OSStatus) { self.status = status }
}

/// The playback stream's server-side buffer when nothing asks for less: Apple's default hardware
/// I/O buffer is of the same order (1024 frames at 44.1 kHz, 23 ms).
let defaultIOBufferDuration = 0.020

/// The most buffers one queue may hold; the rings between threads are sized for it.
let maximumBuffersPerQueue = 1024

/// An audio queue: the state behind an ``AudioQueueRef``.
///
/// Made of parts: ``QueueTransport`` (the state machine every control call goes through: read its
/// table first), ``QueueBufferPool`` (the buffers), ``CallbackExecutor`` (the callback thread and
/// the hand-over to the user's run loop or dispatch queue), ``AudioQueueEngine`` (the server
/// thread's side), and the stream binding here (``ensureStream(corked:)``).
///
/// Threads: control calls (the `AudioQueue…` functions) may come from any thread and take `lock`;
/// the server thread runs ``engine`` only; the queue's callback thread waits on the engine's
/// wake-up, turns finished buffers into user callbacks, and runs them (or hands them to the run
/// loop or dispatch queue the user gave). No user code runs with `lock` held.
final class AudioQueueObject: ReferencedObject, @unchecked Sendable {
    let format: AudioStreamBasicDescription
    let pcm: LinearPCMFormat
    /// For compressed descriptions: packets ↔ float (``pcm`` is then float at the stream's rate).
    let codec: AudioQueueCodec?
    let isOutput: Bool
    let callback: QueueCallback
    let engine: AudioQueueEngine
    let lock = NSLock()
    let executor: CallbackExecutor

    /// Guarded by `lock`.
    private let pool: QueueBufferPool
    /// Guarded by `lock`. The queue's buffers by address.
    var slots: [AudioQueueBufferRef: BufferSlot] { pool.slots }
    /// Guarded by `lock`; every control call is one transition of it.
    private(set) var transport = QueueTransport()
    /// Guarded by `lock`; set by ``ensureStream(corked:)`` and offline rendering.
    var stream: (any HALStream)?
    /// The buffer duration the open stream was asked for. Guarded by `lock`.
    private var requestedBufferDuration: Double = 0
    /// `kAudioQueueProperty_IsRunning`. Guarded by `lock`.
    var isRunning: UInt32 { transport.isRunning ? 1 : 0 }
    /// The queue time when it paused (-1: none), and the host time of the latest resume: until the
    /// engine's anchor is newer than the resume, the time holds at the paused value instead of
    /// running on across the pause.
    private let pausedSample = Atomic<Int64>(-1)
    private let resumedHost = Atomic<UInt64>(0)
    var listeners: [(id: AudioQueuePropertyID, proc: AudioQueuePropertyListenerProc, userData: UnsafeMutableRawPointer?)] = []
    var volume: Float = 1
    var volumeRampTime: Float = 0
    var pan: Float = 0
    var meteringEnabled = false
    var lastMeters: [AudioQueueLevelMeterState]
    /// `kAudioQueueProperty_DecodeBufferSizeFrames` (playback): the frames of the buffer each
    /// enqueued buffer's audio is decoded into. Call with `lock` held.
    var decodeBufferSizeFrames: UInt32 { UInt32(clamping: pool.decodeBufferFrames) }

    /// Sets the least size of the decode buffers; `false` for a size they cannot have (less than
    /// one packet of the queue's format, or more than ``maximumDecodeBufferFrames``). Call with `lock` held.
    func setDecodeBufferSizeFrames(_ frames: UInt32) -> Bool {
        let packet = codec?.framesPerPacket ?? 1
        guard Int(frames) >= packet, Int(frames) <= Self.maximumDecodeBufferFrames else { return false }
        pool.setMinimumStagingFrames(Int(frames))
        return true
    }

    /// Sets the channel layout: its channel count must be the format's
    /// (`kAudioQueueErr_InvalidPropertyValue`), its tag one this library resolves into channels
    /// (`kAudioFormatUnknownFormatError`); set before the stream opens
    /// (`kAudioQueueErr_InvalidRunState` after), as it is the stream's channel map. Call with `lock` held.
    func setChannelLayout(_ bytes: [UInt8]) -> OSStatus {
        let labels: [AudioChannelLabel]
        do {
            labels = try ChannelLayoutLabels.labels(bytes)
        } catch {
            return error == .tooShort ? kAudioQueueErr_InvalidPropertySize : kAudioFormatUnknownFormatError
        }
        guard labels.count == pcm.channels else { return kAudioQueueErr_InvalidPropertyValue }
        if stream != nil { return kAudioQueueErr_InvalidRunState }
        let positions = labels.compactMap(ChannelLayoutLabels.position)
        channelLayout = bytes
        // A mono queue plays through a stereo stream (for pan): its one channel has no map.
        channelPositions = positions.count == labels.count && engine.streamChannels == pcm.channels ? positions : nil
        return noErr
    }

    /// 2^20 frames: 21 s at 48 kHz, 32 MiB of float per channel.
    static let maximumDecodeBufferFrames = 1 << 20
    /// `kAudioQueueProperty_HardwareCodecPolicy`. Guarded by `lock`.
    var hardwareCodecPolicy: UInt32 = kAudioQueueHardwareCodecPolicy_Default
    /// A compressed queue told to use hardware codecs only: there are none to use.
    var needsMissingHardwareCodec: Bool { codec != nil && hardwareCodecPolicy == kAudioQueueHardwareCodecPolicy_UseHardwareOnly }
    var deviceName: String?
    /// `kAudioQueueProperty_ChannelLayout` as set (`AudioChannelLayout` bytes), and where its
    /// channels play. Guarded by `lock`.
    private(set) var channelLayout: [UInt8]?
    private var channelPositions: [HALChannelPosition]?
    /// `kAudioQueueProperty_EnableTimePitch` and its parameters. Guarded by `lock`.
    let timePitch: QueueTimePitch
    /// The per-buffer gain (``AudioQueueEnqueueBufferWithParameters``' `kAudioQueueParam_Volume`)
    /// at the end of the last buffer enqueued: where the next buffer's ramp starts. Guarded by `lock`.
    private var bufferGain: Float = 1
    /// Queue sample time just after the last enqueued buffer (for "actual start time").
    private var scheduledEnd: Int64 = 0
    /// Host time of the last timing refresh of the stream.
    private var lastTimingRefresh: UInt64 = 0
    /// Offline rendering: the virtual stream and the render format.
    var offline: (stream: VirtualStream, format: LinearPCMFormat)? {
        didSet { isOffline.store(offline != nil, ordering: .releasing) }
    }
    /// Whether ``offline`` is set, readable without the lock (the callback thread's loop).
    private let isOffline = Atomic<Bool>(false)

    /// The ``AudioQueueRef`` handed to the user, never reused (``newObjectReference(_:)``).
    let ref: AudioQueueRef = newObjectReference(.audioQueue)

    init(
        format: AudioStreamBasicDescription, pcm: LinearPCMFormat, codec: AudioQueueCodec? = nil, isOutput: Bool, callback: QueueCallback,
        target: CallbackTarget
    ) {
        self.format = format
        self.pcm = pcm
        self.codec = codec
        self.isOutput = isOutput
        self.callback = callback
        engine = AudioQueueEngine(isOutput: isOutput, channels: pcm.channels, sampleRate: pcm.sampleRate, capacity: maximumBuffersPerQueue)
        executor = CallbackExecutor(target: target, wakeup: engine.wakeup)
        pool = QueueBufferPool(pcm: pcm, codec: codec)
        lastMeters = Array(repeating: AudioQueueLevelMeterState(), count: pcm.channels)
        timePitch = QueueTimePitch(sampleRate: pcm.sampleRate, channels: pcm.channels)
        // Weak: the executor's thread keeps its closure for its whole life, so a strong capture
        // would make a cycle (queue → executor → thread → closure → queue) that leaked every queue.
        executor.start(name: isOutput ? "AudioQueue output" : "AudioQueue input") { [weak self] in
            guard let self else { return }
            if !isOffline.load(ordering: .acquiring) { collectCompletions() }
        }
    }

    // MARK: Callbacks

    var isCallbackThread: Bool { executor.isCallbackThread }

    /// Hands `work` to the queue's callback context.
    func post(_ work: [CallbackWork]) { executor.post(work) }

    /// Turns finished buffers into callbacks, and advances an asynchronous stop. Returns the work.
    @discardableResult
    func collectCompletions(inline: Bool = false) -> Int {
        lock.lock()
        var work: [CallbackWork] = []
        while let done = engine.completed.pop() {
            guard let slot = pool.takeBack(token: done.token) else { continue }
            work.append(callbackWork(slot, completed: done))
        }
        // Fresh timing about once a second while buffers complete (the server's latency drifts);
        // asked for after the queue's lock is released.
        var refresh: (any HALStream)?
        let now = hostNow()
        if let stream, now &- lastTimingRefresh > 1_000_000_000 {
            lastTimingRefresh = now
            refresh = stream
        }
        if isOutput && transport.isDraining {
            if engine.reachedEnd.exchange(false, ordering: .acquiringAndReleasing) {
                if let stream { stream.drain() } else { engine.drained.store(true, ordering: .releasing) }
            }
            if engine.drained.exchange(false, ordering: .acquiringAndReleasing) {
                work += perform(.drained).work
            }
        }
        lock.unlock()
        refresh?.refreshTiming()
        executor.deliver(work, inline: inline)
        return work.count
    }

    /// The user callback for a finished buffer (capture: converts the audio into it first).
    /// Call with `lock` held.
    private func callbackWork(_ slot: BufferSlot, completed: CompletedItem) -> CallbackWork {
        let queueRef = ref
        let buffer = slot.buffer
        if isOutput {
            switch callback {
            case .outputProc(let proc, let userData): return CallbackWork { proc(userData, queueRef, buffer) }
            case .outputBlock(let block): return CallbackWork { block(queueRef, buffer) }
            default: return CallbackWork {}
            }
        }
        var packets = UInt32(completed.frames)
        var descriptions: UnsafePointer<AudioStreamPacketDescription>?
        if let codec {
            let encoded = codec.encode(slot.staging, frames: completed.frames, into: buffer)
            packets = encoded.packets
            descriptions = encoded.described ? UnsafePointer(buffer.pointee.mPacketDescriptions) : nil
        } else {
            pcm.encode(slot.staging, frames: completed.frames, into: buffer.pointee.mAudioData)
            buffer.pointee.mAudioDataByteSize = UInt32(completed.frames * pcm.bytesPerFrame)
            buffer.pointee.mPacketDescriptionCount = 0
        }
        var stamp = AudioTimeStamp()
        stamp.mSampleTime = Double(completed.sampleTime)
        stamp.mHostTime = completed.hostTime
        stamp.mRateScalar = 1
        stamp.mFlags = [.sampleTimeValid, .hostTimeValid, .rateScalarValid]
        let described = CallbackPointer(descriptions)
        switch callback {
        case .inputProc(let proc, let userData):
            return CallbackWork { withUnsafePointer(to: stamp) { proc(userData, queueRef, buffer, $0, packets, described.pointer) } }
        case .inputBlock(let block):
            return CallbackWork { withUnsafePointer(to: stamp) { block(queueRef, buffer, $0, packets, described.pointer) } }
        default: return CallbackWork {}
        }
    }

    /// Listener calls for `id`. Call with `lock` held.
    func listenerWork(_ id: AudioQueuePropertyID) -> [CallbackWork] {
        let queueRef = ref
        return listeners.filter { $0.id == id }.map { l in CallbackWork { l.proc(l.userData, queueRef, id) } }
    }

    // MARK: Buffers

    func allocateBuffer(byteSize: UInt32, packetDescriptions: UInt32) -> Result<AudioQueueBufferRef, StatusError> {
        lock.lock()
        defer { lock.unlock() }
        if case .refused(let status) = transport.outcome(of: .allocate) { return .failure(StatusError(status)) }
        return pool.allocate(byteSize: byteSize, packetDescriptions: packetDescriptions)
    }

    func freeBuffer(_ buffer: AudioQueueBufferRef) -> OSStatus {
        lock.lock()
        defer { lock.unlock() }
        return pool.free(buffer)
    }

    // MARK: Enqueue

    struct EnqueueOptions {
        var trimStart: UInt32 = 0
        var trimEnd: UInt32 = 0
        var parameters: UnsafeBufferPointer<AudioQueueParameterEvent> = UnsafeBufferPointer(start: nil, count: 0)
        var startTime: AudioTimeStamp?
        /// Packet descriptions for variable-size compressed packets, when the call passed them;
        /// else those in the buffer (read once the buffer is known to be this queue's).
        var packetDescriptions = UnsafeBufferPointer<AudioStreamPacketDescription>(start: nil, count: 0)
    }

    /// The packet descriptions of an enqueue: those passed, else those in the buffer.
    private func descriptions(
        _ buffer: AudioQueueBufferRef, passed: UnsafeBufferPointer<AudioStreamPacketDescription>
    ) -> UnsafeBufferPointer<AudioStreamPacketDescription> {
        if passed.count > 0 { return passed }
        let header = buffer.pointee
        if let own = header.mPacketDescriptions, header.mPacketDescriptionCount > 0 {
            return UnsafeBufferPointer(start: own, count: Int(min(header.mPacketDescriptionCount, header.mPacketDescriptionCapacity)))
        }
        return UnsafeBufferPointer(start: nil, count: 0)
    }

    func enqueue(_ buffer: AudioQueueBufferRef, _ options: EnqueueOptions) -> Result<AudioTimeStamp, StatusError> {
        lock.lock()
        defer { lock.unlock() }
        guard let slot = pool[buffer] else { return .failure(StatusError(kAudioQueueErr_InvalidBuffer)) }
        if case .refused(let status) = transport.outcome(of: .enqueue) { return .failure(StatusError(status)) }
        if executor.resetPending { return .failure(StatusError(kAudioQueueErr_EnqueueDuringReset)) }
        if slot.enqueued { return .failure(StatusError(kAudioQueueErr_BufferEnqueuedTwice)) }

        var item = QueueItem(token: slot.token, samples: slot.staging, frames: slot.capacityFrames, startSample: -1, pan: .nan)
        var actual = AudioTimeStamp()
        if isOutput {
            let bytes = Int(buffer.pointee.mAudioDataByteSize)
            if bytes == 0 { return .failure(StatusError(kAudioQueueErr_BufferEmpty)) }
            guard bytes <= Int(buffer.pointee.mAudioDataBytesCapacity) else { return .failure(StatusError(kAudio_ParamError)) }
            var decoded: Int?
            pool.grow(slot)
            if let codec {
                let described = descriptions(buffer, passed: options.packetDescriptions)
                switch codec.decode(buffer, descriptions: described, into: &slot.staging, capacity: &slot.capacityFrames) {
                case .success(let n): decoded = n
                case .failure(let error): return .failure(error)
                }
                item.samples = slot.staging
            } else if bytes % pcm.bytesPerFrame != 0 {
                return .failure(StatusError(kAudio_ParamError))
            }
            let frames = decoded ?? bytes / pcm.bytesPerFrame
            let trims = Int(options.trimStart) + Int(options.trimEnd)
            guard trims <= frames else { return .failure(StatusError(kAudio_ParamError)) }
            var gain: Float = 1
            var rampTime: Float = 0
            for event in options.parameters {
                switch event.mID {
                case kAudioQueueParam_Volume: gain = max(0, event.mValue)
                case kAudioQueueParam_Pan: item.pan = min(max(event.mValue, -1), 1)
                case kAudioQueueParam_VolumeRampTime:
                    guard event.mValue.isFinite else { return .failure(StatusError(kAudio_ParamError)) }
                    rampTime = max(0, event.mValue)
                default: return .failure(StatusError(kAudioQueueErr_InvalidParameter))
                }
            }
            item.frames = frames - trims
            let ramp = BufferGainRamp(from: bufferGain, to: gain, frames: Int((Double(rampTime) * pcm.sampleRate).rounded()))
            if codec != nil {
                // Decoded already: trim and apply the gain in place.
                let channels = pcm.channels
                if options.trimStart > 0 { slot.staging.update(from: slot.staging + Int(options.trimStart) * channels, count: item.frames * channels) }
                if ramp.isRamp {
                    ramp.apply(to: slot.staging, frames: item.frames, channels: channels)
                } else if gain != 1 {
                    for i in 0..<(item.frames * channels) { slot.staging[i] *= gain }
                }
            } else {
                let start = buffer.pointee.mAudioData + Int(options.trimStart) * pcm.bytesPerFrame
                pcm.decode(start, frames: item.frames, into: slot.staging, gain: ramp.isRamp ? 1 : gain)
                if ramp.isRamp { ramp.apply(to: slot.staging, frames: item.frames, channels: pcm.channels) }
            }
            bufferGain = ramp.gain(after: item.frames)
            if timePitch.isActive {
                item.frames = timePitch.process(&slot.staging, frames: item.frames, capacity: &slot.capacityFrames)
                item.samples = slot.staging
            }
            let earliest = max(scheduledEnd, currentSampleTime() ?? 0)
            var start = earliest
            if let requested = options.startTime, requested.mFlags.contains(.sampleTimeValid) {
                // A time no queue timeline can hold (NaN, infinite, beyond 2^63 frames) is a bad
                // parameter, not a trap.
                guard let sample = Int64(exactly: requested.mSampleTime.rounded()) else { return .failure(StatusError(kAudio_ParamError)) }
                item.startSample = sample
                start = max(item.startSample, earliest)
            }
            scheduledEnd = start + Int64(item.frames)
            actual.mSampleTime = Double(start)
            actual.mFlags = [.sampleTimeValid]
        }
        guard engine.pending.push(item) else { return .failure(StatusError(kAudioQueueErr_BufferInQueue)) }
        slot.enqueued = true
        if isOutput && engine.takeRefillRequest() { stream?.refill() }
        return .success(actual)
    }

    /// A per-buffer gain change: from the previous buffer's gain to this buffer's over
    /// `kAudioQueueParam_VolumeRampTime` seconds from the buffer's first frame (linear in
    /// amplitude, as the queue's own volume ramp).
    struct BufferGainRamp {
        let from: Float
        let to: Float
        let frames: Int
        init(from: Float, to: Float, frames: Int) {
            self.from = from
            self.to = to
            self.frames = frames
        }
        var isRamp: Bool { frames > 0 && from != to }
        /// The gain of frame `index` (counted from 0); the ramp reaches `to` at frame `frames - 1`.
        func gain(at index: Int) -> Float {
            guard isRamp, index < frames - 1 else { return to }
            return from + (to - from) * Float(index + 1) / Float(frames)
        }
        /// The gain after the last of `count` frames.
        func gain(after count: Int) -> Float { count > 0 ? gain(at: count - 1) : from }
        func apply(to samples: UnsafeMutablePointer<Float>, frames count: Int, channels: Int) {
            for f in 0..<count {
                let g = gain(at: f)
                for c in 0..<channels { samples[f * channels + c] *= g }
            }
        }
    }

    // MARK: Stream

    /// The buffer duration to ask the server for.
    ///
    /// Recording: that of the smallest buffer, so that callbacks come once per buffer. Playback:
    /// the smallest buffer's duration, but at least ``defaultIOBufferDuration`` and at most 100 ms.
    /// The server-side buffer plays the part of Apple's hardware I/O buffer, which is independent
    /// of the queue's buffers (they add their own depth on top); below 20 ms the sound server's
    /// non-real-time protocol thread was measured to let playback run dry on a loaded machine.
    var preferredBufferDuration: Double {
        let frames = slots.values.map(\.capacityFrames).min() ?? Int(pcm.sampleRate / 50)
        let duration = Double(frames) / pcm.sampleRate
        // An audio session's preferred I/O buffer duration replaces the default floor.
        return isOutput ? min(max(duration, AudioSessionHost.preferredIOBufferDuration ?? defaultIOBufferDuration), 0.1) : duration
    }

    /// Opens the stream if there is none. Call with `lock` held.
    func ensureStream(corked: Bool) -> OSStatus {
        if stream != nil { return noErr }
        do {
            let backend = try AudioSystem.current.backend()
            // What the stream is for, where AVAudioSession said it; playback is media otherwise.
            let use = AudioSessionHost.streamUse(output: isOutput)
            requestedBufferDuration = preferredBufferDuration
            var request = HALStreamRequest(
                format: HALStreamFormat(sampleRate: pcm.sampleRate, channels: engine.streamChannels),
                bufferDuration: requestedBufferDuration, name: isOutput ? "AudioQueue output" : "AudioQueue input",
                purpose: use?.purpose ?? (isOutput ? .media : nil), startCorked: corked,
                device: deviceName ?? (isOutput ? AudioSessionHost.routing.output : AudioSessionHost.routing.input))
            request.echoCancellation = use?.echoCancellation ?? false
            request.channelPositions = channelPositions
            stream = isOutput ? try backend.openOutput(request, source: engine) : try backend.openInput(request, sink: engine)
            return noErr
        } catch {
            return error.kind == .noServer || error.kind == .deviceNotFound ? kAudioQueueErr_InvalidDevice : kAudioQueueErr_CannotStart
        }
    }

    /// Closes the stream and opens another with the current ``preferredBufferDuration`` (the
    /// audio session's I/O buffer changed), running again if it was. What the server held of the
    /// old stream (one buffer's worth) is lost, as a hardware reconfiguration loses it on iOS.
    func reopenStream() {
        lock.lock()
        defer { lock.unlock() }
        // Only playback follows the session's I/O buffer (recording streams get their buffers').
        guard isOutput, offline == nil, let old = stream, abs(requestedBufferDuration - preferredBufferDuration) > 0.0005 else { return }
        old.close()
        stream = nil
        let running = isRunning == 1
        guard ensureStream(corked: isOutput && !running) == noErr else { return }
        if running && isOutput { stream?.setCorked(false) }
    }

    // MARK: Transport

    func prime(frames: UInt32) -> Result<UInt32, StatusError> {
        lock.lock()
        defer { lock.unlock() }
        if needsMissingHardwareCodec { return .failure(StatusError(kAudioQueueErr_InvalidCodecAccess)) }
        if !isOutput, case .to = transport.outcome(of: .prime) { return .failure(StatusError(kAudioQueueErr_InvalidQueueType)) }
        let (status, _) = perform(.prime)
        guard status == noErr else { return .failure(StatusError(status)) }
        let ready = UInt32(clamping: pool.enqueuedCount > 0 ? Int(scheduledEnd - (currentSampleTime() ?? 0)) : 0)
        return .success(frames == 0 ? ready : min(frames, ready))
    }

    func start(at startTime: AudioTimeStamp?) -> OSStatus {
        lock.lock()
        if needsMissingHardwareCodec {
            lock.unlock()
            return kAudioQueueErr_InvalidCodecAccess
        }
        let (status, work) = perform(.start, startTime: startTime)
        let inline = offline != nil
        lock.unlock()
        executor.deliver(work, inline: inline)
        return status
    }

    func pause() -> OSStatus {
        lock.lock()
        defer { lock.unlock() }
        return perform(.pause).status
    }

    /// Stops: immediately (drops what is queued and hands every buffer back through the callback),
    /// or, for playback, after everything enqueued has played.
    func stop(immediate: Bool) -> OSStatus {
        lock.lock()
        // Recording, and a queue without a stream, stop at once either way.
        let playsOut = !immediate && isOutput && stream != nil
        let (status, work) = perform(playsOut ? .stopAfterPlaying : .stopImmediately)
        let inline = offline != nil
        lock.unlock()
        executor.deliverReset(work, inline: inline)
        return status
    }

    /// Drops queued audio and hands the buffers back, keeping the queue's run state.
    func reset() -> OSStatus {
        lock.lock()
        let (status, work) = perform(.reset)
        let inline = offline != nil
        lock.unlock()
        executor.deliverReset(work, inline: inline)
        return status
    }

    /// Waits until the callbacks of every stop or reset so far have run (enqueueing is refused
    /// until then); `false` after `timeout` seconds. Never call it on the queue's callback thread.
    func waitForResetCallbacks(timeout: Double) -> Bool {
        executor.waitForResets(timeout: timeout)
    }

    /// Tears the queue down. Immediate: now, with no further callbacks. Otherwise after every
    /// enqueued buffer has played.
    func dispose(immediate: Bool) -> OSStatus {
        lock.lock()
        let playsOut = !immediate && isOutput && stream != nil
        let operation: QueueTransport.Operation = playsOut ? .disposeAfterPlaying : .disposeImmediately
        let tearsDown = transport.outcome(of: operation) == .to(.disposed, .teardown)
        let (status, _) = perform(operation)
        lock.unlock()
        // Without the lock: closing the stream waits for the server thread, and the callback
        // thread may be waiting for the lock.
        if tearsDown { teardown() }
        return status
    }

    /// One transition of the transport: looks `operation` up in the table, does its effect and
    /// enters the next state (not when the effect fails: opening the stream can). Returns the
    /// status for the caller and the callbacks to run. Call with `lock` held.
    private func perform(_ operation: QueueTransport.Operation, startTime: AudioTimeStamp? = nil) -> (status: OSStatus, work: [CallbackWork]) {
        let next: QueueTransport.State
        let effect: QueueTransport.Effect
        switch transport.outcome(of: operation) {
        case .refused(let status): return (status, [])
        case .to(let state, let e):
            next = state
            effect = e
        }
        let wasRunning = transport.isRunning
        var work: [CallbackWork] = []
        switch effect {
        case .none:
            break
        case .openStream:
            let status = ensureStream(corked: false)
            guard status == noErr else { return (status, []) }
        case .begin:
            let status = begin(at: startTime)
            guard status == noErr else { return (status, []) }
        case .resume:
            resumedHost.store(hostNow(), ordering: .releasing)
            engine.paused.store(false, ordering: .releasing)
        case .pause:
            pausedSample.store(currentSampleTime() ?? -1, ordering: .releasing)
            engine.paused.store(true, ordering: .releasing)
        case .drain:
            engine.stopWhenEmpty.store(true, ordering: .releasing)
            // The callback thread looks at the engine's progress when it wakes.
            executor.signal()
        case .halt, .finishDrain, .finishDrainAndTeardown:
            // A finished drain has played everything, so its halt hands back nothing; it resets
            // the engine and the timeline.
            work = halt(restartTimeline: true)
        case .reset:
            let wasArmed = engine.armed.load(ordering: .acquiring)
            work = halt(restartTimeline: false)
            if QueueTransport.isRunning(next) && wasArmed {
                let paused = next == .paused
                engine.paused.store(paused, ordering: .releasing)
                engine.armed.store(true, ordering: .releasing)
                stream?.setCorked(false)
            }
        case .teardown:
            engine.armed.store(false, ordering: .releasing)
        }
        transport.enter(next)
        if wasRunning != transport.isRunning && next != .disposed || effect == .finishDrainAndTeardown {
            work += listenerWork(kAudioQueueProperty_IsRunning)
        }
        if effect == .finishDrainAndTeardown { work.append(CallbackWork { [self] in teardown() }) }
        return (noErr, work)
    }

    /// A fresh start: opens the stream, arms the engine (at the host time `startTime` names) and
    /// uncorks. Call with `lock` held.
    private func begin(at startTime: AudioTimeStamp?) -> OSStatus {
        // A record stream connected corked keeps a long server-side latency after uncorking (first
        // data seen ~2 s late), so capture streams open running; the engine ignores input until armed.
        let status = ensureStream(corked: isOutput)
        guard status == noErr, let stream else { return status }
        var target: UInt64 = 0
        if let t = startTime {
            if t.mFlags.contains(.hostTimeValid) {
                target = t.mHostTime
            } else if t.mFlags.contains(.sampleTimeValid), let now = stream.currentTime() {
                let deviceRate = stream.device.sampleRate
                let deviceNow = Double(now.sampleTime) * deviceRate / stream.format.sampleRate
                // Clamped so that no requested time (NaN, infinite, absurd) can trap: at most ~30 years ahead.
                let delay = (t.mSampleTime - deviceNow) / deviceRate * 1e9
                target = now.hostTime &+ UInt64(delay.isNaN ? 0 : min(max(0, delay), 1e18))
            }
        }
        engine.stopWhenEmpty.store(false, ordering: .relaxed)
        engine.reachedEnd.store(false, ordering: .relaxed)
        engine.drained.store(false, ordering: .relaxed)
        engine.startHostTime.store(target, ordering: .relaxed)
        engine.armed.store(true, ordering: .releasing)
        stream.setCorked(false)
        return noErr
    }

    /// Disarms the engine, empties the stream and takes back every buffer. Call with `lock` held.
    private func halt(restartTimeline: Bool) -> [CallbackWork] {
        let heard = isOutput && !restartTimeline && offline == nil ? currentSampleTime() : nil
        engine.armed.store(false, ordering: .releasing)
        if restartTimeline {
            pausedSample.store(-1, ordering: .releasing)
            resumedHost.store(0, ordering: .releasing)
        }
        engine.stopWhenEmpty.store(false, ordering: .relaxed)
        engine.reachedEnd.store(false, ordering: .relaxed)
        engine.drained.store(false, ordering: .relaxed)
        engine.paused.store(false, ordering: .releasing)
        if offline == nil, let stream {
            stream.setCorked(true)
            if isOutput { stream.flush() }
        }
        let taken = stream.map { s in s.withCallbacksBlocked { engine.reclaim(restartTimeline: restartTimeline, heard: heard) } }
            ?? engine.reclaim(restartTimeline: restartTimeline, heard: heard)
        defer {
            codec?.reset()
            timePitch.reset()
        }
        var work: [CallbackWork] = []
        while let done = engine.completed.pop() {
            guard let slot = pool.takeBack(token: done.token) else { continue }
            work.append(callbackWork(slot, completed: done))
        }
        if let partial = taken.partial, let slot = pool.takeBack(token: partial.token) {
            work.append(callbackWork(slot, completed: partial))
        }
        for token in taken.untouched {
            guard let slot = pool.takeBack(token: token) else { continue }
            if isOutput { work.append(callbackWork(slot, completed: CompletedItem(token: token, frames: 0, sampleTime: 0, hostTime: 0))) }
        }
        // The next buffer starts when it is enqueued, not after what was dropped.
        scheduledEnd = restartTimeline ? 0 : currentSampleTime() ?? 0
        return work
    }

    /// Closes the stream, ends the callback thread and forgets the queue. The transport is
    /// `disposed` already. Call without `lock`.
    private func teardown() {
        lock.lock()
        engine.armed.store(false, ordering: .releasing)
        let stream = self.stream
        self.stream = nil
        lock.unlock()
        stream?.close()
        executor.shutDown()
        _ = liveQueues.remove(ref)
        liveTimelines.removeAll { $0.queue === self || $0.queue == nil }
    }

    // MARK: Time

    /// The queue sample time being heard (or captured) now, from the engine's anchor.
    func currentSampleTime() -> Int64? {
        guard let anchor = engine.anchor.load() else { return nil }
        if isOffline.load(ordering: .acquiring) { return anchor.sampleTime }
        let held = pausedSample.load(ordering: .acquiring)
        if engine.paused.load(ordering: .relaxed) || anchor.hostTime < resumedHost.load(ordering: .acquiring) {
            return held >= 0 ? held : anchor.sampleTime
        }
        let now = hostNow()
        let elapsed = now > anchor.hostTime ? Double(now - anchor.hostTime) : -Double(anchor.hostTime - now)
        return max(0, anchor.sampleTime + Int64(elapsed * pcm.sampleRate / 1e9))
    }
}
