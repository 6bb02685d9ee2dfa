import Foundation

/// Holds the packets that came in by their sequence number and hands them out in order, one per
/// packet duration as the player asks.
///
/// Playing starts once the first packet has waited `delay`; from then on the player's clock sets
/// the pace and the network does not: a packet that arrives out of order before its turn takes its
/// place, and one missing at its turn is reported lost (its concealment plays), so a loss adds no
/// latency. The delay is what a packet may come late by: one swapped with the next comes a packet
/// late. The hold changes only where it must:
/// - a packet that comes after its turn is dropped, unless nothing newer had come (the network's
///   delay grew, or the peer's clock is slower): then it plays after its concealment, and the
///   hold grows by what was concealed;
/// - with nothing come for a few slots (the peer went quiet) the buffer fills again, as at the
///   start;
/// - a hold grown longer than needed is reported as ``excess``, for the player to play away in a
///   quiet moment; a backlog of more than a few packets (a player that stalled) is skipped.
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
    /// Whether the player's clock sets the pace: false while the buffer fills (at the start, and
    /// again after the peer went quiet).
    private var playing = false
    /// When the packet that starts play came in (uptime, ns).
    private var waitingSince: UInt64?
    private let delay: UInt64
    /// The delay in whole packets: how far behind the newest play resumes after a backlog.
    private let depth: Int
    /// Slots in a row due before anything past them came in.
    private var starved = 0
    /// The least time a packet that came in order was held, over the last `inOrderPlayed`.
    private var leastHold = UInt64.max
    private var inOrderPlayed = 0
    /// What the buffer holds beyond need, to be played away (ns).
    private var excessHold: UInt64 = 0
    private var lost = 0
    private var late = 0
    private var skipped = 0
    /// The time the packets played so far were held, in all (ns), and how many they were.
    private var held: UInt64 = 0
    private var played = 0
    /// How far from the newest a sequence number may be and still belong to this stream; beyond
    /// it the peer started over (or a stray datagram came).
    private let window: UInt32 = 1000

    init(delay: Double, packetDuration: Double) {
        self.delay = UInt64(delay * 1e9)
        depth = max(1, Int((delay / packetDuration).rounded(.up)))
    }

    func insert(sequence: UInt32, payload: [UInt8]) {
        lock.lock()
        defer { lock.unlock() }
        let newer = next == nil || Int32(bitPattern: sequence &- newest) > 0
        let behind = next.map { Int32(bitPattern: sequence &- $0) < 0 } ?? false
        if (next != nil && Int32(bitPattern: sequence &- newest).magnitude > window) || (behind && !newer && !playing && packets.isEmpty) {
            // The peer started over (or a stray datagram came): start afresh.
            fill(from: nil)
        } else if behind {
            guard newer else {
                late += 1
                return
            }
            // Its slot was concealed with nothing newer in: it plays next, a little later.
            next = sequence
        }
        let now = DispatchTime.now().uptimeNanoseconds, inOrder = newer || next == nil
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
            // Nothing has come past the slot due: a packet late (concealed), or the peer went
            // quiet (after a few such slots: fill again).
            starved += 1
            if starved > 3 {
                fill(from: at)
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
            forgetHolds()
        }
        next = at &+ 1
        guard let packet = packets.removeValue(forKey: at) else {
            lost += 1
            return .lost
        }
        let hold = DispatchTime.now().uptimeNanoseconds - packet.arrived
        held += hold
        played += 1
        if packet.inOrder {
            leastHold = min(leastHold, hold)
            inOrderPlayed += 1
            if inOrderPlayed == 50 {
                excessHold = leastHold > delay ? leastHold - delay : 0
                (leastHold, inOrderPlayed) = (.max, 0)
            }
        }
        return .packet(packet.payload)
    }

    /// Stops playing until the buffer has filled again, from `next` (nil: from the next packet in).
    private func fill(from next: UInt32?) {
        if next == nil { packets.removeAll() }
        self.next = next
        playing = false
        waitingSince = nil
        starved = 0
        forgetHolds()
    }

    /// Starts measuring the holds afresh, with nothing to trim.
    private func forgetHolds() { (leastHold, inOrderPlayed, excessHold) = (.max, 0, 0) }

    /// How much less the buffer could hold (s): once every packet of 50 that came in order was
    /// held more than the delay (the call started on a packet that came late, say), the excess.
    /// The player plays that much less of a quiet moment and says so with ``trimmed(_:)``.
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
