import Synchronization

/// What kind of object an opaque reference stands for; its tag is the low bits of the reference,
/// so that a reference of one kind passed where another is expected is refused without a lookup.
enum ObjectKind: UInt, Sendable {
    case audioQueue = 1
    case audioQueueTimeline = 2
    case audioFile = 3
    case extAudioFile = 4
    case audioConverter = 5
    case audioUnit = 6
    case audioComponent = 7
}

/// A process-wide serial: every reference handed out takes the next one, so no two objects ever
/// get the same reference, however many come and go.
private let referenceSerial = Atomic<UInt64>(0)

/// Bits below the serial in a reference, holding its ``ObjectKind``.
private let kindBits: UInt = 4

/// A new reference for an object of `kind`, never handed out before and never again: the serial
/// (64 bits minus the tag, which would take thousands of years to run out at a billion a second)
/// shifted above the kind's tag. It is a value, not an address: nothing ever dereferences it.
func newObjectReference(_ kind: ObjectKind) -> OpaquePointer {
    let serial = referenceSerial.add(1, ordering: .relaxed).newValue
    return OpaquePointer(bitPattern: UInt(serial) << kindBits | kind.rawValue)!
}

/// An object behind an opaque reference; it keeps the reference it was given when created.
protocol ReferencedObject: AnyObject, Sendable {
    var ref: OpaquePointer { get }
}

/// The objects alive behind the opaque references handed to the user (`AudioQueueRef`,
/// `AudioQueueTimelineRef`, `AudioFileID`, `ExtAudioFileRef`, `AudioConverterRef`), so that a
/// stale or foreign reference gets an error instead of a crash.
///
/// References are never reused (``newObjectReference(_:)``): a disposed object's reference stays
/// invalid for the life of the process instead of coming to stand for a newer object, as an
/// address would once the memory is reused. The caller returns its API's error for an unknown
/// reference.
final class LiveObjects<T: ReferencedObject>: Sendable {
    private let kind: ObjectKind
    private let live = Mutex<[UInt: T]>([:])

    init(_ kind: ObjectKind) { self.kind = kind }

    /// The table key of `ref`, `nil` when it is not a reference of this table's kind.
    private func key(_ ref: OpaquePointer) -> UInt? {
        let bits = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(ref)))
        return bits & ((1 << kindBits) - 1) == kind.rawValue ? bits : nil
    }

    func add(_ object: T) {
        guard let key = key(object.ref) else { preconditionFailure("a \(T.self) with a reference of another kind") }
        live.withLock { $0[key] = object }
    }

    func remove(_ ref: OpaquePointer) -> T? {
        guard let key = key(ref) else { return nil }
        return live.withLock { $0.removeValue(forKey: key) }
    }

    func lookup(_ ref: OpaquePointer?) -> T? {
        guard let ref, let key = key(ref) else { return nil }
        return live.withLock { $0[key] }
    }

    /// Removes every object `condition` picks.
    func removeAll(where condition: (T) -> Bool) {
        live.withLock { table in
            for (key, object) in table where condition(object) { table[key] = nil }
        }
    }

    /// Every live object, at this moment.
    func all() -> [T] { live.withLock { Array($0.values) } }
}

let liveQueues = LiveObjects<AudioQueueObject>(.audioQueue)
let liveTimelines = LiveObjects<AudioQueueTimeline>(.audioQueueTimeline)
let liveAudioFiles = LiveObjects<AudioFileObject>(.audioFile)
let liveExtAudioFiles = LiveObjects<ExtAudioFileObject>(.extAudioFile)
let liveConverters = LiveObjects<AudioConverterObject>(.audioConverter)
