package import AudioHAL

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

    /// Puts back the audio system that was current before.
    package func restore() { AudioSystem.current = previous }
}
