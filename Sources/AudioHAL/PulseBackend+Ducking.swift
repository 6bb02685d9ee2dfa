internal import CPulseAudio
import Foundation
import Synchronization

/// Ducking other clients, done by the server: PulseAudio's `module-role-ducking`.
///
/// While a process ducks, it keeps one *trigger stream*: a playback stream of silence, uncorked
/// (the module counts only streams that are neither corked nor muted), whose `media.role` is
/// ``triggerRole(for:)`` of the level asked. The module instance this backend relies on
/// (``duckModuleArguments``) has a group per ``DuckLevel``: each lowers every playback stream
/// whose role is `music` or `video`, or that has none (`no_role`), by its level (at full, to
/// 20 % on the server's volume scale, a cubic scale: −41.9 dB; the module's own default is
/// −20 dB) as long as a trigger stream of its role exists on any sink (`global=true`), and lifts
/// it as soon as the last one goes. (Triggers of two groups at once multiply: a process keeps one
/// trigger, and two processes ducking at different levels duck by both.) The server removes a client's streams when its
/// connection ends, so a process that is killed, crashes or exits leaves no one ducked.
///
/// The process's own playback is not ducked by its own session: a session that ducks others is
/// mixable, and the streams of a mixable session carry the role `game`, which the module leaves
/// alone (its streams opened earlier under another category keep their role, as every stream
/// keeps the properties it opened with).
///
/// The module stays loaded when this client disconnects; the next process that ducks finds it.
/// A server whose configuration already loads `module-role-ducking` for something else (it loads
/// only once) gets its instance reloaded with this library's group added, its own groups and
/// settings kept (`global` included: where it is off, ducking covers the sink this process plays
/// on).
///
/// Where the module cannot be loaded (PipeWire's pipewire-pulse, 0.3.65 at least, implements a
/// subset of PulseAudio's modules and not this one), the library ducks by volume itself: see
/// ``VolumeDucking``.
extension PulseBackend {
    /// The `media.role` of trigger streams at the full level: a role of its own, so that nothing
    /// else triggers the ducking and `module-role-cork` (which acts on `phone`) ignores it. Each
    /// other level has a role of its own too (``triggerRole(for:)``), and a group in the module.
    static let duckTriggerRole = "duck-others"
    static let duckModule = "module-role-ducking"
    /// The roles ducked: those of other applications' media and of streams without a role.
    static let duckedRoles = "no_role,music,video"

    /// The trigger role of a level: `duck-others` at full, `duck-others-10dB` and so on.
    static func triggerRole(for level: DuckLevel) -> String {
        level == .full ? duckTriggerRole : "\(duckTriggerRole)-\(level.rawValue)dB"
    }

    /// Whether a stream's role is one of the trigger roles (a silent stream of a ducking process).
    static func isDuckTriggerRole(_ role: String?) -> Bool {
        guard let role else { return false }
        return DuckLevel.allCases.contains { triggerRole(for: $0) == role }
    }

    /// A level as the module reads it: 20 % of the server's volume scale at full, else dB.
    static func duckVolume(_ level: DuckLevel) -> String { level == .full ? "20%" : "-\(level.rawValue)dB" }

    /// The module's groups, in order: the full level's first (the group earlier versions loaded).
    static let duckModuleLevels: [DuckLevel] = [.full, .light, .medium]

    /// The module instance this library loads: a group per level (`/` separates groups).
    static var duckModuleArguments: String {
        let levels = duckModuleLevels
        return "trigger_roles=\(levels.map { triggerRole(for: $0) }.joined(separator: "/")) "
            + "ducking_roles=\(levels.map { _ in duckedRoles }.joined(separator: "/")) global=true "
            + "volume=\(levels.map { duckVolume($0) }.joined(separator: "/"))"
    }

    /// Starts, changes or ends ducking others: makes sure the server's ducking module is loaded,
    /// then opens a trigger stream with the level's role (on `device`), and closes the one of the
    /// level before (after: the others do not come up in between), or closes it for `nil`.
    /// Idempotent. The corresponding PulseAudio calls are `pa_context_get_module_info_list`,
    /// `pa_context_load_module` and a playback stream's connection. Where the module cannot be
    /// loaded, it ducks by volume instead (``duckByVolume(starting:level:)``).
    package func setDuckingOthers(_ level: DuckLevel?, device: String?) throws(HALError) {
        guard let level else {
            let stream = duckTrigger.withLock { s -> (any HALStream)? in
                defer { s = nil }
                return s?.stream
            }
            stream?.close()
            endVolumeDucking()
            return
        }
        // Asked once per connection; the module is made sure of again (someone may have unloaded
        // it) each time a trigger stream opens, except right after that first answer.
        let (byModule, justChecked) = duckingByModule.withLock { known -> (Bool, Bool) in
            if let known { return (known, false) }
            do throws(HALError) {
                try ensureDuckingModule()
                known = true
            } catch {
                known = false
            }
            return (known!, true)
        }
        let result = duckTrigger.withLock { s -> Result<(any HALStream)?, HALError> in
            if s?.level == level { return .success(nil) }
            do throws(HALError) {
                if byModule && !justChecked { try ensureDuckingModule() }
                var request = HALStreamRequest(
                    format: HALStreamFormat(sampleRate: 48000, channels: 1), bufferDuration: 0.5, name: "duck others", startCorked: false,
                    device: device)
                request.serverProperties = ["media.role": Self.triggerRole(for: level)]
                request.carriesSound = false
                let old = s?.stream
                s = (try openOutput(request, source: SilenceSource()), level)
                return .success(old)
            } catch {
                return .failure(error)
            }
        }
        try result.get()?.close()
        if !byModule { duckByVolume(starting: true, level: level) }
    }

    /// Where the library ducks by volume, lowers the other clients' streams that appeared since
    /// the last call (the session calls on every change of the server's streams); the server's
    /// module needs no help.
    package func refreshDuckingOthers() {
        if duckingByModule.withLock({ $0 }) == false { duckByVolume(starting: false, level: nil) }
    }

    /// Loads the ducking module if no loaded instance has every level's trigger role among its
    /// trigger roles; an instance loaded for something else (or by an older version of this
    /// library, with fewer levels) is reloaded with the missing groups added.
    private func ensureDuckingModule() throws(HALError) {
        let ours = Set(DuckLevel.allCases.map { Self.triggerRole(for: $0) })
        let loaded = modules(named: Self.duckModule)
        if loaded.contains(where: { ours.isSubset(of: Self.triggerRoles(of: $0.argument)) }) { return }
        if let other = loaded.first {
            guard let merged = Self.argumentsAddingDuckGroup(to: other.argument) else {
                throw HALError(.notSupported, "the server's \(Self.duckModule) (\(other.argument)) cannot take another group")
            }
            try unloadModule(other.index)
            do {
                _ = try loadModule(Self.duckModule, merged)
            } catch {
                _ = try? loadModule(Self.duckModule, other.argument)  // put the server's own back
                throw error
            }
            return
        }
        do {
            _ = try loadModule(Self.duckModule, Self.duckModuleArguments)
        } catch {
            // Another process may have loaded it meanwhile (the module loads only once).
            if modules(named: Self.duckModule).contains(where: { ours.isSubset(of: Self.triggerRoles(of: $0.argument)) }) { return }
            throw error
        }
    }

    // MARK: Module arguments

    /// A module argument string (`key=value key2="a b"`) as a dictionary, `nil` if malformed.
    static func moduleArguments(_ text: String) -> [String: String]? {
        var result: [String: String] = [:]
        var rest = Substring(text)
        while true {
            rest = rest.drop { $0 == " " || $0 == "\t" || $0 == "\n" }
            guard !rest.isEmpty else { return result }
            guard let equals = rest.firstIndex(of: "=") else { return nil }
            let key = String(rest[..<equals])
            rest = rest[rest.index(after: equals)...]
            if let quote = rest.first, quote == "\"" || quote == "'" {
                rest = rest.dropFirst()
                guard let end = rest.firstIndex(of: quote) else { return nil }
                result[key] = String(rest[..<end])
                rest = rest[rest.index(after: end)...]
            } else {
                let end = rest.firstIndex { $0 == " " || $0 == "\t" || $0 == "\n" } ?? rest.endIndex
                result[key] = String(rest[..<end])
                rest = rest[end...]
            }
        }
    }

    /// Every trigger role of a `module-role-ducking` argument string, across its groups (`phone`,
    /// the module's default, when none is given).
    static func triggerRoles(of arguments: String) -> Set<String> {
        guard let roles = moduleArguments(arguments)?["trigger_roles"] else { return ["phone"] }
        return Set(roles.split(whereSeparator: { $0 == "," || $0 == "/" }).map(String.init))
    }

    /// Another instance's arguments with a group appended for each of this library's levels it
    /// lacks (groups are separated by `/` in trigger roles, ducking roles and volumes alike; the
    /// module's defaults fill what the instance leaves out). `nil` when they cannot be read.
    static func argumentsAddingDuckGroup(to arguments: String) -> String? {
        guard var args = moduleArguments(arguments) else { return nil }
        let triggers = args["trigger_roles"] ?? "phone"
        let groups = triggers.split(separator: "/", omittingEmptySubsequences: false).count
        let ducked = args["ducking_roles"] ?? Array(repeating: "music,video", count: groups).joined(separator: "/")
        let volumes = args["volume"] ?? Array(repeating: "-20dB", count: groups).joined(separator: "/")
        guard ducked.split(separator: "/", omittingEmptySubsequences: false).count == groups,
            volumes.split(separator: "/", omittingEmptySubsequences: false).count == groups
        else { return nil }
        let present = triggerRoles(of: arguments)
        let missing = duckModuleLevels.filter { !present.contains(triggerRole(for: $0)) }
        args["trigger_roles"] = ([triggers] + missing.map { triggerRole(for: $0) }).joined(separator: "/")
        args["ducking_roles"] = ([ducked] + missing.map { _ in duckedRoles }).joined(separator: "/")
        args["volume"] = ([volumes] + missing.map { duckVolume($0) }).joined(separator: "/")
        return args.sorted { $0.key < $1.key }.map { "\($0.key)=\"\($0.value)\"" }.joined(separator: " ")
    }

    // MARK: Modules

    /// The loaded modules called `name`: index and argument string. The corresponding PulseAudio
    /// call is `pa_context_get_module_info_list`.
    func modules(named name: String) -> [(index: UInt32, argument: String)] {
        control.query([], context: name) { ud in
            pa_context_get_module_info_list(context, { _, info, eol, ud in
                let box = PulseQuery<[(index: UInt32, argument: String)], String>.from(ud)
                if eol == 0, let i = info?.pointee, let n = i.name, String(cString: n) == box.context {
                    box.value.append((i.index, i.argument.map { String(cString: $0) } ?? ""))
                }
                if eol != 0 { box.finish() }
            }, ud)
        }
    }

    /// Loads a module into the server and returns its index. The corresponding PulseAudio call is
    /// `pa_context_load_module`.
    func loadModule(_ name: String, _ arguments: String) throws(HALError) -> UInt32 {
        // The module's index, or the server's error code (read in the callback, with the lock).
        let (index, code) = control.query((UInt32.max, Int32(0))) { ud in
            pa_context_load_module(context, name, arguments, { c, index, ud in
                let box = PulseQuery<(UInt32, Int32), Void>.from(ud)
                box.value = (index, index == UInt32.max ? pa_context_errno(c) : 0)
                box.finish()
            }, ud)
        }
        guard index != UInt32.max else {
            throw HALError(.notSupported, code: code, "the server cannot load \(name) \(arguments): \(Self.message(code))")
        }
        return index
    }

    /// Unloads a module. The corresponding PulseAudio call is `pa_context_unload_module`.
    func unloadModule(_ index: UInt32) throws(HALError) {
        let (success, code) = control.query((false, Int32(0))) { ud in
            pa_context_unload_module(context, index, { c, success, ud in
                let box = PulseQuery<(Bool, Int32), Void>.from(ud)
                box.value = (success != 0, success != 0 ? 0 : pa_context_errno(c))
                box.finish()
            }, ud)
        }
        guard success else { throw HALError(.notSupported, code: code, "the server cannot unload module \(index): \(Self.message(code))") }
    }
}

/// The trigger stream's source: silence, for as long as it plays. No allocation.
private final class SilenceSource: HALStreamClient, @unchecked Sendable {
    override func render(_ output: UnsafeMutablePointer<Float>, frames: Int, time: HALRenderTime) -> Int {
        output.update(repeating: 0, count: frames)
        return frames
    }
}
