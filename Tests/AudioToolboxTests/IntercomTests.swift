import AudioTestSupport
import AudioToolbox
import Foundation
import XCTest

/// `Examples/Intercom` (issue 14's call you can hear): two instances on the private server talk
/// over UDP on loopback, one of them dropping 5 % of its packets and swapping 2 %.
final class IntercomTests: XCTestCase {
    /// An input queue on one of the server's sources, its buffers' capture times kept.
    private func recorder(_ device: String) throws -> (AudioQueueRef, RecordingSink) {
        var format = lpcm(rate: 48000, channels: 1)
        let sink = RecordingSink()
        var queue: AudioQueueRef?
        XCTAssertEqual(AudioQueueNewInput(&format, RecordingSink.callback, sink.context, nil, nil, 0, &queue), noErr)
        let q = try XCTUnwrap(queue)
        let uid: CFString? = device as CFString
        XCTAssertEqual(withUnsafePointer(to: uid) { AudioQueueSetProperty(q, kAudioQueueProperty_CurrentDevice, $0, UInt32(MemoryLayout<CFString?>.size)) }, noErr)
        for _ in 0..<4 {
            var buffer: AudioQueueBufferRef?
            XCTAssertEqual(AudioQueueAllocateBuffer(q, 960 * 2, &buffer), noErr)
            XCTAssertEqual(AudioQueueEnqueueBuffer(q, buffer!, 0, nil), noErr)
        }
        XCTAssertEqual(AudioQueueStart(q, nil), noErr)
        return (q, sink)
    }

    func testACallOverALossyNetworkIsIntelligible() throws {
        let server = try TestSound.server()
        let tool = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("Intercom").path
        guard FileManager.default.isExecutableFile(atPath: tool) else { return XCTFail("Intercom is not built beside the tests: run swift build --build-tests") }
        let room = try IntercomRoom(server: server)
        defer { room.close() }

        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("intercom-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let environment = ProcessInfo.processInfo.environment.merging(server.environment) { $1 }
        func start(_ name: String, _ arguments: [String]) throws -> (ChildProcess, String) {
            let out = dir.appendingPathComponent("\(name).out").path
            return (try ChildProcess(tool, arguments + ["--quiet"], environment: environment, stdout: .file(out), stderr: .file(out + ".err")), out)
        }
        // A talks (the test's speech into micfeed) over the bad network; B plays it on the speaker.
        let (a, aOut) = try start("a", room.talkerArguments + ["--loss", "0.05", "--reorder", "0.02", "--seed", "7"])
        let (b, bOut) = try start("b", room.listenerArguments)
        defer {
            _ = a.terminate()
            _ = b.terminate()
        }
        let ready = { (path: String) in ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").contains("ready") }
        XCTAssertTrue(waitUntil(timeout: 15) { ready(aOut) && ready(bOut) }, "the intercoms did not start: \((try? String(contentsOfFile: aOut + ".err", encoding: .utf8)) ?? "")")

        let (micQueue, mic) = try recorder("micfeed.monitor")
        let (earQueue, ear) = try recorder("speaker.monitor")
        XCTAssertTrue(waitUntil(timeout: 5) { mic.callbackCount >= 25 && ear.callbackCount >= 25 }, "the recorders did not start")
        var words = try VoiceSignals.speech(VoiceSignals.nearText, voice: VoiceSignals.nearVoice, sampleRate: 48000, in: dir)
        words = Array(VoiceSignals.scaled(words, toSpeechRMS: -20, sampleRate: 48000).prefix(48000 * 8))
        let player = try SignalPlayer(server: server, device: "micfeed", samples: words, sampleRate: 48000)
        player.waitUntilDone()
        let target = ear.callbackCount + 25
        XCTAssertTrue(waitUntil(timeout: 5) { ear.callbackCount >= target })
        for (q, sink) in [(micQueue, mic), (earQueue, ear)] {
            sink.lock.lock()
            sink.keepGoing = false
            sink.lock.unlock()
            AudioQueueStop(q, true)
            AudioQueueDispose(q, true)
        }
        _ = a.terminate()
        _ = b.terminate()
        print(((try? String(contentsOfFile: aOut, encoding: .utf8)) ?? "") + ((try? String(contentsOfFile: bOut, encoding: .utf8)) ?? ""))

        // The words as the microphone heard them, found in what the far speaker played.
        let heard = mic.samples, played = ear.samples
        let onset = try XCTUnwrap(SignalAnalysis.onset(heard, threshold: 0.01), "nothing reached the microphone")
        let spoken = Array(heard[onset..<min(heard.count, onset + 48000 * 6)])
        // The call's lag, from a second of its first words: the first second, or the next ones
        // if the call's hold changed inside it (the rest then plays earlier or later, and one lag
        // fits only half the second).
        var head = (lag: 0, correlation: -1.0), headStart = 0
        for second in 0..<min(3, spoken.count / 48000) where head.correlation < 0.7 {
            let window = Array(spoken[(second * 48000)..<((second + 1) * 48000)])
            let found = SignalAnalysis.align(window, in: played, maxLag: max(0, played.count - 48000))
            if found.correlation > head.correlation { (head, headStart) = (found, second * 48000) }
        }
        XCTAssertGreaterThan(head.correlation, 0.5, "the first words are not in what the speaker played")
        // Then half a second at a time, each lined up within two packets of the one before (a
        // half that fits badly, by its quarters): where the jitter buffer's hold changed (a late
        // packet played after its concealment, a hold played away in a pause), the rest of the
        // call plays earlier or later, which a listener does not hear but one alignment for the
        // whole call would count as lost words. The figure is the halves' mean, weighted by
        // loudness.
        var weighted = 0.0, weights = 0.0, halves: [String] = [], jumps: [String] = []
        var lag = head.lag - (onset + headStart)
        /// `length` samples of the words from `at`, found in what the speaker played within
        /// `reach` (two packets) of `lag`: the correlation, the lag to go on with (the one found,
        /// where the piece has sound and fits), and the piece's energy; nil past the recording's end.
        func lineUp(at: Int, length: Int, lag: Int, reach: Int = 1920) -> (correlation: Double, lag: Int, energy: Double)? {
            let piece = Array(heard[at..<(at + length)])
            guard max(0, at + lag - reach) + length + 2 * reach <= played.count,
                let found = SignalAnalysis.locate(piece, in: played, around: at + lag, within: reach)
            else { return nil }
            let fits = found.correlation > 0.5 && SignalAnalysis.rmsDB(piece[...]) > -40
            return (found.correlation, fits ? found.position - at : lag, piece.reduce(0.0) { $0 + Double($1) * Double($1) })
        }
        for start in stride(from: onset, to: onset + spoken.count - 24000, by: 24000) {
            guard SignalAnalysis.rmsDB(heard[start..<(start + 24000)]) > -40 else { continue }
            guard let half = lineUp(at: start, length: 24000, lag: lag) else { break }
            var correlation = half.correlation
            lag = half.lag
            if correlation < 0.8 {
                // The jitter buffer's hold may have changed inside this half second, the rest of
                // it earlier or later: one lag fits half of it (0.49–0.54 where the halves either
                // side were 0.8–0.9). Each quarter lined up on its own, the gap itself still counts.
                var quarters = 0.0, quarterWeights = 0.0, quarterLag = lag
                for q in 0..<2 {
                    guard let quarter = lineUp(at: start + q * 12000, length: 12000, lag: quarterLag) else { break }
                    quarters += quarter.correlation * quarter.energy
                    quarterWeights += quarter.energy
                    quarterLag = quarter.lag
                }
                if quarterWeights > 0 && quarters / quarterWeights > correlation {
                    correlation = quarters / quarterWeights
                    lag = quarterLag
                }
            }
            if correlation < 0.5, let wide = lineUp(at: start, length: 24000, lag: lag, reach: 24000), wide.correlation >= 0.8 {
                // Not within two packets, but within half a second: the call's delay jumped (a
                // busy PipeWire can do that, and at the old lag every half after it would read
                // as lost), a gap a listener hears once, not words lost for the rest of the call.
                // The half it happened in still counts what it lost.
                jumps.append(String(format: "%+.0f ms at %.1f s", Double(wide.lag - lag) / 48, Double(start - onset) / 48000))
                correlation = wide.correlation
                lag = wide.lag
            }
            weighted += correlation * half.energy
            weights += half.energy
            halves.append(String(format: correlation != half.correlation ? "%.2f(q)" : "%.2f", correlation))
        }
        let intelligible = weights > 0 ? weighted / weights : 0
        print(String(format: "intercom: correlation with the words sent %.3f (half seconds lined up: ", intelligible) + halves.joined(separator: " ") + ")"
              + (jumps.isEmpty ? "" : "; the call's delay jumped " + jumps.joined(separator: ", ")))
        XCTAssertGreaterThanOrEqual(intelligible, 0.8, "the words through the call")
        // Mouth to ear: from when the microphone captured a sample to when the speaker played it,
        // by the two recordings' capture times, over the second of words lined up first.
        let micStart = Double(mic.stamps[0].mHostTime) / 1e9, earStart = Double(ear.stamps[0].mHostTime) / 1e9
        let latency = (earStart + Double(head.lag) / 48000) - (micStart + Double(onset + headStart) / 48000)
        print(String(format: "intercom: mouth-to-ear latency %.1f ms (20 ms packets, 10 ms I/O buffers; target ≤ 120 ms)", latency * 1000))
        XCTAssertGreaterThan(latency, 0.02, "a latency below a packet is a broken measurement")
        XCTAssertLessThan(latency, 0.3)
    }
}
