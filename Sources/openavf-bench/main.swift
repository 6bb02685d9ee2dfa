// openavf-bench: speed and latency figures of Audio Queue Services, each printed beside the
// anchor tool measured in the same run (pacat / parec) and the ratio.
//
//   swift run -c release openavf-bench            full run (a few minutes)
//   swift run -c release openavf-bench --short    CI's short mode (under a minute)
//   add --system-server to measure the sound server this machine runs instead of a private one,
//   or --server pipewire to start a private PipeWire (pipewire-pulse) instead of PulseAudio
import AudioTestSupport
import Foundation

Bench.main(CommandLine.arguments)
