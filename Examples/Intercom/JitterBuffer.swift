import Foundation

/// Holds the packets that came in by their sequence number and hands them out in order, one per
/// packet duration as the player asks.
///
/// Playing starts once the first packet has waited `delay` (and starts again that way after the
/// peer went quiet); from then on the player's clock sets the pace and the network does not: a
/// packet that arrives out of order before its turn takes its place, one that is missing at its
/// turn is reported lost (its concealment plays) and dropped if it comes later. So the call's
/// latency is set once, at the start, and a loss does not add to it. The delay is what a packet
/// may come late by: one swapped with the next comes a packet late. A backlog of more than a few
/// packets beyond the delay (a player that stalled) is skipped.
final class JitterBuffer: @unchecked Sendable {
    enum Slot {
        case packet([UInt8])
        case lost
    }

    private let lock = NSLock()
    /// The packets held, each with when it came in (uptime, ns) and whether it was the newest then.
    private var packets: [UInt32: (payload: [UInt8], arrived: UInt64, inOrder: Bool)] = [:]
    private var next: UInt32?
    private var newest: UInt32 = 0
    /// Whether the player's clock sets the pace; false until the first packet has waited `delay`.
    private var playing = false
    /// When the packet that starts play came in (uptime, ns).
    private var waitingSince: UInt64?
    private let delay: UInt64
    /// The delay in whole packets, the least the buffer holds after skipping a backlog.
    private let depth: Int
    private var lost = 0
    private var late = 0
    private var skipped = 0
    /// The time the packets played so far were held, in all (ns), and how many they were.
    private var held: UInt64 = 0
    private var played = 0
    /// The least time a packet that came in order was held, over the last `inOrderPlayed`.
    private var leastHold = UInt64.max
    private var inOrderPlayed = 0
    /// What the buffer holds beyond need, to be played away (ns).
    private var excessHold: UInt64 = 0
    private let packetDuration: UInt64
    /// Slots in a row due before anything past them came in.
    private var starved = 0
    /// How far from the newest a sequence number may be and still belong to this stream; beyond
    /// it the peer started over (or a stray datagram came).
    private let window: UInt32 = 1000

    init(delay: Double, packetDuration: Double) {
        self.delay = UInt64(delay * 1e9)
        self.packetDuration = UInt64(packetDuration * 1e9)
        depth = max(1, Int((delay / packetDuration).rounded(.up)))
    }

    func insert(sequence: UInt32, payload: [UInt8]) {
        lock.lock()
        defer { lock.unlock() }
        if next != nil, (!playing && packets.isEmpty) || Int32(bitPattern: sequence &- newest).magnitude > window {
            // Waiting with nothing held (the peer went quiet, and may have started over), or far
            // from this stream: the packet starts it afresh.
            packets.removeAll()
            next = nil
            playing = false
            waitingSince = nil
        }
        if let next, Int32(bitPattern: sequence &- next) < 0 {
            late += 1
            return
        }
        let now = DispatchTime.now().uptimeNanoseconds
        let inOrder = next == nil || Int32(bitPattern: sequence &- newest) > 0
        packets[sequence] = (payload, now, inOrder)
        if inOrder { newest = sequence }
        if next == nil { next = sequence }
        if !playing && waitingSince == nil { waitingSince = now }
    }

    /// The next slot; nil while the buffer fills: at the start, and once the peer has sent nothing
    /// past the slot due for a few slots in a row (it went quiet: the buffer fills again rather
    /// than conceal a silence).
    func pop() -> Slot? {
        lock.lock()
        defer { lock.unlock() }
        guard var at = next else { return nil }
        if !playing {
            guard let since = waitingSince, DispatchTime.now().uptimeNanoseconds - since >= delay else { return nil }
            playing = true
        }
        let ahead = Int(Int32(bitPattern: newest &- at))
        if packets[at] == nil && ahead <= 0 {
            // Nothing has come past the slot due: a packet late (concealed; dropped when it
            // comes), or the peer went quiet (after a few such slots: fill again).
            starved += 1
            if starved > 3 {
                playing = false
                waitingSince = nil
                starved = 0
                return nil
            }
        } else {
            starved = 0
        }
        if ahead > depth + 3 {
            // Far behind (the player stalled): skip to the depth, so the call's latency does not
            // keep the backlog.
            let resume = newest &- UInt32(depth)
            while at != resume {
                if packets.removeValue(forKey: at) != nil { skipped += 1 }
                at &+= 1
            }
        }
        next = at &+ 1
        if let packet = packets.removeValue(forKey: at) {
            let hold = DispatchTime.now().uptimeNanoseconds - packet.arrived
            held += hold
            played += 1
            if packet.inOrder {
                leastHold = min(leastHold, hold)
                inOrderPlayed += 1
                if inOrderPlayed == 50 {
                    if leastHold > delay { excessHold = leastHold - packetDuration }
                    (leastHold, inOrderPlayed) = (.max, 0)
                }
            }
            return .packet(packet.payload)
        }
        lost += 1
        return .lost
    }

    /// How much less the buffer could hold (s). A packet that came in order must be held a
    /// packet's duration, for one swapped with it to make its turn; once every such packet in 50
    /// was held more than the delay (the call started on a packet that came late, say), the
    /// excess over a packet's duration is here, for the player to play that much less of a quiet
    /// moment and say so with ``trimmed(_:)``.
    var excess: Double {
        lock.lock()
        defer { lock.unlock() }
        return Double(excessHold) / 1e9
    }

    /// The player played `seconds` less: packets are held that much less from now on.
    func trimmed(_ seconds: Double) {
        lock.lock()
        defer { lock.unlock() }
        excessHold -= min(excessHold, UInt64(seconds * 1e9))
        (leastHold, inOrderPlayed) = (.max, 0)
    }

    /// Packets lost, come too late, and skipped, and how long a packet was held on average (ms):
    /// for the level line.
    var counts: (lost: Int, late: Int, skipped: Int, heldMS: Double) {
        lock.lock()
        defer { lock.unlock() }
        return (lost, late, skipped, played > 0 ? Double(held) / Double(played) / 1e6 : 0)
    }
}
