package import AudioHAL
import AudioToolbox
import Foundation

/// A ``VirtualBackend`` set as this process's audio system until ``restore()``: the deterministic
/// layer's stand-in for a sound server, whose clock the test advances by hand
/// (``VirtualBackend/advance(frames:streams:)``). Every library path that opens a stream, lists
/// devices or follows server events takes it, as it would take a real server.
package final class VirtualAudioSystem {
    package let backend: VirtualBackend
    private let previous: AudioSystem

    package init(sampleRate: Double = 48000, channels: Int = 2) {
        backend = VirtualBackend(sampleRate: sampleRate, channels: channels)
        previous = AudioSystem.current
        AudioSystem.current = AudioSystem(backend: backend)
    }

    /// Advances the clock `frames` in steps of `step`, waiting after each step until every audio
    /// queue's callback thread has done what that step woke it for (the buffers that finished
    /// came back and were refilled), as a real server's timing gives it time to. Returns what the
    /// speaker played: every output stream mixed, in stereo (a mono stream on both channels),
    /// interleaved. Stops early, at a step's end, when `until` holds (checked after each step,
    /// with the main run loop turned once so that what the library hands to the main queue, a
    /// player's delegate calls, arrives).
    package func run(frames: Int, step: Int = 480, until done: (() -> Bool)? = nil) -> [Float] {
        var speaker: [Float] = []
        speaker.reserveCapacity(frames * 2)
        var moved = 0
        while moved < frames {
            let n = min(step, frames - moved)
            var mix = [Float](repeating: 0, count: n * 2)
            for (stream, samples) in backend.advanceStreams(frames: n) {
                let channels = stream.format.channels
                let m = samples.count / channels
                guard m > 0 else { continue }
                // A stream at another rate than the device's is mixed at the nearest frame.
                for f in 0..<n {
                    let g = m == n ? f : min(m - 1, f * m / n)
                    mix[f * 2] += samples[g * channels]
                    mix[f * 2 + 1] += samples[g * channels + min(1, channels - 1)]
                }
            }
            speaker += mix
            moved += n
            if !waitUntilQueueCallbacksIdle() {
                stalls += 1
                print("VirtualAudioSystem.run: the queues' callback threads did not settle within 5 s")
            }
            if Thread.isMainThread { _ = RunLoop.main.run(mode: .default, before: Date()) }
            if let done, done() { break }
        }
        return speaker
    }

    /// Steps of ``run(frames:step:until:)`` after which the queues' callback threads had not
    /// settled within 5 s: what the speaker got then is not what the library would have given
    /// it. A test that runs the clock asserts that it stays 0.
    package private(set) var stalls = 0

    /// The left and right channels of interleaved stereo.
    package static func channels(_ stereo: [Float]) -> (left: [Float], right: [Float]) {
        (stride(from: 0, to: stereo.count, by: 2).map { stereo[$0] }, stride(from: 1, to: stereo.count, by: 2).map { stereo[$0] })
    }

    /// Puts back the audio system that was current before.
    package func restore() { AudioSystem.current = previous }
}
