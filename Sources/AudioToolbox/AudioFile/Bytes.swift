/// Reads big- and little-endian fields from a byte array without trapping: a read past the end
/// yields `nil`, which parsers turn into Apple's invalid-file errors.
struct ByteReader {
    let bytes: [UInt8]
    var position: Int = 0

    init(_ bytes: [UInt8], at position: Int = 0) {
        self.bytes = bytes
        self.position = position
    }

    var remaining: Int { max(bytes.count - position, 0) }

    mutating func skip(_ n: Int) -> Bool {
        guard n >= 0, n <= remaining else { return false }
        position += n
        return true
    }

    mutating func take(_ n: Int) -> ArraySlice<UInt8>? {
        guard n >= 0, n <= remaining else { return nil }
        defer { position += n }
        return bytes[position..<(position + n)]
    }

    mutating func u8() -> UInt8? { take(1)?.first }

    mutating func be<T: FixedWidthInteger>(_: T.Type = T.self) -> T? {
        guard let s = take(MemoryLayout<T>.size) else { return nil }
        return s.reduce(T.zero) { ($0 << 8) | T(truncatingIfNeeded: $1) }
    }

    mutating func le<T: FixedWidthInteger>(_: T.Type = T.self) -> T? {
        guard let s = take(MemoryLayout<T>.size) else { return nil }
        return s.reversed().reduce(T.zero) { ($0 << 8) | T(truncatingIfNeeded: $1) }
    }

    mutating func fourCC() -> UInt32? { be(UInt32.self) }

    mutating func beDouble() -> Double? { be(UInt64.self).map(Double.init(bitPattern:)) }

    /// An 80-bit IEEE extended float (AIFF's sample rate).
    mutating func extended80() -> Double? {
        guard let exponentWord = be(UInt16.self), let mantissa = be(UInt64.self) else { return nil }
        let sign: Double = exponentWord & 0x8000 != 0 ? -1 : 1
        let exponent = Int(exponentWord & 0x7FFF)
        if exponent == 0 && mantissa == 0 { return 0 }
        if exponent == 0x7FFF { return .nan }
        return sign * Double(mantissa) * pow2(exponent - 16383 - 63)
    }

    /// A variable-length integer as CAF's packet table stores it: 7 bits per byte, high bit set
    /// on every byte but the last, most significant first.
    mutating func cafVarint() -> Int64? {
        var value: Int64 = 0
        for _ in 0..<9 {
            guard let b = u8() else { return nil }
            value = (value << 7) | Int64(b & 0x7F)
            if b & 0x80 == 0 { return value }
        }
        return nil
    }
}

private func pow2(_ e: Int) -> Double {
    var result = 1.0
    if e >= 0 { for _ in 0..<min(e, 2000) { result *= 2 } } else { for _ in 0..<min(-e, 2000) { result /= 2 } }
    return result
}

/// Builds big- and little-endian byte strings for file headers.
struct ByteWriter {
    var bytes: [UInt8] = []

    mutating func be<T: FixedWidthInteger>(_ v: T) {
        let n = MemoryLayout<T>.size
        for i in (0..<n).reversed() { bytes.append(UInt8(truncatingIfNeeded: v >> (i * 8))) }
    }

    mutating func le<T: FixedWidthInteger>(_ v: T) {
        let n = MemoryLayout<T>.size
        for i in 0..<n { bytes.append(UInt8(truncatingIfNeeded: v >> (i * 8))) }
    }

    mutating func fourCC(_ s: String) { be(CoreAudioTypes.fourCC(s)) }

    mutating func beDouble(_ v: Double) { be(v.bitPattern) }

    mutating func append<S: Sequence>(_ s: S) where S.Element == UInt8 { bytes.append(contentsOf: s) }

    /// An 80-bit IEEE extended float (AIFF's sample rate); `v` ≥ 0.
    mutating func extended80(_ v: Double) {
        guard v > 0, v.isFinite else {
            bytes.append(contentsOf: [UInt8](repeating: 0, count: 10))
            return
        }
        let exponent = v.exponent  // v = significand × 2^exponent, 1 ≤ significand < 2
        let mantissa = UInt64(v.significand * 9_223_372_036_854_775_808.0)  // × 2^63
        be(UInt16(exponent + 16383))
        be(mantissa)
    }

    mutating func cafVarint(_ v: Int64) {
        var groups: [UInt8] = [UInt8(v & 0x7F)]
        var rest = v >> 7
        while rest > 0 {
            groups.append(UInt8(rest & 0x7F) | 0x80)
            rest >>= 7
        }
        bytes.append(contentsOf: groups.reversed())
    }
}

import CoreAudioTypes
