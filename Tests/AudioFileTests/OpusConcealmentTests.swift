import AudioTestSupport
import AudioToolbox
import Foundation
import XCTest

/// Opus through `AudioConverter` packet by packet, as a call sends it: an empty packet (its
/// description's size 0) is a lost one, and comes out as Opus's own concealment of it: a packet's
/// worth of audio that carries on the sound, not silence and not a gap in the timeline.
final class OpusConcealmentTests: XCTestCase {
    /// One packet through `converter`; for the encoder `pcm` is 960 frames in, for the decoder
    /// `packet` is one packet in (empty: lost). The callback hands its input once, then says
    /// "nothing more for now" (status 1), as a streaming app's does.
    final class Feed: @unchecked Sendable {
        var pcm: [Float] = []
        var packet: [UInt8]?
        let bytes = UnsafeMutablePointer<UInt8>.allocate(capacity: 4000)
        let samples = UnsafeMutablePointer<Float>.allocate(capacity: 960)
        let description = UnsafeMutablePointer<AudioStreamPacketDescription>.allocate(capacity: 1)
        deinit {
            bytes.deallocate()
            samples.deallocate()
            description.deallocate()
        }
        static let input: AudioConverterComplexInputDataProc = { _, ioPackets, ioData, ioDescriptions, userData in
            let feed = Unmanaged<Feed>.fromOpaque(userData!).takeUnretainedValue()
            if let packet = feed.packet {
                feed.packet = nil
                packet.withUnsafeBufferPointer { if !$0.isEmpty { feed.bytes.update(from: $0.baseAddress!, count: $0.count) } }
                feed.description.pointee = AudioStreamPacketDescription(mStartOffset: 0, mVariableFramesInPacket: 0, mDataByteSize: UInt32(packet.count))
                ioPackets.pointee = 1
                ioData.pointee.mBuffers.mData = UnsafeMutableRawPointer(feed.bytes)
                ioData.pointee.mBuffers.mDataByteSize = UInt32(packet.count)
                ioDescriptions?.pointee = feed.description
                return noErr
            }
            guard !feed.pcm.isEmpty else {
                ioPackets.pointee = 0
                return 1
            }
            feed.pcm.withUnsafeBufferPointer { feed.samples.update(from: $0.baseAddress!, count: 960) }
            feed.pcm = []
            ioPackets.pointee = 960
            ioData.pointee.mBuffers.mData = UnsafeMutableRawPointer(feed.samples)
            ioData.pointee.mBuffers.mDataByteSize = 960 * 4
            return noErr
        }
    }

    func testALostPacketIsConcealedNotSilent() throws {
        var pcm = AudioStreamBasicDescription(
            mSampleRate: 48000, mFormatID: kAudioFormatLinearPCM, mFormatFlags: kAudioFormatFlagsNativeFloatPacked, mBytesPerPacket: 4,
            mFramesPerPacket: 1, mBytesPerFrame: 4, mChannelsPerFrame: 1, mBitsPerChannel: 32, mReserved: 0)
        var opus = AudioStreamBasicDescription(
            mSampleRate: 48000, mFormatID: kAudioFormatOpus, mFormatFlags: 0, mBytesPerPacket: 0, mFramesPerPacket: 960, mBytesPerFrame: 0,
            mChannelsPerFrame: 1, mBitsPerChannel: 0, mReserved: 0)
        var encoder: AudioConverterRef?, decoder: AudioConverterRef?
        XCTAssertEqual(AudioConverterNew(&pcm, &opus, &encoder), noErr)
        XCTAssertEqual(AudioConverterNew(&opus, &pcm, &decoder), noErr)
        defer {
            AudioConverterDispose(try! XCTUnwrap(encoder))
            AudioConverterDispose(try! XCTUnwrap(decoder))
        }
        let feed = Feed()
        let refCon = Unmanaged.passUnretained(feed).toOpaque()
        // One second of a 440 Hz tone, packet by packet.
        var packets: [[UInt8]] = []
        let out = UnsafeMutablePointer<UInt8>.allocate(capacity: 4000)
        defer { out.deallocate() }
        for k in 0..<50 {
            feed.pcm = (0..<960).map { Float(0.3 * sin(2 * Double.pi * 440 * Double(k * 960 + $0) / 48000)) }
            var count: UInt32 = 1
            var list = AudioBufferList(mNumberBuffers: 1, mBuffers: AudioBuffer(mNumberChannels: 1, mDataByteSize: 4000, mData: UnsafeMutableRawPointer(out)))
            var description = AudioStreamPacketDescription()
            let status = AudioConverterFillComplexBuffer(encoder!, Feed.input, refCon, &count, &list, &description)
            XCTAssertTrue(status == noErr || status == 1, "encoding: \(status)")
            if count == 1 { packets.append(Array(UnsafeBufferPointer(start: out, count: Int(list.mBuffers.mDataByteSize)))) }
        }
        XCTAssertGreaterThanOrEqual(packets.count, 48)
        // Decoded one at a time, the 30th lost.
        let lost = 30
        var decoded: [[Float]] = []
        let samples = UnsafeMutablePointer<Float>.allocate(capacity: 5760)
        defer { samples.deallocate() }
        for (k, packet) in packets.enumerated() {
            feed.packet = k == lost ? [] : packet
            var frames: UInt32 = 5760
            var list = AudioBufferList(mNumberBuffers: 1, mBuffers: AudioBuffer(mNumberChannels: 1, mDataByteSize: 5760 * 4, mData: UnsafeMutableRawPointer(samples)))
            let status = AudioConverterFillComplexBuffer(decoder!, Feed.input, refCon, &frames, &list, nil)
            XCTAssertTrue(status == noErr || status == 1, "decoding packet \(k): \(status)")
            decoded.append(Array(UnsafeBufferPointer(start: samples, count: Int(frames))))
        }
        XCTAssertEqual(decoded[lost].count, 960, "the lost packet's 20 ms are there")
        let before = SignalAnalysis.rmsDB(decoded[lost - 1][...]), concealed = SignalAnalysis.rmsDB(decoded[lost][...])
        XCTAssertGreaterThan(concealed, before - 10, "the concealment is silent (\(concealed) dBFS beside \(before))")
        let around = Array(decoded[(lost - 2)...(lost + 2)].joined())
        XCTAssertEqual(SignalAnalysis.frequency(around[...], sampleRate: 48000), 440, accuracy: 10, "the tone carries on through the loss")
    }
}

