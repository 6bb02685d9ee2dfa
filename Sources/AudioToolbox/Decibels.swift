import Glibc

/// Apple's meter scale, for the queue's `kAudioQueueProperty_CurrentLevelMeterDB` and the player's
/// and recorder's meters: decibels relative to full scale (0 dB), with −160 dB for silence and
/// anything quieter.
package enum Decibels {
    /// The value silence reads.
    package static let floor: Float = -160

    /// The level of a linear amplitude (an RMS or a peak; 1 is full scale): 20 log₁₀.
    package static func amplitude(_ linear: Float) -> Float { linear > 0 ? max(floor, 20 * log10(linear)) : floor }

    /// The level of a power (a mean square; 1 is full scale): 10 log₁₀.
    package static func power(_ meanSquare: Float) -> Float { meanSquare > 0 ? max(floor, 10 * log10(meanSquare)) : floor }
}
