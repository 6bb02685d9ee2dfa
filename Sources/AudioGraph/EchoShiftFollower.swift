/// Finds where an echo path that was cancelled well moved to at once, so that the canceller's
/// reference can be moved by as much and its filter's taps, which still describe the path, go
/// on cancelling it.
///
/// A path lengthens or shortens at once now and then: a loopback or a Bluetooth link whose
/// buffer ran dry, a USB device resynchronising (the test server's `module-loopback` grows by
/// 17–239 samples at once, up to three times a minute). speex's filter then models an echo that
/// is no longer where it was; left alone it re-learns it in 2–3 s, the echo only 2–10 dB down
/// meanwhile.
///
/// The filter, taken while it cancels well, is a model of the old path: its strongest taps
/// (within 20 dB of the peak, up to 64), or taps around its peak fitted by least squares where
/// those explain the path far better (``takeModel()``), make an echo estimate from the
/// reference. After the path
/// moved by `d` samples, the microphone's echo is that estimate `d` samples later, whatever the
/// path's shape (reflections and all). (The canceller's own estimate, the microphone less its
/// output, is no such model: speex's filter already moves in the frame that leaks, and at the
/// move the right lag explained only a third of it.) So when a frame of a filter that
/// cancelled well (≥ 20 dB in the last second) leaks (< 10 dB), the model's estimate is tried at
/// lags from ``earliest`` before to ``latest`` after, the shortest first: the first that leaves
/// at least 10 dB less of the microphone than lag 0 does, at least 10 dB less than the
/// microphone, and at most 3 dB more than the best lag, taken down to the bottom of its dip, is
/// the move. Double talk leaks too, but no lag of the estimate explains a near voice: nothing
/// moves. A voice's pitch period further on explains a voiced echo about as well as the move
/// does (the paths measured moved by less than a pitch period), hence the shortest; a tone's
/// period explains the tone but not the rest of the sound, hence the best's 3 dB. Where another
/// lag a millisecond or more away explains the frame within 3 dB too (a pitch period either side
/// of the move), nothing moves in that frame: the next leaking frame has another pitch and the
/// same move. Nor where the move began in the last quarter of the frame: the next frame is
/// moved whole. A lengthening is often a gap (a loopback's buffer ran dry: silence, then the
/// sound where it stopped), which no lag explains: a lag is also tried with a silent stretch as
/// long as itself between the unmoved and the moved parts (``gapped(lag:moved:)``).
///
/// In the frame where the move is found, each millisecond of the canceller's output is replaced
/// by the microphone less the moved estimate where that is quieter. The caller moves the
/// reference by the move (``VoiceProcessor`` replays the filter's blocks on the moved alignment
/// after a path that grew; after one that shrank it would need the reference's future, and the
/// first frames after the move leak, 30–45 dB down).
///
/// One caller thread; memory is made in `init`, ``observe(near:reference:residual:count:)``
/// allocates nothing.
package final class EchoShiftFollower: @unchecked Sendable {
    package let sampleRate: Int
    package let frameLength: Int
    /// The lags tried: the echo up to 6 ms earlier and 10 ms later than the estimate has it (a
    /// larger move takes the echo out of the filter: the delay estimate finds it then).
    /// pipewire-pulse's streams jump back by a graph cycle (256 frames, 5.3 ms) now and then: a
    /// search that stopped at 2.5 ms earlier would take such a jump for a pitch period's alias
    /// the other way (+140 to +320 samples), which undoes the canceller for the rest of the call.
    package let earliest: Int
    package let latest: Int
    /// The step through the frame when trying a lag: 1 sample at 16 kHz, 3 at 48 kHz (a sum of
    /// fewer terms at every lag).
    private let step: Int
    /// The filter's length, and the model as last taken (``wantsModel``, ``takeModel()``): the
    /// old path, whose echo estimate is made from the reference when a frame leaks.
    package let filterLength: Int
    /// Where ``takeModel()`` wants the filter's impulse response (speex's 32767 per unit).
    package let modelBuffer: UnsafeMutablePointer<Int32>
    /// Set when a frame cancelled well should have its filter taken for the model.
    package private(set) var wantsModel = false
    /// Where the last move found began, in samples from its frame's start (negative: in the
    /// frames before, down to ``latest`` back): from there on the moved estimate fits the
    /// microphone better (the split that leaves least of it, one side unmoved, the other moved).
    /// A move rarely falls on a frame's start (a band split's filter shifts even those), and a
    /// replay that took the whole frame as moved, or the frames before as not, fed the
    /// canceller a frame that did not fit its taps: 17–22 dB in the second after a move 1 ms into
    /// a frame, 75 dB where it fell on the frame's start (`VoiceProcessorTests`).
    package private(set) var moveStart = 0
    /// The last move's fraction of a sample beyond the whole samples returned (−0.5 to 0.5:
    /// the bottom of a parabola through the lags either side). A caller whose reference runs at
    /// a higher rate than the follower's (a ``BandSplit``'s input) moves it by the fraction too:
    /// at 48 kHz through a 16 kHz band, a move a third of a band sample off left the echo 44 dB
    /// down in the second after it, where a whole one left it 75.
    package private(set) var moveFraction: Float = 0
    private let modelLags: UnsafeMutablePointer<Int>
    private let modelGains: UnsafeMutablePointer<Float>
    private var modelTaps = 0
    /// What each lag leaves of the frame, from ``earliest`` before to ``latest`` after.
    private let leftByLag: UnsafeMutablePointer<Float>
    /// The same at each dip's bottom between whole lags (``search()``).
    private let fittedByLag: UnsafeMutablePointer<Float>
    /// The fraction of a sample past each lag that left least (``subdivisions`` > 1).
    private let fractionByLag: UnsafeMutablePointer<Float>
    /// The wide rate's samples in one of ours (a band's follower: 3 at 48 kHz, 2 at 32; else 1):
    /// a move is looked for to a wide sample (``search()``).
    package let subdivisions: Int
    /// The caller's reference frame delayed by a wide sample and more (row `k − 1`: by `k` wide
    /// samples, as the band split takes it from the wide reference), filled before each
    /// ``observe(near:reference:residual:count:)`` when ``subdivisions`` > 1.
    /// Each row holds the frame's ``frameLength`` samples, then ``tail`` more.
    package let phaseFrame: UnsafeMutablePointer<Float>
    /// Those frames' history, as ``reference``'s (row `k − 1` of ``referenceLength`` and ``tail``).
    private let phaseReference: UnsafeMutablePointer<Float>
    /// For each fraction `k / subdivisions` (k from 1), ``historyLength`` and ``tail`` samples:
    /// the model's estimate from the reference delayed by `k` wide samples, made once per search where a dip
    /// asks (``estimatePhases()``), so that trying a lag between whole ones costs what a whole
    /// one does. (Interpolated between band samples afresh at each try, a debug build's search
    /// took 25–60 ms of a 10 ms frame in double talk, three frames running, and the unit's
    /// recording jumped by up to 360 samples; an interpolation is no exact measure near the
    /// band's edge either.)
    private let fractional: UnsafeMutablePointer<Float>
    private var phasesEstimated = false
    private static let mostTaps = 64
    /// The taps of a model fitted to the frames cancelled well (``fitModel(around:)``), and its
    /// working memory: the normal equations' matrix, then their right side and solution.
    private static let fittedTaps = 16
    private let leastSquares: UnsafeMutablePointer<Double>
    /// The fit's sums over the frames cancelled well since its taps were placed, each frame
    /// weighing 0.95 of the next: the reference's autocorrelation at lags 0 to
    /// ``fittedTaps`` − 1 (over many frames nearly the normal equations' matrix, which is
    /// taken as Toeplitz), then
    /// its correlation with the microphone at the taps' lags from ``fitFirst`` (−1: not placed).
    /// (Fitted to the last 20 ms alone, the taps matched that sound to 10⁻⁶ and left 17 % of the
    /// next word's echo.)
    private let fitSums: UnsafeMutablePointer<Double>
    private var fitFirst = -1
    private var fitFrames = 0
    private var goodFrames = 0
    /// The reference as the canceller was given it, the newest sample last (the frame, the
    /// longest lag and the filter's length), then the frame's ``tail``.
    private let reference: UnsafeMutablePointer<Float>
    private let referenceLength: Int
    /// The reference's samples after its frame that the caller gives with each (its future on
    /// the canceller's timeline, which the caller has: it reads the reference a delay back),
    /// up to ``earliest``. A path that shortened by `d` samples puts the echo of the frame's last
    /// `d` samples of reference in the microphone already; without them a shortening's lag
    /// explained only the frame's first part, and a voice's pitch period the other way explained
    /// it all: pipewire-pulse's jump back by a graph cycle (256 samples at 48 kHz) was taken for
    /// a lengthening of 179 (the echo back, 2 dB down, until the delay estimate started the
    /// canceller over a second later).
    package let tail: Int
    /// A frame and its ``tail``: what the caller gives as the reference, and each row of
    /// ``phaseFrame``.
    package let frameAndTail: Int
    /// The estimate's length (``historyLength`` and ``tail``), and a reference history's
    /// (``referenceLength`` and ``tail``).
    private let estimatedLength: Int
    private let referenceRow: Int
    /// The microphone and the model's echo estimate for it: the frame and the ``latest`` samples
    /// before (``historyLength``); the estimate goes on for the ``tail``. (The microphone before
    /// the frame is kept: without it a move's start found in the frame before,
    /// ``changePoint(movedBy:)``, would be a guess.)
    private let microphone: UnsafeMutablePointer<Float>
    private let estimate: UnsafeMutablePointer<Float>
    private let historyLength: Int
    /// The move's frame as ``mend(_:movedBy:)`` offers it.
    private let mended: UnsafeMutablePointer<Int16>
    /// Frames since one was cancelled well (≥ 20 dB); whether one was, since the last move.
    private var framesSinceGood = Int.max / 2
    private var armed = false
    /// Frames that leaked since the last cancelled well: the first three are searched, then
    /// every tenth (a long double talk leaks all along; the search is the follower's cost).
    private var leakingFrames = 0
    /// Frames left before the history holds only what came after a move or a reset.
    private var settling = 0

    /// ``earliest`` at `sampleRate`: 6 ms.
    package static func earliest(sampleRate: Int) -> Int { sampleRate * 6 / 1000 }

    /// The model's echo of the reference as it was given, at sample `index` of the last frame
    /// observed (from −``latest``; as far as the last search made it, 0 elsewhere): what the
    /// microphone heard there on the old path, for a caller replaying a shortened path's
    /// history (``VoiceProcessor``).
    package func modelEcho(at index: Int) -> Float {
        let t = index + historyLength - frameLength
        return t >= 0 && t < historyLength ? estimate[t] : 0
    }

    /// `tail`: the reference's samples after each frame the caller gives (``tail``).
    package init(sampleRate: Int, frameLength: Int, filterLength: Int, subdivisions: Int = 1, tail: Int = 0) {
        self.sampleRate = sampleRate
        self.subdivisions = max(1, subdivisions)
        self.frameLength = frameLength
        self.filterLength = filterLength
        modelBuffer = .allocate(capacity: filterLength)
        modelBuffer.initialize(repeating: 0, count: filterLength)
        modelLags = .allocate(capacity: Self.mostTaps)
        modelLags.initialize(repeating: 0, count: Self.mostTaps)
        modelGains = .allocate(capacity: Self.mostTaps)
        modelGains.initialize(repeating: 0, count: Self.mostTaps)
        step = max(1, sampleRate / 16000)
        earliest = Self.earliest(sampleRate: sampleRate)
        latest = sampleRate / 100
        historyLength = frameLength + latest
        self.tail = min(max(tail, 0), earliest)
        let estimated = historyLength + self.tail
        estimatedLength = estimated
        microphone = .allocate(capacity: historyLength)
        microphone.initialize(repeating: 0, count: historyLength)
        estimate = .allocate(capacity: estimated)
        estimate.initialize(repeating: 0, count: estimated)
        fractional = .allocate(capacity: max(1, (self.subdivisions - 1) * estimated))
        fractional.initialize(repeating: 0, count: max(1, (self.subdivisions - 1) * estimated))
        leftByLag = .allocate(capacity: earliest + latest + 1)
        leftByLag.initialize(repeating: 1, count: earliest + latest + 1)
        fittedByLag = .allocate(capacity: earliest + latest + 1)
        fittedByLag.initialize(repeating: 1, count: earliest + latest + 1)
        fractionByLag = .allocate(capacity: earliest + latest + 1)
        fractionByLag.initialize(repeating: 0, count: earliest + latest + 1)
        referenceLength = historyLength + filterLength
        referenceRow = referenceLength + self.tail
        frameAndTail = frameLength + self.tail
        phaseFrame = .allocate(capacity: max(1, (self.subdivisions - 1) * frameAndTail))
        phaseFrame.initialize(repeating: 0, count: max(1, (self.subdivisions - 1) * frameAndTail))
        phaseReference = .allocate(capacity: max(1, (self.subdivisions - 1) * referenceRow))
        phaseReference.initialize(repeating: 0, count: max(1, (self.subdivisions - 1) * referenceRow))
        leastSquares = .allocate(capacity: Self.fittedTaps * (Self.fittedTaps + 1))
        leastSquares.initialize(repeating: 0, count: Self.fittedTaps * (Self.fittedTaps + 1))
        fitSums = .allocate(capacity: 2 * Self.fittedTaps)
        fitSums.initialize(repeating: 0, count: 2 * Self.fittedTaps)
        mended = .allocate(capacity: frameLength)
        mended.initialize(repeating: 0, count: frameLength)
        reference = .allocate(capacity: referenceRow)
        reference.initialize(repeating: 0, count: referenceRow)
    }

    deinit {
        modelBuffer.deallocate()
        leftByLag.deallocate()
        fittedByLag.deallocate()
        fractionByLag.deallocate()
        fractional.deallocate()
        phaseFrame.deallocate()
        phaseReference.deallocate()
        leastSquares.deallocate()
        fitSums.deallocate()
        modelLags.deallocate()
        modelGains.deallocate()
        microphone.deallocate()
        estimate.deallocate()
        reference.deallocate()
        mended.deallocate()
    }

    /// ``modelBuffer`` holds the filter's impulse response (speex's
    /// `SPEEX_ECHO_GET_IMPULSE_RESPONSE`) after the frame just observed, which it cancelled well.
    /// The model from now on is the better of two, if it explains that frame (leaves at most a
    /// tenth of it): the filter's strongest taps (within 20 dB of the peak, at most 64), or
    /// ``fittedTaps`` taps around the peak fitted by least squares to the frames cancelled well
    /// (``fitModel(around:)``), where those leave a quarter or less of what the strongest taps
    /// leave. A path they cannot describe (a room's dense reverberation) is not followed.
    ///
    /// The strongest taps alone describe a delay between samples badly: the sinc's tail is
    /// below 20 dB, and speex's filter holds noise near the band's top, where the reference has
    /// nothing, that is no part of the path. A recorded call's loopback (a whole delay at 48 kHz,
    /// a third of a sample off at 16) took 7 taps that left 8 % of the frame, and its move of 20
    /// samples left 9 % at the right lag and less at a wrong one: found late and a sample off,
    /// 11 dB in the second after it (`VoiceProcessorTests`: 23 dB; fitted, 104). Where the
    /// strongest taps lie apart (a reflection beyond the fitted span, the follower test's path),
    /// they stay the model.
    package func takeModel() {
        wantsModel = false
        modelTaps = 0
        // In Int64: a tap's magnitude times 10 (and Int32.min's) would not fit.
        var peak: Int64 = 0, peakAt = 0
        for i in 0..<filterLength where abs(Int64(modelBuffer[i])) > peak {
            peak = abs(Int64(modelBuffer[i]))
            peakAt = i
        }
        guard peak > 0 else { return }
        let fittedFirst = fitModel(around: peakAt)
        var fittedLeft = Float.infinity
        if let first = fittedFirst {
            useFittedModel(from: first)
            fittedLeft = unexplained(lag: 0)
        }
        // The strongest: the threshold raised by 1 dB at a time until at most 64 pass.
        modelTaps = 0
        var threshold = Double(peak) / 10
        while true {
            var passing = 0
            for i in 0..<filterLength where Double(abs(Int64(modelBuffer[i]))) >= threshold { passing += 1 }
            if passing <= Self.mostTaps { break }
            threshold *= 1.122
        }
        // speex's taps come scaled by 32767 and by its transform's length, two frames (the
        // test path's −6 dB tap read 0.49 so).
        let scale = 1 / (32767 * Float(2 * frameLength))
        for i in 0..<filterLength where Double(abs(Int64(modelBuffer[i]))) >= threshold {
            modelLags[modelTaps] = i
            modelGains[modelTaps] = Float(modelBuffer[i]) * scale
            modelTaps += 1
        }
        modelEstimate()
        var left = unexplained(lag: 0)
        if let first = fittedFirst, fittedLeft * 4 <= left {
            useFittedModel(from: first)
            left = fittedLeft
        }
        if left > 0.1 { modelTaps = 0 }
    }

    /// Adds the frame just observed to ``fitSums``: each lag's products over the frame, as the
    /// microphone's correlation is summed. (The autocorrelation of the taps' window alone, which
    /// keeps the matrix positive definite whatever the sound, sums 15 more products at lag 0
    /// than the correlation does; with it, `VoiceProcessorTests`' moved delay read 23 dB in the
    /// second after, 104 with these.) A matrix
    /// that is not positive definite fails the factoring, and taps spoilt by a tiny pivot leave
    /// more than the strongest taps: either way the strongest taps stay the model.
    private func accumulateFit() {
        let m = Self.fittedTaps, base = reference + filterLength - fitFirst
        for k in 0..<(2 * m) { fitSums[k] *= 0.95 }
        for k in 0..<m {
            var r = 0.0, c = 0.0
            for t in (historyLength - frameLength)..<historyLength {
                r += Double(base[t]) * Double(base[t - k])
                c += Double(base[t - k]) * Double(microphone[t])
            }
            fitSums[k] += r
            fitSums[m + k] += c
        }
        fitFrames += 1
    }

    /// Fits ``fittedTaps`` consecutive taps, centred on `centre`, to the frames cancelled well
    /// since they were placed there (``fitSums``): those that make the estimate nearest the
    /// microphone (least squares, by Cholesky's factoring, a ten-thousandth of the diagonal added
    /// against a reference short of some frequencies). Returns the first tap's lag, the solution
    /// left in ``leastSquares`` after the matrix; nil until ten frames are summed (a peak that
    /// left the taps' middle half starts the sums over), or where the equations are singular.
    private func fitModel(around centre: Int) -> Int? {
        let m = Self.fittedTaps
        guard filterLength >= m else { return nil }
        var first = max(0, min(filterLength - m, centre - m / 2 + 1))
        // A peak that moves between neighbouring taps (a delay half a sample off) keeps the taps
        // where they are while it stays in their middle half.
        if fitFirst >= 0 && centre >= fitFirst + m / 4 && centre < fitFirst + m - m / 4 { first = fitFirst }
        guard first == fitFirst else {
            fitFirst = first
            fitFrames = 0
            fitSums.update(repeating: 0, count: 2 * m)
            return nil
        }
        guard fitFrames >= 10 else { return nil }
        let matrix = leastSquares, solution = leastSquares + m * m
        for j in 0..<m {
            for l in 0..<m { matrix[j * m + l] = fitSums[abs(j - l)] }
            solution[j] = fitSums[m + j]
        }
        var trace = 0.0
        for j in 0..<m { trace += matrix[j * m + j] }
        guard trace > 0 else { return nil }
        for j in 0..<m { matrix[j * m + j] += 1e-4 * trace / Double(m) }
        // The lower triangle becomes L, with L Lᵀ the matrix.
        for j in 0..<m {
            var d = matrix[j * m + j]
            for k in 0..<j { d -= matrix[j * m + k] * matrix[j * m + k] }
            guard d > 0 else { return nil }
            let root = d.squareRoot()
            matrix[j * m + j] = root
            for i in (j + 1)..<m {
                var sum = matrix[i * m + j]
                for k in 0..<j { sum -= matrix[i * m + k] * matrix[j * m + k] }
                matrix[i * m + j] = sum / root
            }
        }
        // L y = b, then Lᵀ x = y.
        for i in 0..<m {
            var sum = solution[i]
            for k in 0..<i { sum -= matrix[i * m + k] * solution[k] }
            solution[i] = sum / matrix[i * m + i]
        }
        for back in 0..<m {
            let i = m - 1 - back
            var sum = solution[i]
            for k in (i + 1)..<m { sum -= matrix[k * m + i] * solution[k] }
            solution[i] = sum / matrix[i * m + i]
        }
        return first
    }

    /// Makes the taps ``fitModel(around:)`` found, from `first`, the model, and its estimate.
    private func useFittedModel(from first: Int) {
        let m = Self.fittedTaps, solution = leastSquares + m * m
        for j in 0..<m {
            modelLags[j] = first + j
            modelGains[j] = Float(solution[j])
        }
        modelTaps = m
        modelEstimate()
    }

    /// The filter starts over, or its reference jumped (the delay estimate moved it): what was
    /// learnt of the path is gone, and the history holds the old alignment.
    package func reset() {
        armed = false
        modelTaps = 0
        goodFrames = 0
        wantsModel = false
        framesSinceGood = Int.max / 2
        fitFirst = -1
        // Until the reference history (and the caller's replay of the filter's blocks, as long
        // again as the longest lag) holds only the new alignment.
        settling = (referenceLength + latest + frameLength - 1) / frameLength
    }

    /// Takes a frame: the microphone before cancellation, the reference it was cancelled with
    /// (followed by its ``tail``: `count` and ``tail`` samples) and the canceller's output
    /// (16-bit, as speex takes them; mended where a move is found: each millisecond replaced by
    /// the microphone less the moved estimate where that is quieter).
    /// Returns how many samples later the echo now comes than the filter expects (negative:
    /// earlier; 0: where it was, or not known); the caller moves the reference by as much from
    /// the next frame.
    package func observe(
        near: UnsafePointer<Int16>, reference given: UnsafePointer<Int16>, residual: UnsafeMutablePointer<Int16>, count n: Int
    ) -> Int {
        precondition(n == frameLength, "EchoShiftFollower takes a frame at a time")
        reference.update(from: reference + n, count: referenceLength - n)
        let frameReference = reference + referenceLength - n
        for i in 0..<frameAndTail { frameReference[i] = Float(given[i]) / 32768 }
        for k in 1..<subdivisions {
            let history = phaseReference + (k - 1) * referenceRow
            history.update(from: history + n, count: referenceLength - n)
            (history + referenceLength - n).update(from: phaseFrame + (k - 1) * frameAndTail, count: frameAndTail)
        }
        var nearEnergy: Float = 0, outEnergy: Float = 0
        microphone.update(from: microphone + n, count: historyLength - n)
        let frameMic = microphone + historyLength - n
        for i in 0..<n {
            let m = Float(near[i]) / 32768, r = Float(residual[i]) / 32768
            frameMic[i] = m
            nearEnergy += m * m
            outEnergy += r * r
        }
        framesSinceGood = min(framesSinceGood + 1, Int.max / 2)
        if settling > 0 {
            settling -= 1
            return 0
        }
        // A frame with something in it (above −50 dBFS).
        let active = nearEnergy > Float(n) * 1e-5
        if active && outEnergy * 100 <= nearEnergy {
            framesSinceGood = 0
            leakingFrames = 0
            armed = true
            if goodFrames % 10 == 0 { wantsModel = true }
            goodFrames += 1
            if fitFirst >= 0 { accumulateFit() }
        }
        guard armed, modelTaps > 0, framesSinceGood <= 100, active, outEnergy * 10 > nearEnergy else { return 0 }
        leakingFrames += 1
        guard leakingFrames <= 3 || leakingFrames % 10 == 0 else { return 0 }
        // No lag explains nine tenths of the frame unless the estimate holds nearly half its
        // energy (by the triangle inequality: 0.47): a near voice louder than the echo.
        modelEstimate(from: historyLength - n, to: historyLength)
        var estimateEnergy: Float = 0
        for i in (historyLength - n)..<historyLength { estimateEnergy += estimate[i] * estimate[i] }
        guard estimateEnergy >= 0.4 * nearEnergy else { return 0 }
        modelEstimate(from: 0, to: historyLength - n)
        modelEstimate(from: historyLength, to: estimatedLength)
        let move = search()
        guard move != 0 else { return 0 }
        moveFraction = 0
        if subdivisions > 1 {
            moveFraction = fractionByLag[move + earliest]
        } else if move - 1 >= -earliest && move + 1 <= latest {
            let before = leftByLag[move - 1 + earliest], at = leftByLag[move + earliest], after = leftByLag[move + 1 + earliest]
            let curve = before - 2 * at + after
            if curve > 0 { moveFraction = max(-0.5, min(0.5, 0.5 * (before - after) / curve)) }
        }
        moveStart = changePoint(movedBy: move) - (historyLength - n)
        // Moved for less than a quarter of the frame: too few samples to tell the move from a
        // pitch period's alias (with a model that explains the path whole, a recorded call's move
        // of +45 samples 130 into a frame was taken for −28⅓). The next frame is moved whole.
        guard n - moveStart >= n / 4 else {
            // Searched again in the next frame, whichever leaking frame this one was.
            leakingFrames = min(leakingFrames, 2)
            return 0
        }
        mend(residual, movedBy: move)
        // Earned again by a frame cancelled well: a move that did not help is not followed by
        // another.
        reset()
        return move
    }

    /// The model's echo of the reference for the frame and the ``latest`` samples before it
    /// (``estimate``'s samples `first` to `end`).
    private func modelEstimate(from first: Int = 0, to end: Int? = nil) {
        let base = reference + filterLength
        for t in first..<(end ?? historyLength) {
            var y: Float = 0
            for k in 0..<modelTaps { y += modelGains[k] * base[t - modelLags[k]] }
            estimate[t] = y
        }
    }

    /// The fraction of the frame's microphone the estimate leaves, unmoved up to a point and
    /// `lag` samples later from there on (for a lengthening, also with a gap between:
    /// ``gapped(lag:moved:)``), at the point that leaves least (1: explains nothing).
    /// A move seldom falls on a frame's start: taken over the whole frame, the frame it fell in
    /// was left unexplained, the canceller's filter adapted to it with the reference off, and
    /// the move was found a frame late with the taps spoilt (17–22 dB in the second after a
    /// move 1 ms into a frame, 75 dB where it fell on the start: `VoiceProcessorTests`).
    /// `fraction`: the lag `lag + fraction / subdivisions` (1 up to ``subdivisions``), the
    /// estimate from that phase's reference (``estimatePhases()``).
    private func unexplained(lag: Int, fraction: Int = 0) -> Float {
        let n = frameLength
        let start = historyLength - n
        // The estimate's newest sample (the tail's) bounds a negative lag's end: after it, the
        // moved estimate explains nothing.
        let end = historyLength - max(0, -lag - tail)
        let moved = fraction > 0 ? fractional + (fraction - 1) * estimatedLength : estimate
        var movedLeft: Float = 0, energy: Float = 0
        var t = start
        while t < historyLength {
            let m = microphone[t], d = t < end ? m - moved[t - lag] : m
            movedLeft += d * d
            energy += m * m
            t += step
        }
        // Split at the frame's start: all of it moved; each step on moves a sample back.
        var left = movedLeft, least = movedLeft
        t = start
        while t < historyLength {
            let m = microphone[t], d = t < end ? m - moved[t - lag] : m, u = m - estimate[t]
            left += u * u - d * d
            least = min(least, left)
            t += step
        }
        if lag > 0 && step == 1 { least = min(least, gapped(lag: lag, moved: moved).left) }
        return energy > 0 ? least / energy : 1
    }

    /// What a lengthening by `lag` that is a gap leaves of the frame at the split that leaves
    /// least: the estimate unmoved up to a point, silence for `lag` samples (what the path's
    /// buffer left when it ran dry), then the estimate moved (`moved`, `lag` later), at least a
    /// quarter of the frame of it. Returns the frame's sum of squares there (infinity where no
    /// split fits) and the sample the moved part begins at, after the silence.
    private func gapped(lag: Int, moved: UnsafeMutablePointer<Float>) -> (left: Float, resumesAt: Int) {
        let n = frameLength, start = historyLength - n, last = historyLength - n / 4 - lag
        guard last >= start else { return (.infinity, historyLength) }
        // At the split `s`: unmoved before it, silent from it for `lag`, moved after.
        var unmoved: Float = 0, silent: Float = 0, after: Float = 0
        for t in start..<(start + lag) { silent += microphone[t] * microphone[t] }
        for t in (start + lag)..<historyLength {
            let d = microphone[t] - moved[t - lag]
            after += d * d
        }
        var least = unmoved + silent + after, resumesAt = start + lag
        for split in start..<last {
            let u = microphone[split] - estimate[split], m = microphone[split], next = microphone[split + lag]
            let d = next - moved[split]
            unmoved += u * u
            silent += next * next - m * m
            after -= d * d
            if unmoved + silent + after < least {
                least = unmoved + silent + after
                resumesAt = split + 1 + lag
            }
        }
        return (least, resumesAt)
    }

    /// Fills ``fractional``: the model's estimate from each phase's reference history.
    private func estimatePhases() {
        phasesEstimated = true
        for k in 1..<subdivisions {
            let base = phaseReference + (k - 1) * referenceRow + filterLength
            let out = fractional + (k - 1) * estimatedLength
            for t in 0..<estimatedLength {
                var y: Float = 0
                for j in 0..<modelTaps { y += modelGains[j] * base[t - modelLags[j]] }
                out[t] = y
            }
        }
    }

    /// The move, when a lag explains the frame clearly better than lag 0; else 0.
    private func search() -> Int {
        for lag in -earliest...latest { leftByLag[lag + earliest] = unexplained(lag: lag) }
        // What a lag between whole samples would leave, at the bottom of each dip (a parabola
        // through it and its neighbours): a move a third of a sample off a whole one (a 16 kHz
        // band's, at 48 kHz) leaves a tenth at the nearest whole lag, and by whole lags alone is
        // found a frame or two late, the filter's taps spoilt meanwhile (16 dB in the second
        // after it). Above 16 kHz (``subdivisions``), the lags between whole ones at the wide
        // rate's samples are tried at each dip (a parabola's bottom is no measure of a sum of
        // squares a third of a sample off: by it a move of 20 samples at 48 kHz is found 100 ms
        // late, 9 dB in the second after it).
        let fitted = fittedByLag
        var best = Float.infinity
        phasesEstimated = false
        for lag in -earliest...latest {
            let i = lag + earliest, at = leftByLag[i]
            fitted[i] = at
            fractionByLag[i] = 0
            if lag > -earliest && lag < latest {
                let before = leftByLag[i - 1], after = leftByLag[i + 1], curve = before - 2 * at + after
                if at <= before && at <= after {
                    if subdivisions > 1 {
                        // Between this lag and each neighbour, at each wide sample.
                        if at < 0.5 && lag != 0 {
                            if !phasesEstimated { estimatePhases() }
                            for k in 1..<subdivisions {
                                let below = unexplained(lag: lag - 1, fraction: k), above = unexplained(lag: lag, fraction: k)
                                if below < fitted[i] {
                                    fitted[i] = below
                                    fractionByLag[i] = Float(k) / Float(subdivisions) - 1
                                }
                                if above < fitted[i] {
                                    fitted[i] = above
                                    fractionByLag[i] = Float(k) / Float(subdivisions)
                                }
                            }
                        }
                    } else if curve > 0 {
                        fitted[i] = max(0, at - (before - after) * (before - after) / (8 * curve))
                    }
                }
            }
            if lag != 0 { best = min(best, fitted[i]) }
        }
        // Explains the frame: leaves at most a tenth of the microphone, a tenth of what lag 0
        // leaves, and at most twice what the best lag leaves (a tone's period on explains the
        // tone, not the rest).
        let enough = min(0.1, leftByLag[earliest] / 10, 2 * best)
        for distance in 2...max(earliest, latest) {
            // A range, not a stride: a debug build's stride makes its iterator's tuple metadata
            // on first use, an allocation on the real-time thread (rtcheck, debug build).
            for side in 0..<2 {
                let direction = side == 0 ? 1 : -1
                var lag = distance * direction
                guard lag <= latest && -lag <= earliest, fitted[lag + earliest] <= enough else { continue }
                // The shortest lag that explains it, down to the bottom of its dip: a pitch
                // period further on explains a voiced echo about as well.
                while lag + direction <= latest && -(lag + direction) <= earliest
                    && leftByLag[lag + direction + earliest] < leftByLag[lag + earliest]
                {
                    lag += direction
                }
                // A dip that runs into the end of the lags tried has its bottom beyond them: the
                // echo moved further than the follower looks (a route change, 30 ms; the delay
                // estimate's to find), and the end is no move.
                if lag == latest || lag == -earliest { return 0 }
                // Another lag a millisecond or more away that explains it within 3 dB: a pitch
                // period either side of the move (a high voice's is shorter than the longest
                // moves). Not this frame: the next leaking one has another pitch, the move the
                // same lag.
                let chosen = fitted[lag + earliest], apart = max(2, sampleRate / 1000)
                for other in -earliest...latest where other != 0 && abs(other - lag) >= apart {
                    if fitted[other + earliest] <= 2 * chosen { return 0 }
                }
                return lag
            }
        }
        return 0
    }

    /// The sample of the history from which the estimate `lag` later fits the microphone better
    /// than the estimate unmoved: the split that leaves least of the microphone, the unmoved
    /// estimate before it and the moved one after (from the first sample the moved one is there
    /// for), or, for a lengthening, the end of a silent stretch of `lag` samples after the
    /// unmoved part where that leaves less (``gapped(lag:moved:)``).
    private func changePoint(movedBy lag: Int) -> Int {
        let first = max(0, lag), end = historyLength - max(0, -lag - tail)
        guard first < end else { return historyLength - frameLength }
        // Splitting at `first`: all of it moved. Each step on moves a sample to the unmoved side.
        var cost: Float = 0
        for t in first..<end {
            let d = microphone[t] - estimate[t - lag]
            cost += d * d
        }
        var best = cost, bestAt = first
        for t in first..<end {
            let moved = microphone[t] - estimate[t - lag], unmoved = microphone[t] - estimate[t]
            cost += unmoved * unmoved - moved * moved
            if cost < best {
                best = cost
                bestAt = t + 1
            }
        }
        // A gap (``gapped(lag:moved:)``) in the frame that leaves less: the moved microphone
        // begins after it.
        if lag > 0 && step == 1 {
            let gap = gapped(lag: lag, moved: estimate)
            // The samples before the frame as the split above left them.
            var before: Float = 0
            for t in first..<(historyLength - frameLength) {
                let u = microphone[t] - estimate[t]
                before += u * u
            }
            if before + gap.left < best { bestAt = gap.resumesAt }
        }
        return bestAt
    }

    /// The move's frame: each millisecond of the output replaced by the microphone less the
    /// estimate `lag` later where that is quieter (where the estimate is not there yet, for a
    /// negative lag's last samples, the output held 26 dB down).
    private func mend(_ residual: UnsafeMutablePointer<Int16>, movedBy lag: Int) {
        let n = frameLength, start = historyLength - n
        for k in 0..<n {
            let t = start + k
            let moved = t - lag < estimatedLength ? microphone[t] - estimate[t - lag] : Float(residual[k]) / 32768 * 0.05
            mended[k] = Int16(max(-32768, min(32767, (moved * 32768).rounded())))
        }
        Self.keepQuieter(residual, or: UnsafePointer(mended), count: n, block: max(1, sampleRate / 1000))
    }

    /// Replaces each `block` of `out` by `candidate`'s where that is quieter.
    package static func keepQuieter(_ out: UnsafeMutablePointer<Int16>, or candidate: UnsafePointer<Int16>, count n: Int, block: Int) {
        var i = 0
        while i < n {
            let count = min(block, n - i)
            var kept: Float = 0, offered: Float = 0
            for k in i..<(i + count) {
                kept += Float(out[k]) * Float(out[k])
                offered += Float(candidate[k]) * Float(candidate[k])
            }
            if offered < kept { (out + i).update(from: candidate + i, count: count) }
            i += count
        }
    }
}
