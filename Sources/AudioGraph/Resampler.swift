#if canImport(Glibc)
import Glibc
#endif

/// A sample rate converter that is pulled: asked for output frames, it says how many input
/// frames it needs next, takes them, and produces the output. Windowed-sinc interpolation
/// (32 taps, Blackman window), with the cutoff lowered to the output's Nyquist when it
/// downsamples; each phase's gain is normalised to 1 at DC. A ratio of small integers (44.1 →
/// 48 kHz is 147/160) has a table row for each of its phases and uses them exactly; any other
/// ratio, and one ``setRatio(_:)`` changes, interpolates linearly between 256 phases.
///
/// Memory is made in `init`; ``needed(forOutput:)``, ``take(_:frames:)`` and
/// ``produce(_:frames:)`` allocate nothing, so a render thread may call them.
package final class PullResampler: @unchecked Sendable {
    package let channels: Int
    /// Input frames per output frame (``setRatio(_:)`` changes it).
    package private(set) var ratio: Double
    private var cutoff = 0.0
    private let maximumRatio: Double
    private let taps = 16
    /// The table's phases: the ratio's denominator when exact, else 256 (interpolated).
    private var phases = 256
    private var exact = false
    /// Half an exact phase: added to the position, flooring finds the nearest phase.
    private var nearest: Double { 0.5 / Double(phases) }
    private static let largestExactPhases = 1024
    private let table: UnsafeMutablePointer<Float>
    private let history: UnsafeMutablePointer<Float>
    /// Each channel's output pointer during ``produce(_:frames:)``.
    private let outputs: UnsafeMutablePointer<UnsafeMutablePointer<Float>>
    private let capacity: Int
    /// Input frames held, and the read position (in input frames from the first held).
    private var held: Int
    private var position: Double

    /// A converter from `inputRate` to `outputRate` that produces up to `maximumOutput` frames a
    /// call, at ratios (input per output) up to `maximumRatio` (for ``setRatio(_:)``).
    package init(channels: Int, inputRate: Double, outputRate: Double, maximumOutput: Int, maximumRatio: Double? = nil) {
        self.channels = max(channels, 1)
        ratio = inputRate / outputRate
        self.maximumRatio = max(maximumRatio ?? ratio, ratio)
        // The ratio's denominator, where it is a fraction of one up to 1024.
        if let q = (1...Self.largestExactPhases).first(where: { q in
            let p = inputRate / outputRate * Double(q)
            return abs(p - p.rounded()) < 1e-9 * Double(q)
        }) {
            phases = q
            exact = true
        }
        table = .allocate(capacity: (max(phases, 256) + 1) * 2 * taps)
        capacity = Int(Double(maximumOutput) * max(maximumRatio ?? ratio, ratio)) + 4 * taps + 16
        history = .allocate(capacity: capacity * self.channels)
        history.initialize(repeating: 0, count: capacity * self.channels)
        outputs = .allocate(capacity: self.channels)
        outputs.initialize(repeating: history, count: self.channels)
        // Starts with a window's worth of silence behind the first input frame.
        held = taps
        position = Double(taps - 1)
        buildTable()
        // The vector types' first use instantiates their metadata (an allocation, in a debug
        // build): here, not on the render thread.
        let v = UnsafeRawPointer(table).loadUnaligned(as: SIMD16<Float>.self) * SIMD16<Float>(repeating: 0)
        let h = v.lowHalf + v.highHalf, q = h.lowHalf + h.highHalf
        history[0] = q[0] + q[1] + q[2] + q[3]
    }

    /// Changes the ratio (a render thread may: a faster rate than 1 recomputes the filter, which
    /// only computes). Clamped to what the converter was made for.
    package func setRatio(_ r: Double) {
        let r = min(max(r, 1.0 / 64), maximumRatio)
        guard r != ratio else { return }
        ratio = r
        if exact {
            // A ratio that moves is interpolated from here on.
            exact = false
            phases = 256
            buildTable()
            return
        }
        // The filter follows the ratio in steps of 2 % of its cutoff: a rate that glides rebuilds
        // it now and then, not every slice.
        if abs(min(1, 1 / ratio) * 0.97 - cutoff) > 0.02 * cutoff { buildTable() }
    }

    /// The windowed-sinc table for the current ratio: normalised to unit gain per phase.
    private func buildTable() {
        cutoff = min(1, 1 / ratio) * 0.97
        let width = 2 * taps
        for j in 0...phases {
            let frac = Double(j) / Double(phases)
            var sum = 0.0
            for k in 0..<width {
                let x = Double(k - taps + 1) - frac
                let u = x / Double(taps)
                let window = abs(u) >= 1 ? 0 : 0.42 + 0.5 * cos(Double.pi * u) + 0.08 * cos(2 * Double.pi * u)
                let s = x == 0 ? 1 : sin(Double.pi * cutoff * x) / (Double.pi * cutoff * x)
                table[j * width + k] = Float(s * window)
                sum += s * window
            }
            for k in 0..<width { table[j * width + k] = Float(Double(table[j * width + k]) / sum) }
        }
    }

    deinit {
        table.deallocate()
        history.deallocate()
        outputs.deallocate()
    }

    package func reset() {
        history.update(repeating: 0, count: capacity * channels)
        held = taps
        position = Double(taps - 1)
    }

    /// Input frames to ``take(_:frames:)`` before producing `frames` output frames.
    package func needed(forOutput frames: Int) -> Int {
        let last = position + Double(frames - 1) * ratio + (exact ? nearest : 0)
        return max(0, Int(last.rounded(.down)) + taps + 1 - held)
    }

    /// Appends `frames` frames, channel `c` at `input(c)`.
    package func take(_ input: (Int) -> UnsafePointer<Float>, frames: Int) {
        let n = min(frames, capacity - held)
        for c in 0..<channels {
            (history + c * capacity + held).update(from: input(c), count: n)
        }
        held += n
    }

    /// Produces `frames` frames, channel `c` into `output(c)`, and lets go of input no longer needed.
    ///
    /// Each output frame's 32 coefficients are interpolated between two phases once, in two
    /// 16-lane vectors, and serve every channel's dot product.
    package func produce(_ output: (Int) -> UnsafeMutablePointer<Float>, frames: Int) {
        let width = 2 * taps
        for c in 0..<channels { outputs[c] = output(c) }
        var p = position
        for i in 0..<frames {
            // Exact phases are the nearest (the position drifts by rounding only).
            let at = exact ? p + nearest : p
            let base = Int(at.rounded(.down))
            let phase = (at - Double(base)) * Double(phases)
            let j = min(Int(phase), phases - 1)
            let t = exact ? 0 : Float(phase - Double(j))
            let first = base - taps + 1
            p += ratio
            guard first >= 0 && first + width <= held else {
                for c in 0..<channels { outputs[c][i] = 0 }
                continue
            }
            let row0 = UnsafeRawPointer(table + j * width), row1 = row0 + width * 4
            let a0 = row0.loadUnaligned(as: SIMD16<Float>.self), a1 = row0.loadUnaligned(fromByteOffset: 64, as: SIMD16<Float>.self)
            let b0 = row1.loadUnaligned(as: SIMD16<Float>.self), b1 = row1.loadUnaligned(fromByteOffset: 64, as: SIMD16<Float>.self)
            let k0 = exact ? a0 : a0 + (b0 - a0) * t, k1 = exact ? a1 : a1 + (b1 - a1) * t
            for c in 0..<channels {
                let x = UnsafeRawPointer(history + c * capacity + first)
                let v = x.loadUnaligned(as: SIMD16<Float>.self) * k0 + x.loadUnaligned(fromByteOffset: 64, as: SIMD16<Float>.self) * k1
                let h = v.lowHalf + v.highHalf, q = h.lowHalf + h.highHalf
                outputs[c][i] = (q[0] + q[2]) + (q[1] + q[3])
            }
        }
        // Keep what the next window still reaches back to.
        let drop = max(0, min(held - width, Int(p.rounded(.down)) - taps + 1))
        if drop > 0 {
            for c in 0..<channels {
                let h = history + c * capacity
                h.update(from: h + drop, count: held - drop)
            }
            held -= drop
            p -= Double(drop)
        }
        position = p
    }
}
