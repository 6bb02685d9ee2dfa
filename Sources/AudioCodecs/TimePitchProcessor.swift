internal import CSonic

/// Changes the speed of interleaved 32-bit float audio and keeps its pitch, or changes its pitch
/// and keeps its speed, with libsonic (the pitch-synchronous overlap-add that ExoPlayer uses for
/// playback speed).
///
/// Input goes in with ``write(_:frames:)`` and comes out shorter (faster) or longer (slower) with
/// ``read(into:maxFrames:)``; the sample rate and channels stay. Runs on the caller's thread and
/// allocates inside libsonic as its buffers grow: never use it on a real-time thread, except as
/// ``reserve(maximumWrite:minimumSpeed:)`` allows.
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

    /// Grows libsonic's buffers, once and cheaply, to the most that later calls can need, so
    /// that they never allocate again, as long as the caller keeps to this pattern: it writes at
    /// most `maximumWrite` frames at a time, at a speed of at least `minimumSpeed`, only once the
    /// output is empty (the last read returned fewer frames than asked), and it flushes only at
    /// speed 1, with the output empty. (Pitch and rate stay 1: they would use another buffer.)
    ///
    /// The bound follows libsonic 0.2's algorithm. It processes its input while it holds at least
    /// `maxRequired` = 2 × (rate ÷ `SONIC_MIN_PITCH`) frames, so fewer stay between calls and a
    /// write holds fewer than `maxRequired` + `maximumWrite`; a flush adds 2 × `maxRequired` of
    /// silence to what is held and first checks room for the held frames twice over, fewer than
    /// 4 × `maxRequired`. Out of n input frames come at most n above speed 1 (a pitch period is
    /// dropped or copied), 2n from ½ to 1 (one period doubled, then copied), and below ½, for each
    /// period p it finds (`SONIC_MAX_PITCH`…`SONIC_MIN_PITCH` Hz), p + k frames for the k =
    /// ⌊p·speed ÷ (1 − speed)⌋ it consumes; at speed 1 it copies. Both buffers are grown by
    /// writing silence at speed 1, which copies without searching for pitch (the costly part: a
    /// warm-up at the extreme speeds took half a second). No bound holds where k can be 0 (below
    /// 6 kHz at speed 1/16): libsonic then stops consuming its input, which grows.
    package func reserve(maximumWrite: Int, minimumSpeed: Float) {
        let maxRequired = 2 * (sampleRate / Int(SONIC_MIN_PITCH))
        let held = maxRequired + max(maximumWrite, 0)
        var ratio: Float = minimumSpeed < 1 ? 2 : 1
        if minimumSpeed < 0.5 {
            for period in (sampleRate / Int(SONIC_MAX_PITCH))...(sampleRate / Int(SONIC_MIN_PITCH)) {
                // As libsonic computes it (float, truncated); none consumed makes nothing.
                let consumed = Int(Float(period) * minimumSpeed / (1 - minimumSpeed))
                if consumed > 0 { ratio = max(ratio, Float(period + consumed) / Float(consumed)) }
            }
        }
        let inputFrames = max(held, 4 * maxRequired)
        let outputFrames = max(Int((Float(held) * ratio).rounded(.up)), 3 * maxRequired, held)
        let silence = UnsafeMutablePointer<Float>.allocate(capacity: inputFrames * channels)
        defer { silence.deallocate() }
        silence.initialize(repeating: 0, count: inputFrames * channels)
        let (speed, pitch, rate) = (self.speed, self.pitch, self.rate)
        (self.speed, self.pitch, self.rate) = (1, 1, 1)
        while availableFrames > 0 { _ = read(into: silence, maxFrames: inputFrames) }
        // The first write grows the input to `inputFrames`; each one copies to the output, which
        // is not read until it holds `outputFrames`.
        var written = 0
        while written < outputFrames {
            let n = written == 0 ? inputFrames : min(inputFrames, outputFrames - written)
            write(silence, frames: n)
            written += n
        }
        while availableFrames > 0 { _ = read(into: silence, maxFrames: inputFrames) }
        (self.speed, self.pitch, self.rate) = (speed, pitch, rate)
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
