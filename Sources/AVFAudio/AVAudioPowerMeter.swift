import AudioToolbox
import Foundation

/// The meters of ``AVAudioPlayer`` and ``AVAudioRecorder``: per-channel average and peak power in
/// dBFS, read from the queue's level meter (`kAudioQueueProperty_CurrentLevelMeter`: RMS and peak
/// of what was played or captured since the previous read) and shaped the way Apple's meters move.
///
/// - Average: the interval's RMS, smoothed in power with a 50 ms time constant (a steady signal
///   reads its exact RMS level: a full-scale sine −3.01 dB). An interval of digital silence reads
///   −160 dB at once.
/// - Peak: rises at once, is held for 0.5 s, then falls 60 dB a second (never below the interval's
///   peak).
/// - 0 dBFS is full scale; −160 dB is the floor.
struct AVAudioPowerMeter {
    static let floor = Decibels.floor
    private static let averageTimeConstant = 0.05
    private static let peakHold = 0.5
    private static let peakFallPerSecond: Float = 60

    /// Whether the owner turned metering on (`isMeteringEnabled`); off, every value reads −160.
    private(set) var isEnabled = false
    private var power: [Float]
    private var peakSetAt: [UInt64]
    private var lastUpdate: UInt64 = 0
    private(set) var average: [Float]
    private(set) var peak: [Float]

    init(channels: Int) {
        power = Array(repeating: 0, count: channels)
        peakSetAt = Array(repeating: 0, count: channels)
        average = Array(repeating: Self.floor, count: channels)
        peak = Array(repeating: Self.floor, count: channels)
    }

    /// Takes the levels measured since the last update (linear RMS and peak per channel).
    mutating func update(rms: [Float], peaks: [Float], now: UInt64 = AudioGetCurrentHostTime()) {
        let dt = lastUpdate == 0 ? 1 : Double(now &- lastUpdate) / 1e9
        lastUpdate = now
        let keep = Float(exp(-dt / Self.averageTimeConstant))
        for c in 0..<average.count {
            let r = c < rms.count ? rms[c] : 0
            let p = c < peaks.count ? peaks[c] : 0
            if p == 0 {
                power[c] = 0
            } else {
                power[c] = keep * power[c] + (1 - keep) * r * r
            }
            average[c] = Decibels.power(power[c])
            let newPeak = Decibels.amplitude(p)
            if newPeak >= peak[c] {
                peak[c] = newPeak
                peakSetAt[c] = now
            } else {
                let held = Double(now &- peakSetAt[c]) / 1e9
                if held > Self.peakHold {
                    let fall = Self.peakFallPerSecond * Float(min(dt, held - Self.peakHold))
                    peak[c] = max(newPeak, peak[c] - fall)
                }
            }
        }
    }

    /// Turns metering on or off, from silence, on `queue` too when there is one.
    mutating func setEnabled(_ on: Bool, queue: AudioQueueRef?) {
        self = AVAudioPowerMeter(channels: average.count)
        isEnabled = on
        if let queue { apply(to: queue) }
    }

    /// Sets the queue's `kAudioQueueProperty_EnableLevelMetering` as the owner asked (new queues).
    func apply(to queue: AudioQueueRef) {
        var on: UInt32 = isEnabled ? 1 : 0
        AudioQueueSetProperty(queue, kAudioQueueProperty_EnableLevelMetering, &on, 4)
    }

    /// Back to silence (a new recording), keeping whether metering is on.
    mutating func clear() { setEnabled(isEnabled, queue: nil) }

    /// Reads the queue's level meter and updates (`updateMeters`); nothing when metering is off.
    mutating func update(from queue: AudioQueueRef?) {
        guard isEnabled, let queue else { return }
        let channels = average.count
        var states = [AudioQueueLevelMeterState](repeating: .init(), count: channels)
        var size = UInt32(MemoryLayout<AudioQueueLevelMeterState>.stride * channels)
        guard AudioQueueGetProperty(queue, kAudioQueueProperty_CurrentLevelMeter, &states, &size) == noErr else { return }
        update(rms: states.map(\.mAveragePower), peaks: states.map(\.mPeakPower))
    }

    /// `averagePower(forChannel:)` or `peakPower(forChannel:)`: −160 when off or out of range.
    func value(channel: Int, peak wantPeak: Bool) -> Float {
        guard isEnabled, average.indices.contains(channel) else { return Self.floor }
        return wantPeak ? peak[channel] : average[channel]
    }
}
