import AVFAudio
import AudioTestSupport
import AudioToolbox
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Dropouts a listener hears: a continuous 1 kHz sine played through an output queue (three
/// buffers of N ms, the audio session's preferred I/O buffer set to N ms, as app code does) or by
/// `pacat --latency-msec=N`, captured on the speaker's monitor, every stretch of silence inside
/// the sine counted. What the server mixed is what the monitor carries, so a silence there is an
/// underrun a listener would hear, whoever caused it.
enum DropoutBench {
    static let rate = 48000.0
    static let frequency = 1000.0
    static let amplitude: Float = 0.5

    struct Figure {
        /// Silences inside the sine.
        var dropouts: Int
        /// Underruns the server reported to the client (the queue's stream), if known.
        var serverUnderruns: Int?
        /// Seconds of sine seen on the monitor.
        var heard: Double
    }

    /// A continuous sine from the queue's callback.
    final class Sine: @unchecked Sendable {
        var phase = 0.0
        var frames = 0
        let total: Int
        init(seconds: Double) { total = Int(seconds * rate) }
        static let callback: AudioQueueOutputCallback = { userData, queue, buffer in
            let me = Unmanaged<Sine>.fromOpaque(userData!).takeUnretainedValue()
            let n = min(Int(buffer.pointee.mAudioDataBytesCapacity) / 4, me.total - me.frames)
            guard n > 0 else { return }
            let out = buffer.pointee.mAudioData.assumingMemoryBound(to: Float.self)
            let step = 2 * Double.pi * frequency / rate
            for i in 0..<n {
                out[i] = amplitude * Float(sin(me.phase))
                me.phase += step
                if me.phase > 2 * Double.pi { me.phase -= 2 * Double.pi }
            }
            me.frames += n
            buffer.pointee.mAudioDataByteSize = UInt32(n * 4)
            AudioQueueEnqueueBuffer(queue, buffer, 0, nil)
        }

        /// The same sine from a render callback (silence once it is all played).
        static let render: AURenderCallback = { refCon, _, _, _, frames, data in
            let me = Unmanaged<Sine>.fromOpaque(refCon).takeUnretainedValue()
            let out = UnsafeMutableAudioBufferListPointer(data!)[0].mData!.assumingMemoryBound(to: Float.self)
            let n = min(Int(frames), max(0, me.total - me.frames))
            let step = 2 * Double.pi * frequency / rate
            for i in 0..<n {
                out[i] = amplitude * Float(sin(me.phase))
                me.phase += step
                if me.phase > 2 * Double.pi { me.phase -= 2 * Double.pi }
            }
            for i in n..<Int(frames) { out[i] = 0 }
            me.frames += n
            return noErr
        }
    }

    /// Silences of at least half a millisecond between the sine's first and last sample.
    static func count(_ samples: [Float]) -> (dropouts: Int, heard: Double) {
        let loud: Float = 0.05, quiet: Float = 0.002
        guard let first = samples.firstIndex(where: { abs($0) > loud }), let last = samples.lastIndex(where: { abs($0) > loud }) else {
            return (0, 0)
        }
        var dropouts = 0
        var run = 0
        for i in first...last {
            if abs(samples[i]) < quiet {
                run += 1
                if run == Int(rate / 2000) { dropouts += 1 }
            } else {
                run = 0
            }
        }
        return (dropouts, Double(last - first) / rate)
    }

    /// An active playback session whose preferred I/O buffer is `milliseconds` (deactivate it
    /// when done), and a capture of the default sink's monitor.
    static func playbackSession(environment: [String: String], milliseconds: Int) throws -> (SignalCapture, AVAudioSession) {
        let session = AVAudioSession.sharedInstance()
        try session.setCategory(.playback)
        try session.setPreferredIOBufferDuration(Double(milliseconds) / 1000)
        try session.setActive(true)
        do {
            return (try SignalCapture(environment: environment, device: defaultMonitorName()), session)
        } catch {
            try? session.setActive(false)
            throw error
        }
    }

    /// The queue: three buffers of `milliseconds`, with an active session whose preferred I/O
    /// buffer duration is the same.
    static func queue(environment: [String: String], milliseconds: Int, seconds: Double) throws -> Figure {
        let (capture, session) = try playbackSession(environment: environment, milliseconds: milliseconds)
        defer { try? session.setActive(false) }
        var format = AudioStreamBasicDescription(
            mSampleRate: rate, mFormatID: kAudioFormatLinearPCM, mFormatFlags: kAudioFormatFlagsNativeFloatPacked,
            mBytesPerPacket: 4, mFramesPerPacket: 1, mBytesPerFrame: 4, mChannelsPerFrame: 1, mBitsPerChannel: 32, mReserved: 0)
        let sine = Sine(seconds: seconds)
        var queue: AudioQueueRef?
        try check(AudioQueueNewOutput(&format, Sine.callback, Unmanaged.passUnretained(sine).toOpaque(), nil, nil, 0, &queue), "AudioQueueNewOutput")
        defer { AudioQueueDispose(queue!, true) }
        for _ in 0..<3 {
            var b: AudioQueueBufferRef?
            AudioQueueAllocateBuffer(queue!, UInt32(Int(rate) * milliseconds / 1000 * 4), &b)
            Sine.callback(Unmanaged.passUnretained(sine).toOpaque(), queue!, b!)
        }
        try check(AudioQueueStart(queue!, nil), "AudioQueueStart")
        pause(seconds + 0.3)
        AudioQueueStop(queue!, true)
        let diagnostics = AudioQueueGetDiagnostics(queue!)
        pause(0.1)
        let (dropouts, heard) = count(capture.stop().first ?? [])
        return Figure(dropouts: dropouts, serverUnderruns: diagnostics?.serverXruns, heard: heard)
    }

    /// The sine from a RemoteIO unit's render callback, the session's preferred I/O buffer at
    /// `milliseconds` (the unit renders when the server asks, what it asks).
    static func ioUnit(environment: [String: String], milliseconds: Int, seconds: Double) throws -> Figure {
        let (capture, session) = try playbackSession(environment: environment, milliseconds: milliseconds)
        defer { try? session.setActive(false) }
        var d = AudioComponentDescription(
            componentType: kAudioUnitType_Output, componentSubType: kAudioUnitSubType_RemoteIO, componentManufacturer: kAudioUnitManufacturer_Apple,
            componentFlags: 0, componentFlagsMask: 0)
        var unit: AudioUnit?
        guard let component = AudioComponentFindNext(nil, &d), AudioComponentInstanceNew(component, &unit) == noErr, let unit else { throw BenchError("no RemoteIO") }
        defer { AudioComponentInstanceDispose(unit) }
        var mono = AudioStreamBasicDescription(
            mSampleRate: rate, mFormatID: kAudioFormatLinearPCM, mFormatFlags: kAudioFormatFlagsNativeFloatPacked,
            mBytesPerPacket: 4, mFramesPerPacket: 1, mBytesPerFrame: 4, mChannelsPerFrame: 1, mBitsPerChannel: 32, mReserved: 0)
        try check(AudioUnitSetProperty(unit, kAudioUnitProperty_StreamFormat, kAudioUnitScope_Input, 0, &mono, UInt32(MemoryLayout<AudioStreamBasicDescription>.size)), "StreamFormat")
        let sine = Sine(seconds: seconds)
        var cb = AURenderCallbackStruct(inputProc: Sine.render, inputProcRefCon: Unmanaged.passUnretained(sine).toOpaque())
        try check(AudioUnitSetProperty(unit, kAudioUnitProperty_SetRenderCallback, kAudioUnitScope_Input, 0, &cb, UInt32(MemoryLayout<AURenderCallbackStruct>.size)), "SetRenderCallback")
        try check(AudioUnitInitialize(unit), "AudioUnitInitialize")
        try check(AudioOutputUnitStart(unit), "AudioOutputUnitStart")
        pause(seconds + 0.3)
        AudioOutputUnitStop(unit)
        pause(0.1)
        let (dropouts, heard) = count(capture.stop().first ?? [])
        return Figure(dropouts: dropouts, serverUnderruns: nil, heard: heard)
    }

    /// `pacat --latency-msec=milliseconds` playing the same sine from a file.
    static func pacat(environment: [String: String], milliseconds: Int, seconds: Double) throws -> Figure {
        guard let pacat = PrivatePulseServer.which("pacat") else { throw BenchError("pacat is needed") }
        let file = NSTemporaryDirectory() + "openavf-bench-\(getpid())-sine.raw"
        defer { unlink(file) }
        let step = 2 * Double.pi * frequency / rate
        let samples = (0..<Int(seconds * rate)).map { amplitude * Float(sin(Double($0) * step)) }
        try samples.withUnsafeBytes { Data($0) }.write(to: URL(fileURLWithPath: file))
        let capture = try SignalCapture(environment: environment, device: defaultMonitorName())
        let child = try ChildProcess(pacat, [
            "--playback", "--raw", "--format=float32le", "--rate=\(Int(rate))", "--channels=1", "--latency-msec=\(milliseconds)", file,
        ], environment: environment)
        child.wait()
        pause(0.1)
        let (dropouts, heard) = count(capture.stop().first ?? [])
        return Figure(dropouts: dropouts, serverUnderruns: nil, heard: heard)
    }
}
