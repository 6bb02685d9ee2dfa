import AudioToolbox
import Foundation
import XCTest

/// A linear PCM description with Apple's flags.
func pcmFormat(rate: Double = 44100, channels: UInt32 = 2, bits: UInt32 = 16, float: Bool = false, bigEndian: Bool = false, signed: Bool = true) -> AudioStreamBasicDescription {
    let bytes = (bits + 7) / 8 * channels
    var flags: AudioFormatFlags = kAudioFormatFlagIsPacked
    if float { flags |= kAudioFormatFlagIsFloat } else if signed { flags |= kAudioFormatFlagIsSignedInteger }
    if bigEndian { flags |= kAudioFormatFlagIsBigEndian }
    return AudioStreamBasicDescription(
        mSampleRate: rate, mFormatID: kAudioFormatLinearPCM, mFormatFlags: flags, mBytesPerPacket: bytes, mFramesPerPacket: 1,
        mBytesPerFrame: bytes, mChannelsPerFrame: channels, mBitsPerChannel: bits, mReserved: 0)
}

/// A compressed description; the library fills in the packet shape.
func compressed(_ id: AudioFormatID, rate: Double = 44100, channels: UInt32 = 2, flags: UInt32 = 0) -> AudioStreamBasicDescription {
    AudioStreamBasicDescription(
        mSampleRate: rate, mFormatID: id, mFormatFlags: flags, mBytesPerPacket: 0, mFramesPerPacket: 0, mBytesPerFrame: 0,
        mChannelsPerFrame: channels, mBitsPerChannel: 0, mReserved: 0)
}

/// Two tones per channel, different in each channel, at about −3 dBFS peak: enough structure that a
/// swapped channel, a lost frame or a wrong rate changes the result.
func testSignal(frames: Int, channels: Int, rate: Double = 44100) -> [Float] {
    var out = [Float](repeating: 0, count: frames * channels)
    for c in 0..<channels {
        let f1 = 440.0 * Double(c + 1)
        let f2 = 1250.0 + 300 * Double(c)
        for i in 0..<frames {
            let t = Double(i) / rate
            out[i * channels + c] = Float(0.35 * sin(2 * .pi * f1 * t) + 0.3 * sin(2 * .pi * f2 * t))
        }
    }
    return out
}

/// Interleaved float client format.
func floatClient(rate: Double, channels: UInt32) -> AudioStreamBasicDescription {
    pcmFormat(rate: rate, channels: channels, bits: 32, float: true)
}

struct FileTestError: Error, CustomStringConvertible {
    let description: String
    init(_ what: String, _ status: OSStatus) {
        description = "\(what) failed: \(status.osStatusDescription)"
    }
}

func check(_ status: OSStatus, _ what: String) throws {
    if status != noErr { throw FileTestError(what, status) }
}

/// Writes interleaved float `samples` into a new file through ExtAudioFile.
func writeWithExtAudioFile(
    _ url: URL, type: AudioFileTypeID, format: AudioStreamBasicDescription, samples: [Float], channels: Int, rate: Double,
    bitRate: UInt32? = nil, chunk: Int = 1000
) throws {
    var fileFormat = format
    var ext: ExtAudioFileRef?
    try check(ExtAudioFileCreateWithURL(url as CFURL, type, &fileFormat, nil, AudioFileFlags.eraseFile.rawValue, &ext), "ExtAudioFileCreateWithURL")
    guard let ext else { throw FileTestError("create", -1) }
    var client = floatClient(rate: rate, channels: UInt32(channels))
    try check(ExtAudioFileSetProperty(ext, kExtAudioFileProperty_ClientDataFormat, UInt32(MemoryLayout.size(ofValue: client)), &client), "client format")
    if let bitRate {
        var converter: AudioConverterRef?
        var size = UInt32(MemoryLayout<AudioConverterRef?>.size)
        try check(ExtAudioFileGetProperty(ext, kExtAudioFileProperty_AudioConverter, &size, &converter), "get converter")
        var rate = bitRate
        try check(AudioConverterSetProperty(converter!, kAudioConverterEncodeBitRate, 4, &rate), "bit rate")
        try check(ExtAudioFileSetProperty(ext, kExtAudioFileProperty_ConverterConfig, 0, nil), "converter config")
    }
    let frames = samples.count / channels
    var done = 0
    var copy = samples
    while done < frames {
        let n = min(chunk, frames - done)
        try copy.withUnsafeMutableBufferPointer { buffer in
            var list = AudioBufferList(
                mNumberBuffers: 1,
                mBuffers: AudioBuffer(mNumberChannels: UInt32(channels), mDataByteSize: UInt32(n * channels * 4), mData: buffer.baseAddress! + done * channels))
            try check(ExtAudioFileWrite(ext, UInt32(n), &list), "ExtAudioFileWrite")
        }
        done += n
    }
    try check(ExtAudioFileDispose(ext), "ExtAudioFileDispose")
}

/// Reads a whole file through ExtAudioFile as interleaved float at the file's rate and channel count.
func readWithExtAudioFile(_ url: URL, rate: Double? = nil, channels: UInt32? = nil, chunk: Int = 4096) throws -> (samples: [Float], channels: Int, rate: Double, lengthFrames: Int64) {
    var ext: ExtAudioFileRef?
    try check(ExtAudioFileOpenURL(url as CFURL, &ext), "ExtAudioFileOpenURL")
    guard let ext else { throw FileTestError("open", -1) }
    defer { ExtAudioFileDispose(ext) }
    var fileFormat = AudioStreamBasicDescription()
    var size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
    try check(ExtAudioFileGetProperty(ext, kExtAudioFileProperty_FileDataFormat, &size, &fileFormat), "file format")
    let outRate = rate ?? fileFormat.mSampleRate
    let outChannels = channels ?? fileFormat.mChannelsPerFrame
    var client = floatClient(rate: outRate, channels: outChannels)
    try check(ExtAudioFileSetProperty(ext, kExtAudioFileProperty_ClientDataFormat, UInt32(MemoryLayout.size(ofValue: client)), &client), "client format")
    var length: Int64 = 0
    size = 8
    try check(ExtAudioFileGetProperty(ext, kExtAudioFileProperty_FileLengthFrames, &size, &length), "length")
    var out: [Float] = []
    var buffer = [Float](repeating: 0, count: chunk * Int(outChannels))
    while true {
        var n = UInt32(chunk)
        let status = buffer.withUnsafeMutableBufferPointer { b in
            var list = AudioBufferList(
                mNumberBuffers: 1,
                mBuffers: AudioBuffer(mNumberChannels: outChannels, mDataByteSize: UInt32(b.count * 4), mData: b.baseAddress))
            return ExtAudioFileRead(ext, &n, &list)
        }
        try check(status, "ExtAudioFileRead")
        if n == 0 { break }
        out.append(contentsOf: buffer[0..<(Int(n) * Int(outChannels))])
    }
    return (out, Int(outChannels), outRate, length)
}

/// Signal-to-noise ratio of `got` against `reference`, over their common length, in dB.
func snrDB(_ reference: [Float], _ got: [Float]) -> Double {
    let n = min(reference.count, got.count)
    var signal = 0.0
    var noise = 0.0
    for i in 0..<n {
        signal += Double(reference[i]) * Double(reference[i])
        let d = Double(reference[i]) - Double(got[i])
        noise += d * d
    }
    return noise == 0 ? .infinity : 10 * log10(signal / noise)
}

func temporaryDirectory() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("openavf-files-\(getpid())-\(UUID().uuidString.prefix(8))")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

/// The value of an AudioFile property of fixed size.
func fileProperty<T>(_ file: AudioFileID, _ id: AudioFilePropertyID, _ initial: T) throws -> T {
    var value = initial
    var size = UInt32(MemoryLayout<T>.size)
    let status = withUnsafeMutableBytes(of: &value) { AudioFileGetProperty(file, id, &size, $0.baseAddress!) }
    try check(status, "AudioFileGetProperty '\(id.fourCharCodeString)'")
    return value
}

/// Writes interleaved float as a 32-bit float WAV with ffmpeg's reading in mind (raw → wav).
func writeFloatRaw(_ samples: [Float], to url: URL) throws {
    try samples.withUnsafeBytes { try Data($0).write(to: url) }
}

/// `x` rounded to what `bits`-bit signed integers hold, as a lossless file must return it.
func quantized(_ x: [Float], bits: Int) -> [Float] {
    let scale = Float(1 << (bits - 1))
    return x.map { min(max(($0 * scale).rounded(.toNearestOrEven), -scale), scale - 1) / scale }
}

import AudioTestSupport

/// Whether `format` is among `kAudioFormatProperty_EncodeFormatIDs`.
func canEncode(_ format: AudioFormatID) -> Bool {
    var size: UInt32 = 0
    guard AudioFormatGetPropertyInfo(kAudioFormatProperty_EncodeFormatIDs, 0, nil, &size) == noErr else { return false }
    var ids = [AudioFormatID](repeating: 0, count: Int(size) / 4)
    guard AudioFormatGetProperty(kAudioFormatProperty_EncodeFormatIDs, 0, nil, &size, &ids) == noErr else { return false }
    return ids.contains(format)
}

/// Fails with the first differing index instead of printing both arrays.
func assertSamplesEqual(_ got: [Float], _ expected: [Float], _ label: String, file: StaticString = #filePath, line: UInt = #line) {
    guard got.count == expected.count else {
        XCTFail("\(label): \(got.count) samples, expected \(expected.count)", file: file, line: line)
        return
    }
    if let i = got.indices.first(where: { got[$0] != expected[$0] }) {
        XCTFail("\(label): sample \(i) is \(got[i]), expected \(expected[i])", file: file, line: line)
    }
}
