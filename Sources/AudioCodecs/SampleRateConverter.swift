internal import CFFmpeg

/// Changes the sample rate of interleaved 32-bit float with libswresample; channels stay as they are.
///
/// Runs on the caller's thread and allocates; never use it on a real-time thread.
package final class SampleRateConverter {
    package let inputRate: Int
    package let outputRate: Int
    package let channels: Int
    private var context: OpaquePointer?

    /// Apple's sample rate converter quality, 0 (min) … 127 (max), picks the filter length.
    package init(from inputRate: Int, to outputRate: Int, channels: Int, quality: Int = 64) throws {
        _ = quietFFmpeg
        guard inputRate > 0, outputRate > 0, inputRate <= 768_000, outputRate <= 768_000, (1...64).contains(channels) else {
            throw CodecError(.unsupported, "cannot convert \(inputRate) Hz to \(outputRate) Hz with \(channels) channels")
        }
        self.inputRate = inputRate
        self.outputRate = outputRate
        self.channels = channels
        var inLayout = AVChannelLayout()
        var outLayout = AVChannelLayout()
        av_channel_layout_default(&inLayout, Int32(channels))
        av_channel_layout_default(&outLayout, Int32(channels))
        defer {
            av_channel_layout_uninit(&inLayout)
            av_channel_layout_uninit(&outLayout)
        }
        var swr: OpaquePointer?
        var status = swr_alloc_set_opts2(
            &swr, &outLayout, AV_SAMPLE_FMT_FLT, Int32(outputRate), &inLayout, AV_SAMPLE_FMT_FLT, Int32(inputRate), 0, nil)
        guard status >= 0, let swr else { throw CodecError("creating a sample rate converter", code: status) }
        context = swr
        let (filter, phase): (Int64, Int64) =
            switch quality {
            case ..<32: (8, 8)
            case ..<64: (16, 10)
            case ..<96: (32, 10)
            case ..<127: (48, 11)
            default: (64, 12)
            }
        av_opt_set_int(UnsafeMutableRawPointer(swr), "filter_size", filter, 0)
        av_opt_set_int(UnsafeMutableRawPointer(swr), "phase_shift", phase, 0)
        status = swr_init(swr)
        guard status >= 0 else { throw CodecError("starting a sample rate converter", code: status) }
    }

    deinit { swr_free(&context) }

    /// Converts `frames` frames and appends the result to `output`; returns frames appended.
    @discardableResult
    package func convert(_ input: UnsafePointer<Float>?, frames: Int, into output: inout [Float]) throws -> Int {
        guard let context else { return 0 }
        let capacity = Int(swr_get_out_samples(context, Int32(frames))) + 16
        let base = output.count
        output.append(contentsOf: repeatElement(0, count: capacity * channels))
        let produced = output.withUnsafeMutableBufferPointer { out -> Int32 in
            var outPlane: UnsafeMutablePointer<UInt8>? = UnsafeMutableRawPointer(out.baseAddress! + base).assumingMemoryBound(to: UInt8.self)
            var inPlane: UnsafePointer<UInt8>? = input.map { UnsafeRawPointer($0).assumingMemoryBound(to: UInt8.self) }
            return withUnsafeMutablePointer(to: &outPlane) { outPtr in
                withUnsafeMutablePointer(to: &inPlane) { inPtr in
                    swr_convert(context, outPtr, Int32(capacity), input == nil ? nil : inPtr, Int32(frames))
                }
            }
        }
        guard produced >= 0 else {
            output.removeLast(capacity * channels)
            throw CodecError("converting the sample rate", code: produced)
        }
        output.removeLast((capacity - Int(produced)) * channels)
        return Int(produced)
    }

    /// Input frames the filter holds: what it still owes for the input so far, at the input rate.
    package var heldInputFrames: Int {
        guard let context else { return 0 }
        return Int(swr_get_delay(context, Int64(inputRate)))
    }

    /// Appends the frames still inside the filter at the end of the stream.
    @discardableResult
    package func finish(into output: inout [Float]) throws -> Int {
        try convert(nil, frames: 0, into: &output)
    }
}
