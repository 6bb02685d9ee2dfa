import Glibc
import Synchronization

/// Where every ``AudioQueueBuffer`` header lives, so that an `AudioQueueBufferRef` (a real
/// pointer: the user reads `mAudioData` through it, as on Apple's platforms) is never reused.
///
/// A freed buffer's pointer must not come to stand for a newer buffer, of the same queue or of
/// another: queues find their buffers by pointer, and an address that `malloc` handed out again
/// would make a stale `AudioQueueBufferRef` resolve to someone else's buffer. Here headers are
/// carved in order from address space reserved for them alone and never unmapped, and an address
/// is handed out once: so a freed or disposed buffer's pointer stays unknown to every queue, and
/// the calls given it return `kAudioQueueErr_InvalidBuffer`.
///
/// Memory: a retired header is zeroed (a stale read sees no data and capacity 0 rather than
/// freed memory), and a page whose headers have all been retired is given back to the kernel
/// (`madvise(MADV_DONTNEED)`; it reads as zeros if touched again). Address space is reserved
/// `regionBytes` at a time with no access (`PROT_NONE` costs no memory) and opened for reading and
/// writing as the headers reach it; 4 GiB of addresses hold 67 million headers, and another
/// region is reserved when one is used up.
///
/// Threads: any thread but a real-time one (it takes a lock and makes system calls); queues call
/// it from their control calls and when they are disposed.
final class BufferHeaderArena: Sendable {
    static let shared = BufferHeaderArena()

    /// Bytes of address space reserved at a time.
    private let regionBytes = 1 << 32
    /// Bytes made writable at a time as the headers advance.
    private let commitBytes = 1 << 16
    private let pageBytes = Int(sysconf(Int32(_SC_PAGESIZE)))
    /// One header's slot: its size rounded up to 16 bytes.
    private let slotBytes = (MemoryLayout<AudioQueueBuffer>.stride + 15) & ~15

    private struct State {
        /// The next header's address, the end of the writable part and the end of the region.
        var next: UInt = 0
        var committed: UInt = 0
        var end: UInt = 0
        /// The page headers are being placed on.
        var currentPage: UInt = 0
        /// Headers handed out and not yet retired, per page (by page address), for pages that
        /// still have any, and for ``currentPage``.
        var livePerPage: [UInt: Int] = [:]
    }
    private let state = Mutex(State())

    /// A new header, its memory uninitialized; `nil` when no address space is left.
    func allocate() -> AudioQueueBufferRef? {
        state.withLock { s -> AudioQueueBufferRef? in
            let pageMask = UInt(pageBytes - 1)
            // A header never straddles a page, so that each page can be given back on its own.
            if s.next & ~pageMask != (s.next + UInt(slotBytes) - 1) & ~pageMask { s.next = (s.next + pageMask) & ~pageMask }
            if s.next + UInt(slotBytes) > s.end {
                guard reserveRegion(&s) else { return nil }
            }
            if s.next + UInt(slotBytes) > s.committed {
                let length = min(UInt(commitBytes), s.end - s.committed)
                guard mprotect(UnsafeMutableRawPointer(bitPattern: s.committed), Int(length), PROT_READ | PROT_WRITE) == 0 else { return nil }
                s.committed += length
            }
            let address = s.next
            let page = address & ~pageMask
            if page != s.currentPage {
                // The page left behind goes back now if all its headers were retired already.
                if s.livePerPage[s.currentPage] == 0 {
                    s.livePerPage[s.currentPage] = nil
                    giveBack(s.currentPage)
                }
                s.currentPage = page
            }
            s.next += UInt(slotBytes)
            s.livePerPage[page, default: 0] += 1
            return UnsafeMutableRawPointer(bitPattern: address)!.bindMemory(to: AudioQueueBuffer.self, capacity: 1)
        }
    }

    /// Retires a header that ``allocate()`` handed out: zeroes it, and gives its page back to the
    /// kernel when no header on it is in use and no new one will be placed there. Its address is
    /// never handed out again.
    func retire(_ header: AudioQueueBufferRef) {
        UnsafeMutableRawPointer(header).initializeMemory(as: UInt8.self, repeating: 0, count: MemoryLayout<AudioQueueBuffer>.size)
        state.withLock { s in
            let pageMask = UInt(pageBytes - 1)
            let page = UInt(bitPattern: header) & ~pageMask
            guard let count = s.livePerPage[page] else { preconditionFailure("a buffer header retired twice") }
            if count > 1 {
                s.livePerPage[page] = count - 1
            } else if page == s.currentPage {
                s.livePerPage[page] = 0  // headers will still be placed on it
            } else {
                s.livePerPage[page] = nil
                giveBack(page)
            }
        }
    }

    /// Reserves a new region of address space; the rest of the old one stays reserved and unused.
    private func reserveRegion(_ s: inout State) -> Bool {
        let region = mmap(nil, regionBytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
        guard let region, region != UnsafeMutableRawPointer(bitPattern: -1) else { return false }
        // The headers hold the only pointers to their buffers' memory: LeakSanitizer, which scans
        // the heap, globals and stacks but not other mappings, is told to scan this one too.
        Self.registerRootRegion?(region, regionBytes)
        let base = UInt(bitPattern: region)
        s.next = base
        s.committed = base
        s.end = base + UInt(regionBytes)
        return true
    }

    /// LeakSanitizer's `__lsan_register_root_region`, when this process runs under it.
    private static let registerRootRegion: (@convention(c) (UnsafeRawPointer?, Int) -> Void)? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__lsan_register_root_region") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (UnsafeRawPointer?, Int) -> Void).self)
    }()

    private func giveBack(_ page: UInt) {
        _ = madvise(UnsafeMutableRawPointer(bitPattern: page), pageBytes, MADV_DONTNEED)
    }
}
