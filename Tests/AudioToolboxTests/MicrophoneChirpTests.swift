import AudioTestSupport
import XCTest

/// The microphone tests' judge (``MicrophoneChirp``) excuses a recording only for damage the
/// microphone itself carried: a loss of the recording's own still fails.
final class MicrophoneChirpTests: XCTestCase {
    func testTheWitnessExcusesNoLossOfTheRecordingsOwn() throws {
        let server = try TestSound.server()
        let chirp = try MicrophoneChirp(server: server)
        try chirp.waitUntilPlayed()
        // The chirp with 50 ms missing at 1 s, the rest moved up: a dropout in the recording.
        let quiet = [Float](repeating: 0, count: 4800)
        let holed = quiet + Array(chirp.source[0..<48000]) + Array(chirp.source[50400...]) + quiet
        let failure = try XCTUnwrap(chirp.failure(of: holed), "a recording with a 50 ms hole passed")
        XCTAssertTrue(failure.contains("carried the chirp whole"), failure)
    }

    func testAWholeRecordingPasses() throws {
        let server = try TestSound.server()
        let chirp = try MicrophoneChirp(server: server)
        try chirp.waitUntilPlayed()
        let quiet = [Float](repeating: 0, count: 4800)
        XCTAssertNil(chirp.failure(of: quiet + chirp.source + quiet))
    }
}
