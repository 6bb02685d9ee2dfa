@testable import AudioHAL
import XCTest

/// The PulseAudio backend's half of the session's mappings: what a stream is for → `media.role`
/// and `filter.want`; a device's port type, form factor and bus → its kind. (The session's half,
/// category and mode → purpose and kind → Apple's port type, is tested in AVFAudioTests.)
final class PulseVocabularyTests: XCTestCase {
    func testPurposeToRole() {
        XCTAssertEqual(PulseBackend.role(.media), "music")
        XCTAssertEqual(PulseBackend.role(.movie), "video")
        XCTAssertEqual(PulseBackend.role(.mixable), "game", "role-cork leaves game alone")
        XCTAssertEqual(PulseBackend.role(.voiceCommunication), "phone", "role-cork corks music and video for phone")
        XCTAssertEqual(PulseBackend.role(.announcement), "event")
        XCTAssertEqual(PulseBackend.role(.unprocessed), "production")
        for purpose in HALStreamPurpose.allCases { XCTAssertEqual(PulseBackend.purpose(role: PulseBackend.role(purpose)), purpose) }
        XCTAssertNil(PulseBackend.purpose(role: "a11y"))
        XCTAssertNil(PulseBackend.purpose(role: nil))
    }

    func testStreamProperties() {
        var chat = HALStreamRequest(format: .init(sampleRate: 48000, channels: 1), bufferDuration: 0.02, name: "t", purpose: .voiceCommunication)
        chat.echoCancellation = true
        XCTAssertEqual(PulseBackend.streamProperties(chat), ["media.role": "phone", "filter.want": "echo-cancel"])
        var session = HALStreamRequest(format: .init(sampleRate: 48000, channels: 2), bufferDuration: 0.02, name: "t", purpose: .media)
        session.exclusiveSession = true
        XCTAssertEqual(PulseBackend.streamProperties(session), ["media.role": "music", PulseBackend.exclusiveSessionProperty: "1"])
        XCTAssertEqual(PulseBackend.streamProperties(HALStreamRequest(format: .init(sampleRate: 48000, channels: 1), bufferDuration: 0.02, name: "t")), [:])
        var trigger = HALStreamRequest(format: .init(sampleRate: 48000, channels: 1), bufferDuration: 0.02, name: "t", purpose: .media)
        trigger.serverProperties = ["media.role": PulseBackend.duckTriggerRole]
        XCTAssertEqual(PulseBackend.streamProperties(trigger)["media.role"], PulseBackend.duckTriggerRole, "the backend's own words win")
    }

    func testDeviceKinds() {
        func kind(_ port: PulsePortType?, _ properties: [String: String] = [:]) -> HALDeviceKind {
            PulseBackend.deviceKind(portType: port, properties: properties)
        }
        XCTAssertEqual(kind(nil, ["device.form_factor": "headphone"]), .headphones)
        XCTAssertEqual(kind(.headphones), .headphones)
        XCTAssertEqual(kind(.headset), .headset)
        XCTAssertEqual(kind(.speaker), .speaker)
        XCTAssertEqual(kind(.earpiece), .handset)
        XCTAssertEqual(kind(.handset), .handset)
        XCTAssertEqual(kind(.hdmi), .hdmi)
        XCTAssertEqual(kind(.usb), .usb)
        XCTAssertEqual(kind(.car), .car)
        XCTAssertEqual(kind(.bluetooth), .bluetoothA2DP)
        XCTAssertEqual(kind(nil, ["device.bus": "usb"]), .usb)
        XCTAssertEqual(kind(nil, ["device.bus": "bluetooth", "bluetooth.protocol": "a2dp_sink"]), .bluetoothA2DP)
        XCTAssertEqual(kind(nil, ["device.bus": "bluetooth", "bluetooth.protocol": "headset_head_unit"]), .bluetoothHFP)
        XCTAssertEqual(kind(.line), .line)
        XCTAssertEqual(kind(.analog), .line)
        XCTAssertEqual(kind(.mic), .microphone)
        XCTAssertEqual(kind(nil, ["device.form_factor": "headset"]), .headset)
        XCTAssertEqual(kind(nil, ["device.form_factor": "internal"]), .builtIn)
        XCTAssertEqual(kind(nil, ["device.form_factor": "tv"]), .hdmi)
        XCTAssertEqual(kind(.unknown), .builtIn)
        XCTAssertEqual(kind(nil), .builtIn)
        XCTAssertEqual(PulsePortType(rawValue: 15), .bluetooth, "pa_device_port_type_t's numbers")
        XCTAssertEqual(PulsePortType(rawValue: 22), .analog)
    }
}
