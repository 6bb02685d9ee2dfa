import AudioHAL
import CoreAudioTypes

/// What an `AudioChannelLayout` (as bytes) says each channel is: its label, channel by channel.
/// Internal: shared by the queue's and ExtAudioFile's channel layout properties.
enum ChannelLayoutLabels {
    /// Why a layout cannot be used.
    enum Problem: Error {
        /// Fewer bytes than the layout's own fields say.
        case tooShort
        /// A tag this library cannot resolve into channels.
        case unknownTag
    }

    // Apple's labels beyond CoreAudioTypes' short list (CoreAudioBaseTypes.h).
    static let leftCenter: AudioChannelLabel = 7
    static let rightCenter: AudioChannelLabel = 8
    static let centerSurround: AudioChannelLabel = 9
    static let leftSurroundDirect: AudioChannelLabel = 10
    static let rightSurroundDirect: AudioChannelLabel = 11
    static let topCenterSurround: AudioChannelLabel = 12
    static let rearSurroundLeft: AudioChannelLabel = 33
    static let rearSurroundRight: AudioChannelLabel = 34
    static let leftTotal: AudioChannelLabel = 38
    static let rightTotal: AudioChannelLabel = 39
    static let headphonesLeft: AudioChannelLabel = 301
    static let headphonesRight: AudioChannelLabel = 302
    static let discrete0: AudioChannelLabel = 1 << 16

    /// The channels' labels of the layout in `bytes`, in channel order.
    static func labels(_ bytes: [UInt8]) throws(Problem) -> [AudioChannelLabel] {
        guard bytes.count >= 12 else { throw .tooShort }
        func u32(_ at: Int) -> UInt32 { bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: at, as: UInt32.self) } }
        let tag = u32(0)
        let L = kAudioChannelLabel_Left, R = kAudioChannelLabel_Right, C = kAudioChannelLabel_Center
        let LFE = kAudioChannelLabel_LFEScreen, Ls = kAudioChannelLabel_LeftSurround, Rs = kAudioChannelLabel_RightSurround
        switch tag {
        case kAudioChannelLayoutTag_UseChannelDescriptions:
            let n = Int(u32(8))
            guard n <= 64, bytes.count >= 12 + n * 20 else { throw .tooShort }
            return (0..<n).map { u32(12 + $0 * 20) }
        case kAudioChannelLayoutTag_UseChannelBitmap:
            let bitmap = u32(4)
            // Bits 0…11 are labels 1…12 (Left … TopCenterSurround).
            guard bitmap != 0, bitmap & ~0xFFF == 0 else { throw .unknownTag }
            return (0..<12).filter { bitmap & (1 << $0) != 0 }.map { AudioChannelLabel($0 + 1) }
        case kAudioChannelLayoutTag_Mono: return [kAudioChannelLabel_Mono]
        case kAudioChannelLayoutTag_Stereo: return [L, R]
        case kAudioChannelLayoutTag_StereoHeadphones: return [headphonesLeft, headphonesRight]
        case kAudioChannelLayoutTag_MatrixStereo: return [leftTotal, rightTotal]
        case kAudioChannelLayoutTag_Quadraphonic: return [L, R, Ls, Rs]
        case kAudioChannelLayoutTag_Pentagonal: return [L, R, rearSurroundLeft, rearSurroundRight, C]
        case kAudioChannelLayoutTag_Hexagonal: return [L, R, rearSurroundLeft, rearSurroundRight, C, centerSurround]
        case kAudioChannelLayoutTag_Octagonal: return [L, R, rearSurroundLeft, rearSurroundRight, C, centerSurround, Ls, Rs]
        case kAudioChannelLayoutTag_MPEG_3_0_A: return [L, R, C]
        case kAudioChannelLayoutTag_MPEG_4_0_A: return [L, R, C, centerSurround]
        case kAudioChannelLayoutTag_MPEG_5_0_A: return [L, R, C, Ls, Rs]
        case kAudioChannelLayoutTag_MPEG_5_1_A: return [L, R, C, LFE, Ls, Rs]
        case kAudioChannelLayoutTag_MPEG_6_1_A: return [L, R, C, LFE, Ls, Rs, centerSurround]
        case kAudioChannelLayoutTag_MPEG_7_1_A: return [L, R, C, LFE, Ls, Rs, leftCenter, rightCenter]
        default:
            if tag & 0xFFFF_0000 == kAudioChannelLayoutTag_DiscreteInOrder {
                return (0..<(tag & 0xFFFF)).map { discrete0 | $0 }
            }
            throw .unknownTag
        }
    }

    /// Where a channel of `label` plays, in the device layer's terms; `nil` for labels with no
    /// position (unused, unknown).
    static func position(_ label: AudioChannelLabel) -> HALChannelPosition? {
        switch label {
        case kAudioChannelLabel_Mono: .mono
        case kAudioChannelLabel_Left, headphonesLeft, leftTotal: .frontLeft
        case kAudioChannelLabel_Right, headphonesRight, rightTotal: .frontRight
        case kAudioChannelLabel_Center: .frontCenter
        case kAudioChannelLabel_LFEScreen: .lfe
        case kAudioChannelLabel_LeftSurround, rearSurroundLeft: .rearLeft
        case kAudioChannelLabel_RightSurround, rearSurroundRight: .rearRight
        case centerSurround: .rearCenter
        case leftCenter: .frontLeftOfCenter
        case rightCenter: .frontRightOfCenter
        case leftSurroundDirect: .sideLeft
        case rightSurroundDirect: .sideRight
        case topCenterSurround: .topCenter
        case let l where l & 0xFFFF_0000 == discrete0 && l & 0xFFFF < 32: .aux(Int(l & 0xFFFF))
        default: nil
        }
    }
}
