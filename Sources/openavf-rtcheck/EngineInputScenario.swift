// engine-input: an AVAudioEngine's input node into a sink node and a tap, both rendered on the recording stream's thread as the input arrives.
import AVFAudio
import Foundation

/// An engine whose input node feeds a sink node (Apple's real-time way to take the microphone)
/// and a tap: the chain ends short of the output, so it renders on the recording stream's thread
/// as each I/O buffer of input arrives (the I/O unit's input callback). That thread is watched
/// while the input runs and while the tap is taken off and put back (a rewire through the input
/// side's gate).
@MainActor let engineInputScenario = Scenario(name: "engine-input") { _, _, _ in
    let watch = RenderThreadWatch()
    let engine = AVAudioEngine()
    let input = engine.inputNode
    let sink = AVAudioSinkNode { _, frames, _ in
        watch.thread.store(UInt(pthread_self()), ordering: .relaxed)
        watch.cycles.add(1, ordering: .relaxed)
        watch.frames.add(Int(frames), ordering: .relaxed)
        return noErr
    }
    engine.attach(sink)
    engine.connect(input, to: sink, format: nil)
    let tapBlock: AVAudioNodeTapBlock = { _, _ in watch.taps.add(1, ordering: .relaxed) }
    input.installTap(onBus: 0, bufferSize: 4800, format: nil, block: tapBlock)
    try engine.start()
    defer { engine.stop() }
    try watch.waitForCycles(10)
    let rate = input.outputFormat(forBus: 0).sampleRate
    return try watching(watch.thread.load(ordering: .relaxed)) {
        try watch.waitForAudio(seconds: 3, rate: rate)
        input.removeTap(onBus: 0)
        try watch.waitForAudio(seconds: 1, rate: rate)
        input.installTap(onBus: 0, bufferSize: 4800, format: nil, block: tapBlock)
        try watch.waitForAudio(seconds: 3, rate: rate)
        guard watch.taps.load(ordering: .relaxed) > 40 else { throw Failure("the tap heard \(watch.taps.load(ordering: .relaxed)) buffers") }
    }
}
