import Synchronization

/// A lock-free single-producer/single-consumer ring of samples, written and read in runs.
///
/// Its memory is made once, in `init`; `write` and `read` never allocate, lock or block, so
/// real-time threads may call them. One thread writes and one reads at a time; which threads
/// those are is the owner's rule, written where each ring is declared.
package final class SampleRing: @unchecked Sendable {
    private let storage: UnsafeMutablePointer<Float>
    package let capacity: Int
    /// Samples ever read; written by the reader only.
    private let head = Atomic<Int>(0)
    /// Samples ever written; written by the writer only.
    private let tail = Atomic<Int>(0)

    package init(capacity: Int) {
        self.capacity = max(capacity, 1)
        storage = .allocate(capacity: self.capacity)
        storage.initialize(repeating: 0, count: self.capacity)
    }

    deinit { storage.deallocate() }

    /// Samples waiting to be read.
    package var available: Int { tail.load(ordering: .acquiring) - head.load(ordering: .acquiring) }

    /// Writer: appends up to `count` samples, returning how many fitted.
    @discardableResult
    package func write(_ samples: UnsafePointer<Float>, count: Int) -> Int {
        let t = tail.load(ordering: .relaxed), h = head.load(ordering: .acquiring)
        let n = min(count, capacity - (t - h))
        guard n > 0 else { return 0 }
        let at = t % capacity, first = min(n, capacity - at)
        (storage + at).update(from: samples, count: first)
        if n > first { storage.update(from: samples + first, count: n - first) }
        tail.store(t + n, ordering: .releasing)
        return n
    }

    /// Reader: takes up to `count` samples, returning how many there were.
    @discardableResult
    package func read(into out: UnsafeMutablePointer<Float>, count: Int) -> Int {
        let h = head.load(ordering: .relaxed), t = tail.load(ordering: .acquiring)
        let n = min(count, t - h)
        guard n > 0 else { return 0 }
        let at = h % capacity, first = min(n, capacity - at)
        out.update(from: storage + at, count: first)
        if n > first { (out + first).update(from: storage, count: n - first) }
        head.store(h + n, ordering: .releasing)
        return n
    }

    /// Reader: the largest magnitude among the oldest `count` samples waiting (fewer where fewer
    /// wait), without taking them.
    package func peak(ofOldest count: Int) -> Float {
        let h = head.load(ordering: .relaxed), t = tail.load(ordering: .acquiring)
        var peak: Float = 0
        for i in h..<(h + min(count, t - h)) { peak = max(peak, abs(storage[i % capacity])) }
        return peak
    }

    /// Reader: drops up to `count` samples.
    package func skip(_ count: Int) {
        let h = head.load(ordering: .relaxed), t = tail.load(ordering: .acquiring)
        head.store(h + min(count, t - h), ordering: .releasing)
    }
}
