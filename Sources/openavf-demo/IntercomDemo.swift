import AudioSignals
import PrivateSoundServer
import Foundation

/// `Scripts/demo intercom`: two `Intercom`s talk over UDP on loopback against a private server.
/// A's microphone is `micfeed` (espeak-ng speaks into it), its speaker a sink of its own; B's
/// microphone is a silent room (a sink nobody plays to), its speaker the server's `speaker`,
/// recorded here: what B's user hears, with how much of the words came through and how late.
/// Both print their level lines.
func intercomDemo(server: PrivatePulseServer, intercom: String, seconds: Double) throws {
    let room = try IntercomRoom(server: server)
    defer { room.close() }
    let work = FileManager.default.temporaryDirectory.appendingPathComponent("openavf-intercom-\(getpid())")
    try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: work) }

    let common = ["--seconds", String(seconds + 2)]
    say("Intercom A (microphone micfeed, speaker farend) on port \(room.port), B (a silent room, speaker) on port \(room.port + 1), UDP on loopback:")
    let a = try ChildProcess(intercom, room.talkerArguments + common, environment: server.environment, stdout: .inherit, stderr: .inherit)
    let b = try ChildProcess(intercom, room.listenerArguments + common + ["--quiet"], environment: server.environment, stdout: .inherit, stderr: .inherit)
    let heard = try SignalCapture(server: server, device: "speaker.monitor")
    Thread.sleep(forTimeInterval: 1)
    let text = "Hello from the other side. This call runs through a voice processing engine and Opus, over UDP."
    let words = VoiceSignals.scaled(try VoiceSignals.speech(text, voice: VoiceSignals.nearVoice, sampleRate: 48000, in: work), toSpeechRMS: -20, sampleRate: 48000)
    say("\nA's microphone says: \"\(text)\"")
    let talker = try SignalPlayer(server: server, device: "micfeed", samples: words, sampleRate: 48000)
    talker.waitUntilDone()
    _ = a.wait()
    _ = b.wait()
    let played = heard.stop()[0]
    let found = SignalAnalysis.align(words, in: played, maxLag: max(0, played.count - words.count))
    say(String(format: "\nB's speaker played the words with a correlation of %.2f to what A's microphone heard.", found.correlation))
}
