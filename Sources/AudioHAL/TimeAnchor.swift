import Synchronization

/// A (sample time, host time) pair written by the server thread and read anywhere, without locks.
///
/// A sequence lock: the single writer makes the sequence odd while it writes; a reader retries
/// until it sees the same even sequence before and after reading.
package final class TimeAnchor: Sendable {
    private let sequence = Atomic<Int>(0)
    private let sample = Atomic<Int64>(0)
    private let host = Atomic<UInt64>(0)

    package init() {}

    /// Writer (one thread): publishes that frame `sampleTime` is heard at `hostTime`.
    package func store(sampleTime: Int64, hostTime: UInt64) {
        let s = sequence.load(ordering: .relaxed)
        sequence.store(s + 1, ordering: .relaxed)
        atomicMemoryFence(ordering: .releasing)
        sample.store(sampleTime, ordering: .relaxed)
        host.store(hostTime, ordering: .relaxed)
        sequence.store(s + 2, ordering: .releasing)
    }

    /// Any thread: the last published pair; `nil` before the first store.
    package func load() -> (sampleTime: Int64, hostTime: UInt64)? {
        while true {
            let before = sequence.load(ordering: .acquiring)
            if before == 0 { return nil }
            if before & 1 == 1 { continue }
            let s = sample.load(ordering: .relaxed)
            let h = host.load(ordering: .relaxed)
            atomicMemoryFence(ordering: .acquiring)
            if sequence.load(ordering: .relaxed) == before { return (s, h) }
        }
    }

    /// Writer: forgets the pair, as before the first store.
    package func reset() { sequence.store(0, ordering: .releasing) }
}
