// The types and constants of Apple's AudioHardwareBase.h and AudioHardware.h, with Apple's names,
// Swift types and values. Only what this library implements is declared: a selector here is one
// `AudioObjectGetPropertyData` answers for the objects that have it.

public typealias AudioObjectID = UInt32
public typealias AudioClassID = UInt32
public typealias AudioObjectPropertySelector = UInt32
public typealias AudioObjectPropertyScope = UInt32
public typealias AudioObjectPropertyElement = UInt32
public typealias AudioDeviceID = AudioObjectID
public typealias AudioStreamID = AudioObjectID

// `AudioObjectPropertyAddress`, `AudioValueTranslation` and `AudioStreamRangedDescription` are
// declared in C (CCoreAudio) with Apple's layout.

extension AudioObjectPropertyAddress: @retroactive Equatable, @retroactive Hashable, @unchecked @retroactive Sendable {
    public static func == (a: AudioObjectPropertyAddress, b: AudioObjectPropertyAddress) -> Bool {
        a.mSelector == b.mSelector && a.mScope == b.mScope && a.mElement == b.mElement
    }
    public func hash(into hasher: inout Hasher) {
        hasher.combine(mSelector)
        hasher.combine(mScope)
        hasher.combine(mElement)
    }
}

// MARK: Errors

public let kAudioHardwareNoError: OSStatus = 0
public let kAudioHardwareNotRunningError = OSStatus(bitPattern: fourCC("stop"))
public let kAudioHardwareUnspecifiedError = OSStatus(bitPattern: fourCC("what"))
public let kAudioHardwareUnknownPropertyError = OSStatus(bitPattern: fourCC("who?"))
public let kAudioHardwareBadPropertySizeError = OSStatus(bitPattern: fourCC("!siz"))
public let kAudioHardwareIllegalOperationError = OSStatus(bitPattern: fourCC("nope"))
public let kAudioHardwareBadObjectError = OSStatus(bitPattern: fourCC("!obj"))
public let kAudioHardwareBadDeviceError = OSStatus(bitPattern: fourCC("!dev"))
public let kAudioHardwareBadStreamError = OSStatus(bitPattern: fourCC("!str"))
public let kAudioHardwareUnsupportedOperationError = OSStatus(bitPattern: fourCC("unop"))
public let kAudioHardwareNotReadyError = OSStatus(bitPattern: fourCC("nrdy"))
public let kAudioDeviceUnsupportedFormatError = OSStatus(bitPattern: fourCC("!dat"))
public let kAudioDevicePermissionsError = OSStatus(bitPattern: fourCC("!hog"))

// MARK: Objects, scopes, elements

public let kAudioObjectUnknown: AudioObjectID = 0
/// The system object: `Int`, as Apple's Swift overlay imports it (`AudioObjectID(kAudioObjectSystemObject)`).
public let kAudioObjectSystemObject: Int = 1

public let kAudioObjectPropertyScopeGlobal: AudioObjectPropertyScope = fourCC("glob")
public let kAudioObjectPropertyScopeInput: AudioObjectPropertyScope = fourCC("inpt")
public let kAudioObjectPropertyScopeOutput: AudioObjectPropertyScope = fourCC("outp")
public let kAudioObjectPropertyScopePlayThrough: AudioObjectPropertyScope = fourCC("ptru")
public let kAudioDevicePropertyScopeInput: AudioObjectPropertyScope = kAudioObjectPropertyScopeInput
public let kAudioDevicePropertyScopeOutput: AudioObjectPropertyScope = kAudioObjectPropertyScopeOutput
public let kAudioObjectPropertyElementMain: AudioObjectPropertyElement = 0
@available(*, deprecated, renamed: "kAudioObjectPropertyElementMain")
public let kAudioObjectPropertyElementMaster: AudioObjectPropertyElement = 0
public let kAudioObjectPropertySelectorWildcard: AudioObjectPropertySelector = fourCC("****")
public let kAudioObjectPropertyScopeWildcard: AudioObjectPropertyScope = fourCC("****")
public let kAudioObjectPropertyElementWildcard: AudioObjectPropertyElement = 0xFFFF_FFFF
public let kAudioObjectClassIDWildcard: AudioClassID = fourCC("****")

// MARK: Classes

public let kAudioObjectClassID: AudioClassID = fourCC("aobj")
public let kAudioSystemObjectClassID: AudioClassID = fourCC("asys")
public let kAudioDeviceClassID: AudioClassID = fourCC("adev")
public let kAudioStreamClassID: AudioClassID = fourCC("astr")

// MARK: Properties of every object

public let kAudioObjectPropertyBaseClass: AudioObjectPropertySelector = fourCC("bcls")
public let kAudioObjectPropertyClass: AudioObjectPropertySelector = fourCC("clas")
public let kAudioObjectPropertyOwner: AudioObjectPropertySelector = fourCC("stdv")
public let kAudioObjectPropertyName: AudioObjectPropertySelector = fourCC("lnam")
public let kAudioObjectPropertyModelName: AudioObjectPropertySelector = fourCC("lmod")
public let kAudioObjectPropertyManufacturer: AudioObjectPropertySelector = fourCC("lmak")
public let kAudioObjectPropertyOwnedObjects: AudioObjectPropertySelector = fourCC("ownd")

// MARK: The system object

public let kAudioHardwarePropertyDevices: AudioObjectPropertySelector = fourCC("dev#")
public let kAudioHardwarePropertyDefaultInputDevice: AudioObjectPropertySelector = fourCC("dIn ")
public let kAudioHardwarePropertyDefaultOutputDevice: AudioObjectPropertySelector = fourCC("dOut")
public let kAudioHardwarePropertyDefaultSystemOutputDevice: AudioObjectPropertySelector = fourCC("sOut")
public let kAudioHardwarePropertyTranslateUIDToDevice: AudioObjectPropertySelector = fourCC("uidd")

// MARK: Devices

public let kAudioDevicePropertyDeviceUID: AudioObjectPropertySelector = fourCC("uid ")
public let kAudioDevicePropertyModelUID: AudioObjectPropertySelector = fourCC("muid")
public let kAudioDevicePropertyTransportType: AudioObjectPropertySelector = fourCC("tran")
public let kAudioDevicePropertyDeviceIsAlive: AudioObjectPropertySelector = fourCC("livn")
public let kAudioDevicePropertyDeviceIsRunning: AudioObjectPropertySelector = fourCC("goin")
public let kAudioDevicePropertyDeviceIsRunningSomewhere: AudioObjectPropertySelector = fourCC("gone")
public let kAudioDevicePropertyDeviceCanBeDefaultDevice: AudioObjectPropertySelector = fourCC("dflt")
public let kAudioDevicePropertyDeviceCanBeDefaultSystemDevice: AudioObjectPropertySelector = fourCC("sflt")
public let kAudioDevicePropertyLatency: AudioObjectPropertySelector = fourCC("ltnc")
public let kAudioDevicePropertyStreams: AudioObjectPropertySelector = fourCC("stm#")
public let kAudioDevicePropertySafetyOffset: AudioObjectPropertySelector = fourCC("saft")
public let kAudioDevicePropertyNominalSampleRate: AudioObjectPropertySelector = fourCC("nsrt")
public let kAudioDevicePropertyAvailableNominalSampleRates: AudioObjectPropertySelector = fourCC("nsr#")
public let kAudioDevicePropertyBufferFrameSize: AudioObjectPropertySelector = fourCC("fsiz")
public let kAudioDevicePropertyBufferFrameSizeRange: AudioObjectPropertySelector = fourCC("fsz#")
public let kAudioDevicePropertyStreamConfiguration: AudioObjectPropertySelector = fourCC("slay")
public let kAudioDevicePropertyJackIsConnected: AudioObjectPropertySelector = fourCC("jack")
public let kAudioDevicePropertyVolumeScalar: AudioObjectPropertySelector = fourCC("volm")
public let kAudioDevicePropertyVolumeDecibels: AudioObjectPropertySelector = fourCC("vold")
public let kAudioDevicePropertyVolumeScalarToDecibels: AudioObjectPropertySelector = fourCC("v2db")
public let kAudioDevicePropertyVolumeDecibelsToScalar: AudioObjectPropertySelector = fourCC("db2v")
public let kAudioDevicePropertyMute: AudioObjectPropertySelector = fourCC("mute")
public let kAudioDevicePropertyDataSource: AudioObjectPropertySelector = fourCC("ssrc")
public let kAudioDevicePropertyDataSources: AudioObjectPropertySelector = fourCC("ssc#")
public let kAudioDevicePropertyDataSourceNameForIDCFString: AudioObjectPropertySelector = fourCC("lscn")

public let kAudioDeviceTransportTypeUnknown: UInt32 = 0
public let kAudioDeviceTransportTypeBuiltIn: UInt32 = fourCC("bltn")
public let kAudioDeviceTransportTypeAggregate: UInt32 = fourCC("grup")
public let kAudioDeviceTransportTypeVirtual: UInt32 = fourCC("virt")
public let kAudioDeviceTransportTypePCI: UInt32 = fourCC("pci ")
public let kAudioDeviceTransportTypeUSB: UInt32 = fourCC("usb ")
public let kAudioDeviceTransportTypeFireWire: UInt32 = fourCC("1394")
public let kAudioDeviceTransportTypeBluetooth: UInt32 = fourCC("blue")
public let kAudioDeviceTransportTypeBluetoothLE: UInt32 = fourCC("blea")
public let kAudioDeviceTransportTypeHDMI: UInt32 = fourCC("hdmi")
public let kAudioDeviceTransportTypeDisplayPort: UInt32 = fourCC("dprt")
public let kAudioDeviceTransportTypeAirPlay: UInt32 = fourCC("airp")
public let kAudioDeviceTransportTypeAVB: UInt32 = fourCC("eavb")
public let kAudioDeviceTransportTypeThunderbolt: UInt32 = fourCC("thun")

// MARK: Streams

public let kAudioStreamPropertyIsActive: AudioObjectPropertySelector = fourCC("sact")
public let kAudioStreamPropertyDirection: AudioObjectPropertySelector = fourCC("sdir")
public let kAudioStreamPropertyTerminalType: AudioObjectPropertySelector = fourCC("term")
public let kAudioStreamPropertyStartingChannel: AudioObjectPropertySelector = fourCC("schn")
public let kAudioStreamPropertyLatency: AudioObjectPropertySelector = kAudioDevicePropertyLatency
public let kAudioStreamPropertyVirtualFormat: AudioObjectPropertySelector = fourCC("sfmt")
public let kAudioStreamPropertyAvailableVirtualFormats: AudioObjectPropertySelector = fourCC("sfma")
public let kAudioStreamPropertyPhysicalFormat: AudioObjectPropertySelector = fourCC("pft ")
public let kAudioStreamPropertyAvailablePhysicalFormats: AudioObjectPropertySelector = fourCC("pfta")

public let kAudioStreamTerminalTypeUnknown: UInt32 = 0
public let kAudioStreamTerminalTypeLine: UInt32 = fourCC("line")
public let kAudioStreamTerminalTypeDigitalAudioInterface: UInt32 = fourCC("spdf")
public let kAudioStreamTerminalTypeSpeaker: UInt32 = fourCC("spkr")
public let kAudioStreamTerminalTypeHeadphones: UInt32 = fourCC("hdph")
public let kAudioStreamTerminalTypeLFESpeaker: UInt32 = fourCC("lfes")
public let kAudioStreamTerminalTypeReceiverSpeaker: UInt32 = fourCC("rspk")
public let kAudioStreamTerminalTypeMicrophone: UInt32 = fourCC("micr")
public let kAudioStreamTerminalTypeHeadsetMicrophone: UInt32 = fourCC("hmic")
public let kAudioStreamTerminalTypeReceiverMicrophone: UInt32 = fourCC("rmic")
public let kAudioStreamTerminalTypeTTY: UInt32 = fourCC("tty_")
public let kAudioStreamTerminalTypeHDMI: UInt32 = fourCC("hdmi")
public let kAudioStreamTerminalTypeDisplayPort: UInt32 = fourCC("dprt")

// MARK: IOProcs

public let kAudioDeviceStartTimeIsInputFlag: UInt32 = 1 << 0
public let kAudioDeviceStartTimeDontConsultDeviceFlag: UInt32 = 1 << 1
public let kAudioDeviceStartTimeDontConsultHALFlag: UInt32 = 1 << 2
