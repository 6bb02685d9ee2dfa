// afplay: plays an audio file on the sound server, with macOS afplay's flags, through AVAudioPlayer.
import AVFAudio
import Foundation

let usageText = """
    usage: afplay [option...] audio_file
      -v, --volume V    playback volume, 0 … 1 (linear; 1 by default)
      -t, --time T      play only the first T seconds of the file
      -r, --rate R      playback rate, 0.5 … 2, pitch kept
      -q, --rQuality Q  rate quality, 0 or 1: accepted for macOS scripts; the rate processor
                        (libsonic) has one quality, its best
      -d, --debug       print the file's type, format and duration before playing
      -h, --help        this text
    Plays any file afinfo reads, on the default output of the sound server. On a terminal a
    progress line shows elapsed and total time and the level.

    """

struct Failure: Error {
    let message: String
    let usage: Bool
    init(_ message: String, usage: Bool = false) {
        self.message = message
        self.usage = usage
    }
}

struct Options {
    var volume: Float = 1
    var time: Double?
    var rate: Float?
    var debug = false
    var path = ""
}

/// Hears the player's end.
final class Finish: AVAudioPlayerDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var result: Bool?
    private var decodeError: String?

    func audioPlayerDidFinishPlaying(_ player: AVAudioPlayer, successfully flag: Bool) {
        lock.withLock { result = flag }
    }

    func audioPlayerDecodeErrorDidOccur(_ player: AVAudioPlayer, error: (any Error)?) {
        lock.withLock { decodeError = error.map { ($0 as NSError).localizedDescription } ?? "unknown" }
    }

    var finished: Bool? { lock.withLock { result } }
    var error: String? { lock.withLock { decodeError } }
}

func parse(_ arguments: [String]) throws(Failure) -> Options {
    var o = Options()
    var path: String?
    var i = 0
    func value(_ flag: String) throws(Failure) -> String {
        i += 1
        guard i < arguments.count else { throw Failure("\(flag) needs a value", usage: true) }
        return arguments[i]
    }
    while i < arguments.count {
        let a = arguments[i]
        switch a {
        case "-h", "--help":
            print(usageText, terminator: "")
            exit(0)
        case "-v", "--volume":
            let v = try value(a)
            guard let f = Float(v), f >= 0 else { throw Failure("-v takes a volume from 0, not '\(v)'") }
            o.volume = min(f, 1)
        case "-t", "--time":
            let v = try value(a)
            guard let t = Double(v), t > 0 else { throw Failure("-t takes a positive number of seconds, not '\(v)'") }
            o.time = t
        case "-r", "--rate":
            let v = try value(a)
            guard let r = Float(v), r >= 0.5, r <= 2 else { throw Failure("-r takes a rate from 0.5 to 2, not '\(v)'") }
            o.rate = r
        case "-q", "--rQuality":
            let v = try value(a)
            guard v == "0" || v == "1" else { throw Failure("-q takes 0 or 1, not '\(v)'") }
        case "-d", "--debug": o.debug = true
        default:
            if a.hasPrefix("-") && a.count > 1 { throw Failure("unknown option \(a)", usage: true) }
            guard path == nil else { throw Failure("give one audio file", usage: true) }
            path = a
        }
        i += 1
    }
    guard let path else { throw Failure("give an audio file", usage: true) }
    o.path = path
    return o
}

func play(_ o: Options) throws(Failure) {
    let player: AVAudioPlayer
    do {
        player = try AVAudioPlayer(contentsOf: URL(fileURLWithPath: o.path))
    } catch {
        throw Failure((error as NSError).localizedDescription)
    }
    let total = player.duration
    if o.debug {
        let d = player.format.streamDescription.pointee
        FileHandle.standardError.write(Data(String(
            format: "Playing file: %@\nFile format: %d ch, %.0f Hz, '%@'\nDuration: %.3f s\n",
            o.path, d.mChannelsPerFrame, d.mSampleRate, d.mFormatID.fourCharCodeString, total).utf8))
    }
    let finish = Finish()
    player.delegate = finish
    player.volume = o.volume
    if let rate = o.rate {
        player.enableRate = true
        player.rate = rate
    }
    let terminal = isatty(2) != 0
    player.isMeteringEnabled = terminal
    guard player.prepareToPlay(), player.play() else {
        throw Failure("cannot start playback: no sound server answers (PULSE_SERVER or $XDG_RUNTIME_DIR/pulse/native)")
    }
    var lastLine = 0.0
    while finish.finished == nil {
        let now = Date().timeIntervalSince1970
        if let limit = o.time, player.currentTime >= limit {
            player.stop()
            break
        }
        if terminal && now - lastLine >= 0.1 {
            lastLine = now
            player.updateMeters()
            let level = (0..<player.numberOfChannels).map { player.peakPower(forChannel: $0) }.max() ?? -160
            let bar = String(repeating: "#", count: min(30, max(0, Int((Double(level) + 60) / 2)))).padding(toLength: 30, withPad: " ", startingAt: 0)
            FileHandle.standardError.write(Data((String(format: "\r%7.2f / %7.2f s  %6.1f dB ", player.currentTime, total, level) + bar).utf8))
        }
        usleep(2000)  // the time limit's resolution
    }
    if terminal { FileHandle.standardError.write(Data("\n".utf8)) }
    if let error = finish.error { throw Failure("decoding \(o.path) failed: \(error)") }
}

do {
    try play(try parse(Array(CommandLine.arguments.dropFirst())))
    exit(0)
} catch {
    FileHandle.standardError.write(Data("afplay: \(error.message)\n".utf8))
    if error.usage { FileHandle.standardError.write(Data(usageText.utf8)) }
    exit(error.usage ? 2 : 1)
}
