public import Dispatch
import AudioHAL
import Foundation

// Apple's AudioObject functions (AudioHardware.h): properties of the system object, devices and
// streams, and listeners for their changes. See CoreAudio.swift for how the server's sinks and
// sources become these objects.

public typealias AudioObjectPropertyListenerProc =
    @convention(c) (AudioObjectID, UInt32, UnsafePointer<AudioObjectPropertyAddress>, UnsafeMutableRawPointer?) -> OSStatus
public typealias AudioObjectPropertyListenerBlock = (UInt32, UnsafePointer<AudioObjectPropertyAddress>) -> Void

/// Runs a property call and turns its failure into Apple's status.
private func status(_ body: () throws(PropertyError) -> Void) -> OSStatus {
    do throws(PropertyError) {
        try body()
        return kAudioHardwareNoError
    } catch {
        return error.status
    }
}

/// Whether the object has the property.
@discardableResult
public func AudioObjectHasProperty(_ inObjectID: AudioObjectID, _ inAddress: UnsafePointer<AudioObjectPropertyAddress>) -> Bool {
    let address = inAddress.pointee
    do throws(PropertyError) {
        _ = try Hardware.shared.value(of: inObjectID, address, qualifier: nil)
        return true
    } catch {
        // Properties answered only with the caller's data exist all the same.
        guard error == .badSize else { return false }
        return true
    }
}

/// Whether `AudioObjectSetPropertyData` may change the property.
@discardableResult
public func AudioObjectIsPropertySettable(
    _ inObjectID: AudioObjectID, _ inAddress: UnsafePointer<AudioObjectPropertyAddress>, _ outIsSettable: UnsafeMutablePointer<DarwinBoolean>
) -> OSStatus {
    let address = inAddress.pointee
    return status { () throws(PropertyError) in
        do throws(PropertyError) {
            outIsSettable.pointee = DarwinBoolean(try Hardware.shared.isSettable(inObjectID, address))
        } catch .badSize {
            outIsSettable.pointee = false
        }
    }
}

/// The size in bytes of the property's current value.
@discardableResult
public func AudioObjectGetPropertyDataSize(
    _ inObjectID: AudioObjectID, _ inAddress: UnsafePointer<AudioObjectPropertyAddress>, _ inQualifierDataSize: UInt32,
    _ inQualifierData: UnsafeRawPointer?, _ outDataSize: UnsafeMutablePointer<UInt32>
) -> OSStatus {
    let address = inAddress.pointee
    return status { () throws(PropertyError) in
        if let size = inOutSize(address.mSelector) {
            guard AudioObjectHasProperty(inObjectID, inAddress) else { throw .unknownProperty }
            outDataSize.pointee = UInt32(size)
            return
        }
        let qualifier = inQualifierData.map { PropertyInput(data: $0, size: Int(inQualifierDataSize)) }
        outDataSize.pointee = UInt32(try Hardware.shared.value(of: inObjectID, address, qualifier: qualifier).size)
    }
}

/// The sizes of the properties whose data goes both in and out through the caller's buffer.
private func inOutSize(_ selector: AudioObjectPropertySelector) -> Int? {
    switch selector {
    case kAudioDevicePropertyVolumeScalarToDecibels, kAudioDevicePropertyVolumeDecibelsToScalar: MemoryLayout<Float32>.size
    case kAudioDevicePropertyDataSourceNameForIDCFString: MemoryLayout<AudioValueTranslation>.size
    default: nil
    }
}

/// Copies the property's value into `outData` (at most `ioDataSize` bytes; `ioDataSize` is set to
/// what was written). A `CFString` comes retained: the caller owns it, as on Apple's platforms.
@discardableResult
public func AudioObjectGetPropertyData(
    _ inObjectID: AudioObjectID, _ inAddress: UnsafePointer<AudioObjectPropertyAddress>, _ inQualifierDataSize: UInt32,
    _ inQualifierData: UnsafeRawPointer?, _ ioDataSize: UnsafeMutablePointer<UInt32>, _ outData: UnsafeMutableRawPointer
) -> OSStatus {
    let address = inAddress.pointee
    return status { () throws(PropertyError) in
        if let size = inOutSize(address.mSelector) {
            guard Int(ioDataSize.pointee) >= size else { throw .badSize }
            guard AudioObjectHasProperty(inObjectID, inAddress) else { throw .unknownProperty }
            switch address.mSelector {
            case kAudioDevicePropertyVolumeScalarToDecibels:
                let scalar = Double(min(max(outData.loadUnaligned(as: Float32.self), 0), 1))
                outData.storeBytes(of: Float32(HALVolume.decibels(scalar)), as: Float32.self)
            case kAudioDevicePropertyVolumeDecibelsToScalar:
                let decibels = Double(outData.loadUnaligned(as: Float32.self))
                outData.storeBytes(of: Float32(min(HALVolume.volume(decibels: decibels), 1)), as: Float32.self)
            default:
                let translation = outData.loadUnaligned(as: AudioValueTranslation.self)
                guard translation.mInputDataSize >= 4, translation.mOutputDataSize >= UInt32(MemoryLayout<CFString>.size) else { throw .badSize }
                let name = try Hardware.shared.dataSourceName(inObjectID, address, id: translation.mInputData.loadUnaligned(as: UInt32.self))
                _ = PropertyValue.string(name).write(to: translation.mOutputData, capacity: Int(translation.mOutputDataSize))
            }
            ioDataSize.pointee = UInt32(size)
            return
        }
        let qualifier = inQualifierData.map { PropertyInput(data: $0, size: Int(inQualifierDataSize)) }
        let value = try Hardware.shared.value(of: inObjectID, address, qualifier: qualifier)
        guard let written = value.write(to: outData, capacity: Int(ioDataSize.pointee)) else { throw .badSize }
        ioDataSize.pointee = UInt32(written)
    }
}

/// Changes the property: the server's default devices, a device's volume, mute and data source
/// (its active port), and this process's I/O buffer size on a device. A device's sample rate is
/// the server's to choose: only the rate it runs at is accepted (`kAudioDeviceUnsupportedFormatError`
/// otherwise).
@discardableResult
public func AudioObjectSetPropertyData(
    _ inObjectID: AudioObjectID, _ inAddress: UnsafePointer<AudioObjectPropertyAddress>, _ inQualifierDataSize: UInt32,
    _ inQualifierData: UnsafeRawPointer?, _ inDataSize: UInt32, _ inData: UnsafeRawPointer
) -> OSStatus {
    let address = inAddress.pointee
    return status { () throws(PropertyError) in
        try Hardware.shared.setValue(of: inObjectID, address, PropertyInput(data: inData, size: Int(inDataSize)))
    }
}

/// Prints what the object is to standard output (Apple's prints to the console).
public func AudioObjectShow(_ inObjectID: AudioObjectID) {
    guard let snapshot = try? Hardware.shared.snapshot() else { return print("AudioObject \(inObjectID): no server") }
    if inObjectID == Hardware.systemObject {
        print("AudioObject \(inObjectID): system object, \(snapshot.devices.count) devices")
    } else if let d = snapshot.device(inObjectID) {
        print("AudioObject \(inObjectID): \(d.isOutput ? "output" : "input") device \"\(d.info.description)\" (\(d.info.name))")
    } else if let d = snapshot.device(stream: inObjectID) {
        print("AudioObject \(inObjectID): stream of device \(d.id)")
    } else {
        print("AudioObject \(inObjectID): unknown")
    }
}

// MARK: Listeners

/// Registers a listener on an object that exists now (the system object, a device or a stream).
private func addListener(_ object: AudioObjectID, _ address: UnsafePointer<AudioObjectPropertyAddress>, _ callback: HardwareNotifier.Listener.Callback) -> OSStatus {
    let address = address.pointee
    return status { () throws(PropertyError) in
        // The first snapshot starts the notification thread, and is what changes are told against:
        // a listener on the system object alone must start it too.
        let snapshot = try Hardware.shared.snapshot()
        if object != Hardware.systemObject {
            guard snapshot.device(object) != nil || snapshot.device(stream: object) != nil else { throw .badObject }
        }
        HardwareNotifier.shared.add(.init(object: object, address: address, callback: callback))
    }
}

/// Removes the registration of exactly that object, address and callback.
private func removeListener(_ object: AudioObjectID, _ address: UnsafePointer<AudioObjectPropertyAddress>, _ callback: HardwareNotifier.Listener.Callback) -> OSStatus {
    HardwareNotifier.shared.remove(.init(object: object, address: address.pointee, callback: callback)) ? kAudioHardwareNoError : kAudioHardwareUnknownPropertyError
}

/// Calls `inListener` on the notification thread when a property the address covers (with
/// wildcards) changes; it gets every changed address of the object at once.
@discardableResult
public func AudioObjectAddPropertyListener(
    _ inObjectID: AudioObjectID, _ inAddress: UnsafePointer<AudioObjectPropertyAddress>, _ inListener: AudioObjectPropertyListenerProc,
    _ inClientData: UnsafeMutableRawPointer?
) -> OSStatus {
    addListener(inObjectID, inAddress, .proc(inListener, inClientData))
}

@discardableResult
public func AudioObjectRemovePropertyListener(
    _ inObjectID: AudioObjectID, _ inAddress: UnsafePointer<AudioObjectPropertyAddress>, _ inListener: AudioObjectPropertyListenerProc,
    _ inClientData: UnsafeMutableRawPointer?
) -> OSStatus {
    removeListener(inObjectID, inAddress, .proc(inListener, inClientData))
}

/// As ``AudioObjectAddPropertyListener(_:_:_:_:)``, calling `inListener` on `inDispatchQueue`
/// (on the notification thread when `nil`). To remove it, pass the same closure value (the same
/// stored property or variable) to ``AudioObjectRemovePropertyListenerBlock(_:_:_:_:)``.
@discardableResult
public func AudioObjectAddPropertyListenerBlock(
    _ inObjectID: AudioObjectID, _ inAddress: UnsafePointer<AudioObjectPropertyAddress>, _ inDispatchQueue: DispatchQueue?,
    _ inListener: @escaping AudioObjectPropertyListenerBlock
) -> OSStatus {
    addListener(inObjectID, inAddress, .block(inDispatchQueue, inListener))
}

@discardableResult
public func AudioObjectRemovePropertyListenerBlock(
    _ inObjectID: AudioObjectID, _ inAddress: UnsafePointer<AudioObjectPropertyAddress>, _ inDispatchQueue: DispatchQueue?,
    _ inListener: @escaping AudioObjectPropertyListenerBlock
) -> OSStatus {
    removeListener(inObjectID, inAddress, .block(inDispatchQueue, inListener))
}
