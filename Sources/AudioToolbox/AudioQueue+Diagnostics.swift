import Synchronization
// Figures about a queue that Apple's API does not expose, for this package's benchmark and
// tests (package access: not part of the public surface).

/// What the device layer and the engine saw of a queue's stream.
package struct AudioQueueDiagnostics: Sendable {
    /// Underruns (playback) or overruns (recording) the sound server reported.
    package var serverXruns: Int
    /// Playback frames rendered as silence because no buffer was enqueued (queue starvation).
    package var starvedFrames: Int
    /// Recording frames dropped because no buffer was enqueued.
    package var droppedFrames: Int
    /// The stream's buffer duration as the server granted it, in seconds (0 before it opens).
    package var grantedBufferDuration: Double
}

package func AudioQueueGetDiagnostics(_ inAQ: AudioQueueRef) -> AudioQueueDiagnostics? {
    guard let queue = liveQueues.lookup(inAQ) else { return nil }
    queue.lock.lock()
    let stream = queue.stream
    queue.lock.unlock()
    return AudioQueueDiagnostics(
        serverXruns: stream?.xrunCount ?? 0,
        starvedFrames: queue.engine.starvedFrames.load(ordering: .relaxed),
        droppedFrames: queue.engine.droppedFrames.load(ordering: .relaxed),
        grantedBufferDuration: stream?.grantedBufferDuration ?? 0)
}
