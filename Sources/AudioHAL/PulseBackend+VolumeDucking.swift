internal import CDuckGuard
internal import CPulseAudio
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Ducking by volume, where the server has no `module-role-ducking` (PipeWire's pipewire-pulse).
///
/// The library lowers each other client's playback stream whose role is `music` or `video`, or
/// that has none, by the level asked (``DuckLevel``: at full, to 20 % of its own volume on the
/// server's scale, the module's level: −41.9 dB) with an ordinary stream-volume call, sets it
/// again when the level changes, and puts it back when ducking ends. Streams that appear
/// while it ducks are lowered as the session hears of them. A stream whose volume someone else
/// sets meanwhile (the user, in a mixer) is theirs from then on: it is not put back over their
/// choice, nor lowered again.
///
/// A killed process cannot put anything back, so the putting back is not this process's: before
/// lowering a stream it tells a *guard* (a child process, see `CDuckGuard.h`) the volume to put
/// back, and ending the ducking is closing this process's end of the socket pair that leads to the
/// guard. The kernel closes it when the process ends however it ends, and the guard then sets
/// every remembered stream back over its own connection and exits: no one stays ducked after a
/// SIGKILL. Where no guard can be started (a server reached over TCP, not a local socket), the
/// process puts the streams back itself when ducking ends, and a process killed meanwhile leaves
/// them lowered.
///
/// PipeWire's session manager (WirePlumber's stream restore) remembers the last volume of every
/// stream by its role (or application), and gives a new stream of the same role that volume: a
/// music stream that starts while music is lowered starts lowered. Such a stream, at the level
/// this process set a stream of the same key to, is taken as lowered already, and is put back to
/// that stream's own volume, so the volume the session manager remembers is the one from before.
///
/// A lowered stream that ends while lowered leaves the session manager remembering the lowered
/// volume for its key, and every later stream of that key (the next song's stream, say) would
/// start lowered long after the ducking. So when ducking ends, the server's stream-restore entry
/// of each such stream (`module-stream-restore.id`; pipewire-pulse hands the entries to
/// WirePlumber) is set back to the volume the stream had before, unless a stream of that key
/// plays now (its own volume is then what is remembered). A guard cannot do this: after a
/// SIGKILL, a stream that ended while lowered stays remembered lowered.
///
/// Two processes ducking at once on such a server each lower what they find: a stream the first
/// lowered, the second lowers again, and each puts back the volume it found. If the second ends
/// first, the stream is back at its own volume once both have ended. If the first ends first, it
/// puts the stream back while the second still ducks; the second takes that for a user's choice
/// and leaves the stream at its own volume from then on.
struct VolumeDucking: Sendable {
    /// A stream this process lowered.
    struct Lowered: Sendable {
        /// What this process set it to, and the volume it had before.
        var set: [UInt32]
        var before: [UInt32]
        /// The session manager's key for it (``PulseBackend/DuckableStream/key``).
        var key: String?
        /// Its stream-restore entry (``PulseBackend/DuckableStream/restore``).
        var restore: PulseBackend.RestoreEntry?
    }

    /// How far the streams are lowered.
    var level: DuckLevel
    /// The guard's pid and this process's end of the socket pair to it; `nil` where none could be started.
    var guardProcess: (pid: pid_t, fd: Int32)?
    /// The streams lowered, by index.
    var lowered: [UInt32: Lowered] = [:]
    /// Lowered streams that ended while lowered, by stream-restore entry: the entry is set back
    /// when ducking ends.
    var endedLowered: [String: Lowered] = [:]
    /// Every stream dealt with while ducking: lowered, or someone else's since.
    var handled: Set<UInt32> = []
}

extension PulseBackend {
    /// A playback stream that ducking lowers: another client's, with the role `music`, `video`
    /// or none.
    struct DuckableStream: Sendable {
        var index: UInt32
        var volumes: [UInt32]
        var muted: Bool
        /// What PipeWire's session manager keeps its volume by: its role, else its application
        /// (the first of WirePlumber's `media.role`, `application.id`, `application.name`,
        /// `media.name`, `node.name`).
        var key: String?
        /// The server's stream-restore entry for it (`module-stream-restore.id`), where the
        /// server keeps one.
        var restore: RestoreEntry?
    }

    /// A stream-restore entry's name and the channel map its volumes are in.
    struct RestoreEntry: Sendable {
        var id: String
        var map: pa_channel_map
    }

    /// Other clients' playback streams that ducking lowers; `nil` when the server did not answer
    /// (an empty list would read as every lowered stream gone). The corresponding PulseAudio call
    /// is `pa_context_get_sink_input_info_list`.
    func duckableStreams() -> [DuckableStream]? {
        typealias Query = PulseQuery<(streams: [DuckableStream], complete: Bool), (UInt32, UInt32, String)>
        let answer: (streams: [DuckableStream], complete: Bool) = control.query(([], false), context: (audio.clientIndex, control.clientIndex, String(getpid()))) { ud in
            pa_context_get_sink_input_info_list(context, { _, info, eol, ud in
                let box = Query.from(ud)
                if eol > 0 { box.value.complete = true }
                if eol == 0, let i = info?.pointee, i.client != box.context.0, i.client != box.context.1 {
                    let properties = PulseBackend.properties(i.proplist)
                    let role = properties["media.role"]
                    // This process's own streams on connections of their own (IOProcs) are left alone too.
                    if properties["application.process.id"] != box.context.2, role == nil || role == "music" || role == "video" {
                        var volume = i.volume
                        let volumes = withUnsafeBytes(of: &volume.values) { raw in
                            Array(raw.bindMemory(to: pa_volume_t.self).prefix(Int(volume.channels)))
                        }
                        let key = ["media.role", "application.id", "application.name", "media.name", "node.name"].lazy
                            .compactMap { name in properties[name].map { "\(name):\($0)" } }.first
                        let restore = properties["module-stream-restore.id"].map { RestoreEntry(id: $0, map: i.channel_map) }
                        box.value.streams.append(DuckableStream(index: i.index, volumes: volumes, muted: i.mute != 0, key: key, restore: restore))
                    }
                }
                if eol != 0 { box.finish() }
            }, ud)
        }
        return answer.complete ? answer.streams : nil
    }

    /// Lowers the other clients' streams not dealt with yet; when `starting`, starts ducking
    /// (and the guard) if it has not started, else does nothing unless ducking is on. A `level`
    /// other than the one ducked at sets the streams lowered to it.
    func duckByVolume(starting: Bool, level: DuckLevel?) {
        volumeDucking.withLock { state in
            guard state != nil || starting else { return }
            // Asked with the lock held: a list from before another call's changes would look like
            // someone else's. No answer: nothing is changed.
            guard let streams = duckableStreams() else { return }
            var ducking = state ?? VolumeDucking(level: level ?? .full, guardProcess: startDuckGuard())
            defer { state = ducking }
            let guardFD = ducking.guardProcess?.fd
            /// Tells the guard what to put back; `false` when it cannot take it (gone, or full), and
            /// then the stream is not lowered.
            func remember(_ index: UInt32, _ volumes: [UInt32]) -> Bool {
                guard let guardFD else { return true }  // no guard: this process puts it back itself
                guard ducking.lowered.count < Int(OPENAVF_DUCK_GUARD_MAX_STREAMS) else { return false }
                return volumes.withUnsafeBufferPointer { openavf_duck_guard_remember(guardFD, index, UInt8($0.count), $0.baseAddress) } == 0
            }
            /// Takes a stream at the level a lowered stream of its key (playing, or ended while
            /// lowered: the next song) was set to as lowered already (the session manager gave it
            /// that level), to be put back to that stream's volume. Putting it back then sets what
            /// the session manager remembers, so an ended stream it follows needs no writing back.
            func adopt(_ stream: DuckableStream) -> Bool {
                guard let key = stream.key else { return false }
                let playing = ducking.lowered.first { $0.key != stream.index && $0.value.key == key && Self.sameVolumes($0.value.set, stream.volumes) }?.value
                let ended = ducking.endedLowered.first { $0.value.key == key && Self.sameVolumes($0.value.set, stream.volumes) }
                guard let model = playing ?? ended?.value, remember(stream.index, model.before) else { return false }
                ducking.lowered[stream.index] = VolumeDucking.Lowered(set: stream.volumes, before: model.before, key: key, restore: stream.restore)
                if playing == nil, let ended { ducking.endedLowered[ended.key] = nil }
                return true
            }
            // Streams gone, or set by someone else since, are no longer this process's to put back.
            for (index, volumes) in ducking.lowered {
                let now = streams.first { $0.index == index }
                if let now, Self.sameVolumes(now.volumes, volumes.set) { continue }
                ducking.lowered[index] = nil
                if now == nil, let restore = volumes.restore { ducking.endedLowered[restore.id] = volumes }
                if let now, adopt(now) { continue }
                // Someone else's volume now: what they chose is what is remembered.
                if let restore = now?.restore { ducking.endedLowered[restore.id] = nil }
                if let guardFD { _ = openavf_duck_guard_forget(guardFD, index) }
            }
            ducking.handled.formIntersection(streams.map(\.index))
            // A new level: the streams lowered (still at what this process set, as just checked)
            // are set to it.
            if let level, level != ducking.level {
                ducking.level = level
                for (index, volumes) in ducking.lowered {
                    let set = volumes.before.map { UInt32((Double($0) * level.volumeFactor).rounded()) }
                    if (try? setStreamVolumes(index, set)) != nil { ducking.lowered[index]?.set = set }
                }
            }
            for stream in streams where !ducking.handled.contains(stream.index) {
                // A silent stream is looked at again when it changes.
                guard !stream.muted, stream.volumes.contains(where: { $0 > 0 }), stream.volumes.count <= Int(OPENAVF_DUCK_GUARD_MAX_CHANNELS) else {
                    continue
                }
                ducking.handled.insert(stream.index)
                if adopt(stream) { continue }
                let set = stream.volumes.map { UInt32((Double($0) * ducking.level.volumeFactor).rounded()) }
                // The guard knows what to put back before the stream is lowered.
                guard remember(stream.index, stream.volumes) else { continue }
                do {
                    try setStreamVolumes(stream.index, set)
                    ducking.lowered[stream.index] = VolumeDucking.Lowered(set: set, before: stream.volumes, key: stream.key, restore: stream.restore)
                } catch {
                    // It went meanwhile.
                    if let guardFD { _ = openavf_duck_guard_forget(guardFD, stream.index) }
                }
            }
        }
    }

    /// Ends ducking by volume (if on): streams gone or set by someone else since are left alone,
    /// the guard puts the others back (and this waits for it to have), or this process does where
    /// there is no guard or it failed. Then the stream-restore entries of streams that ended while
    /// lowered, or while being put back, are set back, unless a stream of the entry plays.
    /// Without an answer from the server (it went: its streams went with it) nothing is put back.
    /// Holds the lock throughout, so that a new start waits for the end and reads the volumes from
    /// before.
    func endVolumeDucking() {
        volumeDucking.withLock { state in
            guard let ducking = state else { return }
            state = nil
            let streams = duckableStreams()
            var back: [UInt32: [UInt32]] = [:]
            var ended = ducking.endedLowered
            for (index, volumes) in ducking.lowered {
                let now = streams?.first { $0.index == index }
                if let now, Self.sameVolumes(now.volumes, volumes.set) {
                    back[index] = volumes.before
                    continue
                }
                if streams != nil, now == nil, let restore = volumes.restore { ended[restore.id] = volumes }
                if let restore = now?.restore { ended[restore.id] = nil }
                if let guardProcess = ducking.guardProcess { _ = openavf_duck_guard_forget(guardProcess.fd, index) }
            }
            let guardPutBack = ducking.guardProcess.map { openavf_duck_guard_finish($0.fd, $0.pid) == 0 } ?? false
            if !guardPutBack {
                for (index, volumes) in back { try? setStreamVolumes(index, volumes) }
            }
            // A stream that ended as it was being put back may have missed it.
            guard streams != nil, let after = duckableStreams() else { return }
            for index in back.keys where !after.contains(where: { $0.index == index }) {
                if let lowered = ducking.lowered[index], let restore = lowered.restore { ended[restore.id] = lowered }
            }
            guard !ended.isEmpty else { return }
            // Until an entry is written back, the next stream of its key (the next song) starts at
            // the remembered lowered level. Such a stream, not dealt with yet and at the level an
            // ended stream of its key was set to, is that stream's successor: it is put back to
            // that stream's volume, which sets what is remembered, and the entry needs no writing.
            // Looked for again after the writing, for a stream that started meanwhile.
            let models = Array(ended.values)
            var successors: Set<UInt32> = []
            func putBackSuccessors(in list: [DuckableStream]) {
                for stream in list where ducking.lowered[stream.index] == nil && !ducking.handled.contains(stream.index) && !successors.contains(stream.index) {
                    guard let key = stream.key, let model = models.first(where: { $0.key == key && Self.sameVolumes($0.set, stream.volumes) }) else { continue }
                    try? setStreamVolumes(stream.index, model.before)
                    successors.insert(stream.index)
                    if let restore = model.restore { ended[restore.id] = nil }
                }
            }
            putBackSuccessors(in: after)
            for (id, volumes) in ended where !after.contains(where: { $0.restore?.id == id }) {
                guard let restore = volumes.restore else { continue }
                try? setRememberedVolumes(restore, volumes.before)
            }
            if let final = duckableStreams() { putBackSuccessors(in: final) }
        }
    }

    /// Whether two volume sets are the same but for the server's rounding (pipewire-pulse keeps
    /// volumes as linear floats and gives them back on PulseAudio's cubic scale).
    static func sameVolumes(_ a: [UInt32], _ b: [UInt32]) -> Bool {
        a.count == b.count && zip(a, b).allSatisfy { max($0, $1) - min($0, $1) <= 64 }
    }

    /// Sets a playback stream's channel volumes. The corresponding PulseAudio call is
    /// `pa_context_set_sink_input_volume`.
    func setStreamVolumes(_ index: UInt32, _ volumes: [UInt32]) throws(HALError) {
        var v = Self.channelVolumes(volumes)
        try perform("set the volume of stream \(index)") { cb, ud in pa_context_set_sink_input_volume(context, index, &v, cb, ud) }
    }

    /// Sets the volume the server's stream-restore remembers for an entry, which the next stream
    /// of that entry starts at; streams playing now keep theirs. The rest of the entry (its
    /// device, its mute, its channel map) is written back as the server lists it. pipewire-pulse
    /// lists none of WirePlumber's entries but takes a write: the entry is then written with the
    /// stream's channel map, unmuted and with no device, so a device WirePlumber keeps for that
    /// entry may be forgotten. An entry listed in other channels is left alone. The corresponding
    /// PulseAudio calls are `pa_ext_stream_restore_read` and `pa_ext_stream_restore_write`.
    func setRememberedVolumes(_ entry: RestoreEntry, _ volumes: [UInt32]) throws(HALError) {
        typealias Listed = (map: pa_channel_map, channels: Int, device: String?, mute: Int32)
        typealias Query = PulseQuery<(entry: Listed?, complete: Bool), String>
        let read: (entry: Listed?, complete: Bool) = control.query((nil, false), context: entry.id) { ud in
            pa_ext_stream_restore_read(context, { _, info, eol, ud in
                let box = Query.from(ud)
                if eol == 0, let info = info?.pointee, let name = info.name, String(cString: name) == box.context {
                    box.value.entry = (info.channel_map, Int(info.volume.channels), info.device.map { String(cString: $0) }, info.mute)
                }
                if eol > 0 { box.value.complete = true }
                if eol != 0 { box.finish() }
            }, ud)
        }
        guard read.complete else { throw HALError(.notSupported, "the server keeps no stream-restore entries") }
        let listed = read.entry ?? (entry.map, volumes.count, nil, 0)
        guard listed.channels == volumes.count else { return }
        let name = strdup(entry.id), device = listed.device.flatMap { strdup($0) }
        defer {
            free(name)
            free(device)
        }
        var info = pa_ext_stream_restore_info()
        info.name = UnsafePointer(name)
        info.channel_map = listed.map
        info.volume = Self.channelVolumes(volumes)
        info.device = UnsafePointer(device)
        info.mute = listed.mute
        try perform("set the remembered volume of \(entry.id)") { cb, ud in
            pa_ext_stream_restore_write(context, PA_UPDATE_REPLACE, &info, 1, 0, cb, ud)
        }
    }

    /// Channel volumes as PulseAudio's `pa_cvolume`.
    static func channelVolumes(_ volumes: [UInt32]) -> pa_cvolume {
        var v = pa_cvolume()
        v.channels = UInt8(volumes.count)
        withUnsafeMutableBytes(of: &v.values) { raw in
            let values = raw.bindMemory(to: pa_volume_t.self)
            for (n, volume) in volumes.enumerated() { values[n] = volume }
        }
        return v
    }

    /// Starts the guard for the server this backend is connected to, where it listens on a local
    /// socket; `nil` otherwise, or when the system refuses a process.
    private func startDuckGuard() -> (pid: pid_t, fd: Int32)? {
        let server = control.locked { pa_context_get_server(context).map { String(cString: $0) } }
        guard let server, let path = Self.localSocketPath(server) else { return nil }
        let cookie = Self.pulseCookie()
        var fd: Int32 = -1
        let pid = path.withCString { p in
            cookie.withUnsafeBufferPointer { openavf_duck_guard_start(p, $0.count == 256 ? $0.baseAddress : nil, &fd) }
        }
        return pid > 0 ? (pid, fd) : nil
    }

    /// The socket path of a libpulse server string (`/path`, `unix:/path`, either after a
    /// `{machine-id}` prefix); `nil` for a server reached over the network.
    static func localSocketPath(_ server: String) -> String? {
        var address = Substring(server)
        if address.hasPrefix("{"), let end = address.firstIndex(of: "}") { address = address[address.index(after: end)...] }
        if address.hasPrefix("unix:") { address = address.dropFirst(5) }
        return address.hasPrefix("/") ? String(address) : nil
    }

    /// The client's PulseAudio cookie, where libpulse looks for it (`PULSE_COOKIE`, then
    /// `$XDG_CONFIG_HOME/pulse/cookie`, `~/.config/pulse/cookie`, `~/.pulse-cookie`); empty if
    /// none (pipewire-pulse asks for none).
    static func pulseCookie() -> [UInt8] {
        let environment = ProcessInfo.processInfo.environment
        let home = environment["HOME"] ?? NSHomeDirectory()
        let config = environment["XDG_CONFIG_HOME"] ?? home + "/.config"
        let candidates = [environment["PULSE_COOKIE"], config + "/pulse/cookie", home + "/.pulse-cookie"].compactMap { $0 }
        for path in candidates {
            if let data = FileManager.default.contents(atPath: path), data.count >= 256 { return Array(data.prefix(256)) }
        }
        return []
    }
}
