import AudioToolbox
import Foundation
import XCTest

/// Input for AudioConverterFillComplexBuffer: PCM frames or packets handed out in chunks.
final class ConverterInput: @unchecked Sendable {
    var data: [UInt8]
    var descriptions: [AudioStreamPacketDescription]
    var bytesPerPacket: Int
    var next = 0
    var packetsPerCall: Int
    var calls = 0
    /// While set, the callback reports this error (no data), as a stream that is not ready yet.
    var stall: OSStatus = noErr
    private var current: [AudioStreamPacketDescription] = []

    init(data: [UInt8], bytesPerPacket: Int, descriptions: [AudioStreamPacketDescription] = [], packetsPerCall: Int) {
        self.data = data
        self.bytesPerPacket = bytesPerPacket
        self.descriptions = descriptions
        self.packetsPerCall = packetsPerCall
    }

    var packetCount: Int { descriptions.isEmpty ? data.count / bytesPerPacket : descriptions.count }
    var context: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    static let proc: AudioConverterComplexInputDataProc = { _, ioPackets, ioData, outDescriptions, userData in
        let me = Unmanaged<ConverterInput>.fromOpaque(userData!).takeUnretainedValue()
        me.calls += 1
        if me.stall != noErr {
            ioPackets.pointee = 0
            return me.stall
        }
        let n = min(Int(ioPackets.pointee), me.packetsPerCall, me.packetCount - me.next)
        ioPackets.pointee = UInt32(max(n, 0))
        guard n > 0 else { return noErr }
        let list = UnsafeMutableAudioBufferListPointer(ioData)
        me.data.withUnsafeMutableBytes { raw in
            if me.descriptions.isEmpty {
                list[0].mData = raw.baseAddress! + me.next * me.bytesPerPacket
                list[0].mDataByteSize = UInt32(n * me.bytesPerPacket)
            } else {
                let first = me.descriptions[me.next]
                let last = me.descriptions[me.next + n - 1]
                list[0].mData = raw.baseAddress! + Int(first.mStartOffset)
                list[0].mDataByteSize = UInt32(Int(last.mStartOffset) + Int(last.mDataByteSize) - Int(first.mStartOffset))
                me.current = (0..<n).map { k in
                    var d = me.descriptions[me.next + k]
                    d.mStartOffset -= first.mStartOffset
                    return d
                }
            }
        }
        if let outDescriptions, !me.descriptions.isEmpty {
            me.current.withUnsafeMutableBufferPointer { outDescriptions.pointee = $0.baseAddress }
        }
        me.next += n
        return noErr
    }
}

final class ConverterAndFormatTests: XCTestCase {
    func floatBytes(_ x: [Float]) -> [UInt8] { x.withUnsafeBytes { Array($0) } }

    /// Resampling through FillComplexBuffer: the tone keeps its pitch, the length scales, input
    /// comes in odd chunks, and an input stall is passed back without losing data.
    func testResamplingWithFillComplexBuffer() throws {
        let tone = SignalSamples.sine(frequency: 1000, rate: 44100, frames: 44100)
        var source = floatClient(rate: 44100, channels: 1)
        var destination = pcmFormat(rate: 48000, channels: 1, bits: 16)
        var converter: AudioConverterRef?
        try check(AudioConverterNew(&source, &destination, &converter), "AudioConverterNew")
        let c = try XCTUnwrap(converter)
        defer { AudioConverterDispose(c) }
        var quality = kAudioConverterQuality_Max
        try check(AudioConverterSetProperty(c, kAudioConverterSampleRateConverterQuality, 4, &quality), "quality")
        let input = ConverterInput(data: floatBytes(tone), bytesPerPacket: 4, packetsPerCall: 777)
        var out: [Int16] = []
        var chunk = [Int16](repeating: 0, count: 1000)
        var stalledOnce = false
        while true {
            if out.count > 10000 && !stalledOnce {
                input.stall = OSStatus(bitPattern: fourCC("wait"))
                stalledOnce = true
            } else {
                input.stall = noErr
            }
            var packets: UInt32 = 1000
            let status = chunk.withUnsafeMutableBytes { raw in
                var list = AudioBufferList(mNumberBuffers: 1, mBuffers: AudioBuffer(mNumberChannels: 1, mDataByteSize: UInt32(raw.count), mData: raw.baseAddress))
                return AudioConverterFillComplexBuffer(c, ConverterInput.proc, input.context, &packets, &list, nil)
            }
            out += chunk[0..<Int(packets)]
            if input.stall != noErr {
                XCTAssertEqual(status, input.stall, "the callback's error comes back")
                continue
            }
            try check(status, "FillComplexBuffer")
            if packets == 0 { break }
        }
        XCTAssertEqual(Double(out.count), 48000, accuracy: 2, "one second at the new rate")
        let floats = out.map { Float($0) / 32768 }
        let frequency = SignalSamples.frequency(Array(floats[4800..<43200]), rate: 48000)
        XCTAssertEqual(frequency, 1000, accuracy: 1)
        XCTAssertGreaterThan(input.calls, 10)
    }

    /// PCM → AAC → PCM through two converters, packets with descriptions in between; the cookie,
    /// prime info and bit rate properties say what they should.
    func testEncodeAndDecodeAACPackets() throws {
        let frames = 44100
        let tone = SignalSamples.sine(frequency: 440, rate: 44100, frames: frames)
        var pcm = floatClient(rate: 44100, channels: 1)
        var aac = compressed(kAudioFormatMPEG4AAC, rate: 44100, channels: 1)
        var encoder: AudioConverterRef?
        try check(AudioConverterNew(&pcm, &aac, &encoder), "encoder")
        let e = try XCTUnwrap(encoder)
        defer { AudioConverterDispose(e) }
        var bitRate: UInt32 = 96000
        try check(AudioConverterSetProperty(e, kAudioConverterEncodeBitRate, 4, &bitRate), "bit rate")
        var complete = AudioStreamBasicDescription()
        var size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
        try check(AudioConverterGetProperty(e, kAudioConverterCurrentOutputStreamDescription, &size, &complete), "output description")
        XCTAssertEqual(complete.mFramesPerPacket, 1024)
        var prime = AudioConverterPrimeInfo()
        size = UInt32(MemoryLayout<AudioConverterPrimeInfo>.size)
        try check(AudioConverterGetProperty(e, kAudioConverterPrimeInfo, &size, &prime), "prime info")
        XCTAssertEqual(prime.leadingFrames, 1024, "FFmpeg's AAC encoder delay")
        var cookieSize: UInt32 = 0
        try check(AudioConverterGetPropertyInfo(e, kAudioConverterCompressionMagicCookie, &cookieSize, nil), "cookie size")
        var cookie = [UInt8](repeating: 0, count: Int(cookieSize))
        try check(AudioConverterGetProperty(e, kAudioConverterCompressionMagicCookie, &cookieSize, &cookie), "cookie")
        XCTAssertEqual(cookie.first, 0x03, "an MPEG-4 ES descriptor, as Apple's AAC cookie is")

        let input = ConverterInput(data: floatBytes(tone), bytesPerPacket: 4, packetsPerCall: 4096)
        var packetData: [UInt8] = []
        var descriptions: [AudioStreamPacketDescription] = []
        var buffer = [UInt8](repeating: 0, count: 8 * 768)
        var packetDescriptions = [AudioStreamPacketDescription](repeating: .init(), count: 8)
        while true {
            var packets: UInt32 = 8
            let status = buffer.withUnsafeMutableBytes { raw in
                var list = AudioBufferList(mNumberBuffers: 1, mBuffers: AudioBuffer(mNumberChannels: 1, mDataByteSize: UInt32(raw.count), mData: raw.baseAddress))
                return AudioConverterFillComplexBuffer(e, ConverterInput.proc, input.context, &packets, &list, &packetDescriptions)
            }
            try check(status, "encode")
            if packets == 0 { break }
            for d in packetDescriptions[0..<Int(packets)] {
                descriptions.append(AudioStreamPacketDescription(mStartOffset: Int64(packetData.count), mVariableFramesInPacket: 0, mDataByteSize: d.mDataByteSize))
                packetData += buffer[Int(d.mStartOffset)..<(Int(d.mStartOffset) + Int(d.mDataByteSize))]
            }
        }
        XCTAssertGreaterThanOrEqual(descriptions.count, (frames + 1024) / 1024)
        let seconds = Double(descriptions.count * 1024) / 44100
        XCTAssertEqual(Double(packetData.count * 8) / seconds, 96000, accuracy: 30000, "the bit rate asked for")

        var decoder: AudioConverterRef?
        try check(AudioConverterNew(&complete, &pcm, &decoder), "decoder")
        let d = try XCTUnwrap(decoder)
        defer { AudioConverterDispose(d) }
        try check(AudioConverterSetProperty(d, kAudioConverterDecompressionMagicCookie, UInt32(cookie.count), cookie), "decoder cookie")
        let packets = ConverterInput(data: packetData, bytesPerPacket: 0, descriptions: descriptions, packetsPerCall: 3)
        var decoded: [Float] = []
        var chunk = [Float](repeating: 0, count: 2048)
        while true {
            var n: UInt32 = 2048
            let status = chunk.withUnsafeMutableBytes { raw in
                var list = AudioBufferList(mNumberBuffers: 1, mBuffers: AudioBuffer(mNumberChannels: 1, mDataByteSize: UInt32(raw.count), mData: raw.baseAddress))
                return AudioConverterFillComplexBuffer(d, ConverterInput.proc, packets.context, &n, &list, nil)
            }
            try check(status, "decode")
            if n == 0 { break }
            decoded += chunk[0..<Int(n)]
        }
        XCTAssertEqual(decoded.count, descriptions.count * 1024)
        let aligned = Array(decoded.dropFirst(Int(prime.leadingFrames)).prefix(frames))
        XCTAssertGreaterThan(snrDB(tone, aligned), 25, "decoded AAC, trimmed by the prime info, matches the source")

        // Reset forgets buffered state; converting again works from scratch.
        try check(AudioConverterReset(d), "reset")
        XCTAssertEqual(AudioConverterDispose(OpaquePointer(bitPattern: 0x1234)!), kAudio_ParamError, "a foreign reference")
    }

    func testConverterErrors() {
        var pcm = floatClient(rate: 44100, channels: 2)
        var unknown = compressed(fourCC("zzzz"))
        var converter: AudioConverterRef?
        XCTAssertEqual(AudioConverterNew(&pcm, &unknown, &converter), kAudioConverterErr_FormatNotSupported)
        XCTAssertNil(converter)
        var aacAt7k = compressed(kAudioFormatMPEG4AAC, rate: 7000)
        XCTAssertEqual(AudioConverterNew(&pcm, &aacAt7k, &converter), kAudioConverterErr_OutputSampleRateOutOfRange)
        var other = pcmFormat(rate: 48000, channels: 2)
        XCTAssertEqual(AudioConverterNew(&pcm, &other, &converter), noErr)
        var out = [UInt8](repeating: 0, count: 64)
        var size = UInt32(out.count)
        let input = [UInt8](repeating: 0, count: 64)
        XCTAssertEqual(AudioConverterConvertBuffer(converter!, 64, input, &size, &out), kAudioConverterErr_OperationNotSupported, "ConvertBuffer cannot resample")
        var value: UInt32 = 0
        size = 4
        XCTAssertEqual(AudioConverterGetProperty(converter!, fourCC("nope"), &size, &value), kAudioConverterErr_PropertyNotSupported)
        AudioConverterDispose(converter!)
    }

    func testAudioFormatProperties() throws {
        var size: UInt32 = 0
        try check(AudioFormatGetPropertyInfo(kAudioFormatProperty_EncodeFormatIDs, 0, nil, &size), "encode IDs size")
        var encoders = [AudioFormatID](repeating: 0, count: Int(size) / 4)
        try check(AudioFormatGetProperty(kAudioFormatProperty_EncodeFormatIDs, 0, nil, &size, &encoders), "encode IDs")
        for id in [kAudioFormatLinearPCM, kAudioFormatMPEG4AAC, kAudioFormatAppleLossless, kAudioFormatAppleIMA4, kAudioFormatULaw, kAudioFormatALaw, kAudioFormatFLAC] {
            XCTAssertTrue(encoders.contains(id), "encodes '\(id.fourCharCodeString)'")
        }
        try check(AudioFormatGetPropertyInfo(kAudioFormatProperty_DecodeFormatIDs, 0, nil, &size), "decode IDs size")
        var decoders = [AudioFormatID](repeating: 0, count: Int(size) / 4)
        try check(AudioFormatGetProperty(kAudioFormatProperty_DecodeFormatIDs, 0, nil, &size, &decoders), "decode IDs")
        XCTAssertTrue(decoders.contains(kAudioFormatMPEGLayer3))
        XCTAssertTrue(decoders.contains(kAudioFormatMPEG4AAC_HE))

        var ima = compressed(kAudioFormatAppleIMA4, rate: 44100, channels: 2)
        size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
        try check(AudioFormatGetProperty(kAudioFormatProperty_FormatInfo, 0, nil, &size, &ima), "format info")
        XCTAssertEqual(ima.mBytesPerPacket, 68)
        XCTAssertEqual(ima.mFramesPerPacket, 64)

        // AAC: rate and channels from the cookie.
        var aac = compressed(kAudioFormatMPEG4AAC, rate: 0, channels: 0)
        let asc: [UInt8] = [0x12, 0x10]  // AAC-LC, 44.1 kHz, 2 channels
        try check(AudioFormatGetProperty(kAudioFormatProperty_FormatInfo, UInt32(asc.count), asc, &size, &aac), "format info from cookie")
        XCTAssertEqual(aac.mSampleRate, 44100)
        XCTAssertEqual(aac.mChannelsPerFrame, 2)

        // Apple's idiom: an Unmanaged reference, taken retained.
        var name: Unmanaged<NSString>?
        var lpcm = pcmFormat(bits: 24, bigEndian: true)
        size = UInt32(MemoryLayout<Unmanaged<NSString>?>.size)
        try check(AudioFormatGetProperty(kAudioFormatProperty_FormatName, UInt32(MemoryLayout<AudioStreamBasicDescription>.size), &lpcm, &size, &name), "name")
        XCTAssertEqual(name?.takeRetainedValue() as String?, "Linear PCM, Signed Integer, 24-bit big-endian")
        var alac = compressed(kAudioFormatAppleLossless)
        try check(AudioFormatGetProperty(kAudioFormatProperty_FormatName, UInt32(MemoryLayout<AudioStreamBasicDescription>.size), &alac, &size, &name), "name")
        XCTAssertEqual(name?.takeRetainedValue() as String?, "Apple Lossless")
        var vbr: UInt32 = 0
        size = 4
        try check(AudioFormatGetProperty(kAudioFormatProperty_FormatIsVBR, UInt32(MemoryLayout<AudioStreamBasicDescription>.size), &alac, &size, &vbr), "VBR")
        XCTAssertEqual(vbr, 1)
        XCTAssertEqual(AudioFormatGetProperty(fourCC("nope"), 0, nil, &size, &vbr), kAudioFormatUnsupportedPropertyError)
    }
}

/// Tiny signal helpers for this file (AudioTestSupport's need the sound server's module).
enum SignalSamples {
    static func sine(frequency: Double, rate: Double, frames: Int) -> [Float] {
        (0..<frames).map { Float(0.5 * sin(2 * .pi * frequency * Double($0) / rate)) }
    }

    /// Frequency from zero crossings with linear interpolation.
    static func frequency(_ x: [Float], rate: Double) -> Double {
        var crossings: [Double] = []
        for i in 1..<x.count where x[i - 1] < 0 && x[i] >= 0 {
            crossings.append(Double(i - 1) + Double(-x[i - 1] / (x[i] - x[i - 1])))
        }
        guard crossings.count > 2 else { return 0 }
        return Double(crossings.count - 1) * rate / (crossings.last! - crossings.first!)
    }
}
