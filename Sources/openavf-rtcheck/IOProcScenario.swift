// ioproc: a device's IOProcs on their own real-time I/O thread, watched instead of the server thread: a second IOProc mixed in and taken out, the volume changed meanwhile.
import CoreAudio
import Foundation
import Synchronization

/// The thread an IOProc last ran on, and its cycles (the IOProc stores both).
final class IOThreadWatch: @unchecked Sendable {
    let thread = Atomic<UInt>(0)
    let cycles = Atomic<Int>(0)
    var phase = 0.0

    /// An IOProc that writes a quiet tone and notes its thread.
    static let tone: AudioDeviceIOProc = { _, _, _, _, output, _, data in
        Unmanaged<IOThreadWatch>.fromOpaque(data!)._withUnsafeGuaranteedRef { watch in
            watch.thread.store(UInt(pthread_self()), ordering: .relaxed)
            watch.cycles.add(1, ordering: .relaxed)
            let buffers = UnsafeMutableAudioBufferListPointer(output)
            guard buffers.count == 1, let samples = buffers[0].mData?.assumingMemoryBound(to: Float.self) else { return }
            let count = Int(buffers[0].mDataByteSize) / 4
            for n in 0..<count {
                samples[n] = Float(0.1 * sin(watch.phase))
                watch.phase += 2 * Double.pi * 440 / 48000 / 2
            }
        }
        return noErr
    }

    func waitForCycles(_ n: Int) throws {
        let target = cycles.load(ordering: .relaxed) + n
        try wait("\(n) I/O cycles") { cycles.load(ordering: .relaxed) >= target }
    }
}

/// The I/O thread of a device's IOProcs is a real-time thread of its own: watched instead of the
/// server thread.
@MainActor let ioProcScenario = Scenario(name: "ioproc") { _, _, _ in
    var address = AudioObjectPropertyAddress(mSelector: kAudioHardwarePropertyDefaultOutputDevice, mScope: kAudioObjectPropertyScopeGlobal, mElement: 0)
    var device = kAudioObjectUnknown
    var size = UInt32(4)
    try check(AudioObjectGetPropertyData(AudioObjectID(kAudioObjectSystemObject), &address, 0, nil, &size, &device), "the default output")
    let first = IOThreadWatch(), second = IOThreadWatch()
    var a: AudioDeviceIOProcID?, b: AudioDeviceIOProcID?
    try check(AudioDeviceCreateIOProcID(device, IOThreadWatch.tone, Unmanaged.passUnretained(first).toOpaque(), &a), "AudioDeviceCreateIOProcID")
    try check(AudioDeviceCreateIOProcID(device, IOThreadWatch.tone, Unmanaged.passUnretained(second).toOpaque(), &b), "AudioDeviceCreateIOProcID")
    defer {
        AudioDeviceDestroyIOProcID(device, a!)
        AudioDeviceDestroyIOProcID(device, b!)
    }
    try check(AudioDeviceStart(device, a), "AudioDeviceStart")
    try first.waitForCycles(5)
    return try watching(first.thread.load(ordering: .relaxed)) {
        try first.waitForCycles(50)
        // A second IOProc mixed in and taken out, the device's volume changed meanwhile.
        try check(AudioDeviceStart(device, b), "AudioDeviceStart (second)")
        try second.waitForCycles(50)
        var volume = AudioObjectPropertyAddress(mSelector: kAudioDevicePropertyVolumeScalar, mScope: kAudioObjectPropertyScopeOutput, mElement: 0)
        var level: Float32 = 0.8
        try check(AudioObjectSetPropertyData(device, &volume, 0, nil, 4, &level), "the volume")
        try check(AudioDeviceStop(device, b), "AudioDeviceStop (second)")
        try first.waitForCycles(50)
        level = 1
        try check(AudioObjectSetPropertyData(device, &volume, 0, nil, 4, &level), "the volume")
        var now = AudioTimeStamp()
        try check(AudioDeviceGetCurrentTime(device, &now), "AudioDeviceGetCurrentTime")
        try first.waitForCycles(20)
        try check(AudioDeviceStop(device, a), "AudioDeviceStop")
    }
}
