import CSpeexDSP
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
/// is followed by an ``EchoShiftFollower``, the filter's taps kept.
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
    /// speex only: the last frames the canceller was given (microphone and reference, newest
    /// last; ``replayFrames`` and the follower's longest move), replayed after a move
    /// (``replay(movedBy:)``), and where a replay's output goes.
    private let recentNear: UnsafeMutablePointer<Int16>
    private let recentReference: UnsafeMutablePointer<Int16>
    private let recentLength: Int
    private let replayFrames: Int
    private let replayOut: UnsafeMutablePointer<Int16>

    /// A processor at `sampleRate`: 8, 16, 32 or 48 kHz, the rates webrtc runs at (speex would
    /// take others; one list keeps the libraries interchangeable). Nil for any other rate, or
    /// when the library cannot make its state.
    package init?(library: Library, sampleRate: Int, stages: Stages = Stages()) {
        guard [8000, 16000, 32000, 48000].contains(sampleRate) else { return nil }
        self.library = library
        self.sampleRate = sampleRate
        frameLength = sampleRate / 100
        nearShorts = .allocate(capacity: frameLength)
        farShorts = .allocate(capacity: frameLength)
        outShorts = .allocate(capacity: frameLength)
        zeros = .allocate(capacity: frameLength)
        zeros.initialize(repeating: 0, count: frameLength)
        historyLength = Int(Double(sampleRate) * Self.maximumEchoDelay) + 2 * frameLength
        farHistory = .allocate(capacity: historyLength)
        farHistory.initialize(repeating: 0, count: historyLength)
        delayedFar = .allocate(capacity: frameLength)
        delayedFar.initialize(repeating: 0, count: frameLength)
        estimator = library == .speex && stages.echoCancellation ? EchoDelayEstimator(sampleRate: sampleRate, maximumDelay: Self.maximumEchoDelay) : nil
        estimatorRef = estimator.map { .passUnretained($0) }
        // speex's filter: whole frames (its impulse response is as long).
        let filterFrames = (Int(Double(sampleRate) * Self.echoTail) + frameLength - 1) / frameLength
        follower = EchoShiftFollower(sampleRate: sampleRate, frameLength: frameLength, filterLength: filterFrames * frameLength)
        // The filter's blocks and one more: its whole reference history.
        replayFrames = filterFrames + 1
        recentLength = (replayFrames + 1) * frameLength + follower.latest
        recentNear = .allocate(capacity: recentLength)
        recentNear.initialize(repeating: 0, count: recentLength)
        recentReference = .allocate(capacity: recentLength)
        recentReference.initialize(repeating: 0, count: recentLength)
        replayOut = .allocate(capacity: frameLength)
        replayOut.initialize(repeating: 0, count: frameLength)
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
            let tail = Int32(Double(sampleRate) * Self.echoTail)
            echo = stages.echoCancellation ? speex_echo_state_init(Int32(frameLength), tail) : nil
            preprocess = speex_preprocess_state_init(Int32(frameLength), Int32(sampleRate))
            guard let preprocess, echo != nil || !stages.echoCancellation else { return nil }
            var rate = Int32(sampleRate)
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
            var level = Self.speexAGCLevel(sampleRate: sampleRate)
            speex_preprocess_ctl(preprocess, SPEEX_PREPROCESS_SET_AGC_LEVEL, &level)
        }
    }

    deinit {
        if let webrtc { oa_webrtc_free(webrtc) }
        if let echo { speex_echo_state_destroy(echo) }
        if let preprocess { speex_preprocess_state_destroy(preprocess) }
        nearShorts.deallocate()
        farShorts.deallocate()
        outShorts.deallocate()
        zeros.deallocate()
        farHistory.deallocate()
        delayedFar.deallocate()
        recentNear.deallocate()
        recentReference.deallocate()
        replayOut.deallocate()
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
        var from = (historyWritten - n - referenceDelay) % historyLength
        if from < 0 { from += historyLength }
        for i in 0..<n {
            delayedFar[i] = farHistory[from]
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
        guard let found = estimatorRef?._withUnsafeGuaranteedRef({ e -> Int? in
            e.push(far: far ?? UnsafePointer(zeros), near: near, count: frameLength)
            return e.delay
        }) else { return }
        let wanted = max(0, found - Int(Double(sampleRate) * Self.delayMargin))
        // The echo is left where it is in the filter while it stays inside it, from 1 ms after
        // the reference's start to 20 ms in (a 50 ms filter): each move costs the filter some
        // re-convergence. (The 3 ms moves a long call made here were the test server's echo
        // path lengthening at once, 17–239 samples at a time; the unit's streams stay locked.)
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
        delayFound = true
        candidateFrames = 0
        // An echo that moved more than a few milliseconds took another way (a route change, a
        // device's latency): the filter's taps are the old way's, off by a fraction of a block
        // wherever the reference now lands, and unlearning them took speex 1.5 s longer than
        // learning afresh. It starts over; the suppressor, noise estimate and gain keep theirs.
        if abs(wanted - referenceDelay) > sampleRate / 200, let echo { speex_echo_state_reset(echo) }
        let delay = min(wanted, Self.longestReferenceDelay(sampleRate))
        // The reference jumps: what the follower learnt of the path is the old alignment's.
        if delay != referenceDelay { follower.reset() }
        referenceDelay = delay
    }

    /// Cancels the echo of `reference` (the far end as the canceller is to see it: for speex,
    /// ``referenceDelay`` samples before the frame lined up with `near`; nil: silence) in the
    /// microphone frame `near`, then suppresses noise and controls gain, in place.
    package func process(near: UnsafeMutablePointer<Float>, reference: UnsafePointer<Float>?) {
        let n = frameLength
        if let webrtc {
            _ = oa_webrtc_far(webrtc, reference ?? UnsafePointer(zeros))
            _ = oa_webrtc_near(webrtc, near, 0)
            return
        }
        guard let preprocess else { return }
        Self.shorts(near, into: nearShorts, count: n)
        if let echo {
            Self.shorts(reference ?? UnsafePointer(zeros), into: farShorts, count: n)
            speex_echo_cancellation(echo, nearShorts, farShorts, outShorts)
            // The echo path moved at once inside the filter (``EchoShiftFollower``): the filter's
            // blocks are replayed on the moved alignment, and the reference follows the path
            // from the next frame, so the filter's taps fit again. The follower's model of the
            // path is the filter's strongest taps, taken from a frame cancelled well.
            if followsEchoShifts && estimator != nil {
                recentNear.update(from: recentNear + n, count: recentLength - n)
                (recentNear + recentLength - n).update(from: nearShorts, count: n)
                recentReference.update(from: recentReference + n, count: recentLength - n)
                (recentReference + recentLength - n).update(from: farShorts, count: n)
                let moved = follower.observe(near: nearShorts, reference: farShorts, residual: outShorts, count: n)
                if follower.wantsModel {
                    speex_echo_ctl(echo, SPEEX_ECHO_GET_IMPULSE_RESPONSE, follower.modelBuffer)
                    follower.takeModel()
                }
                // A move the reference cannot make in full (it would pass 0 or the longest
                // delay) is left to the delay estimate.
                if moved != 0 && (0...Self.longestReferenceDelay(sampleRate)).contains(referenceDelay + moved) {
                    replay(echo, movedBy: moved)
                    movesFollowed += 1
                    shiftEcho(by: moved)
                }
            }
            speex_preprocess_run(preprocess, outShorts)
            for i in 0..<n { near[i] = Float(outShorts[i]) / 32768 }
        } else {
            speex_preprocess_run(preprocess, nearShorts)
            for i in 0..<n { near[i] = Float(nearShorts[i]) / 32768 }
        }
    }

    /// After the echo path lengthened by `lag` samples in the frame just cancelled: speex's
    /// filter is given its last blocks again as they were before the move, ending `lag` early,
    /// then the frame with the reference `lag` earlier. Its reference history is then the moved
    /// reference's, without a jump in it (left with one, the filter's later blocks model the
    /// old alignment, and the errors they make while the history passes through undo the taps:
    /// 10–30 dB for 150 ms after the move). Where the frame's second try leaves less, its output
    /// is taken. A path that shortens would need the reference's future: it is moved plainly.
    private func replay(_ echo: OpaquePointer, movedBy lag: Int) {
        let n = frameLength
        guard lag > 0, lag <= follower.latest else { return }
        let end = recentLength - n - lag
        for f in 0..<replayFrames {
            let start = end - (replayFrames - f) * n
            speex_echo_cancellation(echo, recentNear + start, recentReference + start, replayOut)
        }
        // The frame again, its reference from `lag` earlier.
        farShorts.update(from: recentReference + end, count: n)
        speex_echo_cancellation(echo, nearShorts, farShorts, replayOut)
        EchoShiftFollower.keepQuieter(outShorts, or: replayOut, count: n, block: max(1, sampleRate / 1000))
    }

    /// The longest ``referenceDelay``: ``maximumEchoDelay``.
    package static func longestReferenceDelay(_ sampleRate: Int) -> Int { Int(Double(sampleRate) * maximumEchoDelay) }

    /// The caller's far end, lined up with the microphone, moved by `frames` (later audio:
    /// positive): the echo's delay behind it changes by as much, here and in the estimate, so
    /// the reference the canceller sees stays where it was (a caller reading its far end
    /// ``referenceDelay`` before the lined-up frame reads the same samples as before). A
    /// real-time thread may call it.
    package func moveReference(by frames: Int) { shiftEcho(by: frames) }

    /// The echo comes `frames` later behind the reference than it did (the caller's lining-up
    /// moved, or the path itself): the reference is read as much earlier, and the delay estimate
    /// and the delay being watched move with it.
    private func shiftEcho(by frames: Int) {
        guard estimator != nil else { return }
        referenceDelay = min(max(referenceDelay + frames, 0), Self.longestReferenceDelay(sampleRate))
        candidate += frames
        estimatorRef?._withUnsafeGuaranteedRef { $0.shift(by: frames) }
    }

    private static func shorts(_ samples: UnsafePointer<Float>, into out: UnsafeMutablePointer<Int16>, count: Int) {
        for i in 0..<count { out[i] = Int16(max(-32768, min(32767, (samples[i] * 32768).rounded()))) }
    }
}
