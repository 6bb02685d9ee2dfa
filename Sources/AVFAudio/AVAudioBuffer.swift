public import Foundation

/// A buffer of audio in some format, over an `AudioBufferList` it owns.
///
/// Copying (`copy()`, `mutableCopy()`, as Apple's NSCopying and NSMutableCopying) makes a buffer
/// of the same kind, format and capacity holding the same audio.
open class AVAudioBuffer: NSObject, NSCopying, NSMutableCopying, @unchecked Sendable {
    public let format: AVAudioFormat
    let list: UnsafeMutableAudioBufferListPointer
    let storage: UnsafeMutableRawPointer
    private let storageBytes: Int

    init(format: AVAudioFormat, buffers: Int, bytesPerBuffer: Int) {
        self.format = format
        list = AudioBufferList.allocate(maximumBuffers: max(buffers, 1))
        storageBytes = max(bytesPerBuffer * buffers, 1)
        storage = .allocate(byteCount: storageBytes, alignment: 16)
        storage.initializeMemory(as: UInt8.self, repeating: 0, count: storageBytes)
        let channelsPerBuffer = format.isInterleaved ? format.channelCount : 1
        for i in 0..<max(buffers, 1) {
            list[i] = AudioBuffer(mNumberChannels: channelsPerBuffer, mDataByteSize: 0, mData: storage + i * bytesPerBuffer)
        }
        super.init()
    }

    deinit {
        storage.deallocate()
        list.unsafeMutablePointer.deallocate()
    }

    public var audioBufferList: UnsafePointer<AudioBufferList> { list.unsafePointer }
    public var mutableAudioBufferList: UnsafeMutablePointer<AudioBufferList> { list.unsafeMutablePointer }

    open func copy(with zone: NSZone? = nil) -> Any { duplicate() }
    open func mutableCopy(with zone: NSZone? = nil) -> Any { duplicate() }

    /// A new buffer like this one; subclasses make their own kind and call ``copyAudio(from:)``.
    func duplicate() -> AVAudioBuffer {
        let copy = AVAudioBuffer(format: format, buffers: list.count, bytesPerBuffer: storageBytes / max(list.count, 1))
        copy.copyAudio(from: self)
        return copy
    }

    /// Takes `other`'s bytes and byte sizes (a buffer of the same format and capacity).
    func copyAudio(from other: AVAudioBuffer) {
        storage.copyMemory(from: other.storage, byteCount: min(storageBytes, other.storageBytes))
        for i in 0..<min(list.count, other.list.count) { list[i].mDataByteSize = other.list[i].mDataByteSize }
    }
}

/// Linear PCM audio: `frameLength` valid frames out of `frameCapacity`, one buffer per channel
/// (deinterleaved) or one for all (interleaved).
open class AVAudioPCMBuffer: AVAudioBuffer, @unchecked Sendable {
    public let frameCapacity: AVAudioFrameCount
    private let channelPointers: UnsafeMutablePointer<UnsafeMutableRawPointer>

    /// `nil` when the format is not linear PCM or the capacity is zero.
    public init?(pcmFormat format: AVAudioFormat, frameCapacity: AVAudioFrameCount) {
        let d = format.streamDescription.pointee
        guard d.mFormatID == kAudioFormatLinearPCM, frameCapacity > 0, d.mBytesPerFrame > 0 else { return nil }
        self.frameCapacity = frameCapacity
        let buffers = format.isInterleaved ? 1 : Int(format.channelCount)
        channelPointers = .allocate(capacity: Int(format.channelCount))
        super.init(format: format, buffers: buffers, bytesPerBuffer: Int(frameCapacity) * Int(d.mBytesPerFrame))
        let sampleBytes = Int(d.mBitsPerChannel + 7) / 8
        for c in 0..<Int(format.channelCount) {
            channelPointers[c] = format.isInterleaved ? list[0].mData! + c * sampleBytes : list[c].mData!
        }
    }

    /// Frames that hold audio; setting it beyond the capacity is clamped. The buffers' byte sizes follow.
    public var frameLength: AVAudioFrameCount = 0 {
        didSet {
            if frameLength > frameCapacity { frameLength = frameCapacity }
            let size = UInt32(frameLength) * format.streamDescription.pointee.mBytesPerFrame
            for i in 0..<list.count { list[i].mDataByteSize = size }
        }
    }

    /// Samples between a channel's consecutive frames: the channel count when interleaved, else 1.
    public var stride: Int { format.isInterleaved ? Int(format.channelCount) : 1 }

    public var floatChannelData: UnsafePointer<UnsafeMutablePointer<Float>>? {
        format.commonFormat == .pcmFormatFloat32 ? typed(Float.self) : nil
    }

    public var int16ChannelData: UnsafePointer<UnsafeMutablePointer<Int16>>? {
        format.commonFormat == .pcmFormatInt16 ? typed(Int16.self) : nil
    }

    public var int32ChannelData: UnsafePointer<UnsafeMutablePointer<Int32>>? {
        format.commonFormat == .pcmFormatInt32 ? typed(Int32.self) : nil
    }

    private func typed<T>(_: T.Type) -> UnsafePointer<UnsafeMutablePointer<T>> {
        // Every pointer has the same layout; the table is only read through the returned type.
        UnsafeRawPointer(channelPointers).assumingMemoryBound(to: UnsafeMutablePointer<T>.self)
    }

    override func duplicate() -> AVAudioBuffer {
        let copy = AVAudioPCMBuffer(pcmFormat: format, frameCapacity: frameCapacity)!
        copy.frameLength = frameLength
        copy.copyAudio(from: self)
        return copy
    }

    deinit { channelPointers.deallocate() }
}

/// Packets of a compressed format, with their descriptions when packets vary in size.
open class AVAudioCompressedBuffer: AVAudioBuffer, @unchecked Sendable {
    public let packetCapacity: AVAudioPacketCount
    public let maximumPacketSize: Int
    public let packetDescriptions: UnsafeMutablePointer<AudioStreamPacketDescription>?
    public var packetCount: AVAudioPacketCount = 0
    public var byteLength: UInt32 {
        get { list[0].mDataByteSize }
        set { list[0].mDataByteSize = min(newValue, byteCapacity) }
    }
    public var byteCapacity: UInt32 { UInt32(packetCapacity) * UInt32(maximumPacketSize) }
    public var data: UnsafeMutableRawPointer { list[0].mData! }

    public init(format: AVAudioFormat, packetCapacity: AVAudioPacketCount, maximumPacketSize: Int) {
        self.packetCapacity = packetCapacity
        self.maximumPacketSize = maximumPacketSize
        let variable = format.streamDescription.pointee.mBytesPerPacket == 0 || format.streamDescription.pointee.mFramesPerPacket == 0
        packetDescriptions = variable ? .allocate(capacity: Int(max(packetCapacity, 1))) : nil
        packetDescriptions?.initialize(repeating: AudioStreamPacketDescription(), count: Int(max(packetCapacity, 1)))
        super.init(format: format, buffers: 1, bytesPerBuffer: Int(packetCapacity) * maximumPacketSize)
    }

    /// For constant-size packets (IMA4, µ-law): the packet size comes from the format.
    public convenience init(format: AVAudioFormat, packetCapacity: AVAudioPacketCount) {
        let size = Int(format.streamDescription.pointee.mBytesPerPacket)
        self.init(format: format, packetCapacity: packetCapacity, maximumPacketSize: size > 0 ? size : 768 * Int(format.channelCount))
    }

    override func duplicate() -> AVAudioBuffer {
        let copy = AVAudioCompressedBuffer(format: format, packetCapacity: packetCapacity, maximumPacketSize: maximumPacketSize)
        copy.packetCount = packetCount
        if let from = packetDescriptions, let to = copy.packetDescriptions { to.update(from: from, count: Int(max(packetCapacity, 1))) }
        copy.copyAudio(from: self)
        return copy
    }

    deinit { packetDescriptions?.deallocate() }
}
