import AudioTestSupport
import Foundation

/// afconvert beside ffmpeg doing the same conversion in the same run: throughput (wall time of
/// the whole command, best of several) and peak resident memory of each tool's own process
/// (through `/usr/bin/time`; see ``ChildProcess/runMeasuringPeakMemory(_:_:environment:scratch:)``).
enum ConvertBench {
    struct Failed: Error, CustomStringConvertible {
        let description: String
    }

    struct Figure {
        let seconds: Double
        let peakKiB: Int
    }

    static func tool(_ name: String) -> String? {
        ["/usr/bin/", "/bin/", "/usr/local/bin/"].map { $0 + name }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// The afconvert built beside this benchmark.
    static var afconvert: String {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("afconvert").path
    }

    static func run(_ path: String, _ arguments: [String], repeats: Int) throws -> Figure {
        var best = Double.infinity
        var peak = 0
        for _ in 0..<repeats {
            let start = Date()
            let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("openavf-bench-\(getpid())").path
            let result = try ChildProcess.runMeasuringPeakMemory(path, arguments, environment: ["PATH": "/usr/bin:/bin"], scratch: scratch)
            let elapsed = Date().timeIntervalSince(start)
            guard result.code == 0 else { throw Failed(description: "\(path) \(arguments.joined(separator: " ")) exited with \(result.code)") }
            best = min(best, elapsed)
            peak = max(peak, result.peakKiB)
        }
        return Figure(seconds: best, peakKiB: peak)
    }

    /// Converts a `minutes`-long stereo 44.1 kHz WAV three ways with both tools and prints the table.
    static func measure(minutes: Double, repeats: Int, say: (String) -> Void) throws -> [String] {
        guard let ffmpeg = tool("ffmpeg") else { return ["ffmpeg is not installed"] }
        guard FileManager.default.isExecutableFile(atPath: afconvert) else { return ["afconvert is not built beside openavf-bench"] }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("openavf-convert-bench-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let wav = dir.appendingPathComponent("source.wav").path
        // Music-like material: two tones and noise, so the AAC encoder has real work.
        let seconds = Int(minutes * 60)
        _ = try run(ffmpeg, ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=f=440:d=\(seconds)", "-f", "lavfi", "-i", "sine=f=1234:d=\(seconds)",
                             "-f", "lavfi", "-i", "anoisesrc=d=\(seconds):a=0.05", "-filter_complex", "[0][1][2]amix=inputs=3,pan=stereo|c0=c0|c1=c0",
                             "-ar", "44100", "-c:a", "pcm_s16le", wav], repeats: 1)
        let aac = dir.appendingPathComponent("ff.m4a").path
        _ = try run(ffmpeg, ["-v", "error", "-y", "-i", wav, "-c:a", "aac", "-b:a", "128k", aac], repeats: 1)

        struct Job { let name: String; let ffmpeg: [String]; let ours: [String] }
        let jobs = [
            Job(name: "WAV → AAC 128 kb/s M4A", ffmpeg: ["-v", "error", "-y", "-i", wav, "-c:a", "aac", "-b:a", "128k", dir.appendingPathComponent("a.m4a").path],
                ours: ["-f", "m4af", "-d", "aac", "-b", "128000", wav, dir.appendingPathComponent("b.m4a").path]),
            Job(name: "WAV → IMA4 CAF", ffmpeg: ["-v", "error", "-y", "-i", wav, "-c:a", "adpcm_ima_qt", dir.appendingPathComponent("a.caf").path],
                ours: ["-f", "caff", "-d", "ima4", wav, dir.appendingPathComponent("b.caf").path]),
            Job(name: "AAC M4A → WAV", ffmpeg: ["-v", "error", "-y", "-i", aac, "-c:a", "pcm_s16le", dir.appendingPathComponent("a.wav").path],
                ours: ["-f", "WAVE", "-d", "LEI16", aac, dir.appendingPathComponent("b.wav").path]),
        ]
        say("  conversion               afconvert s   ffmpeg s   speed ratio (target ≥ 1; AAC→WAV ≥ 0.95)   afconvert MiB   ffmpeg MiB   memory ratio (target ≤ 1)")
        var failures: [String] = []
        for job in jobs {
            let theirs = try run(ffmpeg, job.ffmpeg, repeats: repeats)
            let ours = try run(afconvert, job.ours, repeats: repeats)
            let speed = theirs.seconds / ours.seconds
            let memory = Double(ours.peakKiB) / Double(max(theirs.peakKiB, 1))
            let name = job.name.padding(toLength: 24, withPad: " ", startingAt: 0)
            say("  " + name + String(format: " %11.2f   %8.2f   %39.2f   %13.1f   %10.1f   %25.2f", ours.seconds, theirs.seconds, speed,
                                     Double(ours.peakKiB) / 1024, Double(theirs.peakKiB) / 1024, memory))
            if ours.seconds <= 0 { failures.append("\(job.name): no time measured") }
        }
        return failures
    }
}
