// openavf-rtcheck: counts heap allocations, frees and Swift retains/releases on the real-time
// server thread while the public API does everything an app does with it, on the project's
// private PulseAudio server. (Retains and releases are held to 0 in release builds only.)
//
//   openavf-rtcheck [scenario…]     all scenarios when none is named; exit 1 if any count is not 0
//
// CAllocCounter replaces malloc and free for this process and counts the calls made on one
// watched thread: the audio connection's main-loop thread, the only real-time thread there is
// (introspection and subscriptions run on the control connection's own thread), and in the
// `ioproc` scenario a device's I/O thread, where IOProcs run, and in the `engine` and
// `engine-timepitch` scenarios an AVAudioEngine's render thread (its I/O unit's own). Each scenario's
// streams are opened before its window (opening a stream is setup, not rendering); the window
// runs from the first render of a run to its end: starts, parameter changes, pauses, stops,
// resets, drains, a player's loops and seeks, and a session's interruption and route changes.
// The test suite runs the debug build (ServerThreadAllocationTests); Scripts/test runs the
// release build.
import AVFAudio
import AudioGraph
import AudioHAL
import AudioTestSupport
import AudioToolbox
import CAllocCounter
import CoreAudio
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

/// A recording queue whose callback re-enqueues every buffer.
final class Capture: @unchecked Sendable {
    let queue: AudioQueueRef
    private let lock = NSLock()
    private var callbacks = 0
    var callbackCount: Int { lock.withLock { callbacks } }

    init(format: AudioStreamBasicDescription, bufferBytes: UInt32) throws {
        var format = format
        var made: AudioQueueRef?
        let box = Box()
        try check(AudioQueueNewInputWithDispatchQueue(&made, &format, 0, DispatchQueue(label: "rtcheck.capture")) { q, b, _, _, _ in
            box.owner?.lock.withLock { box.owner?.callbacks += 1 }
            _ = AudioQueueEnqueueBuffer(q, b, 0, nil)
        }, "AudioQueueNewInputWithDispatchQueue")
        queue = made!
        box.owner = self
        for _ in 0..<3 {
            var buffer: AudioQueueBufferRef?
            try check(AudioQueueAllocateBufferWithPacketDescriptions(queue, bufferBytes, 512, &buffer), "AudioQueueAllocateBuffer")
            buffers.append(buffer!)
        }
        try reenqueue()
    }

    private var buffers: [AudioQueueBufferRef] = []

    /// Enqueues every buffer again, as an app does after a stop (whose callbacks may not enqueue).
    func reenqueue() throws {
        guard AudioQueueWaitForReturnedBuffers(queue, timeout: 5) else { throw Failure("the buffers did not come back") }
        for b in buffers { try check(AudioQueueEnqueueBuffer(queue, b, 0, nil), "AudioQueueEnqueueBuffer") }
    }

    final class Box: @unchecked Sendable { weak var owner: Capture? }

    func waitForCallbacks(_ n: Int) throws {
        let target = callbackCount + n
        try wait("\(n) capture callbacks") { callbackCount >= target }
    }
}

/// A compressed file's packets played through a queue of the file's own format.
final class PacketPlayback: @unchecked Sendable {
    let queue: AudioQueueRef
    let file: AudioFileID
    let packetCount: Int64
    private let lock = NSLock()
    private var next: Int64 = 0
    /// Every packet is enqueued.
    var finished: Bool { lock.withLock { _finished } }
    private var _finished = false

    init(url: URL) throws {
        var opened: AudioFileID?
        try check(AudioFileOpenURL(url as CFURL, .readPermission, 0, &opened), "AudioFileOpenURL \(url.lastPathComponent)")
        file = opened!
        var format = AudioStreamBasicDescription()
        var size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
        try check(AudioFileGetProperty(file, kAudioFilePropertyDataFormat, &size, &format), "the file's format")
        var count: Int64 = 0
        size = 8
        try check(AudioFileGetProperty(file, kAudioFilePropertyAudioDataPacketCount, &size, &count), "the packet count")
        packetCount = count
        var made: AudioQueueRef?
        let box = Box()
        try check(AudioQueueNewOutputWithDispatchQueue(&made, &format, 0, DispatchQueue(label: "rtcheck.packets")) { q, b in
            box.owner?.fill(q, b)
        }, "AudioQueueNewOutputWithDispatchQueue (\(url.lastPathComponent))")
        queue = made!
        box.owner = self
        var cookieSize: UInt32 = 0
        if AudioFileGetPropertyInfo(file, kAudioFilePropertyMagicCookieData, &cookieSize, nil) == noErr, cookieSize > 0 {
            var cookie = [UInt8](repeating: 0, count: Int(cookieSize))
            try check(AudioFileGetProperty(file, kAudioFilePropertyMagicCookieData, &cookieSize, &cookie), "the magic cookie")
            try check(AudioQueueSetProperty(queue, kAudioQueueProperty_MagicCookie, cookie, cookieSize), "the queue's magic cookie")
        }
        for _ in 0..<3 {
            var buffer: AudioQueueBufferRef?
            try check(AudioQueueAllocateBufferWithPacketDescriptions(queue, 8192, 64, &buffer), "AudioQueueAllocateBuffer")
            fill(queue, buffer!)
        }
    }

    deinit { AudioFileClose(file) }

    final class Box: @unchecked Sendable { weak var owner: PacketPlayback? }

    func fill(_ q: AudioQueueRef, _ b: AudioQueueBufferRef) {
        lock.lock()
        defer { lock.unlock() }
        guard next < packetCount else {
            _finished = true
            return
        }
        var bytes = b.pointee.mAudioDataBytesCapacity
        var packets = b.pointee.mPacketDescriptionCapacity
        guard AudioFileReadPacketData(file, false, &bytes, b.pointee.mPacketDescriptions, next, &packets, b.pointee.mAudioData) == noErr,
            packets > 0
        else { return }
        next += Int64(packets)
        b.pointee.mAudioDataByteSize = bytes
        _ = AudioQueueEnqueueBuffer(q, b, packets, b.pointee.mPacketDescriptions)
    }
}

/// Collects one notification's posts.
final class Posts: @unchecked Sendable {
    private let lock = NSLock()
    private var infos: [[AnyHashable: Any]] = []
    private var token: (any NSObjectProtocol)?
    init(_ name: Notification.Name) {
        token = NotificationCenter.default.addObserver(forName: name, object: nil, queue: nil) { [weak self] note in
            guard let self else { return }
            self.lock.withLock { self.infos.append(note.userInfo ?? [:]) }
        }
    }
    deinit { if let token { NotificationCenter.default.removeObserver(token) } }
    var count: Int { lock.withLock { infos.count } }
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

let scenarios: [Scenario] = [
    Scenario(name: "lpcm-playback") { _, _, thread in
        // Start, pan, a volume ramp, pause and resume, flush, and an asynchronous stop that drains.
        let tone = try TonePlayback()
        defer { AudioQueueDispose(tone.queue, true) }
        try check(AudioQueuePrime(tone.queue, 0, nil), "AudioQueuePrime")
        return try watching(thread) {
            try check(AudioQueueStart(tone.queue, nil), "AudioQueueStart")
            try tone.waitForCallbacks(30)
            try check(AudioQueueSetParameter(tone.queue, kAudioQueueParam_Pan, -0.7), "pan")
            try check(AudioQueueSetParameter(tone.queue, kAudioQueueParam_VolumeRampTime, 0.2), "ramp time")
            try check(AudioQueueSetParameter(tone.queue, kAudioQueueParam_Volume, 0.3), "volume")
            try tone.waitForCallbacks(30)
            try check(AudioQueuePause(tone.queue), "AudioQueuePause")
            hold(0.2)
            try check(AudioQueueStart(tone.queue, nil), "AudioQueueStart (resume)")
            try tone.waitForCallbacks(20)
            try check(AudioQueueFlush(tone.queue), "AudioQueueFlush")
            try tone.stopAtEnd()
            try wait("the drain") { !tone.isRunning }
        }
    },
    Scenario(name: "timed-start-reset-stop") { _, _, thread in
        let tone = try TonePlayback()
        defer { AudioQueueDispose(tone.queue, true) }
        try check(AudioQueuePrime(tone.queue, 0, nil), "AudioQueuePrime")
        return try watching(thread) {
            var at = AudioTimeStamp()
            at.mHostTime = hostNow() + 100_000_000
            at.mFlags = .hostTimeValid
            try check(AudioQueueStart(tone.queue, &at), "AudioQueueStart (timed)")
            try tone.waitForCallbacks(30)
            try check(AudioQueueReset(tone.queue), "AudioQueueReset")
            try tone.refill()
            try tone.waitForCallbacks(20)
            try check(AudioQueueStop(tone.queue, true), "AudioQueueStop (immediate)")
            try tone.refill()
            try check(AudioQueueStart(tone.queue, nil), "AudioQueueStart (again)")
            try tone.waitForCallbacks(20)
            try check(AudioQueueStop(tone.queue, true), "AudioQueueStop (immediate)")
        }
    },
    Scenario(name: "compressed-playback") { _, files, thread in
        var total = Count()
        for name in ["tone.caf", "tone.m4a"] {
            let player = try PacketPlayback(url: files.appendingPathComponent(name))
            defer { AudioQueueDispose(player.queue, true) }
            try check(AudioQueuePrime(player.queue, 0, nil), "AudioQueuePrime")
            let count = try watching(thread) {
                try check(AudioQueueStart(player.queue, nil), "AudioQueueStart (\(name))")
                try wait("\(name)'s last packets") { player.finished }
                try check(AudioQueueStop(player.queue, false), "AudioQueueStop (asynchronous, \(name))")
                var running: UInt32 = 1
                var size = UInt32(4)
                try wait("\(name)'s drain") {
                    _ = AudioQueueGetProperty(player.queue, kAudioQueueProperty_IsRunning, &running, &size)
                    return running == 0
                }
            }
            total = total + count
        }
        return total
    },
    Scenario(
        name: "capture",
        libpulseOwn: capturedBlockRelease
    ) { _, _, thread in
        var ima4 = AudioStreamBasicDescription()
        ima4.mSampleRate = 48000
        ima4.mFormatID = kAudioFormatAppleIMA4
        ima4.mChannelsPerFrame = 1
        var total = Count()
        for (format, bytes) in [(mono16, UInt32(1920)), (ima4, UInt32(34 * 30))] {
            let capture = try Capture(format: format, bufferBytes: bytes)
            defer { AudioQueueDispose(capture.queue, true) }
            // The first run opens the stream; the watched run starts, pauses, resumes and stops.
            try check(AudioQueueStart(capture.queue, nil), "AudioQueueStart (capture)")
            try capture.waitForCallbacks(3)
            try check(AudioQueueStop(capture.queue, true), "AudioQueueStop (capture)")
            try capture.reenqueue()
            let count = try watching(thread) {
                try check(AudioQueueStart(capture.queue, nil), "AudioQueueStart (capture)")
                try capture.waitForCallbacks(20)
                try check(AudioQueuePause(capture.queue), "AudioQueuePause (capture)")
                hold(0.1)
                try check(AudioQueueStart(capture.queue, nil), "AudioQueueStart (capture, resume)")
                try capture.waitForCallbacks(20)
                try check(AudioQueueStop(capture.queue, true), "AudioQueueStop (capture)")
            }
            total = total + count
        }
        return total
    },
    Scenario(name: "player") { _, files, thread in
        // AVAudioPlayer looping once and seeking while it plays.
        let player = try AVAudioPlayer(contentsOf: files.appendingPathComponent("tone.wav"))
        player.numberOfLoops = 1
        guard player.prepareToPlay() else { throw Failure("prepareToPlay failed") }
        return try watching(thread) {
            guard player.play() else { throw Failure("play failed") }
            hold(0.4)
            player.currentTime = 0.1
            try wait("the player to finish", timeout: 5) { !player.isPlaying }
            player.stop()
        }
    },
    Scenario(
        name: "session",
        libpulseOwn: "the server sends the streams a call's cork request and moves them on a route change; libpulse parses each "
            + "(pa_proplist_new, the new device's name)"
    ) { server, _, thread in
        // An active playback session while another process's call interrupts it and headphones
        // come and go.
        let session = AVAudioSession.sharedInstance()
        try session.setCategory(.playback)
        try session.setActive(true)
        defer { try? session.setActive(false) }
        let interruptions = Posts(AVAudioSession.interruptionNotification)
        let routes = Posts(AVAudioSession.routeChangeNotification)
        let tone = try TonePlayback()
        defer { AudioQueueDispose(tone.queue, true) }
        try check(AudioQueuePrime(tone.queue, 0, nil), "AudioQueuePrime")
        return try watching(thread) {
            try check(AudioQueueStart(tone.queue, nil), "AudioQueueStart")
            try tone.waitForCallbacks(20)
            let call = try SignalPlayer(
                server: server, device: "speaker", samples: [Float](repeating: 0.001, count: 24000), sampleRate: 48000,
                properties: ["media.role": "phone"])
            try wait("the interruption to begin") { interruptions.count >= 1 }
            call.waitUntilDone()
            try wait("the interruption to end") { interruptions.count >= 2 }
            try check(AudioQueueStart(tone.queue, nil), "AudioQueueStart (after the call)")
            try tone.waitForCallbacks(20)
            let module = try server.pactl(["load-module", "module-null-sink", "sink_name=rtphones", "sink_properties=device.form_factor=headphone"])
                .trimmingCharacters(in: .whitespacesAndNewlines)
            _ = try server.pactl(["set-default-sink", "rtphones"])
            try wait("the route change to headphones") { routes.count >= 1 }
            _ = try server.pactl(["unload-module", module])
            _ = try server.pactl(["set-default-sink", "speaker"])
            try wait("the route change back") { routes.count >= 2 }
            try tone.waitForCallbacks(20)
            try check(AudioQueueStop(tone.queue, true), "AudioQueueStop")
        }
    },
]

/// The thread an IOProc last ran on, and its cycles (the IOProc stores both).
final class IOThreadWatch: @unchecked Sendable {
    let thread = Atomic<UInt>(0)
    let cycles = Atomic<Int>(0)
    var phase = 0.0

    /// An IOProc that writes a quiet tone and notes its thread.
    static let tone: AudioDeviceIOProc = { _, _, _, _, output, _, data in
        Unmanaged<IOThreadWatch>.fromOpaque(data!)._withUnsafeGuaranteedRef { watch in
            watch.thread.store(UInt(pthread_self()), ordering: .relaxed)
            watch.cycles.add(1, ordering: .relaxed)
            let buffers = UnsafeMutableAudioBufferListPointer(output)
            guard buffers.count == 1, let samples = buffers[0].mData?.assumingMemoryBound(to: Float.self) else { return }
            let count = Int(buffers[0].mDataByteSize) / 4
            for n in 0..<count {
                samples[n] = Float(0.1 * sin(watch.phase))
                watch.phase += 2 * Double.pi * 440 / 48000 / 2
            }
        }
        return noErr
    }

    func waitForCycles(_ n: Int) throws {
        let target = cycles.load(ordering: .relaxed) + n
        try wait("\(n) I/O cycles") { cycles.load(ordering: .relaxed) >= target }
    }
}

/// Frames for a voice processor, in raw memory, and the processor unretained: what a capture
/// thread would hold.
struct VoiceFrames: @unchecked Sendable {
    let processor: Unmanaged<VoiceProcessor>
    let far: UnsafeMutablePointer<Float>
    let near: UnsafeMutablePointer<Float>
    let length: Int

    func run(_ range: Range<Int>) {
        processor._withUnsafeGuaranteedRef { p in
            for k in range { p.process(near: near + k * length, far: far + k * length) }
        }
    }
}

/// Voice processing (issue 14): each library's processor, at a call's 16 kHz and the output's
/// 48 kHz, over echo of a far end (whose path moves at once) and a near talker, on a thread of its own that the counter
/// watches, after a second of warming up; a voice-processing unit will run it on its capture
/// thread.
let voiceScenario = Scenario(name: "voice-processing") { _, _, _ in
    var total = Count()
    for library in VoiceProcessor.Library.allCases {
        for rate in [16000, 48000] {
            guard let processor = VoiceProcessor(library: library, sampleRate: rate) else { throw Failure("\(library) refused \(rate) Hz") }
            let n = processor.frameLength
            var generator = SeededGenerator(seed: 7)
            let seconds = 6
            // Raw memory and an unretained processor: the window holds the processor's own
            // calls, not this loop's reference counting. A far end of tone and noise; the near
            // end its echo 40 ms later and a talker's tone.
            let count = rate * seconds
            let far = UnsafeMutablePointer<Float>.allocate(capacity: count)
            let near = UnsafeMutablePointer<Float>.allocate(capacity: count)
            defer {
                far.deallocate()
                near.deallocate()
            }
            // The talker speaks in the first and the third half second; the echo's path grows
            // by 2.5 ms at 3 s and shrinks by 1 ms at 4.5 s, so the window holds the follower's
            // search, replay and move (``VoiceProcessor/movesFollowed``: at least one; a move of
            // the delay estimate's just before disarms the follower for the next).
            let step = 2 * Double.pi / Double(rate)
            for i in 0..<count {
                far[i] = Float(0.1 * sin(Double(i) * step * 310)) + Float.random(in: -0.3...0.3, using: &generator)
                let delay = rate / 25 + (i >= 3 * rate ? rate / 400 : 0) - (i >= rate * 9 / 2 ? rate / 1000 : 0)
                let echo: Float = i >= delay ? 0.5 * far[i - delay] : 0
                let talking = i < rate / 2 || (i >= rate && i < rate * 3 / 2)
                near[i] = echo + (talking ? Float(0.1 * sin(Double(i) * step * 520)) : 0)
            }
            let work = VoiceFrames(processor: .passUnretained(processor), far: far, near: near, length: n)
            let frames = count / n
            work.run(0..<100)
            // On a thread of its own, the one watched (watching this one would count the
            // counter's own report), which outlives the window: its ending (Foundation's
            // releases) is not counted.
            let ready = DispatchSemaphore(value: 0), go = DispatchSemaphore(value: 0), done = DispatchSemaphore(value: 0)
            let end = DispatchSemaphore(value: 0)
            nonisolated(unsafe) var worker: pthread_t?
            let thread = Thread {
                worker = pthread_self()
                ready.signal()
                go.wait()
                work.run(100..<frames)
                done.signal()
                end.wait()
            }
            thread.start()
            ready.wait()
            total = total + watching(UInt(worker!)) {
                go.signal()
                done.wait()
            }
            end.signal()
            withExtendedLifetime(processor) {}
            if library == .speex && processor.movesFollowed == 0 {
                throw Failure("speex at \(rate) Hz followed none of the echo path's 2 moves: the window held no move")
            }
        }
    }
    return total
}

/// The voice-processing I/O unit (issue 14) with its echo coming back through the test server's
/// acoustic path: both its threads, processing on, at 44.1 kHz on the client's side (the
/// processor runs at 48 kHz, so both resamplers run), through the switches' changes.
let voiceUnitScenario = Scenario(name: "voice-unit", libpulseOwn: capturedBlockRelease) { server, _, _ in
    let path = try AcousticPath(server: server)
    defer { path.close() }
    // A second of a 330 Hz tone, over and over, at 44.1 kHz on the client's side.
    let tone = (0..<44100).map { Float(0.3 * sin(2 * Double.pi * 330 * Double($0) / 44100)) }
    let call = try VoiceUnitCall(far: tone, loops: true, rate: 44100, recordSeconds: 2)
    let unit = call.unit
    let listener: AUVoiceIOMutedSpeechActivityEventListener = { _ in }
    try check(
        withUnsafePointer(to: listener) {
            AudioUnitSetProperty(unit, kAUVoiceIOProperty_MutedSpeechActivityEventListener, kAudioUnitScope_Global, 0, $0, UInt32(MemoryLayout.size(ofValue: listener)))
        }, "listener")
    try call.start()
    defer { call.stop() }
    call.playFarEnd()
    try wait("both threads") { call.renderThread != 0 && call.captureThread != 0 }
    func flip(_ id: AudioUnitPropertyID, _ value: UInt32) throws {
        var v = value
        try check(AudioUnitSetProperty(unit, id, kAudioUnitScope_Global, 0, &v, 4), "switch \(id)")
    }
    func audio(_ counter: () -> Int, seconds: Double) throws {
        let target = counter() + Int(seconds * 44100)
        try wait("\(seconds) s of audio", timeout: seconds * 2 + 5) { counter() >= target }
    }
    let captured = { call.capturedFrames }, rendered = { call.playedFrames }
    // The processor's first second (the delay estimate settles) before either window.
    try audio(captured, seconds: 1)
    let capture = try watching(call.captureThread) {
        // Ten seconds in all with processing on (issue 14's line), switches flipped on the way.
        try audio(captured, seconds: 6)
        try flip(kAUVoiceIOProperty_VoiceProcessingEnableAGC, 0)
        try flip(kAUVoiceIOProperty_MuteOutput, 1)
        try audio(captured, seconds: 1)
        try flip(kAUVoiceIOProperty_MuteOutput, 0)
        try flip(kAUVoiceIOProperty_VoiceProcessingEnableAGC, 1)
        try flip(kAUVoiceIOProperty_BypassVoiceProcessing, 1)
        try audio(captured, seconds: 1)
        try flip(kAUVoiceIOProperty_BypassVoiceProcessing, 0)
        try audio(captured, seconds: 2)
    }
    let playback = try watching(call.renderThread) { try audio(rendered, seconds: 3) }
    return capture + playback
}

/// The I/O thread of a device's IOProcs is a real-time thread of its own: watched instead of the
/// server thread.
let ioProcScenario = Scenario(name: "ioproc") { _, _, _ in
    var address = AudioObjectPropertyAddress(mSelector: kAudioHardwarePropertyDefaultOutputDevice, mScope: kAudioObjectPropertyScopeGlobal, mElement: 0)
    var device = kAudioObjectUnknown
    var size = UInt32(4)
    try check(AudioObjectGetPropertyData(AudioObjectID(kAudioObjectSystemObject), &address, 0, nil, &size, &device), "the default output")
    let first = IOThreadWatch(), second = IOThreadWatch()
    var a: AudioDeviceIOProcID?, b: AudioDeviceIOProcID?
    try check(AudioDeviceCreateIOProcID(device, IOThreadWatch.tone, Unmanaged.passUnretained(first).toOpaque(), &a), "AudioDeviceCreateIOProcID")
    try check(AudioDeviceCreateIOProcID(device, IOThreadWatch.tone, Unmanaged.passUnretained(second).toOpaque(), &b), "AudioDeviceCreateIOProcID")
    defer {
        AudioDeviceDestroyIOProcID(device, a!)
        AudioDeviceDestroyIOProcID(device, b!)
    }
    try check(AudioDeviceStart(device, a), "AudioDeviceStart")
    try first.waitForCycles(5)
    return try watching(first.thread.load(ordering: .relaxed)) {
        try first.waitForCycles(50)
        // A second IOProc mixed in and taken out, the device's volume changed meanwhile.
        try check(AudioDeviceStart(device, b), "AudioDeviceStart (second)")
        try second.waitForCycles(50)
        var volume = AudioObjectPropertyAddress(mSelector: kAudioDevicePropertyVolumeScalar, mScope: kAudioObjectPropertyScopeOutput, mElement: 0)
        var level: Float32 = 0.8
        try check(AudioObjectSetPropertyData(device, &volume, 0, nil, 4, &level), "the volume")
        try check(AudioDeviceStop(device, b), "AudioDeviceStop (second)")
        try first.waitForCycles(50)
        level = 1
        try check(AudioObjectSetPropertyData(device, &volume, 0, nil, 4, &level), "the volume")
        var now = AudioTimeStamp()
        try check(AudioDeviceGetCurrentTime(device, &now), "AudioDeviceGetCurrentTime")
        try first.waitForCycles(20)
        try check(AudioDeviceStop(device, a), "AudioDeviceStop")
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

/// An engine rendering Apple's sample-code graph (a looping player → EQ → reverb → main mixer),
/// a source node through a distortion into the mixer and a tap on it, for ten seconds with
/// parameter changes, a pause and a scheduled interruption: its render thread is watched.
let engineScenario = Scenario(name: "engine") { _, files, _ in
    let watch = RenderThreadWatch()
    let engine = AVAudioEngine()
    let format = AVAudioFormat(standardFormatWithSampleRate: 48000, channels: 2)!
    let player = AVAudioPlayerNode(), eq = AVAudioUnitEQ(numberOfBands: 2), reverb = AVAudioUnitReverb()
    let source = watch.silentSource(format: format)
    let distortion = AVAudioUnitDistortion()
    distortion.loadFactoryPreset(.multiEverythingIsBroken)
    for node in [player, eq, reverb, source, distortion] as [AVAudioNode] { engine.attach(node) }
    engine.connect(player, to: eq, format: format)
    engine.connect(eq, to: reverb, format: format)
    engine.connect(reverb, to: engine.mainMixerNode, format: format)
    engine.connect(source, to: distortion, format: format)
    engine.connect(distortion, to: engine.mainMixerNode, format: format)
    eq.bands[0].bypass = false
    eq.bands[0].gain = 6
    let tone = AVAudioPCMBuffer(pcmFormat: format, frameCapacity: 48000)!
    for c in 0..<2 { for i in 0..<48000 { tone.floatChannelData![c][i] = Float(0.1 * sin(2 * Double.pi * 440 * Double(i) / 48000)) } }
    tone.frameLength = 48000
    player.scheduleBuffer(tone, at: nil, options: .loops)
    engine.mainMixerNode.installTap(onBus: 0, bufferSize: 4800, format: nil) { _, _ in watch.taps.add(1, ordering: .relaxed) }
    try engine.start()
    player.play()
    try watch.waitForCycles(10)
    defer { engine.stop() }
    let first = try watching(watch.thread.load(ordering: .relaxed)) {
        try watch.waitForAudio(seconds: 4)
        eq.bands[0].gain = -6
        reverb.wetDryMix = 30
        distortion.wetDryMix = 80
        player.volume = 0.5
        player.scheduleBuffer(tone, at: nil, options: .interrupts)
        // Resets run on the render thread, at the start of each unit's next render.
        for node in [eq, reverb, distortion, engine.mainMixerNode] as [AVAudioNode] { node.reset() }
        try watch.waitForAudio(seconds: 2)
    }
    // Pausing closes the output's stream and starting opens another, on a thread of its own:
    // setup, outside the window, which goes on on the new thread from its first cycles.
    engine.pause()
    try engine.start()
    try watch.waitForCycles(10)
    let second = try watching(watch.thread.load(ordering: .relaxed)) {
        try watch.waitForAudio(seconds: 4)
        guard watch.taps.load(ordering: .relaxed) > 50 else { throw Failure("the tap heard nothing") }
    }
    return first + second
}

/// A looping player through `AVAudioUnitTimePitch` into the main mixer, with a silent source node
/// beside it whose block tells the render thread: the rate and pitch go to each end of their
/// ranges (libsonic's speed, rate ÷ pitch, from 1/16 to 16), the unit is reset at the slowest
/// (a flush on the render thread) and bypassed and back.
let timePitchScenario = Scenario(name: "engine-timepitch") { _, _, _ in
    let watch = RenderThreadWatch()
    let engine = AVAudioEngine()
    let format = AVAudioFormat(standardFormatWithSampleRate: 48000, channels: 2)!
    let player = AVAudioPlayerNode(), timePitch = AVAudioUnitTimePitch()
    let source = watch.silentSource(format: format)
    for node in [player, timePitch, source] as [AVAudioNode] { engine.attach(node) }
    engine.connect(player, to: timePitch, format: format)
    engine.connect(timePitch, to: engine.mainMixerNode, format: format)
    engine.connect(source, to: engine.mainMixerNode, format: format)
    // A tone gliding from 80 to 800 Hz: libsonic finds pitch periods across its whole range.
    let tone = AVAudioPCMBuffer(pcmFormat: format, frameCapacity: 96000)!
    var phase = 0.0
    for i in 0..<96000 {
        phase += 2 * Double.pi * (80 + 720 * Double(i) / 96000) / 48000
        for c in 0..<2 { tone.floatChannelData![c][i] = Float(0.3 * sin(phase)) }
    }
    tone.frameLength = 96000
    player.scheduleBuffer(tone, at: nil, options: .loops)
    try engine.start()
    player.play()
    try watch.waitForCycles(10)
    defer { engine.stop() }
    return try watching(watch.thread.load(ordering: .relaxed)) {
        for (rate, pitch) in [(0.25, 2400.0), (4, -2400), (1.0 / 32, 2400), (32, -2400), (0.5, 0), (1.5, 0), (1, 700), (1, 0)] as [(Float, Float)] {
            timePitch.rate = rate
            timePitch.pitch = pitch
            try watch.waitForAudio(seconds: 1)
            if rate == 0.25 { timePitch.reset() }
        }
        timePitch.rate = 0.25
        timePitch.pitch = 2400
        timePitch.bypass = true
        try watch.waitForAudio(seconds: 0.5)
        timePitch.bypass = false
        try watch.waitForAudio(seconds: 1)
        timePitch.reset()
        try watch.waitForAudio(seconds: 1)
    }
}

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

#if DEBUG
let buildKind = "debug"
#else
let buildKind = "release"
#endif

@MainActor func main() -> Int32 {
    let wanted = Set(CommandLine.arguments.dropFirst())
    let all = scenarios + [ioProcScenario, engineScenario, timePitchScenario, voiceScenario, voiceUnitScenario]
    let unknown = wanted.subtracting(all.map(\.name))
    guard unknown.isEmpty else {
        FileHandle.standardError.write(Data("openavf-rtcheck: no scenario \(unknown.sorted()); there are \(all.map(\.name))\n".utf8))
        return 2
    }
    guard openavf_alloc_counter_active() == 1 else {
        print("openavf-rtcheck: the counting malloc is not in effect (a sanitizer build?): nothing to count")
        return 0
    }
    do {
        let server = try TestSound.server()
        let files = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("openavf-rtcheck-\(getpid())")
        defer { try? FileManager.default.removeItem(at: files) }
        try makeFiles(in: files)
        guard let backend = try AudioSystem.current.backend() as? PulseBackend else { throw Failure("the backend is not PulseAudio") }
        let thread = backend.serverThread()
        var clean = true
        print("allocations and frees on the real-time server thread, per scenario (target 0; \(buildKind) build)")
        for scenario in all where wanted.isEmpty || wanted.contains(scenario.name) {
            let count = try scenario.run(server, files, thread)
            let ours = (count.allocations - count.allocationsInLibpulse, count.frees - count.freesInLibpulse)
            // Reference counting is checked in release builds: a debug build retains and releases
            // around nearly every call, which the optimizer removes.
            let ok = ours == (0, 0) && (scenario.libpulseOwn != nil || (count.allocations, count.frees) == (0, 0))
                && (buildKind == "debug" || count.refcounts == 0)
            clean = clean && ok
            let libpulse = count.allocationsInLibpulse + count.freesInLibpulse > 0
                ? "   (all in libpulse's own code: \(count.allocationsInLibpulse) allocations, \(count.freesInLibpulse) frees; \(scenario.libpulseOwn ?? "not expected"))" : ""
            print("  \(scenario.name.padding(toLength: 24, withPad: " ", startingAt: 0)) allocations \(count.allocations)  frees \(count.frees)  retains/releases \(count.refcounts)\(libpulse)")
            if count.refcounts > 0 && buildKind != "debug" { print("      refcounting from: \(Array(Set(count.refcountCallers)).sorted())") }
            if !ok || libpulse.isEmpty == false { for caller in count.callers.prefix(ok ? 3 : 16) { print("      \(caller)") } }
        }
        return clean ? 0 : 1
    } catch {
        FileHandle.standardError.write(Data("openavf-rtcheck: \(error)\n".utf8))
        return 1
    }
}

exit(main())
