internal import AudioCodecs
import Glibc

/// A linear PCM layout the queues convert to and from the HAL's 32-bit float, parsed once from an
/// ``AudioStreamBasicDescription``.
///
/// Supported: signed 8/16/24/32-bit integers (24-bit packed in 3 bytes, or in 4 bytes aligned high
/// or low), unsigned 8-bit, 32/64-bit float; either byte order; interleaved; 1–8 channels;
/// 1 Hz … 384 kHz (the server's limit).
struct LinearPCMFormat: Equatable {
    enum Sample: Equatable {
        case uint8, int8, int16, int24, int32, float32, float64
        /// 24 significant bits in a 32-bit container; `high`: the top three bytes hold them.
        case int24in32(high: Bool)
    }

    let sample: Sample
    let bigEndian: Bool
    let channels: Int
    let bytesPerSample: Int
    let sampleRate: Double

    var bytesPerFrame: Int { bytesPerSample * channels }

    /// Parses `asbd`; `nil` when it is not linear PCM this type can carry.
    init?(_ asbd: AudioStreamBasicDescription) {
        guard asbd.mFormatID == kAudioFormatLinearPCM,
            asbd.mSampleRate > 0, asbd.mSampleRate <= 384_000, asbd.mSampleRate.isFinite,
            (1...8).contains(asbd.mChannelsPerFrame),
            asbd.mFramesPerPacket == 1,
            asbd.mFormatFlags & kAudioFormatFlagIsNonInterleaved == 0 || asbd.mChannelsPerFrame == 1
        else { return nil }
        let flags = asbd.mFormatFlags
        let channels = Int(asbd.mChannelsPerFrame)
        guard asbd.mBytesPerFrame % asbd.mChannelsPerFrame == 0 else { return nil }
        let bytes = Int(asbd.mBytesPerFrame) / channels
        let bits = Int(asbd.mBitsPerChannel)
        let sample: Sample
        if flags & kAudioFormatFlagIsFloat != 0 {
            switch (bits, bytes) {
            case (32, 4): sample = .float32
            case (64, 8): sample = .float64
            default: return nil
            }
        } else if flags & kAudioFormatFlagIsSignedInteger != 0 {
            switch (bits, bytes) {
            case (8, 1): sample = .int8
            case (16, 2): sample = .int16
            case (24, 3): sample = .int24
            case (24, 4): sample = .int24in32(high: flags & kAudioFormatFlagIsAlignedHigh != 0)
            case (32, 4): sample = .int32
            default: return nil
            }
        } else {
            guard bits == 8, bytes == 1 else { return nil }
            sample = .uint8
        }
        guard asbd.mBytesPerPacket == asbd.mBytesPerFrame else { return nil }
        self.sample = sample
        self.bigEndian = flags & kAudioFormatFlagIsBigEndian != 0
        self.channels = channels
        self.bytesPerSample = bytes
        self.sampleRate = asbd.mSampleRate
    }

    /// Converts `frames` frames of this format at `source` to interleaved float at `destination`,
    /// multiplying by `gain`.
    func decode(_ source: UnsafeRawPointer, frames: Int, into destination: UnsafeMutablePointer<Float>, gain: Float = 1) {
        let n = frames * channels
        let s = bigEndian
        switch sample {
        case .float32:
            let p = source.assumingMemoryBound(to: UInt32.self)
            if s {
                for i in 0..<n { destination[i] = Float(bitPattern: UInt32(bigEndian: p[i])) * gain }
            } else {
                for i in 0..<n { destination[i] = Float(bitPattern: UInt32(littleEndian: p[i])) * gain }
            }
        case .float64:
            for i in 0..<n {
                let raw = source.loadUnaligned(fromByteOffset: i * 8, as: UInt64.self)
                destination[i] = Float(Double(bitPattern: s ? UInt64(bigEndian: raw) : UInt64(littleEndian: raw))) * gain
            }
        case .int16:
            // The hot case (every 16-bit buffer enqueued): one branch-free loop per byte order.
            let scale = gain / 32768
            if s {
                for i in 0..<n {
                    let raw = source.loadUnaligned(fromByteOffset: i &* 2, as: UInt16.self)
                    destination[i] = Float(Int16(bitPattern: UInt16(bigEndian: raw))) * scale
                }
            } else {
                for i in 0..<n {
                    let raw = source.loadUnaligned(fromByteOffset: i &* 2, as: UInt16.self)
                    destination[i] = Float(Int16(bitPattern: UInt16(littleEndian: raw))) * scale
                }
            }
        case .int32:
            let scale = gain / 2_147_483_648
            for i in 0..<n {
                let raw = source.loadUnaligned(fromByteOffset: i * 4, as: UInt32.self)
                destination[i] = Float(Int32(bitPattern: s ? UInt32(bigEndian: raw) : UInt32(littleEndian: raw))) * scale
            }
        case .int24in32(let high):
            let scale = gain / 8_388_608
            for i in 0..<n {
                let raw = source.loadUnaligned(fromByteOffset: i * 4, as: UInt32.self)
                let v = Int32(bitPattern: s ? UInt32(bigEndian: raw) : UInt32(littleEndian: raw))
                destination[i] = Float(high ? v >> 8 : (v << 8) >> 8) * scale
            }
        case .int24:
            let scale = gain / 8_388_608
            let b = source.assumingMemoryBound(to: UInt8.self)
            for i in 0..<n {
                let (x, y, z) = (Int32(b[3 * i]), Int32(b[3 * i + 1]), Int32(b[3 * i + 2]))
                let v = s ? (x << 16 | y << 8 | z) : (z << 16 | y << 8 | x)
                destination[i] = Float((v << 8) >> 8) * scale
            }
        case .int8:
            let b = source.assumingMemoryBound(to: Int8.self)
            let scale = gain / 128
            for i in 0..<n { destination[i] = Float(b[i]) * scale }
        case .uint8:
            let b = source.assumingMemoryBound(to: UInt8.self)
            let scale = gain / 128
            for i in 0..<n { destination[i] = (Float(b[i]) - 128) * scale }
        }
    }

    /// Converts `frames` frames of interleaved float at `source` into this format at `destination`,
    /// clipping to full scale and rounding to the nearest integer.
    func encode(_ source: UnsafePointer<Float>, frames: Int, into destination: UnsafeMutableRawPointer) {
        let n = frames * channels
        let s = bigEndian
        @inline(__always) func integer(_ x: Float, _ scale: Float, _ lo: Float, _ hi: Float) -> Int64 {
            Int64(lrintf(min(max(x * scale, lo), hi)))  // cvtss2si, round to nearest even
        }
        switch sample {
        case .float32:
            if s {
                for i in 0..<n { destination.storeBytes(of: source[i].bitPattern.bigEndian, toByteOffset: i &* 4, as: UInt32.self) }
            } else {
                for i in 0..<n { destination.storeBytes(of: source[i].bitPattern.littleEndian, toByteOffset: i &* 4, as: UInt32.self) }
            }
        case .float64:
            for i in 0..<n {
                let bits = Double(source[i]).bitPattern
                destination.storeBytes(of: s ? bits.bigEndian : bits.littleEndian, toByteOffset: i * 8, as: UInt64.self)
            }
        case .int16:
            // The hot case (every 16-bit file and device): a loop without libm calls.
            Int16Samples.store(source, count: n, into: destination, bigEndian: s)
        case .int32:
            for i in 0..<n {
                let v = UInt32(bitPattern: Int32(clamping: llrint(Double(source[i]) * 2_147_483_648)))
                destination.storeBytes(of: s ? v.bigEndian : v.littleEndian, toByteOffset: i * 4, as: UInt32.self)
            }
        case .int24in32(let high):
            for i in 0..<n {
                let v24 = Int32(integer(source[i], 8_388_608, -8_388_608, 8_388_607))
                let v = UInt32(bitPattern: high ? v24 << 8 : v24)
                destination.storeBytes(of: s ? v.bigEndian : v.littleEndian, toByteOffset: i * 4, as: UInt32.self)
            }
        case .int24:
            let b = destination.assumingMemoryBound(to: UInt8.self)
            for i in 0..<n {
                let v = UInt32(bitPattern: Int32(integer(source[i], 8_388_608, -8_388_608, 8_388_607)))
                let (lo, mid, hi) = (UInt8(v & 0xFF), UInt8((v >> 8) & 0xFF), UInt8((v >> 16) & 0xFF))
                if s { (b[3 * i], b[3 * i + 1], b[3 * i + 2]) = (hi, mid, lo) } else { (b[3 * i], b[3 * i + 1], b[3 * i + 2]) = (lo, mid, hi) }
            }
        case .int8:
            let b = destination.assumingMemoryBound(to: Int8.self)
            for i in 0..<n { b[i] = Int8(integer(source[i], 128, -128, 127)) }
        case .uint8:
            let b = destination.assumingMemoryBound(to: UInt8.self)
            for i in 0..<n { b[i] = UInt8(integer(source[i], 128, -128, 127) + 128) }
        }
    }
}
