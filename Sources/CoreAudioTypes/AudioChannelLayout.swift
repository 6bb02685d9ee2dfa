/// A channel layout tag: the layout in the high 16 bits, the channel count in the low 16.
public typealias AudioChannelLayoutTag = UInt32
/// A channel's role (left, right, center…).
public typealias AudioChannelLabel = UInt32

public let kAudioChannelLayoutTag_UseChannelDescriptions: AudioChannelLayoutTag = (0 << 16) | 0
public let kAudioChannelLayoutTag_UseChannelBitmap: AudioChannelLayoutTag = (1 << 16) | 0
public let kAudioChannelLayoutTag_Mono: AudioChannelLayoutTag = (100 << 16) | 1
public let kAudioChannelLayoutTag_Stereo: AudioChannelLayoutTag = (101 << 16) | 2
public let kAudioChannelLayoutTag_StereoHeadphones: AudioChannelLayoutTag = (102 << 16) | 2
public let kAudioChannelLayoutTag_MatrixStereo: AudioChannelLayoutTag = (103 << 16) | 2
public let kAudioChannelLayoutTag_Quadraphonic: AudioChannelLayoutTag = (108 << 16) | 4
public let kAudioChannelLayoutTag_Pentagonal: AudioChannelLayoutTag = (109 << 16) | 5
public let kAudioChannelLayoutTag_Hexagonal: AudioChannelLayoutTag = (110 << 16) | 6
public let kAudioChannelLayoutTag_Octagonal: AudioChannelLayoutTag = (111 << 16) | 8
public let kAudioChannelLayoutTag_MPEG_3_0_A: AudioChannelLayoutTag = (113 << 16) | 3
public let kAudioChannelLayoutTag_MPEG_4_0_A: AudioChannelLayoutTag = (115 << 16) | 4
public let kAudioChannelLayoutTag_MPEG_5_0_A: AudioChannelLayoutTag = (117 << 16) | 5
public let kAudioChannelLayoutTag_MPEG_5_1_A: AudioChannelLayoutTag = (121 << 16) | 6
public let kAudioChannelLayoutTag_MPEG_6_1_A: AudioChannelLayoutTag = (125 << 16) | 7
public let kAudioChannelLayoutTag_MPEG_7_1_A: AudioChannelLayoutTag = (126 << 16) | 8
public let kAudioChannelLayoutTag_DiscreteInOrder: AudioChannelLayoutTag = (147 << 16) | 0
public let kAudioChannelLayoutTag_Unknown: AudioChannelLayoutTag = 0xFFFF_0000

public let kAudioChannelLabel_Unknown: AudioChannelLabel = 0xFFFF_FFFF
public let kAudioChannelLabel_Unused: AudioChannelLabel = 0
public let kAudioChannelLabel_Left: AudioChannelLabel = 1
public let kAudioChannelLabel_Right: AudioChannelLabel = 2
public let kAudioChannelLabel_Center: AudioChannelLabel = 3
public let kAudioChannelLabel_LFEScreen: AudioChannelLabel = 4
public let kAudioChannelLabel_LeftSurround: AudioChannelLabel = 5
public let kAudioChannelLabel_RightSurround: AudioChannelLabel = 6
public let kAudioChannelLabel_Mono: AudioChannelLabel = 42

/// The number of channels a layout tag names (its low 16 bits), as Apple's inline function.
@inlinable
@discardableResult
public func AudioChannelLayoutTag_GetNumberOfChannels(_ inLayoutTag: AudioChannelLayoutTag) -> UInt32 {
    inLayoutTag & 0x0000_FFFF
}

// `AudioChannelLayout`, `AudioChannelDescription`, `AudioChannelBitmap` and `AudioChannelFlags`
// are declared in C (CCoreAudioTypes) with Apple's layout.
