// openavf-bench: speed and latency figures of Audio Queue Services, each printed beside the
// anchor tool measured in the same run (pacat / parec) and the ratio.
//
//   swift run -c release openavf-bench            full run, on a private PulseAudio and then on a
//                                                 private PipeWire (several minutes each)
//   swift run -c release openavf-bench --short    CI's short mode (every section briefly: it must not rot;
//                                                 the figures are the full run's), on PulseAudio
//   add --server pipewire (or pulseaudio) to measure one private server of that kind, or
//   --system-server to measure the sound server this machine runs instead of a private one
import AudioTestSupport
import Foundation

let arguments = CommandLine.arguments
if !arguments.contains("--short") && !arguments.contains("--server") && !arguments.contains("--system-server") {
    // The full run prints both servers' figures, each server measured by a process of its own
    // (the library keeps its connection to the first server a process uses).
    let me = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    var status: Int32 = 0
    for kind in ["pulseaudio", "pipewire"] {
        let pass = Process()
        pass.executableURL = me
        pass.arguments = Array(arguments.dropFirst()) + ["--server", kind]
        do {
            try pass.run()
            pass.waitUntilExit()
            if pass.terminationStatus != 0 { status = 1 }
        } catch {
            Bench.say("cannot run the \(kind) pass: \(error)")
            status = 1
        }
    }
    exit(status)
}
Bench.main(arguments)
