// engine-timepitch: a looping player through AVAudioUnitTimePitch, its rate and pitch to each end of their ranges, reset at the slowest and bypassed and back.
import AVFAudio
import Foundation

/// A looping player through `AVAudioUnitTimePitch` into the main mixer, with a silent source node
/// beside it whose block tells the render thread: the rate and pitch go to each end of their
/// ranges (libsonic's speed, rate ÷ pitch, from 1/16 to 16), the unit is reset at the slowest
/// (a flush on the render thread) and bypassed and back.
@MainActor let timePitchScenario = Scenario(name: "engine-timepitch") { _, _, _ in
    let watch = RenderThreadWatch()
    let engine = AVAudioEngine()
    let format = AVAudioFormat(standardFormatWithSampleRate: 48000, channels: 2)!
    let player = AVAudioPlayerNode(), timePitch = AVAudioUnitTimePitch()
    let source = watch.silentSource(format: format)
    for node in [player, timePitch, source] as [AVAudioNode] { engine.attach(node) }
    engine.connect(player, to: timePitch, format: format)
    engine.connect(timePitch, to: engine.mainMixerNode, format: format)
    engine.connect(source, to: engine.mainMixerNode, format: format)
    // A tone gliding from 80 to 800 Hz: libsonic finds pitch periods across its whole range.
    let tone = AVAudioPCMBuffer(pcmFormat: format, frameCapacity: 96000)!
    var phase = 0.0
    for i in 0..<96000 {
        phase += 2 * Double.pi * (80 + 720 * Double(i) / 96000) / 48000
        for c in 0..<2 { tone.floatChannelData![c][i] = Float(0.3 * sin(phase)) }
    }
    tone.frameLength = 96000
    player.scheduleBuffer(tone, at: nil, options: .loops)
    try engine.start()
    player.play()
    try watch.waitForCycles(10)
    defer { engine.stop() }
    return try watching(watch.thread.load(ordering: .relaxed)) {
        for (rate, pitch) in [(0.25, 2400.0), (4, -2400), (1.0 / 32, 2400), (32, -2400), (0.5, 0), (1.5, 0), (1, 700), (1, 0)] as [(Float, Float)] {
            timePitch.rate = rate
            timePitch.pitch = pitch
            try watch.waitForAudio(seconds: 1)
            if rate == 0.25 { timePitch.reset() }
        }
        timePitch.rate = 0.25
        timePitch.pitch = 2400
        timePitch.bypass = true
        try watch.waitForAudio(seconds: 0.5)
        timePitch.bypass = false
        try watch.waitForAudio(seconds: 1)
        timePitch.reset()
        try watch.waitForAudio(seconds: 1)
    }
}
