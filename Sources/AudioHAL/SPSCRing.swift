import Synchronization

/// A lock-free single-producer/single-consumer ring of plain values.
///
/// Storage is allocated once, in `init`; `push` and `pop` never allocate, lock or block, so the
/// server thread may call them. Exactly one thread may act as producer (`push`) and
/// exactly one as consumer (`pop`) at a time; which threads those are is the
/// owner's rule, written where each ring is declared.
package final class SPSCRing<Element: BitwiseCopyable>: @unchecked Sendable {
    private let storage: UnsafeMutablePointer<Element>
    private let mask: Int
    /// Next index the consumer reads; written by the consumer only.
    private let head = Atomic<Int>(0)
    /// Next index the producer writes; written by the producer only.
    private let tail = Atomic<Int>(0)

    /// The number of elements the ring holds at most (a power of two ≥ `minimumCapacity`).
    package let capacity: Int

    package init(minimumCapacity: Int) {
        var size = 1
        while size < max(minimumCapacity, 1) { size <<= 1 }
        capacity = size
        mask = size - 1
        storage = .allocate(capacity: size)
    }

    deinit { storage.deallocate() }

    /// Producer: appends `element`, or returns `false` when the ring is full.
    @discardableResult
    package func push(_ element: Element) -> Bool {
        let t = tail.load(ordering: .relaxed)
        let h = head.load(ordering: .acquiring)
        guard t - h < capacity else { return false }
        (storage + (t & mask)).initialize(to: element)
        tail.store(t + 1, ordering: .releasing)
        return true
    }

    /// Consumer: removes and returns the oldest element, or `nil` when the ring is empty.
    package func pop() -> Element? {
        let h = head.load(ordering: .relaxed)
        let t = tail.load(ordering: .acquiring)
        guard h != t else { return nil }
        let element = storage[h & mask]
        head.store(h + 1, ordering: .releasing)
        return element
    }
}
