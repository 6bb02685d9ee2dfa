import AudioTestSupport
import AudioToolbox
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Playback CPU time beside pacat, and the busy loops that load every core.
enum PlaybackBench {
    static let rate = 48000.0

    /// Feeds a 16-bit stereo queue from a precomputed tone, as a player copies decoded audio.
    final class Feeder: @unchecked Sendable {
        let tone: [Int16]
        var position = 0
        let totalFrames: Int
        let done = DispatchSemaphore(value: 0)
        init(seconds: Double) {
            let period = 480
            tone = (0..<(period * 2)).map { i in Int16(12000 * sin(2 * Double.pi * Double(i / 2) / Double(period))) }
            totalFrames = Int(seconds * rate)
        }
        static let callback: AudioQueueOutputCallback = { userData, queue, buffer in
            let me = Unmanaged<Feeder>.fromOpaque(userData!).takeUnretainedValue()
            let frames = min(Int(buffer.pointee.mAudioDataBytesCapacity) / 4, me.totalFrames - me.position)
            guard frames > 0 else { return }
            let out = buffer.pointee.mAudioData.assumingMemoryBound(to: Int16.self)
            let period = me.tone.count
            // Whole runs of the tone copied at once, as a player copies decoded audio: the app's
            // own work should cost what pacat's reading of a file costs, not a loop per sample.
            me.tone.withUnsafeBufferPointer { tone in
                var j = (me.position * 2) % period
                var i = 0
                while i < frames * 2 {
                    let n = min(frames * 2 - i, period - j)
                    (out + i).update(from: tone.baseAddress! + j, count: n)
                    i += n
                    j = (j + n) % period
                }
            }
            me.position += frames
            buffer.pointee.mAudioDataByteSize = UInt32(frames * 4)
            AudioQueueEnqueueBuffer(queue, buffer, 0, nil)
            if me.position >= me.totalFrames { me.done.signal() }
        }
    }

    struct Result {
        var serverUnderruns: Int
        var starvedFrames: Int
        var cpuSeconds: Double
    }

    /// Plays `seconds` through three buffers of `milliseconds`; returns underruns and this
    /// process's CPU time over the playback.
    static func play(milliseconds: Int, seconds: Double) throws -> Result {
        var format = AudioStreamBasicDescription(
            mSampleRate: rate, mFormatID: kAudioFormatLinearPCM, mFormatFlags: kAudioFormatFlagIsSignedInteger | kAudioFormatFlagIsPacked,
            mBytesPerPacket: 4, mFramesPerPacket: 1, mBytesPerFrame: 4, mChannelsPerFrame: 2, mBitsPerChannel: 16, mReserved: 0)
        let feeder = Feeder(seconds: seconds)
        var queue: AudioQueueRef?
        try check(AudioQueueNewOutput(&format, Feeder.callback, Unmanaged.passUnretained(feeder).toOpaque(), nil, nil, 0, &queue), "AudioQueueNewOutput")
        defer { AudioQueueDispose(queue!, true) }
        let bytes = UInt32(Int(rate) * milliseconds / 1000 * 4)
        for _ in 0..<3 {
            var b: AudioQueueBufferRef?
            AudioQueueAllocateBuffer(queue!, bytes, &b)
            Feeder.callback(Unmanaged.passUnretained(feeder).toOpaque(), queue!, b!)
        }
        let before = cpuTime()
        try check(AudioQueueStart(queue!, nil), "AudioQueueStart")
        guard feeder.done.wait(timeout: .now() + seconds + 10) == .success else { throw BenchError("playback stalled") }
        AudioQueueStop(queue!, false)
        let cpu = cpuTime() - before
        let d = AudioQueueGetDiagnostics(queue!)!
        return Result(serverUnderruns: d.serverXruns, starvedFrames: d.starvedFrames, cpuSeconds: cpu)
    }

    /// pacat playing the same audio (16-bit stereo, same latency) from a file; its CPU time.
    static func pacatCPU(server: ServerHandle, milliseconds: Int, seconds: Double) throws -> Double {
        guard let pacat = PrivatePulseServer.which("pacat") else { throw BenchError("pacat is needed") }
        let feeder = Feeder(seconds: seconds)
        let file = NSTemporaryDirectory() + "openavf-bench-\(getpid()).raw"
        defer { unlink(file) }
        var samples = [Int16](repeating: 0, count: feeder.totalFrames * 2)
        for i in 0..<samples.count { samples[i] = feeder.tone[i % feeder.tone.count] }
        try samples.withUnsafeBytes { Data($0) }.write(to: URL(fileURLWithPath: file))
        let child = try ChildProcess(pacat, [
            "--playback", "--raw", "--format=s16le", "--rate=\(Int(rate))", "--channels=2", "--latency-msec=\(milliseconds)", file,
        ], environment: server.environment)
        var status: Int32 = 0
        var usage = rusage()
        while wait4(child.pid, &status, 0, &usage) < 0 && errno == EINTR {}
        return time(usage.ru_utime) + time(usage.ru_stime)
    }

    static func time(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }

    static func cpuTime() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return time(usage.ru_utime) + time(usage.ru_stime)
    }

    /// Busy loops in `count` child processes, to keep every core loaded.
    static func loadCores(_ count: Int) throws -> [ChildProcess] {
        try (0..<count).map { _ in
            try ChildProcess("/bin/sh", ["-c", "while :; do :; done"], environment: ProcessInfo.processInfo.environment)
        }
    }
}
