/// What a reader on another thread than the recording's (play-through, an engine's input node)
/// drops of the captured input it has not read yet, so that a lasting backlog does not become
/// lasting latency, without cutting out audio a burst brought.
///
/// The recording and the playback streams run on their own threads, and their cycles do not line
/// up: the backlog swings by up to a request between reads. A stall of either thread (a busy
/// machine, the server catching up after one) leaves a burst of several slices, which the next
/// reads take back as the other stream catches up too. So only a backlog that lasted goes: when
/// the least left over after any read in a second of reads was half a slice or more, all but a
/// quarter slice of it (a lasting half slice was 5 ms more round trip at 10 ms buffers,
/// `openavf-bench --only duplex`), and only where what goes is quiet (the caller says,
/// ``excess(available:wanted:isQuiet:)``; IOUnit: below −50 dBFS or 30 dB under the input's
/// recent peak): cut out of a sound, it was a jump in a recording (an engine's input tap lost its
/// place 1.65 s into a chirp to one in a CI run). A backlog that lasted waits for quiet moments
/// until the next second's reads say again whether it lasts. (Until 2026-12-04 all but a slice
/// went as soon as more than three waited; a burst cut that way was audio lost from a
/// recording.) Two cases go at once, quiet or not:
/// what gathered before the first read (all but a slice), and a backlog about to overflow the
/// ring (the reader stalled for long: all but a slice). A reader that stops reading for a while
/// (an engine whose input is not pulled) finds what waited cut to a slice once the ring filled;
/// less than that waits a second to be cut.
///
/// Plain arithmetic, no memory of its own: the reading (real-time) thread owns it.
package struct InputBacklog: Sendable {
    private let slice: Int
    /// Half a slice and a quarter, in whole frames' samples.
    private let half: Int
    private let quarter: Int
    private let channels: Int
    private let capacity: Int
    private let window: Int
    private var least = Int.max
    private var counted = 0
    private var reading = false
    /// What a lasting backlog would drop, waiting for a quiet moment.
    private var pending = 0

    /// `sliceFrames` is the unit's slice; `capacity` the ring's, in samples; a window of
    /// `windowFrames` requested frames (a second) decides whether a backlog lasted.
    package init(sliceFrames: Int, channels: Int, capacity: Int, windowFrames: Int) {
        self.channels = max(channels, 1)
        slice = max(sliceFrames, 1) * self.channels
        half = max(sliceFrames / 2, 1) * self.channels
        quarter = max(sliceFrames / 4, 1) * self.channels
        self.capacity = capacity
        window = max(windowFrames, 1)
    }

    /// Samples to drop before a read of `wanted` samples, `available` waiting: whole frames.
    /// `isQuiet(n)` says whether the oldest `n` samples waiting are quiet enough to go unheard
    /// (only a lasting backlog asks).
    package mutating func excess(available: Int, wanted: Int, isQuiet: (Int) -> Bool = { _ in true }) -> Int {
        if !reading || available > capacity - slice {
            // The first read that finds its frames (the output's prefill may ask before any
            // input came), or a ring about to overflow.
            guard available >= wanted else { return 0 }
            reading = true
            restart()
            pending = 0
            return max(0, available - max(slice, wanted))
        }
        // A read takes its frames whole or not at all: a short one leaves no spare.
        let spare = available >= wanted ? available - wanted : 0
        least = min(least, spare)
        counted += wanted / channels
        if counted >= window {
            pending = least >= half ? least - quarter : 0
            restart()
        }
        // What lasted goes in quiet moments, as much of it as is spare at each (the backlog
        // swings by up to a request between reads: a part now, the rest at the next).
        let drop = min(pending, spare) / channels * channels
        guard drop > 0, isQuiet(drop) else { return 0 }
        pending -= drop
        return drop
    }

    private mutating func restart() {
        least = .max
        counted = 0
    }
}
