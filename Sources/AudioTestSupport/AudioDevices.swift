public import AudioToolbox

/// The private server's devices as CoreAudio sees them, for tests and the benchmark.
public enum AudioDevices {
    /// The device whose UID (the server's name for it) is `uid`; nil where there is none.
    public static func id(uid: String) -> AudioObjectID? {
        var address = AudioObjectPropertyAddress(
            mSelector: kAudioHardwarePropertyTranslateUIDToDevice, mScope: kAudioObjectPropertyScopeGlobal, mElement: kAudioObjectPropertyElementMain)
        var id = kAudioObjectUnknown
        var size = UInt32(MemoryLayout<AudioObjectID>.size)
        let name: CFString = uid as CFString
        let status = withUnsafePointer(to: name) {
            AudioObjectGetPropertyData(AudioObjectID(kAudioObjectSystemObject), &address, UInt32(MemoryLayout<CFString>.size), $0, &size, &id)
        }
        return status == noErr && id != kAudioObjectUnknown ? id : nil
    }

    /// Makes `device` the default output (`kAudioHardwarePropertyDefaultOutputDevice`), in process.
    @discardableResult
    public static func setDefaultOutput(_ device: AudioObjectID) -> OSStatus {
        var address = AudioObjectPropertyAddress(
            mSelector: kAudioHardwarePropertyDefaultOutputDevice, mScope: kAudioObjectPropertyScopeGlobal, mElement: kAudioObjectPropertyElementMain)
        var id = device
        return AudioObjectSetPropertyData(AudioObjectID(kAudioObjectSystemObject), &address, 0, nil, UInt32(MemoryLayout<AudioObjectID>.size), &id)
    }
}
