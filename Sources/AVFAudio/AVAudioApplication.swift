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
    public static func requestRecordPermission(completionHandler response: @escaping @Sendable (Bool) -> Void) {
        DispatchQueue.global().async {
            let result = shared.check()
            response(result == .granted)
        }
    }

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
        AudioSessionSetInputMuted(muted)
    }
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
    public func requestRecordPermission(_ response: @escaping @Sendable (Bool) -> Void) {
        AVAudioApplication.requestRecordPermission(completionHandler: response)
    }
}
