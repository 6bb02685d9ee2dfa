internal import CFFmpeg
import Glibc

/// Moves samples between FFmpeg frames (any sample format, planar or packed) and interleaved
/// 32-bit float, the one layout the rest of the library works in.
enum SampleLayout {
    /// Appends `frame`'s samples to `output` as interleaved float.
    static func appendInterleaved(_ frame: UnsafeMutablePointer<AVFrame>, to output: inout [Float]) {
        let frames = Int(frame.pointee.nb_samples)
        let channels = Int(frame.pointee.ch_layout.nb_channels)
        guard frames > 0, channels > 0 else { return }
        let format = AVSampleFormat(rawValue: frame.pointee.format)
        let planar = av_sample_fmt_is_planar(format) != 0
        let base = output.count
        output.append(contentsOf: repeatElement(0, count: frames * channels))
        output.withUnsafeMutableBufferPointer { out in
            let dst = out.baseAddress! + base
            withUnsafeExtendedData(frame) { data in
                if planar && channels == 2 && av_get_packed_sample_fmt(format) == AV_SAMPLE_FMT_FLT {
                    // The common case (AAC, MP3, Opus in stereo): both planes in one pass.
                    let l = UnsafeRawPointer(data[0]!).assumingMemoryBound(to: Float.self)
                    let r = UnsafeRawPointer(data[1]!).assumingMemoryBound(to: Float.self)
                    for i in 0..<frames {
                        dst[i &* 2] = l[i]
                        dst[i &* 2 &+ 1] = r[i]
                    }
                    return
                }
                for c in 0..<channels {
                    let plane = UnsafeRawPointer(data[planar ? c : 0]!)
                    let first = planar ? 0 : c
                    let step = planar ? 1 : channels
                    convert(plane, format: format, first: first, step: step, frames: frames, into: dst + c, stride: channels)
                }
            }
        }
    }

    private static func convert(
        _ src: UnsafeRawPointer, format: AVSampleFormat, first: Int, step: Int, frames: Int,
        into dst: UnsafeMutablePointer<Float>, stride: Int
    ) {
        switch av_get_packed_sample_fmt(format) {
        case AV_SAMPLE_FMT_FLT:
            let p = src.assumingMemoryBound(to: Float.self) + first
            if step == 1 {
                for i in 0..<frames { dst[i &* stride] = p[i] }  // planar: AAC, MP3, Opus
            } else {
                for i in 0..<frames { dst[i &* stride] = p[i &* step] }
            }
        case AV_SAMPLE_FMT_DBL:
            let p = src.assumingMemoryBound(to: Double.self)
            for i in 0..<frames { dst[i * stride] = Float(p[first + i * step]) }
        case AV_SAMPLE_FMT_S16:
            let p = src.assumingMemoryBound(to: Int16.self)
            for i in 0..<frames { dst[i * stride] = Float(p[first + i * step]) * (1 / 32768) }
        case AV_SAMPLE_FMT_S32:
            let p = src.assumingMemoryBound(to: Int32.self)
            for i in 0..<frames { dst[i * stride] = Float(Double(p[first + i * step]) * (1 / 2147483648.0)) }
        case AV_SAMPLE_FMT_S64:
            let p = src.assumingMemoryBound(to: Int64.self)
            for i in 0..<frames { dst[i * stride] = Float(Double(p[first + i * step]) / 9223372036854775808.0) }
        case AV_SAMPLE_FMT_U8:
            let p = src.assumingMemoryBound(to: UInt8.self)
            for i in 0..<frames { dst[i * stride] = (Float(p[first + i * step]) - 128) * (1 / 128) }
        default:
            for i in 0..<frames { dst[i * stride] = 0 }
        }
    }

    /// Calls `body` with the frame's plane pointers (`extended_data`).
    private static func withUnsafeExtendedData(
        _ frame: UnsafeMutablePointer<AVFrame>, _ body: (UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>) -> Void
    ) {
        body(frame.pointee.extended_data)
    }

    /// Writes `frames` interleaved float frames from `src` into `frame`'s buffers (already
    /// allocated for `format`), clipping and rounding to integers. `bits` is the significant bit
    /// depth for 32-bit integer formats (24 for 24-bit sources), so lossless encoders see exact
    /// values.
    static func fill(
        _ frame: UnsafeMutablePointer<AVFrame>, from src: UnsafePointer<Float>, frames: Int, channels: Int, bits: Int
    ) {
        let format = AVSampleFormat(rawValue: frame.pointee.format)
        let planar = av_sample_fmt_is_planar(format) != 0
        let data = frame.pointee.extended_data!
        let hostBigEndian = UInt16(1).bigEndian == 1
        if format == AV_SAMPLE_FMT_S16 {
            // Interleaved 16-bit: one contiguous run, in the host's byte order.
            Int16Samples.store(src, count: frames * channels, into: data[0]!, bigEndian: hostBigEndian)
            return
        }
        if format == AV_SAMPLE_FMT_S16P {
            // Planar 16-bit (IMA4's encoder): quantized as one contiguous run (which vectorizes),
            // then dealt out to the planes.
            withUnsafeTemporaryAllocation(of: UInt16.self, capacity: frames * channels) { run in
                let q = run.baseAddress!
                Int16Samples.store(src, count: frames * channels, into: UnsafeMutableRawPointer(q), bigEndian: hostBigEndian)
                for c in 0..<channels {
                    let p = UnsafeMutableRawPointer(data[c]!).assumingMemoryBound(to: UInt16.self)
                    for i in 0..<frames { p[i] = q[i &* channels &+ c] }
                }
            }
            return
        }
        for c in 0..<channels {
            let plane = UnsafeMutableRawPointer(data[planar ? c : 0]!)
            let first = planar ? 0 : c
            let step = planar ? 1 : channels
            switch av_get_packed_sample_fmt(format) {
            case AV_SAMPLE_FMT_FLT:
                let p = plane.assumingMemoryBound(to: Float.self)
                for i in 0..<frames { p[first + i * step] = src[i * channels + c] }
            case AV_SAMPLE_FMT_DBL:
                let p = plane.assumingMemoryBound(to: Double.self)
                for i in 0..<frames { p[first + i * step] = Double(src[i * channels + c]) }
            case AV_SAMPLE_FMT_S16:
                let p = plane.assumingMemoryBound(to: Int16.self)
                for i in 0..<frames { p[first &+ i &* step] = Int16(bitPattern: Int16Samples.quantize(src[i &* channels &+ c])) }
            case AV_SAMPLE_FMT_S32:
                let p = plane.assumingMemoryBound(to: Int32.self)
                let depth = min(max(bits, 17), 32)
                let scale = Double(1 << (depth - 1))
                let shift = Int32(32 - depth)
                let top = scale - 1
                for i in 0..<frames {
                    let v = Double(llrint(Double(src[i * channels + c]) * scale))
                    p[first + i * step] = Int32(min(max(v, -scale), top)) << shift
                }
            case AV_SAMPLE_FMT_U8:
                let p = plane.assumingMemoryBound(to: UInt8.self)
                for i in 0..<frames { p[first + i * step] = UInt8(truncatingIfNeeded: lrintf(min(max(src[i * channels + c] * 128, -128), 127)) + 128) }
            default:
                break
            }
        }
    }
}
