import AudioHAL
import Foundation

/// A device of the model: a sink (output scope) or source (input scope) of the server, and the
/// one stream it owns.
struct DeviceEntry {
    let id: AudioObjectID
    let streamID: AudioObjectID
    let isOutput: Bool
    var info: HALDeviceInfo
    var scope: AudioObjectPropertyScope { isOutput ? kAudioObjectPropertyScopeOutput : kAudioObjectPropertyScopeInput }
}

/// The server's devices and defaults at one moment, with their object IDs.
struct HardwareSnapshot {
    var devices: [DeviceEntry] = []
    var defaultOutput: AudioObjectID = kAudioObjectUnknown
    var defaultInput: AudioObjectID = kAudioObjectUnknown

    func device(_ id: AudioObjectID) -> DeviceEntry? { devices.first { $0.id == id } }
    func device(stream id: AudioObjectID) -> DeviceEntry? { devices.first { $0.streamID == id } }
}

/// The object model of `import CoreAudio` over the process's audio environment (AudioHAL's
/// `AudioSystem.current`): the ID table, a snapshot of the server's devices kept current by the
/// notification thread (``HardwareNotifier``), and per-process settings (each device's I/O buffer
/// size). Thread-safe.
final class Hardware: Sendable {
    static let shared = Hardware()
    static let systemObject = AudioObjectID(kAudioObjectSystemObject)
    /// Apple's default I/O buffer: 512 frames.
    static let defaultBufferFrames: UInt32 = 512

    private struct State {
        /// Object IDs by device key (`o:` or `i:` and the server name): device, then stream.
        var ids: [String: (AudioObjectID, AudioObjectID)] = [:]
        var next: AudioObjectID = 2
        var snapshot = HardwareSnapshot()
        /// The backend the snapshot describes; a snapshot is refreshed when it is another's or
        /// when it is stale (a server event, or a change made here).
        var backend: (any AudioBackend)?
        var stale = true
        var bufferFrames: [AudioObjectID: UInt32] = [:]
    }
    private let state = Mutex(State())

    /// The backend of the process's audio environment, connecting on first use.
    func backend() throws(PropertyError) -> any AudioBackend {
        do { return try AudioSystem.current.backend() } catch { throw .unspecified }
    }

    /// Marks the snapshot as out of date: the next read asks the server.
    func invalidate() { state.withLock { $0.stale = true } }

    /// The devices as the server has them now (as of its last event).
    func snapshot() throws(PropertyError) -> HardwareSnapshot {
        HardwareNotifier.shared.start()
        let backend = try backend()
        return state.withLock { s in
            if s.stale || s.backend !== backend {
                let list = backend.deviceList()
                s.backend = backend
                s.stale = false
                s.snapshot = Self.build(list, ids: &s.ids, next: &s.next)
            }
            return s.snapshot
        }
    }

    private static func build(_ list: HALDeviceList, ids: inout [String: (AudioObjectID, AudioObjectID)], next: inout AudioObjectID) -> HardwareSnapshot {
        var snapshot = HardwareSnapshot()
        var kept: [String: (AudioObjectID, AudioObjectID)] = [:]
        for (isOutput, devices) in [(true, list.outputs), (false, list.inputs)] {
            for info in devices {
                let key = (isOutput ? "o:" : "i:") + info.name
                let pair: (AudioObjectID, AudioObjectID)
                if let known = ids[key] {
                    pair = known
                } else {
                    pair = (next, next + 1)
                    next += 2
                }
                kept[key] = pair
                snapshot.devices.append(DeviceEntry(id: pair.0, streamID: pair.1, isOutput: isOutput, info: info))
                if isOutput && info.name == list.defaultOutput { snapshot.defaultOutput = pair.0 }
                if !isOutput && info.name == list.defaultInput { snapshot.defaultInput = pair.0 }
            }
        }
        ids = kept
        return snapshot
    }

    /// The I/O buffer size this process uses on a device (`kAudioDevicePropertyBufferFrameSize`).
    func bufferFrames(_ device: AudioObjectID) -> UInt32 { state.withLock { $0.bufferFrames[device] ?? Self.defaultBufferFrames } }
    func setBufferFrames(_ frames: UInt32, device: AudioObjectID) { state.withLock { $0.bufferFrames[device] = frames } }

    /// The smallest and largest I/O buffer a device takes, in frames: 2 ms to 1 s, what the device
    /// layer asks of the server.
    static func bufferFrameRange(_ rate: Double) -> ClosedRange<UInt32> { UInt32((rate * 0.002).rounded(.up))...UInt32(rate) }
}
