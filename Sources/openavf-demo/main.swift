// The memo demo: records a few seconds from the default microphone into an IMA4 CAF with
// afrecord, shows the recording's level, plays it back with afplay and prints afinfo of the file,
// as a voice-memo app would. On a headless machine a private PulseAudio server is started and its
// microphone carries a phrase spoken by espeak-ng.
import AudioSignals
import PrivateSoundServer
import AudioToolbox
import Foundation

func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

func fail(_ line: String) -> Never {
    say(line)
    exit(1)
}

// `--server pulseaudio|pipewire` starts a private server of that kind whatever the machine runs.
var arguments = Array(CommandLine.arguments.dropFirst())
var asked: PrivatePulseServer.Kind?
if let i = arguments.firstIndex(of: "--server") {
    guard i + 1 < arguments.count, let kind = PrivatePulseServer.Kind(rawValue: arguments[i + 1]) else { fail("--server takes pulseaudio or pipewire") }
    asked = kind
    arguments.removeSubrange(i...i + 1)
}
let privateServer: PrivatePulseServer?
do {
    privateServer = try PrivatePulseServer.serverForThisProcess(kind: asked, announce: say)
} catch {
    fail("No sound server answers here and a private one could not start: \(error)")
}
let environment = privateServer?.environment ?? ProcessInfo.processInfo.environment
let tools = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
func tool(_ name: String) -> String {
    let path = tools.appendingPathComponent(name).path
    guard FileManager.default.isExecutableFile(atPath: path) else { fail("\(name) is not built beside openavf-demo (Scripts/demo builds it)") }
    return path
}

if arguments.first == "intercom" {
    // Two intercoms need the private server's sinks: one is started whatever the machine runs.
    do {
        let server = try privateServer ?? PrivatePulseServer.serverForThisProcess(kind: .pulseaudio, announce: say)!
        try intercomDemo(server: server, intercom: tool("Intercom"), seconds: arguments.dropFirst().first.flatMap(Double.init) ?? 8)
    } catch {
        fail("The intercom demo failed: \(error)")
    }
    exit(0)
}

let seconds = arguments.first.flatMap(Double.init) ?? 4
let work = FileManager.default.temporaryDirectory.appendingPathComponent("openavf-memo-\(getpid())")
try? FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: work) }
let memo = work.appendingPathComponent("memo.caf")

// The microphone: on the private server, espeak-ng's voice played into the sink whose monitor is
// the default source.
var speaker: ChildProcess?
if let privateServer {
    let phrase = work.appendingPathComponent("phrase.wav")
    guard let espeak = PrivatePulseServer.which("espeak-ng"), let paplay = PrivatePulseServer.which("paplay") else {
        fail("espeak-ng and paplay are needed to speak into the private server's microphone")
    }
    let text = "This is a voice memo, recorded in Apple I M A 4 by open A V F audio."
    guard (try? ChildProcess(espeak, ["-w", phrase.path, text], environment: environment).wait()) == 0 else { fail("espeak-ng failed") }
    speaker = try? ChildProcess(paplay, ["--device=micfeed", "--property=media.role=\(PrivatePulseServer.roomRole())", phrase.path], environment: privateServer.environment)
    say("The private server's microphone says: \"\(text)\"")
}

say("Recording \(seconds) s into \(memo.lastPathComponent) (Apple IMA4, 44.1 kHz, mono) with afrecord…")
let recorder = try ChildProcess(
    tool("afrecord"), ["-f", "caff", "-d", "ima4@44100", "-c", "1", "-t", String(seconds), memo.path], environment: environment, stderr: .inherit)
guard recorder.wait() == 0 else { fail("afrecord failed") }
speaker?.terminate()

// The level of the recording, a line per half second: the meter after the fact.
var ext: ExtAudioFileRef?
guard ExtAudioFileOpenURL(memo as CFURL, &ext) == noErr, let file = ext else { fail("the memo cannot be opened") }
var client = AudioStreamBasicDescription(
    mSampleRate: 44100, mFormatID: kAudioFormatLinearPCM, mFormatFlags: kAudioFormatFlagsNativeFloatPacked, mBytesPerPacket: 4,
    mFramesPerPacket: 1, mBytesPerFrame: 4, mChannelsPerFrame: 1, mBitsPerChannel: 32, mReserved: 0)
_ = ExtAudioFileSetProperty(file, kExtAudioFileProperty_ClientDataFormat, UInt32(MemoryLayout<AudioStreamBasicDescription>.size), &client)
var block = [Float](repeating: 0, count: 22050)
var at = 0.0
var loudest = -160.0
say("  time    level (peak dBFS)")
while true {
    var frames = UInt32(block.count)
    let status = block.withUnsafeMutableBytes { raw in
        var list = AudioBufferList(mNumberBuffers: 1, mBuffers: AudioBuffer(mNumberChannels: 1, mDataByteSize: UInt32(raw.count), mData: raw.baseAddress))
        return ExtAudioFileRead(file, &frames, &list)
    }
    guard status == noErr, frames >= 2205 else { break }
    let peak = block[0..<Int(frames)].map { abs(Double($0)) }.max() ?? 0
    let db = peak > 0 ? max(-160, 20 * log10(peak)) : -160
    loudest = max(loudest, db)
    let bar = String(repeating: "#", count: min(40, max(0, Int((db + 60) / 1.5))))
    say(String(format: "  %4.1f s  %6.1f  %@", at, db, bar))
    at += Double(frames) / 44100
}
ExtAudioFileDispose(file)
if loudest < -50 { say("The recording is silent: is the microphone muted?") }

say("Playing it back with afplay…")
let capture = privateServer.flatMap { try? SignalCapture(server: $0, device: "speaker.monitor") }
let player = try ChildProcess(tool("afplay"), [memo.path], environment: environment, stderr: .inherit)
guard player.wait() == 0 else { fail("afplay failed") }
if let capture {
    try? capture.waitFor(frames: capture.frameCount + 4800, timeout: 2)
    let heard = capture.stop()[0]
    if let start = SignalAnalysis.onset(heard, threshold: 0.01), let end = SignalAnalysis.offset(heard, threshold: 0.01) {
        say(String(format: "The speaker played %.2f s of speech at %.1f dBFS RMS.", Double(end - start) / 48000, SignalAnalysis.rmsDB(heard[start...end])))
    } else {
        say("The speaker stayed silent.")
    }
}

say("afinfo \(memo.lastPathComponent):")
let info = try ChildProcess.run(tool("afinfo"), [memo.path], environment: environment, scratch: work.appendingPathComponent("afinfo").path)
say(info.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n"))
