import AudioTestSupport
import AudioToolbox
import Foundation
import XCTest

/// Acceptance 2: files this library writes are read by ffprobe/sox as what they are, and files
/// written by ffmpeg, sox and espeak-ng are read here with the same content.
final class InteropTests: XCTestCase {
    var dir: URL!
    let rate = 44100.0
    let frames = 44100 + 777

    override func setUpWithError() throws { dir = try temporaryDirectory() }
    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: dir) }

    struct Probe {
        var formatName = ""
        var codec = ""
        var sampleRate = 0
        var channels = 0
    }

    func probe(_ url: URL) throws -> Probe {
        let out = try runTool(
            "ffprobe", ["-v", "error", "-select_streams", "a:0", "-show_entries", "format=format_name:stream=codec_name,sample_rate,channels", "-of", "default=noprint_wrappers=1", url.path],
            in: dir)
        var p = Probe()
        for line in out.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { continue }
            switch parts[0] {
            case "format_name": p.formatName = parts[1]
            case "codec_name": p.codec = parts[1]
            case "sample_rate": p.sampleRate = Int(parts[1]) ?? 0
            case "channels": p.channels = Int(parts[1]) ?? 0
            default: break
            }
        }
        return p
    }

    func testFilesWrittenHereReadTheSameInFFprobeAndSox() throws {
        struct Case {
            let name: String; let type: AudioFileTypeID; let format: AudioStreamBasicDescription
            let ffFormat: String; let codec: String
            /// Frames ffmpeg decodes may differ by this much (lossy codecs' trims).
            let tolerance: Int
            let sox: Bool
        }
        let cases = [
            Case(name: "s16.wav", type: kAudioFileWAVEType, format: pcmFormat(bits: 16), ffFormat: "wav", codec: "pcm_s16le", tolerance: 0, sox: true),
            Case(name: "f32.wav", type: kAudioFileWAVEType, format: pcmFormat(bits: 32, float: true), ffFormat: "wav", codec: "pcm_f32le", tolerance: 0, sox: true),
            Case(name: "u8.wav", type: kAudioFileWAVEType, format: pcmFormat(bits: 8, signed: false), ffFormat: "wav", codec: "pcm_u8", tolerance: 0, sox: true),
            Case(name: "ulaw.wav", type: kAudioFileWAVEType, format: compressed(kAudioFormatULaw), ffFormat: "wav", codec: "pcm_mulaw", tolerance: 0, sox: true),
            Case(name: "s24.aif", type: kAudioFileAIFFType, format: pcmFormat(bits: 24, bigEndian: true), ffFormat: "aiff", codec: "pcm_s24be", tolerance: 0, sox: true),
            Case(name: "sowt.aifc", type: kAudioFileAIFCType, format: pcmFormat(bits: 16), ffFormat: "aiff", codec: "pcm_s16le", tolerance: 0, sox: true),
            Case(name: "ima4.aifc", type: kAudioFileAIFCType, format: compressed(kAudioFormatAppleIMA4), ffFormat: "aiff", codec: "adpcm_ima_qt", tolerance: 64, sox: false),
            Case(name: "s16.caf", type: kAudioFileCAFType, format: pcmFormat(bits: 16, bigEndian: true), ffFormat: "caf", codec: "pcm_s16be", tolerance: 0, sox: true),
            Case(name: "f64.caf", type: kAudioFileCAFType, format: pcmFormat(bits: 64, float: true), ffFormat: "caf", codec: "pcm_f64le", tolerance: 0, sox: true),
            Case(name: "ima4.caf", type: kAudioFileCAFType, format: compressed(kAudioFormatAppleIMA4), ffFormat: "caf", codec: "adpcm_ima_qt", tolerance: 64, sox: false),
            Case(name: "alac.caf", type: kAudioFileCAFType, format: compressed(kAudioFormatAppleLossless, flags: 1), ffFormat: "caf", codec: "alac", tolerance: 0, sox: false),
            Case(name: "aac.caf", type: kAudioFileCAFType, format: compressed(kAudioFormatMPEG4AAC), ffFormat: "caf", codec: "aac", tolerance: 2048, sox: false),
            Case(name: "aac.m4a", type: kAudioFileM4AType, format: compressed(kAudioFormatMPEG4AAC), ffFormat: "mov,mp4,m4a,3gp,3g2,mj2", codec: "aac", tolerance: 1024, sox: false),
            Case(name: "alac.m4a", type: kAudioFileM4AType, format: compressed(kAudioFormatAppleLossless, flags: 3), ffFormat: "mov,mp4,m4a,3gp,3g2,mj2", codec: "alac", tolerance: 0, sox: false),
            Case(name: "s16.flac", type: kAudioFileFLACType, format: compressed(kAudioFormatFLAC, flags: 1), ffFormat: "flac", codec: "flac", tolerance: 0, sox: true),
            Case(name: "aac.aac", type: kAudioFileAAC_ADTSType, format: compressed(kAudioFormatMPEG4AAC), ffFormat: "aac", codec: "aac", tolerance: 2048, sox: false),
        ]
        let signal = testSignal(frames: frames, channels: 2, rate: rate)
        for c in cases {
            let url = dir.appendingPathComponent(c.name)
            try writeWithExtAudioFile(url, type: c.type, format: c.format, samples: signal, channels: 2, rate: rate)
            let p = try probe(url)
            XCTAssertEqual(p.formatName, c.ffFormat, c.name)
            XCTAssertEqual(p.codec, c.codec, c.name)
            XCTAssertEqual(p.sampleRate, Int(rate), c.name)
            XCTAssertEqual(p.channels, 2, c.name)
            let decoded = try decodeWithFFmpeg(url, in: dir)
            XCTAssertLessThanOrEqual(abs(decoded.count / 2 - frames), c.tolerance, "ffmpeg decodes \(decoded.count / 2) frames of \(frames): \(c.name)")
            if c.sox {
                let samples = try runTool("sox", ["--i", "-s", url.path], in: dir).trimmingCharacters(in: .whitespacesAndNewlines)
                XCTAssertEqual(Int(samples), frames, "sox --i -s: \(c.name)")
                let soxRate = try runTool("sox", ["--i", "-r", url.path], in: dir).trimmingCharacters(in: .whitespacesAndNewlines)
                XCTAssertEqual(soxRate, "44100", c.name)
            }
        }
    }

    /// A file another program wrote reads here as that program's own decoder (ffmpeg) reads it.
    func assertReadsLikeFFmpeg(_ url: URL, exact: Bool, lengthTolerance: Int = 0, file: StaticString = #filePath, line: UInt = #line) throws {
        let ours = try readWithExtAudioFile(url)
        var theirs = try decodeWithFFmpeg(url, in: dir)
        if theirs.count > ours.samples.count && lengthTolerance > 0 { theirs.removeLast(theirs.count - ours.samples.count) }
        let name = url.lastPathComponent
        if let dump = ProcessInfo.processInfo.environment["OPENAVF_DUMP"] {
            try writeFloatRaw(ours.samples, to: URL(fileURLWithPath: dump + "/ours-" + name + ".f32"))
            try writeFloatRaw(theirs, to: URL(fileURLWithPath: dump + "/theirs-" + name + ".f32"))
        }
        XCTAssertLessThanOrEqual(abs(ours.samples.count - theirs.count) / ours.channels, lengthTolerance, "length: \(name) (\(ours.samples.count / ours.channels) vs ffmpeg \(theirs.count / ours.channels))", file: file, line: line)
        if exact {
            XCTAssertEqual(ours.samples.count, theirs.count, name, file: file, line: line)
            XCTAssertTrue(ours.samples == theirs, "content differs: \(name)", file: file, line: line)
        } else {
            let snr = snrDB(theirs, ours.samples)
            XCTAssertGreaterThan(snr, 60, "SNR against ffmpeg's decode \(snr) dB: \(name)", file: file, line: line)
        }
    }

    func testFilesWrittenByFFmpegSoxAndEspeakRead() throws {
        let source = dir.appendingPathComponent("source.f32")
        try writeFloatRaw(testSignal(frames: frames, channels: 2, rate: rate), to: source)
        let input = ["-v", "error", "-y", "-f", "f32le", "-ar", "44100", "-ac", "2", "-i", source.path]
        let ffmpegFiles: [(String, [String], Bool, Int)] = [
            ("ff-s16.wav", ["-c:a", "pcm_s16le"], true, 0),
            ("ff-s24.wav", ["-c:a", "pcm_s24le"], true, 0),
            ("ff-f32.wav", ["-c:a", "pcm_f32le"], true, 0),
            ("ff-alaw.wav", ["-c:a", "pcm_alaw"], true, 0),
            ("ff-s16.aiff", ["-c:a", "pcm_s16be"], true, 0),
            ("ff-ima4.aiff", ["-c:a", "adpcm_ima_qt"], false, 64),
            ("ff-s16.caf", ["-c:a", "pcm_s16le"], true, 0),
            ("ff-ima4.caf", ["-c:a", "adpcm_ima_qt"], false, 64),
            ("ff-alac.caf", ["-c:a", "alac"], true, 0),
            // ffmpeg's decoder ignores the MP4 end trim we honour: up to one packet more there.
            ("ff-aac.m4a", ["-c:a", "aac", "-b:a", "128k"], false, 1024),
            ("ff-alac.m4a", ["-c:a", "alac"], true, 0),
            ("ff.flac", ["-c:a", "flac"], true, 0),
            ("ff.mp3", ["-c:a", "libmp3lame", "-b:a", "160k"], false, 0),
            ("ff-opus.ogg", ["-c:a", "libopus", "-ar", "48000"], false, 0),
            ("ff.aac", ["-c:a", "aac"], false, 0),
            ("ff-vbr.mp3", ["-c:a", "libmp3lame", "-q:a", "4"], false, 0),
        ]
        for (name, codec, exact, tolerance) in ffmpegFiles {
            let url = dir.appendingPathComponent(name)
            try runTool("ffmpeg", input + codec + [url.path], in: dir)
            try assertReadsLikeFFmpeg(url, exact: exact, lengthTolerance: tolerance)
        }
        // sox converts ffmpeg's WAV into its own writers' files.
        let wav = dir.appendingPathComponent("ff-s16.wav")
        for (name, options) in [("sox.wav", ["-b", "24"]), ("sox.aiff", []), ("sox.aifc", ["-e", "u-law"]), ("sox.flac", []), ("sox.caf", []), ("sox-f32.wav", ["-e", "float", "-b", "32"])] {
            let url = dir.appendingPathComponent(name)
            try runTool("sox", [wav.path] + options + [url.path], in: dir)
            try assertReadsLikeFFmpeg(url, exact: true)
        }
        let speech = dir.appendingPathComponent("espeak.wav")
        try runTool("espeak-ng", ["-w", speech.path, "Audio files on Linux, read the Apple way."], in: dir)
        try assertReadsLikeFFmpeg(speech, exact: true)
        let info = try readWithExtAudioFile(speech)
        XCTAssertEqual(info.rate, 22050)
        XCTAssertGreaterThan(info.samples.count, 22050, "espeak-ng speaks for more than a second")
    }
}
