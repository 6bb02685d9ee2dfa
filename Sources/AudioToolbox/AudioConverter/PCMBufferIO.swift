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
            if nativeFloat {
                for c in 0..<channels {
                    guard let data = list[c].mData else { continue }
                    let plane = data.assumingMemoryBound(to: Float.self) + offset
                    for i in 0..<frames { dst[i &* channels &+ c] = plane[i] }
                }
                return
            }
            withUnsafeTemporaryAllocation(of: Float.self, capacity: frames) { plane in
                let p = plane.baseAddress!
                for c in 0..<channels {
                    guard let data = list[c].mData else { continue }
                    buffer.decode(data + offset * bytesPerFrame, frames: frames, into: p)
                    for i in 0..<frames { dst[i &* channels &+ c] = p[i] }
                }
            }
        }
    }

    /// Native-endian 32-bit float: a plane is copied, not converted.
    private var nativeFloat: Bool { buffer.sample == .float32 && buffer.bigEndian == (1.bigEndian == 1) }

    /// Writes `frames` interleaved float frames from `source` into `list` at frame `offset`.
    func write(_ source: UnsafePointer<Float>, frames: Int, into list: UnsafeMutableAudioBufferListPointer, offset: Int = 0) {
        guard frames > 0 else { return }
        if !nonInterleaved {
            guard let data = list[0].mData else { return }
            buffer.encode(source, frames: frames, into: data + offset * bytesPerFrame)
            return
        }
        if nativeFloat {
            for c in 0..<channels {
                guard let data = list[c].mData else { continue }
                let plane = data.assumingMemoryBound(to: Float.self) + offset
                for i in 0..<frames { plane[i] = source[i &* channels &+ c] }
            }
            return
        }
        withUnsafeTemporaryAllocation(of: Float.self, capacity: frames) { plane in
            let p = plane.baseAddress!
            for c in 0..<channels {
                guard let data = list[c].mData else { continue }
                for i in 0..<frames { p[i] = source[i &* channels &+ c] }
                buffer.encode(p, frames: frames, into: data + offset * bytesPerFrame)
            }
        }
    }
}
