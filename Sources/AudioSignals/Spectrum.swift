import Foundation

/// Short-time spectra and fundamental frequencies of a signal, for measurements that compare a
/// processed signal with what it should have become.
public enum Spectrum {
    /// The discrete Fourier transform of `re` + i·`im` in place (the inverse without the 1/n
    /// scale when `inverse`), by radix-2 decimation in time; the count must be a power of two.
    public static func fft(_ re: inout [Double], _ im: inout [Double], inverse: Bool = false) {
        let n = re.count
        precondition(n == im.count && n > 0 && n & (n - 1) == 0, "the FFT takes a power-of-two count")
        var j = 0
        for i in 1..<n {
            var bit = n >> 1
            while j & bit != 0 {
                j ^= bit
                bit >>= 1
            }
            j |= bit
            if i < j {
                re.swapAt(i, j)
                im.swapAt(i, j)
            }
        }
        // The n/2 twiddle factors once; a stage of `size` takes every (n/size)-th.
        let angle = (inverse ? 2 : -2) * Double.pi / Double(n)
        let cosines = (0..<n / 2).map { cos(angle * Double($0)) }, sines = (0..<n / 2).map { sin(angle * Double($0)) }
        var size = 2
        while size <= n {
            for k in 0..<size / 2 {
                let (wr, wi) = (cosines[k * (n / size)], sines[k * (n / size)])
                for start in stride(from: 0, to: n, by: size) {
                    let a = start + k, b = a + size / 2
                    let tr = re[b] * wr - im[b] * wi, ti = re[b] * wi + im[b] * wr
                    re[b] = re[a] - tr
                    im[b] = im[a] - ti
                    re[a] += tr
                    im[a] += ti
                }
            }
            size <<= 1
        }
    }

    /// The amplitude spectrum of the `length` samples of `x` centred on `center` (zeros outside
    /// `x`), Hann-windowed and divided by the window's sum, so that a sine of amplitude A peaks at
    /// about A/2 whatever the length: bins 0..<length/2, bin k at k·rate/length.
    public static func amplitudes(_ x: [Float], center: Int, length: Int) -> [Double] {
        var re = [Double](repeating: 0, count: length), im = [Double](repeating: 0, count: length)
        var sum = 0.0
        for i in 0..<length {
            let w = 0.5 - 0.5 * cos(2 * Double.pi * (Double(i) + 0.5) / Double(length))
            let s = center - length / 2 + i
            if s >= 0 && s < x.count { re[i] = Double(x[s]) * w }
            sum += w
        }
        fft(&re, &im)
        return (0..<length / 2).map { (re[$0] * re[$0] + im[$0] * im[$0]).squareRoot() / sum }
    }

    /// The fundamental frequency of the `length` samples of `x` from `start` (a power of two, at
    /// least three times the longest period sought), from the peak of the normalized
    /// autocorrelation between `minimum` and `maximum` Hz; the shortest period whose peak is within
    /// 10 % of the highest wins (against octave-low answers). `nil` when the best peak is below
    /// `voicing` (no clear period: silence, noise, a chord).
    public static func fundamental(
        _ x: [Float], start: Int, length: Int, sampleRate: Double, minimum: Double = 40, maximum: Double = 1000, voicing: Double = 0.7
    ) -> Double? {
        guard start >= 0, start + length <= x.count else { return nil }
        var re = [Double](repeating: 0, count: 2 * length), im = [Double](repeating: 0, count: 2 * length)
        for i in 0..<length { re[i] = Double(x[start + i]) }
        fft(&re, &im)
        for i in 0..<re.count {
            re[i] = re[i] * re[i] + im[i] * im[i]
            im[i] = 0
        }
        fft(&re, &im, inverse: true)
        guard re[0] > 1e-9 else { return nil }
        // Unbiased, and 1 at lag 0: r(τ)·n / (r(0)·(n − τ)).
        let lo = max(2, Int(sampleRate / maximum)), hi = min(length / 3, Int(sampleRate / minimum))
        guard lo + 1 < hi else { return nil }
        let r = (0...hi + 1).map { re[$0] * Double(length) / (re[0] * Double(length - $0)) }
        let peaks = (lo...hi).filter { r[$0] > r[$0 - 1] && r[$0] >= r[$0 + 1] }
        guard let best = peaks.map({ r[$0] }).max(), best >= voicing, let lag = peaks.first(where: { r[$0] >= 0.9 * best }) else { return nil }
        // A parabola through the peak and its neighbours places it between samples.
        let (a, b, c) = (r[lag - 1], r[lag], r[lag + 1])
        let shift = a - 2 * b + c < 0 ? 0.5 * (a - c) / (a - 2 * b + c) : 0
        return sampleRate / (Double(lag) + shift)
    }
}
