// afconvert: converts audio files between types and formats, with macOS afconvert's flags.
import AudioToolbox
import CommandLineSupport
import Foundation

typealias Failure = ToolFailure

let usageText = """
    usage: afconvert [option...] input_file [output_file]
      -f, --file TYPE       output file type: caff WAVE AIFF AIFC m4af mp4f adts flac MPG3
                            (or caf wav aiff aifc m4a mp4 aac mp3); default: from the output name
      -d, --data FORMAT[@RATE]
                            output data format: aac ima4 ulaw alaw alac flac .mp3 opus, or linear
                            PCM as [BE|LE][F|I|UI]BITS (LEI16, BEF32, I8, UI8…); default: the
                            type's usual format; @RATE resamples
      -c, --channels N      output channel count
      -b, --bitrate BPS     total bit rate for lossy formats, in bits per second
      -q, --quality Q       codec quality, 0 (fastest) … 127 (best)
      -r, --src-quality Q   sample rate converter quality, 0 … 127
      -v, --verbose         print the formats and progress
      -h, --help            this text

    """

struct Options {
    var fileType: AudioFileTypeID?
    var dataFormat: String?
    var sampleRate: Double?
    var channels: UInt32?
    var bitRate: UInt32?
    var quality: UInt32?
    var srcQuality: UInt32?
    var verbose = false
    var input = ""
    var output: String?
}

func parse(_ arguments: [String]) throws(Failure) -> Options {
    var o = Options()
    var positional: [String] = []
    var i = 0
    func value(_ flag: String) throws(Failure) -> String {
        i += 1
        guard i < arguments.count else { throw Failure("\(flag) needs a value", usage: true) }
        return arguments[i]
    }
    func number(_ flag: String) throws(Failure) -> UInt32 {
        let text = try value(flag)
        guard let n = UInt32(text) else { throw Failure("\(flag) takes a number, not '\(text)'", usage: true) }
        return n
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
        case "-c", "--channels": o.channels = try number(a)
        case "-b", "--bitrate": o.bitRate = try number(a)
        case "-q", "--quality": o.quality = try number(a)
        case "-r", "--src-quality": o.srcQuality = try number(a)
        case "-v", "--verbose": o.verbose = true
        default:
            if a.hasPrefix("-") && a.count > 1 { throw Failure("unknown option \(a)", usage: true) }
            positional.append(a)
        }
        i += 1
    }
    guard (1...2).contains(positional.count) else { throw Failure("give an input file and optionally an output file", usage: true) }
    o.input = positional[0]
    o.output = positional.count == 2 ? positional[1] : nil
    if let c = o.channels, !(1...8).contains(c) { throw Failure("-c \(c): channels must be 1 … 8") }
    if let q = o.quality, q > 127 { throw Failure("-q \(q): quality is 0 … 127") }
    if let q = o.srcQuality, q > 127 { throw Failure("-r \(q): quality is 0 … 127") }
    return o
}

func check(_ status: OSStatus, _ what: String, reason: () -> String = { ExtAudioFileLastFailureReason() }) throws(Failure) {
    guard status == noErr else {
        let why = reason()
        throw Failure("\(what) (\(status.osStatusDescription))\(why.isEmpty ? "" : ": \(why)")")
    }
}

func property<T>(_ ext: ExtAudioFileRef, _ id: ExtAudioFilePropertyID, _ initial: T) throws(Failure) -> T {
    var value = initial
    var size = UInt32(MemoryLayout<T>.size)
    let status = withUnsafeMutableBytes(of: &value) { ExtAudioFileGetProperty(ext, id, &size, $0.baseAddress!) }
    try check(status, "reading a file property")
    return value
}

func describe(_ f: AudioStreamBasicDescription) -> String {
    var s = "\(f.mChannelsPerFrame) ch, \(Int(f.mSampleRate)) Hz, '\(f.mFormatID.fourCharCodeString)'"
    if f.mFormatID == kAudioFormatLinearPCM {
        let float = f.mFormatFlags & kAudioFormatFlagIsFloat != 0
        let big = f.mFormatFlags & kAudioFormatFlagIsBigEndian != 0
        s += " \(f.mBitsPerChannel)-bit \(big ? "big" : "little")-endian \(float ? "float" : f.mFormatFlags & kAudioFormatFlagIsSignedInteger != 0 ? "signed integer" : "unsigned integer")"
    }
    return s
}

func convert(_ o: Options) throws(Failure) {
    var input: ExtAudioFileRef?
    try check(ExtAudioFileOpenURL(URL(fileURLWithPath: o.input) as CFURL, &input), "cannot open \(o.input)")
    guard let input else { throw Failure("cannot open \(o.input)") }
    defer { ExtAudioFileDispose(input) }
    let source = try property(input, kExtAudioFileProperty_FileDataFormat, AudioStreamBasicDescription())
    let length = try property(input, kExtAudioFileProperty_FileLengthFrames, Int64(0))

    // Output type: -f, else the output name's extension.
    var type = o.fileType
    if type == nil, let output = o.output {
        type = CommandLineFormats.fileType(named: (output as NSString).pathExtension.lowercased())
        if type == nil { throw Failure("cannot tell the output file type from '\(output)'; give -f") }
    }
    guard let type else { throw Failure("give an output file or -f", usage: true) }
    let output = o.output ?? ((o.input as NSString).deletingPathExtension + "." + (CommandLineFormats.extensions[type] ?? "caf"))
    if output == o.input { throw Failure("the output would overwrite the input; give an output file name") }

    let rate = o.sampleRate ?? source.mSampleRate
    let channels = o.channels ?? source.mChannelsPerFrame
    var destination: AudioStreamBasicDescription
    // Without -d: the type's usual format; a CAF keeps linear PCM as it is ("").
    let spec = o.dataFormat ?? CommandLineFormats.defaultDataFormat(for: type) ?? (source.mFormatID == kAudioFormatLinearPCM ? "" : "LEI16")
    if spec.isEmpty {
        destination = source
        destination.mSampleRate = rate
        if channels != source.mChannelsPerFrame {
            destination.mChannelsPerFrame = channels
            destination.mBytesPerFrame = source.mBytesPerFrame / source.mChannelsPerFrame * channels
            destination.mBytesPerPacket = destination.mBytesPerFrame
        }
    } else if let id = CommandLineFormats.codec(spec) {
        var flags: UInt32 = 0
        if id == kAudioFormatAppleLossless || id == kAudioFormatFLAC {
            let bits = source.mFormatID == kAudioFormatLinearPCM ? source.mBitsPerChannel : 16
            flags = bits > 20 ? (bits > 24 ? 4 : 3) : 1
        }
        destination = AudioStreamBasicDescription(
            mSampleRate: rate, mFormatID: id, mFormatFlags: flags, mBytesPerPacket: 0, mFramesPerPacket: 0, mBytesPerFrame: 0,
            mChannelsPerFrame: channels, mBitsPerChannel: 0, mReserved: 0)
    } else if let pcm = CommandLineFormats.pcm(spec, rate: rate, channels: channels) {
        destination = pcm
    } else {
        throw Failure("unknown data format '\(spec)' (\(CommandLineFormats.knownDataFormats))")
    }

    var out: ExtAudioFileRef?
    try check(
        ExtAudioFileCreateWithURL(URL(fileURLWithPath: output) as CFURL, type, &destination, nil, AudioFileFlags.eraseFile.rawValue, &out),
        "cannot write '\(destination.mFormatID.fourCharCodeString)' data to a '\(type.fourCharCodeString)' file \(output)")
    guard let out else { throw Failure("cannot create \(output)") }
    var finished = false
    defer {
        if !finished {
            ExtAudioFileDispose(out)
            unlink(output)
        }
    }

    // The client format both files meet in: the destination itself when it is linear PCM at the
    // same rate (no float round trip for lossless PCM), else 32-bit float.
    var client: AudioStreamBasicDescription
    if destination.mFormatID == kAudioFormatLinearPCM {
        client = destination
    } else {
        client = AudioStreamBasicDescription(
            mSampleRate: rate, mFormatID: kAudioFormatLinearPCM, mFormatFlags: kAudioFormatFlagsNativeFloatPacked, mBytesPerPacket: 4 * channels,
            mFramesPerPacket: 1, mBytesPerFrame: 4 * channels, mChannelsPerFrame: channels, mBitsPerChannel: 32, mReserved: 0)
    }
    let size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
    try check(ExtAudioFileSetProperty(input, kExtAudioFileProperty_ClientDataFormat, size, &client), "cannot convert \(describe(source)) to \(describe(client))")
    try check(ExtAudioFileSetProperty(out, kExtAudioFileProperty_ClientDataFormat, size, &client), "cannot encode \(describe(destination))")
    var converter: AudioConverterRef?
    var refSize = UInt32(MemoryLayout<AudioConverterRef?>.size)
    if ExtAudioFileGetProperty(out, kExtAudioFileProperty_AudioConverter, &refSize, &converter) == noErr, let converter {
        if var bitRate = o.bitRate {
            try check(AudioConverterSetProperty(converter, kAudioConverterEncodeBitRate, 4, &bitRate), "cannot set the bit rate to \(bitRate)", reason: { "" })
        }
        if var quality = o.quality { _ = AudioConverterSetProperty(converter, kAudioConverterCodecQuality, 4, &quality) }
    }
    if var q = o.srcQuality {
        var inputConverter: AudioConverterRef?
        refSize = UInt32(MemoryLayout<AudioConverterRef?>.size)
        if ExtAudioFileGetProperty(input, kExtAudioFileProperty_AudioConverter, &refSize, &inputConverter) == noErr, let inputConverter {
            _ = AudioConverterSetProperty(inputConverter, kAudioConverterSampleRateConverterQuality, 4, &q)
        }
        // The quality applies when the converter is rebuilt: set the client format again.
        try check(ExtAudioFileSetProperty(input, kExtAudioFileProperty_ClientDataFormat, size, &client), "cannot convert the sample rate")
    }
    if o.verbose {
        FileHandle.standardError.write(Data("Input file: \(o.input), \(length) frames\nInput format: \(describe(source))\nOutput file: \(output)\nOutput format: \(describe(destination))\n".utf8))
    }

    let chunk = 32768
    let buffer = UnsafeMutableRawPointer.allocate(byteCount: chunk * Int(client.mBytesPerFrame), alignment: 16)
    defer { buffer.deallocate() }
    var done: Int64 = 0
    var lastReport = -1
    let expected = max(Int64(Double(length) * rate / source.mSampleRate), 1)
    let showProgress = o.verbose || (isatty(2) != 0 && Double(length) / source.mSampleRate > 30)
    while true {
        var n = UInt32(chunk)
        var list = AudioBufferList(
            mNumberBuffers: 1, mBuffers: AudioBuffer(mNumberChannels: channels, mDataByteSize: UInt32(chunk) * client.mBytesPerFrame, mData: buffer))
        try check(ExtAudioFileRead(input, &n, &list), "reading \(o.input) failed")
        if n == 0 { break }
        try check(ExtAudioFileWrite(out, n, &list), "writing \(output) failed")
        done += Int64(n)
        let percent = Int(min(done * 100 / expected, 100))
        if showProgress && percent / 10 != lastReport / 10 {
            lastReport = percent
            FileHandle.standardError.write(Data("progress: \(percent)%\n".utf8))
        }
    }
    finished = true
    try check(ExtAudioFileDispose(out), "finishing \(output) failed")
    if o.verbose { FileHandle.standardError.write(Data("wrote \(done) frames\n".utf8)) }
}

runTool("afconvert", usage: usageText) { () throws(ToolFailure) in try convert(try parse(Array(CommandLine.arguments.dropFirst()))) }
