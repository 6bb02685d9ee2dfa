import Foundation

/// A random number generator that can be replayed: SplitMix64 from a seed. Tests that use random
/// inputs take the seed from `OPENAVF_SEED` when set (to replay a failure), else a fresh one, and
/// print it with every failure.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    public let seed: UInt64
    private var state: UInt64

    public init(seed: UInt64) {
        self.seed = seed
        state = seed
    }

    /// The seed `OPENAVF_SEED` names, or a fresh one.
    public static func fromEnvironment() -> SeededGenerator {
        let given = ProcessInfo.processInfo.environment["OPENAVF_SEED"].flatMap { UInt64($0) }
        return SeededGenerator(seed: given ?? UInt64.random(in: 0...UInt64.max))
    }

    /// How to replay: "seed N (OPENAVF_SEED=N replays it)".
    public var replay: String { "seed \(seed) (OPENAVF_SEED=\(seed) replays it)" }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
