public import AVFAudio
import Foundation

/// How a player's or recorder's work ended, as its delegate heard it: whether it finished (and
/// successfully), and the decode or encode error reported before.
public final class Outcome: @unchecked Sendable {
    private let lock = NSLock()
    private var result: Bool?
    private var failure: String?

    public init() {}

    /// `nil` until the end; then whether it succeeded.
    public var finished: Bool? { lock.withLock { result } }
    /// The error the delegate heard, if any.
    public var error: String? { lock.withLock { failure } }

    fileprivate func finish(_ ok: Bool) { lock.withLock { result = ok } }
    fileprivate func fail(_ error: (any Error)?) { lock.withLock { failure = error.map { ($0 as NSError).localizedDescription } ?? "unknown" } }
}

extension Outcome: AVAudioPlayerDelegate {
    public nonisolated func audioPlayerDidFinishPlaying(_ player: AVAudioPlayer, successfully flag: Bool) { finish(flag) }
    public nonisolated func audioPlayerDecodeErrorDidOccur(_ player: AVAudioPlayer, error: (any Error)?) { fail(error) }
}

extension Outcome: AVAudioRecorderDelegate {
    public func audioRecorderDidFinishRecording(_ recorder: AVAudioRecorder, successfully flag: Bool) { finish(flag) }
    public func audioRecorderEncodeErrorDidOccur(_ recorder: AVAudioRecorder, error: (any Error)?) { fail(error) }
}
