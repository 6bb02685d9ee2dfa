#if canImport(Glibc)
import Glibc
#endif

/// One channel of an echo: a delay with feedback through a one-pole low pass, mixed wet and dry,
/// as Apple's `AUDelay`. Its memory is made once for the longest delay; processing allocates
/// nothing.
package final class DelayLine: @unchecked Sendable {
    private let memory: UnsafeMutablePointer<Float>
    private let capacity: Int
    private var write = 0
    private var lowPass: Float = 0

    /// A line that can delay by up to `maximumSeconds` at `sampleRate`.
    package init(maximumSeconds: Double, sampleRate: Double) {
        capacity = max(Int(maximumSeconds * sampleRate) + 2, 2)
        memory = .allocate(capacity: capacity)
        memory.initialize(repeating: 0, count: capacity)
    }

    deinit { memory.deallocate() }

    package func reset() {
        memory.update(repeating: 0, count: capacity)
        write = 0
        lowPass = 0
    }

    /// Processes `count` samples in place (`stride` apart): `delay` in frames, `feedback` and
    /// `wet` as fractions (feedback −1…1, wet 0…1), `cutoff` the low pass's corner in Hz.
    package func process(
        _ samples: UnsafeMutablePointer<Float>, count: Int, stride: Int = 1, delay: Double, feedback: Float, wet: Float, cutoff: Double,
        sampleRate: Double
    ) {
        let d = min(max(delay, 0), Double(capacity - 2))
        let whole = Int(d), fraction = Float(d - Double(whole))
        // One-pole low pass: y += k·(x − y), k from the corner frequency.
        let k = Float(1 - exp(-2 * Double.pi * min(max(cutoff, 10), sampleRate / 2) / sampleRate))
        var p = samples
        for _ in 0..<count {
            let x = p.pointee
            var r0 = write - whole, r1 = write - whole - 1
            if r0 < 0 { r0 += capacity }
            if r1 < 0 { r1 += capacity }
            // With no delay the echo is the input itself.
            let delayed = whole == 0 && fraction == 0 ? x : memory[r0] + (memory[r1] - memory[r0]) * fraction
            lowPass += k * (delayed - lowPass)
            var into = x + feedback * lowPass
            if abs(into) < 1e-30 { into = 0 }
            memory[write] = into
            write += 1
            if write == capacity { write = 0 }
            p.pointee = x * (1 - wet) + lowPass * wet
            p += stride
        }
    }
}
