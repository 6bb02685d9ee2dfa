/// What every `…GetProperty` and `…SetProperty` of the queue, file, converter and ExtAudioFile
/// APIs does with the caller's bytes: a value copied out into the room the caller gives, with the
/// size written back, and a value read in after its size is checked. Each API keeps its own status
/// for a size that does not fit (`kAudioFileBadPropertySizeError`,
/// `kAudioConverterErr_BadPropertySizeError`, `kExtAudioFileError_InvalidPropertySize`,
/// `kAudioQueueErr_InvalidPropertySize`).
enum PropertyData {
    /// Copies `value` to `data` when the room `ioSize` gives holds it, and sets `ioSize` to the
    /// bytes written. Returns false, writing nothing, when the room is too small.
    static func copy(_ value: [UInt8], to data: UnsafeMutableRawPointer, size ioSize: UnsafeMutablePointer<UInt32>) -> Bool {
        guard Int(ioSize.pointee) >= value.count else { return false }
        value.withUnsafeBytes { if !value.isEmpty { data.copyMemory(from: $0.baseAddress!, byteCount: value.count) } }
        ioSize.pointee = UInt32(value.count)
        return true
    }

    /// The `T` at `data` (any alignment) when `size` bytes hold one; `nil` when they do not.
    static func load<T>(_ type: T.Type, from data: UnsafeRawPointer?, size: UInt32) -> T? {
        guard let data, Int(size) >= MemoryLayout<T>.size else { return nil }
        return data.loadUnaligned(as: T.self)
    }
}
