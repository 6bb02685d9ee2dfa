import AudioHAL
import Foundation

/// The properties of each object: what `AudioObjectGetPropertyData` answers and
/// `AudioObjectSetPropertyData` changes, from the server's view of its devices.
extension Hardware {
    /// The value of a property; `qualifier` is what the caller passed as qualifier data.
    func value(of object: AudioObjectID, _ address: AudioObjectPropertyAddress, qualifier: PropertyInput?) throws(PropertyError) -> PropertyValue {
        let snapshot = try snapshot()
        if object == Self.systemObject { return try systemValue(address, snapshot: snapshot, qualifier: qualifier) }
        if let device = snapshot.device(object) { return try deviceValue(device, address, qualifier: qualifier) }
        if let device = snapshot.device(stream: object) { return try streamValue(device, address) }
        throw .badObject
    }

    // MARK: The system object

    private func systemValue(_ address: AudioObjectPropertyAddress, snapshot: HardwareSnapshot, qualifier: PropertyInput?) throws(PropertyError) -> PropertyValue {
        switch address.mSelector {
        case kAudioObjectPropertyClass: return .uint32(kAudioSystemObjectClassID)
        case kAudioObjectPropertyBaseClass: return .uint32(kAudioObjectClassID)
        case kAudioObjectPropertyOwner: return .uint32(kAudioObjectUnknown)
        case kAudioHardwarePropertyDevices, kAudioObjectPropertyOwnedObjects: return .uint32s(snapshot.devices.map(\.id))
        case kAudioHardwarePropertyDefaultOutputDevice, kAudioHardwarePropertyDefaultSystemOutputDevice: return .uint32(snapshot.defaultOutput)
        case kAudioHardwarePropertyDefaultInputDevice: return .uint32(snapshot.defaultInput)
        case kAudioHardwarePropertyTranslateUIDToDevice:
            guard let qualifier else { throw .badSize }
            let uid = try qualifier.string()
            return .uint32(snapshot.devices.first { $0.info.name == uid }?.id ?? kAudioObjectUnknown)
        default: throw .unknownProperty
        }
    }

    // MARK: Devices

    private func deviceValue(_ device: DeviceEntry, _ address: AudioObjectPropertyAddress, qualifier: PropertyInput?) throws(PropertyError) -> PropertyValue {
        let info = device.info
        let inScope = address.mScope == device.scope
        /// Properties of the device's own scope (the global scope is taken for it).
        func scoped() throws(PropertyError) {
            guard inScope || address.mScope == kAudioObjectPropertyScopeGlobal else { throw .unknownProperty }
        }
        func volume() throws(PropertyError) -> Double {
            guard inScope, !info.volumes.isEmpty else { throw .unknownProperty }
            // The main element is the loudest channel, as PulseAudio's own mixers show it.
            if address.mElement == kAudioObjectPropertyElementMain { return info.volumes.max() ?? 0 }
            guard Int(address.mElement) <= info.volumes.count else { throw .unknownProperty }
            return info.volumes[Int(address.mElement) - 1]
        }
        switch address.mSelector {
        case kAudioObjectPropertyClass: return .uint32(kAudioDeviceClassID)
        case kAudioObjectPropertyBaseClass: return .uint32(kAudioObjectClassID)
        case kAudioObjectPropertyOwner: return .uint32(Self.systemObject)
        case kAudioObjectPropertyOwnedObjects: return .uint32s([device.streamID])
        case kAudioObjectPropertyName: return .string(info.description)
        case kAudioObjectPropertyManufacturer:
            guard let vendor = info.vendor else { throw .unknownProperty }
            return .string(vendor)
        case kAudioObjectPropertyModelName:
            guard let product = info.product else { throw .unknownProperty }
            return .string(product)
        case kAudioDevicePropertyDeviceUID: return .string(info.name)
        case kAudioDevicePropertyModelUID:
            // What kind of device, the same for two of a kind: its bus, vendor and product where
            // the server knows them, else what it is (a null sink, a monitor).
            let parts = [info.bus, info.vendor, info.product].compactMap { $0 }
            return .string(parts.isEmpty ? (info.monitorOf != nil ? "monitor" : info.isVirtual ? "virtual" : "unknown") : parts.joined(separator: ":"))
        case kAudioDevicePropertyTransportType: return .uint32(Self.transportType(info))
        case kAudioDevicePropertyDeviceIsAlive: return .uint32(1)
        case kAudioDevicePropertyDeviceIsRunning: return .uint32(DeviceIO.shared.isRunning(device.id) ? 1 : 0)
        case kAudioDevicePropertyDeviceIsRunningSomewhere: return .uint32(info.isRunning || DeviceIO.shared.isRunning(device.id) ? 1 : 0)
        case kAudioDevicePropertyDeviceCanBeDefaultDevice:
            try scoped()
            return .uint32(1)
        case kAudioDevicePropertyDeviceCanBeDefaultSystemDevice:
            try scoped()
            return .uint32(device.isOutput ? 1 : 0)
        case kAudioDevicePropertyLatency:
            try scoped()
            return .uint32(UInt32((info.latency * info.sampleRate).rounded()))
        case kAudioDevicePropertySafetyOffset:
            try scoped()
            return .uint32(0)
        case kAudioDevicePropertyStreams:
            return .uint32s(inScope || address.mScope == kAudioObjectPropertyScopeGlobal ? [device.streamID] : [])
        case kAudioDevicePropertyStreamConfiguration:
            return .bufferList(channels: inScope ? UInt32(info.channels) : nil)
        case kAudioDevicePropertyNominalSampleRate: return .float64(info.sampleRate)
        case kAudioDevicePropertyAvailableNominalSampleRates: return .ranges([AudioValueRange(mMinimum: info.sampleRate, mMaximum: info.sampleRate)])
        case kAudioDevicePropertyBufferFrameSize: return .uint32(bufferFrames(device.id))
        case kAudioDevicePropertyBufferFrameSizeRange:
            let range = Self.bufferFrameRange(info.sampleRate)
            return .ranges([AudioValueRange(mMinimum: Double(range.lowerBound), mMaximum: Double(range.upperBound))])
        case kAudioDevicePropertyVolumeScalar: return .float32(Float32(min(try volume(), 1)))
        case kAudioDevicePropertyVolumeDecibels: return .float32(Float32(HALVolume.decibels(try volume())))
        case kAudioDevicePropertyVolumeScalarToDecibels, kAudioDevicePropertyVolumeDecibelsToScalar:
            // In and out through the caller's buffer: handled by AudioObjectGetPropertyData.
            _ = try volume()
            throw .badSize
        case kAudioDevicePropertyMute:
            guard inScope, address.mElement == kAudioObjectPropertyElementMain else { throw .unknownProperty }
            return .uint32(info.muted ? 1 : 0)
        case kAudioDevicePropertyDataSource:
            guard inScope, !info.ports.isEmpty, let n = info.ports.firstIndex(where: { $0.name == info.portName }) else { throw .unknownProperty }
            return .uint32(UInt32(n + 1))
        case kAudioDevicePropertyDataSources:
            guard inScope, !info.ports.isEmpty else { throw .unknownProperty }
            return .uint32s(info.ports.indices.map { UInt32($0 + 1) })
        case kAudioDevicePropertyJackIsConnected:
            guard inScope, let port = info.ports.first(where: { $0.name == info.portName }), let connected = port.connected else {
                throw .unknownProperty
            }
            return .uint32(connected ? 1 : 0)
        default: throw .unknownProperty
        }
    }

    /// A data source's name (`kAudioDevicePropertyDataSourceNameForIDCFString`).
    func dataSourceName(_ object: AudioObjectID, _ address: AudioObjectPropertyAddress, id: UInt32) throws(PropertyError) -> String {
        guard let device = try snapshot().device(object), address.mScope == device.scope, !device.info.ports.isEmpty else { throw .unknownProperty }
        guard id >= 1, Int(id) <= device.info.ports.count else { throw .illegalOperation }
        let port = device.info.ports[Int(id) - 1]
        return port.description.isEmpty ? port.name : port.description
    }

    /// Apple's transport type for what the server says of a device.
    static func transportType(_ info: HALDeviceInfo) -> UInt32 {
        if info.monitorOf != nil || info.isVirtual { return kAudioDeviceTransportTypeVirtual }
        switch info.kind {
        case .bluetoothA2DP, .bluetoothHFP: return kAudioDeviceTransportTypeBluetooth
        case .usb: return kAudioDeviceTransportTypeUSB
        case .hdmi: return kAudioDeviceTransportTypeHDMI
        default: break
        }
        switch info.bus {
        case "usb": return kAudioDeviceTransportTypeUSB
        case "bluetooth": return kAudioDeviceTransportTypeBluetooth
        case "firewire": return kAudioDeviceTransportTypeFireWire
        case "pci", "isa", "platform": return kAudioDeviceTransportTypeBuiltIn
        default: return kAudioDeviceTransportTypeUnknown
        }
    }

    // MARK: Streams

    private func streamValue(_ device: DeviceEntry, _ address: AudioObjectPropertyAddress) throws(PropertyError) -> PropertyValue {
        let info = device.info
        switch address.mSelector {
        case kAudioObjectPropertyClass: return .uint32(kAudioStreamClassID)
        case kAudioObjectPropertyBaseClass: return .uint32(kAudioObjectClassID)
        case kAudioObjectPropertyOwner: return .uint32(device.id)
        case kAudioStreamPropertyIsActive: return .uint32(1)
        case kAudioStreamPropertyDirection: return .uint32(device.isOutput ? 0 : 1)
        case kAudioStreamPropertyTerminalType: return .uint32(Self.terminalType(info, output: device.isOutput))
        case kAudioStreamPropertyStartingChannel: return .uint32(1)
        case kAudioStreamPropertyLatency: return .uint32(0)
        case kAudioStreamPropertyVirtualFormat: return .format(Self.ioFormat(info))
        case kAudioStreamPropertyAvailableVirtualFormats:
            return .rangedFormats([AudioStreamRangedDescription(
                mFormat: Self.ioFormat(info), mSampleRateRange: AudioValueRange(mMinimum: info.sampleRate, mMaximum: info.sampleRate))])
        default: throw .unknownProperty
        }
    }

    /// The format IOProcs see: the device's rate and channels, interleaved 32-bit float.
    static func ioFormat(_ info: HALDeviceInfo) -> AudioStreamBasicDescription {
        let bytes = UInt32(4 * info.channels)
        return AudioStreamBasicDescription(
            mSampleRate: info.sampleRate, mFormatID: kAudioFormatLinearPCM, mFormatFlags: kAudioFormatFlagsNativeFloatPacked,
            mBytesPerPacket: bytes, mFramesPerPacket: 1, mBytesPerFrame: bytes, mChannelsPerFrame: UInt32(info.channels),
            mBitsPerChannel: 32, mReserved: 0)
    }

    static func terminalType(_ info: HALDeviceInfo, output: Bool) -> UInt32 {
        if info.monitorOf != nil { return kAudioStreamTerminalTypeUnknown }
        switch info.kind {
        case .speaker: return kAudioStreamTerminalTypeSpeaker
        case .builtIn: return info.isVirtual ? kAudioStreamTerminalTypeUnknown : output ? kAudioStreamTerminalTypeSpeaker : kAudioStreamTerminalTypeMicrophone
        case .microphone: return kAudioStreamTerminalTypeMicrophone
        case .headphones: return kAudioStreamTerminalTypeHeadphones
        case .headset: return output ? kAudioStreamTerminalTypeHeadphones : kAudioStreamTerminalTypeHeadsetMicrophone
        case .handset: return output ? kAudioStreamTerminalTypeReceiverSpeaker : kAudioStreamTerminalTypeReceiverMicrophone
        case .line: return kAudioStreamTerminalTypeLine
        case .hdmi: return kAudioStreamTerminalTypeHDMI
        case .usb, .bluetoothA2DP, .bluetoothHFP, .car: return kAudioStreamTerminalTypeUnknown
        }
    }

    // MARK: Setting

    /// Whether `AudioObjectSetPropertyData` may change the property.
    func isSettable(_ object: AudioObjectID, _ address: AudioObjectPropertyAddress) throws(PropertyError) -> Bool {
        _ = try value(of: object, address, qualifier: nil)
        let snapshot = try snapshot()
        if object == Self.systemObject {
            return [kAudioHardwarePropertyDefaultOutputDevice, kAudioHardwarePropertyDefaultInputDevice, kAudioHardwarePropertyDefaultSystemOutputDevice]
                .contains(address.mSelector)
        }
        guard snapshot.device(object) != nil else { return false }
        return [
            kAudioDevicePropertyNominalSampleRate, kAudioDevicePropertyBufferFrameSize, kAudioDevicePropertyVolumeScalar,
            kAudioDevicePropertyVolumeDecibels, kAudioDevicePropertyMute, kAudioDevicePropertyDataSource,
        ].contains(address.mSelector)
    }

    func setValue(of object: AudioObjectID, _ address: AudioObjectPropertyAddress, _ input: PropertyInput) throws(PropertyError) {
        guard try isSettable(object, address) else { throw .illegalOperation }
        let snapshot = try snapshot()
        let backend = try backend()
        defer { invalidate() }
        func server(_ body: () throws(HALError) -> Void) throws(PropertyError) {
            do { try body() } catch { throw error.kind == .deviceNotFound ? .badObject : .illegalOperation }
        }
        if object == Self.systemObject {
            let id = try input.uint32()
            let output = address.mSelector != kAudioHardwarePropertyDefaultInputDevice
            guard let device = snapshot.device(id), device.isOutput == output else { throw .illegalOperation }
            try server { () throws(HALError) in try backend.setDefaultDevice(device.info.name, output: output) }
            return
        }
        guard let device = snapshot.device(object) else { throw .badObject }
        let info = device.info
        switch address.mSelector {
        case kAudioDevicePropertyNominalSampleRate:
            // The server runs each device at one rate and resamples every stream to it; a client
            // cannot change it. The rate it runs at is accepted, any other refused.
            guard try input.float64() == info.sampleRate else { throw .unsupportedFormat }
        case kAudioDevicePropertyBufferFrameSize:
            let frames = try input.uint32()
            guard Self.bufferFrameRange(info.sampleRate).contains(frames) else { throw .illegalOperation }
            setBufferFrames(frames, device: object)
            DeviceIO.shared.bufferSizeChanged(object)
        case kAudioDevicePropertyVolumeScalar, kAudioDevicePropertyVolumeDecibels:
            let given = Double(try input.float32())
            let level = min(max(address.mSelector == kAudioDevicePropertyVolumeScalar ? given : HALVolume.volume(decibels: given), 0), 1)
            var volumes = info.volumes
            if address.mElement == kAudioObjectPropertyElementMain {
                // The main volume moves every channel, keeping their balance (PulseAudio's own rule).
                let top = volumes.max() ?? 0
                volumes = top > 0 ? volumes.map { $0 * level / top } : volumes.map { _ in level }
            } else {
                volumes[Int(address.mElement) - 1] = level
            }
            try server { () throws(HALError) in try backend.setVolumes(volumes, device: info.name, output: device.isOutput) }
        case kAudioDevicePropertyMute:
            let muted = try input.uint32() != 0
            try server { () throws(HALError) in try backend.setMuted(muted, device: info.name, output: device.isOutput) }
        case kAudioDevicePropertyDataSource:
            let id = try input.uint32()
            guard id >= 1, Int(id) <= info.ports.count else { throw .illegalOperation }
            try server { () throws(HALError) in try backend.setActivePort(info.ports[Int(id) - 1].name, device: info.name, output: device.isOutput) }
        default: throw .illegalOperation
        }
    }
}
