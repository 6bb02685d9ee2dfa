import CSpeexDSP
import Synchronization
import CWebRTCAudioProcessing

/// Echo cancellation, noise suppression and gain control for a call's microphone, with what the
/// call plays as the echo's reference: mono, in frames of 10 ms, by one of two libraries
/// (libwebrtc-audio-processing or libspeexdsp; DESIGN.md has them chosen by measurement).
///
/// ``process(near:far:)`` takes a microphone frame and the far-end frame that was playing as it
/// was captured (the caller lines them up by its streams' latencies); the echo may reach the
/// microphone up to ``maximumEchoDelay`` later than its far-end frame (the room, or an acoustic
/// path the caller cannot see), never earlier. speex's canceller gets the far end delayed by what
/// an ``EchoDelayEstimator`` finds, less ``delayMargin``, so that its short filter (``echoTail``)
/// sits where the echo is; webrtc finds the delay itself (its delay-agnostic mode). An echo path
/// that moves at once by less than the filter holds (a loopback or a link whose buffer ran dry)
/// is followed by an ``EchoShiftFollower``, the filter's taps kept. Above 16 kHz speex runs on
/// the band below 8 kHz (a ``BandSplit``), which takes its gain above: the library costs a third
/// as much there as at 48 kHz, where it cost more than webrtc's whole processing.
///
/// Memory is made in `init`; ``process(near:far:)`` converts through buffers made there, so a
/// real-time thread may call it (what the libraries do inside is theirs: the allocation test
/// holds them to it).
package final class VoiceProcessor: @unchecked Sendable {
    package enum Library: String, CaseIterable, Sendable {
        case webrtc, speex
    }

    /// Which stages run.
    package struct Stages: Equatable, Sendable {
        package var echoCancellation: Bool
        package var noiseSuppression: Bool
        package var gainControl: Bool

        package init(echoCancellation: Bool = true, noiseSuppression: Bool = true, gainControl: Bool = true) {
            self.echoCancellation = echoCancellation
            self.noiseSuppression = noiseSuppression
            self.gainControl = gainControl
        }
    }

    package let library: Library
    package let sampleRate: Int
    /// Samples in a frame: 10 ms.
    package let frameLength: Int
    /// speex only: the rate and frame it runs at (16 kHz above 16 kHz, ``BandSplit``; else
    /// ``sampleRate``), and the split.
    package let bandRate: Int
    private let bandFrameLength: Int
    private let split: BandSplit?
    /// The same, for the real-time path.
    private let splitRef: Unmanaged<BandSplit>?
    /// speex above 16 kHz: the band of the microphone's frame and of the reference, and the band
    /// processed.
    private let nearBand: UnsafeMutablePointer<Float>
    private let farBand: UnsafeMutablePointer<Float>
    private let bandOut: UnsafeMutablePointer<Float>
    /// Samples ``process(near:reference:)`` reads before the reference's frame (its band is
    /// taken through a filter that long: ``BandSplit/lead``); 0 where there is no split.
    package let referenceLead: Int
    /// Samples ``process(near:reference:)`` reads after the reference's frame (speex with echo
    /// cancellation: the ``EchoShiftFollower``'s earliest lag, 6 ms): after the echo path
    /// shortened, the reference that follows, on which the filter's history is replayed
    /// (``replay(_:movedBy:from:)``). A caller that has not the far end that far yet passes
    /// silence there.
    package let referenceTail: Int
    /// The samples a reference passed to ``process(near:reference:)`` holds: ``referenceLead``,
    /// the frame, ``referenceTail``.
    package var referenceLength: Int { referenceLead + frameLength + referenceTail }
    /// The band's samples after its frame (the tail's).
    private let bandTail: Int
    /// How much later than its microphone frame a processed frame comes out, in samples (speex:
    /// its preprocessor's frame, and the band split's filter; webrtc: not known, 0).
    package let latency: Int
    /// How much later than its far-end frame an echo may arrive and still be found.
    package static let maximumEchoDelay = 0.4
    /// speex's filter: how long an echo lasts after the delay found (the room's reflections).
    /// Measured on a recording of the test server's echo path (a loopback, 40 ms): with the
    /// reference moved to the echo, a 50 ms filter left it 45–70 dB down after 2 s, a 200 ms one
    /// 30–50 dB (a longer filter converges slower; where it lands varied with the alignment).
    /// webrtc's own is 48 ms (128 ms extended, which the shim turns on).
    package static let echoTail = 0.05
    /// The reference is moved to arrive this much before the echo found: the estimate is good to
    /// a millisecond, and an echo ahead of its reference cannot be cancelled.
    package static let delayMargin = 0.002
    /// speex's gain control level (a loudness in 16-bit units, not an RMS) that brings a talker
    /// to about −20 dBFS of speech RMS, a call's microphone level. Its loudness measure depends on
    /// the frame's bandwidth: measured on the benchmark's voices (`openavf-bench --only voice`),
    /// 12000 takes a talker at −40 dBFS to −22 dBFS at 16 kHz but to −27 at 48 kHz, where 20000
    /// takes it to −22 (peaks of a loud talker stay below −3 dBFS); 32 kHz lies between.
    private static func speexAGCLevel(sampleRate: Int) -> Float {
        sampleRate <= 16000 ? 12000 : sampleRate <= 32000 ? 16000 : 20000
    }

    private let webrtc: OpaquePointer?
    private let echo: OpaquePointer?
    private let preprocess: OpaquePointer?
    private let nearShorts: UnsafeMutablePointer<Int16>
    private let farShorts: UnsafeMutablePointer<Int16>
    private let outShorts: UnsafeMutablePointer<Int16>
    /// A far-end frame of silence, for webrtc when nothing plays (its delay estimate needs the
    /// far stream to run on).
    private let zeros: UnsafeMutablePointer<Float>
    /// speex only: the far end's last ``maximumEchoDelay`` and a frame, in samples (a ring), the
    /// delay estimate, and the delay the canceller's reference is given (samples).
    private let farHistory: UnsafeMutablePointer<Float>
    private let historyLength: Int
    private var historyWritten = 0
    private let delayedFar: UnsafeMutablePointer<Float>
    private let estimator: EchoDelayEstimator?
    /// The same, for the real-time path (a binding of the optional would retain it).
    private let estimatorRef: Unmanaged<EchoDelayEstimator>?
    package private(set) var referenceDelay = 0
    /// Whether a delay was found yet, and a new one that is being watched (``estimate(far:near:)``).
    private var delayFound = false
    private var candidate = 0
    private var candidateFrames = 0
    /// speex only: finds the echo path's sudden moves inside the filter (``EchoShiftFollower``).
    private let follower: EchoShiftFollower
    /// Whether the follower's moves are taken (on unless a measurement turns it off).
    package var followsEchoShifts = true {
        didSet { follower.reset() }
    }
    /// How many moves of the echo path the follower found (a count for measurements).
    package private(set) var movesFollowed = 0

    /// A change of where the canceller's reference is read (speex only), for a measurement to
    /// print when the echo came back: which 10 ms frame it came in (counted by
    /// ``estimate(far:near:)``), what it was, and by how many samples at ``sampleRate``.
    package struct ReferenceEvent: Sendable, CustomStringConvertible {
        package enum Kind: Sendable {
            /// The delay estimate's first delay, or a new one within a few milliseconds.
            case delay
            /// A new delay far from the last: the canceller started over.
            case startOver
            /// The caller's lining-up of the far end moved (``moveReference(by:)``).
            case lining
            /// The follower found the echo path moved inside the filter.
            case follower
        }
        package let frame: Int
        package let kind: Kind
        /// The delay taken (``Kind/delay``, ``Kind/startOver``), or the move.
        package let samples: Int
        package var description: String { "frame \(frame): \(kind) \(samples)" }
    }
    /// The first ``referenceEvents``' capacity of them, in order (the processing thread writes;
    /// read any time).
    package var referenceEvents: [ReferenceEvent] { Array(UnsafeBufferPointer(start: eventLog, count: eventCount.load(ordering: .acquiring))) }
    private static let eventCapacity = 32
    private let eventLog: UnsafeMutablePointer<ReferenceEvent>
    private let eventCount = Atomic<Int>(0)
    /// Frames seen by ``estimate(far:near:)`` (the processing thread's).
    private var framesEstimated = 0

    /// Notes an event (processing thread; nothing once the log is full, no allocation).
    private func note(_ kind: ReferenceEvent.Kind, _ samples: Int) {
        let n = eventCount.load(ordering: .relaxed)
        guard n < Self.eventCapacity else { return }
        (eventLog + n).initialize(to: ReferenceEvent(frame: framesEstimated, kind: kind, samples: samples))
        eventCount.store(n + 1, ordering: .releasing)
    }
    /// speex only: the last frames the canceller was given (microphone and reference, newest
    /// last; ``replayFrames`` and the follower's longest move), replayed after a move
    /// (``replay(movedBy:)``), and where a replay's output goes.
    private let recentNear: UnsafeMutablePointer<Int16>
    private let recentReference: UnsafeMutablePointer<Int16>
    private let recentLength: Int
    private let replayFrames: Int
    private let replayOut: UnsafeMutablePointer<Int16>
    private let replayNear: UnsafeMutablePointer<Int16>
    private let replayReference: UnsafeMutablePointer<Int16>
    /// Above 16 kHz: the same frames' wide microphone and reference (float), ``wideMargin``
    /// samples, the split's lead, then ``recentLength`` band samples' worth, so that a replay
    /// can take the band afresh from the wide signals moved by the wide move, which falls
    /// between band samples (``bandSample(_:at:movedBy:)``).
    private let recentWideNear: UnsafeMutablePointer<Float>
    private let recentWideReference: UnsafeMutablePointer<Float>
    private let recentWideLength: Int
    private var wideMargin: Int { sampleRate / bandRate }

    /// A processor at `sampleRate`: 8, 16, 32 or 48 kHz, the rates webrtc runs at (speex would
    /// take others; one list keeps the libraries interchangeable). Nil for any other rate, or
    /// when the library cannot make its state.
    package init?(library: Library, sampleRate: Int, stages: Stages = Stages()) {
        guard [8000, 16000, 32000, 48000].contains(sampleRate) else { return nil }
        self.library = library
        self.sampleRate = sampleRate
        frameLength = sampleRate / 100
        split = library == .speex ? BandSplit(sampleRate: sampleRate, frameLength: frameLength) : nil
        splitRef = split.map { .passUnretained($0) }
        bandRate = split == nil ? sampleRate : 16000
        let nb = split?.bandFrameLength ?? frameLength
        bandFrameLength = nb
        referenceLead = split?.lead ?? 0
        bandTail = library == .speex && stages.echoCancellation ? EchoShiftFollower.earliest(sampleRate: bandRate) : 0
        referenceTail = bandTail * sampleRate / bandRate
        let referenceLength = referenceLead + frameLength + referenceTail
        latency = library == .webrtc ? 0 : split?.delay ?? frameLength
        nearBand = .allocate(capacity: nb)
        nearBand.initialize(repeating: 0, count: nb)
        farBand = .allocate(capacity: nb + bandTail)
        farBand.initialize(repeating: 0, count: nb + bandTail)
        bandOut = .allocate(capacity: nb)
        bandOut.initialize(repeating: 0, count: nb)
        nearShorts = .allocate(capacity: nb)
        farShorts = .allocate(capacity: nb + bandTail)
        outShorts = .allocate(capacity: nb)
        zeros = .allocate(capacity: referenceLength)
        zeros.initialize(repeating: 0, count: referenceLength)
        eventLog = .allocate(capacity: Self.eventCapacity)
        historyLength = Int(Double(sampleRate) * Self.maximumEchoDelay) + 2 * frameLength + referenceLead
        farHistory = .allocate(capacity: historyLength)
        farHistory.initialize(repeating: 0, count: historyLength)
        delayedFar = .allocate(capacity: referenceLength)
        delayedFar.initialize(repeating: 0, count: referenceLength)
        estimator = library == .speex && stages.echoCancellation ? EchoDelayEstimator(sampleRate: sampleRate, maximumDelay: Self.maximumEchoDelay) : nil
        estimatorRef = estimator.map { .passUnretained($0) }
        // speex's filter: whole frames (its impulse response is as long), at its own rate.
        let filterFrames = (Int(Double(bandRate) * Self.echoTail) + nb - 1) / nb
        follower = EchoShiftFollower(
            sampleRate: bandRate, frameLength: nb, filterLength: filterFrames * nb, subdivisions: sampleRate / bandRate, tail: bandTail)
        // The filter's blocks and one more: its whole reference history.
        replayFrames = filterFrames + 1
        recentLength = (replayFrames + 1) * nb + follower.latest
        recentNear = .allocate(capacity: recentLength)
        recentNear.initialize(repeating: 0, count: recentLength)
        recentReference = .allocate(capacity: recentLength)
        recentReference.initialize(repeating: 0, count: recentLength)
        replayOut = .allocate(capacity: nb)
        replayOut.initialize(repeating: 0, count: nb)
        replayNear = .allocate(capacity: nb)
        replayNear.initialize(repeating: 0, count: nb)
        replayReference = .allocate(capacity: nb)
        replayReference.initialize(repeating: 0, count: nb)
        let recent = recentLength
        recentWideLength = split.map { $0.factor + $0.lead + recent * $0.factor } ?? 0
        recentWideNear = .allocate(capacity: max(recentWideLength, 1))
        recentWideNear.initialize(repeating: 0, count: max(recentWideLength, 1))
        // And the frame's tail after it (``referenceTail``), for the follower's phases.
        recentWideReference = .allocate(capacity: max(recentWideLength + referenceTail, 1))
        recentWideReference.initialize(repeating: 0, count: max(recentWideLength + referenceTail, 1))
        switch library {
        case .webrtc:
            webrtc = oa_webrtc_new(
                Int32(sampleRate), stages.echoCancellation ? 1 : 0, stages.noiseSuppression ? 1 : 0, stages.gainControl ? 1 : 0)
            echo = nil
            preprocess = nil
            // A failed init still runs deinit (every property is set), which frees what was made.
            guard webrtc != nil else { return nil }
        case .speex:
            webrtc = nil
            let tail = Int32(Double(bandRate) * Self.echoTail)
            echo = stages.echoCancellation ? speex_echo_state_init(Int32(nb), tail) : nil
            preprocess = speex_preprocess_state_init(Int32(nb), Int32(bandRate))
            guard let preprocess, echo != nil || !stages.echoCancellation else { return nil }
            var rate = Int32(bandRate)
            if let echo {
                speex_echo_ctl(echo, SPEEX_ECHO_SET_SAMPLING_RATE, &rate)
                // The preprocessor suppresses the residual echo the filter leaves.
                speex_preprocess_ctl(preprocess, SPEEX_PREPROCESS_SET_ECHO_STATE, UnsafeMutableRawPointer(echo))
            }
            var on: Int32 = stages.noiseSuppression ? 1 : 0
            speex_preprocess_ctl(preprocess, SPEEX_PREPROCESS_SET_DENOISE, &on)
            // Noise down by up to 30 dB (the library's default is 15).
            var suppression: Int32 = -30
            speex_preprocess_ctl(preprocess, SPEEX_PREPROCESS_SET_NOISE_SUPPRESS, &suppression)
            var agc: Int32 = stages.gainControl ? 1 : 0
            speex_preprocess_ctl(preprocess, SPEEX_PREPROCESS_SET_AGC, &agc)
            var level = Self.speexAGCLevel(sampleRate: bandRate)
            speex_preprocess_ctl(preprocess, SPEEX_PREPROCESS_SET_AGC_LEVEL, &level)
        }
    }

    deinit {
        if let webrtc { oa_webrtc_free(webrtc) }
        if let echo { speex_echo_state_destroy(echo) }
        if let preprocess { speex_preprocess_state_destroy(preprocess) }
        nearBand.deallocate()
        farBand.deallocate()
        bandOut.deallocate()
        nearShorts.deallocate()
        farShorts.deallocate()
        outShorts.deallocate()
        zeros.deallocate()
        eventLog.deallocate()
        farHistory.deallocate()
        delayedFar.deallocate()
        recentNear.deallocate()
        recentReference.deallocate()
        replayOut.deallocate()
        replayNear.deallocate()
        replayReference.deallocate()
        recentWideNear.deallocate()
        recentWideReference.deallocate()
    }

    /// Turns gain control on or off while running (speex's: its preprocessor takes the change
    /// between frames, without allocating). Returns false for webrtc, whose stages are fixed
    /// when it is made.
    @discardableResult
    package func setGainControl(_ on: Bool) -> Bool {
        guard let preprocess, webrtc == nil else { return false }
        var value: Int32 = on ? 1 : 0
        speex_preprocess_ctl(preprocess, SPEEX_PREPROCESS_SET_AGC, &value)
        return true
    }

    /// Processes a frame of the microphone in place, `far` the far end's frame that was playing
    /// as it was captured (nil: nothing was). The processor keeps the far end's recent past
    /// itself and gives the canceller its frame from ``referenceDelay`` samples before.
    package func process(near: UnsafeMutablePointer<Float>, far: UnsafePointer<Float>?) {
        let source = far ?? UnsafePointer(zeros)
        guard webrtc == nil, echo != nil else {
            process(near: near, reference: source)
            return
        }
        let n = frameLength
        var at = historyWritten % historyLength
        for i in 0..<n {
            farHistory[at] = source[i]
            at = at + 1 == historyLength ? 0 : at + 1
        }
        historyWritten += n
        estimate(far: source, near: UnsafePointer(near))
        // The tail reaches past what was written where the delay is shorter than it: silence.
        let first = historyWritten - n - referenceDelay - referenceLead
        var from = first % historyLength
        if from < 0 { from += historyLength }
        for i in 0..<referenceLength {
            delayedFar[i] = first + i < historyWritten ? farHistory[from] : 0
            from = from + 1 == historyLength ? 0 : from + 1
        }
        process(near: near, reference: UnsafePointer(delayedFar))
    }

    /// For a caller that keeps the far end's past itself (the voice-processing unit, whose
    /// streams' history it reads from): takes the far end lined up with the microphone frame
    /// `near` (nil: nothing played), before processing, and updates ``referenceDelay`` by the
    /// echo's delay found. The caller then reads its far end ``referenceDelay`` samples earlier
    /// and passes it to ``process(near:reference:)``. Does nothing for webrtc (its delay stays 0:
    /// it finds the delay itself).
    package func estimate(far: UnsafePointer<Float>?, near: UnsafePointer<Float>) {
        framesEstimated += 1
        guard let found = estimatorRef?._withUnsafeGuaranteedRef({ e -> Int? in
            e.push(far: far ?? UnsafePointer(zeros), near: near, count: frameLength)
            return e.delay
        }) else { return }
        let wanted = max(0, found - Int(Double(sampleRate) * Self.delayMargin))
        // The echo is left where it is in the filter while it stays inside it, from 1 ms after
        // the reference's start to 20 ms in (a 50 ms filter): each move costs the filter some
        // re-convergence. (Moves of a few ms within a call come from the echo path lengthening
        // at once, as the test server's loopback does by 17–239 samples at a time, not from the
        // unit's streams, which stay locked.)
        let position = found - referenceDelay
        guard !delayFound || position < sampleRate / 1000 || position > sampleRate / 50 else {
            candidateFrames = 0
            return
        }
        // After the first, a new delay is taken once it has held for 50 ms: a stray peak of the
        // correlation (double talk, an echo with two ways) does not move or reset the filter.
        if abs(wanted - candidate) > sampleRate / 500 {
            candidate = wanted
            candidateFrames = 0
        }
        candidateFrames += 1
        guard !delayFound || candidateFrames >= 5 else { return }
        let first = !delayFound
        delayFound = true
        candidateFrames = 0
        // An echo that moved more than a few milliseconds took another way (a route change, a
        // device's latency): the filter's taps are the old way's, off by a fraction of a block
        // wherever the reference now lands, and unlearning them takes speex 1.5 s longer than
        // learning afresh. It starts over; the suppressor, noise estimate and gain keep theirs.
        let startsOver = abs(wanted - referenceDelay) > sampleRate / 200 && echo != nil
        if startsOver, let echo { speex_echo_state_reset(echo) }
        let delay = min(wanted, Self.longestReferenceDelay(sampleRate))
        if startsOver || delay != referenceDelay { note(startsOver && !first ? .startOver : .delay, delay) }
        // The reference jumps: what the follower learnt of the path is the old alignment's.
        if delay != referenceDelay { follower.reset() }
        referenceDelay = delay
    }

    /// Cancels the echo of `reference` (the far end as the canceller is to see it: for speex,
    /// ``referenceDelay`` samples before the frame lined up with `near`; nil: silence) in the
    /// microphone frame `near`, then suppresses noise and controls gain, in place (what comes
    /// out is ``latency`` samples behind what went in). `reference` holds ``referenceLength``
    /// samples: the ``referenceLead`` before its frame, then the frame.
    package func process(near: UnsafeMutablePointer<Float>, reference: UnsafePointer<Float>?) {
        if let webrtc {
            _ = oa_webrtc_far(webrtc, reference ?? UnsafePointer(zeros))
            _ = oa_webrtc_near(webrtc, near, 0)
            return
        }
        guard let preprocess else { return }
        let n = bandFrameLength
        let reference = reference ?? UnsafePointer(zeros)
        // Above 16 kHz the processing runs on the band below 8 kHz: the microphone's and the
        // reference's, both taken through the same filter.
        if let splitRef {
            let nearBand = nearBand, farBand = farBand
            splitRef._withUnsafeGuaranteedRef { split in
                split.split(near, band: nearBand)
                if echo != nil { split.decimate(reference, count: n + bandTail, into: farBand) }
            }
            Self.shorts(nearBand, into: nearShorts, count: n)
            if echo != nil { Self.shorts(farBand, into: farShorts, count: n + bandTail) }
        } else {
            Self.shorts(near, into: nearShorts, count: n)
            if echo != nil { Self.shorts(reference, into: farShorts, count: n + bandTail) }
        }
        let result: UnsafeMutablePointer<Int16>
        if let echo {
            speex_echo_cancellation(echo, nearShorts, farShorts, outShorts)
            // The echo path moved at once inside the filter (``EchoShiftFollower``): the filter's
            // blocks are replayed on the moved alignment, and the reference follows the path
            // from the next frame, so the filter's taps fit again. The follower's model of the
            // path (``EchoShiftFollower/takeModel()``) is taken from a frame cancelled well.
            if followsEchoShifts && estimator != nil {
                recentNear.update(from: recentNear + n, count: recentLength - n)
                (recentNear + recentLength - n).update(from: nearShorts, count: n)
                recentReference.update(from: recentReference + n, count: recentLength - n)
                (recentReference + recentLength - n).update(from: farShorts, count: n)
                if split != nil {
                    let wide = frameLength, kept = recentWideLength - wide
                    recentWideNear.update(from: recentWideNear + wide, count: kept)
                    (recentWideNear + kept).update(from: UnsafePointer(near), count: wide)
                    recentWideReference.update(from: recentWideReference + wide, count: kept)
                    (recentWideReference + kept).update(from: reference + referenceLead, count: wide + referenceTail)
                    // The frame's reference (and its tail) delayed by a wide sample and more, as
                    // the band split takes it: the follower tries moves between band samples on them.
                    let factor = sampleRate / bandRate, newest = wideMargin + (recentLength - n) * factor
                    let phases = follower.phaseFrame, history = UnsafePointer(recentWideReference), row = follower.frameAndTail
                    splitRef?._withUnsafeGuaranteedRef { split in
                        for k in 1..<factor { split.decimate(history + newest - k, count: row, into: phases + (k - 1) * row) }
                    }
                }
                let moved = follower.observe(near: nearShorts, reference: farShorts, residual: outShorts, count: n)
                if follower.wantsModel {
                    speex_echo_ctl(echo, SPEEX_ECHO_GET_IMPULSE_RESPONSE, follower.modelBuffer)
                    follower.takeModel()
                }
                // A move the reference cannot make in full (it would pass 0 or the longest
                // delay) is left to the delay estimate. The follower's samples are the band's:
                // the reference moves by its fraction of one too (the filter's history is
                // replayed by whole ones).
                let wide = bandRate == sampleRate ? moved : Int(((Float(moved) + follower.moveFraction) * Float(sampleRate / bandRate)).rounded())
                if moved != 0 && (0...Self.longestReferenceDelay(sampleRate)).contains(referenceDelay + wide) {
                    replay(echo, movedBy: moved, wide: wide, from: follower.moveStart)
                    movesFollowed += 1
                    note(.follower, wide)
                    shiftEcho(by: wide)
                }
            }
            result = outShorts
        } else {
            result = nearShorts
        }
        speex_preprocess_run(preprocess, result)
        if let splitRef {
            for i in 0..<n { bandOut[i] = Float(result[i]) / 32768 }
            let bandOut = UnsafePointer(bandOut)
            splitRef._withUnsafeGuaranteedRef { $0.join(bandOut, into: near) }
        } else {
            for i in 0..<n { near[i] = Float(result[i]) / 32768 }
        }
    }

    /// After the echo path moved by `lag` samples, from `start` samples into the frame just
    /// cancelled (``EchoShiftFollower/moveStart``): speex's filter is given its last blocks and
    /// the frame again as they are on the moved alignment, so that its reference history is the
    /// moved reference's, without a jump in it (left with one, the filter's later blocks model
    /// the old alignment, and the errors they make while the history passes through undo the
    /// taps: 10–30 dB for 150 ms after the move), and every block it is given fits its taps.
    ///
    /// A path that lengthened: the reference `lag` earlier, and the microphone as it would have
    /// been had the path always been the new one (before the move, what it heard `lag`
    /// earlier). Where the frame's second try leaves less, its output is taken. Above 16 kHz
    /// both are taken afresh from the wide signals `wide` samples earlier: a move between band
    /// samples (20 at 48 kHz, 6⅔ in the band), replayed by whole ones, left the filter a third
    /// of a sample off the path it then cancelled, which passes 7 kHz nearly whole and 1 kHz
    /// 18 dB down, and a filter long converged took seconds to re-learn it (9–18 dB in the
    /// second after such a move 13 s into a call, 75 dB after a move of 18 or 21).
    ///
    /// A path that shortened: the far end's samples from the move to `lag` after it were never
    /// heard. On the reference's own timeline, the microphone before the move is as it was, the
    /// skipped samples' echo the follower's model of it, and after them the microphone `lag`
    /// later; the history then ends `lag` into the reference's next frame (the ``referenceTail``
    /// given with this one). Its last frame is not this frame's output.
    private func replay(_ echo: OpaquePointer, movedBy lag: Int, wide: Int, from start: Int) {
        let n = bandFrameLength
        // In the recent history's indices: the move.
        let moved = recentLength - n + start
        if lag > 0 {
            guard lag <= follower.latest else { return }
            let fresh = splitRef != nil && wide <= lag * (sampleRate / bandRate) + wideMargin
            for f in 0...replayFrames {
                let at = recentLength - (replayFrames + 1 - f) * n
                if fresh {
                    for i in 0..<n {
                        replayNear[i] = at + i >= moved ? recentNear[at + i] : bandSample(recentWideNear, at: at + i, movedBy: -wide)
                        replayReference[i] = bandSample(recentWideReference, at: at + i, movedBy: -wide)
                    }
                    speex_echo_cancellation(echo, replayNear, replayReference, replayOut)
                } else {
                    for i in 0..<n { replayNear[i] = at + i >= moved ? recentNear[at + i] : recentNear[at + i - lag] }
                    speex_echo_cancellation(echo, replayNear, recentReference + at - lag, replayOut)
                }
            }
            EchoShiftFollower.keepQuieter(outShorts, or: replayOut, count: n, block: max(1, bandRate / 1000))
        } else {
            let skip = -lag
            guard skip <= bandTail else { return }
            for f in 0...replayFrames {
                // On the reference's timeline, the last frame ending `skip` past this one.
                let at = recentLength + skip - (replayFrames + 1 - f) * n
                for i in 0..<n {
                    let k = at + i
                    replayNear[i] =
                        k < moved ? recentNear[k]
                        : k >= moved + skip ? recentNear[k - skip]
                        : Self.short(follower.modelEcho(at: k - (recentLength - n)))
                    replayReference[i] = k < recentLength ? recentReference[k] : farShorts[n + k - recentLength]
                }
                speex_echo_cancellation(echo, replayNear, replayReference, replayOut)
            }
        }
    }

    /// Above 16 kHz: the band's sample at `index` of the recent history, taken afresh from the
    /// wide signal kept beside it (``recentWideNear``, ``recentWideReference``) moved `shift`
    /// wide samples (earlier: negative), as ``BandSplit/decimate(_:count:into:)`` took it.
    private func bandSample(_ wide: UnsafeMutablePointer<Float>, at index: Int, movedBy shift: Int) -> Int16 {
        guard let splitRef else { return 0 }
        let from = wideMargin + index * (sampleRate / bandRate) + shift
        var sample: Float = 0
        splitRef._withUnsafeGuaranteedRef { split in
            guard from >= 0, from + split.lead + split.factor <= recentWideLength else { return }
            split.decimate(UnsafePointer(wide + from), count: 1, into: &sample)
        }
        return Self.short(sample)
    }

    /// The longest ``referenceDelay``: ``maximumEchoDelay``.
    package static func longestReferenceDelay(_ sampleRate: Int) -> Int { Int(Double(sampleRate) * maximumEchoDelay) }

    /// The caller's far end, lined up with the microphone, moved by `frames` (later audio:
    /// positive): the echo's delay behind it changes by as much, here and in the estimate, so
    /// the reference the canceller sees stays where it was (a caller reading its far end
    /// ``referenceDelay`` before the lined-up frame reads the same samples as before). A
    /// real-time thread may call it.
    package func moveReference(by frames: Int) {
        if frames != 0 && estimator != nil { note(.lining, frames) }
        shiftEcho(by: frames)
    }

    /// The echo comes `frames` later behind the reference than it did (the caller's lining-up
    /// moved, or the path itself): the reference is read as much earlier, and the delay estimate
    /// and the delay being watched move with it.
    private func shiftEcho(by frames: Int) {
        guard estimator != nil else { return }
        referenceDelay = min(max(referenceDelay + frames, 0), Self.longestReferenceDelay(sampleRate))
        candidate += frames
        estimatorRef?._withUnsafeGuaranteedRef { $0.shift(by: frames) }
    }

    private static func short(_ sample: Float) -> Int16 { Int16(max(-32768, min(32767, (sample * 32768).rounded()))) }

    private static func shorts(_ samples: UnsafePointer<Float>, into out: UnsafeMutablePointer<Int16>, count: Int) {
        for i in 0..<count { out[i] = Int16(max(-32768, min(32767, (samples[i] * 32768).rounded()))) }
    }
}
