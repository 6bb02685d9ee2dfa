// voice-unit: the voice-processing I/O unit, its echo back through the test server's acoustic path, both its threads watched through the switches' changes.
import AudioTestSupport
import AudioToolbox
import Foundation

/// The voice-processing I/O unit (issue 14) with its echo coming back through the test server's
/// acoustic path: both its threads, processing on, at 44.1 kHz on the client's side (the
/// processor runs at 48 kHz, so both resamplers run), through the switches' changes.
@MainActor let voiceUnitScenario = Scenario(name: "voice-unit", libpulseOwn: capturedBlockRelease) { server, _, _ in
    let path = try AcousticPath(server: server)
    defer { path.close() }
    // A second of a 330 Hz tone, over and over, at 44.1 kHz on the client's side.
    let tone = (0..<44100).map { Float(0.3 * sin(2 * Double.pi * 330 * Double($0) / 44100)) }
    let call = try VoiceUnitCall(far: tone, loops: true, rate: 44100, recordSeconds: 2)
    let unit = call.unit
    let listener: AUVoiceIOMutedSpeechActivityEventListener = { _ in }
    try check(
        withUnsafePointer(to: listener) {
            AudioUnitSetProperty(unit, kAUVoiceIOProperty_MutedSpeechActivityEventListener, kAudioUnitScope_Global, 0, $0, UInt32(MemoryLayout.size(ofValue: listener)))
        }, "listener")
    try call.start()
    defer { call.stop() }
    call.playFarEnd()
    try wait("both threads") { call.renderThread != 0 && call.captureThread != 0 }
    func flip(_ id: AudioUnitPropertyID, _ value: UInt32) throws {
        var v = value
        try check(AudioUnitSetProperty(unit, id, kAudioUnitScope_Global, 0, &v, 4), "switch \(id)")
    }
    func audio(_ counter: () -> Int, seconds: Double) throws {
        let target = counter() + Int(seconds * 44100)
        try wait("\(seconds) s of audio", timeout: seconds * 2 + 5) { counter() >= target }
    }
    let captured = { call.capturedFrames }, rendered = { call.playedFrames }
    // The processor's first second (the delay estimate settles) before either window.
    try audio(captured, seconds: 1)
    let capture = try watching(call.captureThread) {
        // Ten seconds in all with processing on (issue 14's line), switches flipped on the way.
        try audio(captured, seconds: 6)
        try flip(kAUVoiceIOProperty_VoiceProcessingEnableAGC, 0)
        try flip(kAUVoiceIOProperty_MuteOutput, 1)
        try audio(captured, seconds: 1)
        try flip(kAUVoiceIOProperty_MuteOutput, 0)
        try flip(kAUVoiceIOProperty_VoiceProcessingEnableAGC, 1)
        try flip(kAUVoiceIOProperty_BypassVoiceProcessing, 1)
        try audio(captured, seconds: 1)
        try flip(kAUVoiceIOProperty_BypassVoiceProcessing, 0)
        try audio(captured, seconds: 2)
    }
    let playback = try watching(call.renderThread) { try audio(rendered, seconds: 3) }
    return capture + playback
}
