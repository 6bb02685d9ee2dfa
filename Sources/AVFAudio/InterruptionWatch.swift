import Foundation

/// Calls `began` each time an audio session interruption begins: the player and the recorder
/// pause then, as on iOS. Stops watching when released.
final class InterruptionWatch: @unchecked Sendable {
    private var token: (any NSObjectProtocol)?

    init(_ began: @escaping @Sendable () -> Void) {
        token = NotificationCenter.default.addObserver(forName: AVAudioSession.interruptionNotification, object: nil, queue: nil) { note in
            guard let raw = note.userInfo?[AVAudioSessionInterruptionTypeKey] as? UInt,
                AVAudioSession.InterruptionType(rawValue: raw) == .began
            else { return }
            began()
        }
    }

    deinit { if let token { NotificationCenter.default.removeObserver(token) } }
}
