import AVFAudio
import AudioTestSupport
import Foundation
import XCTest

/// Acceptance 6 of the session issue: every raw value is Apple's; the role mapping is the table
/// the documentation gives.
final class AudioSessionValueTests: XCTestCase {
    func testRawValuesAreApples() {
        XCTAssertEqual(AVAudioSession.Category.playback.rawValue, "AVAudioSessionCategoryPlayback")
        XCTAssertEqual(AVAudioSession.Category.playAndRecord.rawValue, "AVAudioSessionCategoryPlayAndRecord")
        XCTAssertEqual(AVAudioSession.Category.multiRoute.rawValue, "AVAudioSessionCategoryMultiRoute")
        XCTAssertEqual(AVAudioSession.Mode.voiceChat.rawValue, "AVAudioSessionModeVoiceChat")
        XCTAssertEqual(AVAudioSession.Mode.voicePrompt.rawValue, "AVAudioSessionModeVoicePrompt")
        let options: [(AVAudioSession.CategoryOptions, UInt)] = [
            (.mixWithOthers, 0x1), (.duckOthers, 0x2), (.allowBluetooth, 0x4), (.defaultToSpeaker, 0x8),
            (.interruptSpokenAudioAndMixWithOthers, 0x11), (.allowBluetoothA2DP, 0x20), (.allowAirPlay, 0x40), (.overrideMutedMicrophoneInterruption, 0x80),
        ]
        for (option, raw) in options { XCTAssertEqual(option.rawValue, raw) }
        XCTAssertEqual(AVAudioSession.SetActiveOptions.notifyOthersOnDeactivation.rawValue, 1)
        XCTAssertEqual(AVAudioSession.InterruptionType.began.rawValue, 1)
        XCTAssertEqual(AVAudioSession.InterruptionType.ended.rawValue, 0)
        XCTAssertEqual(AVAudioSession.InterruptionOptions.shouldResume.rawValue, 1)
        let reasons: [(AVAudioSession.RouteChangeReason, UInt)] = [
            (.unknown, 0), (.newDeviceAvailable, 1), (.oldDeviceUnavailable, 2), (.categoryChange, 3), (.override, 4),
            (.wakeFromSleep, 6), (.noSuitableRouteForCategory, 7), (.routeConfigurationChange, 8),
        ]
        for (reason, raw) in reasons { XCTAssertEqual(reason.rawValue, raw) }
        XCTAssertEqual(AVAudioSession.PortOverride.speaker.rawValue, UInt(fourCC("spkr")))
        XCTAssertEqual(AVAudioSession.RecordPermission.granted.rawValue, UInt(fourCC("grnt")))
        XCTAssertEqual(AVAudioSession.RecordPermission.denied.rawValue, UInt(fourCC("deny")))
        XCTAssertEqual(AVAudioSession.RecordPermission.undetermined.rawValue, UInt(fourCC("undt")))
        let errors: [(AVAudioSession.ErrorCode, String)] = [
            (.mediaServicesFailed, "msrv"), (.isBusy, "!act"), (.incompatibleCategory, "!cat"), (.cannotInterruptOthers, "!int"),
            (.missingEntitlement, "ent?"), (.siriIsRecording, "siri"), (.cannotStartPlaying, "!pla"), (.cannotStartRecording, "!rec"),
            (.insufficientPriority, "!pri"), (.resourceNotAvailable, "!res"), (.unspecified, "what"), (.expiredSession, "!ses"),
            (.sessionNotActive, "inac"),
        ]
        for (code, chars) in errors { XCTAssertEqual(code.rawValue, Int(fourCC(chars)), chars) }
        XCTAssertEqual(AVAudioSession.ErrorCode.badParam.rawValue, -50)
        XCTAssertEqual(AVAudioSession.Port.headphones.rawValue, "Headphones")
        XCTAssertEqual(AVAudioSession.Port.builtInMic.rawValue, "MicrophoneBuiltIn")
        XCTAssertEqual(AVAudioSession.Port.headsetMic.rawValue, "MicrophoneWired")
        XCTAssertEqual(AVAudioSession.Port.bluetoothA2DP.rawValue, "BluetoothA2DPOutput")
        XCTAssertEqual(AVAudioSession.Port.HDMI.rawValue, "HDMIOutput")
        XCTAssertEqual(AVAudioSession.interruptionNotification.rawValue, "AVAudioSessionInterruptionNotification")
        XCTAssertEqual(AVAudioSession.routeChangeNotification.rawValue, "AVAudioSessionRouteChangeNotification")
        XCTAssertEqual(AVAudioSessionInterruptionTypeKey, "AVAudioSessionInterruptionTypeKey")
        XCTAssertEqual(AVAudioSessionRouteChangePreviousRouteKey, "AVAudioSessionRouteChangePreviousRouteKey")
    }

    func testRoleMapping() {
        func role(_ c: AVAudioSession.Category, _ m: AVAudioSession.Mode = .default, _ o: AVAudioSession.CategoryOptions = []) -> String? {
            AVAudioSession.streamProperties(category: c, mode: m, options: o).output["media.role"]
        }
        XCTAssertEqual(role(.playback), "music")
        XCTAssertEqual(role(.soloAmbient), "music")
        XCTAssertEqual(role(.ambient), "game", "ambient mixes: never corked")
        XCTAssertEqual(role(.playback, .default, .mixWithOthers), "game")
        XCTAssertEqual(role(.playback, .moviePlayback), "video")
        XCTAssertEqual(role(.playAndRecord, .voiceChat), "phone")
        XCTAssertEqual(role(.playAndRecord, .videoChat), "phone")
        XCTAssertEqual(role(.playAndRecord, .gameChat), "phone")
        XCTAssertEqual(role(.playback, .voicePrompt), "event")
        XCTAssertEqual(role(.record), "production")
        XCTAssertEqual(role(.playAndRecord, .measurement), "production")
        let chat = AVAudioSession.streamProperties(category: .playAndRecord, mode: .voiceChat, options: [])
        XCTAssertEqual(chat.output["filter.want"], "echo-cancel")
        XCTAssertEqual(chat.input["filter.want"], "echo-cancel")
        XCTAssertNil(AVAudioSession.streamProperties(category: .playback, mode: .default, options: []).output["filter.want"])
    }

    func testPortTypes() {
        XCTAssertEqual(AVAudioSession.portType(portType: nil, properties: ["device.form_factor": "headphone"], output: true), .headphones)
        XCTAssertEqual(AVAudioSession.portType(portType: 3, properties: [:], output: true), .headphones)
        XCTAssertEqual(AVAudioSession.portType(portType: 6, properties: [:], output: false), .headsetMic)
        XCTAssertEqual(AVAudioSession.portType(portType: 2, properties: [:], output: true), .builtInSpeaker)
        XCTAssertEqual(AVAudioSession.portType(portType: 8, properties: [:], output: true), .builtInReceiver)
        XCTAssertEqual(AVAudioSession.portType(portType: 10, properties: [:], output: true), .HDMI)
        XCTAssertEqual(AVAudioSession.portType(portType: nil, properties: ["device.bus": "usb"], output: true), .usbAudio)
        XCTAssertEqual(AVAudioSession.portType(portType: nil, properties: ["device.bus": "bluetooth", "bluetooth.protocol": "a2dp_sink"], output: true), .bluetoothA2DP)
        XCTAssertEqual(AVAudioSession.portType(portType: nil, properties: ["device.bus": "bluetooth", "bluetooth.protocol": "headset_head_unit"], output: true), .bluetoothHFP)
        XCTAssertEqual(AVAudioSession.portType(portType: 4, properties: [:], output: false), .lineIn)
        XCTAssertEqual(AVAudioSession.portType(portType: 5, properties: [:], output: false), .builtInMic)
        XCTAssertEqual(AVAudioSession.portType(portType: nil, properties: [:], output: false), .builtInMic)
    }

    func testBadArguments() {
        let session = AVAudioSession.sharedInstance()
        XCTAssertThrowsError(try session.setCategory(.record, options: .mixWithOthers)) { error in
            XCTAssertEqual((error as NSError).code, AVAudioSession.ErrorCode.badParam.rawValue)
        }
        XCTAssertThrowsError(try session.setCategory(AVAudioSession.Category(rawValue: "nonsense")))
        XCTAssertThrowsError(try session.setPreferredSampleRate(1))
        XCTAssertThrowsError(try session.setPreferredIOBufferDuration(5))
    }
}

/// Acceptance 1 of the session issue, on the private server.
final class AudioSessionServerTests: XCTestCase {
    func testPreferredValuesAppliedAtActivationAndCurrentValuesAreTheServers() throws {
        let server = try TestSound.server()
        let session = AVAudioSession.sharedInstance()
        try session.setCategory(.playback)
        try session.setPreferredIOBufferDuration(0.005)
        try session.setPreferredSampleRate(44100)
        XCTAssertEqual(session.preferredIOBufferDuration, 0.005)
        XCTAssertEqual(session.preferredSampleRate, 44100)
        XCTAssertEqual(session.ioBufferDuration, 0.02, accuracy: 1e-9, "inactive: the default")
        try session.setActive(true)
        defer { try? session.setActive(false) }
        XCTAssertEqual(session.preferredIOBufferDuration, 0.005, "preferred values read back unchanged")
        XCTAssertEqual(session.preferredSampleRate, 44100)
        XCTAssertEqual(session.sampleRate, 44100)
        XCTAssertEqual(session.ioBufferDuration, 0.005, accuracy: 0.0015, "the server grants about what was asked")
        // The server's own account of the session's stream.
        let inputs = try server.pactl(["list", "sink-inputs"])
        let block = try XCTUnwrap(inputs.components(separatedBy: "Sink Input #").first { $0.contains("AVAudioSession") }, inputs)
        XCTAssertTrue(block.contains("44100Hz"), block)
        XCTAssertTrue(block.contains("media.role = \"music\""), block)
        XCTAssertTrue(block.contains("Corked: yes"), block)
        // The route: the default sink is the private server's `speaker`.
        let route = session.currentRoute
        XCTAssertEqual(route.outputs.first?.uid, "speaker")
        XCTAssertEqual(route.outputs.first?.portType, .builtInSpeaker)
        XCTAssertEqual(session.outputNumberOfChannels, 2)
        // Deactivation closes the stream.
        try session.setActive(false)
        XCTAssertFalse(try server.pactl(["list", "sink-inputs"]).contains("AVAudioSession"))
    }
}
