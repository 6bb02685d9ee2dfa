#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The host clock: `CLOCK_MONOTONIC` in nanoseconds.
///
/// Apple's host time is `mach_absolute_time()` (CoreAudio's `AudioGetCurrentHostTime`); on Linux
/// the monotonic clock plays that part, so one host tick is one nanosecond.
@discardableResult
public func AudioGetCurrentHostTime() -> UInt64 {
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
