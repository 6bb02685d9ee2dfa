import Foundation

/// Holds the packets that came in by their sequence number and hands them out in order, one per
/// 20 ms, `depth` packets behind the newest: a packet that arrives out of order within that
/// depth takes its place, one that never comes is reported lost (its concealment plays), one that
/// comes after its turn is dropped. A backlog beyond the depth (a player that started late or
/// stalled) is skipped.
final class JitterBuffer: @unchecked Sendable {
    enum Slot {
        case packet([UInt8])
        case lost
    }

    private let lock = NSLock()
    private var packets: [UInt32: [UInt8]] = [:]
    private var next: UInt32?
    private var newest: UInt32 = 0
    let depth: Int
    private(set) var lostCount = 0
    private(set) var lateCount = 0
    private(set) var skippedCount = 0

    init(depth: Int) { self.depth = depth }

    func insert(sequence: UInt32, payload: [UInt8]) {
        lock.lock()
        defer { lock.unlock() }
        if let next, Int32(bitPattern: sequence &- next) < 0 {
            lateCount += 1
            return
        }
        packets[sequence] = payload
        if next == nil || Int32(bitPattern: sequence &- newest) > 0 { newest = sequence }
        if next == nil { next = sequence }
    }

    /// The next slot once `depth` packets have come in behind it; nil until then.
    func pop() -> Slot? {
        lock.lock()
        defer { lock.unlock() }
        guard var at = next, Int(Int32(bitPattern: newest &- at)) >= depth else { return nil }
        if Int(Int32(bitPattern: newest &- at)) > depth + 3 {
            // Far behind (the player started after packets came in, or stalled): skip to the
            // depth, so the call's latency does not keep the backlog.
            let resume = newest &- UInt32(depth)
            while at != resume {
                if packets.removeValue(forKey: at) != nil { skippedCount += 1 }
                at &+= 1
            }
        }
        next = at &+ 1
        if let payload = packets.removeValue(forKey: at) { return .packet(payload) }
        lostCount += 1
        return .lost
    }

    /// Packets waiting (for the level line).
    var waiting: Int {
        lock.lock()
        defer { lock.unlock() }
        return packets.count
    }
}
