import AudioTestSupport
import CoreAudio
import Foundation
import XCTest

/// `import CoreAudio` on the private server: devices as `pactl` lists them, defaults and volumes
/// that reach the server, listeners that hear `pactl`'s changes, IOProcs that play and record.
final class DeviceTests: XCTestCase {
    private let system = AudioObjectID(kAudioObjectSystemObject)

    private func address(_ selector: AudioObjectPropertySelector, _ scope: AudioObjectPropertyScope = kAudioObjectPropertyScopeGlobal,
                         _ element: AudioObjectPropertyElement = kAudioObjectPropertyElementMain) -> AudioObjectPropertyAddress {
        AudioObjectPropertyAddress(mSelector: selector, mScope: scope, mElement: element)
    }

    private func get<T>(_ object: AudioObjectID, _ selector: AudioObjectPropertySelector, _ scope: AudioObjectPropertyScope = kAudioObjectPropertyScopeGlobal,
                        element: AudioObjectPropertyElement = kAudioObjectPropertyElementMain, initial: T) throws -> T {
        var a = address(selector, scope, element)
        var value = initial
        var size = UInt32(MemoryLayout<T>.size)
        let status = withUnsafeMutablePointer(to: &value) { AudioObjectGetPropertyData(object, &a, 0, nil, &size, $0) }
        guard status == noErr else { throw NSError(domain: "OSStatus", code: Int(status)) }
        return value
    }

    private func string(_ object: AudioObjectID, _ selector: AudioObjectPropertySelector) throws -> String {
        var a = address(selector)
        var value: Unmanaged<CFString>?
        var size = UInt32(MemoryLayout<Unmanaged<CFString>?>.size)
        let status = AudioObjectGetPropertyData(object, &a, 0, nil, &size, &value)
        guard status == noErr, let value else { throw NSError(domain: "OSStatus", code: Int(status)) }
        return value.takeRetainedValue() as String
    }

    private func devices() throws -> [AudioObjectID] {
        var a = address(kAudioHardwarePropertyDevices)
        var size: UInt32 = 0
        XCTAssertEqual(AudioObjectGetPropertyDataSize(system, &a, 0, nil, &size), noErr)
        var ids = [AudioObjectID](repeating: 0, count: Int(size) / 4)
        XCTAssertEqual(AudioObjectGetPropertyData(system, &a, 0, nil, &size, &ids), noErr)
        return ids
    }

    private func device(uid: String) throws -> AudioObjectID {
        var a = address(kAudioHardwarePropertyTranslateUIDToDevice)
        let name: CFString = uid as CFString
        var id = kAudioObjectUnknown
        var size = UInt32(MemoryLayout<AudioObjectID>.size)
        let status = withUnsafePointer(to: name) { AudioObjectGetPropertyData(system, &a, UInt32(MemoryLayout<CFString>.size), $0, &size, &id) }
        XCTAssertEqual(status, noErr)
        XCTAssertNotEqual(id, kAudioObjectUnknown, "no device \(uid)")
        return id
    }

    private func channels(_ id: AudioObjectID, _ scope: AudioObjectPropertyScope) throws -> Int {
        var a = address(kAudioDevicePropertyStreamConfiguration, scope)
        var size: UInt32 = 0
        XCTAssertEqual(AudioObjectGetPropertyDataSize(id, &a, 0, nil, &size), noErr)
        let list = UnsafeMutableRawPointer.allocate(byteCount: Int(size), alignment: 8)
        defer { list.deallocate() }
        XCTAssertEqual(AudioObjectGetPropertyData(id, &a, 0, nil, &size, list), noErr)
        return UnsafeMutableAudioBufferListPointer(list.assumingMemoryBound(to: AudioBufferList.self)).reduce(0) { $0 + Int($1.mNumberChannels) }
    }

    /// `pactl list short sinks|sources`: name, channels and rate of each.
    private func pactlDevices(_ server: PrivatePulseServer, _ kind: String) throws -> [String: (channels: Int, rate: Double)] {
        var result: [String: (Int, Double)] = [:]
        for line in try server.pactl(["list", "short", kind]).split(separator: "\n") {
            let fields = line.split(separator: "\t")
            guard fields.count >= 4 else { continue }
            // sample spec: "float32le 2ch 48000Hz"
            let spec = fields[3].split(separator: " ")
            let channels = Int(spec.first { $0.hasSuffix("ch") }!.dropLast(2))!
            let rate = Double(spec.first { $0.hasSuffix("Hz") }!.dropLast(2))!
            result[String(fields[1])] = (channels, rate)
        }
        return result
    }

    func testDeviceListMatchesTheServer() throws {
        let server = try TestSound.server()
        let sinks = try pactlDevices(server, "sinks"), sources = try pactlDevices(server, "sources")
        var seenSinks: [String: (Int, Double)] = [:], seenSources: [String: (Int, Double)] = [:]
        for id in try devices() {
            let uid = try string(id, kAudioDevicePropertyDeviceUID)
            let rate: Float64 = try get(id, kAudioDevicePropertyNominalSampleRate, initial: 0)
            let out = try channels(id, kAudioObjectPropertyScopeOutput), input = try channels(id, kAudioObjectPropertyScopeInput)
            XCTAssertTrue(out == 0 || input == 0, "\(uid) has one direction")
            if out > 0 { seenSinks[uid] = (out, rate) } else { seenSources[uid] = (input, rate) }
            XCTAssertEqual(try get(id, kAudioObjectPropertyClass, initial: UInt32(0)), kAudioDeviceClassID)
            XCTAssertEqual(try device(uid: uid), id, "the UID translates back")
        }
        XCTAssertEqual(Set(seenSinks.keys), Set(sinks.keys))
        XCTAssertEqual(Set(seenSources.keys), Set(sources.keys))
        for (name, spec) in sinks { XCTAssertTrue(seenSinks[name].map { $0 == spec } ?? false, "\(name): \(String(describing: seenSinks[name])) against pactl's \(spec)") }
        for (name, spec) in sources { XCTAssertTrue(seenSources[name].map { $0 == spec } ?? false, "\(name): \(String(describing: seenSources[name])) against pactl's \(spec)") }
        let speaker = try device(uid: "speaker")
        XCTAssertEqual(try string(speaker, kAudioObjectPropertyName), "Speaker")
        XCTAssertEqual(try get(speaker, kAudioDevicePropertyTransportType, initial: UInt32(0)), kAudioDeviceTransportTypeVirtual, "a null sink")
        XCTAssertEqual(try get(speaker, kAudioDevicePropertyDeviceIsAlive, initial: UInt32(0)), 1)
        // Its one stream, in the output scope, in the float format IOProcs see.
        let stream: AudioStreamID = try get(speaker, kAudioDevicePropertyStreams, kAudioObjectPropertyScopeOutput, initial: 0)
        XCTAssertEqual(try get(stream, kAudioStreamPropertyDirection, initial: UInt32(9)), 0)
        let format: AudioStreamBasicDescription = try get(stream, kAudioStreamPropertyVirtualFormat, initial: AudioStreamBasicDescription())
        XCTAssertEqual(format.mChannelsPerFrame, 2)
        XCTAssertEqual(format.mSampleRate, 48000)
        XCTAssertEqual(format.mFormatFlags, kAudioFormatFlagsNativeFloatPacked)
        // What the device does not have is refused with Apple's errors.
        var a = address(kAudioDevicePropertyVolumeScalar, kAudioObjectPropertyScopeInput)
        XCTAssertFalse(AudioObjectHasProperty(speaker, &a), "an output has no input volume")
        var value: Float32 = 0
        var size: UInt32 = 4
        XCTAssertEqual(AudioObjectGetPropertyData(speaker, &a, 0, nil, &size, &value), kAudioHardwareUnknownPropertyError)
        XCTAssertEqual(AudioObjectGetPropertyData(9999, &a, 0, nil, &size, &value), kAudioHardwareBadObjectError)
        var rate = address(kAudioDevicePropertyNominalSampleRate)
        var other: Float64 = 44100
        XCTAssertEqual(AudioObjectSetPropertyData(speaker, &rate, 0, nil, 8, &other), kAudioDeviceUnsupportedFormatError, "the server's rate is its own")
        var tiny: UInt16 = 0
        size = 2
        XCTAssertEqual(AudioObjectGetPropertyData(speaker, &rate, 0, nil, &size, &tiny), kAudioHardwareBadPropertySizeError)
    }

    func testDefaultDeviceRoundTripsThroughTheServer() throws {
        let server = try TestSound.server()
        let speaker = try device(uid: "speaker"), micfeed = try device(uid: "micfeed")
        defer { _ = try? server.pactl(["set-default-sink", "speaker"]) }
        XCTAssertEqual(try get(system, kAudioHardwarePropertyDefaultOutputDevice, initial: kAudioObjectUnknown), speaker)
        var a = address(kAudioHardwarePropertyDefaultOutputDevice)
        var id = micfeed
        XCTAssertEqual(AudioObjectSetPropertyData(system, &a, 0, nil, 4, &id), noErr)
        XCTAssertEqual(try server.pactl(["get-default-sink"]).trimmingCharacters(in: .whitespacesAndNewlines), "micfeed")
        XCTAssertEqual(try get(system, kAudioHardwarePropertyDefaultOutputDevice, initial: kAudioObjectUnknown), micfeed)
        _ = try server.pactl(["set-default-sink", "speaker"])
        XCTAssertTrue(waitUntil(timeout: 2) { (try? self.get(self.system, kAudioHardwarePropertyDefaultOutputDevice, initial: kAudioObjectUnknown)) == speaker })
        // An input is no default output.
        var input = try device(uid: "micfeed.monitor")
        XCTAssertNotEqual(AudioObjectSetPropertyData(system, &a, 0, nil, 4, &input), noErr)
        XCTAssertEqual(try get(system, kAudioHardwarePropertyDefaultInputDevice, initial: kAudioObjectUnknown), input)
    }

    func testVolumeAndMuteReachTheServer() throws {
        let server = try TestSound.server()
        let speaker = try device(uid: "speaker")
        defer {
            _ = try? server.pactl(["set-sink-volume", "speaker", "100%"])
            _ = try? server.pactl(["set-sink-mute", "speaker", "0"])
        }
        var settable: DarwinBoolean = false
        var a = address(kAudioDevicePropertyVolumeScalar, kAudioObjectPropertyScopeOutput)
        XCTAssertEqual(AudioObjectIsPropertySettable(speaker, &a, &settable), noErr)
        XCTAssertTrue(settable.boolValue)
        var half: Float32 = 0.5
        XCTAssertEqual(AudioObjectSetPropertyData(speaker, &a, 0, nil, 4, &half), noErr)
        let percent = { () -> [Double] in
            let text = (try? server.pactl(["get-sink-volume", "speaker"])) ?? ""
            return text.split(separator: " ").filter { $0.hasSuffix("%") }.compactMap { Double($0.dropLast()) }
        }
        XCTAssertEqual(percent().count, 2)
        for p in percent() { XCTAssertEqual(p / 100, 0.5, accuracy: 0.01) }
        XCTAssertEqual(try get(speaker, kAudioDevicePropertyVolumeScalar, kAudioObjectPropertyScopeOutput, initial: Float32(0)), 0.5, accuracy: 0.01)
        // One channel: element 2 is the right.
        var right = address(kAudioDevicePropertyVolumeScalar, kAudioObjectPropertyScopeOutput, 2)
        var quarter: Float32 = 0.25
        XCTAssertEqual(AudioObjectSetPropertyData(speaker, &right, 0, nil, 4, &quarter), noErr)
        XCTAssertEqual(percent().map { ($0 / 100 * 100).rounded() / 100 }, [0.5, 0.25])
        // Decibels on PulseAudio's cubic scale: 50 % is −18.06 dB.
        let db: Float32 = try get(speaker, kAudioDevicePropertyVolumeDecibels, kAudioObjectPropertyScopeOutput, element: 1, initial: 0)
        XCTAssertEqual(Double(db), 60 * log10(0.5), accuracy: 0.2)
        var mute = address(kAudioDevicePropertyMute, kAudioObjectPropertyScopeOutput)
        var on: UInt32 = 1
        XCTAssertEqual(AudioObjectSetPropertyData(speaker, &mute, 0, nil, 4, &on), noErr)
        XCTAssertTrue(try server.pactl(["get-sink-mute", "speaker"]).contains("yes"))
        XCTAssertEqual(try get(speaker, kAudioDevicePropertyMute, kAudioObjectPropertyScopeOutput, initial: UInt32(0)), 1)
    }

    /// A listener proc's record: when it was called and with which addresses.
    private final class Heard: @unchecked Sendable {
        let lock = NSLock()
        var calls: [(time: Date, addresses: [AudioObjectPropertyAddress])] = []
        func first(_ selector: AudioObjectPropertySelector) -> Date? {
            lock.lock()
            defer { lock.unlock() }
            return calls.first { $0.addresses.contains { $0.mSelector == selector } }?.time
        }
    }

    func testListenersHearTheServersChanges() throws {
        let server = try TestSound.server()
        let speaker = try device(uid: "speaker")
        defer {
            _ = try? server.pactl(["set-sink-volume", "speaker", "100%"])
            _ = try? server.pactl(["set-default-sink", "speaker"])
        }
        let heard = Heard()
        let proc: AudioObjectPropertyListenerProc = { _, count, addresses, data in
            let heard = Unmanaged<Heard>.fromOpaque(data!).takeUnretainedValue()
            heard.lock.lock()
            heard.calls.append((Date(), Array(UnsafeBufferPointer(start: addresses, count: Int(count)))))
            heard.lock.unlock()
            return noErr
        }
        let data = Unmanaged.passUnretained(heard).toOpaque()
        var volume = address(kAudioDevicePropertyVolumeScalar, kAudioObjectPropertyScopeOutput)
        XCTAssertEqual(AudioObjectAddPropertyListener(speaker, &volume, proc, data), noErr)
        defer { AudioObjectRemovePropertyListener(speaker, &volume, proc, data) }
        // Blocks on a queue: the default output and the device list.
        let blockHeard = Heard()
        let block: AudioObjectPropertyListenerBlock = { count, addresses in
            blockHeard.lock.lock()
            blockHeard.calls.append((Date(), Array(UnsafeBufferPointer(start: addresses, count: Int(count)))))
            blockHeard.lock.unlock()
        }
        var wildcard = address(kAudioObjectPropertySelectorWildcard, kAudioObjectPropertyScopeWildcard, kAudioObjectPropertyElementWildcard)
        let queue = DispatchQueue(label: "listener test")
        XCTAssertEqual(AudioObjectAddPropertyListenerBlock(system, &wildcard, queue, block), noErr)
        defer { XCTAssertEqual(AudioObjectRemovePropertyListenerBlock(system, &wildcard, queue, block), noErr) }

        _ = try server.pactl(["set-sink-volume", "speaker", "70%"])
        var changed = Date()
        XCTAssertTrue(waitUntil(timeout: 2) { heard.first(kAudioDevicePropertyVolumeScalar) != nil })
        XCTAssertLessThan(try XCTUnwrap(heard.first(kAudioDevicePropertyVolumeScalar)).timeIntervalSince(changed), 0.2)
        XCTAssertEqual(try get(speaker, kAudioDevicePropertyVolumeScalar, kAudioObjectPropertyScopeOutput, initial: Float32(0)), 0.7, accuracy: 0.01)

        _ = try server.pactl(["set-default-sink", "micfeed"])
        changed = Date()
        XCTAssertTrue(waitUntil(timeout: 2) { blockHeard.first(kAudioHardwarePropertyDefaultOutputDevice) != nil })
        XCTAssertLessThan(try XCTUnwrap(blockHeard.first(kAudioHardwarePropertyDefaultOutputDevice)).timeIntervalSince(changed), 0.2)

        let module = try server.pactl(["load-module", "module-null-sink", "sink_name=plugged", "sink_properties=device.description=Plugged"])
            .trimmingCharacters(in: .whitespacesAndNewlines)
        changed = Date()
        XCTAssertTrue(waitUntil(timeout: 2) { blockHeard.first(kAudioHardwarePropertyDevices) != nil })
        XCTAssertLessThan(try XCTUnwrap(blockHeard.first(kAudioHardwarePropertyDevices)).timeIntervalSince(changed), 0.2)
        let plugged = try device(uid: "plugged")
        let gone = Heard()
        var alive = address(kAudioDevicePropertyDeviceIsAlive)
        XCTAssertEqual(AudioObjectAddPropertyListener(plugged, &alive, proc, Unmanaged.passUnretained(gone).toOpaque()), noErr)
        _ = try server.pactl(["unload-module", module])
        XCTAssertTrue(waitUntil(timeout: 2) { gone.first(kAudioDevicePropertyDeviceIsAlive) != nil }, "a device that goes says so")
        XCTAssertFalse(try devices().contains(plugged))
        XCTAssertEqual(AudioObjectRemovePropertyListener(plugged, &alive, proc, Unmanaged.passUnretained(gone).toOpaque()), noErr)
    }
}
