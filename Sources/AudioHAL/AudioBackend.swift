import Foundation

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

/// Where one channel of a stream plays (Apple's channel labels, in the device layer's terms).
package enum HALChannelPosition: Sendable, Equatable {
    case mono, frontLeft, frontRight, frontCenter, lfe, rearLeft, rearRight, rearCenter
    case frontLeftOfCenter, frontRightOfCenter, sideLeft, sideRight, topCenter
    /// A channel with no position: the `n`th auxiliary (0…31).
    case aux(Int)
}

/// What a stream is for, in the terms of Apple's session: the server's policy (who interrupts,
/// ducks or corks whom, and which processing applies) follows it. Each backend maps it to its own
/// vocabulary (the PulseAudio backend to `media.role`).
package enum HALStreamPurpose: Sendable, Equatable, CaseIterable {
    /// Music and other media playback, interrupted by a call.
    case media
    /// A movie's sound track (or a video recording's).
    case movie
    /// Sound that mixes with others (ambient, game sound, `mixWithOthers`): never interrupted by
    /// other playback.
    case mixable
    /// A call: voice or video chat; it interrupts media playback.
    case voiceCommunication
    /// A short announcement or prompt.
    case announcement
    /// Recording or measuring without processing.
    case unprocessed
}

/// What a stream asks of the server.
package struct HALStreamRequest: Sendable {
    package var format: HALStreamFormat
    /// The buffer duration asked for, in seconds, clamped to 2 ms … 1 s.
    package var bufferDuration: Double
    /// For playback, the least the server asks for at once (PulseAudio's `minreq`), in seconds;
    /// `nil` for the server's choice. Fewer, larger requests are fewer wake-ups.
    package var requestDuration: Double?
    /// The stream's name as the server shows it.
    package var name: String
    /// What the stream is for; `nil` says nothing (the server's default treatment).
    package var purpose: HALStreamPurpose?
    /// Whether the stream wants the server's echo cancellation (voice and video chat).
    package var echoCancellation = false
    /// Marks an audio session's stream as non-mixable playback, so that other processes of this
    /// library see it in ``AudioBackend/otherPlaybackStreams()`` and are interrupted by it.
    package var exclusiveSession = false
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
    /// For playback: every frame plays at the time its place in the stream says, or not at all.
    /// A stream that runs dry goes on at the device's pace and drops what comes too late
    /// (PulseAudio's `prebuf` 0), instead of waiting for a full buffer again and playing the rest
    /// that much later. For a stream whose frames are lined up with something else by their
    /// count: a voice-processing unit's far end with its microphone (an underrun otherwise moved
    /// the echo behind the canceller's reference by the underrun's length, for the rest of the
    /// call). pipewire-pulse's playback streams run so always. Such a stream plays from the
    /// moment it is uncorked, and whatever of its first write comes after that is cut.
    package var keepsTimeline = false
    /// Run the stream's callbacks on a real-time thread of its own rather than the process's
    /// shared server thread, so that a callback that runs late delays no one else's stream: for
    /// streams whose client calls the user's code on that thread (a device's IOProcs).
    package var ownThread = false
    /// Where each channel plays, in order (an audio queue's channel layout); `nil` for the
    /// backend's default order. A list the backend cannot use (wrong count, a position twice)
    /// is ignored. The virtual backend keeps channels as they are.
    package var channelPositions: [HALChannelPosition]?
    /// Properties in the server's own words, for a backend's private streams (the PulseAudio
    /// backend's ducking trigger); they win over what ``purpose`` maps to.
    var serverProperties: [String: String] = [:]

    package init(
        format: HALStreamFormat, bufferDuration: Double, name: String, purpose: HALStreamPurpose? = nil, startCorked: Bool = true,
        device: String? = nil
    ) {
        self.device = device
        self.format = format
        self.bufferDuration = min(max(bufferDuration, 0.002), 1.0)
        self.name = name
        self.purpose = purpose
        self.startCorked = startCorked
    }
}

/// The time of the first frame of a render or capture call. (Public only because
/// ``HALStreamClient`` is open; AudioHAL is not a product.)
public struct HALRenderTime: Sendable {
    /// The frame's index on the stream's timeline (frames written or read since the stream opened).
    public var sampleTime: Int64
    /// When that frame is heard (output) or was captured (input), in host time (ns: CLOCK_MONOTONIC,
    /// or the virtual backend's clock while it is the environment).
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

/// What a device is to the person using it: the kind of jack, transducer or link. Backends work
/// it out in their own terms (the PulseAudio backend from the active port's type and the
/// device's form factor and bus); the audio session maps it to Apple's port types.
package enum HALDeviceKind: Sendable, Equatable, CaseIterable {
    /// Nothing more is known: taken for the built-in speaker (output) or microphone (input).
    case builtIn
    /// A loudspeaker.
    case speaker
    /// A microphone.
    case microphone
    /// Headphones (output only).
    case headphones
    /// A wired headset: headphones out, its microphone in.
    case headset
    /// A handset or earpiece held to the ear.
    case handset
    /// A line-level jack.
    case line
    case hdmi
    case usb
    /// Bluetooth with a music profile (A2DP).
    case bluetoothA2DP
    /// Bluetooth with a call profile (HFP/HSP).
    case bluetoothHFP
    /// A car's audio system.
    case car
}

/// A jack or connector of a device, one of which is active (a sink's or source's port).
package struct HALDevicePort: Sendable, Equatable {
    /// The server's name for it (`analog-output-headphones`).
    package var name: String
    package var description: String
    /// Whether something is plugged in: `nil` where the device cannot tell.
    package var connected: Bool?
    package init(name: String, description: String, connected: Bool? = nil) {
        self.name = name
        self.description = description
        self.connected = connected
    }
}

/// A device as the layers above see it.
package struct HALDeviceInfo: Sendable, Equatable {
    /// The server's name for it (`speaker`, `alsa_output.pci-…`).
    package var name: String
    package var description: String
    package var sampleRate: Double
    package var channels: Int
    /// What it is (speaker, headphones, HDMI…).
    package var kind: HALDeviceKind
    /// The active port's name, when the device has ports.
    package var portName: String?
    /// The server's number for it, unique among outputs (or inputs) while it exists.
    package var index: UInt32 = 0
    /// For an input that records what an output plays (a PulseAudio monitor source): that
    /// output's name.
    package var monitorOf: String?
    /// Who made it and what it is, where the device says (USB and PCI devices do).
    package var vendor: String?
    package var product: String?
    /// The bus it hangs on (`pci`, `usb`, `bluetooth`…), where known.
    package var bus: String?
    /// No hardware behind it: a null sink, a monitor, a network or filter device.
    package var isVirtual = false
    /// The stand-in a server shows while it has no output of its own, which nobody hears
    /// (PulseAudio's `module-always-sink`, which pipewire-pulse loads too, adds it as `auto_null`
    /// and removes it when a device comes; a server starting again shows it for a moment).
    package var isPlaceholder = false
    /// The volume of each channel on the server's scale (1 = 100 %, unchanged; see ``HALVolume``).
    package var volumes: [Double] = []
    package var muted = false
    /// What the device itself adds between the server and the listener (output) or the
    /// microphone and the server (input), in seconds, as the server reports it now.
    package var latency: Double = 0
    /// Its jacks or connectors; empty for a device without any (a null sink).
    package var ports: [HALDevicePort] = []
    /// Some stream of some client is playing or recording on it now.
    package var isRunning = false
    package init(
        name: String, description: String, sampleRate: Double, channels: Int, kind: HALDeviceKind = .builtIn, portName: String? = nil
    ) {
        self.name = name
        self.description = description
        self.sampleRate = sampleRate
        self.channels = channels
        self.kind = kind
        self.portName = portName
    }
}

/// Another client's playback stream, as the audio session sees it.
package struct HALPlaybackStream: Sendable, Equatable {
    /// The server's identifier of the stream, unique while it lives.
    package var index: UInt32
    /// What the stream says it is for, where it says it in words this library knows.
    package var purpose: HALStreamPurpose?
    package var corked: Bool
    package var muted: Bool
    /// The stream's volume on the server's scale (1 = 100 %, unchanged), averaged over channels.
    package var volume: Double
    package var channels: Int
    /// An audio session of another process of this library that plays non-mixably
    /// (``HALStreamRequest/exclusiveSession``).
    package var exclusiveSession: Bool
    package init(
        index: UInt32, purpose: HALStreamPurpose? = nil, corked: Bool = false, muted: Bool = false, volume: Double = 1, channels: Int = 2,
        exclusiveSession: Bool = false
    ) {
        self.index = index
        self.purpose = purpose
        self.corked = corked
        self.muted = muted
        self.volume = volume
        self.channels = channels
        self.exclusiveSession = exclusiveSession
    }

    /// Whether a listener hears it: not corked, not muted, volume above 0.
    package var isAudible: Bool { !corked && !muted && volume > 0 }
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
    /// Asks the server thread to render now into whatever room the stream has: a render source
    /// that had nothing to give (and wrote nothing) has something again.
    func refill()
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

/// Every device the server has, and which are the defaults.
package struct HALDeviceList: Sendable, Equatable {
    package var outputs: [HALDeviceInfo]
    /// Inputs, monitors of outputs included (``HALDeviceInfo/monitorOf``).
    package var inputs: [HALDeviceInfo]
    package var defaultOutput: String?
    package var defaultInput: String?
    package init(outputs: [HALDeviceInfo], inputs: [HALDeviceInfo], defaultOutput: String?, defaultInput: String?) {
        self.outputs = outputs
        self.inputs = inputs
        self.defaultOutput = defaultOutput
        self.defaultInput = defaultInput
    }
}

/// The volume scale every backend speaks: PulseAudio's, where 1 is 100 % (unchanged) and the
/// level in decibels is the cube of the value (60·log₁₀ v), so that equal steps sound equal.
package enum HALVolume {
    /// Decibels of a volume; −∞ for 0.
    package static func decibels(_ volume: Double) -> Double { volume <= 0 ? -.infinity : 60 * log10(volume) }
    /// The volume of a level in decibels.
    package static func volume(decibels: Double) -> Double { decibels == -.infinity ? 0 : pow(10, decibels / 60) }
}

/// A sound server or stand-in that opens streams: the operations table of the device layer.
package protocol AudioBackend: AnyObject, Sendable {
    /// A short name: `pulse`, `virtual`.
    var name: String { get }
    /// Makes this backend's clock the host clock (`AudioGetCurrentHostTime`, the library's
    /// `hostNow()`) while it is the process's audio environment (`on`), or gives it back. A
    /// server's streams are stamped on the host clock already and do nothing (the default); the
    /// virtual backend's clock is the one its test advances.
    func drivesHostClock(_ on: Bool)
    /// Device, policy and connection events of this backend.
    var events: HALEvents { get }
    /// The playback device named `name` (the server's name), or the default one for `nil`.
    func outputDevice(named name: String?) throws(HALError) -> HALDeviceInfo
    /// The capture device named `name` (the server's name), or the default one for `nil`.
    func inputDevice(named name: String?) throws(HALError) -> HALDeviceInfo
    func openOutput(_ request: HALStreamRequest, source: HALStreamClient) throws(HALError) -> any HALStream
    func openInput(_ request: HALStreamRequest, sink: HALStreamClient) throws(HALError) -> any HALStream
    /// Every output device (`true`), or every input device that is not a monitor of an output.
    func devices(output: Bool) -> [HALDeviceInfo]
    /// Playback streams of other clients (this process's own are left out).
    func otherPlaybackStreams() -> [HALPlaybackStream]
    /// The default output device's volume on the server's scale (1 = 100 %), averaged over
    /// channels; `nil` without one.
    func defaultOutputVolume() -> Double?
    /// Ducks other clients' music and video playback (and playback that names no role) while
    /// `on`, by the server's own policy, so that it ends when this process's connection does,
    /// however the process ends; `device` is where this process plays (`nil`: the default). This
    /// process's own streams are not ducked. `level` is how far (`nil`: not at all); a new level
    /// takes over from the old without letting the others up in between.
    func setDuckingOthers(_ level: DuckLevel?, device: String?) throws(HALError)
    /// While ducking others, ducks the streams that appeared since; does nothing otherwise (never
    /// starts ducking, so a call racing with the end of ducking cannot start it again).
    func refreshDuckingOthers()

    // Devices as the user's sound settings change them (the device API of `import CoreAudio`).

    /// Whether the server itself asks this process's policy stream to pause when another client's
    /// call starts, and to go on when it ends (PulseAudio's `module-role-cork`). Where it does not
    /// (PipeWire's `pipewire-pulse` has no policy modules), the audio session watches other
    /// clients' call streams itself.
    var corksStreamsForCalls: Bool { get }

    /// Every output and input (monitors included) with their state, and the defaults.
    func deviceList() -> HALDeviceList
    /// Makes the device named `name` the server's default output (or input).
    func setDefaultDevice(_ name: String, output: Bool) throws(HALError)
    /// Sets the volume of each channel of a device (the server's scale, ``HALVolume``).
    func setVolumes(_ volumes: [Double], device: String, output: Bool) throws(HALError)
    func setMuted(_ muted: Bool, device: String, output: Bool) throws(HALError)
    /// Makes the port named `port` the device's active one.
    func setActivePort(_ port: String, device: String, output: Bool) throws(HALError)

    // The server's sample cache (system sounds).

    /// Stores a sound under `name` (replacing one of that name) for ``playSample(_:device:completion:)``.
    func uploadSample(_ name: String, format: HALStreamFormat, samples: [Float]) throws(HALError)
    /// Starts the stored sound `name` on `device` (`nil`: the default output) for `purpose`
    /// (`.announcement`: an event sound, under the desktop's alert volume), without opening a
    /// stream, and returns at once; `completion` runs once, on a thread of the backend's, when it
    /// has played out (`true`) or could not play (`false`).
    func playSample(_ name: String, device: String?, purpose: HALStreamPurpose?, completion: @escaping @Sendable (Bool) -> Void)
    func removeSample(_ name: String)
}

/// How far ducking lowers other clients' playback. The session's `duckOthers` uses ``full``
/// (the server module's customary 20 % on its cubic volume scale); a voice-processing unit uses
/// the level its ducking configuration asks for.
package enum DuckLevel: Int, Comparable, CaseIterable, Sendable {
    /// 10 dB down.
    case light = 10
    /// 20 dB down.
    case medium = 20
    /// 20 % on the server's volume scale: 41.9 dB down.
    case full = 42

    package static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }

    /// The level in dB (negative).
    package var decibels: Double { self == .full ? 60 * log10(0.2) : -Double(rawValue) }

    /// The factor a stream's volume on the server's scale (cubic: amplitude is its cube) is
    /// multiplied by: 0.2 for ``full``.
    package var volumeFactor: Double { self == .full ? 0.2 : pow(10, decibels / 60) }
}

extension AudioBackend {
    package func drivesHostClock(_ on: Bool) {}
}
