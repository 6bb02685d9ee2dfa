public import AudioToolbox
public import Foundation

/// A moment in an audio timeline: a host time (the monotonic clock, one tick a nanosecond on
/// Linux), a sample time at a sample rate, or both.
open class AVAudioTime: NSObject, @unchecked Sendable {
    public let hostTime: UInt64
    public let isHostTimeValid: Bool
    public let sampleTime: AVAudioFramePosition
    public let isSampleTimeValid: Bool
    public let sampleRate: Double
    public let audioTimeStamp: AudioTimeStamp

    public init(audioTimeStamp ts: UnsafePointer<AudioTimeStamp>, sampleRate: Double) {
        let s = ts.pointee
        isHostTimeValid = s.mFlags.contains(.hostTimeValid)
        isSampleTimeValid = s.mFlags.contains(.sampleTimeValid)
        hostTime = isHostTimeValid ? s.mHostTime : 0
        sampleTime = isSampleTimeValid ? AVAudioFramePosition(s.mSampleTime) : 0
        self.sampleRate = sampleRate
        audioTimeStamp = s
        super.init()
    }

    public init(hostTime: UInt64) {
        self.hostTime = hostTime
        isHostTimeValid = true
        sampleTime = 0
        isSampleTimeValid = false
        sampleRate = 0
        var s = AudioTimeStamp()
        s.mHostTime = hostTime
        s.mFlags = .hostTimeValid
        audioTimeStamp = s
        super.init()
    }

    public init(sampleTime: AVAudioFramePosition, atRate sampleRate: Double) {
        hostTime = 0
        isHostTimeValid = false
        self.sampleTime = sampleTime
        isSampleTimeValid = true
        self.sampleRate = sampleRate
        var s = AudioTimeStamp()
        s.mSampleTime = Double(sampleTime)
        s.mFlags = .sampleTimeValid
        audioTimeStamp = s
        super.init()
    }

    public init(hostTime: UInt64, sampleTime: AVAudioFramePosition, atRate sampleRate: Double) {
        self.hostTime = hostTime
        isHostTimeValid = true
        self.sampleTime = sampleTime
        isSampleTimeValid = true
        self.sampleRate = sampleRate
        var s = AudioTimeStamp()
        s.mSampleTime = Double(sampleTime)
        s.mHostTime = hostTime
        s.mFlags = [.sampleTimeValid, .hostTimeValid]
        audioTimeStamp = s
        super.init()
    }

    /// The host time `seconds` from the host clock's zero.
    open class func hostTime(forSeconds seconds: TimeInterval) -> UInt64 { UInt64(max(seconds, 0) * 1e9) }

    /// The seconds host time `hostTime` is from the host clock's zero.
    open class func seconds(forHostTime hostTime: UInt64) -> TimeInterval { Double(hostTime) / 1e9 }

    /// This time with what it lacks (its host or sample time) worked out from `anchor`, a time
    /// that has both; nil when neither this time nor the anchor allows it.
    open func extrapolateTime(fromAnchor anchor: AVAudioTime) -> AVAudioTime? {
        guard anchor.isHostTimeValid, anchor.isSampleTimeValid, anchor.sampleRate > 0 else { return nil }
        let rate = sampleRate > 0 ? sampleRate : anchor.sampleRate
        if isSampleTimeValid && isHostTimeValid { return self }
        if isSampleTimeValid {
            // A sample time at another rate is first brought to the anchor's.
            let at = Double(sampleTime) * anchor.sampleRate / rate
            let host = Double(anchor.hostTime) + (at - Double(anchor.sampleTime)) / anchor.sampleRate * 1e9
            return AVAudioTime(hostTime: UInt64(max(host, 0)), sampleTime: sampleTime, atRate: rate)
        }
        if isHostTimeValid {
            let delta = (Double(hostTime) - Double(anchor.hostTime)) / 1e9
            let sample = (Double(anchor.sampleTime) + delta * anchor.sampleRate) * rate / anchor.sampleRate
            return AVAudioTime(hostTime: hostTime, sampleTime: AVAudioFramePosition(sample.rounded()), atRate: rate)
        }
        return nil
    }

    open override var description: String {
        "<AVAudioTime host \(isHostTimeValid ? String(hostTime) : "-") sample \(isSampleTimeValid ? String(sampleTime) : "-") @ \(sampleRate) Hz>"
    }
}
