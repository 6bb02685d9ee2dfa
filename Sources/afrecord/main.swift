// afrecord: records the sound server's default input into a file, with macOS afrecord's flags,
// through AVAudioRecorder.
import AVFAudio
import AudioToolbox
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

struct Failure: Error {
    let message: String
    let usage: Bool
    init(_ message: String, usage: Bool = false) {
        self.message = message
        self.usage = usage
    }
}

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

/// Hears the recorder's end.
final class Finish: AVAudioRecorderDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var result: Bool?
    private var encodeError: String?

    func audioRecorderDidFinishRecording(_ recorder: AVAudioRecorder, successfully flag: Bool) {
        lock.withLock { result = flag }
    }

    func audioRecorderEncodeErrorDidOccur(_ recorder: AVAudioRecorder, error: (any Error)?) {
        lock.withLock { encodeError = error.map { ($0 as NSError).localizedDescription } ?? "unknown" }
    }

    var finished: Bool? { lock.withLock { result } }
    var error: String? { lock.withLock { encodeError } }
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
        case "-f", "--file":
            let name = try value(a)
            guard let type = CommandLineFormats.fileType(named: name) else {
                throw Failure("unknown file type '\(name)' (known: \(CommandLineFormats.knownFileTypes))")
            }
            o.fileType = type
        case "-d", "--data":
            let spec = try value(a)
            guard let (format, rate) = CommandLineFormats.splitRate(spec) else { throw Failure("bad sample rate in -d \(spec)") }
            if let rate { o.sampleRate = rate }
            o.dataFormat = format
        case "-c", "--channels":
            let v = try value(a)
            guard let c = Int(v), (1...8).contains(c) else { throw Failure("-c takes 1 … 8 channels, not '\(v)'") }
            o.channels = c
        case "-r", "--samplerate":
            let v = try value(a)
            guard let r = Double(v), r >= 1000, r <= 384_000 else { throw Failure("-r takes a sample rate from 1000 to 384000 Hz, not '\(v)'") }
            o.sampleRate = r
        case "-b", "--bitrate":
            let v = try value(a)
            guard let b = Int(v), b > 0 else { throw Failure("-b takes a bit rate in bits per second, not '\(v)'") }
            o.bitRate = b
        case "-q", "--quality":
            let v = try value(a)
            guard let q = Int(v), (0...127).contains(q) else { throw Failure("-q takes a quality from 0 to 127, not '\(v)'") }
            o.quality = q
        case "-t", "--time":
            let v = try value(a)
            guard let t = Double(v), t > 0, t.isFinite else { throw Failure("-t takes a positive number of seconds, not '\(v)'") }
            o.time = t
        default:
            if a.hasPrefix("-") && a.count > 1 { throw Failure("unknown option \(a)", usage: true) }
            guard path == nil else { throw Failure("give one audio file", usage: true) }
            path = a
        }
        i += 1
    }
    guard let path else { throw Failure("give the file to record into", usage: true) }
    o.path = path
    return o
}

/// AVAudioRecorder settings for the options.
func settings(_ o: Options) throws(Failure) -> [String: Any] {
    let ext = (o.path as NSString).pathExtension
    guard let type = o.fileType ?? CommandLineFormats.fileType(named: ext) else {
        throw Failure("cannot tell the file type from '\(o.path)'; give -f")
    }
    let rate = o.sampleRate ?? 44100
    let spec = o.dataFormat ?? {
        switch type {
        case kAudioFileM4AType, kAudioFileMPEG4Type, kAudioFileAAC_ADTSType: return "aac"
        case kAudioFileFLACType: return "flac"
        case kAudioFileAIFFType, kAudioFileAIFCType: return "BEI16"
        default: return "LEI16"
        }
    }()
    var s: [String: Any] = [AVSampleRateKey: rate, AVNumberOfChannelsKey: o.channels, AVAudioFileTypeKey: Int(type)]
    if let b = o.bitRate { s[AVEncoderBitRateKey] = b }
    if let q = o.quality { s[AVEncoderAudioQualityKey] = q }
    if let id = CommandLineFormats.codec(spec) {
        s[AVFormatIDKey] = Int(id)
    } else if let pcm = CommandLineFormats.pcm(spec, rate: rate, channels: UInt32(o.channels)) {
        s[AVFormatIDKey] = Int(kAudioFormatLinearPCM)
        s[AVLinearPCMBitDepthKey] = Int(pcm.mBitsPerChannel)
        s[AVLinearPCMIsFloatKey] = pcm.mFormatFlags & kAudioFormatFlagIsFloat != 0
        s[AVLinearPCMIsBigEndianKey] = pcm.mFormatFlags & kAudioFormatFlagIsBigEndian != 0
    } else {
        throw Failure("unknown data format '\(spec)' (\(CommandLineFormats.knownDataFormats))")
    }
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

func record(_ o: Options) throws(Failure) {
    let url = URL(fileURLWithPath: o.path)
    let recorder: AVAudioRecorder
    do {
        recorder = try AVAudioRecorder(url: url, settings: try settings(o))
    } catch let failure as Failure {
        throw failure
    } catch {
        throw Failure((error as NSError).localizedDescription)
    }
    let finish = Finish()
    recorder.delegate = finish
    let terminal = isatty(2) != 0
    recorder.isMeteringEnabled = terminal
    let signals = StopOnSignal(recorder)
    let started = o.time.map { recorder.record(forDuration: $0) } ?? recorder.record()
    guard started else {
        throw Failure("cannot record into \(o.path): the file cannot be created or no sound server answers (PULSE_SERVER or $XDG_RUNTIME_DIR/pulse/native)")
    }
    var lastLine = 0.0
    while finish.finished == nil {
        let now = Date().timeIntervalSince1970
        if terminal && now - lastLine >= 0.1 && recorder.isRecording {
            lastLine = now
            recorder.updateMeters()
            let level = (0..<o.channels).map { recorder.peakPower(forChannel: $0) }.max() ?? -160
            let bar = String(repeating: "#", count: min(30, max(0, Int((Double(level) + 60) / 2)))).padding(toLength: 30, withPad: " ", startingAt: 0)
            FileHandle.standardError.write(Data((String(format: "\rRecording %7.2f s  %6.1f dB ", recorder.currentTime, level) + bar).utf8))
        }
        usleep(10_000)
    }
    if terminal { FileHandle.standardError.write(Data("\n".utf8)) }
    _ = signals.interrupted
    if let error = finish.error { throw Failure("recording into \(o.path) failed: \(error)") }
}

do {
    try record(try parse(Array(CommandLine.arguments.dropFirst())))
    exit(0)
} catch {
    FileHandle.standardError.write(Data("afrecord: \(error.message)\n".utf8))
    if error.usage { FileHandle.standardError.write(Data(usageText.utf8)) }
    exit(error.usage ? 2 : 1)
}
