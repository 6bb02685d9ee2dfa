package import CoreAudioTypes
import Synchronization

/// A failed file, converter or format call: Apple's status and, for tools, tests and logs, what
/// was wrong in words.
package struct AudioFailure: Error {
    package let status: OSStatus
    package let reason: String
    package init(_ status: OSStatus, _ reason: String) {
        self.status = status
        self.reason = reason
    }
}

/// A value's bytes, as property getters copy them out.
func bytes<T>(_ value: T) -> [UInt8] { withUnsafeBytes(of: value) { Array($0) } }

/// The objects alive behind the opaque references handed to the user (`AudioFileID`,
/// `ExtAudioFileRef`, `AudioConverterRef`, `AudioQueueRef`), so that a stale or foreign reference
/// gets an error instead of a crash.
final class LiveObjects<T: AnyObject & Sendable>: Sendable {
    private let live = Mutex<[UInt: T]>([:])

    private static func key(_ ref: OpaquePointer) -> UInt { UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(ref))) }

    /// The reference to hand out for `object`: its address.
    static func reference(_ object: T) -> OpaquePointer { OpaquePointer(Unmanaged.passUnretained(object).toOpaque()) }

    func add(_ object: T) { live.withLock { $0[Self.key(Self.reference(object))] = object } }
    func remove(_ ref: OpaquePointer) -> T? { live.withLock { $0.removeValue(forKey: Self.key(ref)) } }
    func lookup(_ ref: OpaquePointer?) -> T? {
        guard let ref else { return nil }
        return live.withLock { $0[Self.key(ref)] }
    }

    /// Every live object, at this moment.
    func all() -> [T] { live.withLock { Array($0.values) } }
}

let liveQueues = LiveObjects<AudioQueueObject>()
let liveAudioFiles = LiveObjects<AudioFileObject>()
let liveExtAudioFiles = LiveObjects<ExtAudioFileObject>()
let liveConverters = LiveObjects<AudioConverterObject>()
