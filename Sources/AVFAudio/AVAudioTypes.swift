import Foundation

// AVFAudio's plain types and settings keys, with Apple's names and values.

public typealias AVAudioFrameCount = UInt32
public typealias AVAudioPacketCount = UInt32
public typealias AVAudioChannelCount = UInt32
public typealias AVAudioFramePosition = Int64

/// The sample formats AVFAudio names; everything else is `.otherFormat`.
public enum AVAudioCommonFormat: UInt, Sendable {
    case otherFormat = 0
    case pcmFormatFloat32 = 1
    case pcmFormatFloat64 = 2
    case pcmFormatInt16 = 3
    case pcmFormatInt32 = 4
}

/// Encoder and sample rate converter quality.
public enum AVAudioQuality: Int, Sendable {
    case min = 0
    case low = 0x20
    case medium = 0x40
    case high = 0x60
    case max = 0x7F
}

// Settings keys (AVAudioSettings.h). The values are Apple's strings.
public let AVFormatIDKey = "AVFormatIDKey"
public let AVSampleRateKey = "AVSampleRateKey"
public let AVNumberOfChannelsKey = "AVNumberOfChannelsKey"
public let AVLinearPCMBitDepthKey = "AVLinearPCMBitDepthKey"
public let AVLinearPCMIsBigEndianKey = "AVLinearPCMIsBigEndianKey"
public let AVLinearPCMIsFloatKey = "AVLinearPCMIsFloatKey"
public let AVLinearPCMIsNonInterleaved = "AVLinearPCMIsNonInterleaved"
public let AVChannelLayoutKey = "AVChannelLayoutKey"
public let AVAudioFileTypeKey = "AVAudioFileTypeKey"
public let AVEncoderAudioQualityKey = "AVEncoderQualityKey"
public let AVEncoderAudioQualityForVBRKey = "AVEncoderQualityForVBRKey"
public let AVEncoderBitRateKey = "AVEncoderBitRateKey"
public let AVEncoderBitRatePerChannelKey = "AVEncoderBitRatePerChannelKey"
public let AVEncoderBitRateStrategyKey = "AVEncoderBitRateStrategyKey"
public let AVEncoderBitDepthHintKey = "AVEncoderBitDepthHintKey"
public let AVSampleRateConverterAlgorithmKey = "AVSampleRateConverterAlgorithmKey"
public let AVSampleRateConverterAudioQualityKey = "AVSampleRateConverterAudioQualityKey"

public let AVAudioBitRateStrategy_Constant = "AVAudioBitRateStrategy_Constant"
public let AVAudioBitRateStrategy_LongTermAverage = "AVAudioBitRateStrategy_LongTermAverage"
public let AVAudioBitRateStrategy_VariableConstrained = "AVAudioBitRateStrategy_VariableConstrained"
public let AVAudioBitRateStrategy_Variable = "AVAudioBitRateStrategy_Variable"
public let AVSampleRateConverterAlgorithm_Normal = "AVSampleRateConverterAlgorithm_Normal"
public let AVSampleRateConverterAlgorithm_Mastering = "AVSampleRateConverterAlgorithm_Mastering"
public let AVSampleRateConverterAlgorithm_MinimumPhase = "AVSampleRateConverterAlgorithm_MinimumPhase"

/// A settings value as a number: settings dictionaries hold `NSNumber`s on Apple's platforms and
/// Swift numbers when built in Swift; both are accepted, and an ``AVAudioQuality`` for its raw value.
func settingsNumber(_ value: Any?) -> Double? {
    switch value {
    case let v as Double: v
    case let v as Float: Double(v)
    case let v as Int: Double(v)
    case let v as UInt32: Double(v)
    case let v as Int32: Double(v)
    case let v as UInt: Double(v)
    case let v as Int64: Double(v)
    case let v as UInt64: Double(v)
    case let v as Bool: v ? 1 : 0
    case let v as NSNumber: v.doubleValue
    case let v as AVAudioQuality: Double(v.rawValue)
    default: nil
    }
}

/// An `NSError` in `NSOSStatusErrorDomain` with `status` as its code, as AVFAudio throws, and the
/// reason in its description.
func statusError(_ status: OSStatus, _ reason: String) -> NSError {
    NSError(domain: NSOSStatusErrorDomain, code: Int(status), userInfo: [NSLocalizedDescriptionKey: "\(reason) (\(status.osStatusDescription))"])
}
