import AudioGraph
import Foundation
import XCTest

/// The band split speex runs on above 16 kHz (``BandSplit``): offline, deterministic.
final class BandSplitTests: XCTestCase {
    /// Splits `input` in frames and joins each band as `process` makes it (given the band of the
    /// frame before, as speex's preprocessor gives its output a frame late).
    private func run(_ split: BandSplit, _ input: [Float], process: (inout [Float]) -> Void) -> [Float] {
        let n = split.frameLength, nb = split.bandFrameLength
        var out = [Float](repeating: 0, count: input.count)
        var band = [Float](repeating: 0, count: nb), last = [Float](repeating: 0, count: nb)
        var start = 0
        while start + n <= input.count {
            input.withUnsafeBufferPointer { split.split($0.baseAddress! + start, band: &band) }
            var processed = last
            process(&processed)
            out.withUnsafeMutableBufferPointer { o in processed.withUnsafeBufferPointer { split.join($0.baseAddress!, into: o.baseAddress! + start) } }
            last = band
            start += n
        }
        return out
    }

    private func noise(_ count: Int, seed: UInt64) -> [Float] {
        var state = seed
        return (0..<count).map { _ in
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return Float(Int64(bitPattern: state) >> 40) / Float(1 << 23) * 0.5
        }
    }

    /// Left as it is, the band joins the rest into the input again, ``BandSplit/delay`` later,
    /// at 48 and 32 kHz; no other rate is split.
    func testAnUnprocessedBandGivesTheInputBack() throws {
        for rate in [48000, 32000] {
            let split = try XCTUnwrap(BandSplit(sampleRate: rate, frameLength: rate / 100))
            let input = noise(rate, seed: 7)
            let out = run(split, input) { _ in }
            // After the first frames: the band's gain starts from silence.
            var worst: Float = 0
            for i in (split.delay + 2 * split.frameLength)..<input.count { worst = max(worst, abs(out[i] - input[i - split.delay])) }
            XCTAssertLessThan(worst, 1e-4, "\(rate) Hz: the join differs from the input by \(worst)")
        }
        XCTAssertNil(BandSplit(sampleRate: 16000, frameLength: 160))
        XCTAssertNil(BandSplit(sampleRate: 44100, frameLength: 441))
    }

    /// A band the processor turns down turns the rest down as much: a tone above 8 kHz comes out
    /// 6 dB down with one below it where the band was 6 dB down, and silent where the band was
    /// silenced. Where the band has been held 20 dB down or more for a while (echo alone), the
    /// rest is held 30 dB further down: the tone above comes out 70 dB down where the band was 40.
    func testTheRestTakesTheBandsGain() throws {
        let rate = 48000
        let low = (0..<rate).map { Float(0.3 * sin(2 * Double.pi * 1000 * Double($0) / Double(rate))) }
        let high = (0..<rate).map { Float(0.3 * sin(2 * Double.pi * 12000 * Double($0) / Double(rate))) }
        let input = zip(low, high).map { $0 + $1 }
        /// The level of the tone at `frequency` in the second half (dB re its level in).
        func tone(_ x: [Float], _ frequency: Double) -> Double {
            var re = 0.0, im = 0.0
            for i in (rate / 2)..<rate {
                let phase = 2 * Double.pi * frequency * Double(i) / Double(rate)
                re += Double(x[i]) * cos(phase)
                im += Double(x[i]) * sin(phase)
            }
            return 20 * log10((re * re + im * im).squareRoot() / Double(rate / 2) * 2 / 0.3 + 1e-12)
        }
        func run(_ scale: Float) throws -> [Float] {
            let split = try XCTUnwrap(BandSplit(sampleRate: rate, frameLength: 480))
            return self.run(split, input) { band in for i in band.indices { band[i] *= scale } }
        }
        let half = try run(0.5)
        XCTAssertEqual(tone(half, 1000), -6.02, accuracy: 0.1, "the band's tone")
        XCTAssertEqual(tone(half, 12000), -6.02, accuracy: 0.1, "the tone above the band")
        let held = try run(0.01)
        XCTAssertEqual(tone(held, 1000), -40, accuracy: 0.1, "the band's tone")
        XCTAssertEqual(tone(held, 12000), -70.5, accuracy: 0.5, "the tone above the band, the band held down")
        let silenced = try run(0)
        XCTAssertEqual(silenced[(rate / 2)...].map { abs($0) }.max() ?? 1, 0, "silenced")
    }
}
