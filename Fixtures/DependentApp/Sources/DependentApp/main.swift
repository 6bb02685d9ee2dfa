import AVFoundation

// What such an app does first: describe a format and set up its session.
let format = AVAudioFormat(standardFormatWithSampleRate: 48000, channels: 2)
let session = AVAudioSession.sharedInstance()
do {
    try session.setCategory(.playback, mode: .default, options: [.mixWithOthers])
    print("format: \(format.map { "\($0)" } ?? "none"), category: \(session.category.rawValue)")
} catch {
    print("session: \(error)")
}
