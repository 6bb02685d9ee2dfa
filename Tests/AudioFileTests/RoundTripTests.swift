import AudioToolbox
import Foundation
import XCTest

final class RoundTripTests: XCTestCase {
    var dir: URL!

    override func setUpWithError() throws { dir = try temporaryDirectory() }
    override func tearDownWithError() throws { if ProcessInfo.processInfo.environment["KEEP"] == nil { try? FileManager.default.removeItem(at: dir) } else { print("kept", dir.path) } }

    func testSmokeLossyAndLossless() throws {
        let rate = 44100.0
        let frames = 44100 + 123
        let channels = 2
        let signal = testSignal(frames: frames, channels: channels, rate: rate)
        let cases: [(String, AudioFileTypeID, AudioStreamBasicDescription)] = [
            ("a.wav", kAudioFileWAVEType, pcmFormat(bits: 16)),
            ("a.caf", kAudioFileCAFType, pcmFormat(bits: 24, bigEndian: true)),
            ("a.aif", kAudioFileAIFFType, pcmFormat(bits: 16, bigEndian: true)),
            ("u.caf", kAudioFileCAFType, compressed(kAudioFormatULaw)),
            ("i.caf", kAudioFileCAFType, compressed(kAudioFormatAppleIMA4)),
            ("aac.m4a", kAudioFileM4AType, compressed(kAudioFormatMPEG4AAC)),
            ("aac.caf", kAudioFileCAFType, compressed(kAudioFormatMPEG4AAC)),
            ("alac.m4a", kAudioFileM4AType, compressed(kAudioFormatAppleLossless, flags: 1)),
            ("f.flac", kAudioFileFLACType, compressed(kAudioFormatFLAC, flags: 1)),
        ]
        for (name, type, format) in cases {
            let url = dir.appendingPathComponent(name)
            do {
                try writeWithExtAudioFile(url, type: type, format: format, samples: signal, channels: channels, rate: rate, chunk: Int(ProcessInfo.processInfo.environment["CHUNK"] ?? "1000")!)
                let back = try readWithExtAudioFile(url)
                print(name, "frames", back.samples.count / channels, "length", back.lengthFrames, "snr", snrDB(signal, back.samples))
            } catch {
                print(name, "ERROR", error, ExtAudioFileLastFailureReason(), AudioFileLastFailureReason())
            }
        }
    }
}
