
// The types, constants and result codes of Apple's AudioQueue.h, with the names and values Apple
// gives them and the shapes Swift imports them as.

/// An audio queue. Apple imports the C `AudioQueueRef` as an `OpaquePointer`; so does this module.
public typealias AudioQueueRef = OpaquePointer
/// A timeline created by ``AudioQueueCreateTimeline(_:_:)``.
public typealias AudioQueueTimelineRef = OpaquePointer
public typealias AudioQueuePropertyID = UInt32
public typealias AudioQueueParameterID = UInt32
public typealias AudioQueueParameterValue = Float32

// `AudioQueueBuffer`, `AudioQueueParameterEvent` and `AudioQueueLevelMeterState` are declared in
// C (CAudioQueueTypes) with Apple's layout.

/// A pointer to an ``AudioQueueBuffer``, as Apple's `AudioQueueBufferRef`.
public typealias AudioQueueBufferRef = UnsafeMutablePointer<AudioQueueBuffer>

/// Called when a playback queue has finished with a buffer: refill it and enqueue it again.
public typealias AudioQueueOutputCallback = @convention(c) (
    _ inUserData: UnsafeMutableRawPointer?, _ inAQ: AudioQueueRef, _ inBuffer: AudioQueueBufferRef
) -> Void

/// Called when a recording queue has filled a buffer.
public typealias AudioQueueInputCallback = @convention(c) (
    _ inUserData: UnsafeMutableRawPointer?, _ inAQ: AudioQueueRef, _ inBuffer: AudioQueueBufferRef,
    _ inStartTime: UnsafePointer<AudioTimeStamp>, _ inNumberPacketDescriptions: UInt32,
    _ inPacketDescs: UnsafePointer<AudioStreamPacketDescription>?
) -> Void

/// Called when a property of a queue changes.
public typealias AudioQueuePropertyListenerProc = @convention(c) (
    _ inUserData: UnsafeMutableRawPointer?, _ inAQ: AudioQueueRef, _ inID: AudioQueuePropertyID
) -> Void

public typealias AudioQueueOutputCallbackBlock = (_ inAQ: AudioQueueRef, _ inBuffer: AudioQueueBufferRef) -> Void
public typealias AudioQueueInputCallbackBlock = (
    _ inAQ: AudioQueueRef, _ inBuffer: AudioQueueBufferRef, _ inStartTime: UnsafePointer<AudioTimeStamp>,
    _ inNumberPacketDescriptions: UInt32, _ inPacketDescs: UnsafePointer<AudioStreamPacketDescription>?
) -> Void

// MARK: Result codes

public let kAudioQueueErr_InvalidBuffer: OSStatus = -66687
public let kAudioQueueErr_BufferEmpty: OSStatus = -66686
public let kAudioQueueErr_DisposalPending: OSStatus = -66685
public let kAudioQueueErr_InvalidProperty: OSStatus = -66684
public let kAudioQueueErr_InvalidPropertySize: OSStatus = -66683
public let kAudioQueueErr_InvalidParameter: OSStatus = -66682
public let kAudioQueueErr_CannotStart: OSStatus = -66681
public let kAudioQueueErr_InvalidDevice: OSStatus = -66680
public let kAudioQueueErr_BufferInQueue: OSStatus = -66679
public let kAudioQueueErr_InvalidRunState: OSStatus = -66678
public let kAudioQueueErr_InvalidQueueType: OSStatus = -66677
public let kAudioQueueErr_Permissions: OSStatus = -66676
public let kAudioQueueErr_InvalidPropertyValue: OSStatus = -66675
public let kAudioQueueErr_PrimeTimedOut: OSStatus = -66674
public let kAudioQueueErr_CodecNotFound: OSStatus = -66673
public let kAudioQueueErr_InvalidCodecAccess: OSStatus = -66672
public let kAudioQueueErr_QueueInvalidated: OSStatus = -66671
public let kAudioQueueErr_TooManyTaps: OSStatus = -66670
public let kAudioQueueErr_InvalidTapContext: OSStatus = -66669
public let kAudioQueueErr_RecordUnderrun: OSStatus = -66668
public let kAudioQueueErr_InvalidTapType: OSStatus = -66667
public let kAudioQueueErr_BufferEnqueuedTwice: OSStatus = -66666
public let kAudioQueueErr_CannotStartYet: OSStatus = -66665
public let kAudioQueueErr_EnqueueDuringReset: OSStatus = -66632
public let kAudioQueueErr_InvalidOfflineMode: OSStatus = -66626

// MARK: Properties

public let kAudioQueueProperty_IsRunning: AudioQueuePropertyID = fourCC("aqrn")
public let kAudioQueueDeviceProperty_SampleRate: AudioQueuePropertyID = fourCC("aqsr")
public let kAudioQueueDeviceProperty_NumberChannels: AudioQueuePropertyID = fourCC("aqdc")
public let kAudioQueueProperty_CurrentDevice: AudioQueuePropertyID = fourCC("aqcd")
public let kAudioQueueProperty_MagicCookie: AudioQueuePropertyID = fourCC("aqmc")
public let kAudioQueueProperty_MaximumOutputPacketSize: AudioQueuePropertyID = fourCC("xops")
public let kAudioQueueProperty_StreamDescription: AudioQueuePropertyID = fourCC("aqft")
public let kAudioQueueProperty_ChannelLayout: AudioQueuePropertyID = fourCC("aqcl")
public let kAudioQueueProperty_EnableLevelMetering: AudioQueuePropertyID = fourCC("aqme")
public let kAudioQueueProperty_CurrentLevelMeter: AudioQueuePropertyID = fourCC("aqmv")
public let kAudioQueueProperty_CurrentLevelMeterDB: AudioQueuePropertyID = fourCC("aqmd")
public let kAudioQueueProperty_DecodeBufferSizeFrames: AudioQueuePropertyID = fourCC("dcbf")
public let kAudioQueueProperty_ConverterError: AudioQueuePropertyID = fourCC("qcve")
/// Whether a compressed queue may or must use a hardware codec (UInt32, one of the
/// `kAudioQueueHardwareCodecPolicy_…` values). Linux machines have no hardware audio codecs the
/// queue could use: every policy but `UseHardwareOnly` decodes in software, and with
/// `UseHardwareOnly` a compressed queue cannot start or prime (`kAudioQueueErr_InvalidCodecAccess`).
public let kAudioQueueProperty_HardwareCodecPolicy: AudioQueuePropertyID = fourCC("aqcp")
/// Playback through a time-pitch processor (UInt32, 0 or 1; output queues, set while stopped):
/// `kAudioQueueParam_PlayRate` (0.5…2) and `kAudioQueueParam_Pitch` (−2400…2400 cents) then
/// apply. The processing happens as buffers are enqueued (libsonic), so a change of rate or
/// pitch is heard after the buffers already enqueued; what the processor still holds when the
/// queue stops (a few ms) is not played.
public let kAudioQueueProperty_EnableTimePitch: AudioQueuePropertyID = fourCC("q_tp")
/// The time-pitch algorithm (UInt32): Spectral (the default, as on macOS) and TimeDomain keep the
/// pitch when the rate changes (both are libsonic's overlap-add here; Apple's pitch parameter works
/// with Spectral only), Varispeed changes pitch with rate as tape does.
public let kAudioQueueProperty_TimePitchAlgorithm: AudioQueuePropertyID = fourCC("qtpa")
/// Bypasses the time-pitch processor (UInt32, 0 or 1): audio plays at rate 1 and its own pitch.
public let kAudioQueueProperty_TimePitchBypass: AudioQueuePropertyID = fourCC("qtpb")
public let kAudioQueueTimePitchAlgorithm_Spectral: UInt32 = fourCC("spec")
public let kAudioQueueTimePitchAlgorithm_TimeDomain: UInt32 = fourCC("tido")
public let kAudioQueueTimePitchAlgorithm_Varispeed: UInt32 = fourCC("vspd")
/// Deprecated by Apple (iOS 13); accepted, and run as TimeDomain.
public let kAudioQueueTimePitchAlgorithm_LowQualityZeroLatency: UInt32 = fourCC("lqzl")
public let kAudioQueueHardwareCodecPolicy_Default: UInt32 = 0
public let kAudioQueueHardwareCodecPolicy_UseSoftwareOnly: UInt32 = 1
public let kAudioQueueHardwareCodecPolicy_UseHardwareOnly: UInt32 = 2
public let kAudioQueueHardwareCodecPolicy_PreferSoftware: UInt32 = 3
public let kAudioQueueHardwareCodecPolicy_PreferHardware: UInt32 = 4

// MARK: Parameters

/// Playback volume, 0…1 (linear gain).
public let kAudioQueueParam_Volume: AudioQueueParameterID = 1
public let kAudioQueueParam_PlayRate: AudioQueueParameterID = 2
public let kAudioQueueParam_Pitch: AudioQueueParameterID = 3
/// Seconds over which a volume change ramps.
public let kAudioQueueParam_VolumeRampTime: AudioQueueParameterID = 4
/// Stereo position, −1 (left) … 1 (right).
public let kAudioQueueParam_Pan: AudioQueueParameterID = 13
