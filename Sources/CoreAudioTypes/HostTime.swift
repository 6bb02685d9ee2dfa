#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Synchronization

/// The host clock's stand-in while a test's virtual backend is the process's audio system: the
/// virtual device's time in nanoseconds, which only the test's advancing of its clock moves.
/// `UInt64.max` (the default): none, the real clock is the host clock.
private let virtualHostTime = Atomic<UInt64>(.max)

/// Makes `nanoseconds` the host time until the next call; `nil` gives the host clock back to
/// `CLOCK_MONOTONIC`. For the virtual backend (AudioHAL), whose clock only a test moves.
package func setVirtualHostTime(_ nanoseconds: UInt64?) {
    virtualHostTime.store(nanoseconds ?? .max, ordering: .releasing)
}

/// The virtual backend's host time while it stands in for the host clock, else `nil`.
@inline(__always)
package func currentVirtualHostTime() -> UInt64? {
    let virtual = virtualHostTime.load(ordering: .acquiring)
    return virtual == .max ? nil : virtual
}

/// The host clock: `CLOCK_MONOTONIC` in nanoseconds (on the virtual backend, its clock).
///
/// Apple's host time is `mach_absolute_time()` (CoreAudio's `AudioGetCurrentHostTime`); on Linux
/// the monotonic clock plays that part, so one host tick is one nanosecond.
@discardableResult
public func AudioGetCurrentHostTime() -> UInt64 {
    if let virtual = currentVirtualHostTime() { return virtual }
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}

/// Host ticks per second: 1e9 on Linux.
@discardableResult
public func AudioGetHostClockFrequency() -> Float64 { 1e9 }

/// Converts host ticks to nanoseconds (the identity on Linux).
@discardableResult
public func AudioConvertHostTimeToNanos(_ inHostTime: UInt64) -> UInt64 { inHostTime }

/// Converts nanoseconds to host ticks (the identity on Linux).
@discardableResult
public func AudioConvertNanosToHostTime(_ inNanos: UInt64) -> UInt64 { inNanos }
