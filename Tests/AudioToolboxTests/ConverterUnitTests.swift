import AudioTestSupport
import AudioToolbox
import Foundation
import XCTest

/// AUConverter rendered by the test: sample format, interleaving, channels and rate.
final class ConverterUnitTests: XCTestCase {
    typealias Offline = AudioUnitOfflineTests

    static func format(rate: Double, channels: Int, int16: Bool = false, interleaved: Bool = false) -> AudioStreamBasicDescription {
        let bytes = int16 ? 2 : 4
        let flags = (int16 ? kAudioFormatFlagIsSignedInteger | kAudioFormatFlagIsPacked : kAudioFormatFlagsNativeFloatPacked)
            | (interleaved ? 0 : kAudioFormatFlagIsNonInterleaved)
        let frameBytes = UInt32(interleaved ? bytes * channels : bytes)
        return AudioStreamBasicDescription(
            mSampleRate: rate, mFormatID: kAudioFormatLinearPCM, mFormatFlags: flags, mBytesPerPacket: frameBytes, mFramesPerPacket: 1,
            mBytesPerFrame: frameBytes, mChannelsPerFrame: UInt32(channels), mBitsPerChannel: UInt32(bytes * 8), mReserved: 0)
    }

    static func converter(from input: AudioStreamBasicDescription, to output: AudioStreamBasicDescription) throws -> AudioUnit {
        let unit = try Offline.make(kAudioUnitSubType_AUConverter, kAudioUnitType_FormatConverter)
        var i = input, o = output
        let size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
        XCTAssertEqual(AudioUnitSetProperty(unit, kAudioUnitProperty_StreamFormat, kAudioUnitScope_Input, 0, &i, size), noErr)
        XCTAssertEqual(AudioUnitSetProperty(unit, kAudioUnitProperty_StreamFormat, kAudioUnitScope_Output, 0, &o, size), noErr)
        return unit
    }

    /// Int16 interleaved stereo: the left channel counts up by 37, the right down by 53, wrapping.
    final class IntegerSource: @unchecked Sendable {
        var position = 0
        static func left(_ i: Int) -> Int16 { Int16(truncatingIfNeeded: i * 37 - 32768) }
        static func right(_ i: Int) -> Int16 { Int16(truncatingIfNeeded: 7 - i * 53) }
        static let callback: AURenderCallback = { refCon, _, _, _, frames, data in
            let me = Unmanaged<IntegerSource>.fromOpaque(refCon).takeUnretainedValue()
            let list = UnsafeMutableAudioBufferListPointer(data!)
            let p = list[0].mData!.assumingMemoryBound(to: Int16.self)
            for i in 0..<Int(frames) {
                p[2 * i] = left(me.position + i)
                p[2 * i + 1] = right(me.position + i)
            }
            me.position += Int(frames)
            return noErr
        }
    }

    /// Float non-interleaved stereo: a different sine on each side.
    final class StereoSource: @unchecked Sendable {
        var position = 0
        static func left(_ i: Int) -> Float { 0.5 * Float(sin(Double(i) * 0.01)) }
        static func right(_ i: Int) -> Float { 0.25 * Float(cos(Double(i) * 0.037)) }
        static let callback: AURenderCallback = { refCon, _, _, _, frames, data in
            let me = Unmanaged<StereoSource>.fromOpaque(refCon).takeUnretainedValue()
            let list = UnsafeMutableAudioBufferListPointer(data!)
            let l = list[0].mData!.assumingMemoryBound(to: Float.self), r = list[1].mData!.assumingMemoryBound(to: Float.self)
            for i in 0..<Int(frames) {
                l[i] = left(me.position + i)
                r[i] = right(me.position + i)
            }
            me.position += Int(frames)
            return noErr
        }
    }

    static func feed(_ unit: AudioUnit, _ proc: AURenderCallback, _ refCon: AnyObject) {
        var cb = AURenderCallbackStruct(inputProc: proc, inputProcRefCon: Unmanaged.passUnretained(refCon).toOpaque())
        XCTAssertEqual(AudioUnitSetProperty(unit, kAudioUnitProperty_SetRenderCallback, kAudioUnitScope_Input, 0, &cb, UInt32(MemoryLayout<AURenderCallbackStruct>.size)), noErr)
    }

    func testInt16InterleavedStereoBecomesFloatExactly() throws {
        let unit = try Self.converter(from: Self.format(rate: 48000, channels: 2, int16: true, interleaved: true), to: Self.format(rate: 48000, channels: 2))
        defer { AudioComponentInstanceDispose(unit) }
        let source = IntegerSource()
        Self.feed(unit, IntegerSource.callback, source)
        XCTAssertEqual(AudioUnitInitialize(unit), noErr)
        let frames = 4096
        let out = Offline.render(unit, frames: frames)
        XCTAssertEqual(source.position, frames, "pulled frame for frame")
        XCTAssertEqual(out[0], (0..<frames).map { Float(IntegerSource.left($0)) / 32768 })
        XCTAssertEqual(out[1], (0..<frames).map { Float(IntegerSource.right($0)) / 32768 })
        XCTAssertEqual(out[0][0], -1, "the most negative sample is full scale")
    }

    func testFloatBecomesInt16InterleavedRounded() throws {
        let unit = try Self.converter(from: Self.format(rate: 48000, channels: 2), to: Self.format(rate: 48000, channels: 2, int16: true, interleaved: true))
        defer { AudioComponentInstanceDispose(unit) }
        let source = StereoSource()
        Self.feed(unit, StereoSource.callback, source)
        XCTAssertEqual(AudioUnitInitialize(unit), noErr)
        var samples = [Int16](repeating: 0, count: 2 * 512)
        let list = AudioBufferList.allocate(maximumBuffers: 1)
        defer { free(list.unsafeMutablePointer) }
        samples.withUnsafeMutableBytes { bytes in
            list[0] = AudioBuffer(mNumberChannels: 2, mDataByteSize: UInt32(bytes.count), mData: bytes.baseAddress)
            var flags = AudioUnitRenderActionFlags()
            var time = AudioTimeStamp()
            XCTAssertEqual(AudioUnitRender(unit, &flags, &time, 0, 512, list.unsafeMutablePointer), noErr)
            XCTAssertEqual(list[0].mDataByteSize, 2048)
        }
        for i in 0..<512 {
            XCTAssertEqual(samples[2 * i], Int16((StereoSource.left(i) * 32768).rounded()))
            XCTAssertEqual(samples[2 * i + 1], Int16((StereoSource.right(i) * 32768).rounded()))
        }
    }

    func testStereoIsAveragedIntoMonoAndMonoCopiedToStereo() throws {
        let down = try Self.converter(from: Self.format(rate: 44100, channels: 2), to: Self.format(rate: 44100, channels: 1))
        defer { AudioComponentInstanceDispose(down) }
        let source = StereoSource()
        Self.feed(down, StereoSource.callback, source)
        XCTAssertEqual(AudioUnitInitialize(down), noErr)
        let mono = Offline.render(down, frames: 2000, channels: 1)[0]
        let average = (0..<2000).map { (StereoSource.left($0) + StereoSource.right($0)) * 0.5 }
        XCTAssertLessThanOrEqual(Offline.maxDifference(mono, average), 1e-7)
        // Mono → stereo, fed by the first converter: both sides the mono signal.
        let up = try Self.converter(from: Self.format(rate: 44100, channels: 1), to: Self.format(rate: 44100, channels: 2))
        defer { AudioComponentInstanceDispose(up) }
        var connection = AudioUnitConnection(sourceAudioUnit: down, sourceOutputNumber: 0, destInputNumber: 0)
        XCTAssertEqual(AudioUnitSetProperty(up, kAudioUnitProperty_MakeConnection, kAudioUnitScope_Input, 0, &connection, UInt32(MemoryLayout<AudioUnitConnection>.size)), noErr)
        XCTAssertEqual(AudioUnitInitialize(up), noErr)
        let stereo = Offline.render(up, frames: 2000)
        let next = (2000..<4000).map { (StereoSource.left($0) + StereoSource.right($0)) * 0.5 }
        XCTAssertLessThanOrEqual(Offline.maxDifference(stereo[0], next), 1e-7)
        XCTAssertEqual(stereo[0], stereo[1])
    }

    func testTheChannelMapPicksAndSilencesChannels() throws {
        let unit = try Self.converter(from: Self.format(rate: 44100, channels: 2), to: Self.format(rate: 44100, channels: 3))
        defer { AudioComponentInstanceDispose(unit) }
        var map: [Int32] = [1, -1, 0]
        XCTAssertEqual(AudioUnitSetProperty(unit, kAudioOutputUnitProperty_ChannelMap, kAudioUnitScope_Output, 0, &map, 12), noErr)
        var back = [Int32](repeating: 9, count: 3)
        var size = UInt32(12)
        XCTAssertEqual(AudioUnitGetProperty(unit, kAudioOutputUnitProperty_ChannelMap, kAudioUnitScope_Output, 0, &back, &size), noErr)
        XCTAssertEqual(back, map)
        var bad: [Int32] = [-5]
        XCTAssertEqual(AudioUnitSetProperty(unit, kAudioOutputUnitProperty_ChannelMap, kAudioUnitScope_Output, 0, &bad, 4), kAudioUnitErr_InvalidPropertyValue)
        let source = StereoSource()
        Self.feed(unit, StereoSource.callback, source)
        XCTAssertEqual(AudioUnitInitialize(unit), noErr)
        let out = Offline.render(unit, frames: 1000, channels: 3)
        XCTAssertEqual(out[0], (0..<1000).map(StereoSource.right))
        XCTAssertEqual(out[1], [Float](repeating: 0, count: 1000))
        XCTAssertEqual(out[2], (0..<1000).map(StereoSource.left))
    }

    func testA44100ToneAt48000KeepsItsPitchLevelAndPace() throws {
        let unit = try Self.converter(from: Self.format(rate: 44100, channels: 2), to: Self.format(rate: 48000, channels: 2))
        defer { AudioComponentInstanceDispose(unit) }
        let source = Offline.Source()
        source.amplitude = 0.5
        Self.feed(unit, Offline.Source.callback, source)
        XCTAssertEqual(AudioUnitInitialize(unit), noErr)
        let seconds = 10
        let out = Offline.render(unit, frames: seconds * 48000)
        // The input is pulled at its own pace: 44100 frames a second of output, give or take the
        // resampler's look-ahead.
        XCTAssertEqual(Double(source.position), Double(seconds * 44100), accuracy: 64)
        let steady = out[0][48000...]
        XCTAssertEqual(SignalAnalysis.frequency(steady, sampleRate: 48000), 1000, accuracy: 1)
        XCTAssertEqual(SignalAnalysis.toneDB(steady, frequency: 1000, sampleRate: 48000), 20 * log10(0.5 / 2.squareRoot()), accuracy: 0.2)
        XCTAssertLessThanOrEqual(Offline.maxDifference(out[0], out[1]), 0)
    }
}
