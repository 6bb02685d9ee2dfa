import Synchronization

/// The queues alive in this process, so that a stale or foreign ``AudioQueueRef`` gets an error
/// instead of a crash.
enum AudioQueueRegistry {
    private static let live = Mutex<[UInt: AudioQueueObject]>([:])

    private static func key(_ ref: AudioQueueRef) -> UInt { UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(ref))) }
    static func add(_ queue: AudioQueueObject) { live.withLock { $0[key(queue.ref)] = queue } }
    static func remove(_ queue: AudioQueueObject) { _ = live.withLock { $0.removeValue(forKey: key(queue.ref)) } }
    static func lookup(_ ref: AudioQueueRef?) -> AudioQueueObject? {
        guard let ref else { return nil }
        return live.withLock { $0[key(ref)] }
    }
}
