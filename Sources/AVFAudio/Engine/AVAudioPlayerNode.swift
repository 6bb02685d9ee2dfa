import AudioToolbox
import Foundation
import AudioGraph
import AudioHAL
import Synchronization

public struct AVAudioPlayerNodeBufferOptions: OptionSet, Sendable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }
    /// Plays the buffer again and again until something interrupts it or the player stops.
    public static let loops = AVAudioPlayerNodeBufferOptions(rawValue: 1 << 0)
    /// Drops what is scheduled and playing, and plays this buffer at once.
    public static let interrupts = AVAudioPlayerNodeBufferOptions(rawValue: 1 << 1)
    /// Lets a looping buffer finish its current loop, then plays this one.
    public static let interruptsAtLoop = AVAudioPlayerNodeBufferOptions(rawValue: 1 << 2)
}

public enum AVAudioPlayerNodeCompletionCallbackType: Int, Sendable {
    /// The player has read all of it (it may still be rendering downstream).
    case dataConsumed = 0
    /// All of it has been rendered.
    case dataRendered = 1
    /// All of it has been heard: rendered and through the output's latency.
    case dataPlayedBack = 2
}

public typealias AVAudioPlayerNodeCompletionHandler = @Sendable (AVAudioPlayerNodeCompletionCallbackType) -> Void

/// Plays buffers and file segments in the order they are scheduled, gapless.
///
/// Scheduling goes to the render thread through a lock-free ring; completion handlers are called
/// on the player's own completion thread, each once (buffers dropped by `stop()` or an
/// interruption complete too, as Apple's do). Files are decoded on a thread of their own, ahead
/// of the render thread, into a ring of about a second; the player reads its own copy of the
/// file, so the `AVAudioFile`'s position is not moved. A buffer or file in another format than
/// the player's output is played channel by channel (extra channels repeat the last); the sample
/// rate must be the output's (connect the player in the file's processing format).
open class AVAudioPlayerNode: AVAudioNode, AVAudioMixing, @unchecked Sendable {
    private let player: PlayerUnit
    private struct Pending {
        var handler: AVAudioPlayerNodeCompletionHandler?
        var type: AVAudioPlayerNodeCompletionCallbackType
        var keep: AnyObject?
        var feeder: FileFeeder?
    }
    private var pending: [UInt64: Pending] = [:]
    private let pendingLock = NSLock()
    /// Serializes writers of the render side's command ring, and its idle servicing.
    private let commandLock = NSLock()
    private var nextToken: UInt64 = 1
    private let delivering = Atomic<Bool>(true)

    public init() {
        let unit = PlayerUnit(component: PlayerUnit.playerComponent, sampleRate: 44100, channels: 2)
        AudioUnitObject.register(unit)
        player = unit
        super.init(unit: unit)
        let thread = Thread { [weak self, player = unit] in Self.deliverCompletions(player: player, owner: self) }
        thread.name = "AVAudioPlayerNode completions"
        thread.start()
    }

    deinit {
        delivering.store(false, ordering: .releasing)
        player.completionWakeup.signal()
        for p in pending.values { p.feeder?.finish() }
        AudioUnitObject.unregister(player)
    }

    // MARK: Scheduling

    open func scheduleBuffer(_ buffer: AVAudioPCMBuffer, completionHandler: AVAudioNodeCompletionHandler? = nil) {
        scheduleBuffer(buffer, at: nil, options: [], completionHandler: completionHandler)
    }

    open func scheduleBuffer(_ buffer: AVAudioPCMBuffer, at when: AVAudioTime?, options: AVAudioPlayerNodeBufferOptions = [], completionHandler: AVAudioNodeCompletionHandler? = nil) {
        let wrapped: AVAudioPlayerNodeCompletionHandler? = completionHandler.map { h in { @Sendable _ in h() } }
        scheduleBuffer(buffer, at: when, options: options, completionCallbackType: .dataConsumed, completionHandler: wrapped)
    }

    open func scheduleBuffer(_ buffer: AVAudioPCMBuffer, completionCallbackType callbackType: AVAudioPlayerNodeCompletionCallbackType, completionHandler: AVAudioPlayerNodeCompletionHandler? = nil) {
        scheduleBuffer(buffer, at: nil, options: [], completionCallbackType: callbackType, completionHandler: completionHandler)
    }

    /// Schedules `buffer` (32-bit float, non-interleaved, at the player's output rate) after
    /// what is scheduled, or at player time `when` (a sample time at the output's rate). A mono
    /// buffer is taken interleaved or not (one channel is the same bytes either way) and plays on
    /// every channel of the output.
    open func scheduleBuffer(
        _ buffer: AVAudioPCMBuffer, at when: AVAudioTime?, options: AVAudioPlayerNodeBufferOptions = [],
        completionCallbackType callbackType: AVAudioPlayerNodeCompletionCallbackType, completionHandler: AVAudioPlayerNodeCompletionHandler? = nil
    ) {
        let format = buffer.format
        guard format.commonFormat == .pcmFormatFloat32, !format.isInterleaved || format.channelCount == 1 else {
            NSLog("AVAudioPlayerNode.scheduleBuffer: the buffer must be 32-bit float, non-interleaved (the engine's standard format); it is not played")
            completionHandler?(callbackType)
            return
        }
        let copy = buffer.copy() as! AVAudioPCMBuffer
        var segment = PlayerSegment(
            token: 0, list: copy.mutableAudioBufferList, ring: nil, channels: Int(copy.format.channelCount), start: 0, frames: Int(copy.frameLength))
        segment.loops = options.contains(.loops)
        segment.interrupts = options.contains(.interrupts)
        segment.interruptsAtLoop = options.contains(.interruptsAtLoop)
        segment.at = playerSample(when)
        enqueue(segment, keep: copy, feeder: nil, type: callbackType, handler: completionHandler)
    }

    open func scheduleFile(_ file: AVAudioFile, at when: AVAudioTime?, completionHandler: AVAudioNodeCompletionHandler? = nil) {
        scheduleSegment(file, startingFrame: 0, frameCount: AVAudioFrameCount(clamping: file.length), at: when, completionHandler: completionHandler)
    }

    open func scheduleFile(
        _ file: AVAudioFile, at when: AVAudioTime?, completionCallbackType callbackType: AVAudioPlayerNodeCompletionCallbackType,
        completionHandler: AVAudioPlayerNodeCompletionHandler? = nil
    ) {
        scheduleSegment(
            file, startingFrame: 0, frameCount: AVAudioFrameCount(clamping: file.length), at: when, completionCallbackType: callbackType,
            completionHandler: completionHandler)
    }

    open func scheduleSegment(
        _ file: AVAudioFile, startingFrame startFrame: AVAudioFramePosition, frameCount numberFrames: AVAudioFrameCount, at when: AVAudioTime?,
        completionHandler: AVAudioNodeCompletionHandler? = nil
    ) {
        let wrapped: AVAudioPlayerNodeCompletionHandler? = completionHandler.map { h in { @Sendable _ in h() } }
        scheduleSegment(
            file, startingFrame: startFrame, frameCount: numberFrames, at: when, completionCallbackType: .dataConsumed,
            completionHandler: wrapped)
    }

    /// Schedules `numberFrames` frames of `file` from `startFrame`, decoded ahead on a thread of
    /// its own (the first second before this returns).
    open func scheduleSegment(
        _ file: AVAudioFile, startingFrame startFrame: AVAudioFramePosition, frameCount numberFrames: AVAudioFrameCount, at when: AVAudioTime?,
        completionCallbackType callbackType: AVAudioPlayerNodeCompletionCallbackType, completionHandler: AVAudioPlayerNodeCompletionHandler? = nil
    ) {
        let start = max(0, min(startFrame, file.length))
        let frames = Int(min(AVAudioFramePosition(numberFrames), file.length - start))
        guard frames > 0, let feeder = FileFeeder(url: file.url, start: start, frames: frames) else {
            completionHandler?(callbackType)
            return
        }
        var segment = PlayerSegment(token: 0, list: nil, ring: feeder.ring, channels: feeder.channels, start: 0, frames: frames, wake: feeder.room, data: feeder.written)
        segment.at = playerSample(when)
        enqueue(segment, keep: feeder, feeder: feeder, type: callbackType, handler: completionHandler)
    }

    /// The player time (frames since play) of `when`: its sample time at the output's rate, or,
    /// for a host time alone, the player time the last render puts at that host time.
    private func playerSample(_ when: AVAudioTime?) -> Int64? {
        guard let when else { return nil }
        let rate = outputFormat(forBus: 0).sampleRate
        if when.isSampleTimeValid {
            return when.sampleRate > 0 && when.sampleRate != rate ? Int64((Double(when.sampleTime) * rate / when.sampleRate).rounded()) : when.sampleTime
        }
        guard when.isHostTimeValid, let node = attachedEngine?.driver.lastRenderTime(), let player = playerTime(forNodeTime: node) else { return nil }
        return player.sampleTime + Int64(((Double(when.hostTime) - Double(node.hostTime)) / 1e9 * rate).rounded())
    }

    private func enqueue(
        _ segment: PlayerSegment, keep: AnyObject, feeder: FileFeeder?, type: AVAudioPlayerNodeCompletionCallbackType,
        handler: AVAudioPlayerNodeCompletionHandler?
    ) {
        var segment = segment
        pendingLock.lock()
        segment.token = nextToken
        nextToken += 1
        pending[segment.token] = Pending(handler: handler, type: type, keep: keep, feeder: feeder)
        pendingLock.unlock()
        // One writer at a time into the render side's command ring (apps schedule from
        // completion handlers and from their own threads at once).
        let queued = commandLock.withLock { player.schedule(segment) }
        if !queued {
            pendingLock.lock()
            pending[segment.token] = nil
            pendingLock.unlock()
            feeder?.finish()
            handler?(type)
            return
        }
        serviceIfIdle()
    }

    /// Applies what was sent to the render side now, when nothing renders (the engine stopped,
    /// paused, or offline between renders): one thread at a time, and never while it renders.
    private func serviceIfIdle() {
        if let engine = attachedEngine {
            _ = engine.whileNotRendering { commandLock.withLock { player.serviceWhileIdle() } }
        } else {
            commandLock.withLock { player.serviceWhileIdle() }
        }
    }

    // MARK: Transport

    /// Starts (or resumes) playing at the next render.
    open func play() { play(at: nil) }

    /// Starts playing at `when` (a node time: a sample time at the output's rate, or a host
    /// time), or at the next render for nil.
    open func play(at when: AVAudioTime?) {
        var sample: Int64?
        if let when {
            if when.isSampleTimeValid {
                sample = when.sampleTime
            } else if when.isHostTimeValid, let anchor = attachedEngine?.driver.lastRenderTime(), let at = when.extrapolateTime(fromAnchor: anchor) {
                sample = at.sampleTime
            }
        }
        player.play(atNodeSample: sample)
    }

    open func pause() { player.pause() }

    /// Stops, drops everything scheduled (each completion handler is called) and sets the
    /// player time back to 0.
    open func stop() {
        commandLock.withLock { player.stop() }
        if let engine = attachedEngine, engine.isRunning, !engine.isInManualRenderingMode {
            // The render thread carries it out at its next cycle; it is done when stop returns.
            // Woken by the render side when it has stopped; a render thread that has itself
            // stopped never will, so the wait gives up after half a second.
            let deadline = Date(timeIntervalSinceNow: 0.5)
            while !player.stopsSettled {
                let left = deadline.timeIntervalSinceNow
                guard left > 0 else { break }
                player.stopWakeup.wait(timeout: left)
            }
        }
        serviceIfIdle()
    }

    /// The engine holds its cycles (reset): stop and apply it here.
    func stopWithCyclesHeld() {
        commandLock.withLock {
            player.stop()
            player.serviceWhileIdle()
        }
    }

    /// Offline rendering waits for a file's decoding instead of playing silence when it lags.
    func rendersOffline(_ offline: Bool) { player.waitsForFiles.store(offline, ordering: .relaxed) }

    /// The engine stopped (nothing renders): stop and apply it here.
    func engineStopped() { stopWithCyclesHeld() }

    /// Decodes ahead; here files are always decoded ahead, so this is a hint only.
    open func prepare(withFrameCount frameCount: AVAudioFrameCount) {}

    open var isPlaying: Bool { player.isPlaying }

    /// The node time at `playerTime`, from the last render; nil while the player is not playing.
    open func nodeTime(forPlayerTime playerTime: AVAudioTime) -> AVAudioTime? {
        guard let times = player.lastTimes(), let player = times.player, playerTime.isSampleTimeValid else { return nil }
        let rate = outputFormat(forBus: 0).sampleRate
        let node = times.node + (playerTime.sampleTime - player)
        let host = Double(times.host) + Double(playerTime.sampleTime - player) / rate * 1e9
        return AVAudioTime(hostTime: UInt64(max(host, 0)), sampleTime: node, atRate: rate)
    }

    /// The player time at `nodeTime` (frames since the player started), from the last render;
    /// nil while the player is not playing.
    open func playerTime(forNodeTime nodeTime: AVAudioTime) -> AVAudioTime? {
        guard let times = player.lastTimes(), let player = times.player else { return nil }
        let rate = outputFormat(forBus: 0).sampleRate
        var sample = nodeTime.sampleTime
        if !nodeTime.isSampleTimeValid {
            guard nodeTime.isHostTimeValid else { return nil }
            sample = times.node + Int64(((Double(nodeTime.hostTime) - Double(times.host)) / 1e9 * rate).rounded())
        }
        let at = player + (sample - times.node)
        let host = Double(times.host) + Double(sample - times.node) / rate * 1e9
        return AVAudioTime(hostTime: UInt64(max(host, 0)), sampleTime: at, atRate: rate)
    }

    open var volume: Float {
        get { mixVolume }
        set { mixVolume = min(max(newValue, 0), 1) }
    }

    open var pan: Float {
        get { mixPan }
        set { mixPan = min(max(newValue, -1), 1) }
    }

    open func destination(forMixer mixer: AVAudioNode, bus: AVAudioNodeBus) -> AVAudioMixingDestination? {
        mixingDestination(forMixer: mixer, bus: bus)
    }

    open override func reset() {
        stop()
        super.reset()
    }

    // MARK: Completions

    /// The completion thread: sleeps until the render side posts, calls each handler once.
    private static func deliverCompletions(player: PlayerUnit, owner: AVAudioPlayerNode?) {
        nameCurrentThread("AVAudioPlayerNode")
        weak let node = owner
        while true {
            player.completionWakeup.wait()
            guard let me = node, me.delivering.load(ordering: .acquiring) else { return }
            while let done = player.completions.pop() {
                me.pendingLock.lock()
                let entry = me.pending.removeValue(forKey: done.token)
                me.pendingLock.unlock()
                guard let entry else { continue }
                entry.feeder?.finish()
                if entry.type == .dataPlayedBack, done.hostTime > 0 {
                    // Heard once the output's latency has passed after its last frame was rendered.
                    let heard = done.hostTime + UInt64(me.outputPresentationLatency * 1e9)
                    let now = AudioGetCurrentHostTime()
                    // Not a poll: `.dataPlayedBack` is due at a known time, the one wait here.
                    if heard > now && me.attachedEngine?.isInManualRenderingMode != true { usleep(UInt32(min(heard - now, 2_000_000_000) / 1000)) }
                }
                entry.handler?(entry.type)
            }
        }
    }
}

/// Decodes a file segment ahead of the render thread into a ring (float interleaved), on a
/// thread of its own that sleeps until the ring has room (the render side posts as it reads).
final class FileFeeder: @unchecked Sendable {
    let ring: SampleRing
    let channels: Int
    private let file: AVAudioFile
    private var remaining: Int
    private let buffer: AVAudioPCMBuffer
    /// Frames interleaved for the ring, when the file could only be read deinterleaved.
    private let interleaved: UnsafeMutablePointer<Float>?
    private let chunk = 4096
    private let finished = Atomic<Bool>(false)
    /// Posted by the render side after each read, and by ``finish()``.
    let room = Wakeup()
    /// Posted after each chunk written (offline rendering waits for it).
    let written = Wakeup()

    init?(url: URL, start: AVAudioFramePosition, frames: Int) {
        // Interleaved float, the ring's own layout: the file decodes straight into it (files of
        // more than 8 channels read deinterleaved only, and are interleaved here).
        guard let file = (try? AVAudioFile(forReading: url, commonFormat: .pcmFormatFloat32, interleaved: true)) ?? (try? AVAudioFile(forReading: url))
        else { return nil }
        file.framePosition = start
        self.file = file
        channels = Int(file.processingFormat.channelCount)
        // The render side reads files of up to 16 channels.
        guard channels <= 16 else { return nil }
        remaining = frames
        ring = SampleRing(capacity: Int(file.processingFormat.sampleRate) * channels)
        guard let b = AVAudioPCMBuffer(pcmFormat: file.processingFormat, frameCapacity: AVAudioFrameCount(chunk)) else { return nil }
        buffer = b
        interleaved = file.processingFormat.isInterleaved || channels == 1 ? nil : .allocate(capacity: chunk * channels)
        fill()
        guard remaining > 0 else { return }
        let thread = Thread { [self] in
            nameCurrentThread("AVAudioPlayerNode file")
            while !finished.load(ordering: .acquiring) && remaining > 0 {
                room.wait()
                fill()
            }
        }
        thread.start()
    }

    deinit { interleaved?.deallocate() }

    /// Decodes while the ring has room for a chunk.
    private func fill() {
        while remaining > 0, ring.capacity - ring.available >= chunk * channels, !finished.load(ordering: .relaxed) {
            let n = min(chunk, remaining)
            guard (try? file.read(into: buffer, frameCount: AVAudioFrameCount(n))) != nil, buffer.frameLength > 0, let data = buffer.floatChannelData else {
                remaining = 0
                return
            }
            let got = Int(buffer.frameLength)
            if let interleaved {
                for c in 0..<channels {
                    let p = data[c]
                    for i in 0..<got { interleaved[i &* channels &+ c] = p[i] }
                }
                ring.write(interleaved, count: got * channels)
            } else {
                ring.write(data[0], count: got * channels)
            }
            remaining -= got
            written.signal()
        }
    }

    func finish() {
        finished.store(true, ordering: .releasing)
        room.signal()
    }
}
