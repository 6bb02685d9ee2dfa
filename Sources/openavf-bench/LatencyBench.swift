import AVFAudio
import AudioTestSupport
import AudioToolbox
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Round-trip latency: output queue → speaker → monitor → input queue, beside pacat | parec.
enum LatencyBench {
    static let rate = 48000.0

    /// The output side: fills buffers with the click train and logs each click's due time.
    final class Source: @unchecked Sendable {
        let clicks: ClickTrain
        let log: ClickLog
        var position = 0
        init(clicks: ClickTrain, log: ClickLog) {
            self.clicks = clicks
            self.log = log
        }
        static let callback: AudioQueueOutputCallback = { userData, queue, buffer in
            let me = Unmanaged<Source>.fromOpaque(userData!).takeUnretainedValue()
            let now = AudioGetCurrentHostTime()
            let frames = Int(buffer.pointee.mAudioDataBytesCapacity) / 4
            let out = buffer.pointee.mAudioData.assumingMemoryBound(to: Float.self)
            for i in 0..<frames {
                let n = me.position + i
                out[i] = me.clicks.sample(n)
                if me.clicks.starts(n) { me.log.handed(at: now + UInt64(Double(i) / rate * 1e9)) }
            }
            me.position += frames
            buffer.pointee.mAudioDataByteSize = UInt32(frames * 4)
            AudioQueueEnqueueBuffer(queue, buffer, 0, nil)
        }
    }

    /// The input side: scans each delivered buffer for clicks.
    final class Sink: @unchecked Sendable {
        let log: ClickLog
        init(log: ClickLog) { self.log = log }
        static let callback: AudioQueueInputCallback = { userData, queue, buffer, _, _, _ in
            let me = Unmanaged<Sink>.fromOpaque(userData!).takeUnretainedValue()
            let now = AudioGetCurrentHostTime()
            let n = Int(buffer.pointee.mAudioDataByteSize) / 4
            me.log.scan(UnsafeBufferPointer(start: buffer.pointee.mAudioData.assumingMemoryBound(to: Float.self), count: n), arrivedAt: now)
            AudioQueueEnqueueBuffer(queue, buffer, 0, nil)
        }
    }

    /// A round trip of the queues and what their pattern itself implies.
    struct RoundTrip {
        /// Median click latency, ms.
        var milliseconds: Double
        /// The server buffers the output and input streams were granted, ms.
        var outputGranted: Double
        var inputGranted: Double
        /// The pattern's own bound: (K − 1)·N ahead in the queue, the output stream's server
        /// buffer, N to fill an input buffer, and one period of the server's capture (the input
        /// stream's granted fragment).
        func bound(buffers: Int, milliseconds n: Int) -> Double { Double((buffers - 1) * n) + outputGranted + Double(n) + inputGranted }
    }

    /// Our round trip with `outputBuffers` output buffers and input buffers of `milliseconds`;
    /// with `session`, an active play-and-record session whose preferred I/O buffer duration is
    /// `milliseconds` (as app code sets it).
    static func queues(milliseconds: Int, seconds: Double, outputBuffers: Int = 2, session: Bool) throws -> RoundTrip? {
        if session {
            let s = AVAudioSession.sharedInstance()
            try s.setCategory(.playAndRecord)
            try s.setPreferredIOBufferDuration(Double(milliseconds) / 1000)
            try s.setActive(true)
        }
        defer { if session { try? AVAudioSession.sharedInstance().setActive(false) } }
        let log = ClickLog()
        let frames = Int(rate) * milliseconds / 1000
        var format = AudioStreamBasicDescription(
            mSampleRate: rate, mFormatID: kAudioFormatLinearPCM, mFormatFlags: kAudioFormatFlagsNativeFloatPacked,
            mBytesPerPacket: 4, mFramesPerPacket: 1, mBytesPerFrame: 4, mChannelsPerFrame: 1, mBitsPerChannel: 32, mReserved: 0)
        let source = Source(clicks: .quarterSecond, log: log)
        let sink = Sink(log: log)
        var input: AudioQueueRef?
        var output: AudioQueueRef?
        try check(AudioQueueNewInput(&format, Sink.callback, Unmanaged.passUnretained(sink).toOpaque(), nil, nil, 0, &input), "AudioQueueNewInput")
        try check(AudioQueueNewOutput(&format, Source.callback, Unmanaged.passUnretained(source).toOpaque(), nil, nil, 0, &output), "AudioQueueNewOutput")
        defer {
            AudioQueueDispose(output!, true)
            AudioQueueDispose(input!, true)
        }
        let monitor: CFString? = defaultMonitorName() as CFString
        _ = withUnsafePointer(to: monitor) { AudioQueueSetProperty(input!, kAudioQueueProperty_CurrentDevice, $0, UInt32(MemoryLayout<CFString?>.size)) }
        for _ in 0..<4 {
            var b: AudioQueueBufferRef?
            AudioQueueAllocateBuffer(input!, UInt32(frames * 4), &b)
            AudioQueueEnqueueBuffer(input!, b!, 0, nil)
        }
        try check(AudioQueueStart(input!, nil), "AudioQueueStart (input)")
        for _ in 0..<outputBuffers {
            var b: AudioQueueBufferRef?
            AudioQueueAllocateBuffer(output!, UInt32(frames * 4), &b)
            Source.callback(Unmanaged.passUnretained(source).toOpaque(), output!, b!)
        }
        try check(AudioQueueStart(output!, nil), "AudioQueueStart (output)")
        pause(seconds)
        let granted = (AudioQueueGetDiagnostics(output!)?.grantedBufferDuration ?? 0, AudioQueueGetDiagnostics(input!)?.grantedBufferDuration ?? 0)
        AudioQueueStop(output!, true)
        AudioQueueStop(input!, true)
        return log.medianMilliseconds().map { RoundTrip(milliseconds: $0, outputGranted: granted.0 * 1000, inputGranted: granted.1 * 1000) }
    }

    /// pacat | parec at `--latency-msec=milliseconds`, fed as a K-buffer output queue feeds its
    /// stream: the writer hands over the next chunk of the click train as soon as no more than
    /// `buffers − 1` chunks wait in pacat's input pipe (pacat reads only what its stream asks for,
    /// so the pipe is the queue and the stream's buffer stays as full as the server wants it).
    /// A writer paced by the wall clock instead lets pacat's server buffer run partly empty and
    /// measures a stream on the edge of underrunning, not a latency. The reader timestamps each
    /// full chunk parec hands over, as an input queue delivers full buffers.
    static func pacatParec(server: ServerHandle, milliseconds: Int, seconds: Double, buffers: Int = 2) throws -> Double? {
        let log = ClickLog()
        let clicks = ClickTrain.quarterSecond
        let frames = Int(rate) * milliseconds / 1000
        guard let pacat = PrivatePulseServer.which("pacat"), let parec = PrivatePulseServer.which("parec") else {
            throw BenchError("pacat and parec are needed (apt-get install pulseaudio-utils)")
        }
        let format = ["--raw", "--format=float32le", "--rate=\(Int(rate))", "--channels=1", "--latency-msec=\(milliseconds)"]
        let outPipe = try CloseOnExecPipe()
        let reader = try ChildProcess(parec, ["--device=\(defaultMonitorName())"] + format, environment: server.environment, stdout: .descriptor(outPipe.write))
        close(outPipe.write)
        let inPipe = try CloseOnExecPipe()
        let writer = try ChildProcess(pacat, ["--playback"] + format, environment: server.environment, stdin: .descriptor(inPipe.read))
        close(inPipe.read)
        defer {
            writer.terminate()
            reader.terminate()
            close(outPipe.read)
        }
        let readerDone = DispatchSemaphore(value: 0)
        let readFD = outPipe.read
        Thread {
            var chunk = [Float](repeating: 0, count: 16384)
            var block: [Float] = []
            while true {
                let n = chunk.withUnsafeMutableBytes { read(readFD, $0.baseAddress, $0.count) }
                if n <= 0 { break }
                let now = AudioGetCurrentHostTime()
                block += chunk[0..<(n / 4)]
                while block.count >= frames {
                    block[0..<frames].withUnsafeBufferPointer { log.scan($0, arrivedAt: now) }
                    block.removeFirst(frames)
                }
            }
            readerDone.signal()
        }.start()
        // Writer: chunk i goes in once no more than buffers − 1 chunks wait in the pipe.
        let chunkBytes = frames * 4
        let end = AudioGetCurrentHostTime() + UInt64(seconds * 1e9)
        var chunk = [Float](repeating: 0, count: frames)
        var i = 0
        while AudioGetCurrentHostTime() < end {
            var waiting: Int32 = 0
            guard ioctl(inPipe.write, UInt(FIONREAD), &waiting) == 0 else { throw BenchError("FIONREAD on pacat's pipe failed") }
            if Int(waiting) > (buffers - 1) * chunkBytes {
                usleep(50)  // the anchor hands over up to this late: keep it well under the figures compared
                continue
            }
            let now = AudioGetCurrentHostTime()
            for j in 0..<frames {
                let n = i * frames + j
                chunk[j] = clicks.sample(n)
                if clicks.starts(n) { log.handed(at: now + UInt64(Double(j) / rate * 1e9)) }
            }
            let written = chunk.withUnsafeBytes { write(inPipe.write, $0.baseAddress, $0.count) }
            if written < 0 { break }
            i += 1
        }
        close(inPipe.write)
        return log.medianMilliseconds()
    }
}

/// Sleeps until the host clock reaches `hostTime` (the benchmark paces a writer; tests never sleep).
func waitUntilHostTime(_ hostTime: UInt64) {
    let now = AudioGetCurrentHostTime()
    if hostTime > now { usleep(UInt32((hostTime - now) / 1000)) }
}

/// Runs the current thread's run loop for `seconds` (lets time pass in a benchmark).
func pause(_ seconds: Double) {
    waitUntilHostTime(AudioGetCurrentHostTime() + UInt64(seconds * 1e9))
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

func check(_ status: OSStatus, _ what: String) throws {
    guard status == noErr else { throw BenchError("\(what) failed: \(status.osStatusDescription)") }
}
