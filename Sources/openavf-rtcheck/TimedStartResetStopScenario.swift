// timed-start-reset-stop: the tone queue started at a host time, reset, stopped at once and started again.
import AudioHAL
import AudioToolbox

@MainActor let timedStartResetStopScenario = Scenario(name: "timed-start-reset-stop") { _, _, thread in
    let tone = try TonePlayback()
    defer { AudioQueueDispose(tone.queue, true) }
    try check(AudioQueuePrime(tone.queue, 0, nil), "AudioQueuePrime")
    return try watching(thread) {
        var at = AudioTimeStamp()
        at.mHostTime = hostNow() + 100_000_000
        at.mFlags = .hostTimeValid
        try check(AudioQueueStart(tone.queue, &at), "AudioQueueStart (timed)")
        try tone.waitForCallbacks(30)
        try check(AudioQueueReset(tone.queue), "AudioQueueReset")
        try tone.refill()
        try tone.waitForCallbacks(20)
        try check(AudioQueueStop(tone.queue, true), "AudioQueueStop (immediate)")
        try tone.refill()
        try check(AudioQueueStart(tone.queue, nil), "AudioQueueStart (again)")
        try tone.waitForCallbacks(20)
        try check(AudioQueueStop(tone.queue, true), "AudioQueueStop (immediate)")
    }
}
