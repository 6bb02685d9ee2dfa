public import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A private PulseAudio server, started and stopped by the project itself for tests, the benchmark
/// and the headless demo.
///
/// Own runtime directory; `-n` with explicit modules: the native protocol on a socket in that
/// directory, a null sink `speaker` (the default sink, so its monitor is what a listener hears), a
/// null sink `micfeed` whose monitor is the default source (play a known signal into `micfeed` and
/// it arrives at "the microphone"), and module-role-cork. The null sinks do not rewind
/// (`norewinds=1`): a rewind re-renders audio their monitors have already delivered, so a capture
/// would lose or repeat a few milliseconds whenever a stream starts. The server exits by itself
/// (`--exit-idle-time`) if its owner dies without stopping it.
public final class PrivatePulseServer: @unchecked Sendable {
    /// Which server speaks the protocol: PulseAudio itself, or PipeWire through `pipewire-pulse`
    /// (with `wireplumber` and a D-Bus session bus of its own), as most desktops run now.
    public enum Kind: String, Sendable {
        case pulseaudio, pipewire

        /// The kind `OPENAVF_TEST_SERVER` names (`pulseaudio` when unset).
        public static var fromEnvironment: Kind {
            ProcessInfo.processInfo.environment["OPENAVF_TEST_SERVER"].flatMap(Kind.init(rawValue:)) ?? .pulseaudio
        }
    }

    public let kind: Kind
    public let directory: URL
    /// The native-protocol socket: PulseAudio's in ``directory``, pipewire-pulse's in its `pulse`
    /// folder (where it always puts it, under its runtime directory).
    public var socketPath: String { directory.appendingPathComponent(kind == .pipewire ? "pulse/native" : "native").path }
    /// The libpulse server string: `unix:<socket>`.
    public var serverString: String { "unix:\(socketPath)" }
    public let sampleRate: Int
    private var process: ChildProcess?
    /// PipeWire's daemons, in start order: the bus, pipewire, wireplumber, pipewire-pulse.
    private var daemons: [ChildProcess] = []
    /// Silent low-latency streams that keep the null sinks awake (see ``init(sampleRate:timeout:)``).
    private var keepers: [ChildProcess] = []

    /// The processes this object started for the server (PulseAudio, or the shells that watch
    /// PipeWire's daemons): the server is these and their descendants.
    public var processIDs: [pid_t] { (process.map { [$0.pid] } ?? []) + daemons.map(\.pid) }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        public init(description: String) { self.description = description }
    }

    /// Starts a server; returns once it answers `pactl info`, or throws after `timeout` seconds.
    public init(kind: Kind = .pulseaudio, sampleRate: Int = 48000, timeout: Double = 10) throws {
        self.kind = kind
        self.sampleRate = sampleRate
        let dir = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("openavf-pulse-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        directory = dir
        let script = """
            load-module module-native-protocol-unix auth-anonymous=1 socket=\(dir.appendingPathComponent("native").path)
            load-module module-null-sink sink_name=speaker rate=\(sampleRate) channels=2 format=float32le norewinds=1 sink_properties=device.description=Speaker
            load-module module-null-sink sink_name=micfeed rate=\(sampleRate) channels=1 format=float32le norewinds=1 sink_properties=device.description=MicFeed
            load-module module-role-cork
            set-default-sink speaker
            set-default-source micfeed.monitor

            """
        let config = dir.appendingPathComponent("default.pa")
        try script.write(to: config, atomically: true, encoding: .utf8)
        try launch(timeout: timeout)
    }

    /// Starts the daemon and its keepers in ``directory`` and waits until it serves.
    private func launch(timeout: Double) throws {
        if kind == .pipewire {
            try launchPipeWire(timeout: timeout)
        } else {
            try launchPulseAudio(timeout: timeout)
        }
        try startKeepers(timeout: timeout)
    }

    /// A shell that runs a command and ends it when this process is gone, so that a crashed owner
    /// leaves nothing running.
    private func watched(_ arguments: [String], environment: [String: String], log: String? = nil, appending: Bool = false) throws -> ChildProcess {
        let script = Self.watchdog(redirect: log.map { " \(appending ? ">>" : ">")\($0) 2>&1" } ?? "")
        return try ChildProcess("/bin/sh", ["-c", script, "watched"] + arguments, environment: environment, ownProcessGroup: true)
    }

    /// The script of a watchdog shell: it runs `"$@"` (output sent as `redirect` says) and ends it
    /// within a second of this process's end. A dead process is gone even while it is a zombie:
    /// `swift test` reaps its test process only once the output pipe closes, and watchdogs
    /// holding that pipe and taking `kill -0`'s word that the zombie lives would keep a crashed
    /// run hanging for good.
    static func watchdog(redirect: String = "") -> String {
        let stat = "/proc/\(getpid())/stat"
        let ownerAlive = "alive() { [ -r \(stat) ] || return 1; read -r s 2>/dev/null < \(stat); s=${s##*) }; [ \"${s%% *}\" != Z ]; }"
        return "\(ownerAlive); \"$@\"\(redirect) & k=$!; while alive && kill -0 $k 2>/dev/null; do sleep 1; done; kill $k 2>/dev/null"
    }

    /// PipeWire: a D-Bus session bus, `pipewire`, `wireplumber` and `pipewire-pulse` in
    /// ``directory`` (its runtime, config and state directories), with the two null sinks of the
    /// PulseAudio server's configuration as PipeWire's own objects.
    private func launchPipeWire(timeout: Double) throws {
        let tools = ["dbus-daemon", "pipewire", "wireplumber", "pipewire-pulse"].map { ($0, Self.which($0)) }
        let missing = tools.filter { $0.1 == nil }.map(\.0)
        guard missing.isEmpty else {
            throw Failure(description: "PipeWire is not installed: \(missing.joined(separator: ", ")) (apt-get install pipewire pipewire-pulse wireplumber dbus)")
        }
        let dir = directory
        var env = ProcessInfo.processInfo.environment
        env["HOME"] = dir.path
        env["XDG_RUNTIME_DIR"] = dir.path
        env["XDG_CONFIG_HOME"] = dir.appendingPathComponent("config").path
        env["XDG_STATE_HOME"] = dir.appendingPathComponent("state").path
        env["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=\(dir.appendingPathComponent("bus").path)"
        env["PULSE_SERVER"] = nil
        env["PIPEWIRE_REMOTE"] = nil
        let log = { (name: String) in dir.appendingPathComponent("\(name).log").path }
        // A killed daemon's sockets stay behind (``crash()``): the waits below look for the new
        // daemons' sockets, and would otherwise find the old ones at once and start the next
        // daemon before the one it needs serves.
        for stale in ["bus", "pipewire-0", "pipewire-0.lock", "pipewire-0-manager", "pipewire-0-manager.lock"] {
            try? FileManager.default.removeItem(at: dir.appendingPathComponent(stale))
        }
        daemons = [try watched(
            [tools[0].1!, "--session", "--address=\(env["DBUS_SESSION_BUS_ADDRESS"]!)", "--nofork", "--nopidfile"], environment: env, log: log("dbus"))]
        guard waitUntil(timeout: timeout, { FileManager.default.fileExists(atPath: dir.appendingPathComponent("bus").path) }) else {
            throw giveUp("the private D-Bus session bus did not come up", logs: ["dbus"])
        }
        do { try writePipeWireSinks(configHome: env["XDG_CONFIG_HOME"]!) } catch { throw giveUp("the null sinks' configuration could not be written: \(error)") }
        daemons.append(try watched([tools[1].1!], environment: env, log: log("pipewire")))
        guard waitUntil(timeout: timeout, { FileManager.default.fileExists(atPath: dir.appendingPathComponent("pipewire-0").path) }) else {
            throw giveUp("the private PipeWire did not come up", logs: ["pipewire"])
        }
        daemons.append(try watched([tools[2].1!], environment: env, log: log("wireplumber")))
        pipeWireEnvironment = env
        try launchPipeWirePulse(timeout: timeout)
    }

    /// Stops the server and returns a failure saying `what`, with the last lines of the named
    /// logs (`<name>.log` in ``directory``), read before ``stop()`` removes them.
    private func giveUp(_ what: String, logs names: [String] = []) -> Failure {
        let logs = names.map { name in
            let text = (try? String(contentsOf: directory.appendingPathComponent("\(name).log"), encoding: .utf8)) ?? ""
            return "\(name).log:\n" + text.split(separator: "\n").suffix(20).joined(separator: "\n")
        }
        stop()
        return Failure(description: ([what] + logs).joined(separator: "\n"))
    }

    /// The environment PipeWire's daemons run in (set by ``launchPipeWire(timeout:)``).
    private var pipeWireEnvironment: [String: String] = [:]

    /// The two null sinks as PipeWire's own objects (a `pipewire.conf.d` drop-in), as a desktop's
    /// sound card is: they exist from PipeWire's start, before any client connects, and stay when
    /// only pipewire-pulse restarts. Made through pipewire-pulse's module-null-sink instead, a
    /// sink loaded while a client reconnects to a restarted server can fail to activate, and
    /// `pactl load-module` then never returns.
    private func writePipeWireSinks(configHome: String) throws {
        let folder = URL(fileURLWithPath: configHome).appendingPathComponent("pipewire/pipewire.conf.d")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let sinks = [("speaker", "Speaker", "[ FL FR ]"), ("micfeed", "MicFeed", "[ MONO ]")].map { name, description, positions in
            """
                { factory = adapter
                    args = {
                        factory.name = support.null-audio-sink
                        node.name = "\(name)"
                        node.description = "\(description)"
                        media.class = "Audio/Sink"
                        audio.format = "F32"
                        audio.rate = \(sampleRate)
                        audio.position = \(positions)
                        object.linger = true
                    }
                }
            """
        }
        let text = "context.objects = [\n\(sinks.joined(separator: "\n"))\n]\n"
        try text.write(to: folder.appendingPathComponent("openavf-sinks.conf"), atomically: true, encoding: .utf8)
    }

    /// pipewire-pulse, once it serves and lists the two null sinks' monitors, with the fixture's
    /// defaults set (WirePlumber's part, ``sessionSetUp(within:)``).
    private func launchPipeWirePulse(timeout: Double) throws {
        guard let tool = Self.which("pipewire-pulse") else { throw Failure(description: "pipewire-pulse is not installed") }
        let dir = directory
        let log = dir.appendingPathComponent("pipewire-pulse.log").path
        try? FileManager.default.removeItem(at: dir.appendingPathComponent("pulse"))  // a killed one's socket
        daemons.append(try watched([tool], environment: pipeWireEnvironment, log: log))
        // Polled: a server that starts says so only by answering a client.
        let deadline = Date(timeIntervalSinceNow: timeout)
        while !answers(timeout: 5) {
            guard Date() < deadline else {
                throw giveUp("the private pipewire-pulse did not come up", logs: ["pipewire-pulse"])
            }
            usleep(20_000)
        }
        // WirePlumber configures the sinks' ports (their monitors appear then) and keeps the
        // defaults (until it has them, pipewire-pulse refuses `set-default-sink` as "Not
        // supported"). After a whole restart on a busy machine, Debian 12's WirePlumber has been
        // seen to leave the sinks pending for good ("2 pending linkable(s) not activated in 20sec.
        // This should never happen"). A session manager that has not set both up within 10 s is
        // started again, as a desktop session restarts a stuck service; three tries at most.
        var missing = ""
        for attempt in 1...3 {
            if attempt > 1, daemons.count == 4, let wirePlumber = Self.which("wireplumber") {
                _ = daemons[2].terminate(SIGKILL)
                do {
                    daemons[2] = try watched([wirePlumber], environment: pipeWireEnvironment, log: dir.appendingPathComponent("wireplumber.log").path, appending: true)
                } catch {
                    throw giveUp("WirePlumber could not be started again: \(error)", logs: ["wireplumber"])
                }
            }
            missing = sessionSetUp(within: 10)
            if missing.isEmpty { return }
        }
        throw giveUp("the private PipeWire's session manager did not set up \(missing) in three tries of 10 s", logs: ["pipewire", "wireplumber", "pipewire-pulse"])
    }

    /// Waits up to `seconds` for the sinks' monitors, then sets the fixture's default sink and
    /// source; returns what is missing, or "" when all is set up.
    private func sessionSetUp(within seconds: Double) -> String {
        let end = Date(timeIntervalSinceNow: seconds)
        guard waitUntil(timeout: seconds, {
            let sources = (try? self.pactl(["list", "short", "sources"])) ?? ""
            return sources.contains("speaker.monitor") && sources.contains("micfeed.monitor")
        }) else { return "the null sinks' monitors" }
        for (command, name) in [("set-default-sink", "speaker"), ("set-default-source", "micfeed.monitor")] {
            guard waitUntil(timeout: max(end.timeIntervalSinceNow, 0), { (try? self.pactl([command, name])) != nil }) else {
                return "the default (\(command) \(name) refused)"
            }
        }
        return ""
    }

    private func launchPulseAudio(timeout: Double) throws {
        let pulseaudio = Self.which("pulseaudio")
        guard let pulseaudio else { throw Failure(description: "pulseaudio is not installed (apt-get install pulseaudio)") }
        var env = ProcessInfo.processInfo.environment
        let dir = directory
        env["HOME"] = dir.path
        env["XDG_RUNTIME_DIR"] = dir.path
        env["PULSE_RUNTIME_PATH"] = dir.appendingPathComponent("runtime").path
        env["PULSE_STATE_PATH"] = dir.appendingPathComponent("state").path
        env["PULSE_SERVER"] = nil
        let p = try ChildProcess(pulseaudio, [
            "-n", "-F", directory.appendingPathComponent("default.pa").path, "--daemonize=no", "--exit-idle-time=20", "--use-pid-file=no",
            "--disallow-exit=no", "--log-target=file:\(dir.appendingPathComponent("server.log").path)", "--log-level=notice",
            "--realtime=yes", "--high-priority=yes",
        ], environment: env)
        process = p
        // Polled: a server that starts says so only by answering a client.
        let deadline = Date(timeIntervalSinceNow: timeout)
        while !answers(timeout: 5) {
            guard p.isRunning, Date() < deadline else {
                throw giveUp("the private PulseAudio server did not come up", logs: ["server"])
            }
            usleep(20_000)
        }
    }

    /// Runs `body` without the keepers' streams, so that the server does only what `body` asks of
    /// it (a measurement of the server's CPU; the keepers hold its sinks at a 2.5 ms latency).
    /// The sinks idle in long blocks meanwhile: sound starts up to two seconds late. The keepers
    /// start again afterwards.
    public func withoutKeepers<T>(_ body: () throws -> T) throws -> T {
        for keeper in keepers { keeper.terminate() }
        keepers = []
        let result = Result { try body() }
        try startKeepers(timeout: 10)
        return try result.get()
    }

    /// Silent streams that keep the null sinks rendering in small blocks.
    private func startKeepers(timeout: Double) throws {
        // An idle null sink renders in blocks of up to two seconds and, once a stream arrives,
        // only notices at the end of the block it sleeps in: the first audio reaches its monitor
        // up to two seconds late. A silent 10 ms stream on each sink keeps them rendering in
        // small blocks, as a sound card would. (Digital silence does not change any measurement;
        // volume 0 says it is inaudible, so it is not "other audio playing" to a session.)
        if let pacat = Self.which("pacat") {
            for (sink, channels) in [("speaker", 2), ("micfeed", 1)] {
                // A watchdog shell runs the keeper and ends it when this process is gone, so that
                // a crashed owner leaves no client behind and the server exits on its own
                // (--exit-idle-time).
                keepers.append(try ChildProcess("/bin/sh", ["-c", Self.watchdog(), "keeper", pacat,
                    "--playback", "--device=\(sink)", "--raw", "--format=float32le", "--rate=\(sampleRate)",
                    "--channels=\(channels)", "--latency-msec=10", "--client-name=openavf-keeper", "--volume=0", "/dev/zero",
                ], environment: environment, ownProcessGroup: true))
            }
            let running = { ((try? self.pactl(["list", "short", "sinks"])) ?? "").split(separator: "\n").filter { $0.hasSuffix("RUNNING") }.count == 2 }
            guard waitUntil(timeout: timeout, running) else {
                stop()
                throw Failure(description: "the private server's sinks did not start running")
            }
            // pipewire-pulse does not keep a new stream's volume (its session manager restores the
            // role's): the keepers are set silent afterwards, so that no session hears them as
            // other audio playing.
            if kind == .pipewire {
                let inputs = try pactl(["list", "sink-inputs"]).components(separatedBy: "Sink Input #").dropFirst()
                for block in inputs where block.contains("openavf-keeper") {
                    guard let index = block.split(separator: "\n").first.map(String.init)?.trimmingCharacters(in: .whitespaces) else { continue }
                    try pactl(["set-sink-input-volume", index, "0"])
                }
            }
            // The sinks switch to small blocks only when the block they sleep in ends: wait until
            // each monitor delivers data, so the first measurement does not see that delay.
            for sink in ["speaker", "micfeed"] {
                _ = try SignalCapture(server: self, device: "\(sink).monitor").stop()
            }
        }
    }

    deinit { stop() }

    /// Kills the daemon without warning (SIGKILL), as a crash would: clients see the connection
    /// drop. On PipeWire every daemon goes, and the null sinks with PipeWire.
    public func crash() {
        for keeper in keepers { keeper.terminate() }
        keepers = []
        process?.terminate(SIGKILL)
        process = nil
        for daemon in daemons.reversed() { _ = daemon.terminate(SIGKILL) }
        daemons = []
    }

    /// Kills (SIGKILL) only PipeWire's PulseAudio interface, `pipewire-pulse`, as a crash of it
    /// would: PipeWire and its session manager go on. Only for a PipeWire server.
    public func crashPulseInterface() {
        precondition(kind == .pipewire && daemons.count == 4, "only a running private PipeWire has a pipewire-pulse of its own")
        for keeper in keepers { keeper.terminate() }
        keepers = []
        _ = daemons.removeLast().terminate(SIGKILL)
    }

    /// Starts pipewire-pulse again after ``crashPulseInterface()``, and the keepers.
    public func restartPulseInterface(timeout: Double = 30) throws {
        try launchPipeWirePulse(timeout: timeout)
        try startKeepers(timeout: timeout)
    }

    /// Starts the daemon again after ``crash()``, in the same directory and on the same socket.
    public func restart(timeout: Double = 30) throws {
        try launch(timeout: timeout)
    }

    /// Whether the server answers `pactl info` within `timeout` seconds.
    public func answers(timeout: Double = 5) -> Bool {
        guard let path = Self.which("pactl") else { return false }
        let scratch = directory.appendingPathComponent("probe-\(UInt32.random(in: 0...UInt32.max))").path
        return (try? ChildProcess.run(path, ["info"], environment: environment, scratch: scratch, timeout: timeout)) != nil
    }

    /// Kills the server and starts it again in the same directory, on the same socket, when it
    /// does not answer within `timeout` seconds; returns whether it had to. A test fixture shared
    /// by many tests calls this before handing the server out, so that one test that leaves the
    /// server broken (a restart that did not come back whole) does not fail every test after it.
    @discardableResult
    public func reviveIfUnresponsive(timeout: Double = 5) throws -> Bool {
        if answers(timeout: timeout) { return false }
        crash()
        try restart()
        return true
    }

    /// Stops the server and removes its directory.
    public func stop() {
        for keeper in keepers { keeper.terminate() }
        keepers = []
        process?.terminate()
        process = nil
        for daemon in daemons.reversed() { _ = daemon.terminate() }
        daemons = []
        try? FileManager.default.removeItem(at: directory)
    }

    /// The environment a child process needs to use this server.
    public var environment: [String: String] {
        var env = ProcessInfo.processInfo.environment
        env["PULSE_SERVER"] = serverString
        return env
    }

    /// Points this process's libpulse at the server (sets `PULSE_SERVER`). Call before the first
    /// audio queue opens a stream.
    public func makeDefaultForThisProcess() {
        setenv("PULSE_SERVER", serverString, 1)
    }

    /// Sets the default sink and source back to `speaker` and `micfeed.monitor` where they are not,
    /// and says so. WirePlumber picks a default of its own when a device comes or goes and may
    /// keep it after the test that caused it has ended, so that the tests after it, of any class,
    /// would find another default. A test that changes a default puts it back itself; this catches
    /// what the session manager did.
    ///
    /// One `pactl info` reads both defaults, so that the usual case (nothing moved) costs one
    /// client process per test.
    public func restoreDefaults() {
        guard let info = try? pactl(["info"]).split(separator: "\n") else { return }
        for (kind, label, name) in [("sink", "Default Sink: ", "speaker"), ("source", "Default Source: ", "micfeed.monitor")] {
            let now = info.first { $0.hasPrefix(label) }.map { String($0.dropFirst(label.count)) } ?? ""
            guard now != name else { continue }
            print("the default \(kind) was \(now.isEmpty ? "none" : now); set back to \(name)")
            _ = try? pactl(["set-default-\(kind)", name])
        }
    }

    /// Makes a plain, silent source called `name` and returns the module index that unloads it:
    /// PulseAudio's `module-null-source`; on PipeWire, whose pipewire-pulse has no such module
    /// (0.3.65), a null sink made a source (`media.class=Audio/Source/Virtual`). Returns once the
    /// server lists it.
    public func loadNullSource(_ name: String) throws -> String {
        let module = kind == .pipewire
            ? try pactl(["load-module", "module-null-sink", "sink_name=\(name)", "sink_properties=media.class=Audio/Source/Virtual"])
            : try pactl(["load-module", "module-null-source", "source_name=\(name)"])
        let listed = waitUntil(timeout: 5) {
            ((try? self.pactl(["list", "short", "sources"])) ?? "").split(separator: "\n").contains { $0.split(separator: "\t").dropFirst().first == Substring(name) }
        }
        guard listed else { throw Failure(description: "the source \(name) did not appear") }
        return module.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The playback buffer duration this server grants a stream that asks for `asked` seconds
    /// (what `pa_stream_get_buffer_attr` reads back as its target length). Both servers keep a
    /// sink's share of a stream of 50 ms or more: it is asked for a third at a time, and the
    /// server keeps half of what two requests leave, a sixth, as the sink's latency; the stream
    /// gets the rest. PulseAudio grants about that (within 3 ms or 10 %). pipewire-pulse (0.3.65)
    /// never requests less than 256/48000 s at a time and keeps at least three requests, so it
    /// grants at least 16 ms, and rounds larger asks up to whole requests of a quarter of the
    /// buffer: up to half as much again.
    public func grantedBufferRange(asked: Double) -> ClosedRange<Double> {
        let stream = asked >= 0.05 ? asked * 5 / 6 : asked
        if kind == .pipewire {
            let floor = 3 * 256.0 / 48000
            return max(stream, floor) - 0.001...max(stream * 1.5, floor) + 0.001
        }
        let tolerance = max(0.003, stream * 0.1)
        return stream - tolerance...stream + tolerance
    }

    /// The latency the server runs a device at, in seconds: the "configured" figure `pactl list
    /// sinks|sources` shows for `name` (`kind` is `sinks` or `sources`).
    public func configuredLatency(_ kind: String, _ name: String) throws -> Double {
        let list = try pactl(["list", kind])
        guard let block = list.components(separatedBy: "\n\n").first(where: { $0.contains("Name: \(name)\n") }),
            let line = block.split(separator: "\n").first(where: { $0.contains("Latency:") }),
            // "Latency: 1234 usec, configured 10000 usec"
            let configured = line.components(separatedBy: "configured ").last?.split(separator: " ").first.flatMap({ Double($0) })
        else { throw Failure(description: "no configured latency for \(name) in:\n\(list)") }
        return configured / 1e6
    }

    /// Runs `pactl` against this server and returns its output; throws after 30 s (a server that
    /// stopped answering).
    @discardableResult
    public func pactl(_ arguments: [String]) throws -> String {
        guard let path = Self.which("pactl") else { throw Failure(description: "pactl is not installed") }
        return try ChildProcess.run(
            path, arguments, environment: environment, scratch: directory.appendingPathComponent("tool-\(UInt32.random(in: 0...UInt32.max))").path,
            timeout: 30)
    }

    /// A `media.role` for a stream that stands in for sound in the room (what the microphone's
    /// sink `micfeed` plays: a talker, noise, an echo path): a voice-processing unit ducks other
    /// applications' playback while it runs, and the room is not an application. `room-` and a
    /// tag of its own: no policy module and no ducking acts on such a role, and PipeWire's session
    /// manager, which remembers volumes by role, gives no room stream another's volume (with a
    /// shared role the echo path's −6 dB would go to the next talker, and to both ends of the
    /// next path).
    public static func roomRole() -> String { "room-\(UInt32.random(in: 0...UInt32.max))" }

    /// Runs a tool (pactl, pacat, parec…) against this server and returns its standard output.
    @discardableResult
    public func run(_ tool: String, _ arguments: [String]) throws -> String {
        guard let path = Self.which(tool) else { throw Failure(description: "\(tool) is not installed") }
        return try ChildProcess.run(path, arguments, environment: environment, scratch: directory.appendingPathComponent("tool-\(UInt32.random(in: 0...UInt32.max))").path)
    }

    /// The absolute path of `tool` on `PATH`.
    public static func which(_ tool: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for dir in path.split(separator: ":") {
            let candidate = "\(dir)/\(tool)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    /// The server this process should use: the machine's own when one answers, else a private one
    /// (returned, so the caller keeps it alive). `announce` receives a line saying which.
    public static func serverForThisProcess(kind: Kind? = nil, announce: (String) -> Void) throws -> PrivatePulseServer? {
        if let kind {
            let server = try PrivatePulseServer(kind: kind)
            server.makeDefaultForThisProcess()
            announce("Started a private \(kind == .pipewire ? "PipeWire (pipewire-pulse)" : "PulseAudio") server at \(server.serverString), as asked.")
            return server
        }
        if let pactl = which("pactl"),
            (try? ChildProcess.run(pactl, ["info"], environment: ProcessInfo.processInfo.environment, scratch: NSTemporaryDirectory() + "openavf-probe-\(getpid())")) != nil {
            announce("Using the sound server this machine runs.")
            return nil
        }
        let server = try PrivatePulseServer()
        server.makeDefaultForThisProcess()
        announce("No sound server answers here (a headless machine); started a private PulseAudio server at \(server.serverString).")
        return server
    }
}
