/// Flags that qualify an ``AudioFormatID``; for linear PCM they say float or integer, endianness,
/// packing and interleaving (CoreAudioBaseTypes.h).
public typealias AudioFormatFlags = UInt32

public let kAudioFormatFlagIsFloat: AudioFormatFlags = 1 << 0
public let kAudioFormatFlagIsBigEndian: AudioFormatFlags = 1 << 1
public let kAudioFormatFlagIsSignedInteger: AudioFormatFlags = 1 << 2
public let kAudioFormatFlagIsPacked: AudioFormatFlags = 1 << 3
public let kAudioFormatFlagIsAlignedHigh: AudioFormatFlags = 1 << 4
public let kAudioFormatFlagIsNonInterleaved: AudioFormatFlags = 1 << 5
public let kAudioFormatFlagIsNonMixable: AudioFormatFlags = 1 << 6
public let kAudioFormatFlagsAreAllClear: AudioFormatFlags = 0x8000_0000

public let kLinearPCMFormatFlagIsFloat: AudioFormatFlags = kAudioFormatFlagIsFloat
public let kLinearPCMFormatFlagIsBigEndian: AudioFormatFlags = kAudioFormatFlagIsBigEndian
public let kLinearPCMFormatFlagIsSignedInteger: AudioFormatFlags = kAudioFormatFlagIsSignedInteger
public let kLinearPCMFormatFlagIsPacked: AudioFormatFlags = kAudioFormatFlagIsPacked
public let kLinearPCMFormatFlagIsAlignedHigh: AudioFormatFlags = kAudioFormatFlagIsAlignedHigh
public let kLinearPCMFormatFlagIsNonInterleaved: AudioFormatFlags = kAudioFormatFlagIsNonInterleaved
public let kLinearPCMFormatFlagIsNonMixable: AudioFormatFlags = kAudioFormatFlagIsNonMixable
public let kLinearPCMFormatFlagsSampleFractionShift: AudioFormatFlags = 7
public let kLinearPCMFormatFlagsSampleFractionMask: AudioFormatFlags = 0x3F << kLinearPCMFormatFlagsSampleFractionShift
public let kLinearPCMFormatFlagsAreAllClear: AudioFormatFlags = kAudioFormatFlagsAreAllClear

public let kAppleLosslessFormatFlag_16BitSourceData: AudioFormatFlags = 1
public let kAppleLosslessFormatFlag_20BitSourceData: AudioFormatFlags = 2
public let kAppleLosslessFormatFlag_24BitSourceData: AudioFormatFlags = 3
public let kAppleLosslessFormatFlag_32BitSourceData: AudioFormatFlags = 4

/// The byte order of the machine: big-endian on big-endian hosts, `0` (little-endian) otherwise.
#if _endian(big)
public let kAudioFormatFlagsNativeEndian: AudioFormatFlags = kAudioFormatFlagIsBigEndian
#else
public let kAudioFormatFlagsNativeEndian: AudioFormatFlags = 0
#endif

/// Native-endian, packed 32-bit float: the format of most processing on Apple's platforms.
public let kAudioFormatFlagsNativeFloatPacked: AudioFormatFlags =
    kAudioFormatFlagIsFloat | kAudioFormatFlagsNativeEndian | kAudioFormatFlagIsPacked

/// Deprecated by Apple; kept so older code builds.
public let kAudioFormatFlagsCanonical: AudioFormatFlags =
    kAudioFormatFlagIsFloat | kAudioFormatFlagsNativeEndian | kAudioFormatFlagIsPacked
/// Deprecated by Apple; kept so older code builds.
public let kAudioFormatFlagsAudioUnitCanonical: AudioFormatFlags =
    kAudioFormatFlagIsFloat | kAudioFormatFlagsNativeEndian | kAudioFormatFlagIsPacked
    | kAudioFormatFlagIsNonInterleaved
