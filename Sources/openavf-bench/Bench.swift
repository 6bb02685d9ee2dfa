import AVFAudio
import AudioTestSupport
import Foundation

/// How child tools reach the server under test.
struct ServerHandle {
    let environment: [String: String]
    /// The server's processes and their descendants, when this run started the server (its CPU
    /// can then be measured); empty for `--system-server`.
    var processIDs: [pid_t] = []
}

enum Bench {
    static func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

    static func ratio(_ ours: Double, _ anchor: Double) -> String {
        anchor > 0 ? String(format: "%.2f", ours / anchor) : "n/a"
    }

    static func main(_ arguments: [String]) {
        let short = arguments.contains("--short")
        // `--only latency|underruns|cpu|convert|player|systemsound|engine|duplex|timepitch|voice` runs one section (for profiling one figure);
        // `underruns` is the dropout count on the sink.
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
                // `--server pipewire` measures a private PipeWire (pipewire-pulse) instead.
                let named = arguments.firstIndex(of: "--server").flatMap { i in i + 1 < arguments.count ? arguments[i + 1] : nil }
                guard let kind = named.map(PrivatePulseServer.Kind.init(rawValue:)) ?? .pulseaudio else {
                    say("--server takes pulseaudio or pipewire")
                    exit(2)
                }
                let s = try PrivatePulseServer(kind: kind)
                s.makeDefaultForThisProcess()
                server = s
                handle = ServerHandle(environment: s.environment, processIDs: s.processIDs)
                say("Server: a private \(kind == .pipewire ? "PipeWire (pipewire-pulse)" : "PulseAudio") server (null sinks, 48 kHz float), started for this run.")
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
            say("Round-trip latency, output queue (K = 2 buffers of N ms) → speaker → monitor → input queue (buffers of N ms), median of clicks;")
            say("bound = the pattern's own: (K − 1)·N ahead + the output's granted server buffer + N to fill an input buffer + one capture period;")
            say("anchor = pacat | parec at --latency-msec=N fed like the queues (a chunk goes in when one waits in the pipe; reads of whole chunks):")
            say("  N ms   session   queues ms   bound ms   − bound (target ≤ +1)   pacat|parec ms   ratio (target ≤ 1; without session at 30 ms)")
            let latencySeconds = short ? 3.0 : 20.0
            for ms in short ? [5, 30] : [5, 10, 30] {
                do {
                    let alike = try LatencyBench.pacatParec(server: handle, milliseconds: ms, seconds: latencySeconds, buffers: 2)
                    for session in [true, false] {
                        guard let ours = try LatencyBench.queues(milliseconds: ms, seconds: latencySeconds, session: session), let alike else {
                            failures.append("latency at \(ms) ms: clicks were not seen")
                            say(String(format: "  %3d ms   %@", ms, "no clicks seen"))
                            continue
                        }
                        let bound = ours.bound(buffers: 2, milliseconds: ms)
                        say(String(format: "  %4d   %-7@   %9.1f   %8.1f   %+21.1f   %14.1f   %@", ms, session ? "yes" : "no", ours.milliseconds, bound,
                                   ours.milliseconds - bound, alike, ratio(ours.milliseconds, alike)))
                    }
                } catch {
                    failures.append("latency at \(ms) ms: \(error)")
                }
            }
        }

        // 2. Dropouts a listener hears, counted on the sink.
        if wanted("underruns") {
            say("")
            say("Dropouts heard on the speaker's monitor in a continuous 1 kHz sine: an output queue of three N ms buffers and a")
            say("RemoteIO unit's render callback, each with the session's preferred I/O buffer at N ms, beside pacat --latency-msec=N")
            say("playing the same sine (target 0):")
            say("  case                                   seconds   queue dropouts (server underruns)   RemoteIO dropouts   pacat dropouts")
            let idleSeconds = short ? 3.0 : 600.0
            let loadSeconds = short ? 3.0 : 60.0
            for (ms, seconds, loaded) in [(5, idleSeconds, false), (10, loadSeconds, true)] {
                do {
                    let load = loaded ? try PlaybackBench.loadCores(ProcessInfo.processInfo.activeProcessorCount) : []
                    defer { for child in load { child.terminate() } }
                    let ours = try DropoutBench.queue(environment: handle.environment, milliseconds: ms, seconds: seconds)
                    let unit = try DropoutBench.ioUnit(environment: handle.environment, milliseconds: ms, seconds: seconds)
                    let anchor = try DropoutBench.pacat(environment: handle.environment, milliseconds: ms, seconds: seconds)
                    let name = "\(ms) ms, \(loaded ? "every core busy" : "idle")".padding(toLength: 37, withPad: " ", startingAt: 0)
                    say(String(format: "  %@   %7.0f   %14d (%d)%@   %17d   %14d", name, seconds, ours.dropouts, ours.serverUnderruns ?? 0,
                               String(repeating: " ", count: max(0, 15 - String(ours.serverUnderruns ?? 0).count)), unit.dropouts, anchor.dropouts))
                    if ours.heard < seconds * 0.9 { failures.append("dropouts at \(ms) ms: the sine was heard for \(ours.heard) s of \(seconds)") }
                    if unit.heard < seconds * 0.9 { failures.append("dropouts at \(ms) ms: RemoteIO's sine was heard for \(unit.heard) s of \(seconds)") }
                } catch {
                    failures.append("dropouts at \(ms) ms: \(error)")
                }
            }
        }

        // 3. Playback CPU time beside pacat.
        if wanted("cpu") {
        say("")
        let cpuSeconds = short ? 2.0 : 60.0
        do {
            let ours = try PlaybackBench.play(milliseconds: 30, seconds: cpuSeconds)
            let anchor = try PlaybackBench.pacatCPU(server: handle, milliseconds: 30, seconds: cpuSeconds)
            say(String(format: "Playback CPU time for %.0f s of 48 kHz stereo at 30 ms: queue %.3f s, pacat %.3f s, ratio %@ (target ≤ 1); %d underruns without load",
                       cpuSeconds, ours.cpuSeconds, anchor, ratio(ours.cpuSeconds, anchor), ours.serverUnderruns))
            // Again with the server's CPU over each playback, on the server with its keepers stopped
            // (what a stream costs the server is the listener's too).
            if let server {
                let (queue, pacat) = try ProcessCPU.sideBySide(
                    server, handle, ours: { try PlaybackBench.play(milliseconds: 30, seconds: cpuSeconds).cpuSeconds },
                    anchor: { try PlaybackBench.pacatCPU(server: handle, milliseconds: 30, seconds: cpuSeconds) })
                say("  player and server together: queue \(queue.description), pacat \(pacat.description), ratio \(ratio(queue.total ?? 0, pacat.total ?? 0))")
            }
        } catch {
            failures.append("cpu: \(error)")
        }
        }

        // 4. File conversion throughput and memory beside ffmpeg.
        if wanted("convert") {
            say("")
            let minutes = short ? 0.2 : 10.0
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
                let mp3Seconds = short ? 3.0 : 60.0
                let files = try PlayerBench.makeFiles(seconds: mp3Seconds)
                defer { try? FileManager.default.removeItem(at: files.wav.deletingLastPathComponent()) }
                let runs = short ? 3 : 7
                let start = try PlayerBench.startLatency(server: handle, file: files.wav, runs: runs)
                say("AVAudioPlayer, time from play() to the first sound on the sink (median of \(runs), a 16-bit WAV), beside paplay on the same file:")
                func ms(_ x: Double?) -> String { x.map { String(format: "%.1f ms", $0) } ?? "not heard" }
                say("  prepared \(ms(start.prepared)), unprepared \(ms(start.unprepared)), paplay \(ms(start.paplay)); prepared/paplay ratio \(start.prepared.flatMap { p in start.paplay.map { ratio(p, $0) } } ?? "n/a") (target ≤ 1)")
                if start.prepared == nil || start.paplay == nil { failures.append("player start latency: no sound was heard") }
                let cpu = try PlayerBench.playbackCPU(server: handle, file: files.mp3, seconds: mp3Seconds)
                say(String(format: "AVAudioPlayer CPU time for %.0f s of a 192 kb/s stereo MP3: %.3f s, paplay %.3f s, ratio %@ (target ≤ 1)",
                           mp3Seconds, cpu.ours, cpu.paplay, ratio(cpu.ours, cpu.paplay)))
                if let server {
                    let (ours, paplay) = try ProcessCPU.sideBySide(
                        server, handle, ours: { try PlayerBench.playbackCPU(server: handle, file: files.mp3, seconds: mp3Seconds, paplay: false).ours },
                        anchor: { try EngineBench.paplayCPU(server: handle, [files.mp3.path]) })
                    say("  player and server together (the server's keepers stopped): AVAudioPlayer \(ours.description), paplay \(paplay.description), ratio \(ratio(ours.total ?? 0, paplay.total ?? 0))")
                }
            } catch {
                failures.append("player: \(error)")
            }
        }

        // 6. System sounds: from the call to the first sound, beside paplay and pactl play-sample.
        if wanted("systemsound") {
            say("")
            do {
                let file = try SystemSoundBench.makeFile()
                defer { try? FileManager.default.removeItem(at: file.deletingLastPathComponent()) }
                let runs = short ? 3 : 9
                let start = try SystemSoundBench.startLatency(server: handle, file: file, runs: runs)
                func ms(_ x: Double?) -> String { x.map { String(format: "%.1f ms", $0) } ?? "not heard" }
                say("System sound, time from AudioServicesPlaySystemSound to the first sound on the sink (median of \(runs), a 0.2 s 16-bit WAV):")
                say("  ours \(ms(start.ours)), paplay \(ms(start.paplay)), pactl play-sample \(ms(start.pactl)); ours/pactl ratio \(start.ours.flatMap { o in start.pactl.map { ratio(o, $0) } } ?? "n/a") (target ≤ 1; both anchors start a process and connect)")
                if start.ours == nil || start.pactl == nil { failures.append("system sound start latency: no sound was heard") }
            } catch {
                failures.append("systemsound: \(error)")
            }
        }

        // 7. AVAudioEngine: offline rendering speed, a two-file mix beside ffmpeg, player node CPU beside paplay.
        if wanted("engine") {
            say("")
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent("openavf-engine-bench-\(getpid())")
            defer { try? FileManager.default.removeItem(at: dir) }
            do {
                try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
                let seconds = short ? 10.0 : 600.0
                let (a, b) = try EngineBench.makeFiles(seconds: seconds, in: dir)
                let speed = try EngineBench.offlineSpeed(file: a)
                say(String(format: "AVAudioEngine offline rendering of %.0f s through player → time pitch (×1.25) → EQ → reverb → main mixer (44.1 → 48 kHz): %.0f× real time (target ≥ 100)", seconds, speed))
                let mix = try EngineBench.twoFileMix(a, b, in: dir, repeats: short ? 1 : 3)
                say(String(format: "Two %.0f s stereo WAVs mixed to a 16-bit WAV: engine offline %.2f s, ffmpeg amix %.2f s, speed ratio %@ (target ≥ 1)",
                           seconds, mix.ours, mix.ffmpeg, ratio(mix.ffmpeg, mix.ours)))
                let cpuSeconds: Double = short ? 3 : seconds
                let cpuFile = short ? try EngineBench.makeFiles(seconds: cpuSeconds, in: dir.appendingPathComponent("short")).0 : a
                // The engine at its default I/O buffer: earlier sections leave the session's
                // preference set (process-wide), which would put the engine at theirs.
                try AVAudioSession.sharedInstance().setPreferredIOBufferDuration(0)
                // Without the keepers' streams, the server's CPU is the players' alone.
                let cpu = try server.map { try $0.withoutKeepers { try EngineBench.playerNodeCPU(server: handle, file: cpuFile) } }
                    ?? EngineBench.playerNodeCPU(server: handle, file: cpuFile)
                say(String(format: "Player node → main mixer → output, CPU time for %.0f s of a 44.1 kHz WAV on a 48 kHz output, beside paplay on the same file;", cpuSeconds))
                say("player and server together (paplay's resampling runs in the server, the engine's in this process; the server without its keepers):")
                let total = { (c: ProcessCPU.Playback) in c.total ?? c.player }
                say("  engine \(cpu.ours.description); paplay \(cpu.paplay.description), ratio \(ratio(total(cpu.ours), total(cpu.paplay))) (target ≤ 1; paplay buffers 2 s)")
                say("  paplay at the engine's output latency (--latency-msec=60) \(cpu.paplayAtOurLatency.description), ratio \(ratio(total(cpu.ours), total(cpu.paplayAtOurLatency)))")
            } catch {
                failures.append("engine: \(error)")
            }
        }

        // 8. Duplex round trip through an I/O unit and an engine, beside a raw libpulse duplex client.
        if wanted("duplex") {
            say("")
            say("Duplex round trip, the speaker's monitor looped back to the speaker at half level (echo spacing of one click, median):")
            say("  N ms   RemoteIO play-through   engine input → mixer   raw libpulse client   ratios (target ≤ 1)")
            let clicks = short ? 3 : 12
            for ms in [5, 10] {
                do {
                    let remote = try DuplexBench.remoteIO(server: handle, milliseconds: ms, clicks: clicks)
                    let engine = try DuplexBench.engine(server: handle, pactl: { try server?.pactl($0) ?? "" }, milliseconds: ms, clicks: clicks)
                    let raw = try DuplexBench.anchor(server: handle, milliseconds: ms, clicks: clicks)
                    func ms1(_ x: Double?) -> String { x.map { String(format: "%.1f", $0) } ?? "n/a" }
                    say(String(format: "  %4d   %21@   %20@   %19@   %@ / %@", ms, ms1(remote), ms1(engine), ms1(raw),
                               remote.flatMap { r in raw.map { ratio(r, $0) } } ?? "n/a", engine.flatMap { e in raw.map { ratio(e, $0) } } ?? "n/a"))
                    if remote == nil || engine == nil || raw == nil { failures.append("duplex at \(ms) ms: a loop was not heard") }
                } catch {
                    failures.append("duplex at \(ms) ms: \(error)")
                }
            }
        }

        // 9. Time-pitch quality: the shipped unit beside SoundTouch against the exact reference (offline,
        // no server involved: printed once, on every pass but PipeWire's).
        if wanted("timepitch") && !arguments.contains("pipewire") {
            say("")
            failures += TimePitchBench.run(say: say)
        }

        // 10. Voice processing: the two libraries offline on the same signals, and the server's own
        // canceller on the issue's set-up (PulseAudio's module; the offline part needs no server,
        // so the PipeWire pass leaves the section out).
        if wanted("voice") && server?.kind != .pipewire {
            say("")
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent("openavf-voice-bench-\(getpid())")
            defer { try? FileManager.default.removeItem(at: dir) }
            do {
                for rate in short ? [48000] : [16000, 48000] { try VoiceBench.report(rate: rate, in: dir, say: say) }
                // The unit beside the anchor, PulseAudio's module-echo-cancel, on the server.
                if let server {
                    var far = VoiceSignals.scaled(
                        try VoiceSignals.speech(VoiceSignals.farText, voice: VoiceSignals.farVoice, sampleRate: 48000, in: dir), toSpeechRMS: -20, sampleRate: 48000)
                    // A call of 6 s (short) or 60 s: the words over again.
                    let callFrames = 48000 * (short ? 6 : 60)
                    while far.count < callFrames { far += far }
                    far = Array(far.prefix(callFrames))
                    failures += try VoiceBench.reportServer(server, far: far, talker: !short, say: say)
                }
            } catch {
                failures.append("voice: \(error)")
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
