@_exported public import CCoreAudioTypes

// `AudioStreamBasicDescription`, `AudioStreamPacketDescription`, `AudioValueRange` and
// `AudioClassDescription` are declared in C (CCoreAudioTypes) with Apple's layout, and imported
// with Swift's zero and memberwise initializers, as on Apple's platforms.

/// `kAudioStreamAnyRate`: a sample rate of zero means "any rate" where a description is a request.
public let kAudioStreamAnyRate: Float64 = 0

/// A four-character type code.
public typealias OSType = FourCharCode
