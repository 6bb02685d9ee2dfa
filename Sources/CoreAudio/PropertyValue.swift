import CoreAudioTypes
import Foundation

/// A property's value as `AudioObjectGetPropertyData` hands it out, in Apple's C layout.
enum PropertyValue {
    case uint32(UInt32)
    case float32(Float32)
    case float64(Float64)
    /// Object IDs, data source IDs: as many as the caller's buffer holds.
    case uint32s([UInt32])
    /// A `CFString`, handed out retained (the caller releases it, Apple's rule for these properties).
    case string(String)
    case ranges([AudioValueRange])
    case format(AudioStreamBasicDescription)
    case rangedFormats([AudioStreamRangedDescription])
    /// An `AudioBufferList` of one buffer of `channels` channels, or of none (`nil`).
    case bufferList(channels: UInt32?)

    /// The bytes the whole value takes.
    var size: Int {
        switch self {
        case .uint32: 4
        case .float32: 4
        case .float64: 8
        case .uint32s(let v): 4 * v.count
        case .string: MemoryLayout<CFString>.size
        case .ranges(let v): MemoryLayout<AudioValueRange>.stride * v.count
        case .format: MemoryLayout<AudioStreamBasicDescription>.size
        case .rangedFormats(let v): MemoryLayout<AudioStreamRangedDescription>.stride * v.count
        case .bufferList(let channels): AudioBufferList.sizeInBytes(maximumBuffers: 1) - (channels == nil ? MemoryLayout<AudioBuffer>.size : 0)
        }
    }

    /// Writes the value into `capacity` bytes at `data` and returns the bytes written: a list as
    /// many whole items as fit, anything else whole or not at all (`nil`: the buffer is too small).
    func write(to data: UnsafeMutableRawPointer, capacity: Int) -> Int? {
        func put<T>(_ items: [T]) -> Int {
            let count = min(items.count, capacity / MemoryLayout<T>.stride)
            items.withUnsafeBytes { data.copyMemory(from: $0.baseAddress!, byteCount: count * MemoryLayout<T>.stride) }
            return count * MemoryLayout<T>.stride
        }
        switch self {
        case .uint32s(let v): return v.isEmpty ? 0 : put(v)
        case .ranges(let v): return v.isEmpty ? 0 : put(v)
        case .rangedFormats(let v): return v.isEmpty ? 0 : put(v)
        default: break
        }
        guard capacity >= size else { return nil }
        func one<T>(_ value: T) -> Int {
            withUnsafeBytes(of: value) { data.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            return MemoryLayout<T>.size
        }
        switch self {
        case .uint32(let v): return one(v)
        case .float32(let v): return one(v)
        case .float64(let v): return one(v)
        case .string(let s): return one(Unmanaged.passRetained(s as NSString).toOpaque())
        case .format(let f): return one(f)
        case .bufferList(let channels):
            let list = data.bindMemory(to: AudioBufferList.self, capacity: 1)
            list.pointee.mNumberBuffers = channels == nil ? 0 : 1
            if let channels {
                UnsafeMutableAudioBufferListPointer(list)[0] = AudioBuffer(mNumberChannels: channels, mDataByteSize: 0, mData: nil)
            }
            return size
        case .uint32s, .ranges, .rangedFormats: return 0
        }
    }
}

/// Reads what `AudioObjectSetPropertyData` was given.
struct PropertyInput {
    let data: UnsafeRawPointer
    let size: Int

    func uint32() throws(PropertyError) -> UInt32 {
        guard size >= 4 else { throw .badSize }
        return data.loadUnaligned(as: UInt32.self)
    }
    func float32() throws(PropertyError) -> Float32 {
        guard size >= 4 else { throw .badSize }
        return data.loadUnaligned(as: Float32.self)
    }
    func float64() throws(PropertyError) -> Float64 {
        guard size >= 8 else { throw .badSize }
        return data.loadUnaligned(as: Float64.self)
    }
    /// A `CFString` the caller passes by reference (a `CFString` variable's address).
    func string() throws(PropertyError) -> String {
        guard size >= MemoryLayout<CFString>.size, let raw = data.loadUnaligned(as: UnsafeRawPointer?.self) else { throw .badSize }
        return Unmanaged<NSString>.fromOpaque(raw).takeUnretainedValue() as String
    }
}

/// Why a property call failed, as Apple's HAL says it.
enum PropertyError: Error {
    case badObject, unknownProperty, badSize, illegalOperation, unsupportedFormat, notRunning, unspecified

    var status: OSStatus {
        switch self {
        case .badObject: kAudioHardwareBadObjectError
        case .unknownProperty: kAudioHardwareUnknownPropertyError
        case .badSize: kAudioHardwareBadPropertySizeError
        case .illegalOperation: kAudioHardwareIllegalOperationError
        case .unsupportedFormat: kAudioDeviceUnsupportedFormatError
        case .notRunning: kAudioHardwareNotRunningError
        case .unspecified: kAudioHardwareUnspecifiedError
        }
    }
}
