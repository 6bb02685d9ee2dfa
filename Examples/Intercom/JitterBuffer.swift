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
    private var lost = 0
    private var late = 0
    private var skipped = 0
    /// How far from the newest a sequence number may be and still belong to this stream; beyond
    /// it the peer started over (or a stray datagram came): the buffer starts afresh.
    private let window: UInt32 = 1000

    init(depth: Int) { self.depth = depth }

    func insert(sequence: UInt32, payload: [UInt8]) {
        lock.lock()
        defer { lock.unlock() }
        if next != nil, Int32(bitPattern: sequence &- newest).magnitude > window {
            packets.removeAll()
            next = nil
        }
        if let next, Int32(bitPattern: sequence &- next) < 0 {
            late += 1
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
                if packets.removeValue(forKey: at) != nil { skipped += 1 }
                at &+= 1
            }
        }
        next = at &+ 1
        if let payload = packets.removeValue(forKey: at) { return .packet(payload) }
        lost += 1
        return .lost
    }

    /// Packets lost, come too late, and skipped (for the level line).
    var counts: (lost: Int, late: Int, skipped: Int) {
        lock.lock()
        defer { lock.unlock() }
        return (lost, late, skipped)
    }
}
