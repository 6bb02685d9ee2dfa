internal import CPulseAudio
import Foundation

/// Sinks and sources as devices: what the server says of them, and the changes the user's sound
/// settings make (default device, volume, mute, port). Every query and change runs on the control
/// connection. The corresponding PulseAudio calls are `pa_context_get_sink_info_list`,
/// `pa_context_get_source_info_list`, `pa_context_get_server_info` and the
/// `pa_context_set_{sink,source}_{volume,mute,port}_by_name`, `pa_context_set_default_{sink,source}`
/// family.
extension PulseBackend {
    // MARK: Describing

    /// A sink as the layers above see it. The control connection's thread.
    static func device(sink info: UnsafePointer<pa_sink_info>) -> HALDeviceInfo {
        let i = info.pointee
        return describe(
            name: i.name, description: i.description, spec: i.sample_spec, proplist: i.proplist, activePort: i.active_port,
            ports: i.ports, portCount: i.n_ports, index: i.index, volume: i.volume, mute: i.mute,
            latency: latency(configured: i.configured_latency, now: i.latency), running: i.state == PA_SINK_RUNNING)
    }

    /// A source as the layers above see it. The control connection's thread.
    static func device(source info: UnsafePointer<pa_source_info>) -> HALDeviceInfo {
        let i = info.pointee
        var device = describe(
            name: i.name, description: i.description, spec: i.sample_spec, proplist: i.proplist, activePort: i.active_port,
            ports: i.ports, portCount: i.n_ports, index: i.index, volume: i.volume, mute: i.mute,
            latency: latency(configured: i.configured_latency, now: i.latency), running: i.state == PA_SOURCE_RUNNING)
        if i.monitor_of_sink != UInt32.max, let sink = i.monitor_of_sink_name { device.monitorOf = String(cString: sink) }
        return device
    }

    /// A device's latency in seconds: the latency the server runs it at (its configured latency,
    /// set by what its streams ask), or while it has none configured (idle), what it reports
    /// having buffered now. `pactl list sinks` shows both ("Latency: … usec, configured … usec").
    private static func latency(configured: pa_usec_t, now: pa_usec_t) -> Double { Double(configured > 0 ? configured : now) / 1e6 }

    /// What sinks and sources have in common (their port structs differ in name only).
    private static func describe<Port>(
        name: UnsafePointer<CChar>, description: UnsafePointer<CChar>?, spec: pa_sample_spec, proplist: OpaquePointer?,
        activePort: UnsafeMutablePointer<Port>?, ports: UnsafeMutablePointer<UnsafeMutablePointer<Port>?>?, portCount: UInt32,
        index: UInt32, volume: pa_cvolume, mute: Int32, latency: Double, running: Bool
    ) -> HALDeviceInfo {
        // pa_sink_port_info and pa_source_port_info have the same layout (name, description,
        // priority, available, availability_group, type).
        func port(_ p: UnsafeMutablePointer<Port>) -> pa_sink_port_info { UnsafeRawPointer(p).load(as: pa_sink_port_info.self) }
        let properties = Self.properties(proplist)
        let active = activePort.map(port)
        var device = HALDeviceInfo(
            name: String(cString: name), description: description.map { String(cString: $0) } ?? "",
            sampleRate: Double(spec.rate), channels: Int(spec.channels),
            kind: deviceKind(portType: active.flatMap { PulsePortType(rawValue: Int($0.type)) }, properties: properties),
            portName: active?.name.map { String(cString: $0) })
        device.index = index
        device.volumes = volumes(volume)
        device.muted = mute != 0
        device.latency = latency
        device.isRunning = running
        device.vendor = properties["device.vendor.name"]
        device.product = properties["device.product.name"]
        device.bus = properties["device.bus"]
        // PulseAudio's null sinks are `abstract`, monitors `monitor`; PipeWire (pipewire-pulse)
        // names its null sinks by their factory.
        device.isVirtual = ["abstract", "monitor", "filter"].contains(properties["device.class"] ?? "")
            || properties["factory.name"] == "support.null-audio-sink"
        // module-always-sink's sink (its default name, on both servers) and its monitor.
        device.isPlaceholder = device.name == "auto_null" || device.name == "auto_null.monitor"
        if let ports {
            for n in 0..<Int(portCount) {
                guard let p = ports[n].map(port) else { continue }
                let available = p.available == PA_PORT_AVAILABLE_YES.rawValue ? true : p.available == PA_PORT_AVAILABLE_NO.rawValue ? false : nil
                device.ports.append(HALDevicePort(
                    name: String(cString: p.name), description: p.description.map { String(cString: $0) } ?? "", connected: available))
            }
        }
        return device
    }

    /// A property list as a dictionary. The control connection's thread, or with its lock held.
    static func properties(_ list: OpaquePointer?) -> [String: String] {
        guard let list else { return [:] }
        var result: [String: String] = [:]
        var state: UnsafeMutableRawPointer?
        while let key = pa_proplist_iterate(list, &state) {
            if let value = pa_proplist_gets(list, key) { result[String(cString: key)] = String(cString: value) }
        }
        return result
    }

    /// Each channel's volume on the server's scale.
    private static func volumes(_ v: pa_cvolume) -> [Double] {
        var v = v
        return withUnsafeBytes(of: &v.values) { raw in
            raw.bindMemory(to: pa_volume_t.self).prefix(Int(v.channels)).map { Double($0) / Double(PA_VOLUME_NORM) }
        }
    }

    // MARK: Listing

    /// Every sink (`output`) or every source that is not a monitor, as the server lists them.
    package func devices(output: Bool) -> [HALDeviceInfo] {
        output ? sinks() : sources().filter { $0.monitorOf == nil }
    }

    package func deviceList() -> HALDeviceList {
        let defaults = control.query((String?.none, String?.none)) { ud in
            pa_context_get_server_info(context, { _, info, ud in
                let box = PulseQuery<(String?, String?), Void>.from(ud)
                if let i = info?.pointee {
                    box.value = (i.default_sink_name.map { String(cString: $0) }, i.default_source_name.map { String(cString: $0) })
                }
                box.finish()
            }, ud)
        }
        return HALDeviceList(outputs: sinks(), inputs: sources(), defaultOutput: defaults.0, defaultInput: defaults.1)
    }

    private func sinks() -> [HALDeviceInfo] {
        control.query([]) { ud in
            pa_context_get_sink_info_list(context, { _, info, eol, ud in
                let box = PulseQuery<[HALDeviceInfo], Void>.from(ud)
                if eol == 0, let info { box.value.append(PulseBackend.device(sink: info)) }
                if eol != 0 { box.finish() }
            }, ud)
        }
    }

    private func sources() -> [HALDeviceInfo] {
        control.query([]) { ud in
            pa_context_get_source_info_list(context, { _, info, eol, ud in
                let box = PulseQuery<[HALDeviceInfo], Void>.from(ud)
                if eol == 0, let info { box.value.append(PulseBackend.device(source: info)) }
                if eol != 0 { box.finish() }
            }, ud)
        }
    }

    // MARK: Changing

    /// Runs an operation whose reply is success or failure and waits for it; a failure throws
    /// with the server's message.
    func perform(_ what: String, _ start: (pa_context_success_cb_t, UnsafeMutableRawPointer) -> OpaquePointer?) throws(HALError) {
        let result = control.query(Int32?.none, context: context) { ud in
            start({ c, success, ud in
                let box = PulseQuery<Int32?, OpaquePointer>.from(ud)
                box.value = success != 0 ? 0 : pa_context_errno(c)
                box.finish()
            }, ud)
        }
        guard let result else { throw HALError(.streamFailed, "\(what): the server did not answer") }
        guard result == 0 else {
            throw HALError(result == PA_ERR_NOENTITY.rawValue ? .deviceNotFound : .notSupported, code: result, "\(what): \(Self.message(result))")
        }
    }

    package func setDefaultDevice(_ name: String, output: Bool) throws(HALError) {
        try perform("set the default \(output ? "sink" : "source") to \(name)") { cb, ud in
            output ? pa_context_set_default_sink(context, name, cb, ud) : pa_context_set_default_source(context, name, cb, ud)
        }
    }

    package func setVolumes(_ volumes: [Double], device: String, output: Bool) throws(HALError) {
        guard !volumes.isEmpty, volumes.count <= Int(PA_CHANNELS_MAX) else {
            throw HALError(.notSupported, "\(volumes.count) channel volumes")
        }
        var v = pa_cvolume()
        v.channels = UInt8(volumes.count)
        withUnsafeMutableBytes(of: &v.values) { raw in
            let values = raw.bindMemory(to: pa_volume_t.self)
            for (n, volume) in volumes.enumerated() {
                values[n] = pa_volume_t(min(max(volume, 0) * Double(PA_VOLUME_NORM), Double(PA_VOLUME_MAX)).rounded())
            }
        }
        try perform("set the volume of \(device)") { cb, ud in
            output ? pa_context_set_sink_volume_by_name(context, device, &v, cb, ud) : pa_context_set_source_volume_by_name(context, device, &v, cb, ud)
        }
    }

    package func setMuted(_ muted: Bool, device: String, output: Bool) throws(HALError) {
        try perform("\(muted ? "mute" : "unmute") \(device)") { cb, ud in
            output
                ? pa_context_set_sink_mute_by_name(context, device, muted ? 1 : 0, cb, ud)
                : pa_context_set_source_mute_by_name(context, device, muted ? 1 : 0, cb, ud)
        }
    }

    package func setActivePort(_ port: String, device: String, output: Bool) throws(HALError) {
        try perform("set the port of \(device) to \(port)") { cb, ud in
            output ? pa_context_set_sink_port_by_name(context, device, port, cb, ud) : pa_context_set_source_port_by_name(context, device, port, cb, ud)
        }
    }
}
