// What every openavf-rtcheck scenario shares: the counting window, the helpers, the rigs more than one scenario runs (a tone queue, an engine's render-thread watch), the scenario table and its test files.
import AVFAudio
import AudioTestSupport
import AudioToolbox
import CAllocCounter
import Foundation
import Synchronization

struct Failure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Waits for `condition` for at most `timeout` seconds, checking every 5 ms.
func wait(_ what: String, timeout: Double = 5, _ condition: () -> Bool) throws {
    guard waitUntil(timeout: timeout, condition) else { throw Failure("timed out waiting for \(what)") }
}

/// A pause of `seconds` in which the audio side works on its own.
func hold(_ seconds: Double) { _ = DispatchSemaphore(value: 0).wait(timeout: .now() + seconds) }

func check(_ status: OSStatus, _ what: String) throws {
    guard status == noErr else { throw Failure("\(what) failed: \(status)") }
}

/// Where one scenario's counts come from.
struct Count {
    var allocations: Int64 = 0
    var frees: Int64 = 0
    /// Of those, the calls libpulse's own code made.
    var allocationsInLibpulse: Int64 = 0
    var freesInLibpulse: Int64 = 0
    /// Swift retains and releases.
    var refcounts: Int64 = 0
    var callers: [String] = []
    var refcountCallers: [String] = []

    static func + (a: Count, b: Count) -> Count {
        Count(
            allocations: a.allocations + b.allocations, frees: a.frees + b.frees,
            allocationsInLibpulse: a.allocationsInLibpulse + b.allocationsInLibpulse, freesInLibpulse: a.freesInLibpulse + b.freesInLibpulse,
            refcounts: a.refcounts + b.refcounts, callers: a.callers + b.callers, refcountCallers: a.refcountCallers + b.refcountCallers)
    }
}

/// "symbol+offset (library)" for a code address.
func describe(_ address: UnsafeMutableRawPointer?) -> String {
    var text = [CChar](repeating: 0, count: 256)
    openavf_alloc_describe(address, &text, 256)
    return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// Counts what the server thread allocates and frees while `body` runs.
func watching(_ thread: UInt, _ body: () throws -> Void) rethrows -> Count {
    openavf_alloc_watch_thread(pthread_t(thread))
    defer { openavf_alloc_unwatch() }
    try body()
    let allocations = openavf_alloc_count()
    let frees = openavf_free_count()
    var addresses = [UnsafeMutableRawPointer?](repeating: nil, count: 16)
    let n = Int(openavf_alloc_callers(&addresses, 16))
    let callers = (0..<n).map { index -> String in
        var stack = [UnsafeMutableRawPointer?](repeating: nil, count: 8)
        let depth = Int(openavf_alloc_stack(Int32(index), &stack, 8))
        return stack[0..<depth].map(describe).joined(separator: " < ")
    }
    var refAddresses = [UnsafeMutableRawPointer?](repeating: nil, count: 16)
    let r = Int(openavf_refcount_callers(&refAddresses, 16))
    return Count(
        allocations: allocations, frees: frees, allocationsInLibpulse: openavf_alloc_count_in_libpulse(),
        freesInLibpulse: openavf_free_count_in_libpulse(), refcounts: openavf_refcount_count(), callers: callers,
        refcountCallers: refAddresses[0..<r].map(describe))
}

let mono16 = AudioStreamBasicDescription(
    mSampleRate: 48000, mFormatID: kAudioFormatLinearPCM, mFormatFlags: kAudioFormatFlagIsSignedInteger | kAudioFormatFlagIsPacked,
    mBytesPerPacket: 2, mFramesPerPacket: 1, mBytesPerFrame: 2, mChannelsPerFrame: 1, mBitsPerChannel: 16, mReserved: 0)

/// A playback queue fed a 440 Hz tone by its callback (the user's code, on the queue's thread).
final class TonePlayback: @unchecked Sendable {
    let queue: AudioQueueRef
    private let lock = NSLock()
    private var phase = 0.0
    private var callbacks = 0
    /// Set before an asynchronous stop: the callback stops refilling, as an app's does at its end.
    private var ending = false
    var callbackCount: Int { lock.withLock { callbacks } }

    /// Stops after what is enqueued has played (`AudioQueueStop(_, false)`).
    func stopAtEnd() throws {
        lock.withLock { ending = true }
        try check(AudioQueueStop(queue, false), "AudioQueueStop (asynchronous)")
    }

    init(buffers: Int = 3, seconds: Double = 0.010) throws {
        var format = mono16
        var made: AudioQueueRef?
        let box = Box()
        try check(AudioQueueNewOutputWithDispatchQueue(&made, &format, 0, DispatchQueue(label: "rtcheck.tone")) { q, b in
            box.owner?.fill(q, b)
        }, "AudioQueueNewOutputWithDispatchQueue")
        queue = made!
        box.owner = self
        for _ in 0..<buffers {
            var buffer: AudioQueueBufferRef?
            try check(AudioQueueAllocateBuffer(queue, UInt32(seconds * 48000) * 2, &buffer), "AudioQueueAllocateBuffer")
            self.buffers.append(buffer!)
        }
        try refill()
    }

    private var buffers: [AudioQueueBufferRef] = []

    /// Fills and enqueues every buffer again, as an app does after a reset or stop (whose
    /// callbacks may not enqueue: Apple's `kAudioQueueErr_EnqueueDuringReset`).
    func refill() throws {
        guard AudioQueueWaitForReturnedBuffers(queue, timeout: 5) else { throw Failure("the buffers did not come back") }
        for b in buffers { fill(queue, b) }
    }

    final class Box: @unchecked Sendable { weak var owner: TonePlayback? }

    func fill(_ q: AudioQueueRef, _ b: AudioQueueBufferRef) {
        let frames = Int(b.pointee.mAudioDataBytesCapacity) / 2
        let out = b.pointee.mAudioData.assumingMemoryBound(to: Int16.self)
        let more = lock.withLock {
            callbacks += 1
            guard !ending else { return false }
            for i in 0..<frames {
                out[i] = Int16(9000 * sin(phase))
                phase += 2 * Double.pi * 440 / 48000
            }
            return true
        }
        guard more else { return }
        b.pointee.mAudioDataByteSize = UInt32(frames * 2)
        _ = AudioQueueEnqueueBuffer(q, b, 0, nil)
    }

    func waitForCallbacks(_ n: Int) throws {
        let target = callbackCount + n
        try wait("\(n) playback callbacks") { callbackCount >= target }
    }

    var isRunning: Bool {
        var running: UInt32 = 0
        var size = UInt32(4)
        _ = AudioQueueGetProperty(queue, kAudioQueueProperty_IsRunning, &running, &size)
        return running != 0
    }
}

/// The engine's render thread, seen from a source node's block (the user's real-time code).
final class RenderThreadWatch: @unchecked Sendable {
    let thread = Atomic<UInt>(0)
    let cycles = Atomic<Int>(0)
    let frames = Atomic<Int>(0)
    let taps = Atomic<Int>(0)

    func waitForCycles(_ n: Int) throws {
        let target = cycles.load(ordering: .relaxed) + n
        try wait("\(n) render cycles") { cycles.load(ordering: .relaxed) >= target }
    }

    /// A source node rendering silence that reports each cycle here: its thread, its frames.
    func silentSource(format: AVAudioFormat) -> AVAudioSourceNode {
        AVAudioSourceNode(format: format) { [self] _, _, frames, data in
            thread.store(UInt(pthread_self()), ordering: .relaxed)
            cycles.add(1, ordering: .relaxed)
            self.frames.add(Int(frames), ordering: .relaxed)
            let list = UnsafeMutableAudioBufferListPointer(data)
            for b in 0..<list.count { list[b].mData!.initializeMemory(as: UInt8.self, repeating: 0, count: Int(frames) * 4) }
            return noErr
        }
    }

    /// Waits for `seconds` of audio rendered (cycles are as long as the server asks).
    func waitForAudio(seconds: Double, rate: Double = 48000) throws {
        let target = frames.load(ordering: .relaxed) + Int(seconds * rate)
        try wait("\(seconds) s rendered", timeout: seconds * 2 + 5) { frames.load(ordering: .relaxed) >= target }
    }
}

// MARK: Scenarios

/// libpulse's own allocations on a recording stream's thread.
let capturedBlockRelease =
    "each captured block of the server's shared memory is handed back with a release message; when the "
    + "socket is busy libpulse queues them beyond its free lists (pa_pstream_send_release, pa_queue_push)"

struct Scenario {
    let name: String
    /// Why libpulse's own code may allocate on this thread in this scenario, where it does
    /// something no client of libpulse can avoid: its calls are reported, not failed; the
    /// project's own must still be 0. `nil`: libpulse's must be 0 too.
    var libpulseOwn: String?
    let run: (_ server: PrivatePulseServer, _ files: URL, _ thread: UInt) throws -> Count
}

/// Every scenario, in the order they run and are reported.
@MainActor let scenarios: [Scenario] = [
    lpcmPlaybackScenario, timedStartResetStopScenario, compressedPlaybackScenario, captureScenario, playerScenario, sessionScenario,
    ioProcScenario, engineScenario, engineInputScenario, timePitchScenario, voiceScenario, voiceUnitScenario,
]

/// Test files made by ffmpeg: a 1 s tone as WAV, IMA4 CAF and AAC M4A.
func makeFiles(in dir: URL) throws {
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    guard let ffmpeg = PrivatePulseServer.which("ffmpeg") else { throw Failure("ffmpeg is not installed") }
    for (name, codec) in [("tone.wav", "pcm_s16le"), ("tone.caf", "adpcm_ima_qt"), ("tone.m4a", "aac")] {
        _ = try ChildProcess.run(
            ffmpeg, ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=f=440:d=1:r=48000", "-ac", "1", "-c:a", codec, dir.appendingPathComponent(name).path],
            environment: ["PATH": "/usr/bin:/bin"], scratch: dir.appendingPathComponent("ffmpeg-\(name)").path)
    }
}
