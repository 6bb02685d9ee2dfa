public import Foundation

/// A channel layout: Apple's `AudioChannelLayout` in an object.
public final class AVAudioChannelLayout: NSObject, @unchecked Sendable {
    private let storage: UnsafeMutableRawPointer
    private let size: Int

    /// A layout given by tag; `nil` for the tags that need descriptions or a bitmap.
    public init?(layoutTag: AudioChannelLayoutTag) {
        guard layoutTag != kAudioChannelLayoutTag_UseChannelDescriptions, layoutTag != kAudioChannelLayoutTag_UseChannelBitmap else { return nil }
        size = MemoryLayout<AudioChannelLayout>.size
        storage = .allocate(byteCount: size, alignment: 8)
        storage.initializeMemory(as: UInt8.self, repeating: 0, count: size)
        storage.storeBytes(of: layoutTag, as: UInt32.self)
        super.init()
    }

    /// A copy of `layout` (with its channel descriptions).
    public init(layout: UnsafePointer<AudioChannelLayout>) {
        let n = Int(layout.pointee.mNumberChannelDescriptions)
        size = MemoryLayout<AudioChannelLayout>.size + max(n - 1, 0) * MemoryLayout<AudioChannelDescription>.size
        storage = .allocate(byteCount: size, alignment: 8)
        storage.copyMemory(from: layout, byteCount: size)
        super.init()
    }

    deinit { storage.deallocate() }

    public var layout: UnsafePointer<AudioChannelLayout> { UnsafePointer(storage.assumingMemoryBound(to: AudioChannelLayout.self)) }
    public var layoutTag: AudioChannelLayoutTag { layout.pointee.mChannelLayoutTag }

    public var channelCount: AVAudioChannelCount {
        let tag = layoutTag
        if tag == kAudioChannelLayoutTag_UseChannelDescriptions { return layout.pointee.mNumberChannelDescriptions }
        if tag == kAudioChannelLayoutTag_UseChannelBitmap { return UInt32(layout.pointee.mChannelBitmap.rawValue.nonzeroBitCount) }
        return AudioChannelLayoutTag_GetNumberOfChannels(tag)
    }

    /// The layout's bytes, as `AVChannelLayoutKey` holds them.
    var data: Data { Data(bytes: storage, count: size) }

    public override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? AVAudioChannelLayout, other.size == size else { return false }
        return memcmp(storage, other.storage, size) == 0
    }

    public override var hash: Int { Int(layoutTag) }
}
