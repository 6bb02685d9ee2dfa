import Foundation

/// The microphone tests' signal: a 2 s chirp played into `micfeed` (the room the test server's
/// microphone, `micfeed.monitor`, hears), with `parec` recording the microphone beside the code
/// under test as a witness.
///
/// A recording of the microphone passes when it holds the chirp (correlation ≥ 0.98). On a loaded
/// machine the chirp can reach the microphone damaged, whoever records it: a player into micfeed
/// that runs short, or a server that drops the source's data, damages every recording of the
/// microphone alike, so then the witness decides:
/// a recording that misses the chirp passes only if the witness heard it damaged too and the
/// recording matches what the witness heard (≥ 0.98). A loss of the recording's own fails.
public final class MicrophoneChirp: @unchecked Sendable {
    public let source: [Float]
    public let sampleRate: Int
    private let witness: SignalCapture
    private let player: SignalPlayer

    /// Starts the witness, then plays the chirp into `micfeed`.
    public init(server: PrivatePulseServer, sampleRate: Int = 48000) throws {
        self.sampleRate = sampleRate
        source = SignalAnalysis.chirp(from: 200, to: 4000, sampleRate: Double(sampleRate), seconds: 2)
        witness = try SignalCapture(server: server, device: "micfeed.monitor", sampleRate: sampleRate)
        do {
            player = try SignalPlayer(server: server, device: "micfeed", samples: source, sampleRate: sampleRate)
        } catch {
            _ = witness.stop()
            throw error
        }
    }

    /// Waits until the player has drained and the witness has recorded a tenth of a second more.
    public func waitUntilPlayed() throws {
        player.waitUntilDone()
        try witness.waitFor(frames: witness.frameCount + sampleRate / 10, timeout: 5)
    }

    /// Stops the witness and judges `recorded` (mono, at ``sampleRate``, from before the chirp to
    /// after it): `nil` when it carries what the microphone carried, else what was wrong.
    public func failure(of recorded: [Float]) -> String? {
        let heard = witness.stop()[0]
        let n = source.count
        guard recorded.count >= n else { return "the recording holds \(recorded.count) frames, less than the chirp's \(n)" }
        let found = SignalAnalysis.align(source, in: recorded, maxLag: recorded.count - n)
        if found.correlation >= 0.98 { return nil }
        let mine = "the recording matched the chirp at \(format(found.correlation)) (lag \(found.lag)); damaged tenths [\(damagedTenths(recorded, found.lag))]"
        guard heard.count >= n else { return "\(mine); the witness (parec) recorded only \(heard.count) frames" }
        let direct = SignalAnalysis.align(source, in: heard, maxLag: heard.count - n)
        let witnessed = "the witness (parec) matched it at \(format(direct.correlation)), damaged tenths [\(damagedTenths(heard, direct.lag))]"
        guard direct.correlation < 0.98 else { return "\(mine); \(witnessed): the microphone carried the chirp whole" }
        // What the microphone carried, searched for within half a second of where the chirp was found.
        let carried = Array(heard[direct.lag..<(direct.lag + n)])
        let near = max(0, found.lag - sampleRate / 2)
        let rest = Array(recorded[near...])
        guard rest.count >= n else { return "\(mine); \(witnessed); the recording ends before what it carried" }
        let again = SignalAnalysis.align(carried, in: rest, maxLag: min(sampleRate, rest.count - n))
        guard again.correlation >= 0.98 else {
            return "\(mine); \(witnessed); the recording against the witness's \(format(again.correlation)) at lag \(near + again.lag)"
        }
        print("the chirp reached the microphone damaged: \(mine); \(witnessed); the recording matches the witness's at \(format(again.correlation))")
        return nil
    }

    /// The tenths of the chirp that `x`, from `lag`, matches at under 0.98.
    private func damagedTenths(_ x: [Float], _ lag: Int) -> String {
        let tenth = sampleRate / 10
        return (0..<(source.count / tenth)).compactMap { k -> String? in
            let from = min(x.count, lag + k * tenth), to = min(x.count, lag + (k + 1) * tenth)
            guard to - from == tenth else { return "\(k): cut" }
            let c = SignalAnalysis.correlation(source[(k * tenth)..<((k + 1) * tenth)], x[from..<to])
            return c < 0.98 ? "\(k): \(format(c))" : nil
        }.joined(separator: ", ")
    }

    private func format(_ c: Double) -> String { String(format: "%.3f", c) }
}
