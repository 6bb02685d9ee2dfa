import AudioTestSupport
import AudioToolbox
import Foundation
import XCTest

/// `kAudioQueueProperty_DecodeBufferSizeFrames` reports the decode buffers a queue really has;
/// `kAudioQueueProperty_ChannelLayout` is validated as Apple documents. No stream opens.
final class QueueLayoutAndDecodeBufferTests: XCTestCase {
    private func outputQueue(_ format: AudioStreamBasicDescription) throws -> AudioQueueRef {
        var format = format
        var q: AudioQueueRef?
        XCTAssertEqual(AudioQueueNewOutput(&format, { _, _, _ in }, nil, nil, nil, 0, &q), noErr, "the queue")
        return try XCTUnwrap(q)
    }

    private func decodeFrames(_ q: AudioQueueRef) -> (OSStatus, UInt32) {
        var value: UInt32 = 0
        var size: UInt32 = 4
        let status = AudioQueueGetProperty(q, kAudioQueueProperty_DecodeBufferSizeFrames, &value, &size)
        return (status, value)
    }

    func testDecodeBufferSizeIsWhatTheQueueDecodesInto() throws {
        // AAC stereo: a 4096-byte buffer holds 2 packets of the largest size (1536 bytes): 2048 frames.
        var aac = AudioStreamBasicDescription()
        aac.mSampleRate = 44100
        aac.mFormatID = kAudioFormatMPEG4AAC
        aac.mChannelsPerFrame = 2
        let q = try outputQueue(aac)
        defer { AudioQueueDispose(q, true) }
        var buffer: AudioQueueBufferRef?
        XCTAssertEqual(AudioQueueAllocateBufferWithPacketDescriptions(q, 4096, 8, &buffer), noErr)
        XCTAssertEqual(decodeFrames(q).0, noErr)
        XCTAssertEqual(decodeFrames(q).1, 2048, "two packets of 1024 frames")
        var small: UInt32 = 100
        XCTAssertEqual(AudioQueueSetProperty(q, kAudioQueueProperty_DecodeBufferSizeFrames, &small, 4), kAudioQueueErr_InvalidPropertyValue, "less than one AAC packet")
        var huge: UInt32 = 1 << 24
        XCTAssertEqual(AudioQueueSetProperty(q, kAudioQueueProperty_DecodeBufferSizeFrames, &huge, 4), kAudioQueueErr_InvalidPropertyValue)
        var larger: UInt32 = 8192
        XCTAssertEqual(AudioQueueSetProperty(q, kAudioQueueProperty_DecodeBufferSizeFrames, &larger, 4), noErr)
        XCTAssertEqual(decodeFrames(q).1, 8192, "the buffer's decode area grew")
        var another: AudioQueueBufferRef?
        XCTAssertEqual(AudioQueueAllocateBufferWithPacketDescriptions(q, 2048, 8, &another), noErr)
        XCTAssertEqual(decodeFrames(q).1, 8192, "and new buffers get at least as much")

        // Linear PCM: the decode buffer is the float copy of the buffer's frames, and it plays.
        var format = lpcm(rate: 48000, channels: 1, bits: 16)
        let pcm = try outputQueue(format)
        defer { AudioQueueDispose(pcm, true) }
        XCTAssertEqual(decodeFrames(pcm).1, 0, "no buffer yet")
        var b: AudioQueueBufferRef?
        XCTAssertEqual(AudioQueueAllocateBuffer(pcm, 2000, &b), noErr)
        XCTAssertEqual(decodeFrames(pcm).1, 1000)
        var frames: UInt32 = 4800
        XCTAssertEqual(AudioQueueSetProperty(pcm, kAudioQueueProperty_DecodeBufferSizeFrames, &frames, 4), noErr)
        XCTAssertEqual(decodeFrames(pcm).1, 4800)
        var render = lpcm(rate: 48000, channels: 1, bits: 32, float: true)
        XCTAssertEqual(AudioQueueSetOfflineRenderFormat(pcm, &render, nil), noErr)
        let samples = (0..<1000).map { Int16($0 * 30) }
        samples.withUnsafeBytes { b!.pointee.mAudioData.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        b!.pointee.mAudioDataByteSize = 2000
        XCTAssertEqual(AudioQueueEnqueueBuffer(pcm, b!, 0, nil), noErr)
        XCTAssertEqual(AudioQueueStart(pcm, nil), noErr)
        var out: AudioQueueBufferRef?
        AudioQueueAllocateBuffer(pcm, 4000, &out)
        var stamp = AudioTimeStamp()
        XCTAssertEqual(AudioQueueOfflineRender(pcm, &stamp, out!, 1000), noErr)
        let rendered = UnsafeBufferPointer(start: out!.pointee.mAudioData.assumingMemoryBound(to: Float.self), count: 1000)
        XCTAssertEqual(Array(rendered), samples.map { Float($0) / 32768 })

        // Recording queues decode nothing.
        var input: AudioQueueRef?
        format = lpcm(rate: 48000, channels: 1, bits: 16)
        XCTAssertEqual(AudioQueueNewInput(&format, { _, _, _, _, _, _ in }, nil, nil, nil, 0, &input), noErr)
        XCTAssertEqual(decodeFrames(input!).0, kAudioQueueErr_InvalidProperty)
        AudioQueueDispose(input!, true)
    }

    private func tagged(_ tag: AudioChannelLayoutTag) -> [UInt8] {
        var value = AudioChannelLayout()
        value.mChannelLayoutTag = tag
        return withUnsafeBytes(of: value) { Array($0) }
    }

    func testChannelLayoutIsValidatedAndReadBack() throws {
        let q = try outputQueue(lpcm(rate: 48000, channels: 2, bits: 32, float: true))
        defer { AudioQueueDispose(q, true) }
        var size: UInt32 = 0
        XCTAssertEqual(AudioQueueGetPropertySize(q, kAudioQueueProperty_ChannelLayout, &size), noErr)
        var read = AudioChannelLayout()
        size = UInt32(MemoryLayout<AudioChannelLayout>.size)
        XCTAssertEqual(AudioQueueGetProperty(q, kAudioQueueProperty_ChannelLayout, &read, &size), noErr)
        XCTAssertEqual(read.mChannelLayoutTag, kAudioChannelLayoutTag_Stereo, "a stereo queue without a layout")

        var wrongCount = tagged(kAudioChannelLayoutTag_MPEG_5_1_A)
        XCTAssertEqual(AudioQueueSetProperty(q, kAudioQueueProperty_ChannelLayout, &wrongCount, UInt32(wrongCount.count)), kAudioQueueErr_InvalidPropertyValue)
        var unknown = tagged((999 << 16) | 2)
        XCTAssertEqual(AudioQueueSetProperty(q, kAudioQueueProperty_ChannelLayout, &unknown, UInt32(unknown.count)), kAudioFormatUnknownFormatError)
        var short = [UInt8](repeating: 0, count: 8)
        XCTAssertEqual(AudioQueueSetProperty(q, kAudioQueueProperty_ChannelLayout, &short, 8), kAudioQueueErr_InvalidPropertySize)

        var swapped = channelLayoutBytes([kAudioChannelLabel_Right, kAudioChannelLabel_Left])
        XCTAssertEqual(AudioQueueSetProperty(q, kAudioQueueProperty_ChannelLayout, &swapped, UInt32(swapped.count)), noErr)
        XCTAssertEqual(AudioQueueGetPropertySize(q, kAudioQueueProperty_ChannelLayout, &size), noErr)
        XCTAssertEqual(Int(size), swapped.count)
        var back = [UInt8](repeating: 0, count: Int(size))
        XCTAssertEqual(AudioQueueGetProperty(q, kAudioQueueProperty_ChannelLayout, &back, &size), noErr)
        XCTAssertEqual(back, swapped)

        let six = try outputQueue(lpcm(rate: 48000, channels: 6, bits: 16))
        defer { AudioQueueDispose(six, true) }
        size = UInt32(MemoryLayout<AudioChannelLayout>.size)
        XCTAssertEqual(AudioQueueGetProperty(six, kAudioQueueProperty_ChannelLayout, &read, &size), kAudioQueueErr_InvalidPropertyValue, "six channels, no layout set")
        var surround = tagged(kAudioChannelLayoutTag_MPEG_5_1_A)
        XCTAssertEqual(AudioQueueSetProperty(six, kAudioQueueProperty_ChannelLayout, &surround, UInt32(surround.count)), noErr)
    }

}

/// The queue's channel layout is the server stream's channel map: the server does the mapping,
/// so only a real server can show it.
final class QueueChannelMapServerTests: XCTestCase {
    /// A stereo queue whose layout says its first channel is the right one: a tone in that
    /// channel is heard on the speaker's right channel only.
    func testChannelLayoutIsTheStreamsChannelMap() throws {
        let server = try TestSound.server()
        let log = RunningLog()
        var format = lpcm(rate: 48000, channels: 2, bits: 32, float: true)
        var q: AudioQueueRef?
        XCTAssertEqual(AudioQueueNewOutput(&format, { _, _, _ in }, nil, nil, nil, 0, &q), noErr)
        let queue = try XCTUnwrap(q)
        defer { AudioQueueDispose(queue, true) }
        log.listen(to: queue)
        var swapped = channelLayoutBytes([kAudioChannelLabel_Right, kAudioChannelLabel_Left])
        XCTAssertEqual(AudioQueueSetProperty(queue, kAudioQueueProperty_ChannelLayout, &swapped, UInt32(swapped.count)), noErr)
        let tone = SignalAnalysis.sine(frequency: 1000, sampleRate: 48000, seconds: 0.5, amplitude: 0.5)
        let interleaved = tone.flatMap { x -> [Float] in [x, 0] }
        var b: AudioQueueBufferRef?
        AudioQueueAllocateBuffer(queue, UInt32(interleaved.count * 4), &b)
        interleaved.withUnsafeBytes { b!.pointee.mAudioData.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        b!.pointee.mAudioDataByteSize = UInt32(interleaved.count * 4)

        let capture = try SignalCapture(server: server, device: "speaker.monitor", channels: 2)
        XCTAssertEqual(AudioQueueEnqueueBuffer(queue, b!, 0, nil), noErr)
        XCTAssertEqual(AudioQueueStart(queue, nil), noErr)
        XCTAssertEqual(AudioQueueStop(queue, false), noErr)
        XCTAssertEqual(log.stopped.wait(timeout: .now() + 5), .success)
        try capture.waitFor(frames: capture.frameCount + 4800, timeout: 5)
        let channels = capture.stop()
        let right = channels[1], left = channels[0]
        let start = try XCTUnwrap(SignalAnalysis.onset(right, threshold: 0.05), "the tone reaches the right channel")
        let span = (start + 2400)..<min(start + 21600, right.count)
        XCTAssertEqual(SignalAnalysis.rmsDB(right[span]), 20 * log10(0.5 / 2.0.squareRoot()), accuracy: 0.5)
        XCTAssertLessThan(SignalAnalysis.rmsDB(left[span]), -60, "nothing on the left")
    }
}
