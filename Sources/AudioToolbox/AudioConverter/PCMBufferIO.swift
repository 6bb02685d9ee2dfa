import CoreAudioTypes

/// Linear PCM in an `AudioBufferList`, interleaved (one buffer) or not (one buffer per channel),
/// moved to and from interleaved 32-bit float.
struct PCMBufferIO {
    let format: AudioStreamBasicDescription
    let channels: Int
    let nonInterleaved: Bool
    /// The layout of one buffer: all channels, or one when non-interleaved.
    let buffer: LinearPCMFormat
    var bytesPerFrame: Int { Int(format.mBytesPerFrame) }

    init?(_ format: AudioStreamBasicDescription) {
        let nonInterleaved = format.mFormatFlags & kAudioFormatFlagIsNonInterleaved != 0
        var one = format
        if nonInterleaved {
            one.mChannelsPerFrame = 1
            one.mFormatFlags &= ~kAudioFormatFlagIsNonInterleaved
        }
        guard format.mChannelsPerFrame >= 1, format.mChannelsPerFrame <= 64 else { return nil }
        if nonInterleaved || format.mChannelsPerFrame <= 8 {
            guard let layout = LinearPCMFormat(one) else { return nil }
            buffer = layout
        } else {
            return nil
        }
        self.format = format
        self.channels = Int(format.mChannelsPerFrame)
        self.nonInterleaved = nonInterleaved
    }

    /// Number of buffers an `AudioBufferList` for this format has.
    var bufferCount: Int { nonInterleaved ? channels : 1 }

    /// Frames the list holds (the smallest over its buffers).
    func frames(in list: UnsafeMutableAudioBufferListPointer) -> Int {
        guard list.count >= bufferCount, bytesPerFrame > 0 else { return 0 }
        return (0..<bufferCount).map { Int(list[$0].mDataByteSize) / bytesPerFrame }.min() ?? 0
    }

    /// Appends `frames` frames from `list`, starting at frame `offset`, to `output` as interleaved float.
    func read(_ list: UnsafeMutableAudioBufferListPointer, offset: Int = 0, frames: Int, into output: inout [Float]) {
        guard frames > 0 else { return }
        let base = output.count
        output.append(contentsOf: repeatElement(0, count: frames * channels))
        output.withUnsafeMutableBufferPointer { out in
            let dst = out.baseAddress! + base
            if !nonInterleaved {
                guard let data = list[0].mData else { return }
                buffer.decode(data + offset * bytesPerFrame, frames: frames, into: dst)
                return
            }
            var plane = [Float](repeating: 0, count: frames)
            for c in 0..<channels {
                guard let data = list[c].mData else { continue }
                plane.withUnsafeMutableBufferPointer { buffer.decode(data + offset * bytesPerFrame, frames: frames, into: $0.baseAddress!) }
                for i in 0..<frames { dst[i * channels + c] = plane[i] }
            }
        }
    }

    /// Writes `frames` interleaved float frames from `source` into `list` at frame `offset`.
    func write(_ source: UnsafePointer<Float>, frames: Int, into list: UnsafeMutableAudioBufferListPointer, offset: Int = 0) {
        guard frames > 0 else { return }
        if !nonInterleaved {
            guard let data = list[0].mData else { return }
            buffer.encode(source, frames: frames, into: data + offset * bytesPerFrame)
            return
        }
        var plane = [Float](repeating: 0, count: frames)
        for c in 0..<channels {
            guard let data = list[c].mData else { continue }
            for i in 0..<frames { plane[i] = source[i * channels + c] }
            plane.withUnsafeBufferPointer { buffer.encode($0.baseAddress!, frames: frames, into: data + offset * bytesPerFrame) }
        }
    }
}
