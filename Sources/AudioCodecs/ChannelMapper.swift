/// Channel count changes between interleaved float buffers, as Apple's converters do them:
/// mono is copied to every output channel; many to mono is their average; otherwise channels are
/// matched by position and extra output channels are silent.
package enum ChannelMapper {
    package static func map(_ input: [Float], from inChannels: Int, to outChannels: Int, frames: Int, into output: inout [Float]) {
        input.withUnsafeBufferPointer { src in
            map(src.baseAddress!, from: inChannels, to: outChannels, frames: frames, into: &output)
        }
    }

    package static func map(
        _ src: UnsafePointer<Float>, from inChannels: Int, to outChannels: Int, frames: Int, into output: inout [Float]
    ) {
        if inChannels == outChannels {
            output.append(contentsOf: UnsafeBufferPointer(start: src, count: frames * inChannels))
            return
        }
        output.reserveCapacity(output.count + frames * outChannels)
        if inChannels == 1 {
            for i in 0..<frames {
                for _ in 0..<outChannels { output.append(src[i]) }
            }
        } else if outChannels == 1 {
            let scale = 1 / Float(inChannels)
            for i in 0..<frames {
                var sum: Float = 0
                for c in 0..<inChannels { sum += src[i * inChannels + c] }
                output.append(sum * scale)
            }
        } else {
            for i in 0..<frames {
                for c in 0..<outChannels { output.append(c < inChannels ? src[i * inChannels + c] : 0) }
            }
        }
    }
}
