public import Foundation

// AVAudioSession's types with Apple's names and raw values (iOS 17 headers).

extension AVAudioSession {
    public struct Category: RawRepresentable, Hashable, Sendable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public static let ambient = Category(rawValue: "AVAudioSessionCategoryAmbient")
        public static let soloAmbient = Category(rawValue: "AVAudioSessionCategorySoloAmbient")
        public static let playback = Category(rawValue: "AVAudioSessionCategoryPlayback")
        public static let record = Category(rawValue: "AVAudioSessionCategoryRecord")
        public static let playAndRecord = Category(rawValue: "AVAudioSessionCategoryPlayAndRecord")
        public static let multiRoute = Category(rawValue: "AVAudioSessionCategoryMultiRoute")
    }

    public struct Mode: RawRepresentable, Hashable, Sendable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public static let `default` = Mode(rawValue: "AVAudioSessionModeDefault")
        public static let voiceChat = Mode(rawValue: "AVAudioSessionModeVoiceChat")
        public static let gameChat = Mode(rawValue: "AVAudioSessionModeGameChat")
        public static let videoRecording = Mode(rawValue: "AVAudioSessionModeVideoRecording")
        public static let measurement = Mode(rawValue: "AVAudioSessionModeMeasurement")
        public static let moviePlayback = Mode(rawValue: "AVAudioSessionModeMoviePlayback")
        public static let videoChat = Mode(rawValue: "AVAudioSessionModeVideoChat")
        public static let spokenAudio = Mode(rawValue: "AVAudioSessionModeSpokenAudio")
        public static let voicePrompt = Mode(rawValue: "AVAudioSessionModeVoicePrompt")
        /// Short-form video capture (iOS 26): played and recorded as ``videoRecording`` is.
        public static let shortFormVideo = Mode(rawValue: "AVAudioSessionModeShortFormVideo")
        /// Audio to two routes at once (iOS 26.2): a Linux server plays a stream on one device,
        /// so this is ``default`` here.
        public static let dualRoute = Mode(rawValue: "AVAudioSessionModeDualRoute")
    }

    public struct CategoryOptions: OptionSet, Sendable {
        public let rawValue: UInt
        public init(rawValue: UInt) { self.rawValue = rawValue }
        public static let mixWithOthers = CategoryOptions(rawValue: 0x1)
        public static let duckOthers = CategoryOptions(rawValue: 0x2)
        public static let allowBluetooth = CategoryOptions(rawValue: 0x4)
        /// iOS 26's name for ``allowBluetooth``.
        public static let allowBluetoothHFP = CategoryOptions(rawValue: 0x4)
        public static let defaultToSpeaker = CategoryOptions(rawValue: 0x8)
        public static let interruptSpokenAudioAndMixWithOthers = CategoryOptions(rawValue: 0x11)
        public static let allowBluetoothA2DP = CategoryOptions(rawValue: 0x20)
        public static let allowAirPlay = CategoryOptions(rawValue: 0x40)
        public static let overrideMutedMicrophoneInterruption = CategoryOptions(rawValue: 0x80)
        /// Far-field microphone processing (iOS 26.2). Accepted; the sound server offers no
        /// far-field beamforming, so the input is what the source captures.
        public static let farFieldInput = CategoryOptions(rawValue: 0x40000)
        /// High-quality Bluetooth recording (iOS 26). Accepted; which Bluetooth profile a headset
        /// uses is the server's (or the user's) choice on Linux, not the app's.
        public static let bluetoothHighQualityRecording = CategoryOptions(rawValue: 0x80000)
    }

    public struct SetActiveOptions: OptionSet, Sendable {
        public let rawValue: UInt
        public init(rawValue: UInt) { self.rawValue = rawValue }
        public static let notifyOthersOnDeactivation = SetActiveOptions(rawValue: 1)
    }

    public enum RouteSharingPolicy: UInt, Sendable {
        case `default` = 0
        case longFormAudio = 1
        case independent = 2
        case longFormVideo = 3
    }

    public enum PortOverride: UInt, Sendable {
        case none = 0
        case speaker = 0x7370_6B72  // 'spkr'
    }

    public enum InterruptionType: UInt, Sendable {
        case began = 1
        case ended = 0
    }

    public struct InterruptionOptions: OptionSet, Sendable {
        public let rawValue: UInt
        public init(rawValue: UInt) { self.rawValue = rawValue }
        public static let shouldResume = InterruptionOptions(rawValue: 1)
    }

    public enum InterruptionReason: UInt, Sendable {
        case `default` = 0
        case appWasSuspended = 1
        case builtInMicMuted = 2
        /// The route the session used went away (iOS 17).
        case routeDisconnected = 4
    }

    public enum RouteChangeReason: UInt, Sendable {
        case unknown = 0
        case newDeviceAvailable = 1
        case oldDeviceUnavailable = 2
        case categoryChange = 3
        case override = 4
        case wakeFromSleep = 6
        case noSuitableRouteForCategory = 7
        case routeConfigurationChange = 8
    }

    public enum SilenceSecondaryAudioHintType: UInt, Sendable {
        case begin = 1
        case end = 0
    }

    public enum RecordPermission: UInt, Sendable {
        case undetermined = 0x756E_6474  // 'undt'
        case denied = 0x6465_6E79  // 'deny'
        case granted = 0x6772_6E74  // 'grnt'
    }

    public enum IOType: UInt, Sendable {
        case notSpecified = 0
        case aggregated = 1
    }

    public enum PromptStyle: UInt, Sendable {
        case none = 0x6E6F_6E65  // 'none'
        case short = 0x7368_7274  // 'shrt'
        case normal = 0x6E72_6D6C  // 'nrml'
    }

    public enum ErrorCode: Int, Sendable {
        case none = 0
        case mediaServicesFailed = 0x6D73_7276  // 'msrv'
        case isBusy = 0x2161_6374  // '!act'
        case incompatibleCategory = 0x2163_6174  // '!cat'
        case cannotInterruptOthers = 0x2169_6E74  // '!int'
        case missingEntitlement = 0x656E_743F  // 'ent?'
        case siriIsRecording = 0x7369_7269  // 'siri'
        case cannotStartPlaying = 0x2170_6C61  // '!pla'
        case cannotStartRecording = 0x2172_6563  // '!rec'
        case badParam = -50
        case insufficientPriority = 0x2170_7269  // '!pri'
        case resourceNotAvailable = 0x2172_6573  // '!res'
        case unspecified = 0x7768_6174  // 'what'
        case expiredSession = 0x2173_6573  // '!ses'
        case sessionNotActive = 0x696E_6163  // 'inac'
    }

    /// Port types, Apple's strings.
    public struct Port: RawRepresentable, Hashable, Sendable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public static let lineIn = Port(rawValue: "LineIn")
        public static let builtInMic = Port(rawValue: "MicrophoneBuiltIn")
        public static let headsetMic = Port(rawValue: "MicrophoneWired")
        public static let lineOut = Port(rawValue: "LineOut")
        public static let headphones = Port(rawValue: "Headphones")
        public static let bluetoothA2DP = Port(rawValue: "BluetoothA2DPOutput")
        public static let builtInReceiver = Port(rawValue: "Receiver")
        public static let builtInSpeaker = Port(rawValue: "Speaker")
        public static let HDMI = Port(rawValue: "HDMIOutput")
        public static let airPlay = Port(rawValue: "AirPlay")
        public static let bluetoothLE = Port(rawValue: "BluetoothLE")
        public static let bluetoothHFP = Port(rawValue: "BluetoothHFP")
        public static let usbAudio = Port(rawValue: "USBAudio")
        public static let carAudio = Port(rawValue: "CarAudio")
        public static let virtual = Port(rawValue: "Virtual")
        public static let PCI = Port(rawValue: "PCI")
        public static let fireWire = Port(rawValue: "Firewire")
        public static let displayPort = Port(rawValue: "DisplayPort")
        public static let AVB = Port(rawValue: "AVB")
        public static let thunderbolt = Port(rawValue: "Thunderbolt")
        public static let continuityMicrophone = Port(rawValue: "ContinuityMicrophone")
    }

    // Notifications (posted on NotificationCenter.default with the session as the object).
    public static let interruptionNotification = Notification.Name("AVAudioSessionInterruptionNotification")
    public static let routeChangeNotification = Notification.Name("AVAudioSessionRouteChangeNotification")
    public static let mediaServicesWereLostNotification = Notification.Name("AVAudioSessionMediaServicesWereLostNotification")
    public static let mediaServicesWereResetNotification = Notification.Name("AVAudioSessionMediaServicesWereResetNotification")
    public static let silenceSecondaryAudioHintNotification = Notification.Name("AVAudioSessionSilenceSecondaryAudioHintNotification")
}

/// The interruption type, a `UInt` raw value of ``AVAudioSession/InterruptionType``.
public let AVAudioSessionInterruptionTypeKey = "AVAudioSessionInterruptionTypeKey"
/// The interruption options, a `UInt` raw value of ``AVAudioSession/InterruptionOptions``.
public let AVAudioSessionInterruptionOptionKey = "AVAudioSessionInterruptionOptionKey"
public let AVAudioSessionInterruptionReasonKey = "AVAudioSessionInterruptionReasonKey"
public let AVAudioSessionInterruptionWasSuspendedKey = "AVAudioSessionInterruptionWasSuspendedKey"
/// The route change reason, a `UInt` raw value of ``AVAudioSession/RouteChangeReason``.
public let AVAudioSessionRouteChangeReasonKey = "AVAudioSessionRouteChangeReasonKey"
/// The previous route, an ``AVAudioSessionRouteDescription``.
public let AVAudioSessionRouteChangePreviousRouteKey = "AVAudioSessionRouteChangePreviousRouteKey"
public let AVAudioSessionSilenceSecondaryAudioHintTypeKey = "AVAudioSessionSilenceSecondaryAudioHintTypeKey"

/// A channel of a port.
public final class AVAudioSessionChannelDescription: NSObject, @unchecked Sendable {
    public let channelName: String
    public let owningPortUID: String
    public let channelNumber: Int
    public let channelLabel: AudioChannelLabel
    init(channelName: String, owningPortUID: String, channelNumber: Int) {
        self.channelName = channelName
        self.owningPortUID = owningPortUID
        self.channelNumber = channelNumber
        self.channelLabel = kAudioChannelLabel_Unknown
    }
}

/// A port of a route: on Linux, a sound server sink or source (its active port decides the type).
public final class AVAudioSessionPortDescription: NSObject, @unchecked Sendable {
    public let portType: AVAudioSession.Port
    /// The device's description as the server shows it ("Built-in Audio Analog Stereo").
    public let portName: String
    /// The server's name for the device (`alsa_output.pci-…`), stable while it exists.
    public let uid: String
    public let channels: [AVAudioSessionChannelDescription]?
    public let hasHardwareVoiceCallProcessing: Bool

    init(portType: AVAudioSession.Port, portName: String, uid: String, channelCount: Int) {
        self.portType = portType
        self.portName = portName
        self.uid = uid
        channels = (0..<channelCount).map { AVAudioSessionChannelDescription(channelName: "\(portName) \($0 + 1)", owningPortUID: uid, channelNumber: $0 + 1) }
        hasHardwareVoiceCallProcessing = false
        super.init()
    }

    public override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? AVAudioSessionPortDescription else { return false }
        return other.uid == uid && other.portType == portType
    }

    public override var hash: Int { uid.hashValue }
}

/// The inputs and outputs audio goes through.
public final class AVAudioSessionRouteDescription: NSObject, @unchecked Sendable {
    public let inputs: [AVAudioSessionPortDescription]
    public let outputs: [AVAudioSessionPortDescription]
    init(inputs: [AVAudioSessionPortDescription], outputs: [AVAudioSessionPortDescription]) {
        self.inputs = inputs
        self.outputs = outputs
    }

    public override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? AVAudioSessionRouteDescription else { return false }
        return other.inputs == inputs && other.outputs == outputs
    }

    public override var hash: Int { outputs.first?.hash ?? 0 }
}

