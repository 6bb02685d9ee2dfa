public import AudioToolbox

/// An `AudioChannelLayout` naming each channel by label (`kAudioChannelLayoutTag_UseChannelDescriptions`),
/// as the bytes a property call takes.
public func channelLayoutBytes(_ labels: [AudioChannelLabel]) -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: 12 + 20 * labels.count)
    bytes.withUnsafeMutableBytes { raw in
        raw.storeBytes(of: kAudioChannelLayoutTag_UseChannelDescriptions, toByteOffset: 0, as: UInt32.self)
        raw.storeBytes(of: UInt32(labels.count), toByteOffset: 8, as: UInt32.self)
        for (i, l) in labels.enumerated() { raw.storeBytes(of: l, toByteOffset: 12 + 20 * i, as: UInt32.self) }
    }
    return bytes
}
