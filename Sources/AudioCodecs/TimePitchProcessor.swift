internal import CSonic

/// Changes the speed of interleaved 32-bit float audio and keeps its pitch, or changes its pitch
/// and keeps its speed, with libsonic (the pitch-synchronous overlap-add that ExoPlayer uses for
/// playback speed).
///
/// Input goes in with ``write(_:frames:)`` and comes out shorter (faster) or longer (slower) with
/// ``read(into:maxFrames:)``; the sample rate and channels stay. Runs on the caller's thread and
/// allocates inside libsonic as its buffers grow: never use it on a real-time thread.
package final class TimePitchProcessor {
    package let sampleRate: Int
    package let channels: Int
    private let highQuality: Bool
    private var stream: sonicStream?

    /// `highQuality` false searches the pitch period on a decimated signal (cheaper); true on every sample.
    package init(sampleRate: Int, channels: Int, highQuality: Bool = true) throws {
        guard (1_000...384_000).contains(sampleRate), (1...8).contains(channels), let s = sonicCreateStream(Int32(sampleRate), Int32(channels)) else {
            throw CodecError(.unsupported, "cannot change the speed of \(sampleRate) Hz audio with \(channels) channels")
        }
        self.sampleRate = sampleRate
        self.channels = channels
        self.highQuality = highQuality
        stream = s
        sonicSetQuality(s, highQuality ? 1 : 0)
    }

    deinit { if let stream { sonicDestroyStream(stream) } }

    /// The speed: 2 plays twice as fast (half the frames come out), 0.5 half as fast.
    package var speed: Float {
        get { sonicGetSpeed(stream) }
        set { sonicSetSpeed(stream, newValue) }
    }

    /// The pitch factor (2: an octave up), kept apart from the speed.
    package var pitch: Float {
        get { sonicGetPitch(stream) }
        set { sonicSetPitch(stream, newValue) }
    }

    /// The playback rate of a varispeed: speed and pitch change together (2: twice as fast, an
    /// octave up), by resampling.
    package var rate: Float {
        get { sonicGetRate(stream) }
        set { sonicSetRate(stream, newValue) }
    }

    /// Adds `frames` frames of input.
    package func write(_ samples: UnsafePointer<Float>, frames: Int) {
        guard frames > 0 else { return }
        _ = sonicWriteFloatToStream(stream, UnsafeMutablePointer(mutating: samples), Int32(frames))
    }

    /// Takes up to `maxFrames` frames of output; returns how many were written.
    package func read(into samples: UnsafeMutablePointer<Float>, maxFrames: Int) -> Int {
        guard maxFrames > 0 else { return 0 }
        return Int(sonicReadFloatFromStream(stream, samples, Int32(maxFrames)))
    }

    /// Frames ready to read.
    package var availableFrames: Int { Int(sonicSamplesAvailable(stream)) }

    /// Pushes out what the processor still holds (at the end of the input).
    package func flush() { _ = sonicFlushStream(stream) }

    /// Forgets everything held (after a seek), keeping the speed.
    package func reset() {
        let (speed, pitch, rate) = (self.speed, self.pitch, self.rate)
        if let stream { sonicDestroyStream(stream) }
        stream = sonicCreateStream(Int32(sampleRate), Int32(channels))
        sonicSetQuality(stream, highQuality ? 1 : 0)
        sonicSetSpeed(stream, speed)
        sonicSetPitch(stream, pitch)
        sonicSetRate(stream, rate)
    }
}
