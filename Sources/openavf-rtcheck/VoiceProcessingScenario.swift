// voice-processing: each library's voice processor at 16 and 48 kHz over a far end's moving echo and a near talker, on a thread of its own.
import AudioGraph
import AudioTestSupport
import Foundation

/// Frames for a voice processor, in raw memory, and the processor unretained: what a capture
/// thread would hold.
struct VoiceFrames: @unchecked Sendable {
    let processor: Unmanaged<VoiceProcessor>
    let far: UnsafeMutablePointer<Float>
    let near: UnsafeMutablePointer<Float>
    let length: Int

    func run(_ range: Range<Int>) {
        processor._withUnsafeGuaranteedRef { p in
            for k in range { p.process(near: near + k * length, far: far + k * length) }
        }
    }
}

/// Voice processing (issue 14): each library's processor, at a call's 16 kHz and the output's
/// 48 kHz, over echo of a far end (whose path moves at once) and a near talker, on a thread of its own that the counter
/// watches, after a second of warming up; a voice-processing unit will run it on its capture
/// thread.
@MainActor let voiceScenario = Scenario(name: "voice-processing") { _, _, _ in
    var total = Count()
    for library in VoiceProcessor.Library.allCases {
        for rate in [16000, 48000] {
            guard let processor = VoiceProcessor(library: library, sampleRate: rate) else { throw Failure("\(library) refused \(rate) Hz") }
            let n = processor.frameLength
            var generator = SeededGenerator(seed: 7)
            let seconds = 6
            // Raw memory and an unretained processor: the window holds the processor's own
            // calls, not this loop's reference counting. A far end of tone and noise; the near
            // end its echo 40 ms later and a talker's tone.
            let count = rate * seconds
            let far = UnsafeMutablePointer<Float>.allocate(capacity: count)
            let near = UnsafeMutablePointer<Float>.allocate(capacity: count)
            defer {
                far.deallocate()
                near.deallocate()
            }
            // The talker speaks in the first and the third half second; the echo's path grows
            // by 2.5 ms at 3 s and shrinks by 1 ms at 4.5 s, so the window holds the follower's
            // search, replay and move (``VoiceProcessor/movesFollowed``: at least one; a move of
            // the delay estimate's just before disarms the follower for the next).
            let step = 2 * Double.pi / Double(rate)
            for i in 0..<count {
                far[i] = Float(0.1 * sin(Double(i) * step * 310)) + Float.random(in: -0.3...0.3, using: &generator)
                let delay = rate / 25 + (i >= 3 * rate ? rate / 400 : 0) - (i >= rate * 9 / 2 ? rate / 1000 : 0)
                let echo: Float = i >= delay ? 0.5 * far[i - delay] : 0
                let talking = i < rate / 2 || (i >= rate && i < rate * 3 / 2)
                near[i] = echo + (talking ? Float(0.1 * sin(Double(i) * step * 520)) : 0)
            }
            let work = VoiceFrames(processor: .passUnretained(processor), far: far, near: near, length: n)
            let frames = count / n
            work.run(0..<100)
            // On a thread of its own, the one watched (watching this one would count the
            // counter's own report), which outlives the window: its ending (Foundation's
            // releases) is not counted.
            let ready = DispatchSemaphore(value: 0), go = DispatchSemaphore(value: 0), done = DispatchSemaphore(value: 0)
            let end = DispatchSemaphore(value: 0)
            nonisolated(unsafe) var worker: pthread_t?
            let thread = Thread {
                worker = pthread_self()
                ready.signal()
                go.wait()
                work.run(100..<frames)
                done.signal()
                end.wait()
            }
            thread.start()
            ready.wait()
            total = total + watching(UInt(worker!)) {
                go.signal()
                done.wait()
            }
            end.signal()
            withExtendedLifetime(processor) {}
            if library == .speex && processor.movesFollowed == 0 {
                throw Failure("speex at \(rate) Hz followed none of the echo path's 2 moves: the window held no move")
            }
        }
    }
    return total
}
