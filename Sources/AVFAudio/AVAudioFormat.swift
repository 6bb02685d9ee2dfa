public import Foundation

/// An audio format: Apple's `AudioStreamBasicDescription` with an optional channel layout and
/// magic cookie. The *standard* format is deinterleaved 32-bit float.
public final class AVAudioFormat: NSObject, @unchecked Sendable {
    private let asbd: UnsafeMutablePointer<AudioStreamBasicDescription>
    public let channelLayout: AVAudioChannelLayout?
    /// The codec's magic cookie, for compressed formats.
    public var magicCookie: Data?

    /// `nil` for descriptions no format can have (zero rate, zero channels, inconsistent linear PCM).
    public init?(streamDescription source: UnsafePointer<AudioStreamBasicDescription>, channelLayout layout: AVAudioChannelLayout?) {
        let d = source.pointee
        guard d.mSampleRate >= 0, d.mSampleRate.isFinite, d.mChannelsPerFrame > 0 else { return nil }
        if d.mFormatID == kAudioFormatLinearPCM {
            guard d.mBitsPerChannel > 0, d.mBytesPerFrame > 0, d.mFramesPerPacket == 1 else { return nil }
        }
        if let layout, layout.channelCount != d.mChannelsPerFrame { return nil }
        self.asbd = .allocate(capacity: 1)
        self.asbd.initialize(to: d)
        channelLayout = layout ?? (d.mChannelsPerFrame <= 2 ? AVAudioChannelLayout(layoutTag: d.mChannelsPerFrame == 1 ? kAudioChannelLayoutTag_Mono : kAudioChannelLayoutTag_Stereo) : nil)
        super.init()
    }

    public convenience init?(streamDescription source: UnsafePointer<AudioStreamBasicDescription>) {
        self.init(streamDescription: source, channelLayout: nil)
    }

    /// Deinterleaved 32-bit float at `sampleRate` with `channels` channels.
    public convenience init?(standardFormatWithSampleRate sampleRate: Double, channels: AVAudioChannelCount) {
        self.init(commonFormat: .pcmFormatFloat32, sampleRate: sampleRate, channels: channels, interleaved: false)
    }

    public convenience init(standardFormatWithSampleRate sampleRate: Double, channelLayout layout: AVAudioChannelLayout) {
        self.init(commonFormat: .pcmFormatFloat32, sampleRate: sampleRate, interleaved: false, channelLayout: layout)
    }

    /// `nil` for more than two channels, as Apple's: those need a channel layout
    /// (``init(commonFormat:sampleRate:interleaved:channelLayout:)``).
    public convenience init?(commonFormat format: AVAudioCommonFormat, sampleRate: Double, channels: AVAudioChannelCount, interleaved: Bool) {
        guard channels > 0, channels <= 2, let pcm = Self.pcm(format, sampleRate: sampleRate, channels: channels, interleaved: interleaved) else { return nil }
        var d = pcm
        self.init(streamDescription: &d, channelLayout: nil)
    }

    /// A common format with any number of channels, with `layout` where there is one (a file's
    /// processing format: Apple's has the file's channel count whatever it is).
    static func common(_ format: AVAudioCommonFormat, sampleRate: Double, channels: AVAudioChannelCount, interleaved: Bool, layout: AVAudioChannelLayout?) -> AVAudioFormat? {
        guard channels > 0, var d = pcm(format, sampleRate: sampleRate, channels: channels, interleaved: interleaved) else { return nil }
        return AVAudioFormat(streamDescription: &d, channelLayout: layout?.channelCount == channels ? layout : nil)
    }

    public convenience init(commonFormat format: AVAudioCommonFormat, sampleRate: Double, interleaved: Bool, channelLayout layout: AVAudioChannelLayout) {
        var d = Self.pcm(format, sampleRate: sampleRate, channels: layout.channelCount, interleaved: interleaved)
            ?? Self.pcm(.pcmFormatFloat32, sampleRate: sampleRate, channels: layout.channelCount, interleaved: interleaved)!
        self.init(streamDescription: &d, channelLayout: layout)!
    }

    /// A format from a settings dictionary (`AVFormatIDKey`, `AVSampleRateKey`,
    /// `AVNumberOfChannelsKey`, the `AVLinearPCM…` keys, `AVChannelLayoutKey`); `nil` when the keys
    /// do not describe a format.
    public convenience init?(settings: [String: Any]) {
        let id = settingsNumber(settings[AVFormatIDKey]).map { AudioFormatID($0) } ?? kAudioFormatLinearPCM
        guard let rate = settingsNumber(settings[AVSampleRateKey]), rate > 0 else { return nil }
        var layout: AVAudioChannelLayout?
        if let data = settings[AVChannelLayoutKey] as? Data, data.count >= MemoryLayout<AudioChannelLayout>.size {
            layout = data.withUnsafeBytes { AVAudioChannelLayout(layout: $0.baseAddress!.assumingMemoryBound(to: AudioChannelLayout.self)) }
        }
        guard let channels = settingsNumber(settings[AVNumberOfChannelsKey]).map({ UInt32($0) }) ?? layout?.channelCount, channels > 0 else { return nil }
        var d: AudioStreamBasicDescription
        if id == kAudioFormatLinearPCM {
            let bits = UInt32(settingsNumber(settings[AVLinearPCMBitDepthKey]) ?? 16)
            let float = (settingsNumber(settings[AVLinearPCMIsFloatKey]) ?? 0) != 0
            let big = (settingsNumber(settings[AVLinearPCMIsBigEndianKey]) ?? 0) != 0
            let nonInterleaved = (settingsNumber(settings[AVLinearPCMIsNonInterleaved]) ?? 0) != 0
            guard [8, 16, 24, 32, 64].contains(bits), !(float && bits < 32), !(!float && bits == 64) else { return nil }
            var flags: AudioFormatFlags = kAudioFormatFlagIsPacked | (float ? kAudioFormatFlagIsFloat : (bits > 8 ? kAudioFormatFlagIsSignedInteger : 0))
            if big && bits > 8 { flags |= kAudioFormatFlagIsBigEndian }
            if nonInterleaved { flags |= kAudioFormatFlagIsNonInterleaved }
            let frameBytes = bits / 8 * (nonInterleaved ? 1 : channels)
            d = AudioStreamBasicDescription(
                mSampleRate: rate, mFormatID: id, mFormatFlags: flags, mBytesPerPacket: frameBytes, mFramesPerPacket: 1,
                mBytesPerFrame: frameBytes, mChannelsPerFrame: channels, mBitsPerChannel: bits, mReserved: 0)
        } else {
            d = AudioStreamBasicDescription(
                mSampleRate: rate, mFormatID: id, mFormatFlags: 0, mBytesPerPacket: 0, mFramesPerPacket: 0, mBytesPerFrame: 0,
                mChannelsPerFrame: channels, mBitsPerChannel: 0, mReserved: 0)
            var size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
            _ = AudioFormatGetProperty(kAudioFormatProperty_FormatInfo, 0, nil, &size, &d)
        }
        self.init(streamDescription: &d, channelLayout: layout)
    }

    deinit { asbd.deallocate() }

    static func pcm(_ format: AVAudioCommonFormat, sampleRate: Double, channels: UInt32, interleaved: Bool) -> AudioStreamBasicDescription? {
        let (bits, flags): (UInt32, AudioFormatFlags)
        switch format {
        case .pcmFormatFloat32: (bits, flags) = (32, kAudioFormatFlagIsFloat)
        case .pcmFormatFloat64: (bits, flags) = (64, kAudioFormatFlagIsFloat)
        case .pcmFormatInt16: (bits, flags) = (16, kAudioFormatFlagIsSignedInteger)
        case .pcmFormatInt32: (bits, flags) = (32, kAudioFormatFlagIsSignedInteger)
        case .otherFormat: return nil
        }
        let frameBytes = bits / 8 * (interleaved ? channels : 1)
        return AudioStreamBasicDescription(
            mSampleRate: sampleRate, mFormatID: kAudioFormatLinearPCM,
            mFormatFlags: flags | kAudioFormatFlagsNativeEndian | kAudioFormatFlagIsPacked | (interleaved ? 0 : kAudioFormatFlagIsNonInterleaved),
            mBytesPerPacket: frameBytes, mFramesPerPacket: 1, mBytesPerFrame: frameBytes, mChannelsPerFrame: channels, mBitsPerChannel: bits,
            mReserved: 0)
    }

    public var streamDescription: UnsafePointer<AudioStreamBasicDescription> { UnsafePointer(asbd) }
    public var sampleRate: Double { asbd.pointee.mSampleRate }
    public var channelCount: AVAudioChannelCount { asbd.pointee.mChannelsPerFrame }
    /// Whether the description says interleaved: `kAudioFormatFlagIsNonInterleaved` is clear. As
    /// Apple's, this reads the flag even for one channel, where both layouts are the same bytes:
    /// the standard mono format is not interleaved, a mono format made with `interleaved: true`
    /// is (the two still compare equal, see ``isEqual(_:)``).
    public var isInterleaved: Bool { asbd.pointee.mFormatFlags & kAudioFormatFlagIsNonInterleaved == 0 }

    public var commonFormat: AVAudioCommonFormat {
        let d = asbd.pointee
        guard d.mFormatID == kAudioFormatLinearPCM, d.mFormatFlags & kAudioFormatFlagIsBigEndian == 0,
            d.mFormatFlags & kAudioFormatFlagIsPacked != 0 || d.mBitsPerChannel % 8 == 0
        else { return .otherFormat }
        let float = d.mFormatFlags & kAudioFormatFlagIsFloat != 0
        switch (float, d.mBitsPerChannel, d.mFormatFlags & kAudioFormatFlagIsSignedInteger != 0) {
        case (true, 32, _): return .pcmFormatFloat32
        case (true, 64, _): return .pcmFormatFloat64
        case (false, 16, true): return .pcmFormatInt16
        case (false, 32, true): return .pcmFormatInt32
        default: return .otherFormat
        }
    }

    /// Deinterleaved 32-bit float, native endian: the format of
    /// ``init(standardFormatWithSampleRate:channels:)``, for one channel as for two. A mono
    /// format made with `interleaved: true` is not standard, as on Apple's platforms, though the
    /// engine's nodes take it alike (one channel is the same bytes either way).
    public var isStandard: Bool { commonFormat == .pcmFormatFloat32 && !isInterleaved }

    public var settings: [String: Any] {
        let d = asbd.pointee
        // NSNumbers, as Apple's: `as? Int`, `as? UInt`, `as? NSNumber` all read them.
        var s: [String: Any] = [
            AVFormatIDKey: NSNumber(value: d.mFormatID), AVSampleRateKey: NSNumber(value: d.mSampleRate),
            AVNumberOfChannelsKey: NSNumber(value: d.mChannelsPerFrame),
        ]
        if d.mFormatID == kAudioFormatLinearPCM {
            s[AVLinearPCMBitDepthKey] = NSNumber(value: d.mBitsPerChannel)
            s[AVLinearPCMIsFloatKey] = NSNumber(value: d.mFormatFlags & kAudioFormatFlagIsFloat != 0)
            s[AVLinearPCMIsBigEndianKey] = NSNumber(value: d.mFormatFlags & kAudioFormatFlagIsBigEndian != 0)
            s[AVLinearPCMIsNonInterleaved] = NSNumber(value: !isInterleaved)
        }
        if let channelLayout, channelCount > 2 { s[AVChannelLayoutKey] = channelLayout.data }
        return s
    }

    /// Whether `object` is a functionally equivalent format, as Apple documents `isEqual:`: the
    /// same description once what cannot matter is set aside (one channel is interleaved and
    /// deinterleaved alike), and the same channel layout where there are more than two channels.
    public override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? AVAudioFormat else { return false }
        let a = asbd.pointee, b = other.asbd.pointee
        func flags(_ d: AudioStreamBasicDescription) -> AudioFormatFlags {
            d.mChannelsPerFrame == 1 ? d.mFormatFlags & ~kAudioFormatFlagIsNonInterleaved : d.mFormatFlags
        }
        guard a.mSampleRate == b.mSampleRate, a.mFormatID == b.mFormatID, flags(a) == flags(b),
            a.mBytesPerPacket == b.mBytesPerPacket, a.mFramesPerPacket == b.mFramesPerPacket, a.mBytesPerFrame == b.mBytesPerFrame,
            a.mChannelsPerFrame == b.mChannelsPerFrame, a.mBitsPerChannel == b.mBitsPerChannel
        else { return false }
        guard a.mChannelsPerFrame > 2 else { return true }
        return channelLayout == other.channelLayout
    }

    public override var hash: Int { Int(sampleRate) ^ Int(channelCount) << 20 ^ Int(asbd.pointee.mFormatID) }

    public override var description: String {
        let d = asbd.pointee
        var s = "<AVAudioFormat: \(d.mChannelsPerFrame) ch, \(Int(d.mSampleRate)) Hz"
        switch commonFormat {
        case .pcmFormatFloat32: s += ", Float32"
        case .pcmFormatFloat64: s += ", Float64"
        case .pcmFormatInt16: s += ", Int16"
        case .pcmFormatInt32: s += ", Int32"
        case .otherFormat: s += ", '\(d.mFormatID.fourCharCodeString)'"
        }
        if d.mFormatID == kAudioFormatLinearPCM && d.mChannelsPerFrame > 1 { s += isInterleaved ? ", interleaved" : ", deinterleaved" }
        return s + ">"
    }
}
