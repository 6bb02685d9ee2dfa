// afplay: plays an audio file on the sound server, with macOS afplay's flags, through AVAudioPlayer.
import AVFAudio
import CommandLineSupport
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

struct Options {
    var volume: Float = 1
    var time: Double?
    var rate: Float?
    var debug = false
    var path = ""
}

func parse(_ arguments: [String]) throws(ToolFailure) -> Options {
    var o = Options()
    var path: String?
    var args = ArgumentCursor(arguments)
    while let a = args.next() {
        switch a {
        case "-h", "--help": printUsageAndExit(usageText)
        case "-v", "--volume": o.volume = min(try args.number(for: a, "a volume from 0") { $0 >= 0 }, 1)
        case "-t", "--time": o.time = try args.number(for: a, "a positive number of seconds") { $0 > 0 }
        case "-r", "--rate": o.rate = try args.number(for: a, "a rate from 0.5 to 2") { $0 >= 0.5 && $0 <= 2 }
        case "-q", "--rQuality": _ = try args.number(for: a, "0 or 1") { (q: Int) in q == 0 || q == 1 }
        case "-d", "--debug": o.debug = true
        default: try args.operand(a, into: &path)
        }
    }
    guard let path else { throw ToolFailure("give an audio file", usage: true) }
    o.path = path
    return o
}

func play(_ o: Options) throws(ToolFailure) {
    let player: AVAudioPlayer
    do {
        player = try AVAudioPlayer(contentsOf: URL(fileURLWithPath: o.path))
    } catch {
        throw ToolFailure((error as NSError).localizedDescription)
    }
    let total = player.duration
    if o.debug {
        let d = player.format.streamDescription.pointee
        FileHandle.standardError.write(Data(String(
            format: "Playing file: %@\nFile format: %d ch, %.0f Hz, '%@'\nDuration: %.3f s\n",
            o.path, d.mChannelsPerFrame, d.mSampleRate, d.mFormatID.fourCharCodeString, total).utf8))
    }
    let finish = Outcome()
    player.delegate = finish
    player.volume = o.volume
    if let rate = o.rate {
        player.enableRate = true
        player.rate = rate
    }
    let terminal = standardErrorIsTerminal
    player.isMeteringEnabled = terminal
    guard player.prepareToPlay(), player.play() else {
        throw ToolFailure("cannot start playback: no sound server answers (PULSE_SERVER or $XDG_RUNTIME_DIR/pulse/native)")
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
            progressLine(String(format: "%7.2f / %7.2f s", player.currentTime, total), level: level)
        }
        // The delegate is called on the main queue, as Apple's: run the main run loop until the
        // next thing to do (the progress line every 0.1 s on a terminal, the -t limit to 2 ms),
        // the delegate's call waking it at once. A turn of the run loop costs CPU: no faster.
        var wait = terminal ? 0.1 : 1.0
        if let limit = o.time { wait = min(wait, max((limit - player.currentTime) / max(Double(player.rate), 0.5), 0.002)) }
        _ = RunLoop.main.run(mode: .default, before: Date(timeIntervalSinceNow: wait))
    }
    if terminal { FileHandle.standardError.write(Data("\n".utf8)) }
    if let error = finish.error { throw ToolFailure("decoding \(o.path) failed: \(error)") }
}

runTool("afplay", usage: usageText) { () throws(ToolFailure) in try play(try parse(Array(CommandLine.arguments.dropFirst()))) }
