internal import AudioCodecs
import CoreAudioTypes
import Foundation

/// An output queue's time-pitch processor (`kAudioQueueProperty_EnableTimePitch`): its settings
/// and, once audio passes through it, libsonic. Every buffer is processed as it is enqueued, on
/// the enqueuing thread (the processor allocates as it grows, so it never runs on the server
/// thread), so a new rate or pitch applies from the next buffer enqueued.
///
/// Guarded by the queue's lock.
final class QueueTimePitch {
    private let sampleRate: Double
    private let channels: Int
    var enabled = false
    var bypass = false
    var algorithm = kAudioQueueTimePitchAlgorithm_Spectral
    /// `kAudioQueueParam_PlayRate`, 0.5…2.
    var rate: Float = 1
    /// `kAudioQueueParam_Pitch`, cents, −2400…2400.
    var pitchCents: Float = 0
    private var processor: TimePitchProcessor?

    init(sampleRate: Double, channels: Int) {
        self.sampleRate = sampleRate
        self.channels = channels
    }

    /// Whether enqueued audio goes through the processor.
    var isActive: Bool { enabled && !bypass }

    static func isAlgorithm(_ value: UInt32) -> Bool {
        [kAudioQueueTimePitchAlgorithm_Spectral, kAudioQueueTimePitchAlgorithm_TimeDomain, kAudioQueueTimePitchAlgorithm_Varispeed,
         kAudioQueueTimePitchAlgorithm_LowQualityZeroLatency].contains(value)
    }

    /// Runs `frames` frames of `staging` through the processor and puts what comes out back into
    /// it, growing it (and `capacity`, in frames) when the output is longer; returns the frames
    /// out. The first buffers come out a little shorter while the processor fills.
    func process(_ staging: inout UnsafeMutablePointer<Float>, frames: Int, capacity: inout Int) -> Int {
        if processor == nil { processor = try? TimePitchProcessor(sampleRate: Int(sampleRate), channels: channels) }
        guard let processor else { return frames }
        if algorithm == kAudioQueueTimePitchAlgorithm_Varispeed {
            processor.speed = 1
            processor.pitch = 1
            processor.rate = rate
        } else {
            processor.rate = 1
            processor.speed = rate
            // Apple applies the pitch parameter with the spectral algorithm only.
            processor.pitch = algorithm == kAudioQueueTimePitchAlgorithm_Spectral ? Float(pow(2, Double(pitchCents) / 1200)) : 1
        }
        processor.write(staging, frames: frames)
        let available = processor.availableFrames
        if available > capacity {
            staging.deallocate()
            staging = .allocate(capacity: available * channels)
            capacity = available
        }
        return processor.read(into: staging, maxFrames: available)
    }

    /// Forgets what the processor holds (a stop, reset or flush of the queue).
    func reset() { processor?.reset() }
}
