import AudioHAL
import Foundation
import Synchronization

/// Where a queue's callbacks and property listeners run.
enum CallbackTarget {
    /// The queue's own callback thread (Apple: "one of the audio queue's internal threads").
    case ownThread
    case runLoop(RunLoop, RunLoop.Mode)
    case dispatch(DispatchQueue)
}

/// The user's callback, as a C function with its context or as a block.
enum QueueCallback {
    case outputProc(AudioQueueOutputCallback, UnsafeMutableRawPointer?)
    case inputProc(AudioQueueInputCallback, UnsafeMutableRawPointer?)
    case outputBlock(AudioQueueOutputCallbackBlock)
    case inputBlock(AudioQueueInputCallbackBlock)
}

/// Work for a callback context; the queue's callbacks are not `Sendable` by Apple's signatures.
struct CallbackWork: @unchecked Sendable {
    let run: () -> Void
}

/// A pointer handed to a user callback (packet descriptions that live in the buffer).
struct CallbackPointer<T>: @unchecked Sendable {
    let pointer: UnsafePointer<T>?
    init(_ pointer: UnsafePointer<T>?) { self.pointer = pointer }
}

/// A buffer allocated by a queue, with its float staging area (converted audio, or captured audio
/// before it is converted to the queue's format).
final class BufferSlot {
    let token: Int
    let buffer: AudioQueueBufferRef
    /// Reallocated only while the buffer is not enqueued (a compressed buffer may decode to more
    /// frames than it was allocated for).
    var staging: UnsafeMutablePointer<Float>
    var capacityFrames: Int
    var enqueued = false

    init(token: Int, buffer: AudioQueueBufferRef, staging: UnsafeMutablePointer<Float>, capacityFrames: Int) {
        self.token = token
        self.buffer = buffer
        self.staging = staging
        self.capacityFrames = capacityFrames
    }

    /// Frees the buffer's memory and retires its header (whose address is never reused, see
    /// ``BufferHeaderArena``). The queue calls this once, when the buffer goes away.
    func free() {
        buffer.pointee.mAudioData.deallocate()
        buffer.pointee.mPacketDescriptions?.deallocate()
        buffer.deinitialize(count: 1)
        BufferHeaderArena.shared.retire(buffer)
        staging.deallocate()
    }
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
    let target: CallbackTarget
    let engine: AudioQueueEngine
    let lock = NSLock()

    // Guarded by `lock`. Buffers by address: a buffer header's address is never reused
    // (``BufferHeaderArena``), so a freed buffer, or another queue's, is never found here.
    private(set) var slots: [AudioQueueBufferRef: BufferSlot] = [:]
    private var slotsByToken: [Int: BufferSlot] = [:]
    private var nextToken = 1
    /// Guarded by `lock`; set by ``ensureStream(corked:)`` and offline rendering.
    var stream: (any HALStream)?
    /// The buffer duration the open stream was asked for. Guarded by `lock`.
    private var requestedBufferDuration: Double = 0
    private(set) var isRunning: UInt32 = 0
    private var paused = false
    /// The queue time when it paused (-1: none), and the host time of the latest resume: until the
    /// engine's anchor is newer than the resume, the time holds at the paused value instead of
    /// running on across the pause.
    private let pausedSample = Atomic<Int64>(-1)
    private let resumedHost = Atomic<UInt64>(0)
    private var stopping = false
    private var disposeWhenStopped = false
    private(set) var disposed = false
    var listeners: [(id: AudioQueuePropertyID, proc: AudioQueuePropertyListenerProc, userData: UnsafeMutableRawPointer?)] = []
    var volume: Float = 1
    var volumeRampTime: Float = 0
    var pan: Float = 0
    var meteringEnabled = false
    var lastMeters: [AudioQueueLevelMeterState]
    var decodeBufferSizeFrames: UInt32 = 0
    var deviceName: String?
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

    /// Reset batches handed to the callback context and not yet run; enqueue fails meanwhile.
    private let resetsInFlight = Atomic<Int>(0)
    /// Broadcast when ``resetsInFlight`` falls to 0.
    private let resetsSettled = NSCondition()
    private let inbox = Mutex<[CallbackWork]>([])
    private let alive = Atomic<Bool>(true)
    private let threadDone = Wakeup()
    private var thread: Thread?
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
        self.target = target
        engine = AudioQueueEngine(isOutput: isOutput, channels: pcm.channels, sampleRate: pcm.sampleRate, capacity: maximumBuffersPerQueue)
        lastMeters = Array(repeating: AudioQueueLevelMeterState(), count: pcm.channels)
        // Weak: the thread keeps the queue only while its loop runs (until dispose); a strong
        // capture made a cycle (queue → thread → closure → queue) that leaked every queue.
        let thread = Thread { [weak self] in self?.callbackThreadMain() }
        thread.name = isOutput ? "AudioQueue output" : "AudioQueue input"
        thread.qualityOfService = .userInteractive
        self.thread = thread
        thread.start()
    }

    deinit {
        for slot in slots.values { slot.free() }
    }

    // MARK: Callback thread

    private func callbackThreadMain() {
        nameCurrentThread(isOutput ? "AudioQueue output" : "AudioQueue input")
        raiseCurrentThreadPriority()
        // Sleeps until there is work: a finished buffer, a stop's progress, posted work or dispose
        // all signal the wake-up. Nothing here runs on a timer.
        while alive.load(ordering: .acquiring) {
            engine.wakeup.wait()
            guard alive.load(ordering: .acquiring) else { break }
            if !isOffline.load(ordering: .acquiring) { collectCompletions() }
            let work = inbox.withLock { box in
                let w = box
                box.removeAll()
                return w
            }
            for item in work where alive.load(ordering: .acquiring) { item.run() }
        }
        threadDone.signal()
    }

    var isCallbackThread: Bool { Thread.current === thread }

    /// Hands `work` to the queue's callback context.
    func post(_ work: [CallbackWork]) {
        guard !work.isEmpty else { return }
        switch target {
        case .ownThread:
            inbox.withLock { $0.append(contentsOf: work) }
            engine.wakeup.signal()
        case .dispatch(let queue):
            queue.async { [self] in
                for item in work where alive.load(ordering: .acquiring) { item.run() }
            }
        case .runLoop(let runLoop, let mode):
            let batch = CallbackWork { [self] in
                for item in work where alive.load(ordering: .acquiring) { item.run() }
            }
            let timer = Timer(timeInterval: 0, repeats: false) { _ in batch.run() }
            runLoop.add(timer, forMode: mode)
        }
    }

    /// Runs `work` now when in offline mode (deterministic) or posts it otherwise.
    private func deliver(_ work: [CallbackWork], inline: Bool) {
        if inline {
            for item in work { item.run() }
        } else {
            post(work)
        }
    }

    /// Turns finished buffers into callbacks, and advances an asynchronous stop. Returns the work.
    @discardableResult
    func collectCompletions(inline: Bool = false) -> Int {
        lock.lock()
        var work: [CallbackWork] = []
        while let done = engine.completed.pop() {
            guard let slot = slotsByToken[done.token] else { continue }
            slot.enqueued = false
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
        if isOutput && stopping {
            if engine.reachedEnd.exchange(false, ordering: .acquiringAndReleasing) {
                if let stream { stream.drain() } else { engine.drained.store(true, ordering: .releasing) }
            }
            if engine.drained.exchange(false, ordering: .acquiringAndReleasing) {
                work += finishStop()
            }
        }
        lock.unlock()
        refresh?.refreshTiming()
        deliver(work, inline: inline)
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

    private func setRunning(_ running: Bool) -> [CallbackWork] {
        let value: UInt32 = running ? 1 : 0
        guard value != isRunning else { return [] }
        isRunning = value
        return listenerWork(kAudioQueueProperty_IsRunning)
    }

    // MARK: Buffers

    func allocateBuffer(byteSize: UInt32, packetDescriptions: UInt32) -> Result<AudioQueueBufferRef, StatusError> {
        lock.lock()
        defer { lock.unlock() }
        if disposed { return .failure(StatusError(kAudioQueueErr_DisposalPending)) }
        guard slots.count < maximumBuffersPerQueue else { return .failure(StatusError(kAudio_MemFullError)) }
        let frames: Int
        if let codec {
            // Playback: what the packets decode to is known at enqueue (the staging area grows
            // then); recording: as many frames as whole packets of the largest size fit.
            guard byteSize > 0 else { return .failure(StatusError(kAudio_ParamError)) }
            let packets = max(Int(byteSize) / codec.maximumPacketSize, 1)
            frames = packets * codec.framesPerPacket
        } else {
            guard Int(byteSize) >= pcm.bytesPerFrame else { return .failure(StatusError(kAudio_ParamError)) }
            frames = Int(byteSize) / pcm.bytesPerFrame
        }
        guard let buffer = BufferHeaderArena.shared.allocate() else { return .failure(StatusError(kAudio_MemFullError)) }
        let data = UnsafeMutableRawPointer.allocate(byteCount: Int(byteSize), alignment: 16)
        data.initializeMemory(as: UInt8.self, repeating: 0, count: Int(byteSize))
        let packets: UnsafeMutablePointer<AudioStreamPacketDescription>? =
            packetDescriptions > 0 ? .allocate(capacity: Int(packetDescriptions)) : nil
        packets?.initialize(repeating: AudioStreamPacketDescription(), count: Int(packetDescriptions))
        buffer.initialize(to: AudioQueueBuffer(
            mAudioDataBytesCapacity: byteSize, mAudioData: data, mAudioDataByteSize: 0, mUserData: nil,
            mPacketDescriptionCapacity: packetDescriptions, mPacketDescriptions: packets, mPacketDescriptionCount: 0))
        let staging = UnsafeMutablePointer<Float>.allocate(capacity: frames * pcm.channels)
        staging.initialize(repeating: 0, count: frames * pcm.channels)
        let slot = BufferSlot(token: nextToken, buffer: buffer, staging: staging, capacityFrames: frames)
        nextToken += 1
        slots[buffer] = slot
        slotsByToken[slot.token] = slot
        return .success(buffer)
    }

    func freeBuffer(_ buffer: AudioQueueBufferRef) -> OSStatus {
        lock.lock()
        defer { lock.unlock() }
        guard let slot = slots[buffer] else { return kAudioQueueErr_InvalidBuffer }
        if slot.enqueued { return kAudioQueueErr_BufferInQueue }
        slots[buffer] = nil
        slotsByToken[slot.token] = nil
        slot.free()
        return noErr
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
        guard let slot = slots[buffer] else { return .failure(StatusError(kAudioQueueErr_InvalidBuffer)) }
        if disposed || disposeWhenStopped { return .failure(StatusError(kAudioQueueErr_DisposalPending)) }
        if resetsInFlight.load(ordering: .acquiring) > 0 { return .failure(StatusError(kAudioQueueErr_EnqueueDuringReset)) }
        if slot.enqueued { return .failure(StatusError(kAudioQueueErr_BufferEnqueuedTwice)) }

        var item = QueueItem(token: slot.token, samples: slot.staging, frames: slot.capacityFrames, startSample: -1, pan: .nan)
        var actual = AudioTimeStamp()
        if isOutput {
            let bytes = Int(buffer.pointee.mAudioDataByteSize)
            if bytes == 0 { return .failure(StatusError(kAudioQueueErr_BufferEmpty)) }
            guard bytes <= Int(buffer.pointee.mAudioDataBytesCapacity) else { return .failure(StatusError(kAudio_ParamError)) }
            var decoded: Int?
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
            for event in options.parameters {
                switch event.mID {
                case kAudioQueueParam_Volume: gain = max(0, event.mValue)
                case kAudioQueueParam_Pan: item.pan = min(max(event.mValue, -1), 1)
                case kAudioQueueParam_VolumeRampTime: break
                default: return .failure(StatusError(kAudioQueueErr_InvalidParameter))
                }
            }
            item.frames = frames - trims
            if codec != nil {
                // Decoded already: trim and apply the gain in place.
                let channels = pcm.channels
                if options.trimStart > 0 { slot.staging.update(from: slot.staging + Int(options.trimStart) * channels, count: item.frames * channels) }
                if gain != 1 { for i in 0..<(item.frames * channels) { slot.staging[i] *= gain } }
            } else {
                pcm.decode(buffer.pointee.mAudioData + Int(options.trimStart) * pcm.bytesPerFrame, frames: item.frames, into: slot.staging, gain: gain)
            }
            let earliest = max(scheduledEnd, currentSampleTime() ?? 0)
            var start = earliest
            if let requested = options.startTime, requested.mFlags.contains(.sampleTimeValid) {
                item.startSample = Int64(requested.mSampleTime.rounded())
                start = max(item.startSample, earliest)
            }
            scheduledEnd = start + Int64(item.frames)
            actual.mSampleTime = Double(start)
            actual.mFlags = [.sampleTimeValid]
        }
        guard engine.pending.push(item) else { return .failure(StatusError(kAudioQueueErr_BufferInQueue)) }
        slot.enqueued = true
        return .success(actual)
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
            let backend = try HAL.backend()
            // The session's properties (media.role, filter.want) where AVAudioSession set them.
            var properties: [String: String] = ["media.name": "AudioQueue"]
            if isOutput { properties["media.role"] = "music" }
            properties.merge(AudioSessionHost.streamProperties(output: isOutput)) { _, session in session }
            requestedBufferDuration = preferredBufferDuration
            let request = HALStreamRequest(
                format: HALStreamFormat(sampleRate: pcm.sampleRate, channels: engine.streamChannels),
                bufferDuration: requestedBufferDuration, name: isOutput ? "AudioQueue output" : "AudioQueue input",
                properties: properties, startCorked: corked,
                device: deviceName ?? (isOutput ? AudioSessionHost.routing.output : AudioSessionHost.routing.input))
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
        if disposed { return .failure(StatusError(kAudioQueueErr_DisposalPending)) }
        guard isOutput else { return .failure(StatusError(kAudioQueueErr_InvalidQueueType)) }
        let status = ensureStream(corked: false)
        guard status == noErr else { return .failure(StatusError(status)) }
        let enqueued = slots.values.filter(\.enqueued).count
        let ready = UInt32(clamping: enqueued > 0 ? Int(scheduledEnd - (currentSampleTime() ?? 0)) : 0)
        return .success(frames == 0 ? ready : min(frames, ready))
    }

    func start(at startTime: AudioTimeStamp?) -> OSStatus {
        lock.lock()
        if disposed || disposeWhenStopped {
            lock.unlock()
            return kAudioQueueErr_DisposalPending
        }
        if paused {
            paused = false
            resumedHost.store(hostNow(), ordering: .releasing)
            engine.paused.store(false, ordering: .releasing)
            lock.unlock()
            return noErr
        }
        if isRunning == 1 && !stopping {
            lock.unlock()
            return noErr
        }
        // A record stream connected corked keeps a long server-side latency after uncorking (first
        // data seen ~2 s late), so capture streams open running; the engine ignores input until armed.
        let status = ensureStream(corked: isOutput)
        guard status == noErr, let stream else {
            lock.unlock()
            return status
        }
        var target: UInt64 = 0
        if let t = startTime {
            if t.mFlags.contains(.hostTimeValid) {
                target = t.mHostTime
            } else if t.mFlags.contains(.sampleTimeValid), let now = stream.currentTime() {
                let deviceRate = stream.device.sampleRate
                let deviceNow = Double(now.sampleTime) * deviceRate / stream.format.sampleRate
                target = now.hostTime &+ UInt64(max(0, (t.mSampleTime - deviceNow) / deviceRate * 1e9))
            }
        }
        stopping = false
        engine.stopWhenEmpty.store(false, ordering: .relaxed)
        engine.reachedEnd.store(false, ordering: .relaxed)
        engine.drained.store(false, ordering: .relaxed)
        engine.startHostTime.store(target, ordering: .relaxed)
        engine.armed.store(true, ordering: .releasing)
        stream.setCorked(false)
        let work = setRunning(true)
        let inline = offline != nil
        lock.unlock()
        deliver(work, inline: inline)
        return noErr
    }

    func pause() -> OSStatus {
        lock.lock()
        defer { lock.unlock() }
        if disposed { return kAudioQueueErr_DisposalPending }
        guard isRunning == 1, !paused else { return noErr }
        pausedSample.store(currentSampleTime() ?? -1, ordering: .releasing)
        paused = true
        engine.paused.store(true, ordering: .releasing)
        return noErr
    }

    /// Stops: immediately (drops what is queued and hands every buffer back through the callback),
    /// or, for playback, after everything enqueued has played.
    func stop(immediate: Bool) -> OSStatus {
        lock.lock()
        if disposed {
            lock.unlock()
            return kAudioQueueErr_DisposalPending
        }
        if !immediate && isOutput && isRunning == 1 && stream != nil && !paused {
            stopping = true
            engine.stopWhenEmpty.store(true, ordering: .releasing)
            lock.unlock()
            engine.wakeup.signal()
            return noErr
        }
        let work = halt(restartTimeline: true) + setRunning(false)
        let inline = offline != nil
        lock.unlock()
        deliverReset(work, inline: inline)
        return noErr
    }

    /// Drops queued audio and hands the buffers back, keeping the queue's run state.
    func reset() -> OSStatus {
        lock.lock()
        if disposed {
            lock.unlock()
            return kAudioQueueErr_DisposalPending
        }
        let wasArmed = engine.armed.load(ordering: .acquiring)
        let wasPaused = paused
        let running = isRunning == 1 && !stopping
        var work = halt(restartTimeline: false)
        if running && wasArmed {
            paused = wasPaused
            engine.paused.store(wasPaused, ordering: .releasing)
            engine.armed.store(true, ordering: .releasing)
            stream?.setCorked(false)
        } else if stopping {
            work += setRunning(false)
        }
        let inline = offline != nil
        lock.unlock()
        deliverReset(work, inline: inline)
        return noErr
    }

    /// Waits until the callbacks of every stop or reset so far have run (enqueueing is refused
    /// until then); `false` after `timeout` seconds. Never call it on the queue's callback thread.
    func waitForResetCallbacks(timeout: Double) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout)
        resetsSettled.lock()
        defer { resetsSettled.unlock() }
        while resetsInFlight.load(ordering: .acquiring) > 0 {
            if !resetsSettled.wait(until: deadline) { return resetsInFlight.load(ordering: .acquiring) == 0 }
        }
        return true
    }

    /// Runs reset callbacks with enqueueing refused until they have run.
    private func deliverReset(_ work: [CallbackWork], inline: Bool) {
        guard !work.isEmpty else { return }
        resetsInFlight.add(1, ordering: .acquiringAndReleasing)
        let done = CallbackWork { [self] in
            resetsSettled.lock()
            resetsInFlight.subtract(1, ordering: .acquiringAndReleasing)
            resetsSettled.broadcast()
            resetsSettled.unlock()
        }
        deliver(work + [done], inline: inline)
    }

    /// Disarms the engine, empties the stream and takes back every buffer. Call with `lock` held.
    private func halt(restartTimeline: Bool) -> [CallbackWork] {
        engine.armed.store(false, ordering: .releasing)
        if restartTimeline {
            pausedSample.store(-1, ordering: .releasing)
            resumedHost.store(0, ordering: .releasing)
        }
        engine.stopWhenEmpty.store(false, ordering: .relaxed)
        engine.reachedEnd.store(false, ordering: .relaxed)
        engine.drained.store(false, ordering: .relaxed)
        stopping = false
        paused = false
        engine.paused.store(false, ordering: .releasing)
        if offline == nil, let stream {
            stream.setCorked(true)
            if isOutput { stream.flush() }
        }
        let taken = stream.map { s in s.withCallbacksBlocked { engine.reclaim(restartTimeline: restartTimeline) } }
            ?? engine.reclaim(restartTimeline: restartTimeline)
        defer { codec?.reset() }
        var work: [CallbackWork] = []
        while let done = engine.completed.pop() {
            guard let slot = slotsByToken[done.token] else { continue }
            slot.enqueued = false
            work.append(callbackWork(slot, completed: done))
        }
        if let partial = taken.partial, let slot = slotsByToken[partial.token] {
            slot.enqueued = false
            work.append(callbackWork(slot, completed: partial))
        }
        for token in taken.untouched {
            guard let slot = slotsByToken[token] else { continue }
            slot.enqueued = false
            if isOutput { work.append(callbackWork(slot, completed: CompletedItem(token: token, frames: 0, sampleTime: 0, hostTime: 0))) }
        }
        // The next buffer starts when it is enqueued, not after what was dropped.
        scheduledEnd = restartTimeline ? 0 : currentSampleTime() ?? 0
        return work
    }

    /// Completes an asynchronous stop once the stream has drained. Call with `lock` held.
    private func finishStop() -> [CallbackWork] {
        // Everything has played, so halting hands back nothing; it resets the engine and timeline.
        let work = halt(restartTimeline: true) + setRunning(false)
        if disposeWhenStopped {
            return work + [CallbackWork { [self] in _ = dispose(immediate: true) }]
        }
        return work
    }

    /// Tears the queue down. Immediate: now, with no further callbacks. Otherwise after every
    /// enqueued buffer has played.
    func dispose(immediate: Bool) -> OSStatus {
        lock.lock()
        if disposed {
            lock.unlock()
            return noErr
        }
        if !immediate && isOutput && isRunning == 1 && stream != nil {
            disposeWhenStopped = true
            stopping = true
            engine.stopWhenEmpty.store(true, ordering: .releasing)
            lock.unlock()
            engine.wakeup.signal()
            return noErr
        }
        disposed = true
        engine.armed.store(false, ordering: .releasing)
        let stream = self.stream
        self.stream = nil
        lock.unlock()
        stream?.close()
        alive.store(false, ordering: .releasing)
        engine.wakeup.signal()
        if !isCallbackThread { threadDone.wait(timeout: 5) }
        // Work the thread left (a stop's callbacks posted just before) never runs now; some of it
        // holds the queue, so keeping it would keep the queue alive for ever.
        inbox.withLock { $0.removeAll() }
        _ = liveQueues.remove(ref)
        liveTimelines.removeAll { $0.queue === self || $0.queue == nil }
        return noErr
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
