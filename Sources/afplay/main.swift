// afplay: plays an audio file on the sound server, with macOS afplay's flags.
import AudioToolbox
import Foundation

let usageText = """
    usage: afplay [option...] audio_file
      -v, --volume V    playback volume, 0 … 1 (linear; 1 by default)
      -t, --time T      play only the first T seconds
      -r, --rate R      playback rate (not available yet: needs a time-pitch processor)
      -q, --rQuality Q  rate quality (with -r)
      -d, --debug       print the file's type and format before playing
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

/// Reads the file in float and feeds the queue; stops the queue at the end or at the time limit.
final class Feeder: @unchecked Sendable {
    let file: ExtAudioFileRef
    let channels: Int
    let limitFrames: Int64
    let lock = NSLock()
    var played: Int64 = 0
    var ended = false
    /// Set once the queue started: an end found while priming stops the queue only after it starts.
    var started = false
    var failure: OSStatus = noErr

    init(file: ExtAudioFileRef, channels: Int, limitFrames: Int64) {
        self.file = file
        self.channels = channels
        self.limitFrames = limitFrames
    }

    static let callback: AudioQueueOutputCallback = { userData, queue, buffer in
        Unmanaged<Feeder>.fromOpaque(userData!).takeUnretainedValue().fill(queue, buffer)
    }

    func fill(_ queue: AudioQueueRef, _ buffer: AudioQueueBufferRef) {
        lock.lock()
        defer { lock.unlock() }
        guard !ended else { return }
        let capacity = Int(buffer.pointee.mAudioDataBytesCapacity) / (4 * channels)
        var frames = UInt32(min(Int64(capacity), max(limitFrames - played, 0)))
        var list = AudioBufferList(
            mNumberBuffers: 1,
            mBuffers: AudioBuffer(mNumberChannels: UInt32(channels), mDataByteSize: buffer.pointee.mAudioDataBytesCapacity, mData: buffer.pointee.mAudioData))
        let status = frames > 0 ? ExtAudioFileRead(file, &frames, &list) : noErr
        if status != noErr { failure = status }
        guard status == noErr, frames > 0 else {
            ended = true
            if started { AudioQueueStop(queue, false) }  // plays out what is queued, then IsRunning turns 0
            return
        }
        played += Int64(frames)
        buffer.pointee.mAudioDataByteSize = frames * UInt32(4 * channels)
        AudioQueueEnqueueBuffer(queue, buffer, 0, nil)
    }
}

func parse(_ arguments: [String]) throws(Failure) -> (volume: Float, time: Double?, debug: Bool, path: String) {
    var volume: Float = 1
    var time: Double?
    var debug = false
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
            volume = min(f, 1)
        case "-t", "--time":
            let v = try value(a)
            guard let t = Double(v), t > 0 else { throw Failure("-t takes a positive number of seconds, not '\(v)'") }
            time = t
        case "-r", "--rate":
            _ = try value(a)
            throw Failure("-r: playback rate is not implemented yet (it needs a time-pitch processor)")
        case "-q", "--rQuality":
            _ = try value(a)
        case "-d", "--debug": debug = true
        default:
            if a.hasPrefix("-") && a.count > 1 { throw Failure("unknown option \(a)", usage: true) }
            guard path == nil else { throw Failure("give one audio file", usage: true) }
            path = a
        }
        i += 1
    }
    guard let path else { throw Failure("give an audio file", usage: true) }
    return (volume, time, debug, path)
}

func check(_ status: OSStatus, _ what: String) throws(Failure) {
    guard status == noErr else {
        let reason = ExtAudioFileLastFailureReason()
        throw Failure("\(what) (\(status.osStatusDescription))\(reason.isEmpty ? "" : ": \(reason)")")
    }
}

func play(_ options: (volume: Float, time: Double?, debug: Bool, path: String)) throws(Failure) {
    var ext: ExtAudioFileRef?
    try check(ExtAudioFileOpenURL(URL(fileURLWithPath: options.path) as CFURL, &ext), "cannot open \(options.path)")
    guard let file = ext else { throw Failure("cannot open \(options.path)") }
    defer { ExtAudioFileDispose(file) }
    var fileFormat = AudioStreamBasicDescription()
    var size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
    try check(ExtAudioFileGetProperty(file, kExtAudioFileProperty_FileDataFormat, &size, &fileFormat), "cannot read the format")
    var length: Int64 = 0
    size = 8
    _ = ExtAudioFileGetProperty(file, kExtAudioFileProperty_FileLengthFrames, &size, &length)
    let channels = Int(min(max(fileFormat.mChannelsPerFrame, 1), 8))
    var client = AudioStreamBasicDescription(
        mSampleRate: fileFormat.mSampleRate, mFormatID: kAudioFormatLinearPCM, mFormatFlags: kAudioFormatFlagsNativeFloatPacked,
        mBytesPerPacket: UInt32(4 * channels), mFramesPerPacket: 1, mBytesPerFrame: UInt32(4 * channels), mChannelsPerFrame: UInt32(channels),
        mBitsPerChannel: 32, mReserved: 0)
    try check(ExtAudioFileSetProperty(file, kExtAudioFileProperty_ClientDataFormat, UInt32(MemoryLayout<AudioStreamBasicDescription>.size), &client), "cannot decode \(options.path)")
    let total = Double(length) / fileFormat.mSampleRate
    if options.debug {
        FileHandle.standardError.write(Data(String(
            format: "Playing file: %@\nFile format: %d ch, %.0f Hz, '%@'\nDuration: %.3f s\n",
            options.path, fileFormat.mChannelsPerFrame, fileFormat.mSampleRate, fileFormat.mFormatID.fourCharCodeString, total).utf8))
    }
    let limit = options.time.map { Int64($0 * fileFormat.mSampleRate) } ?? Int64.max
    let feeder = Feeder(file: file, channels: channels, limitFrames: limit)
    var queue: AudioQueueRef?
    let status = AudioQueueNewOutput(&client, Feeder.callback, Unmanaged.passUnretained(feeder).toOpaque(), nil, nil, 0, &queue)
    guard status == noErr, let queue else { throw Failure("cannot create a playback queue (\(status.osStatusDescription))") }
    defer { AudioQueueDispose(queue, true) }
    AudioQueueSetParameter(queue, kAudioQueueParam_Volume, options.volume)
    var on: UInt32 = 1
    AudioQueueSetProperty(queue, kAudioQueueProperty_EnableLevelMetering, &on, 4)
    let bufferBytes = UInt32(Int(fileFormat.mSampleRate * 0.05) * 4 * channels)
    for _ in 0..<3 {
        var buffer: AudioQueueBufferRef?
        guard AudioQueueAllocateBuffer(queue, bufferBytes, &buffer) == noErr, let buffer else { throw Failure("cannot allocate buffers") }
        feeder.fill(queue, buffer)
    }
    let started = AudioQueueStart(queue, nil)
    guard started == noErr else {
        throw Failure(started == kAudioQueueErr_InvalidDevice ? "no sound server answers (PULSE_SERVER or $XDG_RUNTIME_DIR/pulse/native)" : "cannot start playback (\(started.osStatusDescription))")
    }
    feeder.lock.lock()
    feeder.started = true
    if feeder.ended { AudioQueueStop(queue, false) }  // the whole file fit in the first buffers
    feeder.lock.unlock()
    let terminal = isatty(2) != 0
    var running: UInt32 = 1
    repeat {
        usleep(100_000)  // the progress line's refresh period
        size = 4
        AudioQueueGetProperty(queue, kAudioQueueProperty_IsRunning, &running, &size)
        if terminal {
            var meters = [AudioQueueLevelMeterState](repeating: .init(), count: channels)
            size = UInt32(MemoryLayout<AudioQueueLevelMeterState>.stride * channels)
            AudioQueueGetProperty(queue, kAudioQueueProperty_CurrentLevelMeterDB, &meters, &size)
            let level = meters.map(\.mPeakPower).max() ?? -160
            let bar = String(repeating: "#", count: min(30, max(0, Int((Double(level) + 60) / 2)))).padding(toLength: 30, withPad: " ", startingAt: 0)
            feeder.lock.lock()
            let elapsed = Double(feeder.played) / fileFormat.mSampleRate
            feeder.lock.unlock()
            FileHandle.standardError.write(Data((String(format: "\r%7.2f / %7.2f s  %6.1f dB ", min(elapsed, total), total, level) + bar).utf8))
        }
    } while running == 1
    if terminal { FileHandle.standardError.write(Data("\n".utf8)) }
    if feeder.failure != noErr {
        throw Failure("reading \(options.path) failed (\(feeder.failure.osStatusDescription)): \(ExtAudioFileLastFailureReason())")
    }
}

do {
    try play(try parse(Array(CommandLine.arguments.dropFirst())))
    exit(0)
} catch {
    FileHandle.standardError.write(Data("afplay: \(error.message)\n".utf8))
    if error.usage { FileHandle.standardError.write(Data(usageText.utf8)) }
    exit(error.usage ? 2 : 1)
}
