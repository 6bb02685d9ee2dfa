// engine: an AVAudioEngine rendering Apple's sample-code graph, a source node through a distortion and a tap, with parameter changes, a pause and a scheduled interruption.
import AVFAudio
import Foundation

/// An engine rendering Apple's sample-code graph (a looping player → EQ → reverb → main mixer),
/// a source node through a distortion into the mixer and a tap on it, for ten seconds with
/// parameter changes, a pause and a scheduled interruption: its render thread is watched.
@MainActor let engineScenario = Scenario(name: "engine") { _, files, _ in
    let watch = RenderThreadWatch()
    let engine = AVAudioEngine()
    let format = AVAudioFormat(standardFormatWithSampleRate: 48000, channels: 2)!
    let player = AVAudioPlayerNode(), eq = AVAudioUnitEQ(numberOfBands: 2), reverb = AVAudioUnitReverb()
    let source = watch.silentSource(format: format)
    let distortion = AVAudioUnitDistortion()
    distortion.loadFactoryPreset(.multiEverythingIsBroken)
    for node in [player, eq, reverb, source, distortion] as [AVAudioNode] { engine.attach(node) }
    engine.connect(player, to: eq, format: format)
    engine.connect(eq, to: reverb, format: format)
    engine.connect(reverb, to: engine.mainMixerNode, format: format)
    engine.connect(source, to: distortion, format: format)
    engine.connect(distortion, to: engine.mainMixerNode, format: format)
    eq.bands[0].bypass = false
    eq.bands[0].gain = 6
    let tone = AVAudioPCMBuffer(pcmFormat: format, frameCapacity: 48000)!
    for c in 0..<2 { for i in 0..<48000 { tone.floatChannelData![c][i] = Float(0.1 * sin(2 * Double.pi * 440 * Double(i) / 48000)) } }
    tone.frameLength = 48000
    player.scheduleBuffer(tone, at: nil, options: .loops)
    engine.mainMixerNode.installTap(onBus: 0, bufferSize: 4800, format: nil) { _, _ in watch.taps.add(1, ordering: .relaxed) }
    try engine.start()
    player.play()
    try watch.waitForCycles(10)
    defer { engine.stop() }
    let first = try watching(watch.thread.load(ordering: .relaxed)) {
        try watch.waitForAudio(seconds: 4)
        eq.bands[0].gain = -6
        reverb.wetDryMix = 30
        distortion.wetDryMix = 80
        player.volume = 0.5
        player.scheduleBuffer(tone, at: nil, options: .interrupts)
        // Resets run on the render thread, at the start of each unit's next render.
        for node in [eq, reverb, distortion, engine.mainMixerNode] as [AVAudioNode] { node.reset() }
        try watch.waitForAudio(seconds: 2)
    }
    // Pausing closes the output's stream and starting opens another, on a thread of its own:
    // setup, outside the window, which goes on on the new thread from its first cycles.
    engine.pause()
    try engine.start()
    try watch.waitForCycles(10)
    let second = try watching(watch.thread.load(ordering: .relaxed)) {
        try watch.waitForAudio(seconds: 4)
        guard watch.taps.load(ordering: .relaxed) > 50 else { throw Failure("the tap heard nothing") }
    }
    return first + second
}
