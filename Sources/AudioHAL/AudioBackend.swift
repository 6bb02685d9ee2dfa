/// The sample layout every HAL stream carries: interleaved native-endian 32-bit float.
///
/// The server (or the virtual backend's mixer) converts and resamples to the device's own format,
/// so the layers above never see it.
package struct HALStreamFormat: Sendable, Equatable {
    package var sampleRate: Double
    package var channels: Int
    package init(sampleRate: Double, channels: Int) {
        self.sampleRate = sampleRate
        self.channels = channels
    }
}

/// What a stream asks of the server.
package struct HALStreamRequest: Sendable {
    package var format: HALStreamFormat
    /// The buffer duration asked for, in seconds, clamped to 2 ms … 1 s.
    package var bufferDuration: Double
    /// The stream's name as the server shows it.
    package var name: String
    /// Stream properties such as `media.role`.
    package var properties: [String: String]
    /// Start without consuming data until ``HALStream/setCorked(_:)`` says otherwise.
    package var startCorked: Bool
    /// Report the server's cork and uncork requests for this stream through the backend's
    /// ``HALEvents`` (the audio session's own stream).
    package var reportsPolicyEvents = false
    /// `false` for a stream that only stands for something to the server and never carries
    /// sound a listener hears (the session's policy stream, the trigger that ducks others): it
    /// stays off the real-time thread.
    package var carriesSound = true
    /// The device's server name, or `nil` for the default device.
    package var device: String?

    package init(format: HALStreamFormat, bufferDuration: Double, name: String, properties: [String: String] = [:], startCorked: Bool = true, device: String? = nil) {
        self.device = device
        self.format = format
        self.bufferDuration = min(max(bufferDuration, 0.002), 1.0)
        self.name = name
        self.properties = properties
        self.startCorked = startCorked
    }
}

/// The time of the first frame of a render or capture call. (Public only because
/// ``HALStreamClient`` is open; AudioHAL is not a product.)
public struct HALRenderTime: Sendable {
    /// The frame's index on the stream's timeline (frames written or read since the stream opened).
    public var sampleTime: Int64
    /// When that frame is heard (output) or was captured (input), in host time (ns, CLOCK_MONOTONIC).
    public var hostTime: UInt64
    public init(sampleTime: Int64, hostTime: UInt64) {
        self.sampleTime = sampleTime
        self.hostTime = hostTime
    }
}

/// What a stream calls on the server thread: a playback stream's ``render(_:frames:time:)`` and
/// ``streamDidDrain()``, a capture stream's ``capture(_:frames:time:)``. Subclass it and override
/// what the stream needs.
///
/// Every method runs on the server thread and must not allocate, free, lock a contended lock, log,
/// or call user code. A class rather than a protocol: a stream calls it through an unretained
/// reference (`Unmanaged._withUnsafeGuaranteedRef`), which a class allows and an existential does
/// not, so the server thread does no reference counting on it. (Open only so that other modules
/// of the package can subclass it; AudioHAL is not a product.)
open class HALStreamClient: @unchecked Sendable {
    public init() {}

    /// Fills `frames` frames (silence where it has nothing) and returns how many the stream should
    /// play: fewer only when the source has ended, so that a drain can complete.
    open func render(_ output: UnsafeMutablePointer<Float>, frames: Int, time: HALRenderTime) -> Int { 0 }

    /// The stream drained after ``HALStream/drain()``: every frame written has been played.
    open func streamDidDrain() {}

    /// Takes `frames` captured frames.
    open func capture(_ input: UnsafePointer<Float>, frames: Int, time: HALRenderTime) {}
}

/// A playback stream's client (``HALStreamClient/render(_:frames:time:)``).
package typealias HALRenderSource = HALStreamClient
/// A capture stream's client (``HALStreamClient/capture(_:frames:time:)``).
package typealias HALCaptureSink = HALStreamClient

/// What kind of jack or transducer a device's active port is, as the server says
/// (PulseAudio's `pa_device_port_type_t`, the same numbers).
package enum HALPortType: Int, Sendable {
    case unknown = 0, aux, speaker, headphones, line, mic, headset, handset, earpiece, spdif, hdmi, tv, radio, video, usb,
        bluetooth, portable, handsfree, car, hifi, phone, network, analog
}

/// A device as the layers above see it.
package struct HALDeviceInfo: Sendable, Equatable {
    /// The server's name for it (`speaker`, `alsa_output.pci-…`).
    package var name: String
    package var description: String
    package var sampleRate: Double
    package var channels: Int
    /// The server's properties of the device (`device.form_factor`, `device.bus`, `device.api`…).
    package var properties: [String: String]
    /// The active port: its name and type, when the device has ports.
    package var portName: String?
    package var portType: HALPortType?
    package init(
        name: String, description: String, sampleRate: Double, channels: Int, properties: [String: String] = [:], portName: String? = nil,
        portType: HALPortType? = nil
    ) {
        self.name = name
        self.description = description
        self.sampleRate = sampleRate
        self.channels = channels
        self.properties = properties
        self.portName = portName
        self.portType = portType
    }
}

/// A failure of the device layer, with the server's own code and message.
package struct HALError: Error, CustomStringConvertible, Sendable {
    package enum Kind: Sendable { case noServer, streamFailed, deviceNotFound, notSupported }
    package var kind: Kind
    package var nativeCode: Int32
    package var message: String
    package init(_ kind: Kind, code: Int32 = 0, _ message: String) {
        self.kind = kind
        self.nativeCode = code
        self.message = message
    }
    package var description: String { message }
}

/// One open stream. Control calls come from any thread but the server thread.
package protocol HALStream: AnyObject, Sendable {
    var format: HALStreamFormat { get }
    /// The buffer duration the server granted, in seconds.
    var grantedBufferDuration: Double { get }
    /// The device the stream is connected to.
    var device: HALDeviceInfo { get }
    /// Playback underruns (or capture overruns) the server reported since the stream opened.
    var xrunCount: Int { get }
    /// The stream's current time: the frame being heard or captured now, and the host time now.
    func currentTime() -> HALRenderTime?
    /// Pauses (`true`) or resumes (`false`) consumption; data already written stays.
    func setCorked(_ corked: Bool)
    /// Drops everything written and not yet played.
    func flush()
    /// Asks the server for fresh timing (latency) information, off the server thread. Streams do
    /// not ask on their own, because each request allocates on the server thread.
    func refreshTiming()
    /// Asks to be told, via ``HALRenderSource/streamDidDrain()``, when written data has played out.
    func drain()
    /// Runs `body` while the server thread is guaranteed not to be inside this stream's callbacks.
    func withCallbacksBlocked<T>(_ body: () throws -> T) rethrows -> T
    /// Disconnects; no callback runs after this returns.
    func close()
}

/// A sound server or stand-in that opens streams: the operations table of the device layer.
package protocol AudioBackend: AnyObject, Sendable {
    /// A short name: `pulse`, `virtual`.
    var name: String { get }
    /// Device, policy and connection events of this backend.
    var events: HALEvents { get }
    /// The playback device named `name` (the server's name), or the default one for `nil`.
    func outputDevice(named name: String?) throws(HALError) -> HALDeviceInfo
    /// The capture device named `name` (the server's name), or the default one for `nil`.
    func inputDevice(named name: String?) throws(HALError) -> HALDeviceInfo
    func openOutput(_ request: HALStreamRequest, source: HALStreamClient) throws(HALError) -> any HALStream
    func openInput(_ request: HALStreamRequest, sink: HALStreamClient) throws(HALError) -> any HALStream
    /// Ducks other clients' music and video playback (and playback that names no role) while
    /// `on`, by the server's own policy, so that it ends when this process's connection does,
    /// however the process ends; `device` is where this process plays (`nil`: the default). This
    /// process's own streams are not ducked.
    func setDuckingOthers(_ on: Bool, device: String?) throws(HALError)
}
