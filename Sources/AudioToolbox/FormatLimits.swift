import CoreAudioTypes

/// The bounds a stream description must keep before any of its fields reaches arithmetic or
/// FFmpeg. Files, converters and queues take descriptions from headers and from callers; a value
/// outside these bounds is no real audio, and refusing it with Apple's "unsupported format" status
/// keeps every later conversion (`Int32(…)` for FFmpeg, `Int64(…)` of a frame count scaled by a
/// rate ratio) inside its type.
enum FormatLimits {
    /// 1 Hz … 10 MHz: every real file, and far beyond (a rate ratio stays within 10^7).
    static let sampleRates: ClosedRange<Double> = 1...10_000_000
    /// Channels in one stream (CAF and AIFF allow more than the converters' 64 do).
    static let channels: ClosedRange<UInt32> = 1...1024
    /// Bits of one sample: a 64-bit float at most.
    static let bitsPerChannel: ClosedRange<UInt32> = 0...64
    /// Bytes per packet or frame, frames per packet: 16 Mi, so products of two stay far from overflow.
    static let packetFields: ClosedRange<UInt32> = 0...(1 << 24)

    /// Checks `asbd` against the limits; `status` is the caller's layer's "unsupported format" code.
    static func check(_ asbd: AudioStreamBasicDescription, status: OSStatus) throws(AudioFailure) {
        guard asbd.mSampleRate.isFinite, sampleRates.contains(asbd.mSampleRate) else {
            throw AudioFailure(status, "sample rate \(asbd.mSampleRate) is not valid")
        }
        guard channels.contains(asbd.mChannelsPerFrame) else {
            throw AudioFailure(status, "\(asbd.mChannelsPerFrame) channels is not valid")
        }
        guard bitsPerChannel.contains(asbd.mBitsPerChannel) else {
            throw AudioFailure(status, "\(asbd.mBitsPerChannel) bits per channel is not valid")
        }
        guard packetFields.contains(asbd.mBytesPerPacket), packetFields.contains(asbd.mFramesPerPacket),
            packetFields.contains(asbd.mBytesPerFrame)
        else {
            throw AudioFailure(
                status,
                "packets of \(asbd.mBytesPerPacket) bytes / \(asbd.mFramesPerPacket) frames, frames of \(asbd.mBytesPerFrame) bytes are not valid")
        }
    }
}

extension FixedWidthInteger {
    /// `value` rounded toward zero and clamped to this type's range; NaN is 0. For frame counts
    /// scaled by a rate ratio, where a trap on overflow would stop the process.
    init(saturating value: Double) {
        if value.isNaN {
            self = 0
        } else if value >= Double(Self.max) {
            self = Self.max
        } else if value <= Double(Self.min) {
            self = Self.min
        } else {
            self.init(value)
        }
    }

    /// `self × other`, clamped to this type's range.
    func saturatingMultiplied(by other: Self) -> Self {
        let (product, overflow) = multipliedReportingOverflow(by: other)
        guard overflow else { return product }
        return (self < 0) == (other < 0) ? Self.max : Self.min
    }
}
