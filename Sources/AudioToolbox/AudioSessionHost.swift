package import AudioHAL
import Foundation
import Synchronization

/// Set while the app muted its input (`AVAudioApplication.setInputMuted`): recording queues then
/// deliver silence. Read on the server thread; an atomic load.
let processInputMuted = Atomic<Bool>(false)

/// Mutes or unmutes every recording queue of the process (they deliver silence while muted).
package func AudioSessionSetInputMuted(_ muted: Bool) { processInputMuted.store(muted, ordering: .relaxed) }
/// Sets the process's input mute and returns the state before.
package func AudioSessionExchangeInputMuted(_ muted: Bool) -> Bool { processInputMuted.exchange(muted, ordering: .relaxed) }
package func AudioSessionIsInputMuted() -> Bool { processInputMuted.load(ordering: .relaxed) }

/// What a device is (speaker, headphones, HDMI…), in terms the audio session maps to Apple's port
/// types; the backend works it out in its own.
package typealias AudioDeviceKind = HALDeviceKind

/// What a stream is for (media, a call, sound that mixes…), in terms the audio session derives
/// from its category and mode; the backend says it to the server in its own.
package typealias AudioStreamPurpose = HALStreamPurpose

/// What the audio session asks of the streams of one direction.
package struct AudioSessionStreamUse: Sendable, Equatable {
    package var purpose: AudioStreamPurpose
    /// Whether the streams want the server's echo cancellation.
    package var echoCancellation: Bool
    package init(purpose: AudioStreamPurpose, echoCancellation: Bool = false) {
        self.purpose = purpose
        self.echoCancellation = echoCancellation
    }
}

/// A device as the audio session describes routes.
package struct AudioSessionDevice: Sendable, Equatable {
    package var name: String
    package var description: String
    package var sampleRate: Double
    package var channels: Int
    package var kind: AudioDeviceKind
    package var portName: String?
    /// What the device adds between the server and the listener (or the microphone and the
    /// server), in seconds, as the server reports it.
    package var latency: Double
    /// The server's stand-in for no device (``HALDeviceInfo/isPlaceholder``).
    package var isPlaceholder: Bool

    init(_ info: HALDeviceInfo) {
        name = info.name
        description = info.description
        sampleRate = info.sampleRate
        channels = info.channels
        kind = info.kind
        portName = info.portName
        latency = info.latency
        isPlaceholder = info.isPlaceholder
    }
}

/// What the session's stream was granted when it activated.
package struct AudioSessionGrant: Sendable {
    package var sampleRate: Double
    package var ioBufferDuration: Double
    /// The output device's latency when the stream opened (``AudioSessionDevice/latency``).
    package var outputLatency: Double
    /// The channels the session's stream carries.
    package var channels: Int
    package var output: AudioSessionDevice
}

/// The process's audio session as AudioToolbox sees it: what every queue's stream says it is for
/// (its purpose, echo cancellation), and the session's own stream, a silent corked
/// playback stream that holds the session's place on the server while it is active (the server's
/// policy modules see its role) and tells what the server granted.
///
/// AVFAudio's `AVAudioSession` drives it; queues read ``streamUse(output:)`` when they open a
/// stream. Every backend operation goes to ``AudioSystem/current``'s backend.
package enum AudioSessionHost {
    private struct State {
        var output: AudioSessionStreamUse?
        var input: AudioSessionStreamUse?
        var ioBufferDuration: Double?
        var stream: (any HALStream)?
        /// The session's routing: a preferred input and an output override (device names), used
        /// by streams that name no device of their own.
        var inputDevice: String?
        var outputDevice: String?
    }

    private static let state = Mutex<State>(State())

    /// Sets what queues' streams say they are for from now on (streams already open keep theirs).
    package static func setStreamUse(output: AudioSessionStreamUse, input: AudioSessionStreamUse) {
        state.withLock {
            $0.output = output
            $0.input = input
        }
    }

    /// What the session asks of streams of that direction; `nil` while no session said anything.
    package static func streamUse(output: Bool) -> AudioSessionStreamUse? {
        state.withLock { output ? $0.output : $0.input }
    }

    /// The session's preferred I/O buffer duration: the server-side buffer queues' playback
    /// streams ask for (instead of their 20 ms default), `nil` for the default.
    package static func setPreferredIOBufferDuration(_ duration: Double?) {
        state.withLock { $0.ioBufferDuration = duration }
    }

    package static var preferredIOBufferDuration: Double? { state.withLock { $0.ioBufferDuration } }

    /// Session streams of other processes marked exclusive (non-mixable playback: other
    /// processes' sessions that were active first are interrupted by them), by the server's
    /// stream index.
    package static func exclusiveSessions() -> Set<UInt32> {
        guard let backend = try? AudioSystem.current.backend() else { return [] }
        return Set(backend.otherPlaybackStreams().filter(\.exclusiveSession).map(\.index))
    }

    /// Opens the session's stream (closing a previous one) at `sampleRate` with `ioBufferDuration`
    /// and returns what the server granted. Throws `kAudioQueueErr_InvalidDevice` without a server.
    package static func activate(sampleRate: Double, channels: Int, ioBufferDuration: Double, exclusive: Bool = false) throws(AudioFailure) -> AudioSessionGrant {
        deactivate()
        do {
            let backend = try AudioSystem.current.backend()
            let use = streamUse(output: true)
            var policyRequest = HALStreamRequest(
                format: HALStreamFormat(sampleRate: sampleRate, channels: channels), bufferDuration: ioBufferDuration,
                name: "AVAudioSession", purpose: use?.purpose ?? .media, startCorked: true, device: state.withLock { $0.outputDevice })
            policyRequest.echoCancellation = use?.echoCancellation ?? false
            policyRequest.exclusiveSession = exclusive
            policyRequest.reportsPolicyEvents = true
            policyRequest.carriesSound = false
            let stream = try backend.openOutput(policyRequest, source: SilentSource(channels: channels))
            state.withLock { $0.stream = stream }
            return AudioSessionGrant(
                sampleRate: stream.format.sampleRate, ioBufferDuration: stream.grantedBufferDuration,
                outputLatency: stream.device.latency, channels: stream.format.channels, output: AudioSessionDevice(stream.device))
        } catch {
            throw AudioFailure(
                error.kind == .noServer ? kAudioQueueErr_InvalidDevice : kAudioQueueErr_CannotStart, "the session's stream cannot open: \(error)")
        }
    }

    /// Closes the session's stream.
    package static func deactivate() {
        let stream = state.withLock { s -> (any HALStream)? in
            defer { s.stream = nil }
            return s.stream
        }
        stream?.close()
    }

    /// Whether the server lets this process capture: a capture stream on the default source opens
    /// (`true`) or is refused (`false`); `nil` when no server answers (nothing could be checked).
    package static func checkCapture() -> Bool? {
        guard let backend = try? AudioSystem.current.backend() else { return nil }
        final class Discard: HALStreamClient, @unchecked Sendable {}
        let request = HALStreamRequest(
            format: HALStreamFormat(sampleRate: 48000, channels: 1), bufferDuration: 0.05, name: "record permission check",
            purpose: .unprocessed, startCorked: true)
        do {
            let stream = try backend.openInput(request, sink: Discard())
            stream.close()
            return true
        } catch {
            return error.kind == .noServer ? nil : false
        }
    }

    /// Whether another client's playback stream is audible: not corked, not muted, volume above 0.
    /// Whether another client's call plays now (an uncorked stream whose purpose is voice
    /// communication: `media.role=phone`); `nil` where the server interrupts for calls itself
    /// (``AudioBackend/corksStreamsForCalls``), so the session waits for its cork requests instead.
    package static func callInProgress() -> Bool? {
        guard let backend = try? AudioSystem.current.backend(), !backend.corksStreamsForCalls else { return nil }
        return backend.otherPlaybackStreams().contains { $0.purpose == .voiceCommunication && !$0.corked }
    }

    package static func otherAudioPlaying() -> Bool {
        guard let backend = try? AudioSystem.current.backend() else { return false }
        return backend.otherPlaybackStreams().contains(where: \.isAudible)
    }

    /// The default sink's volume on the server's scale (0 … 1 for 0 … 100 %), `nil` without one.
    package static func outputVolume() -> Double? {
        (try? AudioSystem.current.backend())?.defaultOutputVolume()
    }

    /// Ducks other clients' music, video and role-less playback while the session is active
    /// (``AudioBackend/setDuckingOthers(_:device:)``): the server does it while a stream of this
    /// process asks for it, and undoes it when that stream ends: by ``unduckOthers()``, or with
    /// the process's connection when the process dies, however it dies. Throws
    /// `kAudioQueueErr_InvalidDevice` without a server, `kAudioQueueErr_CannotStart` when the
    /// server refuses.
    package static func duckOthers() throws(AudioFailure) {
        try duckOthers(.full, for: sessionDucker)
    }

    /// Ends what ``duckOthers()`` started (unless a voice-processing unit still ducks).
    package static func unduckOthers() {
        try? duckOthers(nil, for: sessionDucker)
    }

    /// The session's key among those who duck others.
    private static let sessionDucker: UInt64 = 0
    private static let nextDucker = Atomic<UInt64>(1)
    /// Who asks to duck others, and how far, by key; and the level the backend was given.
    private static let duckers = Mutex<(asked: [UInt64: DuckLevel], applied: DuckLevel?)>(([:], nil))

    /// A key for another who ducks others (a voice-processing unit).
    package static func newDucker() -> UInt64 { nextDucker.wrappingAdd(1, ordering: .relaxed).oldValue }

    /// `owner` asks to duck others by `level` (`nil`: no longer). Several may ask at once (the
    /// session's `duckOthers`, running voice-processing units): the deepest level asked applies,
    /// and ducking ends with the last. Throws as ``duckOthers()``; a refused request is not kept.
    package static func duckOthers(_ level: DuckLevel?, for owner: UInt64) throws(AudioFailure) {
        try duckers.withLock { (d: inout (asked: [UInt64: DuckLevel], applied: DuckLevel?)) throws(AudioFailure) in
            let before = d.asked[owner]
            d.asked[owner] = level
            let wanted = d.asked.values.max()
            guard wanted != d.applied else { return }
            do throws(HALError) {
                try AudioSystem.current.backend().setDuckingOthers(wanted, device: state.withLock { $0.outputDevice })
                d.applied = wanted
            } catch {
                d.asked[owner] = before
                throw AudioFailure(error.kind == .noServer ? kAudioQueueErr_InvalidDevice : kAudioQueueErr_CannotStart, "cannot duck others: \(error)")
            }
        }
    }

    /// Forgets every request to duck: the backend they were made to went (its ducking with it).
    private static func forgetDucking(_ backend: (any AudioBackend)?) {
        duckers.withLock { d in
            d = ([:], nil)
            try? backend?.setDuckingOthers(nil, device: nil)
        }
    }

    /// While ducking, ducks other clients' streams that appeared since (where the library ducks
    /// by volume); never starts ducking.
    package static func refreshDucking() {
        (try? AudioSystem.current.backend())?.refreshDuckingOthers()
    }

    /// Whether the server still has an output device of that name.
    package static func outputExists(_ name: String) -> Bool {
        guard let backend = try? AudioSystem.current.backend() else { return false }
        return (try? backend.outputDevice(named: name)) != nil
    }

    /// The devices the session's audio goes to and comes from now: the output override and the
    /// preferred input where set (and still present), else the server's defaults.
    package static func defaultDevices() -> (output: AudioSessionDevice?, input: AudioSessionDevice?) {
        guard let backend = try? AudioSystem.current.backend() else { return (nil, nil) }
        let (outName, inName) = state.withLock { ($0.outputDevice, $0.inputDevice) }
        // Where the server names no default while it has devices (pipewire-pulse between the
        // default's removal and its session manager's next choice, or before one is made), streams
        // go to its first device: that is the route, not an empty one.
        let output = ((outName.flatMap { try? backend.outputDevice(named: $0) }) ?? (try? backend.outputDevice(named: nil))
            ?? backend.devices(output: true).first).map(AudioSessionDevice.init)
        let input = ((inName.flatMap { try? backend.inputDevice(named: $0) }) ?? (try? backend.inputDevice(named: nil))
            ?? backend.devices(output: false).first).map(AudioSessionDevice.init)
        return (output, input)
    }

    /// Every output (`true`) or input device of the server; inputs leave out monitors of sinks
    /// except the default source (a monitor can be the default "microphone", as in the tests).
    package static func devices(output: Bool) -> [AudioSessionDevice] {
        guard let backend = try? AudioSystem.current.backend() else { return [] }
        var list = backend.devices(output: output).map(AudioSessionDevice.init)
        if !output, let fallback = try? backend.inputDevice(named: nil), !list.contains(where: { $0.name == fallback.name }) {
            list.insert(AudioSessionDevice(fallback), at: 0)
        }
        return list
    }

    /// Routes the session's streams that name no device: input from `input`, output to `output`
    /// (`nil`: the server's default). Streams already open keep their device.
    package static func setRouting(input: String?, output: String?) {
        state.withLock {
            $0.inputDevice = input
            $0.outputDevice = output
        }
    }

    package static var routing: (input: String?, output: String?) { state.withLock { ($0.inputDevice, $0.outputDevice) } }
}

/// What the server did that the session answers for.
package struct AudioSessionEvent: OptionSet, Sendable {
    package let rawValue: UInt32
    package init(rawValue: UInt32) { self.rawValue = rawValue }
    /// Devices or the server's defaults changed: the route may have.
    package static let devices = AudioSessionEvent(rawValue: 1)
    /// The server asked the session's stream to cork (a call started).
    package static let interruptionBegan = AudioSessionEvent(rawValue: 2)
    /// The server asked it to uncork (the call ended).
    package static let interruptionEnded = AudioSessionEvent(rawValue: 4)
    /// The connection to the server died.
    package static let serverLost = AudioSessionEvent(rawValue: 8)
    /// A server answers again after a loss.
    package static let serverBack = AudioSessionEvent(rawValue: 16)
    /// The process's audio environment (``AudioSystem/current``) changed: the session's stream
    /// is closed, and routes and devices are the new environment's. Handled on the thread that
    /// changed it, before the change returns.
    package static let environmentChanged = AudioSessionEvent(rawValue: 64)
    /// Playback streams came or went: another session may have started or ended.
    package static let otherSessions = AudioSessionEvent(rawValue: 32)
}

extension AudioSessionHost {
    private static let monitor = Mutex<Thread?>(nil)

    /// Starts, once, the thread that turns the server's events into `handler` calls. The handler
    /// runs on that thread (never the server thread), one call at a time, except for
    /// ``AudioSessionEvent/environmentChanged``, which runs on the thread that changes the
    /// environment. After a loss it
    /// reconnects on its own, waiting 50 ms, then twice as long each try, up to 1 s.
    package static func startMonitoring(_ handler: @escaping @Sendable (AudioSessionEvent) -> Void) {
        monitor.withLock { thread in
            guard thread == nil else { return }
            AudioSystem.observeChanges { old, _ in
                // The session's stream and ducking belong to the old environment's backend.
                closeSessionStream()
                forgetDucking(old.connectedBackend)
                handler(.environmentChanged)
            }
            let t = Thread { monitorLoop(handler) }
            t.name = "AVAudioSession events"
            t.start()
            thread = t
        }
    }

    private static func monitorLoop(_ handler: @Sendable (AudioSessionEvent) -> Void) {
        nameCurrentThread("AVAudioSession events")
        var lost = false
        var backoff = 0.05
        var followed: AudioSystem?
        while true {
            let system = AudioSystem.current
            if followed !== system {
                // Another environment (its observer told the session): a loss was the old one's.
                followed = system
                lost = false
                backoff = 0.05
            }
            guard let backend = try? system.backend() else {
                // No server: nothing exists to wait on (a server that starts announces itself to
                // no one), so this retries, 50 ms doubling to 1 s. The only time the thread wakes
                // on a timer, and only until a server answers.
                Thread.sleep(forTimeInterval: backoff)
                backoff = min(backoff * 2, 1)
                continue
            }
            // Set after `backend()`: a change made before the backend existed raised nothing.
            guard AudioSystem.current === system else { continue }
            if lost {
                lost = false
                backoff = 0.05
                handler(.serverBack)
            }
            // Sleeps until the server says something (every event, a loss or the environment's
            // change included, signals).
            backend.events.wakeup.wait()
            let raised = backend.events.take()
            var event: AudioSessionEvent = []
            if raised.contains(.devices) { event.insert(.devices) }
            if raised.contains(.corkRequested) { event.insert(.interruptionBegan) }
            if raised.contains(.uncorkRequested) { event.insert(.interruptionEnded) }
            if raised.contains(.streams) { event.insert(.otherSessions) }
            if raised.contains(.serverLost) {
                event.insert(.serverLost)
                // The ducking went with the connection; its stream is let go with the backend.
                forgetDucking(backend)
                system.discard(backend)
                closeSessionStream()
                lost = true
            }
            if !event.isEmpty && AudioSystem.current === system { handler(event) }
        }
    }

    /// Closes the session's stream, if it has one, without deactivating anything else.
    private static func closeSessionStream() {
        let dead = state.withLock { s -> (any HALStream)? in
            defer { s.stream = nil }
            return s.stream
        }
        dead?.close()
    }

    /// Reopens the streams of the process's queues whose server-side buffer no longer matches
    /// the session's preferred I/O buffer duration (a preferred value changed while active).
    package static func reconfigureQueues() {
        for queue in liveQueues.all() { queue.reopenStream() }
    }

    /// Pauses every running playback queue of the process, as an interruption does on iOS, and
    /// returns how many it paused. The app resumes them (`AudioQueueStart`) after `.ended`.
    package static func pausePlayback() -> Int {
        var paused = 0
        for queue in liveQueues.all() where queue.isOutput {
            queue.lock.lock()
            let running = queue.isRunning == 1
            queue.lock.unlock()
            if running && AudioQueuePause(queue.ref) == noErr { paused += 1 }
        }
        return paused
    }
}

/// The session stream's source: silence (it stays corked; this is for the rare uncorked moment).
private final class SilentSource: HALStreamClient, @unchecked Sendable {
    let channels: Int
    init(channels: Int) {
        self.channels = channels
        super.init()
    }
    override func render(_ output: UnsafeMutablePointer<Float>, frames: Int, time: HALRenderTime) -> Int {
        output.update(repeating: 0, count: frames * channels)
        return frames
    }
}
