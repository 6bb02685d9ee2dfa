import AudioGraph
import XCTest

/// What a play-through reader drops of the captured input (`InputBacklog`), as IOUnit's bus 1
/// uses it: 480-frame slices, stereo, a ring of 12000 frames, a second's window.
final class InputBacklogTests: XCTestCase {
    let slice = 480 * 2

    func make() -> InputBacklog { InputBacklog(sliceFrames: 480, channels: 2, capacity: 12000 * 2, windowFrames: 48000) }

    func testWhatGatheredBeforeTheFirstReadGoesButASlice() {
        var backlog = make()
        XCTAssertEqual(backlog.excess(available: 0, wanted: slice), 0, "the output's prefill asks before input came")
        XCTAssertEqual(backlog.excess(available: slice / 2, wanted: slice), 0)
        XCTAssertEqual(backlog.excess(available: 5 * slice, wanted: slice), 4 * slice, "the first read that finds its frames")
        XCTAssertEqual(backlog.excess(available: 3 * slice, wanted: slice), 0, "then only what lasts")
    }

    /// A stall leaves three slices more for a few reads, then the reads take them back: nothing
    /// of the burst may be dropped (the old rule cut all but a slice: audio lost).
    func testABurstIsReadNotDropped() {
        var backlog = make()
        _ = backlog.excess(available: slice, wanted: slice)
        var dropped = 0
        for read in 0..<500 {
            let available = (100...103).contains(read) ? (5 - (read - 100)) * slice : slice + slice / 3 - (read % 2) * slice / 3
            dropped += backlog.excess(available: available, wanted: slice)
        }
        XCTAssertEqual(dropped, 0)
    }

    /// A backlog of two and a half slices at every read for a second: all but a quarter slice of
    /// the least goes, once, after the second's reads.
    func testALastingBacklogGoesAfterASecond() {
        var backlog = make()
        _ = backlog.excess(available: slice, wanted: slice)
        var drops: [(Int, Int)] = []
        for read in 0..<150 {
            let available = slice + 5 * slice / 2 + (read % 3) * slice / 4
            let d = backlog.excess(available: available, wanted: slice)
            if d > 0 { drops.append((read, d)) }
        }
        XCTAssertEqual(drops.count, 1)
        XCTAssertEqual(drops.first?.0, 99, "after a second of 480-frame reads (the hundredth)")
        XCTAssertEqual(drops.first?.1, 5 * slice / 2 - slice / 4, "the least spare less a quarter slice")
        XCTAssertEqual((drops.first?.1 ?? 1) % 2, 0, "whole frames")
    }

    /// A lasting backlog under sound waits for a quiet moment: nothing goes while the input is
    /// loud (a cut there was a jump in a recording), then it goes whole at the first quiet read.
    func testALastingBacklogGoesOnlyWhereItIsQuiet() {
        var backlog = make()
        _ = backlog.excess(available: slice, wanted: slice)
        var drops: [(Int, Int)] = []
        var asked: [Int] = []
        for read in 0..<150 {
            let d = backlog.excess(available: slice + 2 * slice, wanted: slice) { n in
                asked.append(n)
                return read >= 130
            }
            if d > 0 { drops.append((read, d)) }
        }
        XCTAssertEqual(asked.first, 2 * slice - slice / 4, "asked from the second's end on, for what lasted less a quarter slice")
        XCTAssertEqual(asked.count, 32, "each read from the hundredth until the quiet one")
        XCTAssertEqual(drops.count, 1)
        XCTAssertEqual(drops.first?.0, 130, "the first quiet read")
        XCTAssertEqual(drops.first?.1, 2 * slice - slice / 4)
    }

    /// A spare that dips below half a slice once in the second is not lasting.
    func testAShortReadInTheSecondKeepsEverything() {
        var backlog = make()
        _ = backlog.excess(available: slice, wanted: slice)
        var dropped = 0
        for read in 0..<100 { dropped += backlog.excess(available: read == 50 ? slice / 2 : 4 * slice, wanted: slice) }
        XCTAssertEqual(dropped, 0)
    }

    /// A reader that stalled until the ring is almost full: all but a slice goes at once.
    func testARingAboutToOverflowKeepsASlice() {
        var backlog = make()
        _ = backlog.excess(available: slice, wanted: slice)
        XCTAssertEqual(backlog.excess(available: 12000 * 2 - slice / 2, wanted: slice), 12000 * 2 - slice / 2 - slice)
    }
}
