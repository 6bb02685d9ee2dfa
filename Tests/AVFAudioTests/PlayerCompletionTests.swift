import AVFAudio
import AudioTestSupport
import AudioToolbox
import Foundation
import XCTest

/// Every way an `AVAudioPlayer` reaches its end tells the delegate exactly once, on either server
/// (pipewire-pulse refuses some drains; a player that waited for one never heard its end): 100
/// plays to the end, 100 with one loop, 100 seeks while playing and 100 timed starts, ten players
/// at a time.
final class PlayerCompletionTests: XCTestCase {
    enum Way: String, CaseIterable {
        case toTheEnd = "play to the end", loop = "one loop", seek = "seek while playing", timedStart = "timed start"
    }

    func testEveryWayToTheEndReachesTheDelegateExactlyOnce() throws {
        _ = try TestSound.server()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("openavf-completions-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let url = dir.appendingPathComponent("short.wav")
        try PlayerFixtures.tone(url, seconds: 0.1)

        // Each round's players are kept until the main queue (where delegates are called) has
        // drained once after the last end, so that a second call for any of them is counted.
        var counts: [Way: [Int]] = [:]
        var failures: [Way: Int] = [:]
        let started = Date()
        for way in Way.allCases {
            for _ in 0..<10 {
                var round: [(player: AVAudioPlayer, log: PlayerDelegateLog)] = []
                for _ in 0..<10 {
                    let player = try AVAudioPlayer(contentsOf: url)
                    let log = PlayerDelegateLog()
                    player.delegate = log
                    switch way {
                    case .toTheEnd:
                        XCTAssertTrue(player.play())
                    case .loop:
                        player.numberOfLoops = 1
                        XCTAssertTrue(player.play())
                    case .seek:
                        XCTAssertTrue(player.play())
                        player.currentTime = 0.05
                    case .timedStart:
                        XCTAssertTrue(player.play(atTime: player.deviceCurrentTime + 0.05))
                    }
                    round.append((player, log))
                }
                XCTAssertTrue(
                    waitUntil(timeout: 5) { round.allSatisfy { !$0.log.finished.isEmpty } },
                    "\(way.rawValue): \(round.filter { $0.log.finished.isEmpty }.count) of 10 players never finished")
                let drained = NSLock()
                nonisolated(unsafe) var done = false
                DispatchQueue.main.async { drained.withLock { done = true } }
                XCTAssertTrue(waitUntil(timeout: 2) { drained.withLock { done } })
                counts[way, default: []] += round.map { $0.log.finished.count }
                failures[way, default: 0] += round.filter { !$0.log.finished.allSatisfy { $0 } }.count
            }
        }
        for way in Way.allCases {
            let wayCounts = counts[way] ?? []
            XCTAssertEqual(wayCounts.count, 100)
            XCTAssertEqual(wayCounts.filter { $0 == 1 }.count, 100, "\(way.rawValue): finish counts \(Dictionary(grouping: wayCounts, by: { $0 }).mapValues(\.count))")
            XCTAssertEqual(failures[way], 0, "\(way.rawValue): a finish without success")
        }
        print("400 players (4 ways × 100, ten at a time) each finished exactly once in \(String(format: "%.1f", Date().timeIntervalSince(started))) s")
    }
}
