import AudioToolbox
import Foundation
import XCTest

/// Bad calls get Apple's result codes and change nothing. No sound server needed: these fail
/// before any stream opens (or run offline).
final class ErrorCodeTests: XCTestCase {
    private static let ignore: AudioQueueOutputCallback = { _, _, _ in }

    private func newOutput(_ format: AudioStreamBasicDescription) -> (OSStatus, AudioQueueRef?) {
        var format = format
        var queue: AudioQueueRef?
        let status = AudioQueueNewOutput(&format, Self.ignore, nil, nil, nil, 0, &queue)
        return (status, queue)
    }

    func testBadStreamDescriptions() {
        var zeroRate = lpcm(rate: 44100, channels: 2)
        zeroRate.mSampleRate = 0
        var zeroChannels = lpcm(rate: 44100, channels: 2)
        zeroChannels.mChannelsPerFrame = 0
        var unknownFormat = lpcm(rate: 44100, channels: 2)
        unknownFormat.mFormatID = fourCC("zzzz")
        var inconsistent = lpcm(rate: 44100, channels: 2)
        inconsistent.mBytesPerFrame = 3
        for (name, format) in [("zero rate", zeroRate), ("zero channels", zeroChannels), ("unknown format", unknownFormat), ("bytes per frame", inconsistent)] {
            let (status, queue) = newOutput(format)
            XCTAssertEqual(status, kAudioFormatUnsupportedDataFormatError, name)
            XCTAssertNil(queue, name)
            var input: AudioQueueRef?
            var f = format
            XCTAssertEqual(AudioQueueNewInput(&f, { _, _, _, _, _, _ in }, nil, nil, nil, 0, &input), kAudioFormatUnsupportedDataFormatError, name)
            XCTAssertNil(input, name)
        }
    }

    func testBufferOfAnotherQueue() throws {
        let (s1, q1) = newOutput(lpcm(rate: 48000, channels: 1))
        let (s2, q2) = newOutput(lpcm(rate: 48000, channels: 1))
        XCTAssertEqual(s1, noErr)
        XCTAssertEqual(s2, noErr)
        let a = try XCTUnwrap(q1), b = try XCTUnwrap(q2)
        defer {
            AudioQueueDispose(a, true)
            AudioQueueDispose(b, true)
        }
        var foreign: AudioQueueBufferRef?
        XCTAssertEqual(AudioQueueAllocateBuffer(b, 960, &foreign), noErr)
        foreign!.pointee.mAudioDataByteSize = 960
        XCTAssertEqual(AudioQueueEnqueueBuffer(a, foreign!, 0, nil), kAudioQueueErr_InvalidBuffer)
        XCTAssertEqual(AudioQueueFreeBuffer(a, foreign!), kAudioQueueErr_InvalidBuffer)
        // Unchanged: the buffer still belongs to its queue and can be enqueued there, once.
        XCTAssertEqual(AudioQueueEnqueueBuffer(b, foreign!, 0, nil), noErr)
        XCTAssertEqual(AudioQueueEnqueueBuffer(b, foreign!, 0, nil), kAudioQueueErr_BufferEnqueuedTwice)
        XCTAssertEqual(AudioQueueFreeBuffer(b, foreign!), kAudioQueueErr_BufferInQueue)
        var empty: AudioQueueBufferRef?
        XCTAssertEqual(AudioQueueAllocateBuffer(a, 960, &empty), noErr)
        XCTAssertEqual(AudioQueueEnqueueBuffer(a, empty!, 0, nil), kAudioQueueErr_BufferEmpty)
        empty!.pointee.mAudioDataByteSize = 961
        XCTAssertEqual(AudioQueueEnqueueBuffer(a, empty!, 0, nil), kAudio_ParamError, "not a whole number of frames")
        empty!.pointee.mAudioDataByteSize = 960
        XCTAssertEqual(AudioQueueEnqueueBufferWithParameters(a, empty!, 0, nil, 400, 400, 0, nil, nil, nil), kAudio_ParamError, "trims longer than the buffer")
    }

    func testParametersAndProperties() throws {
        let (status, q) = newOutput(lpcm(rate: 48000, channels: 2))
        XCTAssertEqual(status, noErr)
        let queue = try XCTUnwrap(q)
        defer { AudioQueueDispose(queue, true) }
        XCTAssertEqual(AudioQueueSetParameter(queue, kAudioQueueParam_Volume, 0.25), noErr)
        XCTAssertEqual(AudioQueueSetParameter(queue, 999, 0.5), kAudioQueueErr_InvalidParameter)
        var value: AudioQueueParameterValue = -1
        XCTAssertEqual(AudioQueueGetParameter(queue, 999, &value), kAudioQueueErr_InvalidParameter)
        XCTAssertEqual(value, -1, "a failed get writes nothing")
        XCTAssertEqual(AudioQueueGetParameter(queue, kAudioQueueParam_Volume, &value), noErr)
        XCTAssertEqual(value, 0.25, "a failed set changes nothing")

        var format = AudioStreamBasicDescription()
        var size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size - 1)
        XCTAssertEqual(AudioQueueGetProperty(queue, kAudioQueueProperty_StreamDescription, &format, &size), kAudioQueueErr_InvalidPropertySize)
        XCTAssertEqual(format.mSampleRate, 0, "a failed get writes nothing")
        size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
        XCTAssertEqual(AudioQueueGetPropertySize(queue, kAudioQueueProperty_StreamDescription, &size), noErr)
        XCTAssertEqual(size, 40)
        XCTAssertEqual(AudioQueueGetProperty(queue, kAudioQueueProperty_StreamDescription, &format, &size), noErr)
        XCTAssertEqual(format.mSampleRate, 48000)
        XCTAssertEqual(format.mChannelsPerFrame, 2)

        var on: UInt16 = 1
        XCTAssertEqual(AudioQueueSetProperty(queue, kAudioQueueProperty_EnableLevelMetering, &on, 2), kAudioQueueErr_InvalidPropertySize)
        var enabled: UInt32 = 7
        size = 4
        XCTAssertEqual(AudioQueueGetProperty(queue, kAudioQueueProperty_EnableLevelMetering, &enabled, &size), noErr)
        XCTAssertEqual(enabled, 0, "a failed set changes nothing")
        XCTAssertEqual(AudioQueueGetProperty(queue, fourCC("nope"), &enabled, &size), kAudioQueueErr_InvalidProperty)
        var running: UInt32 = 0
        XCTAssertEqual(AudioQueueSetProperty(queue, kAudioQueueProperty_IsRunning, &running, 4), kAudioQueueErr_InvalidProperty, "read-only")
        var meters = [AudioQueueLevelMeterState](repeating: .init(), count: 2)
        size = UInt32(MemoryLayout<AudioQueueLevelMeterState>.stride * 2)
        XCTAssertEqual(AudioQueueGetProperty(queue, kAudioQueueProperty_CurrentLevelMeterDB, &meters, &size), kAudioQueueErr_InvalidPropertyValue, "metering not enabled")
        var stamp = AudioTimeStamp()
        XCTAssertEqual(AudioQueueGetCurrentTime(queue, nil, &stamp, nil), kAudioQueueErr_InvalidRunState, "never started")

        // Start times no timeline can hold are bad parameters, never a trap.
        var buffer: AudioQueueBufferRef?
        XCTAssertEqual(AudioQueueAllocateBuffer(queue, 4 * 480, &buffer), noErr)
        let b = try XCTUnwrap(buffer)
        b.pointee.mAudioDataByteSize = 4 * 480
        for bad in [Double.nan, .infinity, -.infinity, 1e300] {
            var at = AudioTimeStamp()
            at.mSampleTime = bad
            at.mFlags = .sampleTimeValid
            XCTAssertEqual(AudioQueueEnqueueBufferWithParameters(queue, b, 0, nil, 0, 0, 0, nil, &at, nil), kAudio_ParamError, "start at \(bad)")
        }
    }

    /// No hardware codecs here: a compressed queue told to use nothing else cannot start or
    /// prime; every other policy decodes in software; linear PCM needs no codec at all.
    func testHardwareCodecPolicy() throws {
        let aac = AudioStreamBasicDescription(
            mSampleRate: 44100, mFormatID: kAudioFormatMPEG4AAC, mFormatFlags: 0, mBytesPerPacket: 0, mFramesPerPacket: 1024,
            mBytesPerFrame: 0, mChannelsPerFrame: 2, mBitsPerChannel: 0, mReserved: 0)
        let (status, q) = newOutput(aac)
        XCTAssertEqual(status, noErr)
        let queue = try XCTUnwrap(q)
        defer { AudioQueueDispose(queue, true) }
        var policy: UInt32 = 99
        var size = UInt32(4)
        XCTAssertEqual(AudioQueueGetProperty(queue, kAudioQueueProperty_HardwareCodecPolicy, &policy, &size), noErr)
        XCTAssertEqual(policy, kAudioQueueHardwareCodecPolicy_Default)
        var bad: UInt32 = 5
        XCTAssertEqual(AudioQueueSetProperty(queue, kAudioQueueProperty_HardwareCodecPolicy, &bad, 4), kAudioQueueErr_InvalidPropertyValue)
        var hardwareOnly = kAudioQueueHardwareCodecPolicy_UseHardwareOnly
        XCTAssertEqual(AudioQueueSetProperty(queue, kAudioQueueProperty_HardwareCodecPolicy, &hardwareOnly, 4), noErr)
        XCTAssertEqual(AudioQueueGetProperty(queue, kAudioQueueProperty_HardwareCodecPolicy, &policy, &size), noErr)
        XCTAssertEqual(policy, kAudioQueueHardwareCodecPolicy_UseHardwareOnly)
        XCTAssertEqual(AudioQueueStart(queue, nil), kAudioQueueErr_InvalidCodecAccess)
        XCTAssertEqual(AudioQueuePrime(queue, 0, nil), kAudioQueueErr_InvalidCodecAccess)

        let (pcmStatus, p) = newOutput(lpcm(rate: 48000, channels: 2))
        XCTAssertEqual(pcmStatus, noErr)
        let pcm = try XCTUnwrap(p)
        defer { AudioQueueDispose(pcm, true) }
        XCTAssertEqual(AudioQueueSetProperty(pcm, kAudioQueueProperty_HardwareCodecPolicy, &hardwareOnly, 4), noErr)
        var running: UInt32 = 1
        XCTAssertEqual(AudioQueueGetProperty(pcm, kAudioQueueProperty_IsRunning, &running, &size), noErr)
        XCTAssertEqual(running, 0)
    }

    func testEnqueueDuringReset() throws {
        final class Box: @unchecked Sendable { var statuses: [OSStatus] = [] }
        let box = Box()
        var format = lpcm(rate: 48000, channels: 1, bits: 32, float: true)
        var q: AudioQueueRef?
        XCTAssertEqual(AudioQueueNewOutput(&format, { userData, queue, buffer in
            let box = Unmanaged<Box>.fromOpaque(userData!).takeUnretainedValue()
            box.statuses.append(AudioQueueEnqueueBuffer(queue, buffer, 0, nil))
        }, Unmanaged.passUnretained(box).toOpaque(), nil, nil, 0, &q), noErr)
        let queue = try XCTUnwrap(q)
        defer { AudioQueueDispose(queue, true) }
        XCTAssertEqual(AudioQueueSetOfflineRenderFormat(queue, &format, nil), noErr)
        for _ in 0..<3 {
            var b: AudioQueueBufferRef?
            AudioQueueAllocateBuffer(queue, 400, &b)
            b!.pointee.mAudioDataByteSize = 400
            XCTAssertEqual(AudioQueueEnqueueBuffer(queue, b!, 0, nil), noErr)
        }
        XCTAssertEqual(AudioQueueStart(queue, nil), noErr)
        XCTAssertEqual(AudioQueueReset(queue), noErr)
        XCTAssertEqual(box.statuses, [kAudioQueueErr_EnqueueDuringReset, kAudioQueueErr_EnqueueDuringReset, kAudioQueueErr_EnqueueDuringReset])
    }
}
