public import Foundation

/// The process's audio session, on the Linux sound server.
///
/// Linux mapping (see the issue notes and README):
/// - Category, mode and options say what every queue, player and recorder stream of the process
///   is for (``streamUse(category:mode:options:)`` has the table) and whether it wants echo
///   cancellation (voice and video chat); the backend tells the server in its own words (on
///   PulseAudio, `media.role` and `filter.want=echo-cancel`), so the server's policy modules
///   (role-cork, role-ducking, echo-cancel) treat the session as iOS treats it.
/// - Activation opens the session's own stream: silent and corked, with the session's role,
///   preferred sample rate and I/O buffer duration. What the server grants it is what the current
///   values report (`sampleRate`, `ioBufferDuration`, `outputLatency`), and it stays open while
///   the session is active. Changing a preferred value while active reopens it, and a new I/O
///   buffer duration reopens the running queues' streams too (losing one buffer's worth).
/// - The route is the default output and input devices; the kind of device the backend sees
///   (speaker, headphones, HDMI…, from the active port's type or the device's form factor on
///   PulseAudio) gives Apple's port type.
/// - `duckOthers` lowers other clients' music and video streams (and those without a role) to
///   20 % of their volume on the server's scale (cubic: −41.9 dB) while the session is active.
///   The server does it (PulseAudio's `module-role-ducking`, loaded if absent), keyed to a stream
///   of this process, so a process that dies leaves no one ducked (where the module does not
///   exist, PipeWire's pipewire-pulse, the library lowers their volumes and a guard process puts
///   them back when this process ends, however it ends); the process's own streams
///   (role `game`, as the session is mixable) are not ducked.
/// - Notifications are posted on the session's event thread, not the main thread.
public final class AVAudioSession: NSObject, @unchecked Sendable {
    private static let shared = AVAudioSession()

    /// The one session of the process.
    public static func sharedInstance() -> AVAudioSession { shared }

    private let lock = NSLock()
    /// Serializes route checks (the event thread's and the caller's, as for an override), so that
    /// each compares against the route the previous one saw and posts in that order. Recursive: an
    /// observer of the notification may change the route again.
    private let routeCheck = NSRecursiveLock()
    private var _category: Category = .soloAmbient
    private var _mode: Mode = .default
    private var _options: CategoryOptions = []
    private var _policy: RouteSharingPolicy = .default
    private var active = false
    private var grant: AudioSessionGrant?
    private var _preferredSampleRate: Double = 0
    private var _preferredIOBufferDuration: TimeInterval = 0
    private var _preferredInputChannels = 0
    private var _preferredOutputChannels = 0

    private var interrupted = false
    /// The interruption is another client's call, seen by the session itself (``checkCalls()``).
    private var interruptedByCall = false
    /// Other processes' exclusive sessions that were there when this one activated (they do not
    /// interrupt it), and the one that interrupted it, if any.
    private var olderSessions: Set<UInt32> = []
    private var interrupter: UInt32?
    /// Whether other audio was playing at the last stream event (for the silence hint).
    private var otherAudioWasPlaying: Bool?
    private var wasActiveBeforeLoss = false
    private var lastRoute: AVAudioSessionRouteDescription?
    private var seenOutputs: Set<String> = []

    private override init() {
        super.init()
        applyStreamProperties()
        AudioSessionHost.startMonitoring { event in AVAudioSession.shared.handle(event) }
    }

    // MARK: Server events

    /// Turns the server's events into Apple's notifications. Runs on the session's event thread;
    /// notifications are posted there (a secondary thread, as Apple's route changes are).
    private func handle(_ event: AudioSessionEvent) {
        if event.contains(.environmentChanged) {
            // A test put the process on another backend: the session starts over, inactive, with
            // the new environment's route as the last one seen.
            locked {
                active = false
                grant = nil
                interrupted = false
                interruptedByCall = false
                interrupter = nil
                olderSessions = []
                otherAudioWasPlaying = nil
                wasActiveBeforeLoss = false
            }
            routeCheck.lock()
            let route = currentRoute
            locked {
                lastRoute = route
                seenOutputs = Set(route.outputs.map(\.uid))
            }
            routeCheck.unlock()
        }
        if event.contains(.serverLost) {
            lock.lock()
            wasActiveBeforeLoss = active
            active = false
            grant = nil
            lock.unlock()
            NotificationCenter.default.post(name: Self.mediaServicesWereLostNotification, object: self)
        }
        if event.contains(.serverBack) {
            if locked({ wasActiveBeforeLoss }) { try? activateNow() }
            NotificationCenter.default.post(name: Self.mediaServicesWereResetNotification, object: self)
        }
        if event.contains(.interruptionBegan) {
            // Looked at and set at once: a deactivation in between must not leave it set.
            let begins = locked { () -> Bool in
                guard active && !Self.isMixable(_category, _options) && !interrupted else { return false }
                interrupted = true
                return true
            }
            if begins {
                _ = AudioSessionHost.pausePlayback()
                postInterruption(began: true)
            }
        }
        if event.contains(.interruptionEnded) {
            let ends = locked { () -> Bool in
                guard interrupted else { return false }
                interrupted = false
                interruptedByCall = false
                return true
            }
            if ends { postInterruption(began: false) }
        }
        if event.contains(.devices) { checkRoute() }
        if event.contains(.otherSessions) {
            // Where the library ducks by volume (no server module), streams that came since are
            // lowered now.
            AudioSessionHost.refreshDucking()
            checkCalls()
            checkOtherSessions()
            checkOtherAudio()
        }
    }

    /// Posts an interruption's beginning (reason `.default`) or its end (with `.shouldResume`).
    private func postInterruption(began: Bool) {
        let info: [AnyHashable: Any] = began
            ? [AVAudioSessionInterruptionTypeKey: NSNumber(value: InterruptionType.began.rawValue),
               AVAudioSessionInterruptionReasonKey: NSNumber(value: InterruptionReason.default.rawValue)]
            : [AVAudioSessionInterruptionTypeKey: NSNumber(value: InterruptionType.ended.rawValue),
               AVAudioSessionInterruptionOptionKey: NSNumber(value: InterruptionOptions.shouldResume.rawValue)]
        NotificationCenter.default.post(name: Self.interruptionNotification, object: self, userInfo: info)
    }

    /// On a server that does not pause sessions for calls itself (PipeWire's pipewire-pulse has no
    /// `module-role-cork`), another client's call stream (`media.role=phone`) interrupts a
    /// non-mixable active session as the server's cork request would, and its end ends it.
    private func checkCalls() {
        guard let calling = AudioSessionHost.callInProgress() else { return }
        let (begins, byCall) = locked { () -> (Bool, Bool) in
            guard calling && active && !Self.isMixable(_category, _options) && !interrupted else { return (false, interruptedByCall) }
            interrupted = true
            interruptedByCall = true
            return (true, true)
        }
        if begins {
            _ = AudioSessionHost.pausePlayback()
            postInterruption(began: true)
        } else if !calling && byCall {
            locked {
                interrupted = false
                interruptedByCall = false
            }
            postInterruption(began: false)
        }
    }

    /// Posts the silence-secondary-audio hint when other clients' playback starts (`.begin`) or
    /// stops (`.end`) while the session is active.
    private func checkOtherAudio() {
        guard locked({ active }) else { return }
        let playing = AudioSessionHost.otherAudioPlaying()
        let previous = locked { () -> Bool? in
            defer { otherAudioWasPlaying = playing }
            return otherAudioWasPlaying
        }
        guard let previous, previous != playing else { return }
        NotificationCenter.default.post(
            name: Self.silenceSecondaryAudioHintNotification, object: self,
            userInfo: [AVAudioSessionSilenceSecondaryAudioHintTypeKey: NSNumber(value: (playing ? SilenceSecondaryAudioHintType.begin : .end).rawValue)])
    }

    /// Two processes using this library obey iOS's rule: activating a non-mixable playback session
    /// interrupts the non-mixable sessions active before it; when it ends, they hear `.ended`.
    private func checkOtherSessions() {
        let (isActive, exclusive, already, current) = locked { (active, Self.isExclusive(_category, _options), interrupted, interrupter) }
        guard isActive, exclusive else { return }
        let others = AudioSessionHost.exclusiveSessions()
        if let current {
            if !others.contains(current) {
                locked {
                    interrupted = false
                    interruptedByCall = false
                    interrupter = nil
                }
                postInterruption(began: false)
            }
            return
        }
        let newer = others.subtracting(locked { olderSessions })
        locked { olderSessions.formIntersection(others) }
        guard !already, let newcomer = newer.first else { return }
        locked {
            interrupted = true
            interrupter = newcomer
        }
        _ = AudioSessionHost.pausePlayback()
        postInterruption(began: true)
    }

    /// Non-mixable sessions that play: they interrupt and are interrupted by one another.
    static func isExclusive(_ category: Category, _ options: CategoryOptions) -> Bool {
        category != .record && !isMixable(category, options)
    }

    /// Posts a route change when the default devices differ from the last route seen, with the
    /// reason: the previous output gone → `.oldDeviceUnavailable`; an output not seen before →
    /// `.newDeviceAvailable`; otherwise `.routeConfigurationChange`.
    private func checkRoute(reason forced: RouteChangeReason? = nil, confirming: Bool = false) {
        routeCheck.lock()
        defer { routeCheck.unlock() }
        // The route and what its devices are, from one reading of the server's defaults.
        let defaults = AudioSessionHost.defaultDevices()
        let route = self.route(defaults)
        let (previous, seen) = locked { (lastRoute, seenOutputs) }
        // The server's stand-in for no device (`auto_null`) taking the place of a real one: a
        // server starting again shows it for a moment before its devices (pipewire-pulse did, and
        // the session posted `speaker → auto_null → speaker`), so it is looked at again half a
        // second later and posted only if it is still the route then (the last real device went).
        let standIn = (route.outputs.isEmpty ? false : defaults.output?.isPlaceholder ?? false)
            || (route.inputs.isEmpty ? false : defaults.input?.isPlaceholder ?? false)
        if standIn && !confirming, let previous, previous != route {
            // A strong capture: the session is the process's (`sharedInstance()`), held half a
            // second at most here.
            DispatchQueue.global().asyncAfter(deadline: .now() + 0.5) { [self] in checkRoute(reason: forced, confirming: true) }
            return
        }
        // A side of the route the category still uses, gone with nothing in its place, is a
        // server between devices (one starting again, before its devices are back): not a route.
        // The change is posted once the devices are there, against the last real route.
        let category = self.category
        let playing = category != .record
        let recording = category == .record || category == .playAndRecord || category == .multiRoute
        if let previous,
            (playing && route.outputs.isEmpty && !previous.outputs.isEmpty) || (recording && route.inputs.isEmpty && !previous.inputs.isEmpty)
        {
            return
        }
        // A device that went away is new again when it comes back (headphones plugged in twice).
        let present = Set(AudioSessionHost.devices(output: true).map(\.name))
        locked {
            lastRoute = route
            seenOutputs.formIntersection(present)
            for o in route.outputs { seenOutputs.insert(o.uid) }
        }
        guard let previous, previous != route else { return }
        let reason: RouteChangeReason
        let previousOutput = previous.outputs.first?.uid
        if let forced {
            reason = forced
        } else if let previousOutput, !AudioSessionHost.outputExists(previousOutput) {
            reason = .oldDeviceUnavailable
        } else if let now = route.outputs.first?.uid, !seen.contains(now) {
            reason = .newDeviceAvailable
        } else {
            reason = .routeConfigurationChange
        }
        NotificationCenter.default.post(
            name: Self.routeChangeNotification, object: self,
            userInfo: [AVAudioSessionRouteChangeReasonKey: NSNumber(value: reason.rawValue), AVAudioSessionRouteChangePreviousRouteKey: previous])
    }

    /// Ambient mixes; so do `mixWithOthers` and `duckOthers` (which implies it, as on iOS).
    static func isMixable(_ category: Category, _ options: CategoryOptions) -> Bool {
        category == .ambient || !options.isDisjoint(with: [.mixWithOthers, .duckOthers])
    }

    // MARK: Category, mode, options

    public var category: Category { locked { _category } }
    public var mode: Mode { locked { _mode } }
    public var categoryOptions: CategoryOptions { locked { _options } }
    public var routeSharingPolicy: RouteSharingPolicy { locked { _policy } }

    public func setCategory(_ category: Category) throws {
        try setCategory(category, mode: locked { _mode }, policy: locked { _policy }, options: [])
    }

    public func setCategory(_ category: Category, options: CategoryOptions) throws {
        try setCategory(category, mode: locked { _mode }, policy: locked { _policy }, options: options)
    }

    public func setCategory(_ category: Category, mode: Mode, options: CategoryOptions = []) throws {
        try setCategory(category, mode: mode, policy: locked { _policy }, options: options)
    }

    public func setCategory(_ category: Category, mode: Mode, policy: RouteSharingPolicy, options: CategoryOptions = []) throws {
        guard Self.categories.contains(category) else { throw Self.error(.badParam, "unknown category \(category.rawValue)") }
        guard Self.modes.contains(mode) else { throw Self.error(.badParam, "unknown mode \(mode.rawValue)") }
        // `.record` with `.mixWithOthers` or `.duckOthers` is accepted, as iOS accepts it: the
        // session then leaves other apps' playback running (ducked with `.duckOthers`).
        if options.contains(.defaultToSpeaker) && category != .playAndRecord {
            throw Self.error(.badParam, "defaultToSpeaker needs playAndRecord")
        }
        routeCheck.lock()  // one step for the event thread's route checks, as an output override
        defer { routeCheck.unlock() }
        lock.lock()
        _category = category
        _mode = mode
        _policy = policy
        _options = options
        lock.unlock()
        applyStreamProperties()
        try reconfigureIfActive()
        checkRoute(reason: .categoryChange)
    }

    public func setMode(_ mode: Mode) throws {
        try setCategory(locked { _category }, mode: mode, policy: locked { _policy }, options: locked { _options })
    }

    static let categories: Set<Category> = [.ambient, .soloAmbient, .playback, .record, .playAndRecord, .multiRoute]
    static let modes: Set<Mode> = [
        .default, .voiceChat, .gameChat, .videoRecording, .measurement, .moviePlayback, .videoChat, .spokenAudio, .voicePrompt,
        .shortFormVideo, .dualRoute,
    ]

    /// What a session's output and input streams say they are for: the server's policy (who
    /// interrupts and ducks whom, and echo cancellation) follows it, in the backend's terms (on
    /// PulseAudio, `media.role` and `filter.want`).
    ///
    /// Voice and game chat → a call (it interrupts media playback); mixable sessions (ambient, or
    /// `mixWithOthers`, which `duckOthers` implies) → mixable sound, never interrupted by ordinary
    /// playback; movie playback and video recording → a movie; other non-mixable playback →
    /// media (interrupted by a call); voice prompts → an announcement; recording, measurement
    /// and multi-route → unprocessed. Input of a media, movie or mixable session is unprocessed.
    /// Voice and video chat also ask for echo cancellation.
    package static func streamUse(category: Category, mode: Mode, options: CategoryOptions) -> (output: AudioSessionStreamUse, input: AudioSessionStreamUse) {
        let mixable = isMixable(category, options)
        let purpose: AudioStreamPurpose
        switch mode {
        case .voiceChat, .videoChat, .gameChat: purpose = .voiceCommunication
        case .voicePrompt: purpose = .announcement
        case .measurement: purpose = .unprocessed
        default:
            if mixable {
                purpose = .mixable
            } else if mode == .moviePlayback || mode == .videoRecording || mode == .shortFormVideo {
                purpose = .movie
            } else if category == .record || category == .multiRoute {
                purpose = .unprocessed
            } else {
                purpose = .media
            }
        }
        let echo = mode == .voiceChat || mode == .videoChat
        let input: AudioStreamPurpose = purpose == .media || purpose == .movie || purpose == .mixable ? .unprocessed : purpose
        return (AudioSessionStreamUse(purpose: purpose, echoCancellation: echo), AudioSessionStreamUse(purpose: input, echoCancellation: echo))
    }

    private func applyStreamProperties() {
        let (c, m, o) = locked { (_category, _mode, _options) }
        let use = Self.streamUse(category: c, mode: m, options: o)
        AudioSessionHost.setStreamUse(output: use.output, input: use.input)
    }

    // MARK: Activation

    /// Activates the session off the caller's thread and tells `handler` whether it did (Apple's
    /// watchOS call): `(true, nil)`, or `(false, error)` with ``setActive(_:options:)``'s error.
    public func activate(options: AVAudioSessionActivationOptions = [], completionHandler handler: @escaping (Bool, (any Error)?) -> Void) {
        let handler = CompletionHandler(handler)
        DispatchQueue.global().async { [self] in
            do {
                try setActive(true)
                handler.body(true, nil)
            } catch {
                handler.body(false, error)
            }
        }
    }

    /// Activates the session off the caller's task; `true` once it is active.
    public func activate(options: AVAudioSessionActivationOptions = []) async throws -> Bool {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Bool, any Error>) in
            DispatchQueue.global().async { [self] in
                do {
                    try setActive(true)
                    continuation.resume(returning: true)
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }

    /// Activates the session: opens its stream on the server with the preferred values (the
    /// current values then report what was granted). Deactivation closes it.
    ///
    /// `.notifyOthersOnDeactivation` is accepted; on Linux the sessions this one interrupted
    /// (other processes using this library) hear `.ended` with `.shouldResume` whether or not it
    /// is passed: the server carries no message at the moment a stream ends.
    public func setActive(_ active: Bool, options: SetActiveOptions = []) throws {
        if active {
            try activateNow()
        } else {
            AudioSessionHost.deactivate()
            AudioSessionHost.unduckOthers()
            // The server's uncork is sent to the session's stream, which is now closed: nothing
            // would end an interruption it began, and a flag left set would keep the next
            // activation from hearing its own (a call still going then corks the new stream
            // anew). A call the session saw itself (pipewire-pulse) is watched on: its end
            // posts `.ended`, as Apple posts it to an app that deactivated when interrupted.
            lock.lock()
            self.active = false
            grant = nil
            if !interruptedByCall { interrupted = false }
            interrupter = nil
            lock.unlock()
        }
    }

    private func activateNow() throws {
        let (rate, duration, channels) = locked { (_preferredSampleRate, _preferredIOBufferDuration, _preferredOutputChannels) }
        let device = AudioSessionHost.defaultDevices().output
        let sampleRate = rate > 0 ? rate : (device?.sampleRate ?? 48000)
        let deviceChannels = min(max(device?.channels ?? 2, 1), 8)
        let outputChannels = channels > 0 ? min(channels, deviceChannels) : deviceChannels
        let ioDuration = duration > 0 ? duration : Self.defaultIOBufferDuration
        let exclusive = locked { Self.isExclusive(_category, _options) }
        // Sessions already active are older: they do not interrupt this one.
        let older = exclusive ? AudioSessionHost.exclusiveSessions() : []
        do throws(AudioFailure) {
            let granted = try AudioSessionHost.activate(
                sampleRate: sampleRate, channels: outputChannels, ioBufferDuration: ioDuration, exclusive: exclusive)
            let duck = locked { _options.contains(.duckOthers) }
            // Whether others play is asked before they are ducked.
            let playing = AudioSessionHost.otherAudioPlaying()
            if duck {
                do throws(AudioFailure) {
                    try AudioSessionHost.duckOthers()
                } catch where error.status != kAudioQueueErr_InvalidDevice {
                    // The server refuses even the trigger stream: the session plays, ducking no
                    // one, rather than failing an activation iOS would grant.
                } catch {
                    AudioSessionHost.deactivate()
                    locked {
                        self.active = false
                        grant = nil
                    }
                    throw error
                }
            } else {
                AudioSessionHost.unduckOthers()
            }
            locked { olderSessions = older }
            lock.lock()
            self.active = true
            grant = granted
            otherAudioWasPlaying = playing
            lock.unlock()
            if locked({ lastRoute == nil }) {
                let route = currentRoute
                locked {
                    lastRoute = route
                    for o in route.outputs { seenOutputs.insert(o.uid) }
                }
            }
        } catch {
            throw Self.error(.mediaServicesFailed, error.reason)
        }
    }

    private func reconfigureIfActive() throws {
        if locked({ active }) { try activateNow() }
    }

    /// The I/O buffer duration used when none is preferred (the queues' server-side default).
    static let defaultIOBufferDuration: TimeInterval = 0.02

    // MARK: Preferred values

    public var preferredSampleRate: Double { locked { _preferredSampleRate } }
    public var preferredIOBufferDuration: TimeInterval { locked { _preferredIOBufferDuration } }
    public var preferredInputNumberOfChannels: Int { locked { _preferredInputChannels } }
    public var preferredOutputNumberOfChannels: Int { locked { _preferredOutputChannels } }

    /// Stored while inactive, applied at activation; while active the session's stream reopens
    /// with it. 8 kHz … 384 kHz, or 0 for the device's rate.
    public func setPreferredSampleRate(_ sampleRate: Double) throws {
        guard sampleRate == 0 || (8000...384_000).contains(sampleRate) else { throw Self.error(.badParam, "sample rate \(sampleRate) is out of range") }
        locked { _preferredSampleRate = sampleRate }
        try reconfigureIfActive()
    }

    /// 2 ms … 1 s (the server's range), or 0 for the default. Queues opened afterwards ask the
    /// server for this duration too.
    public func setPreferredIOBufferDuration(_ duration: TimeInterval) throws {
        guard duration == 0 || (0.002...1).contains(duration) else { throw Self.error(.badParam, "I/O buffer duration \(duration) is out of range") }
        locked { _preferredIOBufferDuration = duration }
        AudioSessionHost.setPreferredIOBufferDuration(duration > 0 ? duration : nil)
        try reconfigureIfActive()
        // Running I/O follows while the session is active.
        if locked({ active }) { AudioSessionHost.reconfigureQueues() }
    }

    public func setPreferredInputNumberOfChannels(_ count: Int) throws {
        guard (0...8).contains(count) else { throw Self.error(.badParam, "\(count) input channels") }
        locked { _preferredInputChannels = count }
    }

    public func setPreferredOutputNumberOfChannels(_ count: Int) throws {
        guard (0...8).contains(count) else { throw Self.error(.badParam, "\(count) output channels") }
        locked { _preferredOutputChannels = count }
        try reconfigureIfActive()
    }

    // MARK: Current values

    /// The rate the session's stream runs at once active (the server resamples to the device);
    /// the default device's rate before.
    public var sampleRate: Double {
        if let grant = locked({ grant }) { return grant.sampleRate }
        return AudioSessionHost.defaultDevices().output?.sampleRate ?? 0
    }

    /// The buffer duration the server granted the session's stream; the default before activation.
    public var ioBufferDuration: TimeInterval { locked { grant?.ioBufferDuration } ?? Self.defaultIOBufferDuration }

    /// The output device's own latency, as the server reports it (the latency it runs the sink
    /// at: what it keeps buffered ahead of the hardware), apart from ``ioBufferDuration``: the
    /// device the session's stream plays on while active, the default output before.
    public var outputLatency: TimeInterval {
        if let latency = locked({ grant?.outputLatency }) { return latency }
        return AudioSessionHost.defaultDevices().output?.latency ?? 0
    }

    /// The input device's own latency, as the server reports it (the source's configured latency).
    public var inputLatency: TimeInterval { AudioSessionHost.defaultDevices().input?.latency ?? 0 }

    /// The channels the session's stream carries while active (the preferred count, at most the
    /// device's); the output device's before.
    public var outputNumberOfChannels: Int {
        if let channels = locked({ grant?.channels }) { return channels }
        return maximumOutputNumberOfChannels
    }

    /// The session opens no input stream of its own, so the current input channels are those of
    /// the input device.
    public var inputNumberOfChannels: Int { maximumInputNumberOfChannels }
    /// The output device's channels.
    public var maximumOutputNumberOfChannels: Int { AudioSessionHost.defaultDevices().output?.channels ?? 0 }
    /// The input device's channels.
    public var maximumInputNumberOfChannels: Int { AudioSessionHost.defaultDevices().input?.channels ?? 0 }
    public var isInputAvailable: Bool { AudioSessionHost.defaultDevices().input != nil }

    /// Whether another client's playback stream is playing on the server now.
    public var isOtherAudioPlaying: Bool { AudioSessionHost.otherAudioPlaying() }

    /// On Linux the same question as ``isOtherAudioPlaying``: there is no primary/secondary
    /// distinction between applications.
    public var secondaryAudioShouldBeSilencedHint: Bool { isOtherAudioPlaying }

    /// The default sink's volume, 0 … 1 (the server's percentage; above 100 % reads as 1).
    public var outputVolume: Float { Float(min(AudioSessionHost.outputVolume() ?? 0, 1)) }

    // MARK: Route

    /// The default sink and source as ports.
    public var currentRoute: AVAudioSessionRouteDescription { route(AudioSessionHost.defaultDevices()) }

    /// The route through `devices` (the session's default devices), as the category uses them.
    private func route(_ devices: (output: AudioSessionDevice?, input: AudioSessionDevice?)) -> AVAudioSessionRouteDescription {
        let category = self.category
        let plays = category != .record
        let records = category == .record || category == .playAndRecord || category == .multiRoute
        return AVAudioSessionRouteDescription(
            inputs: records ? devices.input.map { [Self.port($0, output: false)] } ?? [] : [],
            outputs: plays ? devices.output.map { [Self.port($0, output: true)] } ?? [] : [])
    }

    /// Apple's port type for a device of `kind`: a device the backend knows nothing more of is
    /// the built-in speaker (output) or microphone (input); a headset is headphones out and a
    /// wired microphone in; Bluetooth plays A2DP and records over HFP.
    package static func portType(kind: AudioDeviceKind, output: Bool) -> Port {
        switch kind {
        case .builtIn: output ? .builtInSpeaker : .builtInMic
        case .speaker: .builtInSpeaker
        case .microphone: .builtInMic
        case .headphones: .headphones
        case .headset: output ? .headphones : .headsetMic
        case .handset: .builtInReceiver
        case .line: output ? .lineOut : .lineIn
        case .hdmi: .HDMI
        case .usb: .usbAudio
        case .bluetoothA2DP: output ? .bluetoothA2DP : .bluetoothHFP
        case .bluetoothHFP: .bluetoothHFP
        case .car: .carAudio
        }
    }

    /// The inputs the server has: its sources (not the monitors of its sinks, except a monitor
    /// that is the default source).
    public var availableInputs: [AVAudioSessionPortDescription]? {
        AudioSessionHost.devices(output: false).map { Self.port($0, output: false) }
    }

    private var _preferredInput: AVAudioSessionPortDescription?

    public var preferredInput: AVAudioSessionPortDescription? { locked { _preferredInput } }

    /// Records this process's audio from `inPort` (one of ``availableInputs``) instead of the
    /// server's default source; `nil` returns to the default. Streams opened afterwards follow.
    public func setPreferredInput(_ inPort: AVAudioSessionPortDescription?) throws {
        if let inPort, !AudioSessionHost.devices(output: false).contains(where: { $0.name == inPort.uid }) {
            throw Self.error(.badParam, "\(inPort.uid) is not an available input")
        }
        routeCheck.lock()  // one step for the event thread's route checks, as an output override
        defer { routeCheck.unlock() }
        locked { _preferredInput = inPort }
        AudioSessionHost.setRouting(input: inPort?.uid, output: AudioSessionHost.routing.output)
        checkRoute(reason: .override)
    }

    /// `.speaker` plays this process's audio through a built-in speaker (the first sink whose port
    /// is a speaker) whatever the default sink; `.none` returns to the default. Apple allows it in
    /// playAndRecord only, and so does this.
    public func overrideOutputAudioPort(_ portOverride: PortOverride) throws {
        guard category == .playAndRecord else { throw Self.error(.badParam, "overriding the output needs playAndRecord") }
        var target: String?
        if portOverride == .speaker {
            guard let speaker = AudioSessionHost.devices(output: true).first(where: {
                Self.portType(kind: $0.kind, output: true) == .builtInSpeaker
            }) else { throw Self.error(.resourceNotAvailable, "the server has no speaker") }
            target = speaker.name
        }
        // The change and its check are one step for the event thread's own route checks: else it
        // could see the new route first (the reopened streams are server events) and post it as
        // a configuration change.
        routeCheck.lock()
        defer { routeCheck.unlock() }
        AudioSessionHost.setRouting(input: AudioSessionHost.routing.input, output: target)
        try reconfigureIfActive()
        checkRoute(reason: .override)
    }

    static func port(_ device: AudioSessionDevice, output: Bool) -> AVAudioSessionPortDescription {
        AVAudioSessionPortDescription(
            portType: portType(kind: device.kind, output: output), portName: device.description.isEmpty ? device.name : device.description,
            uid: device.name, channelCount: device.channels)
    }

    // MARK: Helpers

    private func locked<T>(_ body: () -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body()
    }

    static func error(_ code: ErrorCode, _ reason: String) -> NSError {
        NSError(domain: NSOSStatusErrorDomain, code: code.rawValue, userInfo: [NSLocalizedDescriptionKey: reason])
    }
}

/// Options of ``AVAudioSession/activate(options:completionHandler:)``; Apple defines none yet.
public struct AVAudioSessionActivationOptions: OptionSet, Sendable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }
}
