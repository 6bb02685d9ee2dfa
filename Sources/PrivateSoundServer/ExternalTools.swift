public import Foundation

/// Runs a program from the machine (ffmpeg, ffprobe, sox…) and returns its standard output.
@discardableResult
public func runTool(_ name: String, _ arguments: [String], in dir: URL) throws -> String {
    let path = ["/usr/bin/", "/bin/", "/usr/local/bin/"].map { $0 + name }.first { FileManager.default.isExecutableFile(atPath: $0) }
    guard let path else { throw PrivatePulseServer.Failure(description: "\(name) is not installed") }
    return try ChildProcess.run(path, arguments, environment: ["PATH": "/usr/bin:/bin"], scratch: dir.appendingPathComponent("tool-\(UUID().uuidString.prefix(6))").path)
}

/// Decodes `url` with ffmpeg to interleaved float.
public func decodeWithFFmpeg(_ url: URL, in dir: URL) throws -> [Float] {
    let out = dir.appendingPathComponent("ffdec-\(UUID().uuidString.prefix(6)).f32")
    defer { try? FileManager.default.removeItem(at: out) }
    try runTool("ffmpeg", ["-v", "error", "-y", "-i", url.path, "-f", "f32le", out.path], in: dir)
    let data = try Data(contentsOf: out)
    return data.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
}

/// What ffprobe says of the first audio stream: codec name, sample rate, channels, duration (s).
public func probeWithFFprobe(_ url: URL, in dir: URL) throws -> (codec: String, rate: Int, channels: Int, duration: Double) {
    let out = try runTool("ffprobe", [
        "-v", "error", "-select_streams", "a:0", "-show_entries", "stream=codec_name,sample_rate,channels,duration",
        "-of", "default=noprint_wrappers=1", url.path,
    ], in: dir)
    var fields: [String: String] = [:]
    for line in out.split(separator: "\n") {
        let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
        if parts.count == 2 { fields[parts[0]] = parts[1] }
    }
    return (fields["codec_name"] ?? "", Int(fields["sample_rate"] ?? "") ?? 0, Int(fields["channels"] ?? "") ?? 0, Double(fields["duration"] ?? "") ?? -1)
}
