// openavf-bench: speed and latency figures of Audio Queue Services, each printed beside the
// anchor tool measured in the same run (pacat / parec) and the ratio.
//
//   swift run -c release openavf-bench            full run, on a private PulseAudio and then on a
//                                                 private PipeWire (several minutes each); what it
//                                                 prints is written to BENCHMARKS.md
//   swift run -c release openavf-bench --short    CI's short mode (every section briefly: it must not rot;
//                                                 the figures are the full run's), on PulseAudio
//   add --server pipewire (or pulseaudio) to measure one private server of that kind, or
//   --system-server to measure the sound server this machine runs instead of a private one
import AudioTestSupport
import Foundation

let arguments = CommandLine.arguments
if !arguments.contains("--short") && !arguments.contains("--server") && !arguments.contains("--system-server") {
    // The full run prints both servers' figures, each server measured by a process of its own
    // (the library keeps its connection to the first server a process uses), and writes what it
    // printed to BENCHMARKS.md in the working directory (the figures live there, not in tests).
    let me = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    var status: Int32 = 0
    var printed = Data()
    for kind in ["pulseaudio", "pipewire"] {
        let pass = Process()
        pass.executableURL = me
        pass.arguments = Array(arguments.dropFirst()) + ["--server", kind]
        let pipe = Pipe()
        pass.standardOutput = pipe
        do {
            try pass.run()
            while true {
                let chunk = pipe.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                FileHandle.standardOutput.write(chunk)
                printed.append(chunk)
            }
            pass.waitUntilExit()
            if pass.terminationStatus != 0 { status = 1 }
        } catch {
            Bench.say("cannot run the \(kind) pass: \(error)")
            status = 1
        }
    }
    let cpu = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8))?.split(separator: "\n")
        .first { $0.hasPrefix("model name") }.map { String($0.split(separator: ":", maxSplits: 1).last ?? "").trimmingCharacters(in: .whitespaces) } ?? "unknown"
    let header = """
        # Benchmark figures

        Written by `openavf-bench` (the full run: `swift build -c release --product afconvert && swift run -c release openavf-bench`);
        do not edit. Each figure is printed beside its anchor, measured in the same run on the same machine.
        Run \(ISO8601DateFormatter().string(from: Date())) on \(cpu), \(ProcessInfo.processInfo.activeProcessorCount) cores\(arguments.count > 1 ? ", with " + arguments.dropFirst().joined(separator: " ") : "")\(status == 0 ? "" : "; some sections FAILED (see the end of each pass)").


        """
    let body = "```\n" + String(decoding: printed, as: UTF8.self) + "```\n"
    do {
        try Data((header + body).utf8).write(to: URL(fileURLWithPath: "BENCHMARKS.md"))
    } catch {
        Bench.say("cannot write BENCHMARKS.md: \(error)")
        status = 1
    }
    exit(status)
}
Bench.main(arguments)
