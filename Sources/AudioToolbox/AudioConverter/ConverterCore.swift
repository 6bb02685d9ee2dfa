internal import AudioCodecs
import CoreAudioTypes

/// The conversion engine behind AudioConverter, ExtAudioFile and compressed audio queues:
/// source packets or PCM → interleaved float → channel count → sample rate → destination PCM or
/// packets. Everything in between is interleaved 32-bit float, which holds 24-bit integers exactly;
/// identical linear PCM formats are copied byte for byte instead.
///
/// Not thread-safe; allocates; never on a real-time thread.
final class ConverterCore {
    private(set) var source: AudioStreamBasicDescription
    private(set) var destination: AudioStreamBasicDescription
    let sourcePCM: PCMBufferIO?
    let destinationPCM: PCMBufferIO?
    /// Same linear PCM layout on both sides and no channel reordering: bytes are copied.
    private(set) var passthrough: Bool
    private let sameLayout: Bool
    /// Destination channel `i` takes channel `channelOrder[i]` of the audio (after a change of
    /// channel count); `nil` keeps the order. Set through ``setChannelOrder(_:)``.
    private(set) var channelOrder: [Int]?

    var decompressionCookie: [UInt8] = []
    var bitRate: Int?
    var codecQuality: Int?
    var sampleRateConverterQuality = 0x60

    private var decoder: PacketDecoder?
    private var encoder: PacketEncoder?
    private var resampler: SampleRateConverter?
    private var resamplerChecked = false

    /// Destination-side float not yet handed out (PCM destinations).
    private var frames: [Float] = []
    private var framesStart = 0
    /// Source bytes not yet handed out, when ``passthrough``.
    private var passBytes: [UInt8] = []
    private var passStart = 0
    /// Encoded packets not yet handed out (compressed destinations), as runs: one packet, or a
    /// run of equal packets (µ-law comes out of FFmpeg thousands of one-byte packets at a time).
    private var packetBytes: [UInt8] = []
    private var runs: [(offset: Int, size: Int, frames: Int, packets: Int)] = []
    private var runStart = 0
    /// Packets of `runs[runStart]` already handed out.
    private var runConsumed = 0
    private(set) var availablePackets = 0
    /// Bytes of the packets not yet handed out.
    private(set) var availablePacketBytes = 0
    private var scratch: [Float] = []
    private var mapped: [Float] = []
    private(set) var inputEnded = false
    /// Padding the encoder added to fill its last packet.
    private(set) var remainderFrames = 0

    init(from source: AudioStreamBasicDescription, to destination: AudioStreamBasicDescription) throws(AudioFailure) {
        let src = try Self.complete(source, sampleRateFrom: nil)
        let dst = try Self.complete(destination, sampleRateFrom: src)
        self.source = src
        self.destination = dst
        sourcePCM = src.mFormatID == kAudioFormatLinearPCM ? PCMBufferIO(src) : nil
        destinationPCM = dst.mFormatID == kAudioFormatLinearPCM ? PCMBufferIO(dst) : nil
        if src.mFormatID == kAudioFormatLinearPCM && sourcePCM == nil {
            throw AudioFailure(kAudioConverterErr_FormatNotSupported, "the source linear PCM description is not supported: \(src.formatSummary)")
        }
        if dst.mFormatID == kAudioFormatLinearPCM && destinationPCM == nil {
            throw AudioFailure(kAudioConverterErr_FormatNotSupported, "the destination linear PCM description is not supported: \(dst.formatSummary)")
        }
        if sourcePCM == nil {
            guard CodecCatalog.info(src.mFormatID)?.canDecode == true else {
                throw AudioFailure(kAudioConverterErr_FormatNotSupported, "no decoder for '\(src.mFormatID.fourCharCodeString)'")
            }
        }
        if destinationPCM == nil {
            guard CodecCatalog.info(dst.mFormatID)?.canEncode == true else {
                throw AudioFailure(kAudioConverterErr_FormatNotSupported, "no encoder for '\(dst.mFormatID.fourCharCodeString)'")
            }
            if let rates = PacketEncoder.supportedSampleRates(dst.mFormatID), !rates.contains(Int(dst.mSampleRate)) {
                throw AudioFailure(
                    kAudioConverterErr_OutputSampleRateOutOfRange,
                    "'\(dst.mFormatID.fourCharCodeString)' cannot be encoded at \(Int(dst.mSampleRate)) Hz")
            }
        }
        sameLayout =
            sourcePCM != nil && destinationPCM != nil && src.mSampleRate == dst.mSampleRate
            && src.mFormatFlags == dst.mFormatFlags && src.mBitsPerChannel == dst.mBitsPerChannel
            && src.mBytesPerFrame == dst.mBytesPerFrame && src.mChannelsPerFrame == dst.mChannelsPerFrame
            && (src.mFormatFlags & kAudioFormatFlagIsNonInterleaved == 0 || src.mChannelsPerFrame == 1)
        passthrough = sameLayout
    }

    /// Reorders the destination's channels (`order[i]`: which channel destination channel `i`
    /// takes); an identity order or `nil` keeps them. Set before converting.
    func setChannelOrder(_ order: [Int]?) {
        let identity = order.map { $0 == Array(0..<$0.count) } ?? true
        channelOrder = identity ? nil : order
        passthrough = sameLayout && channelOrder == nil
    }

    /// Fills what Apple's converters fill in a partial description: packet shape from the format,
    /// the source's rate and channel count where the destination leaves them 0.
    static func complete(_ f: AudioStreamBasicDescription, sampleRateFrom other: AudioStreamBasicDescription?) throws(AudioFailure) -> AudioStreamBasicDescription {
        var d = f
        if d.mSampleRate == 0, let other { d.mSampleRate = other.mSampleRate }
        if d.mChannelsPerFrame == 0, let other { d.mChannelsPerFrame = other.mChannelsPerFrame }
        guard d.mSampleRate.isFinite, d.mSampleRate >= FormatLimits.sampleRates.lowerBound, d.mSampleRate <= 768_000 else {
            throw AudioFailure(other == nil ? kAudioConverterErr_InputSampleRateOutOfRange : kAudioConverterErr_OutputSampleRateOutOfRange,
                                   "sample rate \(d.mSampleRate) is out of range")
        }
        guard d.mChannelsPerFrame >= 1, d.mChannelsPerFrame <= 64 else {
            throw AudioFailure(kAudioConverterErr_FormatNotSupported, "\(d.mChannelsPerFrame) channels are not supported")
        }
        if d.mFormatID != kAudioFormatLinearPCM, let info = CodecCatalog.info(d.mFormatID) {
            if d.mFramesPerPacket == 0 { d.mFramesPerPacket = UInt32(info.framesPerPacket) }
            if d.mBytesPerPacket == 0 && info.isConstantBitRate { d.mBytesPerPacket = UInt32(info.bytesPerPacketPerChannel) * d.mChannelsPerFrame }
            if info.bytesPerPacketPerChannel > 0 && info.framesPerPacket == 1 {
                d.mBytesPerFrame = d.mBytesPerPacket
                d.mBitsPerChannel = 8
            }
        }
        try FormatLimits.check(d, status: kAudioConverterErr_FormatNotSupported)
        return d
    }

    var sourceIsPCM: Bool { sourcePCM != nil }
    var destinationIsPCM: Bool { destinationPCM != nil }

    /// Frames of encoder delay at the start of the output (AAC's priming), once known.
    var primingFrames: Int { (try? openEncoder())?.primingFrames ?? 0 }

    /// `AudioConverterPrimeInfo.trailingFrames`: frames the conversion holds or adds past the last
    /// input frame. An encoder's is its stream's remainder (the frames it emits beyond its priming
    /// and the input: the padding of its last packet and what its look-ahead flushes), known once
    /// the input has ended; a sample rate converter's is the input its filter still holds.
    var trailingFrames: Int {
        if let encoder, encoder.finished { return max(encoder.framesOut - encoder.primingFrames - encoder.framesIn, 0) }
        return resampler?.heldInputFrames ?? 0
    }

    /// The largest packet the destination format's encoder can produce (see
    /// ``PacketEncoder/maximumPacketSize``), or its constant packet size.
    var maximumOutputPacketSize: Int? {
        if destination.mBytesPerPacket > 0 { return Int(destination.mBytesPerPacket) }
        guard destinationPCM == nil else { return nil }
        // Asked before the first conversion, a throwaway encoder answers, so that a bit rate or
        // quality set afterwards still applies to the real one.
        return (encoder ?? (try? makeEncoder()))?.maximumPacketSize
    }

    /// The destination's magic cookie (after the encoder opens).
    var compressionCookie: [UInt8] { (try? openEncoder())?.cookie ?? [] }

    // MARK: Input

    /// Feeds `count` frames of source PCM from `list`.
    func pushPCM(_ list: UnsafeMutableAudioBufferListPointer, frames count: Int) throws(AudioFailure) {
        guard let sourcePCM, count > 0 else { return }
        if passthrough {
            guard let data = list[0].mData else { return }
            passBytes.append(contentsOf: UnsafeRawBufferPointer(start: data, count: count * Int(source.mBytesPerFrame)))
            return
        }
        scratch.removeAll(keepingCapacity: true)
        sourcePCM.read(list, frames: count, into: &scratch)
        try pushFloat(sourceRate: source.mSampleRate)
    }

    /// Feeds one packet of the compressed source.
    func pushPacket(_ bytes: UnsafeRawBufferPointer) throws(AudioFailure) {
        let decoder = try openDecoder()
        if destinationPCM != nil, channelOrder == nil, resamplerChecked, resampler == nil, source.mChannelsPerFrame == destination.mChannelsPerFrame,
            decoder.sampleRate == destination.mSampleRate
        {
            // Nothing between decoder and destination: decode straight into the output.
            let before = frames.count
            do {
                try decoder.decode(bytes, into: &frames)
            } catch {
                frames.removeSubrange(before...)
                throw AudioFailure(kAudioConverterErr_UnspecifiedError, "decoding failed: \(error)")
            }
            if decoder.sampleRate != destination.mSampleRate {
                // The stream changed its rate: what came out takes the general path.
                scratch.removeAll(keepingCapacity: true)
                scratch.append(contentsOf: frames[before...])
                frames.removeSubrange(before...)
                try pushFloat(sourceRate: decoder.sampleRate)
            }
            return
        }
        scratch.removeAll(keepingCapacity: true)
        do {
            try decoder.decode(bytes, into: &scratch)
        } catch {
            throw AudioFailure(kAudioConverterErr_UnspecifiedError, "decoding failed: \(error)")
        }
        try pushFloat(sourceRate: decoder.sampleRate)
    }

    /// The source has no more data: drains decoder, resampler and encoder.
    func endInput() throws(AudioFailure) {
        guard !inputEnded else { return }
        inputEnded = true
        if let decoder {
            scratch.removeAll(keepingCapacity: true)
            _ = try? decoder.finish(into: &scratch)
            try pushFloat(sourceRate: decoder.sampleRate)
        }
        if let resampler {
            mapped.removeAll(keepingCapacity: true)
            _ = try? resampler.finish(into: &mapped)
            try deliver(mapped)
        }
        if destinationPCM == nil {
            let encoder = try openEncoder()
            do {
                remainderFrames = try encoder.finish { bytes, frames in self.queuePacket(bytes, frames: frames) }
            } catch {
                throw AudioFailure(kAudioConverterErr_UnspecifiedError, "encoding failed: \(error)")
            }
        }
    }

    private func pushFloat(sourceRate: Double) throws(AudioFailure) {
        guard !scratch.isEmpty else { return }
        let inChannels = Int(source.mChannelsPerFrame)
        let outChannels = Int(destination.mChannelsPerFrame)
        let count = scratch.count / inChannels
        if !resamplerChecked || (resampler == nil && sourceRate != destination.mSampleRate) {
            resamplerChecked = true
            if sourceRate != destination.mSampleRate {
                do {
                    resampler = try SampleRateConverter(
                        from: Int(sourceRate), to: Int(destination.mSampleRate), channels: outChannels, quality: sampleRateConverterQuality)
                } catch {
                    throw AudioFailure(kAudioConverterErr_InputSampleRateOutOfRange, "\(error)")
                }
            }
        }
        if resampler == nil && inChannels == outChannels {
            try deliver(scratch)
            return
        }
        mapped.removeAll(keepingCapacity: true)
        if let resampler {
            var channelMapped: [Float] = []
            ChannelMapper.map(scratch, from: inChannels, to: outChannels, frames: count, into: &channelMapped)
            do {
                try channelMapped.withUnsafeBufferPointer { _ = try resampler.convert($0.baseAddress!, frames: count, into: &mapped) }
            } catch {
                throw AudioFailure(kAudioConverterErr_UnspecifiedError, "\(error)")
            }
        } else {
            ChannelMapper.map(scratch, from: inChannels, to: outChannels, frames: count, into: &mapped)
        }
        try deliver(mapped)
    }

    private func deliver(_ input: [Float]) throws(AudioFailure) {
        guard !input.isEmpty else { return }
        var samples = input
        if let order = channelOrder {
            let channels = order.count
            input.withUnsafeBufferPointer { src in
                samples.withUnsafeMutableBufferPointer { dst in
                    for f in 0..<(src.count / channels) {
                        for c in 0..<channels { dst[f * channels + c] = src[f * channels + order[c]] }
                    }
                }
            }
        }
        if destinationPCM != nil {
            frames.append(contentsOf: samples)
            return
        }
        let encoder = try openEncoder()
        let channels = Int(destination.mChannelsPerFrame)
        do {
            try samples.withUnsafeBufferPointer { buffer in
                try encoder.encode(buffer.baseAddress!, frames: buffer.count / channels) { bytes, frames in
                    self.queuePacket(bytes, frames: frames)
                }
            }
        } catch {
            throw AudioFailure(kAudioConverterErr_UnspecifiedError, "encoding failed: \(error)")
        }
    }

    private func queuePacket(_ bytes: UnsafeRawBufferPointer, frames: Int) {
        let fixed = Int(destination.mBytesPerPacket)
        let packets = fixed > 0 && destination.mFramesPerPacket == 1 && bytes.count % fixed == 0 ? bytes.count / fixed : 1
        runs.append((packetBytes.count, bytes.count, frames, packets))
        packetBytes.append(contentsOf: bytes)
        availablePackets += packets
        availablePacketBytes += bytes.count
    }

    private func openDecoder() throws(AudioFailure) -> PacketDecoder {
        if let decoder { return decoder }
        do {
            let d = try PacketDecoder(
                formatID: source.mFormatID, sampleRate: source.mSampleRate, channels: Int(source.mChannelsPerFrame),
                bytesPerPacket: Int(source.mBytesPerPacket), bitsPerSample: Int(source.mBitsPerChannel), cookie: decompressionCookie)
            decoder = d
            return d
        } catch {
            throw AudioFailure(kAudioConverterErr_FormatNotSupported, "\(error)")
        }
    }

    private func openEncoder() throws(AudioFailure) -> PacketEncoder {
        if let encoder { return encoder }
        let e = try makeEncoder()
        encoder = e
        if destination.mFramesPerPacket == 0 && e.framesPerPacket > 0 { destination.mFramesPerPacket = UInt32(e.framesPerPacket) }
        return e
    }

    /// A new encoder for the destination with the current bit rate and quality.
    private func makeEncoder() throws(AudioFailure) -> PacketEncoder {
        let bits =
            [1: 16, 2: 20, 3: 24, 4: 32][destination.mFormatFlags]
            ?? (sourcePCM != nil ? Int(source.mBitsPerChannel) : 16)
        do {
            return try PacketEncoder(
                formatID: destination.mFormatID, sampleRate: Int(destination.mSampleRate), channels: Int(destination.mChannelsPerFrame),
                bitRate: bitRate, quality: codecQuality, bitsPerSample: bits)
        } catch {
            throw AudioFailure(kAudioConverterErr_FormatNotSupported, "\(error)")
        }
    }

    // MARK: Output

    var availableFrames: Int {
        passthrough
            ? (passBytes.count - passStart) / Int(destination.mBytesPerFrame)
            : (frames.count - framesStart) / Int(destination.mChannelsPerFrame)
    }

    /// Writes up to `count` frames into `list` at frame `offset`; returns frames written.
    func takeFrames(_ count: Int, into list: UnsafeMutableAudioBufferListPointer, offset: Int = 0) -> Int {
        guard let destinationPCM else { return 0 }
        let n = min(count, availableFrames)
        guard n > 0 else { return 0 }
        if passthrough {
            let size = n * Int(destination.mBytesPerFrame)
            guard let data = list[0].mData else { return 0 }
            passBytes.withUnsafeBytes { (data + offset * Int(destination.mBytesPerFrame)).copyMemory(from: $0.baseAddress! + passStart, byteCount: size) }
            passStart += size
            if passStart > 1 << 18 && passStart * 2 > passBytes.count {
                passBytes.removeFirst(passStart)
                passStart = 0
            }
            return n
        }
        frames.withUnsafeBufferPointer { destinationPCM.write($0.baseAddress! + framesStart, frames: n, into: list, offset: offset) }
        framesStart += n * Int(destination.mChannelsPerFrame)
        if framesStart > 1 << 16 && framesStart * 2 > frames.count {
            frames.removeFirst(framesStart)
            framesStart = 0
        }
        return n
    }

    /// Size of the next packet, if one is ready.
    var nextPacketSize: Int? {
        guard runStart < runs.count else { return nil }
        let r = runs[runStart]
        return r.size / r.packets
    }

    /// Copies up to `maxPackets` whole packets (at most `capacity` bytes) to `destination` and
    /// forgets them; fills `descriptions` when given (`mVariableFramesInPacket` only when
    /// `variableFrames`). Returns the packets, bytes and frames copied.
    func takePackets(
        max maxPackets: Int, capacity: Int, into destination: UnsafeMutableRawPointer,
        descriptions: UnsafeMutablePointer<AudioStreamPacketDescription>?, variableFrames: Bool
    ) -> (packets: Int, bytes: Int, frames: Int) {
        var packets = 0
        var bytes = 0
        var frames = 0
        packetBytes.withUnsafeBytes { raw in
            while packets < maxPackets, runStart < runs.count {
                let r = runs[runStart]
                let size = r.size / r.packets
                let left = r.packets - runConsumed
                let n = Swift.min(left, maxPackets - packets, (capacity - bytes) / Swift.max(size, 1))
                if n <= 0 { break }
                let from = r.offset + runConsumed * size
                (destination + bytes).copyMemory(from: raw.baseAddress! + from, byteCount: n * size)
                let perPacketFrames = r.frames / r.packets
                if let descriptions {
                    for k in 0..<n {
                        descriptions[packets + k] = AudioStreamPacketDescription(
                            mStartOffset: Int64(bytes + k * size), mVariableFramesInPacket: variableFrames ? UInt32(perPacketFrames) : 0,
                            mDataByteSize: UInt32(size))
                    }
                }
                packets += n
                bytes += n * size
                frames += n * perPacketFrames
                runConsumed += n
                if runConsumed == r.packets {
                    runStart += 1
                    runConsumed = 0
                }
            }
        }
        availablePackets -= packets
        availablePacketBytes -= bytes
        if runStart == runs.count {
            runs.removeAll(keepingCapacity: true)
            packetBytes.removeAll(keepingCapacity: true)
            runStart = 0
        }
        return (packets, bytes, frames)
    }

    /// Forgets all state: codec history, buffered output, end of input.
    func reset() {
        decoder?.reset()
        encoder = nil
        resampler = nil
        resamplerChecked = false
        frames.removeAll()
        framesStart = 0
        passBytes.removeAll()
        passStart = 0
        packetBytes.removeAll()
        runs.removeAll()
        runStart = 0
        runConsumed = 0
        availablePackets = 0
        availablePacketBytes = 0
        inputEnded = false
        remainderFrames = 0
    }
}

