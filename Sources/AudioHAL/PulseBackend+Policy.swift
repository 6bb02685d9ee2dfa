internal import CPulseAudio
import Foundation

extension PulseBackend {
    /// Playback streams of other clients (this process's own, on either connection, are left out,
    /// and so are the silent trigger streams of processes that duck others: they play nothing).
    package func otherPlaybackStreams() -> [HALPlaybackStream] {
        final class Box: @unchecked Sendable {
            let mainloop: OpaquePointer
            let mine: (UInt32, UInt32)
            var streams: [HALPlaybackStream] = []
            init(mainloop: OpaquePointer, mine: (UInt32, UInt32)) {
                self.mainloop = mainloop
                self.mine = mine
            }
        }
        let mine = (audio.clientIndex, control.clientIndex)
        return locked {
            let box = Box(mainloop: mainloop, mine: mine)
            self.await(pa_context_get_sink_input_info_list(context, { _, info, eol, ud in
                let box = Unmanaged<Box>.fromOpaque(ud!).takeUnretainedValue()
                if eol == 0, let i = info?.pointee, i.client != box.mine.0, i.client != box.mine.1,
                    case let properties = PulseBackend.properties(i.proplist), properties["media.role"] != PulseBackend.duckTriggerRole
                {
                    var volume = i.volume
                    box.streams.append(HALPlaybackStream(
                        index: i.index, purpose: PulseBackend.purpose(role: properties["media.role"]), corked: i.corked != 0,
                        muted: i.mute != 0, volume: Double(pa_cvolume_avg(&volume)) / Double(PA_VOLUME_NORM),
                        channels: Int(i.volume.channels), exclusiveSession: properties[PulseBackend.exclusiveSessionProperty] == "1"))
                }
                if eol != 0 { pa_threaded_mainloop_signal(box.mainloop, 0) }
            }, Unmanaged.passUnretained(box).toOpaque()))
            return box.streams
        }
    }

    /// The default sink's volume on the server's scale, averaged over channels.
    package func defaultOutputVolume() -> Double? {
        final class Box: @unchecked Sendable {
            let mainloop: OpaquePointer
            var volume: Double?
            init(_ mainloop: OpaquePointer) { self.mainloop = mainloop }
        }
        return locked {
            let box = Box(mainloop)
            self.await(pa_context_get_sink_info_by_name(context, "@DEFAULT_SINK@", { _, info, eol, ud in
                let box = Unmanaged<Box>.fromOpaque(ud!).takeUnretainedValue()
                if eol == 0, var v = info?.pointee.volume {
                    box.volume = Double(pa_cvolume_avg(&v)) / Double(PA_VOLUME_NORM)
                }
                pa_threaded_mainloop_signal(box.mainloop, 0)
            }, Unmanaged.passUnretained(box).toOpaque()))
            return box.volume
        }
    }
}

extension PulseBackend {
    /// Every sink (`output`) or every source that is not a monitor, as the server lists them.
    package func devices(output: Bool) -> [HALDeviceInfo] {
        final class Box: @unchecked Sendable {
            let mainloop: OpaquePointer
            var devices: [HALDeviceInfo] = []
            init(_ mainloop: OpaquePointer) { self.mainloop = mainloop }
        }
        return locked {
            let box = Box(mainloop)
            let ud = Unmanaged.passUnretained(box).toOpaque()
            if output {
                self.await(pa_context_get_sink_info_list(context, { _, info, eol, ud in
                    let box = Unmanaged<Box>.fromOpaque(ud!).takeUnretainedValue()
                    if eol == 0, let i = info?.pointee {
                        box.devices.append(PulseBackend.deviceInfo(
                            i.name, i.description, i.sample_spec, i.proplist, port: i.active_port.map { ($0.pointee.name, $0.pointee.type) }))
                    }
                    if eol != 0 { pa_threaded_mainloop_signal(box.mainloop, 0) }
                }, ud))
            } else {
                self.await(pa_context_get_source_info_list(context, { _, info, eol, ud in
                    let box = Unmanaged<Box>.fromOpaque(ud!).takeUnretainedValue()
                    if eol == 0, let i = info?.pointee, i.monitor_of_sink == UInt32.max {
                        box.devices.append(PulseBackend.deviceInfo(
                            i.name, i.description, i.sample_spec, i.proplist, port: i.active_port.map { ($0.pointee.name, $0.pointee.type) }))
                    }
                    if eol != 0 { pa_threaded_mainloop_signal(box.mainloop, 0) }
                }, ud))
            }
            return box.devices
        }
    }
}
