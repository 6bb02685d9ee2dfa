// `AudioBuffer` and `AudioBufferList` are declared in C (CCoreAudioTypes) with Apple's layout.
// These are the Swift helpers Apple's CoreAudio overlay provides for them.

extension AudioBuffer {
    /// A buffer describing `typedBuffer`, `numberOfChannels` interleaved channels.
    public init<T>(_ typedBuffer: UnsafeMutableBufferPointer<T>, numberOfChannels: Int) {
        self.init(
            mNumberChannels: UInt32(numberOfChannels),
            mDataByteSize: UInt32(typedBuffer.count * MemoryLayout<T>.stride),
            mData: UnsafeMutableRawPointer(typedBuffer.baseAddress))
    }
}

extension AudioBufferList {
    /// Bytes an `AudioBufferList` with room for `maximumBuffers` buffers occupies.
    public static func sizeInBytes(maximumBuffers: Int) -> Int {
        precondition(maximumBuffers >= 1, "AudioBufferList needs room for at least one buffer")
        return MemoryLayout<AudioBufferList>.size - MemoryLayout<AudioBuffer>.size
            + maximumBuffers * MemoryLayout<AudioBuffer>.size
    }

    /// Allocates a zeroed list with room for `maximumBuffers` buffers and `mNumberBuffers` set to
    /// it. Free it with `free(_:)` on its `unsafeMutablePointer`, as on Apple's platforms.
    public static func allocate(maximumBuffers: Int) -> UnsafeMutableAudioBufferListPointer {
        let size = sizeInBytes(maximumBuffers: maximumBuffers)
        let raw = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: MemoryLayout<AudioBufferList>.alignment)
        raw.initializeMemory(as: UInt8.self, repeating: 0, count: size)
        let list = raw.bindMemory(to: AudioBufferList.self, capacity: 1)
        list.pointee.mNumberBuffers = UInt32(maximumBuffers)
        return UnsafeMutableAudioBufferListPointer(list)
    }
}

/// A collection view of the buffers of an `AudioBufferList`, Apple's Swift helper.
public struct UnsafeMutableAudioBufferListPointer: MutableCollection, RandomAccessCollection {
    public let unsafeMutablePointer: UnsafeMutablePointer<AudioBufferList>

    public init(_ p: UnsafeMutablePointer<AudioBufferList>) { unsafeMutablePointer = p }

    public init?(_ p: UnsafeMutablePointer<AudioBufferList>?) {
        guard let p else { return nil }
        unsafeMutablePointer = p
    }

    public var unsafePointer: UnsafePointer<AudioBufferList> { UnsafePointer(unsafeMutablePointer) }

    /// `mNumberBuffers`.
    public var count: Int {
        get { Int(unsafeMutablePointer.pointee.mNumberBuffers) }
        nonmutating set { unsafeMutablePointer.pointee.mNumberBuffers = UInt32(newValue) }
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { count }

    private var buffers: UnsafeMutablePointer<AudioBuffer> {
        UnsafeMutableRawPointer(unsafeMutablePointer)
            .advanced(by: MemoryLayout<AudioBufferList>.offset(of: \AudioBufferList.mBuffers)!)
            .assumingMemoryBound(to: AudioBuffer.self)
    }

    public subscript(index: Int) -> AudioBuffer {
        get {
            precondition(index >= 0 && index < count, "AudioBufferList index out of range")
            return buffers[index]
        }
        nonmutating set {
            precondition(index >= 0 && index < count, "AudioBufferList index out of range")
            buffers[index] = newValue
        }
    }
}
