import AudioGraph
import AudioHAL
import Foundation
import Synchronization

/// Apple's `kAUVoiceIOProperty_BypassVoiceProcessing`: 1 passes the microphone through untouched.
public let kAUVoiceIOProperty_BypassVoiceProcessing: AudioUnitPropertyID = 2100
/// Apple's `kAUVoiceIOProperty_VoiceProcessingEnableAGC`: automatic gain control on the uplink
/// (1, the default) or off.
public let kAUVoiceIOProperty_VoiceProcessingEnableAGC: AudioUnitPropertyID = 2101
/// Apple's `kAUVoiceIOProperty_MuteOutput`: 1 mutes the processed microphone (exact zeros).
public let kAUVoiceIOProperty_MuteOutput: AudioUnitPropertyID = 2104
/// Apple's `kAUVoiceIOProperty_MutedSpeechActivityEventListener`: a listener called when
/// speech starts or ends while the uplink is muted.
public let kAUVoiceIOProperty_MutedSpeechActivityEventListener: AudioUnitPropertyID = 2106

/// Apple's `kAUVoiceIOProperty_OtherAudioDuckingConfiguration`: how the unit ducks other
/// clients' playback while it runs (an ``AUVoiceIOOtherAudioDuckingConfiguration``).
public let kAUVoiceIOProperty_OtherAudioDuckingConfiguration: AudioUnitPropertyID = 2108

/// Apple's `AUVoiceIOOtherAudioDuckingLevel`: how far other audio is lowered while a
/// voice-processing unit runs. Here: ``default`` and ``max`` lower it to 20 % on the server's
/// volume scale (−41.9 dB: the level the session's `duckOthers` uses, as Apple's default is the
/// fixed amount it applied before there were levels), ``mid`` by 20 dB, ``min`` by 10 dB.
public enum AUVoiceIOOtherAudioDuckingLevel: UInt32, Sendable {
    case `default` = 0
    case min = 10
    case mid = 20
    case max = 30
}

/// Apple's `AUVoiceIOOtherAudioDuckingConfiguration`. With `mEnableAdvancedDucking`, others are
/// lowered only while someone in the call speaks (the microphone after processing, unmuted, or
/// what the unit plays), and back up half a second after the last word; without it, for as long
/// as the unit runs.
public struct AUVoiceIOOtherAudioDuckingConfiguration: Sendable, Equatable {
    public var mEnableAdvancedDucking: DarwinBoolean
    public var mDuckingLevel: AUVoiceIOOtherAudioDuckingLevel

    public init() {
        mEnableAdvancedDucking = false
        mDuckingLevel = .default
    }

    public init(mEnableAdvancedDucking: DarwinBoolean, mDuckingLevel: AUVoiceIOOtherAudioDuckingLevel) {
        self.mEnableAdvancedDucking = mEnableAdvancedDucking
        self.mDuckingLevel = mDuckingLevel
    }
}

/// Apple's `AUVoiceIOSpeechActivityEvent`, as Swift sees it.
public enum AUVoiceIOSpeechActivityEvent: UInt32, Sendable {
    case hasStarted = 0
    case hasEnded = 1
}

/// Apple's `AUVoiceIOMutedSpeechActivityEventListener`. Apple's is a block; here a Swift closure,
/// passed the same way: `AudioUnitSetProperty(unit, kAUVoiceIOProperty_MutedSpeechActivityEventListener,
/// kAudioUnitScope_Global, 0, &listener, UInt32(MemoryLayout<AUVoiceIOMutedSpeechActivityEventListener>.size))`
/// (nil, a null pointer, removes it). It is called on a thread of the unit's, not a real-time one.
public typealias AUVoiceIOMutedSpeechActivityEventListener = @Sendable (AUVoiceIOSpeechActivityEvent) -> Void

/// The voice-processing I/O unit's processing: the microphone, captured mono at the processing
/// rate, goes through a ``VoiceProcessor`` (speex, chosen by measurement: DESIGN.md and
/// `openavf-bench --only voice`) in 10 ms frames, with what the unit itself plays as the far end,
/// then out at the client's rate and channel count.
///
/// The far end is lined up by the two streams' frame counts, which one clock moves together (the
/// playback stream keeps its timeline: ``HALStreamRequest/keepsTimeline``): the far end lined up
/// with a microphone frame is the newest that is always there when the frame is processed (the
/// lowest point of the rendered lead, which rises and falls by a render as the two threads take
/// turns, found in the link's first second), and the processor finds how much later the echo
/// comes (the output's and input's buffers, the room, a test server's loopback) up to
/// ``VoiceProcessor/maximumEchoDelay``. The offset between the counts is kept, so the reference
/// does not wander. A render that runs late leaves it where it is; it moves up where it lags
/// 20 ms behind what was rendered for two seconds, and down, by at most 5 ms every two seconds,
/// where it runs past what was rendered in a quarter of them (two devices' clocks drifting
/// apart, or a lasting change of the streams' buffering, which it follows slowly: meanwhile the
/// newest milliseconds of the lined-up frame read as silence, and the canceller's reference,
/// read earlier, is whole). The canceller's reference is read
/// from this link's own history, the delay found before the lined-up frame, and a move of the
/// lining-up moves that delay back by as much: what the canceller sees does not jump (a jump of
/// 2.5 ms in the middle of a call can leave the echo 17–24 dB down instead of 50–60). The
/// servers' latency reports are not used: pipewire-pulse's put "the far end heard now" 5 to
/// 10 ms beyond what has been rendered.
///
/// Threads: ``renderedOutput(_:frames:channels:)`` on the playback stream's real-time thread,
/// ``captured(_:frames:time:)`` on the recording stream's; both only use memory made in
/// `init`, atomics, and a semaphore post for the muted-speech event (its listener runs on a
/// thread of its own).
final class VoiceLink: @unchecked Sendable {
    /// The processing rate: the output's rate when the processor takes it, else the input's,
    /// else 48 kHz.
    let rate: Int
    let frameLength: Int
    private let processor: VoiceProcessor

    private let settings: VoiceSettings
    /// Its events unretained, for the capture thread (a call through `settings.events` retains).
    private let eventsRef: Unmanaged<MutedSpeechEvents>
    /// What the processor was last told (capture thread only).
    private var gainApplied = true
    /// The ducking's voice watch, unretained for the capture thread; whether each side of the
    /// call speaks (capture thread only).
    private let duckingRef: Unmanaged<VoiceDucking>
    private var nearVoice = SpeechDetector()
    private var farVoice = SpeechDetector()

    // MARK: Far end (playback thread writes, capture thread reads)

    /// The far end, mono at ``rate``, the last two seconds, by absolute frame index.
    private let far: FarHistory
    private let farResampler: PullResampler?
    /// The resamplers unretained, for the real-time threads (binding an optional retains).
    private let farResamplerRef: Unmanaged<PullResampler>?
    private let nearResamplerRef: Unmanaged<PullResampler>?
    private let farMono: UnsafeMutablePointer<Float>
    private let farResampled: UnsafeMutablePointer<Float>
    private static let farChunk = 128

    // MARK: Near end (capture thread)

    private let nearFrame: UnsafeMutablePointer<Float>
    private let farFrame: UnsafeMutablePointer<Float>
    /// The far end as the canceller sees it: ``VoiceProcessor/referenceDelay`` before ``farFrame``,
    /// with the ``VoiceProcessor/referenceLead`` samples before it.
    private let referenceFrame: UnsafeMutablePointer<Float>
    private var nearFill = 0
    private var nearHostTime: UInt64 = 0
    private var nearIndex = 0
    private var farOffset: Int?
    /// The lowest `ahead` seen in the current two seconds, the frames watched, and how many of
    /// them found less rendered than the lining-up reads.
    private var lowest = Int.max
    private var framesWatched = 0
    private var shortFrames = 0
    /// Frames lined up since the far end was first there: for the first second the lining-up
    /// follows the rendered lead down at once, while the two threads settle.
    private var framesLined = 0
    private let clientRate: Double
    private let clientChannels: Int
    private let nearResampler: PullResampler?
    private let nearResampled: UnsafeMutablePointer<Float>
    private let clientOut: UnsafeMutablePointer<Float>
    private static let nearChunk = 64

    /// A link for output at `outputRate`, and a client input of
    /// `inputRate` with `inputChannels`. Nil when the processor cannot be made.
    init?(settings: VoiceSettings, outputRate: Double, inputRate: Double, inputChannels: Int) {
        let supported = [8000, 16000, 32000, 48000]
        let rate = supported.first { Double($0) == outputRate } ?? supported.first { Double($0) == inputRate } ?? 48000
        guard let processor = VoiceProcessor(library: .speex, sampleRate: rate) else { return nil }
        self.rate = rate
        self.settings = settings
        eventsRef = .passUnretained(settings.events)
        duckingRef = .passUnretained(settings.ducking)
        frameLength = rate / 100
        self.processor = processor
        // Two seconds: the lining-up's lead and the longest echo delay fit many times over.
        far = FarHistory(capacity: rate * 2)
        farResampler =
            outputRate == Double(rate) ? nil
            : PullResampler(channels: 1, inputRate: outputRate, outputRate: Double(rate), maximumOutput: 4 * Self.farChunk)
        farResamplerRef = farResampler.map { .passUnretained($0) }
        farMono = .allocate(capacity: Self.farChunk)
        farMono.initialize(repeating: 0, count: Self.farChunk)
        farResampled = .allocate(capacity: 4 * Self.farChunk)
        farResampled.initialize(repeating: 0, count: 4 * Self.farChunk)
        nearFrame = .allocate(capacity: frameLength)
        nearFrame.initialize(repeating: 0, count: frameLength)
        farFrame = .allocate(capacity: frameLength)
        farFrame.initialize(repeating: 0, count: frameLength)
        referenceFrame = .allocate(capacity: processor.referenceLength)
        referenceFrame.initialize(repeating: 0, count: processor.referenceLength)
        clientRate = inputRate
        clientChannels = max(1, inputChannels)
        nearResampler =
            inputRate == Double(rate) ? nil
            : PullResampler(channels: 1, inputRate: Double(rate), outputRate: inputRate, maximumOutput: 4 * Self.nearChunk)
        nearResamplerRef = nearResampler.map { .passUnretained($0) }
        nearResampled = .allocate(capacity: 4 * Self.nearChunk)
        nearResampled.initialize(repeating: 0, count: 4 * Self.nearChunk)
        // A frame's worth at the client's rate, and the resampler's rounding to whole chunks.
        let most = Int((Double(frameLength) * inputRate / Double(rate)).rounded(.up)) + 2 * Self.nearChunk
        clientOut = .allocate(capacity: most * clientChannels)
        clientOut.initialize(repeating: 0, count: most * clientChannels)
    }

    deinit {
        farMono.deallocate()
        farResampled.deallocate()
        nearFrame.deallocate()
        farFrame.deallocate()
        referenceFrame.deallocate()
        nearResampled.deallocate()
        clientOut.deallocate()
    }

    // MARK: Playback thread

    /// Takes what the unit just rendered for the speaker (float interleaved at the output rate).
    func renderedOutput(_ samples: UnsafePointer<Float>, frames: Int, channels: Int) {
        var done = 0
        let scale = 1 / Float(channels)
        while done < frames {
            let n = min(Self.farChunk, frames - done)
            let base = samples + done * channels
            for i in 0..<n {
                var sum: Float = 0
                for c in 0..<channels { sum += base[i * channels + c] }
                farMono[i] = sum * scale
            }
            if let r = farResamplerRef {
                // Plain pointers in the closures: capturing `self` would retain it.
                let mono = UnsafePointer(farMono), resampled = farResampled
                r._withUnsafeGuaranteedRef { r in
                    r.take({ _ in mono }, frames: n)
                    while r.needed(forOutput: Self.farChunk) == 0 {
                        r.produce({ _ in resampled }, frames: Self.farChunk)
                        far.write(resampled, count: Self.farChunk)
                    }
                }
            } else {
                far.write(farMono, count: n)
            }
            done += n
        }
    }

    // MARK: Capture thread

    /// Takes up to a frame (``frameLength``) of captured microphone samples (mono at ``rate``;
    /// `time` when the first was captured) and returns how many frames of processed output are
    /// ready at ``output`` (float interleaved at the client's rate and channels; captured at
    /// ``outputHostTime``): 0 until a frame is complete.
    func captured(_ input: UnsafePointer<Float>, frames: Int, time: HALRenderTime) -> Int {
        var done = 0
        var ready = 0
        while done < frames {
            if nearFill == 0 { nearHostTime = time.hostTime &+ UInt64(Double(done) * 1e9 / Double(rate)) }
            let n = min(frameLength - nearFill, frames - done)
            (nearFrame + nearFill).update(from: input + done, count: n)
            nearFill += n
            done += n
            guard nearFill == frameLength else { continue }
            nearFill = 0
            let processed = processFrame()
            nearIndex += frameLength
            // A second frame in one call would overwrite the first's output.
            precondition(ready == 0, "VoiceLink.captured takes at most a frame at a time")
            ready = emit()
            // What comes out processed was captured the processor's latency before its frame.
            let behind = processed ? UInt64(Double(processor.latency) * 1e9 / Double(rate)) : 0
            outputHostTime = nearHostTime > behind ? nearHostTime - behind : 0
        }
        return ready
    }

    /// What moved the canceller's reference so far (``VoiceProcessor/referenceEvents``).
    var referenceEvents: [String] { processor.referenceEvents.map(\.description) }

    /// The processed output ``captured(_:frames:time:)`` made ready.
    var output: UnsafePointer<Float> { UnsafePointer(clientOut) }
    private(set) var outputHostTime: UInt64 = 0

    /// Processes the frame in ``nearFrame``; false when bypassed.
    private func processFrame() -> Bool {
        // Read bypassed too: the far end's voice counts for advanced ducking.
        let played = farEnd()
        let bypassed = settings.bypass.load(ordering: .relaxed)
        if !bypassed {
            let agc = settings.gainControl.load(ordering: .relaxed)
            if agc != gainApplied {
                processor.setGainControl(agc)
                gainApplied = agc
            }
            // The echo's delay found against the far end lined up with this frame, then the
            // canceller's reference read that much earlier from the same history: a move of the
            // lining-up moves the delay back by as much (``move(to:)``), so the reference itself
            // does not jump. The reference is read even where the lined-up frame is not there
            // yet (a render running late): what plays now was rendered before.
            processor.estimate(far: played ? UnsafePointer(farFrame) : nil, near: nearFrame)
            var heard = false
            if let offset = farOffset {
                heard = far.read(
                    from: nearIndex + offset - processor.referenceDelay - processor.referenceLead, count: processor.referenceLength, into: referenceFrame)
            }
            processor.process(near: nearFrame, reference: heard ? UnsafePointer(referenceFrame) : nil)
        }
        if settings.muted.load(ordering: .relaxed) {
            if settings.detector.observe(nearFrame, count: frameLength) != nil { eventsRef._withUnsafeGuaranteedRef { $0.post() } }
            nearFrame.update(repeating: 0, count: frameLength)
        } else if settings.detector.speaking {
            settings.detector.reset()
            eventsRef._withUnsafeGuaranteedRef { $0.post() }
        }
        // Voice in the call, for advanced ducking: the uplink as sent, and what the unit plays.
        _ = nearVoice.observe(nearFrame, count: frameLength)
        if played {
            _ = farVoice.observe(farFrame, count: frameLength)
        } else if farVoice.speaking {
            farVoice.reset()
        }
        let voice = nearVoice.speaking || farVoice.speaking
        duckingRef._withUnsafeGuaranteedRef { $0.voice(voice) }
        return !bypassed
    }

    /// Fills ``farFrame`` with the far end lined up with the microphone frame just completed
    /// (silence for what is not rendered yet); false when none of it is.
    private func farEnd() -> Bool {
        let written = far.written
        guard written > 0 else { return false }
        // The most recent frame a reference could end on now, as an offset from the microphone's
        // frame count. It rises and falls by a render's worth as the two threads take turns.
        let ahead = written - nearIndex - frameLength
        let margin = rate / 1000
        if farOffset == nil {
            farOffset = ahead - margin
        } else if ahead < farOffset! {
            if framesLined < 100 {
                // Settling: at the lowest point of that rise and fall.
                move(to: ahead - margin)
            } else {
                // A render that runs late (the app's callback held up, the thread not
                // scheduled). The playback stream keeps its timeline, so what comes after it
                // plays where its count says, and the echo stays where it was; what the server
                // passed before it came is not heard (though the history holds it once written:
                // for as long as the stall outlasted the stream's buffer, the canceller's
                // reference has sound that never played). The lining-up stays: moved down by
                // the shortfall at once, it would take the echo's delay with it, which stops at 0,
                // and a render 120 ms late would leave the canceller's reference off by what was
                // cut (1.4 dB of loss for the rest of the call).
                shortFrames += 1
            }
        }
        framesLined = min(framesLined + 1, Int.max / 2)
        lowest = min(lowest, ahead)
        framesWatched += 1
        if framesWatched == 200 {
            // Every 2 s: a reference lagging more than 20 ms behind what it could be (the two
            // streams' clocks drifting apart) moves up to the lowest point seen; one that ran
            // past what was rendered in a quarter of the frames or more (drifting the other
            // way; a render half a second late counts too) moves down, by at most 5 ms.
            if lowest - margin > farOffset! + rate / 50 {
                move(to: lowest - margin)
            } else if shortFrames >= 50 {
                move(to: max(lowest - margin, farOffset! - rate / 200))
            }
            lowest = .max
            framesWatched = 0
            shortFrames = 0
        }
        return far.read(from: nearIndex + farOffset!, count: frameLength, into: farFrame)
    }

    /// Moves the reference, and tells the processor: the echo's delay behind it moves as much.
    private func move(to offset: Int) {
        processor.moveReference(by: offset - (farOffset ?? offset))
        farOffset = offset
    }

    /// Writes the processed frame to ``clientOut`` at the client's rate and channels; returns
    /// the frames written.
    private func emit() -> Int {
        let channels = clientChannels, out = clientOut
        func spread(_ mono: UnsafePointer<Float>, _ n: Int, at offset: Int) {
            let to = out + offset * channels
            if channels == 1 {
                to.update(from: mono, count: n)
            } else {
                for i in 0..<n { for c in 0..<channels { to[i * channels + c] = mono[i] } }
            }
        }
        guard let ref = nearResamplerRef else {
            spread(nearFrame, frameLength, at: 0)
            return frameLength
        }
        let frame = UnsafePointer(nearFrame), resampled = nearResampled, length = frameLength, chunk = Self.nearChunk
        return ref._withUnsafeGuaranteedRef { r in
            var done = 0, written = 0
            while done < length {
                let n = min(chunk, length - done)
                let piece = frame + done
                r.take({ _ in piece }, frames: n)
                done += n
                while r.needed(forOutput: chunk) == 0 {
                    r.produce({ _ in resampled }, frames: chunk)
                    spread(resampled, chunk, at: written)
                    written += chunk
                }
            }
            return written
        }
    }
}

/// The voice-processing unit's switches (its `kAUVoiceIOProperty_…` properties): set by control
/// threads, read by the capture thread; they outlive a stop and start.
final class VoiceSettings: @unchecked Sendable {
    let bypass = Atomic<Bool>(false)
    let gainControl = Atomic<Bool>(true)
    let muted = Atomic<Bool>(false)
    let events = MutedSpeechEvents()
    let ducking = VoiceDucking()
    /// Whether someone speaks into the muted microphone: the capture thread's only. It lives as
    /// long as the unit, so its starts and ends alternate whatever stops and starts between.
    var detector = SpeechDetector()

    /// The switch property `id` (bypass, gain control or mute).
    func value(_ id: AudioUnitPropertyID) -> Bool {
        switch id {
        case kAUVoiceIOProperty_BypassVoiceProcessing: bypass.load(ordering: .relaxed)
        case kAUVoiceIOProperty_MuteOutput: muted.load(ordering: .relaxed)
        default: gainControl.load(ordering: .relaxed)
        }
    }

    func set(_ id: AudioUnitPropertyID, _ on: Bool) {
        switch id {
        case kAUVoiceIOProperty_BypassVoiceProcessing: bypass.store(on, ordering: .relaxed)
        case kAUVoiceIOProperty_MuteOutput: muted.store(on, ordering: .relaxed)
        default: gainControl.store(on, ordering: .relaxed)
        }
    }
}

/// The far end's recent past by absolute frame index: one writer (the playback thread) appends,
/// one reader (the capture thread) reads any span still held. The reader checks the span is
/// still there after copying it, so a span overwritten meanwhile reads as missing, not as mixed.
final class FarHistory: @unchecked Sendable {
    private let storage: UnsafeMutablePointer<Float>
    let capacity: Int
    private let count = Atomic<Int>(0)

    init(capacity: Int) {
        self.capacity = capacity
        storage = .allocate(capacity: capacity)
        storage.initialize(repeating: 0, count: capacity)
    }

    deinit { storage.deallocate() }

    /// Frames ever written: the next frame's index.
    var written: Int { count.load(ordering: .acquiring) }

    func write(_ samples: UnsafePointer<Float>, count n: Int) {
        var at = count.load(ordering: .relaxed)
        for i in 0..<n {
            storage[at % capacity] = samples[i]
            at += 1
        }
        count.store(at, ordering: .releasing)
    }

    /// Copies frames `start..<start + n` into `out`, silence for any not written yet or gone;
    /// false when none of them was there.
    func read(from start: Int, count n: Int, into out: UnsafeMutablePointer<Float>) -> Bool {
        let end = count.load(ordering: .acquiring)
        var any = false
        for i in 0..<n {
            let index = start + i
            if index >= 0 && index < end && index >= end - capacity {
                out[i] = storage[index % capacity]
                any = true
            } else {
                out[i] = 0
            }
        }
        // Frames the writer passed over while we copied (it wrote more than the space between).
        let now = count.load(ordering: .acquiring)
        let lost = now - capacity - start
        if lost > 0 { (out).update(repeating: 0, count: min(n, lost)) }
        return any && lost < n
    }
}

/// Says whether someone speaks into a muted microphone: a frame 15 dB above the tracked noise
/// floor (and above −55 dBFS) for 30 ms starts speech; 0.5 s without one ends it.
struct SpeechDetector {
    private var floor = -70.0
    private var loud = 0
    private var quiet = 0
    private(set) var speaking = false

    mutating func reset() {
        loud = 0
        quiet = 0
        speaking = false
    }

    /// The event this frame causes, if any.
    mutating func observe(_ frame: UnsafePointer<Float>, count: Int) -> AUVoiceIOSpeechActivityEvent? {
        var sum: Float = 0
        for i in 0..<count { sum += frame[i] * frame[i] }
        let level = 10 * log10(Double(sum) / Double(max(count, 1)) + 1e-12)
        // The floor falls at once and rises 0.05 dB a frame (5 dB a second).
        floor = max(min(level, floor + 0.05), -90)
        let isLoud = level > max(floor + 15, -55)
        if isLoud {
            loud += 1
            quiet = 0
        } else {
            loud = 0
            quiet += 1
        }
        if !speaking && loud >= 3 {
            speaking = true
            return .hasStarted
        }
        if speaking && quiet >= 50 {
            speaking = false
            return .hasEnded
        }
        return nil
    }
}

/// Carries muted-speech events from the capture thread (a counter and a semaphore post) to the
/// listener, on a thread of its own made when a listener is set. Events alternate, a start
/// first (``SpeechDetector``, which lives as long as the unit), so a count says which each one
/// is. ``close()`` (the unit's dispose) ends the thread; a listener call already under way
/// finishes.
final class MutedSpeechEvents: @unchecked Sendable {
    private let posted = Atomic<Int>(0)
    private var delivered = 0
    /// The listener thread's semaphore, held directly: a call into another module's class
    /// (AudioHAL's Wakeup) retained it on the capture thread.
    private let semaphore: UnsafeMutablePointer<sem_t>
    private let state = Mutex<(listener: AUVoiceIOMutedSpeechActivityEventListener?, thread: Bool, ending: Bool)>((nil, false, false))

    init() {
        semaphore = .allocate(capacity: 1)
        sem_init(semaphore, 0, 0)
    }

    deinit {
        sem_destroy(semaphore)
        semaphore.deallocate()
    }

    /// The next event happened (real-time safe: an atomic and a semaphore post).
    func post() {
        posted.wrappingAdd(1, ordering: .releasing)
        sem_post(semaphore)
    }

    var listener: AUVoiceIOMutedSpeechActivityEventListener? {
        state.withLock { $0.listener }
    }

    func setListener(_ listener: AUVoiceIOMutedSpeechActivityEventListener?) {
        let start = state.withLock { s -> Bool in
            s.listener = listener
            guard listener != nil, !s.thread, !s.ending else { return false }
            s.thread = true
            return true
        }
        guard start else { return }
        // Events from before the first listener are not replayed, except that speech going on
        // now (an odd count: a start without its end) is said once.
        delivered = posted.load(ordering: .acquiring) & ~1
        let thread = Thread { [self] in run() }
        thread.name = "VoiceIO speech events"
        thread.start()
    }

    /// Ends the listener's thread (the unit is going away).
    func close() {
        let running = state.withLock { s -> Bool in
            s.ending = true
            s.listener = nil
            return s.thread
        }
        if running { sem_post(semaphore) }
    }

    private func run() {
        while true {
            while sem_wait(semaphore) != 0 && errno == EINTR {}
            let (listener, ending) = state.withLock { ($0.listener, $0.ending) }
            if ending { return }
            let now = posted.load(ordering: .acquiring)
            while delivered < now {
                listener?(delivered % 2 == 0 ? .hasStarted : .hasEnded)
                delivered += 1
            }
        }
    }
}

/// How a voice-processing unit ducks other clients' playback
/// (`kAUVoiceIOProperty_OtherAudioDuckingConfiguration`): while the unit runs, it asks the
/// session host to duck others by its level (``AudioSessionHost/duckOthers(_:for:)``: the
/// deepest level any asker wants applies, and the server's own ducking or the guard undoes it if
/// the process dies). With advanced ducking, only while the call has voice: the capture thread
/// says so (an atomic and, on a change, a semaphore post).
///
/// The asking talks to the server, so it is done on a thread of this object's, made at the first
/// start: ``start()``, ``stop()`` and a new ``configuration`` only change the state and wake it
/// (a short lock and a post: the unit calls them under its own lock, and a callback may stop its
/// unit from the real-time thread), and the thread asks for what the state says when it wakes.
///
/// The call's voice is a level detector (``SpeechDetector``) on the microphone as sent and on
/// what the unit plays. With loudspeakers, another application's sound that reaches the
/// microphone counts as the near side's voice (the canceller takes out only the unit's own
/// playback), and ducking it then lets it back up half a second later: advanced ducking suits a
/// headset; without one, leave it off.
final class VoiceDucking: @unchecked Sendable {
    private let key = AudioSessionHost.newDucker()
    private let voiceNow = Atomic<Bool>(false)
    private let semaphore: UnsafeMutablePointer<sem_t>
    private let state = Mutex<(configuration: AUVoiceIOOtherAudioDuckingConfiguration, running: Bool, thread: Bool, ending: Bool)>(
        (AUVoiceIOOtherAudioDuckingConfiguration(), false, false, false))

    init() {
        semaphore = .allocate(capacity: 1)
        sem_init(semaphore, 0, 0)
    }

    deinit {
        sem_destroy(semaphore)
        semaphore.deallocate()
    }

    /// The level a configuration asks for.
    static func level(_ level: AUVoiceIOOtherAudioDuckingLevel) -> DuckLevel {
        switch level {
        case .min: .light
        case .mid: .medium
        case .default, .max: .full
        }
    }

    var configuration: AUVoiceIOOtherAudioDuckingConfiguration {
        get { state.withLock { $0.configuration } }
        set {
            let wake = state.withLock { s -> Bool in
                s.configuration = newValue
                return s.thread
            }
            if wake { sem_post(semaphore) }
        }
    }

    /// The unit started: ducking starts (advanced: when someone speaks).
    func start() {
        voiceNow.store(false, ordering: .relaxed)
        let made = state.withLock { s -> Bool in
            guard !s.ending else { return true }
            s.running = true
            defer { s.thread = true }
            return s.thread
        }
        if !made {
            let thread = Thread { [self] in run() }
            thread.name = "VoiceIO ducking"
            thread.start()
        }
        sem_post(semaphore)
    }

    /// The unit stopped: ducking ends.
    func stop() {
        let wake = state.withLock { s -> Bool in
            s.running = false
            return s.thread
        }
        if wake { sem_post(semaphore) }
    }

    /// Whether the call has voice now (the capture thread, each frame): real-time safe.
    func voice(_ speaking: Bool) {
        if voiceNow.exchange(speaking, ordering: .acquiringAndReleasing) != speaking { sem_post(semaphore) }
    }

    /// Ends any ducking, then the thread (the unit is going away).
    func close() {
        state.withLock { s in
            s.ending = true
            s.running = false
        }
        sem_post(semaphore)
    }

    private func run() {
        while true {
            while sem_wait(semaphore) != 0 && errno == EINTR {}
            let (configuration, running, ending) = state.withLock { ($0.configuration, $0.running, $0.ending) }
            let on = running && (!configuration.mEnableAdvancedDucking.boolValue || voiceNow.load(ordering: .acquiring))
            // A server that refuses: the call goes on, ducking no one (as the session's duckOthers).
            try? AudioSessionHost.duckOthers(on ? Self.level(configuration.mDuckingLevel) : nil, for: key)
            if ending { return }
        }
    }
}
