public import Foundation
import Synchronization

/// The app's audio: record permission and input mute (iOS 17's AVAudioApplication).
///
/// Record permission on Linux: the sound server decides who may capture. `.undetermined` until
/// the first request; a request opens (and closes at once) a capture stream on the default source:
/// `.granted` when the server lets this client capture, `.denied` when it refuses (an access
/// rule, a missing or unusable source). Without a server the permission stays `.undetermined` and
/// the request answers `false`. Nobody is asked: Linux desktops have no permission prompt for
/// sound servers.
public final class AVAudioApplication: NSObject, @unchecked Sendable {
    public static let shared = AVAudioApplication()

    public enum recordPermission: Int, Sendable {
        case undetermined = 0x756E_6474  // 'undt'
        case denied = 0x6465_6E79  // 'deny'
        case granted = 0x6772_6E74  // 'grnt'
    }

    private let state = Mutex<recordPermission>(.undetermined)

    private override init() {}

    public var recordPermission: AVAudioApplication.recordPermission { state.withLock { $0 } }

    /// Checks with the server, off the caller's thread, and answers on a background queue.
    public static func requestRecordPermission(completionHandler response: @escaping (Bool) -> Void) {
        // The handler is not required to be Sendable (Apple's is not); it is called once, on
        // one background queue, and nothing else touches it.
        let handler = CompletionHandler(response)
        DispatchQueue.global().async { handler.body(shared.check() == .granted) }
    }

    /// Checks with the server, off the caller's task; `true` when this process may record.
    public static func requestRecordPermission() async -> Bool {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: shared.check() == .granted) }
        }
    }

    /// Posted when the app's input mute state changes (``setInputMuted(_:)``); the user info's
    /// ``muteStateKey`` holds the new state as an `NSNumber` holding a `Bool`.
    public static let inputMuteStateChangeNotification = Notification.Name("AVAudioApplicationInputMuteStateChangeNotification")
    /// The key of the new mute state in ``inputMuteStateChangeNotification``'s user info.
    public static let muteStateKey = "AVAudioApplicationMuteStateKey"

    /// Calls `inputMuteHandler` when the system mutes or unmutes the input: here the default
    /// input device's mute on the sound server (the desktop's microphone switch, a headset
    /// button, `pactl set-source-mute`), which this app does not control. The handler gets the
    /// new state and returns whether the app takes it: `true` sets the app's own input mute to it
    /// (``isInputMuted``, with ``inputMuteStateChangeNotification``), `false` leaves the app's as
    /// it is. It runs on the device API's notification thread. `nil` removes it.
    public func setInputMuteStateChangeHandler(_ inputMuteHandler: ((Bool) -> Bool)?) throws {
        try muteFollower.withLock { follower in
            follower?.stop()
            follower = nil
            guard let inputMuteHandler else { return }
            let made = InputMuteFollower(CompletionHandler(inputMuteHandler)) { [unowned self] muted in try? self.setInputMuted(muted) }
            try made.start()
            follower = made
        }
    }

    private let muteFollower = Mutex<InputMuteFollower?>(nil)

    @discardableResult
    func check() -> AVAudioApplication.recordPermission {
        let allowed = AudioSessionHost.checkCapture()
        return state.withLock { permission in
            if let allowed { permission = allowed ? .granted : .denied }
            return permission
        }
    }

    /// Whether the app's input is muted: recording queues (and recorders) then deliver silence.
    public var isInputMuted: Bool { AudioSessionIsInputMuted() }

    public func setInputMuted(_ muted: Bool) throws {
        if AudioSessionExchangeInputMuted(muted) != muted {
            NotificationCenter.default.post(
                name: Self.inputMuteStateChangeNotification, object: self, userInfo: [Self.muteStateKey: NSNumber(value: muted)])
        }
    }
}

/// A completion handler Apple's API does not require to be Sendable, carried to the one
/// background queue that calls it, once; nothing else touches it.
final class CompletionHandler<Body>: @unchecked Sendable {
    let body: Body
    init(_ body: Body) { self.body = body }
}

extension AVAudioSession {
    /// The app's record permission (deprecated by Apple in favour of ``AVAudioApplication``).
    public var recordPermission: RecordPermission {
        switch AVAudioApplication.shared.recordPermission {
        case .undetermined: .undetermined
        case .denied: .denied
        case .granted: .granted
        }
    }

    /// Asks the server whether this process may record; see ``AVAudioApplication``.
    public func requestRecordPermission(_ response: @escaping (Bool) -> Void) {
        AVAudioApplication.requestRecordPermission(completionHandler: response)
    }
}

/// Follows the default input device's mute on the server for
/// ``AVAudioApplication/setInputMuteStateChangeHandler(_:)``: a listener on the device's mute, moved
/// when the default input changes.
final class InputMuteFollower: @unchecked Sendable {
    private let handler: CompletionHandler<(Bool) -> Bool>
    private let apply: @Sendable (Bool) -> Void
    private let lock = NSLock()
    private var device = kAudioObjectUnknown
    private var muted: Bool?
    private var stopped = false
    private let queue = DispatchQueue(label: "AVAudioApplication input mute")
    private static let system = AudioObjectID(kAudioObjectSystemObject)
    private var defaultInput = AudioObjectPropertyAddress(
        mSelector: kAudioHardwarePropertyDefaultInputDevice, mScope: kAudioObjectPropertyScopeGlobal, mElement: kAudioObjectPropertyElementMain)
    private var mute = AudioObjectPropertyAddress(
        mSelector: kAudioDevicePropertyMute, mScope: kAudioObjectPropertyScopeInput, mElement: kAudioObjectPropertyElementMain)
    private var listener: AudioObjectPropertyListenerBlock!

    init(_ handler: CompletionHandler<(Bool) -> Bool>, apply: @escaping @Sendable (Bool) -> Void) {
        self.handler = handler
        self.apply = apply
    }

    func start() throws {
        listener = { [weak self] _, _ in self?.changed() }
        guard AudioObjectAddPropertyListenerBlock(Self.system, &defaultInput, queue, listener) == noErr else {
            throw NSError(domain: NSOSStatusErrorDomain, code: Int(kAudioHardwareNotRunningError),
                          userInfo: [NSLocalizedDescriptionKey: "the sound server's input devices cannot be followed"])
        }
        queue.sync { retarget() }
    }

    func stop() {
        queue.sync {
            stopped = true
            AudioObjectRemovePropertyListenerBlock(Self.system, &defaultInput, queue, listener)
            if device != kAudioObjectUnknown { AudioObjectRemovePropertyListenerBlock(device, &mute, queue, listener) }
        }
    }

    /// On `queue`: listens to the current default input's mute.
    private func retarget() {
        var id = kAudioObjectUnknown
        var size = UInt32(MemoryLayout<AudioObjectID>.size)
        AudioObjectGetPropertyData(Self.system, &defaultInput, 0, nil, &size, &id)
        guard id != device else { return }
        if device != kAudioObjectUnknown { AudioObjectRemovePropertyListenerBlock(device, &mute, queue, listener) }
        device = id
        muted = currentMute()
        if id != kAudioObjectUnknown { AudioObjectAddPropertyListenerBlock(id, &mute, queue, listener) }
    }

    private func currentMute() -> Bool? {
        var value: UInt32 = 0
        var size = UInt32(4)
        guard device != kAudioObjectUnknown, AudioObjectGetPropertyData(device, &mute, 0, nil, &size, &value) == noErr else { return nil }
        return value != 0
    }

    /// On `queue`: the default input or its mute changed.
    private func changed() {
        guard !stopped else { return }
        retarget()
        guard let now = currentMute(), now != muted else { return }
        muted = now
        if handler.body(now) { apply(now) }
    }
}
