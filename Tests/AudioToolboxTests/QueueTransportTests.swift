@testable import AudioToolbox
import XCTest

/// The transport table itself, every state × operation, without a server: the grid below is
/// written out independently of ``QueueTransport`` and must match it cell for cell.
final class QueueTransportTests: XCTestCase {
    typealias S = QueueTransport.State
    typealias O = QueueTransport.Operation
    typealias Outcome = QueueTransport.Outcome

    private static let pending = Outcome.refused(kAudioQueueErr_DisposalPending)

    /// The expected outcome of each operation in each state.
    private static let expected: [S: [O: Outcome]] = {
        var table: [S: [O: Outcome]] = [:]
        // A live state where buffers come and go and prime only opens the stream.
        func live(_ s: S) -> [O: Outcome] {
            [.allocate: .to(s, .none), .enqueue: .to(s, .none), .prime: .to(s, .openStream),
             .stopImmediately: .to(.stopped, .halt), .disposeImmediately: .to(.disposed, .teardown)]
        }
        var stopped = live(.stopped)
        stopped[.prime] = .to(.primed, .openStream)
        stopped[.start] = .to(.running, .begin)
        stopped[.pause] = .to(.stopped, .none)
        stopped[.stopAfterPlaying] = .to(.stopped, .halt)
        stopped[.reset] = .to(.stopped, .reset)
        stopped[.disposeAfterPlaying] = .to(.disposed, .teardown)
        stopped[.drained] = .to(.stopped, .none)
        table[.stopped] = stopped

        var primed = live(.primed)
        primed[.start] = .to(.running, .begin)
        primed[.pause] = .to(.primed, .none)
        primed[.stopAfterPlaying] = .to(.stopped, .halt)
        primed[.reset] = .to(.primed, .reset)
        primed[.disposeAfterPlaying] = .to(.disposed, .teardown)
        primed[.drained] = .to(.primed, .none)
        table[.primed] = primed

        var running = live(.running)
        running[.start] = .to(.running, .none)
        running[.pause] = .to(.paused, .pause)
        running[.stopAfterPlaying] = .to(.stopping, .drain)
        running[.reset] = .to(.running, .reset)
        running[.disposeAfterPlaying] = .to(.stoppingToDispose, .drain)
        running[.drained] = .to(.running, .none)
        table[.running] = running

        var paused = live(.paused)
        paused[.start] = .to(.running, .resume)
        paused[.pause] = .to(.paused, .none)
        paused[.stopAfterPlaying] = .to(.stopped, .halt)
        paused[.reset] = .to(.paused, .reset)
        paused[.disposeAfterPlaying] = .to(.disposed, .teardown)
        paused[.drained] = .to(.paused, .none)
        table[.paused] = paused

        var stopping = live(.stopping)
        stopping[.start] = .to(.running, .begin)
        stopping[.pause] = .to(.pausedWhileStopping, .pause)
        stopping[.stopAfterPlaying] = .to(.stopping, .drain)
        stopping[.reset] = .to(.stopped, .reset)
        stopping[.disposeAfterPlaying] = .to(.stoppingToDispose, .drain)
        stopping[.drained] = .to(.stopped, .finishDrain)
        table[.stopping] = stopping

        var pausedWhileStopping = live(.pausedWhileStopping)
        pausedWhileStopping[.start] = .to(.stopping, .resume)
        pausedWhileStopping[.pause] = .to(.pausedWhileStopping, .none)
        pausedWhileStopping[.stopAfterPlaying] = .to(.stopped, .halt)
        pausedWhileStopping[.reset] = .to(.stopped, .reset)
        pausedWhileStopping[.disposeAfterPlaying] = .to(.disposed, .teardown)
        pausedWhileStopping[.drained] = .to(.stopped, .finishDrain)
        table[.pausedWhileStopping] = pausedWhileStopping

        var stoppingToDispose = Dictionary(uniqueKeysWithValues: O.allCases.map { ($0, pending) })
        stoppingToDispose[.disposeImmediately] = .to(.disposed, .teardown)
        stoppingToDispose[.disposeAfterPlaying] = .to(.stoppingToDispose, .none)
        stoppingToDispose[.drained] = .to(.disposed, .finishDrainAndTeardown)
        table[.stoppingToDispose] = stoppingToDispose

        var disposed = Dictionary(uniqueKeysWithValues: O.allCases.map { ($0, pending) })
        disposed[.disposeImmediately] = .to(.disposed, .none)
        disposed[.disposeAfterPlaying] = .to(.disposed, .none)
        disposed[.drained] = .to(.disposed, .none)
        table[.disposed] = disposed
        return table
    }()

    func testEveryStateAndOperation() {
        var cells = 0
        for state in S.allCases {
            for operation in O.allCases {
                let want = Self.expected[state]?[operation]
                XCTAssertNotNil(want, "the test's grid lacks \(state) × \(operation)")
                XCTAssertEqual(QueueTransport.outcome(of: operation, in: state), want, "\(state) × \(operation)")
                cells += 1
            }
        }
        XCTAssertEqual(cells, 8 * 11)
    }

    func testIsRunningIsTheRunningStates() {
        let running: Set<S> = [.running, .paused, .stopping, .pausedWhileStopping, .stoppingToDispose]
        for state in S.allCases {
            XCTAssertEqual(QueueTransport.isRunning(state), running.contains(state), "\(state)")
        }
    }

    func testDisposedRefusesEverythingButDisposal() {
        for state in [S.disposed, .stoppingToDispose] {
            for operation in O.allCases where ![.disposeImmediately, .disposeAfterPlaying, .drained].contains(operation) {
                XCTAssertEqual(QueueTransport.outcome(of: operation, in: state), .refused(kAudioQueueErr_DisposalPending), "\(state) × \(operation)")
            }
        }
    }

    /// A playback life walked through the value: prime, start, pause, resume, stop after playing,
    /// drain, dispose.
    func testAPlaybackLife() {
        var transport = QueueTransport()
        func step(_ operation: O) {
            guard case .to(let next, _) = transport.outcome(of: operation) else {
                return XCTFail("\(operation) refused in \(transport.state)")
            }
            transport.enter(next)
        }
        XCTAssertEqual(transport.state, .stopped)
        step(.prime)
        XCTAssertEqual(transport.state, .primed)
        XCTAssertFalse(transport.isRunning)
        step(.start)
        XCTAssertTrue(transport.isRunning)
        step(.pause)
        XCTAssertTrue(transport.isPaused)
        step(.start)
        XCTAssertEqual(transport.state, .running)
        step(.stopAfterPlaying)
        XCTAssertTrue(transport.isDraining)
        XCTAssertTrue(transport.isRunning, "running until it has played out")
        step(.drained)
        XCTAssertEqual(transport.state, .stopped)
        XCTAssertFalse(transport.isRunning)
        step(.disposeAfterPlaying)
        XCTAssertEqual(transport.state, .disposed)
        XCTAssertEqual(transport.outcome(of: .start), .refused(kAudioQueueErr_DisposalPending))
    }
}
