import AudioTestSupport
import AudioToolbox
import Foundation

/// A click train: one full-scale 1 ms burst every `period` frames, silence between.
struct ClickTrain {
    let period: Int
    /// About a quarter of a second at 48 kHz, and no multiple of any buffer measured (5, 10 and
    /// 30 ms): each click lands at another place in the buffers, so the median is taken over
    /// where in a buffer a click falls rather than fixed by one run's chance alignment of the
    /// output's and the input's buffer boundaries (at a period of exactly 12,000 frames every
    /// click of a run falls at the same place, and runs differ by up to a buffer).
    static let quarterSecond = ClickTrain(period: 12_149)
    let burst = 48
    func sample(_ i: Int) -> Float {
        let phase = i % period
        return phase < burst ? (phase % 2 == 0 ? 0.8 : -0.8) : 0
    }
    /// Whether a click starts at frame `i`.
    func starts(_ i: Int) -> Bool { i % period == 0 }
}

/// Due times of clicks handed to an output and arrival times of clicks seen at an input; the
/// latency of each click is its arrival minus its due time.
final class ClickLog: @unchecked Sendable {
    private let lock = NSLock()
    private var due: [UInt64] = []
    private var seen: [UInt64] = []
    private var inClick = false

    func handed(at hostTime: UInt64) {
        lock.lock()
        due.append(hostTime)
        lock.unlock()
    }

    /// Scans captured samples that arrived at `hostTime`; records each new click once.
    func scan(_ samples: UnsafeBufferPointer<Float>, arrivedAt hostTime: UInt64) {
        lock.lock()
        for x in samples {
            if abs(x) > 0.3 {
                if !inClick { seen.append(hostTime) }
                inClick = true
            } else if x == 0 {
                inClick = false
            }
        }
        lock.unlock()
    }

    /// Median latency in milliseconds: each click seen, less the due time of the latest click
    /// handed before it (clicks are 250 ms apart, far more than any latency measured here). The
    /// first `skip` clicks seen are left out while the streams settle.
    func medianMilliseconds(skipping skip: Int = 2) -> Double? {
        lock.lock()
        defer { lock.unlock() }
        let values = seen.dropFirst(skip).compactMap { arrival -> Double? in
            guard let handed = due.last(where: { $0 <= arrival }) else { return nil }
            return (Double(arrival) - Double(handed)) / 1e6
        }.sorted()
        return values.isEmpty ? nil : values[values.count / 2]
    }
}
