// afrecord: records the sound server's default input into a file, with macOS afrecord's flags,
// through AVAudioRecorder.
import AVFAudio
import AudioToolbox
import CommandLineSupport
import Foundation

let usageText = """
    usage: afrecord [option...] audio_file
      -f, --file TYPE       file type: \(CommandLineFormats.knownFileTypes)
                            (default: from the file name's extension)
      -d, --data FORMAT     data format[@rate]: \(CommandLineFormats.knownDataFormats)
                            (default: aac for m4af/mp4f/adts, flac for flac, BEI16 for AIFF, else LEI16)
      -c, --channels N      channels, 1 … 8 (default 1)
      -r, --samplerate R    sample rate in Hz (default 44100; or @rate in -d)
      -t, --time T          record T seconds, then stop (default: until Ctrl-C)
      -b, --bitrate B       encoder bit rate in bits per second (aac)
      -q, --quality Q       encoder quality, 0 … 127
      -h, --help            this text
    Records the default input of the sound server. On a terminal a line shows the elapsed time and
    the level. Ctrl-C (or SIGTERM) stops and leaves a complete file.

    """

struct Options {
    var fileType: AudioFileTypeID?
    var dataFormat: String?
    var channels = 1
    var sampleRate: Double?
    var time: Double?
    var bitRate: Int?
    var quality: Int?
    var path = ""
}

func parse(_ arguments: [String]) throws(ToolFailure) -> Options {
    var o = Options()
    var path: String?
    var args = ArgumentCursor(arguments)
    while let a = args.next() {
        switch a {
        case "-h", "--help": printUsageAndExit(usageText)
        case "-f", "--file":
            let name = try args.value(for: a)
            guard let type = CommandLineFormats.fileType(named: name) else {
                throw ToolFailure("unknown file type '\(name)' (known: \(CommandLineFormats.knownFileTypes))")
            }
            o.fileType = type
        case "-d", "--data":
            let spec = try args.value(for: a)
            guard let (format, rate) = CommandLineFormats.splitRate(spec) else { throw ToolFailure("bad sample rate in -d \(spec)") }
            if let rate { o.sampleRate = rate }
            o.dataFormat = format
        case "-c", "--channels": o.channels = try args.number(for: a, "1 … 8 channels") { (1...8).contains($0) }
        case "-r", "--samplerate": o.sampleRate = try args.number(for: a, "a sample rate from 1000 to 384000 Hz") { $0 >= 1000 && $0 <= 384_000 }
        case "-t", "--time": o.time = try args.number(for: a, "a positive number of seconds") { $0 > 0 && $0.isFinite }
        case "-b", "--bitrate": o.bitRate = try args.number(for: a, "a bit rate in bits per second") { $0 > 0 }
        case "-q", "--quality": o.quality = try args.number(for: a, "a quality from 0 to 127") { (0...127).contains($0) }
        default: try args.operand(a, into: &path)
        }
    }
    guard let path else { throw ToolFailure("give the file to record into", usage: true) }
    o.path = path
    return o
}

/// AVAudioRecorder settings for the options.
func settings(_ o: Options) throws(ToolFailure) -> [String: Any] {
    let ext = (o.path as NSString).pathExtension
    guard let type = o.fileType ?? CommandLineFormats.fileType(named: ext) else {
        throw ToolFailure("cannot tell the file type from '\(o.path)'; give -f")
    }
    let rate = o.sampleRate ?? 44100
    let spec = o.dataFormat ?? CommandLineFormats.defaultDataFormat(for: type) ?? "LEI16"
    var s: [String: Any] = [AVSampleRateKey: rate, AVNumberOfChannelsKey: o.channels, AVAudioFileTypeKey: Int(type)]
    if let id = CommandLineFormats.codec(spec) {
        s[AVFormatIDKey] = Int(id)
    } else if var pcm = CommandLineFormats.pcm(spec, rate: rate, channels: UInt32(o.channels)), let format = AVAudioFormat(streamDescription: &pcm) {
        s.merge(format.settings) { _, pcmKeys in pcmKeys }  // AVFormatIDKey and the AVLinearPCM… keys
    } else {
        throw ToolFailure("unknown data format '\(spec)' (\(CommandLineFormats.knownDataFormats))")
    }
    if let b = o.bitRate { s[AVEncoderBitRateKey] = b }
    if let q = o.quality { s[AVEncoderAudioQualityKey] = q }
    return s
}

/// Stops the recorder on Ctrl-C or SIGTERM (the handlers run on a dispatch queue, not in a signal handler).
final class StopOnSignal: @unchecked Sendable {
    private var sources: [any DispatchSourceSignal] = []
    private let queue = DispatchQueue(label: "afrecord.signals")
    private let lock = NSLock()
    private var stopped = false

    init(_ recorder: AVAudioRecorder) {
        for sig in [SIGINT, SIGTERM] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: queue)
            source.setEventHandler { [weak self, weak recorder] in
                self?.lock.withLock { self?.stopped = true }
                recorder?.stop()
            }
            source.resume()
            sources.append(source)
        }
    }

    var interrupted: Bool { lock.withLock { stopped } }
}

func record(_ o: Options) throws(ToolFailure) {
    let url = URL(fileURLWithPath: o.path)
    let recorder: AVAudioRecorder
    do {
        recorder = try AVAudioRecorder(url: url, settings: try settings(o))
    } catch let failure as ToolFailure {
        throw failure
    } catch {
        throw ToolFailure((error as NSError).localizedDescription)
    }
    let finish = Outcome()
    recorder.delegate = finish
    let terminal = standardErrorIsTerminal
    recorder.isMeteringEnabled = terminal
    let signals = StopOnSignal(recorder)
    let started = o.time.map { recorder.record(forDuration: $0) } ?? recorder.record()
    guard started else {
        throw ToolFailure("cannot record into \(o.path): the file cannot be created or no sound server answers (PULSE_SERVER or $XDG_RUNTIME_DIR/pulse/native)")
    }
    var lastLine = 0.0
    while finish.finished == nil {
        let now = Date().timeIntervalSince1970
        if terminal && now - lastLine >= 0.1 && recorder.isRecording {
            lastLine = now
            recorder.updateMeters()
            let level = (0..<o.channels).map { recorder.peakPower(forChannel: $0) }.max() ?? -160
            progressLine(String(format: "Recording %7.2f s", recorder.currentTime), level: level)
        }
        usleep(10_000)
    }
    if terminal { FileHandle.standardError.write(Data("\n".utf8)) }
    _ = signals.interrupted
    if let error = finish.error { throw ToolFailure("recording into \(o.path) failed: \(error)") }
}

runTool("afrecord", usage: usageText) { () throws(ToolFailure) in try record(try parse(Array(CommandLine.arguments.dropFirst()))) }
