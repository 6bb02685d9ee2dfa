import AudioToolbox
import Foundation

/// The default output's monitor source by name (`<sink>.monitor`, as PulseAudio and
/// pipewire-pulse both name it), the sink read through the device API. A capture stream asking for
/// `@DEFAULT_MONITOR@` gets nothing on pipewire-pulse (0.3.65), so what listens to the speaker
/// names its monitor. `@DEFAULT_MONITOR@` where the device API cannot tell.
public func defaultMonitorName() -> String {
    var address = AudioObjectPropertyAddress(
        mSelector: kAudioHardwarePropertyDefaultOutputDevice, mScope: kAudioObjectPropertyScopeGlobal, mElement: kAudioObjectPropertyElementMain)
    var device = kAudioObjectUnknown
    var size = UInt32(MemoryLayout<AudioObjectID>.size)
    guard AudioObjectGetPropertyData(AudioObjectID(kAudioObjectSystemObject), &address, 0, nil, &size, &device) == noErr,
        device != kAudioObjectUnknown
    else { return "@DEFAULT_MONITOR@" }
    address.mSelector = kAudioDevicePropertyDeviceUID
    var uid: Unmanaged<CFString>?
    size = UInt32(MemoryLayout<Unmanaged<CFString>?>.size)
    guard AudioObjectGetPropertyData(device, &address, 0, nil, &size, &uid) == noErr, let uid else { return "@DEFAULT_MONITOR@" }
    return (uid.takeRetainedValue() as String) + ".monitor"
}
