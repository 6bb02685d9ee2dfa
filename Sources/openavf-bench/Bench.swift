import AudioTestSupport
import Foundation

/// How child tools reach the server under test.
struct ServerHandle {
    let environment: [String: String]
}

enum Bench {
    static func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

    static func ratio(_ ours: Double, _ anchor: Double) -> String {
        anchor > 0 ? String(format: "%.2f", ours / anchor) : "n/a"
    }

    static func main(_ arguments: [String]) {
        let short = arguments.contains("--short")
        // `--only latency|underruns|cpu|convert|player` runs one section (for profiling one figure).
        let only = arguments.firstIndex(of: "--only").flatMap { i in i + 1 < arguments.count ? arguments[i + 1] : nil }
        func wanted(_ section: String) -> Bool { only == nil || only == section }
        var failures: [String] = []
        let server: PrivatePulseServer?
        let handle: ServerHandle
        do {
            if arguments.contains("--system-server") {
                server = nil
                handle = ServerHandle(environment: ProcessInfo.processInfo.environment)
                say("Server: the one this machine runs.")
            } else {
                let s = try PrivatePulseServer()
                s.makeDefaultForThisProcess()
                server = s
                handle = ServerHandle(environment: s.environment)
                say("Server: a private PulseAudio server (null sinks, 48 kHz float), started for this run.")
            }
        } catch {
            say("cannot start a sound server: \(error)")
            exit(1)
        }
        defer { server?.stop() }
        say("Mode: \(short ? "short (CI)" : "full")")

        // 1. Round-trip latency.
        if wanted("latency") {
        say("")
        say("Round-trip latency, output queue → speaker → monitor → input queue (median of clicks, 2 output buffers),")
        say("beside pacat | parec at the same --latency-msec, fed at its best (each chunk when due, reads as they come)")
        say("and fed like a two-buffer queue (one chunk ahead, reads of whole chunks):")
        say("  buffer   queues ms   pacat|parec best   ratio (target ≤ 1.25)   pacat|parec queue-like   ratio")
        let latencySeconds = short ? 2.0 : 5.0
        for ms in [5, 10, 30] {
            do {
                let ours = try LatencyBench.queues(milliseconds: ms, seconds: latencySeconds)
                let best = try LatencyBench.pacatParec(server: handle, milliseconds: ms, seconds: latencySeconds)
                let alike = try LatencyBench.pacatParec(server: handle, milliseconds: ms, seconds: latencySeconds, chunksAhead: 1, blockReads: true)
                guard let ours, let best, let alike else {
                    failures.append("latency at \(ms) ms: clicks were not seen")
                    say(String(format: "  %3d ms   %@", ms, "no clicks seen"))
                    continue
                }
                say(String(format: "  %3d ms   %9.1f   %16.1f   %21@   %22.1f   %5@", ms, ours, best, ratio(ours, best), alike, ratio(ours, alike)))
            } catch {
                failures.append("latency at \(ms) ms: \(error)")
            }
        }

        }

        // 2. Underruns at 10 ms with both cores busy.
        if wanted("underruns") {
        say("")
        let loadSeconds = short ? 5.0 : 60.0
        do {
            let load = try PlaybackBench.loadCores(ProcessInfo.processInfo.activeProcessorCount)
            defer { for child in load { child.terminate() } }
            let result = try PlaybackBench.play(milliseconds: 10, seconds: loadSeconds)
            let anchor = try PlaybackBench.pacatUnderruns(server: handle, milliseconds: 10, seconds: loadSeconds)
            say(String(format: "Underruns during %.0f s at 10 ms buffers with every core busy: queue %d (+%d starved frames), pacat %d (target 0)",
                       loadSeconds, result.serverUnderruns, result.starvedFrames, anchor))
        } catch {
            failures.append("underruns: \(error)")
        }

        }

        // 3. Playback CPU time beside pacat.
        if wanted("cpu") {
        say("")
        let cpuSeconds = short ? 5.0 : 60.0
        do {
            let ours = try PlaybackBench.play(milliseconds: 30, seconds: cpuSeconds)
            let anchor = try PlaybackBench.pacatCPU(server: handle, milliseconds: 30, seconds: cpuSeconds)
            say(String(format: "Playback CPU time for %.0f s of 48 kHz stereo at 30 ms: queue %.3f s, pacat %.3f s, ratio %@ (target ≤ 1.5); %d underruns without load",
                       cpuSeconds, ours.cpuSeconds, anchor, ratio(ours.cpuSeconds, anchor), ours.serverUnderruns))
        } catch {
            failures.append("cpu: \(error)")
        }
        }

        // 4. File conversion throughput and memory beside ffmpeg.
        if wanted("convert") {
            say("")
            let minutes = short ? 0.5 : 10.0
            say(String(format: "File conversion of a %.1f-minute stereo 44.1 kHz WAV, afconvert beside ffmpeg (best of %d runs each):", minutes, short ? 1 : 3))
            do {
                failures += try ConvertBench.measure(minutes: minutes, repeats: short ? 1 : 3, say: say)
            } catch {
                failures.append("convert: \(error)")
            }
        }

        // 5. AVAudioPlayer: start latency and MP3 playback CPU beside paplay.
        if wanted("player") {
            say("")
            do {
                let mp3Seconds = short ? 10.0 : 60.0
                let files = try PlayerBench.makeFiles(seconds: mp3Seconds)
                defer { try? FileManager.default.removeItem(at: files.wav.deletingLastPathComponent()) }
                let runs = short ? 3 : 7
                let start = try PlayerBench.startLatency(server: handle, file: files.wav, runs: runs)
                say("AVAudioPlayer, time from play() to the first sound on the sink (median of \(runs), a 16-bit WAV), beside paplay on the same file:")
                func ms(_ x: Double?) -> String { x.map { String(format: "%.1f ms", $0) } ?? "not heard" }
                say("  prepared \(ms(start.prepared)), unprepared \(ms(start.unprepared)), paplay \(ms(start.paplay)); prepared/paplay ratio \(start.prepared.flatMap { p in start.paplay.map { ratio(p, $0) } } ?? "n/a") (target ≤ 1)")
                if start.prepared == nil || start.paplay == nil { failures.append("player start latency: no sound was heard") }
                let cpu = try PlayerBench.playbackCPU(server: handle, file: files.mp3, seconds: mp3Seconds)
                say(String(format: "AVAudioPlayer CPU time for %.0f s of a 192 kb/s stereo MP3: %.3f s, paplay %.3f s, ratio %@ (target ≤ 1.2)",
                           mp3Seconds, cpu.ours, cpu.paplay, ratio(cpu.ours, cpu.paplay)))
            } catch {
                failures.append("player: \(error)")
            }
        }

        if !failures.isEmpty {
            say("")
            for f in failures { say("FAILED: \(f)") }
            server?.stop()
            exit(1)
        }
    }
}
