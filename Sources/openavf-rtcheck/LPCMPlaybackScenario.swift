// lpcm-playback: a 16-bit LPCM queue fed a tone by its callback: start, pan, a volume ramp, pause and resume, flush, and an asynchronous stop that drains.
import AudioToolbox

@MainActor let lpcmPlaybackScenario = Scenario(name: "lpcm-playback") { _, _, thread in
    // Start, pan, a volume ramp, pause and resume, flush, and an asynchronous stop that drains.
    let tone = try TonePlayback()
    defer { AudioQueueDispose(tone.queue, true) }
    try check(AudioQueuePrime(tone.queue, 0, nil), "AudioQueuePrime")
    return try watching(thread) {
        try check(AudioQueueStart(tone.queue, nil), "AudioQueueStart")
        try tone.waitForCallbacks(30)
        try check(AudioQueueSetParameter(tone.queue, kAudioQueueParam_Pan, -0.7), "pan")
        try check(AudioQueueSetParameter(tone.queue, kAudioQueueParam_VolumeRampTime, 0.2), "ramp time")
        try check(AudioQueueSetParameter(tone.queue, kAudioQueueParam_Volume, 0.3), "volume")
        try tone.waitForCallbacks(30)
        try check(AudioQueuePause(tone.queue), "AudioQueuePause")
        hold(0.2)
        try check(AudioQueueStart(tone.queue, nil), "AudioQueueStart (resume)")
        try tone.waitForCallbacks(20)
        try check(AudioQueueFlush(tone.queue), "AudioQueueFlush")
        try tone.stopAtEnd()
        try wait("the drain") { !tone.isRunning }
    }
}
