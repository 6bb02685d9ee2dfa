/// Float samples to 16-bit integers, the hottest conversion of the library (every 16-bit file
/// written, every 16-bit client buffer read).
package enum Int16Samples {
    /// `x` scaled by 32768, rounded to the nearest integer (ties to even) and clipped to
    /// −32768…32767, as `lrintf(x * 32768)` clipped gives it, bit for bit over every `Float`
    /// (NaN, +∞ and values from 2⁶³ up give −32768, lrintf's overflow value clipped). No libm
    /// call: after clipping, adding 1.5 × 2²³ leaves the rounded integer in the low mantissa bits,
    /// so loops of it vectorize.
    @inline(__always)
    package static func quantize(_ x: Float) -> UInt16 {
        let y = x * 32768
        let c: Float = y < 0x1p63 ? (y > -32768 ? (y < 32767 ? y : 32767) : -32768) : -32768
        return UInt16(truncatingIfNeeded: (c + 0x1.8p23).bitPattern &- 0x4B40_0000)
    }

    /// Writes `count` samples from `source` to `destination` (any alignment) as 16-bit integers in
    /// the given byte order.
    package static func store(_ source: UnsafePointer<Float>, count: Int, into destination: UnsafeMutableRawPointer, bigEndian: Bool) {
        if bigEndian {
            for i in 0..<count { destination.storeBytes(of: quantize(source[i]).bigEndian, toByteOffset: i &* 2, as: UInt16.self) }
        } else {
            for i in 0..<count { destination.storeBytes(of: quantize(source[i]).littleEndian, toByteOffset: i &* 2, as: UInt16.self) }
        }
    }
}
