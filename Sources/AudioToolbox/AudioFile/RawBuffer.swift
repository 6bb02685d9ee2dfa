/// A growable block of raw bytes, for packet I/O without closures (so typed errors pass through).
final class RawBuffer {
    private(set) var pointer: UnsafeMutableRawPointer
    private(set) var capacity: Int

    init(capacity: Int = 4096) {
        self.capacity = max(capacity, 16)
        pointer = UnsafeMutableRawPointer.allocate(byteCount: self.capacity, alignment: 16)
    }

    deinit { pointer.deallocate() }

    /// Makes room for `count` bytes, keeping the first `keeping` bytes.
    func reserve(_ count: Int, keeping: Int = 0) {
        guard count > capacity else { return }
        let bigger = max(count, capacity * 2)
        let fresh = UnsafeMutableRawPointer.allocate(byteCount: bigger, alignment: 16)
        if keeping > 0 { fresh.copyMemory(from: pointer, byteCount: min(keeping, capacity)) }
        pointer.deallocate()
        pointer = fresh
        capacity = bigger
    }
}
