// PulseAudio's words for what the layers above say in Apple's terms: stream purposes become
// `media.role` and `filter.want`, and device kinds are worked out from port types, form factors
// and buses. Nothing above the PulseAudio backend sees these words.

/// What kind of jack or transducer a device's active port is, as the server says
/// (`pa_device_port_type_t`, the same numbers).
enum PulsePortType: Int, Sendable {
    case unknown = 0, aux, speaker, headphones, line, mic, headset, handset, earpiece, spdif, hdmi, tv, radio, video, usb,
        bluetooth, portable, handsfree, car, hifi, phone, network, analog
}

extension PulseBackend {
    /// The property that marks a session stream of this library as exclusive (non-mixable
    /// playback, ``HALStreamRequest/exclusiveSession``).
    static let exclusiveSessionProperty = "openavf.session.exclusive"

    /// The `media.role` of a purpose: calls are `phone` (module-role-cork corks `music` and
    /// `video` for them), mixable sound is `game` (which role-cork leaves alone), announcements are
    /// `event`, unprocessed recording is `production`.
    static func role(_ purpose: HALStreamPurpose) -> String {
        switch purpose {
        case .media: "music"
        case .movie: "video"
        case .mixable: "game"
        case .voiceCommunication: "phone"
        case .announcement: "event"
        case .unprocessed: "production"
        }
    }

    /// The purpose a `media.role` names, `nil` for a role this library does not use.
    static func purpose(role: String?) -> HALStreamPurpose? {
        guard let role else { return nil }
        return HALStreamPurpose.allCases.first { Self.role($0) == role }
    }

    /// The stream properties a request carries: `media.role` for its purpose,
    /// `filter.want=echo-cancel` when it wants echo cancellation (module-filter-apply then routes
    /// it through module-echo-cancel), the exclusive-session mark, then the backend's own.
    static func streamProperties(_ request: HALStreamRequest) -> [String: String] {
        var properties: [String: String] = [:]
        if let purpose = request.purpose { properties["media.role"] = role(purpose) }
        if request.echoCancellation { properties["filter.want"] = "echo-cancel" }
        if request.exclusiveSession { properties[exclusiveSessionProperty] = "1" }
        properties.merge(request.serverProperties) { _, own in own }
        return properties
    }

    /// A device's kind: Bluetooth by its profile (A2DP, or a call profile); else the active
    /// port's type; else `device.form_factor`; else a USB bus; else nothing more known.
    static func deviceKind(portType: PulsePortType?, properties: [String: String]) -> HALDeviceKind {
        let bus = properties["device.bus"] ?? ""
        if bus == "bluetooth" {
            let profile = properties["bluetooth.protocol"] ?? properties["api.bluez5.profile"] ?? ""
            return profile.contains("a2dp") ? .bluetoothA2DP : .bluetoothHFP
        }
        switch portType {
        case .speaker: return .speaker
        case .headphones: return .headphones
        case .headset: return .headset
        case .handset, .earpiece: return .handset
        case .line, .analog: return .line
        case .mic: return .microphone
        case .hdmi: return .hdmi
        case .usb: return .usb
        case .bluetooth: return .bluetoothA2DP
        case .car: return .car
        default: break
        }
        switch properties["device.form_factor"] ?? "" {
        case "headphone": return .headphones
        case "headset": return .headset
        case "handset": return .handset
        case "speaker", "internal", "microphone", "webcam": return .builtIn
        case "hdmi", "tv": return .hdmi
        case "car": return .car
        default: break
        }
        if bus == "usb" { return .usb }
        return .builtIn
    }
}
