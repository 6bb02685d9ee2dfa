/// File types by their uniform type identifiers, as Apple's AVMediaFormat.h names them (the
/// audio and container types; the video-only ones are here so that code naming them compiles).
/// `AVAudioPlayer(data:fileTypeHint:)` and `AVAudioPlayer(contentsOf:fileTypeHint:)` take the raw
/// value; the player finds the type from the content in any case.
public struct AVFileType: RawRepresentable, Hashable, Sendable {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }

    public static let mov = AVFileType("com.apple.quicktime-movie")
    public static let mp4 = AVFileType("public.mpeg-4")
    public static let m4v = AVFileType("com.apple.m4v-video")
    public static let m4a = AVFileType("com.apple.m4a-audio")
    public static let mobile3GPP = AVFileType("public.3gpp")
    public static let mobile3GPP2 = AVFileType("public.3gpp2")
    public static let caf = AVFileType("com.apple.coreaudio-format")
    public static let wav = AVFileType("com.microsoft.waveform-audio")
    public static let aiff = AVFileType("public.aiff-audio")
    public static let aifc = AVFileType("public.aifc-audio")
    public static let amr = AVFileType("org.3gpp.adaptive-multi-rate-audio")
    public static let mp3 = AVFileType("public.mp3")
    public static let au = AVFileType("public.au-audio")
    public static let ac3 = AVFileType("public.ac3-audio")
    public static let eac3 = AVFileType("public.enhanced-ac3-audio")
}
