public import AudioToolbox
import Foundation
import Synchronization

/// A call through a voice-processing I/O unit (issue 14), for tests, the benchmark and the
/// allocation check: the render callback plays `far` (once per ``playFarEnd()``, or over and over
/// when `loops`), the input callback records what the unit gives on bus 1, both in mono float at
/// the client's rate. The callbacks use only memory made here and atomics.
public final class VoiceUnitCall: @unchecked Sendable {
    public let unit: AudioUnit
    public let rate: Double
    private let far: UnsafeMutablePointer<Float>
    public let farCount: Int
    private let loops: Bool
    private let played = Atomic<Int>(0)
    /// Where in the far end the next render starts (the render thread's; reset by ``start()``
    /// before the unit runs).
    private var position = 0
    private let playing = Atomic<Bool>(false)
    /// The recording's length when the far end's first frame was rendered (-1: not yet).
    private let farStartAt = Atomic<Int>(-1)
    private let capacity: Int
    private let tape: UnsafeMutablePointer<Float>
    private let written = Atomic<Int>(0)
    private let captured = Atomic<Int>(0)
    private let list = AudioBufferList.allocate(maximumBuffers: 1)
    private let renderThreadID = Atomic<UInt>(0)
    private let captureThreadID = Atomic<UInt>(0)
    /// A render callback that runs late once, as a user's can (a page fault, a lock): when the
    /// far end has rendered `at` frames, the callback sleeps `seconds` before it returns, and the
    /// playback stream runs dry. Set before the call starts; nil (the default) never stalls.
    public var stall: (at: Int, seconds: Double)?
    /// Whether this run's stall happened (the render thread's; reset by ``start()``).
    private var stalled = false
    /// The streams' threads (pthread ids; 0 until each has called back).
    public var renderThread: UInt { renderThreadID.load(ordering: .acquiring) }
    public var captureThread: UInt { captureThreadID.load(ordering: .acquiring) }

    /// A voice-processing unit playing and recording mono float at `rate`, initialized, not
    /// started; `recordSeconds` of recording kept (a longer call records nothing more).
    public init(far: [Float], loops: Bool = false, rate: Double = 48000, recordSeconds: Int) throws {
        var description = AudioComponentDescription(
            componentType: kAudioUnitType_Output, componentSubType: kAudioUnitSubType_VoiceProcessingIO, componentManufacturer: kAudioUnitManufacturer_Apple,
            componentFlags: 0, componentFlagsMask: 0)
        guard let component = AudioComponentFindNext(nil, &description) else { throw Self.failure("no voice-processing unit") }
        var made: AudioUnit?
        guard AudioComponentInstanceNew(component, &made) == noErr, let unit = made else { throw Self.failure("AudioComponentInstanceNew failed") }
        self.unit = unit
        self.rate = rate
        farCount = far.count
        let samples = UnsafeMutablePointer<Float>.allocate(capacity: max(far.count, 1))
        far.withUnsafeBufferPointer { if let base = $0.baseAddress { samples.initialize(from: base, count: far.count) } }
        self.far = samples
        self.loops = loops
        capacity = Int(rate) * recordSeconds
        tape = .allocate(capacity: max(capacity, 1))
        tape.initialize(repeating: 0, count: max(capacity, 1))
        var on: UInt32 = 1
        var format = AudioStreamBasicDescription(
            mSampleRate: rate, mFormatID: kAudioFormatLinearPCM, mFormatFlags: kAudioFormatFlagsNativeFloatPacked, mBytesPerPacket: 4,
            mFramesPerPacket: 1, mBytesPerFrame: 4, mChannelsPerFrame: 1, mBitsPerChannel: 32, mReserved: 0)
        let size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
        let refCon = Unmanaged.passUnretained(self).toOpaque()
        var render = AURenderCallbackStruct(inputProc: Self.render, inputProcRefCon: refCon)
        var input = AURenderCallbackStruct(inputProc: Self.input, inputProcRefCon: refCon)
        let callbackSize = UInt32(MemoryLayout<AURenderCallbackStruct>.size)
        let statuses = [
            AudioUnitSetProperty(unit, kAudioOutputUnitProperty_EnableIO, kAudioUnitScope_Input, 1, &on, 4),
            AudioUnitSetProperty(unit, kAudioUnitProperty_StreamFormat, kAudioUnitScope_Input, 0, &format, size),
            AudioUnitSetProperty(unit, kAudioUnitProperty_StreamFormat, kAudioUnitScope_Output, 1, &format, size),
            AudioUnitSetProperty(unit, kAudioUnitProperty_SetRenderCallback, kAudioUnitScope_Input, 0, &render, callbackSize),
            AudioUnitSetProperty(unit, kAudioOutputUnitProperty_SetInputCallback, kAudioUnitScope_Global, 0, &input, callbackSize),
            AudioUnitInitialize(unit),
        ]
        if let failed = statuses.first(where: { $0 != noErr }) {
            AudioComponentInstanceDispose(unit)
            throw Self.failure("setting up the unit failed: \(failed)")
        }
    }

    deinit {
        AudioComponentInstanceDispose(unit)
        far.deallocate()
        tape.deallocate()
        free(list.unsafeMutablePointer)
    }

    static func failure(_ what: String) -> PrivatePulseServer.Failure { PrivatePulseServer.Failure(description: "VoiceUnitCall: \(what)") }

    /// Sets one of the unit's `kAUVoiceIOProperty_…` switches.
    @discardableResult
    public func set(_ id: AudioUnitPropertyID, _ on: Bool) -> OSStatus {
        var value: UInt32 = on ? 1 : 0
        return AudioUnitSetProperty(unit, id, kAudioUnitScope_Global, 0, &value, 4)
    }

    /// Frames recorded so far.
    public var recordedFrames: Int { written.load(ordering: .acquiring) }
    /// Frames the input callback has read, kept or not.
    public var capturedFrames: Int { captured.load(ordering: .acquiring) }
    /// Far-end frames rendered so far.
    public var playedFrames: Int { played.load(ordering: .acquiring) }
    public var recording: [Float] { Array(UnsafeBufferPointer(start: tape, count: recordedFrames)) }
    /// Where in ``recording`` the far end began (nil before it did).
    public var farStart: Int? {
        let at = farStartAt.load(ordering: .acquiring)
        return at >= 0 ? at : nil
    }

    /// Starts the unit with the recording, the far end and its start cleared.
    public func start() throws {
        played.store(0, ordering: .relaxed)
        position = 0
        stalled = false
        playing.store(false, ordering: .relaxed)
        farStartAt.store(-1, ordering: .relaxed)
        written.store(0, ordering: .releasing)
        let status = AudioOutputUnitStart(unit)
        guard status == noErr else { throw Self.failure("AudioOutputUnitStart: \(status)") }
    }

    public func stop() { AudioOutputUnitStop(unit) }

    /// Plays the far end from its start.
    public func playFarEnd() { playing.store(true, ordering: .releasing) }

    /// Starts, lets the input run half a second, plays the far end once and records until it
    /// has been heard and half a second more; stops. Returns the recording, where the far end
    /// began in it, and the CPU time (s) of the capture thread (where the unit processes) from
    /// the far end's start to the recording's end.
    public func callOnce() throws -> (recording: [Float], farStart: Int, captureCPU: Double) {
        try start()
        defer {
            lastReferenceEvents = voiceReferenceEvents(unit) ?? []
            stop()
        }
        guard waitUntil(timeout: 5, { self.recordedFrames >= Int(self.rate / 2) }) else { throw Self.failure("no input") }
        guard let before = Self.threadCPU(captureThread) else { throw Self.failure("the capture thread's CPU clock cannot be read") }
        playFarEnd()
        guard waitUntil(timeout: Double(farCount) / rate + 5, { self.playedFrames >= self.farCount }) else { throw Self.failure("the far end did not play") }
        let end = recordedFrames + Int(rate / 2)
        guard waitUntil(timeout: 5, { self.recordedFrames >= end }) else { throw Self.failure("the input stopped") }
        guard let after = Self.threadCPU(captureThread) else { throw Self.failure("the capture thread's CPU clock cannot be read") }
        guard let start = farStart else { throw Self.failure("the far end never started") }
        return (recording, start, after - before)
    }

    /// What moved the canceller's reference in the last ``callOnce()``, read as it ended
    /// (`voiceReferenceEvents`: delays taken, start-overs, the lining-up's and the follower's
    /// moves, by 10 ms frame); empty when bypassed.
    public private(set) var lastReferenceEvents: [String] = []

    /// Where the words slipped in the last ``talk(_:clean:server:withFarEnd:)``: each second of
    /// the clean words that fits the recording best a few samples off the place the whole
    /// recording was lined up at ("second 5: +120 (0.93)": later by 120 samples there, the
    /// correlation at that lag). A slip is a stretch the feed or the capture lost or gained (the
    /// words' figure is taken at one lag, and falls after it); empty when none.
    public internal(set) var lastSlips: [String] = []

    /// Issue 14's first line through the unit on the private server: the far end played once
    /// bypassed (what the microphone hears: the echo) and once processed (gain control off, as
    /// the echo's loss is measured), each over the far end's speech frames from 2 s after it
    /// began. Returns both levels (dBFS), the echo's delay from render to recording (frames),
    /// and each run's CPU time (s) on the capture thread, where the unit processes. (The whole
    /// process's CPU varies between calls by more than the processing costs: 4 to 15 ms a second
    /// of call, where the same processing offline costs 7 to 9.)
    /// `bySecond`: the loss (dB) over each whole second of the far end from its second 2 on, NaN
    /// where it is mostly silence (a long call's figure is the RMS over all of it, where one bad
    /// second weighs like minutes of good ones; these say which seconds it was).
    public func echoLoss() throws -> (echo: Double, left: Double, lag: Int, bypassedCPU: Double, processedCPU: Double, bySecond: [Double]) {
        let farEnd = Array(UnsafeBufferPointer(start: far, count: farCount))
        set(kAUVoiceIOProperty_BypassVoiceProcessing, true)
        let raw = try callOnce()
        set(kAUVoiceIOProperty_BypassVoiceProcessing, false)
        set(kAUVoiceIOProperty_VoiceProcessingEnableAGC, false)
        let processed = try callOnce()
        set(kAUVoiceIOProperty_VoiceProcessingEnableAGC, true)
        // The echo's place in the bypassed recording: the far end, late by the path and the
        // streams, found over its second 1, or 2 or 3 where the path changed inside the one
        // before (the test server's loopback lengthens by a few ms at once now and then: one
        // lag then fits only half the span).
        let second = Int(rate)
        guard farCount >= 4 * second else { throw Self.failure("the far end is shorter than 4 s") }
        // (Each second looked for from where it began to play, up to half a second later.)
        var found = (lag: 0, correlation: -1.0)
        for start in 1...3 where found.correlation <= 0.9 {
            let from = min(raw.farStart + start * second, raw.recording.count)
            let window = SignalAnalysis.align(Array(farEnd[(start * second)..<((start + 1) * second)]), in: Array(raw.recording[from...]), maxLag: second / 2)
            if window.correlation > found.correlation { found = window }
        }
        guard found.correlation > 0.9 else { throw Self.failure("no echo in the bypassed recording (correlation \(found.correlation))") }
        let lag = found.lag
        let mask = VoiceSignals.speaking(farEnd, sampleRate: second)
        func level(_ r: (recording: [Float], farStart: Int, captureCPU: Double)) -> Double {
            let from = r.farStart + lag
            let span = Array(r.recording[min(from, r.recording.count)..<min(r.recording.count, from + farCount)])
            return VoiceSignals.speechRMS(span, where: mask, sampleRate: second, from: 200)
        }
        func levelOfSecond(_ r: (recording: [Float], farStart: Int, captureCPU: Double), _ s: Int) -> Double {
            let from = min(r.farStart + lag + s * second, r.recording.count)
            let span = Array(r.recording[from..<min(r.recording.count, from + second)])
            return VoiceSignals.speechRMS(span, where: Array(mask[min(s * 100, mask.count)..<min((s + 1) * 100, mask.count)]), sampleRate: second)
        }
        // (NaN: a second with less than a fifth of speech in it.)
        var bySecond: [Double] = []
        for s in 2..<(farCount / second) {
            let voiced = mask[min(s * 100, mask.count)..<min((s + 1) * 100, mask.count)].filter { $0 }.count
            bySecond.append(voiced < 20 ? Double.nan : levelOfSecond(raw, s) - levelOfSecond(processed, s))
        }
        return (level(raw), level(processed), lag, raw.captureCPU, processed.captureCPU, bySecond)
    }

    /// A running thread's CPU time, in seconds (nil: no thread yet, or its clock not readable).
    private static func threadCPU(_ thread: UInt) -> Double? {
        guard thread != 0 else { return nil }
        var clock = clockid_t()
        var now = timespec()
        guard pthread_getcpuclockid(pthread_t(thread), &clock) == 0, clock_gettime(clock, &now) == 0 else { return nil }
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    // MARK: The unit's threads

    private static let render: AURenderCallback = { refCon, _, _, _, frames, data in
        Unmanaged<VoiceUnitCall>.fromOpaque(refCon)._withUnsafeGuaranteedRef { $0.play(Int(frames), data!) }
    }

    private func play(_ n: Int, _ data: UnsafeMutablePointer<AudioBufferList>) -> OSStatus {
        renderThreadID.store(UInt(pthread_self()), ordering: .releasing)
        let out = UnsafeMutableAudioBufferListPointer(data)[0].mData!.assumingMemoryBound(to: Float.self)
        out.update(repeating: 0, count: n)
        guard playing.load(ordering: .acquiring), farCount > 0 else { return noErr }
        var at = position
        if farStartAt.load(ordering: .relaxed) < 0 { farStartAt.store(written.load(ordering: .relaxed), ordering: .releasing) }
        var done = 0
        while done < n {
            if at >= farCount {
                guard loops else { break }
                at = 0
            }
            let count = min(n - done, farCount - at)
            (out + done).update(from: far + at, count: count)
            at += count
            done += count
        }
        position = at
        let total = played.load(ordering: .relaxed) + done
        played.store(total, ordering: .releasing)
        if let stall, !stalled, total >= stall.at {
            stalled = true
            usleep(UInt32(stall.seconds * 1e6))
        }
        return noErr
    }

    private static let input: AURenderCallback = { refCon, flags, time, bus, frames, _ in
        Unmanaged<VoiceUnitCall>.fromOpaque(refCon)._withUnsafeGuaranteedRef { $0.record(flags, time, bus, frames) }
    }

    private func record(
        _ flags: UnsafeMutablePointer<AudioUnitRenderActionFlags>, _ time: UnsafePointer<AudioTimeStamp>, _ bus: UInt32, _ frames: UInt32
    ) -> OSStatus {
        captureThreadID.store(UInt(pthread_self()), ordering: .releasing)
        let at = written.load(ordering: .relaxed)
        // Past the tape's end the input is read into its last second, not kept.
        let into = at + Int(frames) <= capacity ? at : max(0, capacity - Int(rate))
        guard into + Int(frames) <= capacity else { return noErr }
        list.unsafeMutablePointer.pointee.mNumberBuffers = 1
        list[0] = AudioBuffer(mNumberChannels: 1, mDataByteSize: frames * 4, mData: tape + into)
        let status = AudioUnitRender(unit, flags, time, bus, frames, list.unsafeMutablePointer)
        if status == noErr && into == at { written.store(at + Int(frames), ordering: .releasing) }
        captured.add(Int(frames), ordering: .releasing)
        return status
    }
}
