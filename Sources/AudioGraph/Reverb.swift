#if canImport(Glibc)
import Glibc
#endif

/// A stereo reverberator: an eight-line feedback delay network (lengths spread exponentially
/// between the shortest and longest delay, nudged apart by the seed, mixed by a Householder
/// reflection), each line's loop gain set for the decay time at DC and damped by a one-pole
/// filter toward the decay time at Nyquist. Left takes the even lines, right the odd ones, so the
/// two sides are decorrelated. Memory is made in `init` (for delays up to one second);
/// ``configure(_:)`` and ``process(left:right:wetLeft:wetRight:count:)`` allocate nothing.
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
    // Per line: length, write position, loop gain, damping pole, filter state (pointers, so the
    // inner loop reads plain memory).
    private let lengths = UnsafeMutablePointer<Int>.allocate(capacity: lines)
    private let positions = UnsafeMutablePointer<Int>.allocate(capacity: lines)
    private let gains = UnsafeMutablePointer<Float>.allocate(capacity: lines)
    private let poles = UnsafeMutablePointer<Float>.allocate(capacity: lines)
    private let states = UnsafeMutablePointer<Float>.allocate(capacity: lines)
    private let outs = UnsafeMutablePointer<Float>.allocate(capacity: lines)
    private var settings: Settings?

    package init(sampleRate: Double) {
        rate = sampleRate
        capacity = Int(sampleRate * 1.05) + 8
        memory = .allocate(capacity: capacity * Self.lines)
        memory.initialize(repeating: 0, count: capacity * Self.lines)
        for p in [gains, poles, states, outs] { p.initialize(repeating: 0, count: Self.lines) }
        lengths.initialize(repeating: 1, count: Self.lines)
        positions.initialize(repeating: 0, count: Self.lines)
    }

    deinit {
        memory.deallocate()
        for p in [gains, poles, states, outs] { p.deallocate() }
        lengths.deallocate()
        positions.deallocate()
    }

    package func reset() {
        memory.update(repeating: 0, count: capacity * Self.lines)
        states.update(repeating: 0, count: Self.lines)
        positions.update(repeating: 0, count: Self.lines)
    }

    /// Sets the network for `s` (the render thread may call it: it only computes).
    package func configure(_ s: Settings) {
        guard s != settings else { return }
        settings = s
        let shortest = max(s.minimumDelay, 0.0005), longest = max(s.maximumDelay, shortest * 1.5)
        for i in 0..<Self.lines {
            // Exponential spread, nudged by the seed, odd and distinct (near mutually prime).
            let t = Double(i) / Double(Self.lines - 1)
            let jitter = 1 + 0.03 * sin(Double((i + 1) * (s.seed + 7)))
            var n = Int(rate * shortest * pow(longest / shortest, t) * jitter) | 1
            var clash = true
            while clash {
                clash = false
                for j in 0..<i where lengths[j] == n { clash = true }
                if clash { n += 2 }
            }
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
        let n = Self.lines, capacity = self.capacity, memory = self.memory
        let lengths = self.lengths, positions = self.positions, gains = self.gains, poles = self.poles, states = self.states, o = self.outs
        let k2 = 2 / Float(n)
        for f in 0..<count {
            var sum: Float = 0
            for i in 0..<n {
                var read = positions[i] - lengths[i]
                if read < 0 { read += capacity }
                // Damped loop: a one-pole filter whose DC gain is the line's decay gain.
                let y = gains[i] * (1 - poles[i]) * memory[i * capacity + read] + poles[i] * states[i]
                states[i] = y
                o[i] = y
                sum += y
            }
            let input = (left[f] + right[f]) * 0.5
            // Householder reflection: each line gets its output minus 2/n of the sum.
            let k = k2 * sum
            for i in 0..<n {
                var v = o[i] - k + input * (i & 1 == 0 ? 0.35 : -0.35)
                if abs(v) < 1e-25 { v = 0 }
                memory[i * capacity + positions[i]] = v
                positions[i] = positions[i] + 1 == capacity ? 0 : positions[i] + 1
            }
            wetLeft[f] += (o[0] + o[2] + o[4] + o[6]) * 0.5
            wetRight[f] += (o[1] + o[3] + o[5] + o[7]) * 0.5
        }
    }
}
