import AudioHAL
import AudioTestSupport
import AudioToolbox
@testable import CoreAudio
import Foundation
import Synchronization
import XCTest

/// The device API and system sounds on the virtual backend, deterministically: what the backend
/// has is what the API shows, changes go to it, its events reach listeners, and IOProcs and system
/// sounds render on its clock. (Part of the ThreadSanitizer subset of Scripts/test.)
final class VirtualHardwareTests: XCTestCase {
    private var virtual: VirtualBackend!
    private var environment: VirtualAudioSystem!

    override func setUp() {
        environment = VirtualAudioSystem()
        virtual = environment.backend
        // The notification thread follows the environment the test set.
        HardwareNotifier.shared.start()
        XCTAssertTrue(waitUntil(timeout: 2) { HardwareNotifier.shared.isFollowing(self.virtual) })
    }

    override func tearDown() {
        environment.restore()
        virtual = nil
    }

    private func uid(_ id: AudioObjectID) -> String? {
        var a = AudioObjectPropertyAddress(mSelector: kAudioDevicePropertyDeviceUID, mScope: kAudioObjectPropertyScopeGlobal, mElement: 0)
        var value: Unmanaged<CFString>?
        var size = UInt32(8)
        guard AudioObjectGetPropertyData(id, &a, 0, nil, &size, &value) == noErr else { return nil }
        return value?.takeRetainedValue() as String?
    }

    private func defaultOutput() -> AudioObjectID {
        var a = AudioObjectPropertyAddress(mSelector: kAudioHardwarePropertyDefaultOutputDevice, mScope: kAudioObjectPropertyScopeGlobal, mElement: 0)
        var id = kAudioObjectUnknown
        var size = UInt32(4)
        XCTAssertEqual(AudioObjectGetPropertyData(AudioObjectID(kAudioObjectSystemObject), &a, 0, nil, &size, &id), noErr)
        return id
    }

    func testDevicesVolumesAndListeners() throws {
        let output = defaultOutput()
        XCTAssertEqual(uid(output), "virtual")
        var volume = AudioObjectPropertyAddress(mSelector: kAudioDevicePropertyVolumeScalar, mScope: kAudioObjectPropertyScopeOutput, mElement: 0)
        var level: Float32 = 0.25
        XCTAssertEqual(AudioObjectSetPropertyData(output, &volume, 0, nil, 4, &level), noErr)
        XCTAssertEqual(virtual.deviceList().outputs.first { $0.name == "virtual" }?.volumes, [0.25, 0.25])

        let heard = Mutex<[AudioObjectPropertySelector]>([])
        let block: AudioObjectPropertyListenerBlock = { count, addresses in
            let selectors = UnsafeBufferPointer(start: addresses, count: Int(count)).map(\.mSelector)
            heard.withLock { $0 += selectors }
        }
        var devices = AudioObjectPropertyAddress(mSelector: kAudioHardwarePropertyDevices, mScope: kAudioObjectPropertyScopeGlobal, mElement: 0)
        var defaultAddress = AudioObjectPropertyAddress(
            mSelector: kAudioHardwarePropertyDefaultOutputDevice, mScope: kAudioObjectPropertyScopeGlobal, mElement: 0)
        let system = AudioObjectID(kAudioObjectSystemObject)
        XCTAssertEqual(AudioObjectAddPropertyListenerBlock(system, &devices, nil, block), noErr)
        XCTAssertEqual(AudioObjectAddPropertyListenerBlock(system, &defaultAddress, nil, block), noErr)
        defer {
            AudioObjectRemovePropertyListenerBlock(system, &devices, nil, block)
            AudioObjectRemovePropertyListenerBlock(system, &defaultAddress, nil, block)
        }
        virtual.plug(HALDeviceInfo(name: "usb.headset", description: "Headset", sampleRate: 44100, channels: 2, kind: .usb))
        XCTAssertTrue(waitUntil(timeout: 2) {
            heard.withLock { $0.contains(kAudioHardwarePropertyDevices) && $0.contains(kAudioHardwarePropertyDefaultOutputDevice) }
        })
        let headset = defaultOutput()
        XCTAssertEqual(uid(headset), "usb.headset")
        var transport = AudioObjectPropertyAddress(mSelector: kAudioDevicePropertyTransportType, mScope: kAudioObjectPropertyScopeGlobal, mElement: 0)
        var kind: UInt32 = 0
        var size = UInt32(4)
        XCTAssertEqual(AudioObjectGetPropertyData(headset, &transport, 0, nil, &size, &kind), noErr)
        XCTAssertEqual(kind, kAudioDeviceTransportTypeUSB)
        // Choosing the default through the API reaches the backend.
        var back = output
        XCTAssertEqual(AudioObjectSetPropertyData(system, &defaultAddress, 0, nil, 4, &back), noErr)
        XCTAssertEqual(virtual.deviceList().defaultOutput, "virtual")
    }

    func testAListenerBlockIsRemovedByTheSameClosure() {
        let block: AudioObjectPropertyListenerBlock = { _, _ in }
        let other: AudioObjectPropertyListenerBlock = { _, _ in }
        var address = AudioObjectPropertyAddress(mSelector: kAudioHardwarePropertyDevices, mScope: kAudioObjectPropertyScopeGlobal, mElement: 0)
        let system = AudioObjectID(kAudioObjectSystemObject)
        XCTAssertEqual(AudioObjectAddPropertyListenerBlock(system, &address, nil, block), noErr)
        // Heap traffic between adding and removing, as an app has.
        let noise = (0..<1000).map { _ in NSObject() }
        XCTAssertEqual(AudioObjectRemovePropertyListenerBlock(system, &address, nil, other), kAudioHardwareUnknownPropertyError, "another closure")
        XCTAssertEqual(AudioObjectRemovePropertyListenerBlock(system, &address, nil, block), noErr)
        XCTAssertEqual(AudioObjectRemovePropertyListenerBlock(system, &address, nil, block), kAudioHardwareUnknownPropertyError, "removed once")
        withExtendedLifetime(noise) {}
    }

    func testIOProcRendersOnTheClock() throws {
        let output = defaultOutput()
        let proc: AudioDeviceIOProc = { _, _, _, time, output, outputTime, _ in
            let buffers = UnsafeMutableAudioBufferListPointer(output)
            let samples = buffers[0].mData!.assumingMemoryBound(to: Float.self)
            let channels = Int(buffers[0].mNumberChannels)
            let frames = Int(buffers[0].mDataByteSize) / 4 / channels
            // Each frame carries its own sample time, so that the order and the stamps show.
            for f in 0..<frames {
                for c in 0..<channels { samples[f * channels + c] = Float(outputTime.pointee.mSampleTime) + Float(f) }
            }
            return noErr
        }
        var id: AudioDeviceIOProcID?
        XCTAssertEqual(AudioDeviceCreateIOProcID(output, proc, nil, &id), noErr)
        XCTAssertEqual(AudioDeviceStart(output, id), noErr)
        let rendered = virtual.advance(frames: 1000)
        XCTAssertEqual(AudioDeviceStop(output, id), noErr)
        XCTAssertEqual(AudioDeviceDestroyIOProcID(output, id!), noErr)
        XCTAssertEqual(rendered.count, 1, "the IOProc's stream")
        let samples = try XCTUnwrap(rendered.values.first)
        XCTAssertEqual(samples.count, 2000)
        // 1000 frames: two whole 512-frame cycles, the last one's rest held for the next request.
        XCTAssertEqual(stride(from: 0, to: 2000, by: 2).map { samples[$0] }, (0..<1000).map(Float.init))
    }

    func testSystemSoundPlaysOnTheClock() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("virtual-sound-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let url = dir.appendingPathComponent("ding.wav")
        _ = try runTool("sox", ["-n", "-r", "48000", "-c", "1", "-b", "16", url.path, "synth", "0.1", "sine", "1000", "vol", "0.5"], in: dir)
        var sound: SystemSoundID = 0
        XCTAssertEqual(AudioServicesCreateSystemSoundID(url as CFURL, &sound), noErr)
        defer { AudioServicesDisposeSystemSoundID(sound) }
        let done = Mutex(0)
        AudioServicesPlaySystemSoundWithCompletion(sound) { done.withLock { $0 += 1 } }
        let first = virtual.advance(frames: 2400)
        XCTAssertEqual(done.withLock { $0 }, 0, "half-way")
        let second = virtual.advance(frames: 2400)
        let heard = (first.values.first ?? []) + (second.values.first ?? [])
        XCTAssertEqual(heard.count, 4800)
        XCTAssertEqual(SignalAnalysis.frequency(heard[100..<4700], sampleRate: 48000), 1000, accuracy: 1)
        XCTAssertTrue(waitUntil(timeout: 2) { done.withLock { $0 } == 1 }, "one completion at the end")
        XCTAssertTrue(virtual.advance(frames: 480).isEmpty, "the sound's stream is gone")
    }
}
