import AudioToolbox
import Foundation
import XCTest

/// Deterministic: playback queues rendered offline on the virtual backend. Rendered frames are
/// exactly the enqueued frames, in order, with trims and gains applied; no server, no sleeps.
final class OfflineRenderTests: XCTestCase {
    final class Log: @unchecked Sendable { var returned: [AudioQueueBufferRef] = [] }

    private func makeQueue(_ format: AudioStreamBasicDescription, log: Log) throws -> AudioQueueRef {
        var format = format
        var q: AudioQueueRef?
        XCTAssertEqual(AudioQueueNewOutput(&format, { userData, _, buffer in
            Unmanaged<Log>.fromOpaque(userData!).takeUnretainedValue().returned.append(buffer)
        }, Unmanaged.passUnretained(log).toOpaque(), nil, nil, 0, &q), noErr)
        return try XCTUnwrap(q)
    }

    private func buffer(_ queue: AudioQueueRef, _ samples: [Float]) -> AudioQueueBufferRef {
        var b: AudioQueueBufferRef?
        AudioQueueAllocateBuffer(queue, UInt32(samples.count * 4), &b)
        samples.withUnsafeBytes { b!.pointee.mAudioData.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        b!.pointee.mAudioDataByteSize = UInt32(samples.count * 4)
        return b!
    }

    /// Renders `frames` frames in chunks of `chunk` and returns them.
    private func render(_ queue: AudioQueueRef, frames: Int, chunk: Int, channels: Int = 1) -> [Float] {
        var out: AudioQueueBufferRef?
        AudioQueueAllocateBuffer(queue, UInt32(chunk * 4 * channels), &out)
        var result: [Float] = []
        var stamp = AudioTimeStamp()
        var done = 0
        while done < frames {
            let n = min(chunk, frames - done)
            XCTAssertEqual(AudioQueueOfflineRender(queue, &stamp, out!, UInt32(n)), noErr)
            XCTAssertEqual(Int(out!.pointee.mAudioDataByteSize), n * 4 * channels)
            let p = out!.pointee.mAudioData.assumingMemoryBound(to: Float.self)
            result += (0..<(n * channels)).map { p[$0] }
            done += n
            stamp.mSampleTime += Double(n)
        }
        return result
    }

    func testRenderedFramesAreTheEnqueuedFramesWithTrimsAndGains() throws {
        let log = Log()
        var format = lpcm(rate: 48000, channels: 1, bits: 32, float: true)
        let queue = try makeQueue(format, log: log)
        defer { AudioQueueDispose(queue, true) }
        XCTAssertEqual(AudioQueueSetOfflineRenderFormat(queue, &format, nil), noErr)

        let a = (0..<1000).map { Float($0) / 1000 }
        let b = (0..<700).map { -Float($0) / 700 }
        let c = (0..<333).map { Float($0 % 7) / 8 }
        let ba = buffer(queue, a), bb = buffer(queue, b), bc = buffer(queue, c)
        XCTAssertEqual(AudioQueueEnqueueBuffer(queue, ba, 0, nil), noErr)
        var gain = AudioQueueParameterEvent(mID: kAudioQueueParam_Volume, mValue: 0.25)
        var actual = AudioTimeStamp()
        XCTAssertEqual(AudioQueueEnqueueBufferWithParameters(queue, bb, 0, nil, 100, 50, 1, &gain, nil, &actual), noErr)
        XCTAssertEqual(actual.mSampleTime, 1000, "actual start time follows the first buffer")
        XCTAssertEqual(AudioQueueEnqueueBufferWithParameters(queue, bc, 0, nil, 0, 33, 0, nil, nil, nil), noErr)
        XCTAssertEqual(AudioQueueStart(queue, nil), noErr)

        let rendered = render(queue, frames: 2000, chunk: 256)
        let expected = a + b[100..<650].map { $0 * 0.25 } + c[0..<300]
        XCTAssertEqual(Array(rendered[0..<expected.count]), expected)
        XCTAssertTrue(rendered[expected.count...].allSatisfy { $0 == 0 }, "silence after the last buffer")
        XCTAssertEqual(log.returned, [ba, bb, bc], "callbacks in enqueue order, each buffer once")
    }

    /// A per-buffer volume change with a ramp time: the gain moves linearly from the previous
    /// buffer's to the new one over the ramp, measured on the rendered samples.
    func testPerBufferVolumeRampTime() throws {
        let log = Log()
        var format = lpcm(rate: 48000, channels: 1, bits: 32, float: true)
        let queue = try makeQueue(format, log: log)
        defer { AudioQueueDispose(queue, true) }
        XCTAssertEqual(AudioQueueSetOfflineRenderFormat(queue, &format, nil), noErr)
        let ones = [Float](repeating: 1, count: 1000)
        XCTAssertEqual(AudioQueueEnqueueBuffer(queue, buffer(queue, ones), 0, nil), noErr)
        // Down to 0 over 10 ms (480 frames) at the second buffer.
        var down = [AudioQueueParameterEvent(mID: kAudioQueueParam_Volume, mValue: 0), AudioQueueParameterEvent(mID: kAudioQueueParam_VolumeRampTime, mValue: 0.01)]
        XCTAssertEqual(AudioQueueEnqueueBufferWithParameters(queue, buffer(queue, ones), 0, nil, 0, 0, 2, &down, nil, nil), noErr)
        // Up to 0.5 over 5 ms (240 frames), from 0 where the previous buffer ended.
        var up = [AudioQueueParameterEvent(mID: kAudioQueueParam_Volume, mValue: 0.5), AudioQueueParameterEvent(mID: kAudioQueueParam_VolumeRampTime, mValue: 0.005)]
        XCTAssertEqual(AudioQueueEnqueueBufferWithParameters(queue, buffer(queue, ones), 0, nil, 0, 0, 2, &up, nil, nil), noErr)
        var bad = AudioQueueParameterEvent(mID: kAudioQueueParam_VolumeRampTime, mValue: .nan)
        XCTAssertEqual(AudioQueueEnqueueBufferWithParameters(queue, buffer(queue, ones), 0, nil, 0, 0, 1, &bad, nil, nil), kAudio_ParamError)
        XCTAssertEqual(AudioQueueStart(queue, nil), noErr)
        let rendered = render(queue, frames: 3000, chunk: 256)

        XCTAssertTrue(rendered[0..<1000].allSatisfy { $0 == 1 }, "the first buffer at full gain")
        let fall = Array(rendered[1000..<1480])
        XCTAssertEqual(fall[0], 1 - 1 / 480, accuracy: 1e-6, "the ramp starts at the previous gain")
        XCTAssertEqual(fall[239], 0.5, accuracy: 1e-3, "half way down after 5 ms")
        XCTAssertEqual(fall[479], 0, accuracy: 1e-6, "down after 10 ms")
        XCTAssertTrue(zip(fall, fall.dropFirst()).allSatisfy { $0 > $1 }, "falls steadily")
        XCTAssertTrue(rendered[1480..<2000].allSatisfy { $0 == 0 }, "then holds the new gain")
        XCTAssertEqual(rendered[2000], 0.5 / 240, accuracy: 1e-6, "the next ramp starts where this one ended")
        XCTAssertEqual(rendered[2119], 0.25, accuracy: 1e-3)
        XCTAssertTrue(rendered[2239..<3000].allSatisfy { abs($0 - 0.5) < 1e-6 }, "0.5 after 5 ms")
    }

    func testInt16QueueRendersExactly() throws {
        let log = Log()
        let queue = try makeQueue(lpcm(rate: 22050, channels: 2), log: log)
        defer { AudioQueueDispose(queue, true) }
        var render = lpcm(rate: 22050, channels: 2, bits: 32, float: true)
        XCTAssertEqual(AudioQueueSetOfflineRenderFormat(queue, &render, nil), noErr)
        let samples: [Int16] = (0..<2000).map { Int16(truncatingIfNeeded: $0 &* 37 &- 20000) }
        var b: AudioQueueBufferRef?
        AudioQueueAllocateBuffer(queue, UInt32(samples.count * 2), &b)
        samples.withUnsafeBytes { b!.pointee.mAudioData.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        b!.pointee.mAudioDataByteSize = UInt32(samples.count * 2)
        XCTAssertEqual(AudioQueueEnqueueBuffer(queue, b!, 0, nil), noErr)
        XCTAssertEqual(AudioQueueStart(queue, nil), noErr)
        let rendered = self.render(queue, frames: 1000, chunk: 100, channels: 2)
        XCTAssertEqual(rendered, samples.map { Float($0) / 32768 })
    }

    func testStartTimeVolumeAndPanOffline() throws {
        let log = Log()
        let queue = try makeQueue(lpcm(rate: 48000, channels: 1, bits: 32, float: true), log: log)
        defer { AudioQueueDispose(queue, true) }
        var stereo = lpcm(rate: 48000, channels: 2, bits: 32, float: true)
        XCTAssertEqual(AudioQueueSetOfflineRenderFormat(queue, &stereo, nil), noErr)
        let ones = [Float](repeating: 1, count: 400)
        var at = AudioTimeStamp()
        at.mSampleTime = 100
        at.mFlags = .sampleTimeValid
        var actual = AudioTimeStamp()
        XCTAssertEqual(AudioQueueEnqueueBufferWithParameters(queue, buffer(queue, ones), 0, nil, 0, 0, 0, nil, &at, &actual), noErr)
        XCTAssertEqual(actual.mSampleTime, 100)
        XCTAssertEqual(AudioQueueSetParameter(queue, kAudioQueueParam_Volume, 0.5), noErr)
        XCTAssertEqual(AudioQueueSetParameter(queue, kAudioQueueParam_Pan, -1), noErr)
        XCTAssertEqual(AudioQueueStart(queue, nil), noErr)
        let rendered = render(queue, frames: 600, chunk: 64, channels: 2)
        let left = stride(from: 0, to: rendered.count, by: 2).map { rendered[$0] }
        let right = stride(from: 1, to: rendered.count, by: 2).map { rendered[$0] }
        XCTAssertTrue(left[0..<100].allSatisfy { $0 == 0 }, "silence before the buffer's start time")
        XCTAssertTrue(left[100..<500].allSatisfy { $0 == 0.5 }, "volume 0.5 on the left")
        XCTAssertTrue(right.allSatisfy { $0 == 0 }, "pan −1 leaves the right channel silent")
        var now = AudioTimeStamp()
        XCTAssertEqual(AudioQueueGetCurrentTime(queue, nil, &now, nil), noErr)
        XCTAssertEqual(now.mSampleTime, 576, "the queue timeline counts rendered frames")
    }

    /// Offline, a start at a device sample time is silent until that frame and plays from it: the
    /// offline stream's clock is its own rendered frames.
    func testStartAtASampleTimeOffline() throws {
        let log = Log()
        let queue = try makeQueue(lpcm(rate: 48000, channels: 1, bits: 32, float: true), log: log)
        defer { AudioQueueDispose(queue, true) }
        var format = lpcm(rate: 48000, channels: 1, bits: 32, float: true)
        XCTAssertEqual(AudioQueueSetOfflineRenderFormat(queue, &format, nil), noErr)
        XCTAssertEqual(AudioQueueEnqueueBuffer(queue, buffer(queue, [Float](repeating: 0.25, count: 300)), 0, nil), noErr)
        var at = AudioTimeStamp()
        at.mSampleTime = 200
        at.mFlags = .sampleTimeValid
        XCTAssertEqual(AudioQueueStart(queue, &at), noErr)
        let rendered = render(queue, frames: 640, chunk: 64)
        XCTAssertTrue(rendered[0..<200].allSatisfy { $0 == 0 }, "silence before the start time")
        XCTAssertTrue(rendered[200..<500].allSatisfy { $0 == 0.25 }, "the buffer from frame 200")
        XCTAssertTrue(rendered[500...].allSatisfy { $0 == 0 })
    }

    func testAsynchronousStopOfflineEndsAfterLastBuffer() throws {
        final class Running: @unchecked Sendable { var values: [UInt32] = [] }
        let log = Log()
        let running = Running()
        var format = lpcm(rate: 48000, channels: 1, bits: 32, float: true)
        let queue = try makeQueue(format, log: log)
        defer { AudioQueueDispose(queue, true) }
        XCTAssertEqual(AudioQueueSetOfflineRenderFormat(queue, &format, nil), noErr)
        AudioQueueAddPropertyListener(queue, kAudioQueueProperty_IsRunning, { userData, queue, id in
            var v: UInt32 = 0
            var size = UInt32(4)
            AudioQueueGetProperty(queue, id, &v, &size)
            Unmanaged<Running>.fromOpaque(userData!).takeUnretainedValue().values.append(v)
        }, Unmanaged.passUnretained(running).toOpaque())
        AudioQueueEnqueueBuffer(queue, buffer(queue, [Float](repeating: 0.5, count: 300)), 0, nil)
        XCTAssertEqual(AudioQueueStart(queue, nil), noErr)
        XCTAssertEqual(AudioQueueStop(queue, false), noErr)
        let rendered = render(queue, frames: 512, chunk: 128)
        XCTAssertEqual(rendered.filter { $0 == 0.5 }.count, 300)
        XCTAssertEqual(running.values, [1, 0])
    }
}

/// Level metering on a rendered full-scale sine: average −3.01 dBFS, peak 0 dBFS, silence −160.
final class QueueMeteringTests: XCTestCase {
    func testFullScaleSineAndSilence() throws {
        var format = lpcm(rate: 48000, channels: 1, bits: 32, float: true)
        var q: AudioQueueRef?
        XCTAssertEqual(AudioQueueNewOutput(&format, { _, _, _ in }, nil, nil, nil, 0, &q), noErr)
        let queue = try XCTUnwrap(q)
        defer { AudioQueueDispose(queue, true) }
        XCTAssertEqual(AudioQueueSetOfflineRenderFormat(queue, &format, nil), noErr)
        var on: UInt32 = 1
        XCTAssertEqual(AudioQueueSetProperty(queue, kAudioQueueProperty_EnableLevelMetering, &on, 4), noErr)
        // 1 kHz at 48 kHz: 48 samples a period, with a sample on each crest.
        let sine = (0..<4800).map { Float(sin(2 * Double.pi * Double($0) / 48 + Double.pi / 2)) }
        var b: AudioQueueBufferRef?
        AudioQueueAllocateBuffer(queue, UInt32(sine.count * 4), &b)
        sine.withUnsafeBytes { b!.pointee.mAudioData.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        b!.pointee.mAudioDataByteSize = UInt32(sine.count * 4)
        AudioQueueEnqueueBuffer(queue, b!, 0, nil)
        XCTAssertEqual(AudioQueueStart(queue, nil), noErr)
        var out: AudioQueueBufferRef?
        AudioQueueAllocateBuffer(queue, 4800 * 4, &out)
        var stamp = AudioTimeStamp()
        XCTAssertEqual(AudioQueueOfflineRender(queue, &stamp, out!, 4800), noErr)
        var meter = AudioQueueLevelMeterState()
        var size = UInt32(MemoryLayout<AudioQueueLevelMeterState>.size)
        XCTAssertEqual(AudioQueueGetProperty(queue, kAudioQueueProperty_CurrentLevelMeterDB, &meter, &size), noErr)
        XCTAssertEqual(meter.mAveragePower, -3.01, accuracy: 0.01)
        XCTAssertEqual(meter.mPeakPower, 0, accuracy: 0.01)
        XCTAssertEqual(AudioQueueOfflineRender(queue, &stamp, out!, 4800), noErr)
        XCTAssertEqual(AudioQueueGetProperty(queue, kAudioQueueProperty_CurrentLevelMeterDB, &meter, &size), noErr)
        XCTAssertEqual(meter.mAveragePower, -160, "digital silence")
        XCTAssertEqual(meter.mPeakPower, -160)
    }
}
