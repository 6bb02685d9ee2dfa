#if canImport(Glibc)
import Glibc
#endif

/// Finds how much later than the far end (what a call plays) its echo reaches the microphone,
/// to the millisecond: the two signals' loudness, in 1 ms blocks, are correlated over lags up to
/// ``maximumDelay``, with older blocks forgotten over about a second.
///
/// The streams' reported latencies line the far end up with the microphone to within a few
/// milliseconds, but the sound's own way from speaker to microphone (the room; on a test server,
/// a loopback module's 40 ms) is the canceller's to model, and an adaptive filter converges
/// slower and deeper the further into it the echo sits: the speex canceller left the same echo
/// 48 dB down with its reference lined up to it, 33–36 dB with the echo 5 to 40 ms behind
/// (measured on a recording of the test server's path). Moving the reference by the delay found
/// here keeps the echo at the filter's start.
///
/// Memory is made in `init`; ``push(far:near:count:)`` allocates nothing.
package final class EchoDelayEstimator: @unchecked Sendable {
    /// Samples in a block (1 ms).
    package let blockLength: Int
    /// The longest delay looked for, in blocks.
    package let maximumDelay: Int
    /// Loudness of recent far-end blocks (a ring of ``maximumDelay`` + 1).
    private let farHistory: UnsafeMutablePointer<Float>
    private let correlation: UnsafeMutablePointer<Float>
    private var farPower: Float = 0
    private var nearPower: Float = 0
    private var newest = 0
    /// Blocks in which the far end played (louder than −60 dBFS).
    private var activeBlocks = 0
    private var farMean: Float = 0
    private var nearMean: Float = 0
    private var farSum: Float = 0
    private var nearSum: Float = 0
    private var filled = 0
    /// The forgetting factor per block: a time constant of 1 s (a route change's new delay is
    /// found half a second after the move: VoiceIOUnitTests).
    private let keep: Float = 1 - 1 / 1000

    package init(sampleRate: Int, maximumDelay seconds: Double = 0.25) {
        blockLength = max(1, sampleRate / 1000)
        maximumDelay = max(1, Int(seconds * 1000))
        farHistory = .allocate(capacity: maximumDelay + 1)
        farHistory.initialize(repeating: 0, count: maximumDelay + 1)
        correlation = .allocate(capacity: maximumDelay + 1)
        correlation.initialize(repeating: 0, count: maximumDelay + 1)
    }

    deinit {
        farHistory.deallocate()
        correlation.deallocate()
    }

    /// The far end's timeline moved `samples` later (the caller reads newer audio as the
    /// reference): an echo's delay behind it grows by as much, so what was correlated moves to
    /// the longer lags (the shortest start empty; the longest fall off). No allocation.
    package func shift(by samples: Int) {
        let blocks = Int((Double(samples) / Double(blockLength)).rounded())
        guard blocks != 0 else { return }
        if blocks > 0 {
            var lag = maximumDelay
            while lag >= 0 {
                correlation[lag] = lag - blocks >= 0 ? correlation[lag - blocks] : 0
                lag -= 1
            }
        } else {
            for lag in 0...maximumDelay { correlation[lag] = lag - blocks <= maximumDelay ? correlation[lag - blocks] : 0 }
        }
    }

    /// Takes `count` samples of each, on one timeline (the far end's sample `i` was playing when
    /// the microphone's sample `i` was captured, by the streams' clocks).
    package func push(far: UnsafePointer<Float>, near: UnsafePointer<Float>, count: Int) {
        for i in 0..<count {
            farSum += far[i] * far[i]
            nearSum += near[i] * near[i]
            filled += 1
            guard filled == blockLength else { continue }
            block(far: Self.loudness(farSum / Float(blockLength)), near: Self.loudness(nearSum / Float(blockLength)))
            farSum = 0
            nearSum = 0
            filled = 0
        }
    }

    /// A block's loudness: its power in dB, floored at −100 dBFS.
    private static func loudness(_ power: Float) -> Float { 10 * log10(max(power, 1e-10)) }

    private func block(far: Float, near: Float) {
        // The loudness' slow mean taken out (about 0.1 s), so that the correlation follows the
        // syllables, not the overall level.
        farMean += (far - farMean) * 0.01
        nearMean += (near - nearMean) * 0.01
        let f = far - farMean, n = near - nearMean
        newest = (newest + 1) % (maximumDelay + 1)
        farHistory[newest] = f
        if far > -60 { activeBlocks += 1 }
        farPower = farPower * keep + f * f
        nearPower = nearPower * keep + n * n
        var index = newest
        for lag in 0...maximumDelay {
            correlation[lag] = correlation[lag] * keep + n * farHistory[index]
            index = index == 0 ? maximumDelay : index - 1
        }
    }

    /// The delay in samples, when the correlation says so clearly (its peak at least 0.5,
    /// normalised). Nil until the far end has played for half a second, or when the echo is too
    /// faint to find.
    package var delay: Int? {
        guard activeBlocks >= 500, farPower > 0, nearPower > 0 else { return nil }
        var best = 0
        for lag in 1...maximumDelay where correlation[lag] > correlation[best] { best = lag }
        let peak = correlation[best]
        guard peak / (farPower * nearPower).squareRoot() >= 0.5 else { return nil }
        return best * blockLength
    }
}
