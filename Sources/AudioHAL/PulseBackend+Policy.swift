internal import CPulseAudio
import Foundation

extension PulseBackend {
    /// Playback streams of other clients (this process's own, on either connection, are left out,
    /// and so are the silent trigger streams of processes that duck others: they play nothing).
    package func otherPlaybackStreams() -> [HALPlaybackStream] {
        typealias Query = PulseQuery<[HALPlaybackStream], (UInt32, UInt32)>
        return control.query([], context: (audio.clientIndex, control.clientIndex)) { ud in
            pa_context_get_sink_input_info_list(context, { _, info, eol, ud in
                let box = Query.from(ud)
                if eol == 0, let i = info?.pointee, i.client != box.context.0, i.client != box.context.1,
                    case let properties = PulseBackend.properties(i.proplist), !PulseBackend.isDuckTriggerRole(properties["media.role"])
                {
                    var volume = i.volume
                    box.value.append(HALPlaybackStream(
                        index: i.index, purpose: PulseBackend.purpose(role: properties["media.role"]), corked: i.corked != 0,
                        muted: i.mute != 0, volume: Double(pa_cvolume_avg(&volume)) / Double(PA_VOLUME_NORM),
                        channels: Int(i.volume.channels), exclusiveSession: properties[PulseBackend.exclusiveSessionProperty] == "1"))
                }
                if eol != 0 { box.finish() }
            }, ud)
        }
    }

    /// The default sink's volume on the server's scale, averaged over channels.
    package func defaultOutputVolume() -> Double? {
        control.query(Double?.none) { ud in
            pa_context_get_sink_info_by_name(context, "@DEFAULT_SINK@", { _, info, eol, ud in
                let box = PulseQuery<Double?, Void>.from(ud)
                if eol == 0, var v = info?.pointee.volume {
                    box.value = Double(pa_cvolume_avg(&v)) / Double(PA_VOLUME_NORM)
                }
                box.finish()
            }, ud)
        }
    }
}

extension PulseBackend {
    /// Whether `module-role-cork` is loaded: asked of the server once per connection (the
    /// corresponding PulseAudio call is `pa_context_get_module_info_list`).
    package var corksStreamsForCalls: Bool {
        roleCorkLoaded.withLock { known in
            if let known { return known }
            let loaded = !modules(named: "module-role-cork").isEmpty
            known = loaded
            return loaded
        }
    }
}

extension PulseBackend {
    /// Whether the server is PipeWire's pipewire-pulse (its server name says "on PipeWire"),
    /// asked once per connection: where it behaves unlike PulseAudio, the backend works around it
    /// (see ``uploadSample(_:format:samples:)``). The corresponding PulseAudio call is
    /// `pa_context_get_server_info`.
    package var isPipeWire: Bool {
        pipeWireServer.withLock { known in
            if let known { return known }
            let name = control.query(String?.none) { ud in
                pa_context_get_server_info(context, { _, info, ud in
                    let box = PulseQuery<String?, Void>.from(ud)
                    box.value = info?.pointee.server_name.map { String(cString: $0) }
                    box.finish()
                }, ud)
            }
            let pipeWire = name?.contains("PipeWire") ?? false
            known = pipeWire
            return pipeWire
        }
    }
}
