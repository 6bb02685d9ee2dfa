#if canImport(Glibc)
import Glibc
#endif

/// A stereo reverberator: an eight-line feedback delay network (lengths spread exponentially
/// between the shortest and longest delay, mutually prime, mixed by a Householder reflection),
/// each line's loop gain set for the decay time at DC and damped by a one-pole filter toward the
/// decay time at Nyquist. Left takes the even lines, right the odd ones, so the two sides are
/// decorrelated. Memory is made in `init` (for delays up to one second); ``process`` allocates
/// nothing.
package final class Reverberator: @unchecked Sendable {
    package struct Settings: Equatable, Sendable {
        package var minimumDelay: Double
        package var maximumDelay: Double
        package var decayAtDC: Double
        package var decayAtNyquist: Double
        package var seed: Int
        package init(minimumDelay: Double, maximumDelay: Double, decayAtDC: Double, decayAtNyquist: Double, seed: Int) {
            self.minimumDelay = minimumDelay
            self.maximumDelay = maximumDelay
            self.decayAtDC = decayAtDC
            self.decayAtNyquist = decayAtNyquist
            self.seed = seed
        }
    }

    static let lines = 8
    private let rate: Double
    private let capacity: Int
    private let memory: UnsafeMutablePointer<Float>
    private var lengths = [Int](repeating: 1, count: lines)
    private var positions = [Int](repeating: 0, count: lines)
    private var gains = [Float](repeating: 0, count: lines)
    private var poles = [Float](repeating: 0, count: lines)
    private var states = [Float](repeating: 0, count: lines)
    private var settings: Settings?

    package init(sampleRate: Double) {
        rate = sampleRate
        capacity = Int(sampleRate * 1.05) + 8
        memory = .allocate(capacity: capacity * Self.lines)
        memory.initialize(repeating: 0, count: capacity * Self.lines)
    }

    deinit { memory.deallocate() }

    package func reset() {
        memory.update(repeating: 0, count: capacity * Self.lines)
        for i in 0..<Self.lines { states[i] = 0; positions[i] = 0 }
    }

    /// Sets the network for `s` (the render thread may call it: it only computes).
    package func configure(_ s: Settings) {
        guard s != settings else { return }
        settings = s
        let shortest = max(s.minimumDelay, 0.0005), longest = max(s.maximumDelay, shortest * 1.5)
        for i in 0..<Self.lines {
            // Exponential spread, nudged by the seed and made odd and distinct (near mutually prime).
            let t = Double(i) / Double(Self.lines - 1)
            let jitter = 1 + 0.03 * sin(Double((i + 1) * (s.seed + 7)))
            var n = Int(rate * shortest * pow(longest / shortest, t) * jitter) | 1
            while (0..<i).contains(where: { lengths[$0] == n }) { n += 2 }
            lengths[i] = min(max(n, 3), capacity - 1)
            let g0 = pow(10, -3 * Double(lengths[i]) / (rate * max(s.decayAtDC, 0.001)))
            let gn = pow(10, -3 * Double(lengths[i]) / (rate * max(s.decayAtNyquist, 0.001)))
            gains[i] = Float(g0)
            poles[i] = Float((g0 - gn) / (g0 + gn))
        }
    }

    /// Adds the reverberation of `left`/`right` (mono: the same pointer twice) to `wetLeft` and
    /// `wetRight`, `count` frames.
    package func process(
        left: UnsafePointer<Float>, right: UnsafePointer<Float>, wetLeft: UnsafeMutablePointer<Float>, wetRight: UnsafeMutablePointer<Float>,
        count: Int
    ) {
        let n = Self.lines
        var outs = (Float(0), Float(0), Float(0), Float(0), Float(0), Float(0), Float(0), Float(0))
        withUnsafeMutableBytes(of: &outs) { raw in
            let o = raw.baseAddress!.assumingMemoryBound(to: Float.self)
            for f in 0..<count {
                var sum: Float = 0
                for i in 0..<n {
                    let line = memory + i * capacity
                    var read = positions[i] - lengths[i]
                    if read < 0 { read += capacity }
                    // Damped loop: a one-pole filter whose DC gain is the line's decay gain.
                    states[i] = gains[i] * (1 - poles[i]) * line[read] + poles[i] * states[i]
                    o[i] = states[i]
                    sum += o[i]
                }
                let input = (left[f] + right[f]) * 0.5
                // Householder reflection: each line gets its output minus 2/n of the sum.
                let k = 2 / Float(n) * sum
                for i in 0..<n {
                    let line = memory + i * capacity
                    var v = o[i] - k + input * (i & 1 == 0 ? 1 : -1) * 0.35
                    if abs(v) < 1e-25 { v = 0 }
                    line[positions[i]] = v
                    positions[i] += 1
                    if positions[i] == capacity { positions[i] = 0 }
                }
                wetLeft[f] += (o[0] + o[2] + o[4] + o[6]) * 0.5
                wetRight[f] += (o[1] + o[3] + o[5] + o[7]) * 0.5
            }
        }
    }
}
