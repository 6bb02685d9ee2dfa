public import CoreAudio
public import CoreAudioTypes
public import Foundation

/// A kind of unit this process can make: its description, its name as Apple's reads, and how to
/// make one. The list holds only what is implemented; a description of anything else finds nothing.
package final class AudioComponentEntry: ReferencedObject, @unchecked Sendable {
    package let ref = newObjectReference(.audioComponent)
    let description: AudioComponentDescription
    let name: String
    let make: @Sendable (AudioComponentEntry) -> AudioUnitObject

    package init(_ type: OSType, _ subType: OSType, _ name: String, make: @escaping @Sendable (AudioComponentEntry) -> AudioUnitObject) {
        description = AudioComponentDescription(
            componentType: type, componentSubType: subType, componentManufacturer: kAudioUnitManufacturer_Apple, componentFlags: 0,
            componentFlagsMask: 0)
        self.name = name
        self.make = make
    }

    func matches(_ d: AudioComponentDescription) -> Bool {
        (d.componentType == 0 || d.componentType == description.componentType)
            && (d.componentSubType == 0 || d.componentSubType == description.componentSubType)
            && (d.componentManufacturer == 0 || d.componentManufacturer == description.componentManufacturer)
    }

    /// Every component, in the order searches find them.
    static let all: [AudioComponentEntry] = [
        AudioComponentEntry(kAudioUnitType_Output, kAudioUnitSubType_RemoteIO, "Apple: AudioDeviceOutput") { IOUnit(component: $0, hasInput: true) },
        AudioComponentEntry(kAudioUnitType_Output, kAudioUnitSubType_HALOutput, "Apple: AudioDeviceOutput") { IOUnit(component: $0, hasInput: true) },
        AudioComponentEntry(kAudioUnitType_Output, kAudioUnitSubType_VoiceProcessingIO, "Apple: AUVoiceProcessor") {
            IOUnit(component: $0, hasInput: true, voiceProcessing: true)
        },
        AudioComponentEntry(kAudioUnitType_Output, kAudioUnitSubType_DefaultOutput, "Apple: DefaultOutputUnit") { IOUnit(component: $0, hasInput: false) },
        AudioComponentEntry(kAudioUnitType_Output, kAudioUnitSubType_SystemOutput, "Apple: SystemOutputUnit") { IOUnit(component: $0, hasInput: false) },
        AudioComponentEntry(kAudioUnitType_Mixer, kAudioUnitSubType_MultiChannelMixer, "Apple: AUMultiChannelMixer") { MixerUnit(component: $0) },
        AudioComponentEntry(kAudioUnitType_Effect, kAudioUnitSubType_NBandEQ, "Apple: AUNBandEQ") { EQUnit(component: $0) },
        AudioComponentEntry(kAudioUnitType_Effect, kAudioUnitSubType_Delay, "Apple: AUDelay") { DelayUnit(component: $0) },
        AudioComponentEntry(kAudioUnitType_Effect, kAudioUnitSubType_Reverb2, "Apple: AUReverb2") { ReverbUnit(component: $0) },
        AudioComponentEntry(kAudioUnitType_Effect, kAudioUnitSubType_Distortion, "Apple: AUDistortion") { DistortionUnit(component: $0) },
        AudioComponentEntry(kAudioUnitType_FormatConverter, kAudioUnitSubType_AUConverter, "Apple: AUConverter") { ConverterUnit(component: $0) },
        AudioComponentEntry(kAudioUnitType_FormatConverter, kAudioUnitSubType_NewTimePitch, "Apple: AUNewTimePitch") { TimePitchUnit(component: $0) },
        AudioComponentEntry(kAudioUnitType_FormatConverter, kAudioUnitSubType_Varispeed, "Apple: AUVarispeed") { VarispeedUnit(component: $0) },
    ]

    private static let table: LiveObjects<AudioComponentEntry> = {
        let t = LiveObjects<AudioComponentEntry>(.audioComponent)
        for entry in all { t.add(entry) }
        return t
    }()

    static func lookup(_ ref: AudioComponent?) -> AudioComponentEntry? { table.lookup(ref) }
}

/// The next component after `inComponent` (or the first, for `nil`) that `inDesc` matches; zero
/// fields of the description match anything. `nil` when there is none.
public func AudioComponentFindNext(_ inComponent: AudioComponent?, _ inDesc: UnsafePointer<AudioComponentDescription>) -> AudioComponent? {
    let all = AudioComponentEntry.all
    var start = 0
    if let inComponent {
        guard let i = all.firstIndex(where: { $0.ref == inComponent }) else { return nil }
        start = i + 1
    }
    return all[start...].first { $0.matches(inDesc.pointee) }?.ref
}

/// How many components `inDesc` matches.
public func AudioComponentCount(_ inDesc: UnsafePointer<AudioComponentDescription>) -> UInt32 {
    UInt32(AudioComponentEntry.all.count { $0.matches(inDesc.pointee) })
}

/// The component's name, "Manufacturer: Unit" as Apple's; the caller owns the string.
@discardableResult
public func AudioComponentCopyName(_ inComponent: AudioComponent, _ outName: UnsafeMutablePointer<Unmanaged<CFString>>) -> OSStatus {
    guard let entry = AudioComponentEntry.lookup(inComponent) else { return kAudio_ParamError }
    outName.pointee = .passRetained(entry.name as NSString)
    return noErr
}

@discardableResult
public func AudioComponentGetDescription(_ inComponent: AudioComponent, _ outDesc: UnsafeMutablePointer<AudioComponentDescription>) -> OSStatus {
    guard let entry = AudioComponentEntry.lookup(inComponent) else { return kAudio_ParamError }
    outDesc.pointee = entry.description
    return noErr
}

/// The component's version: this library's units are all version 1.0.0 (0x00010000).
@discardableResult
public func AudioComponentGetVersion(_ inComponent: AudioComponent, _ outVersion: UnsafeMutablePointer<UInt32>) -> OSStatus {
    guard AudioComponentEntry.lookup(inComponent) != nil else { return kAudio_ParamError }
    outVersion.pointee = 0x0001_0000
    return noErr
}

/// Makes a unit of the component, uninitialized.
@discardableResult
public func AudioComponentInstanceNew(_ inComponent: AudioComponent, _ outInstance: UnsafeMutablePointer<AudioComponentInstance?>) -> OSStatus {
    guard let entry = AudioComponentEntry.lookup(inComponent) else {
        outInstance.pointee = nil
        return kAudio_ParamError
    }
    let unit = entry.make(entry)
    liveUnits.add(unit)
    outInstance.pointee = unit.ref
    return noErr
}

/// Stops, uninitializes and disposes of a unit; its reference stays invalid from then on.
@discardableResult
public func AudioComponentInstanceDispose(_ inInstance: AudioComponentInstance?) -> OSStatus {
    guard let inInstance, let unit = liveUnits.remove(inInstance) else { return kAudio_ParamError }
    unit.dispose()
    return noErr
}

/// The component a unit was made from.
public func AudioComponentInstanceGetComponent(_ inInstance: AudioComponentInstance) -> AudioComponent {
    liveUnits.lookup(inInstance)?.component.ref ?? inInstance
}
