// Level metering of a queue: what the server thread measured, summed since the last read.
extension AudioQueueObject {
    /// Levels since the last read (linear), or the last levels when nothing played since.
    func readMeters() -> [AudioQueueLevelMeterState] {
        lock.lock()
        defer { lock.unlock() }
        var frames = 0
        var peak = [Float](repeating: 0, count: pcm.channels)
        var sum = [Float](repeating: 0, count: pcm.channels)
        while var block = engine.meters.pop() {
            frames += block.frames
            withUnsafeBytes(of: &block.peak) { p in
                withUnsafeBytes(of: &block.sumSquares) { s in
                    for c in 0..<min(pcm.channels, 8) {
                        peak[c] = max(peak[c], p.load(fromByteOffset: c * 4, as: Float.self))
                        sum[c] += s.load(fromByteOffset: c * 4, as: Float.self)
                    }
                }
            }
        }
        if frames > 0 {
            lastMeters = (0..<pcm.channels).map { c in
                AudioQueueLevelMeterState(mAveragePower: (sum[c] / Float(frames)).squareRoot(), mPeakPower: peak[c])
            }
        }
        return lastMeters
    }
}
