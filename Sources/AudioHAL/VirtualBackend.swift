import CoreAudioTypes
import Foundation
import Synchronization

/// A backend without a server: a clock the caller advances, for deterministic tests and for
/// rendering to memory (`AudioQueueOfflineRender`).
///
/// Nothing happens until ``advance(frames:)`` (or a stream's own ``VirtualStream/render(into:frames:)``)
/// is called; then every uncorked output stream renders that many frames on the caller's thread,
/// which plays the part of the server thread, and every uncorked input stream captures from
/// ``inputSignal``. Host time is derived from the rendered frames, never from the wall clock.
///
/// Its policy is a scene the test scripts: devices it plugs in and pulls out (``plug(_:output:makeDefault:)``,
/// ``unplug(_:)``), other clients' playback streams (``setOtherStreams(_:)``), the default
/// output's volume, and calls that interrupt (``beginInterruption()``). Each change raises the
/// ``HALEvents`` a server would, so the audio session hears it as it hears PulseAudio.
package final class VirtualBackend: AudioBackend, @unchecked Sendable {
    package let name = "virtual"
    package let events = HALEvents()
    /// The device whose rate the clock runs at: the first output, `virtual`.
    package let device: HALDeviceInfo
    private let lock = Mutex<[VirtualStream]>([])
    private let frames = Atomic<Int64>(0)
    /// Broadcast whenever a stream opens, closes or asks to drain, for ``wait(timeout:until:)``.
    private let activity = NSCondition()

    /// What the test scripted: devices, defaults, other clients' streams, the output volume.
    private struct Scene {
        var outputs: [HALDeviceInfo]
        var inputs: [HALDeviceInfo]
        var defaultOutput: String
        var defaultInput: String
        var others: [HALPlaybackStream] = []
        var outputVolume: Double = 1
    }
    private let scene: Mutex<Scene>

    /// The samples fed to input streams: called with the stream's format, the first frame index and
    /// a buffer to fill (interleaved). Silence when `nil`.
    package nonisolated(unsafe) var inputSignal: (@Sendable (HALStreamFormat, Int64, UnsafeMutableBufferPointer<Float>) -> Void)?

    /// A backend with one output, `virtual` (a speaker), and one input, `virtual.mic` (a
    /// microphone), both at `sampleRate` with `channels` channels.
    package init(sampleRate: Double = 48000, channels: Int = 2) {
        device = Self.withVolumes(HALDeviceInfo(name: "virtual", description: "Virtual speaker", sampleRate: sampleRate, channels: channels, kind: .speaker))
        let mic = Self.withVolumes(HALDeviceInfo(name: "virtual.mic", description: "Virtual microphone", sampleRate: sampleRate, channels: channels, kind: .microphone))
        scene = Mutex(Scene(outputs: [device], inputs: [mic], defaultOutput: device.name, defaultInput: mic.name))
    }

    /// The virtual host time: rendered frames converted to nanoseconds at the device rate. While
    /// this backend is the process's audio system it is the host clock (`AudioGetCurrentHostTime`,
    /// and the library's own reads of it): time stands still between the test's advances.
    package var hostTime: UInt64 { Self.epoch &+ UInt64(Double(frames.load(ordering: .relaxed)) * 1e9 / device.sampleRate) }

    /// The host time of the virtual clock's frame 0: one second, so that no time it gives is 0,
    /// which some callers read as "not yet".
    package static let epoch: UInt64 = 1_000_000_000

    /// Whether this backend's clock is the host clock (``AudioSystem/current`` says).
    private let hostClock = Atomic<Bool>(false)

    package func drivesHostClock(_ on: Bool) {
        hostClock.store(on, ordering: .releasing)
        if on { setVirtualHostTime(hostTime) }
    }

    // MARK: Devices

    package func outputDevice(named name: String?) throws(HALError) -> HALDeviceInfo { try lookUp(name, output: true) }
    package func inputDevice(named name: String?) throws(HALError) -> HALDeviceInfo { try lookUp(name, output: false) }

    private func lookUp(_ name: String?, output: Bool) throws(HALError) -> HALDeviceInfo {
        let found = scene.withLock { s in
            let wanted = name ?? (output ? s.defaultOutput : s.defaultInput)
            return (output ? s.outputs : s.inputs).first { $0.name == wanted }
        }
        guard let found else { throw HALError(.deviceNotFound, "no \(output ? "output" : "input") named \(name ?? "(default)")") }
        return found
    }

    package func devices(output: Bool) -> [HALDeviceInfo] { scene.withLock { output ? $0.outputs : $0.inputs } }

    /// A device as a server has it: every channel at 100 % unless said otherwise.
    private static func withVolumes(_ device: HALDeviceInfo) -> HALDeviceInfo {
        var device = device
        if device.volumes.isEmpty { device.volumes = Array(repeating: 1, count: device.channels) }
        return device
    }

    /// Plugs in `device` as an output (or an input), the default one when `makeDefault`, and
    /// raises ``HALEvents/Kind/devices``. A device of the same name is replaced.
    package func plug(_ device: HALDeviceInfo, output: Bool = true, makeDefault: Bool = true) {
        let device = Self.withVolumes(device)
        scene.withLock { s in
            if output {
                s.outputs.removeAll { $0.name == device.name }
                s.outputs.append(device)
                if makeDefault { s.defaultOutput = device.name }
            } else {
                s.inputs.removeAll { $0.name == device.name }
                s.inputs.append(device)
                if makeDefault { s.defaultInput = device.name }
            }
        }
        events.raise(.devices)
    }

    /// Pulls out the device named `name`; where it was the default, the first device left takes
    /// its place, as a server's fallback does. Raises ``HALEvents/Kind/devices``.
    package func unplug(_ name: String) {
        scene.withLock { s in
            s.outputs.removeAll { $0.name == name }
            s.inputs.removeAll { $0.name == name }
            if s.defaultOutput == name { s.defaultOutput = s.outputs.first?.name ?? "" }
            if s.defaultInput == name { s.defaultInput = s.inputs.first?.name ?? "" }
        }
        events.raise(.devices)
    }

    /// Makes the output named `name` the default, as a user choosing it in the sound settings.
    package func setDefaultOutput(_ name: String) {
        scene.withLock { $0.defaultOutput = name }
        events.raise(.devices)
    }

    package func deviceList() -> HALDeviceList {
        scene.withLock { s in
            HALDeviceList(outputs: s.outputs, inputs: s.inputs, defaultOutput: s.defaultOutput, defaultInput: s.defaultInput)
        }
    }

    package func setDefaultDevice(_ name: String, output: Bool) throws(HALError) {
        try change(name, output: output) { s, _ in
            if output { s.defaultOutput = name } else { s.defaultInput = name }
        }
    }

    package func setVolumes(_ volumes: [Double], device: String, output: Bool) throws(HALError) {
        try change(device, output: output) { s, d in
            d.volumes = volumes.map { max($0, 0) }
            if output && device == s.defaultOutput { s.outputVolume = d.volumes.reduce(0, +) / Double(max(d.volumes.count, 1)) }
        }
    }

    package func setMuted(_ muted: Bool, device: String, output: Bool) throws(HALError) {
        try change(device, output: output) { _, d in d.muted = muted }
    }

    package func setActivePort(_ port: String, device: String, output: Bool) throws(HALError) {
        try change(device, output: output) { _, d in d.portName = port }
    }

    /// Applies a change to the device named `name` and raises ``HALEvents/Kind/devices``, as the
    /// server would; an unknown name throws, as the server refuses it.
    private func change(_ name: String, output: Bool, _ body: (inout Scene, inout HALDeviceInfo) -> Void) throws(HALError) {
        let found = scene.withLock { s -> Bool in
            var list = output ? s.outputs : s.inputs
            guard let n = list.firstIndex(where: { $0.name == name }) else { return false }
            body(&s, &list[n])
            if output { s.outputs = list } else { s.inputs = list }
            return true
        }
        guard found else { throw HALError(.deviceNotFound, "no \(output ? "output" : "input") named \(name)") }
        events.raise(.devices)
    }

    // MARK: Sample cache

    private let samples = Mutex<[String: (HALStreamFormat, [Float])]>([:])

    package func uploadSample(_ name: String, format: HALStreamFormat, samples data: [Float]) throws(HALError) {
        guard !data.isEmpty, data.count % format.channels == 0 else { throw HALError(.notSupported, "\(data.count) samples of \(format.channels) channels") }
        samples.withLock { $0[name] = (format, data) }
    }

    /// Plays the sample as a stream of its own that the clock renders (``advance(frames:)``); it
    /// closes, and `completion` runs on the advancing thread, in the render after its last frame.
    package func playSample(_ name: String, device: String?, purpose: HALStreamPurpose?, completion: @escaping @Sendable (Bool) -> Void) {
        guard let (format, data) = samples.withLock({ $0[name] }) else { return completion(false) }
        let player = SamplePlayer(data, channels: format.channels, completion: completion)
        var request = HALStreamRequest(format: format, bufferDuration: 0.05, name: name, purpose: purpose, startCorked: false, device: device)
        request.carriesSound = true
        guard let stream = try? openOutput(request, source: player) else { return completion(false) }
        player.stream = stream
    }

    package func removeSample(_ name: String) { _ = samples.withLock { $0.removeValue(forKey: name) } }

    /// Renders a stored sample once, then closes its stream and reports.
    private final class SamplePlayer: HALStreamClient, @unchecked Sendable {
        let data: [Float]
        let channels: Int
        let completion: @Sendable (Bool) -> Void
        var offset = 0
        var stream: (any HALStream)?
        init(_ data: [Float], channels: Int, completion: @escaping @Sendable (Bool) -> Void) {
            self.data = data
            self.channels = channels
            self.completion = completion
        }
        override func render(_ output: UnsafeMutablePointer<Float>, frames: Int, time: HALRenderTime) -> Int {
            let count = min(frames * channels, data.count - offset)
            data.withUnsafeBufferPointer { output.update(from: $0.baseAddress! + offset, count: count) }
            offset += count
            if offset == data.count, let stream {
                self.stream = nil
                stream.close()
                completion(true)
            }
            return count / channels
        }
    }

    // MARK: Policy

    package func otherPlaybackStreams() -> [HALPlaybackStream] { scene.withLock { $0.others } }

    /// Replaces the other clients' playback streams and raises ``HALEvents/Kind/streams``.
    package func setOtherStreams(_ streams: [HALPlaybackStream]) {
        scene.withLock { $0.others = streams }
        events.raise(.streams)
    }

    package func defaultOutputVolume() -> Double? { scene.withLock { $0.outputs.isEmpty ? nil : $0.outputVolume } }

    /// Sets the default output's volume (1 = 100 %) and raises ``HALEvents/Kind/devices``.
    package func setOutputVolume(_ volume: Double) {
        scene.withLock { $0.outputVolume = volume }
        events.raise(.devices)
    }

    /// A call starts: the server asks the streams that report policy events (the audio
    /// session's) to pause, as PulseAudio's role-cork module does. Returns whether one was open.
    @discardableResult
    package func beginInterruption() -> Bool {
        guard hasPolicyStream else { return false }
        events.raise(.corkRequested)
        return true
    }

    /// The call ends: the server lets them go on.
    @discardableResult
    package func endInterruption() -> Bool {
        guard hasPolicyStream else { return false }
        events.raise(.uncorkRequested)
        return true
    }

    private var hasPolicyStream: Bool { lock.withLock { $0.contains { $0.reportsPolicyEvents } } }

    /// The virtual server corks for calls (``beginInterruption()``), as PulseAudio's role-cork does.
    package var corksStreamsForCalls: Bool { true }

    /// Whether the process asked to duck others (``setDuckingOthers(_:device:)``).
    package var isDuckingOthers: Bool { duckingLevel != nil }
    /// How far, when it does.
    package var duckingLevel: DuckLevel? { DuckLevel(rawValue: ducking.load(ordering: .relaxed)) }
    private let ducking = Atomic<Int>(0)

    /// The request is recorded (for tests, ``duckingLevel``); the scripted streams of other
    /// clients are left as the test set them.
    package func setDuckingOthers(_ level: DuckLevel?, device: String?) throws(HALError) {
        ducking.store(level?.rawValue ?? 0, ordering: .relaxed)
    }
    package func refreshDuckingOthers() {}

    /// The server goes away: ``HALEvents/Kind/serverLost`` is raised (the backend itself stays
    /// usable, as a server that comes straight back).
    package func loseServer() { events.raise(.serverLost) }

    // MARK: Streams

    package func openOutput(_ request: HALStreamRequest, source: HALStreamClient) throws(HALError) -> any HALStream {
        let stream = VirtualStream(backend: self, request: request, device: try outputDevice(named: request.device), source: source, sink: nil)
        lock.withLock { $0.append(stream) }
        noteActivity()
        return stream
    }

    package func openInput(_ request: HALStreamRequest, sink: HALStreamClient) throws(HALError) -> any HALStream {
        let stream = VirtualStream(backend: self, request: request, device: try inputDevice(named: request.device), source: nil, sink: sink)
        lock.withLock { $0.append(stream) }
        noteActivity()
        return stream
    }

    /// Waits until `condition` holds, re-checking it each time a stream opens, closes or asks to
    /// drain; `false` after `timeout` seconds. For a test to see that another thread (a queue's
    /// callback thread) did what it was to do before advancing the clock, without sleeping.
    package func wait(timeout: Double, until condition: (VirtualBackend) -> Bool) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout)
        activity.lock()
        defer { activity.unlock() }
        while !condition(self) {
            if !activity.wait(until: deadline) { return condition(self) }
        }
        return true
    }

    /// Wakes ``wait(timeout:until:)``.
    func noteActivity() {
        activity.lock()
        activity.broadcast()
        activity.unlock()
    }

    /// How many open streams asked to be told when they have drained and were not yet.
    package var pendingDrains: Int { lock.withLock { $0.count { $0.isDraining } } }

    /// The requests of the streams open now, in the order they opened: what a test checks that
    /// the layers above asked for (purposes, devices, buffer durations).
    package var openRequests: [HALStreamRequest] { lock.withLock { $0.map(\.request) } }

    func remove(_ stream: VirtualStream) {
        lock.withLock { $0.removeAll { $0 === stream } }
        noteActivity()
    }

    /// Which streams an ``advance(frames:streams:)`` moves.
    package enum Streams: Sendable {
        case all, outputs, inputs
    }

    /// Advances the clock by `count` device frames: each uncorked stream renders or captures the
    /// matching number of its own frames. Returns each output stream's samples.
    ///
    /// `streams` moves only the outputs or only the inputs, as a server whose playback and
    /// capture cycles do not line up: a test scripts input that arrives late, early or in bursts
    /// against the playback's requests. The clock (``hostTime``) counts the frames of advances
    /// that move the outputs.
    @discardableResult
    package func advance(frames count: Int, streams which: Streams = .all) -> [ObjectIdentifier: [Float]] {
        var rendered: [ObjectIdentifier: [Float]] = [:]
        for (stream, samples) in advanceStreams(frames: count, streams: which) { rendered[ObjectIdentifier(stream)] = samples }
        return rendered
    }

    /// ``advance(frames:streams:)``, returning each output stream with its samples (its own rate
    /// and channels: ``VirtualStream/format``).
    @discardableResult
    package func advanceStreams(frames count: Int, streams which: Streams = .all) -> [(stream: VirtualStream, samples: [Float])] {
        let streams = lock.withLock { $0 }.filter { which == .all || $0.isOutput == (which == .outputs) }
        let now = hostTime
        var rendered: [(stream: VirtualStream, samples: [Float])] = []
        for stream in streams {
            let n = Int((Double(count) * stream.format.sampleRate / device.sampleRate).rounded())
            var buffer = [Float](repeating: 0, count: n * stream.format.channels)
            buffer.withUnsafeMutableBufferPointer { p in
                if stream.isOutput {
                    stream.render(into: p.baseAddress!, frames: n, at: now)
                } else {
                    inputSignal?(stream.format, stream.position, p)
                    stream.captureFrom(p.baseAddress!, frames: n, at: now)
                }
            }
            if stream.isOutput { rendered.append((stream, buffer)) }
        }
        if which != .inputs {
            frames.add(Int64(count), ordering: .relaxed)
            if hostClock.load(ordering: .acquiring) { setVirtualHostTime(hostTime) }
        }
        return rendered
    }
}

/// A stream of the ``VirtualBackend``. Rendering runs on the caller's thread under the stream's
/// lock, which ``withCallbacksBlocked(_:)`` takes too.
package final class VirtualStream: HALStream, @unchecked Sendable {
    /// Strong: the stream keeps its backend alive; ``close()`` breaks the cycle.
    let backend: VirtualBackend
    package let format: HALStreamFormat
    package let grantedBufferDuration: Double
    package let device: HALDeviceInfo
    /// What the stream was opened with.
    let request: HALStreamRequest
    var reportsPolicyEvents: Bool { request.reportsPolicyEvents }
    private let source: (HALStreamClient)?
    private let sink: (HALStreamClient)?
    private let state = Mutex<Void>(())
    private let corked: Atomic<Bool>
    private let draining = Atomic<Bool>(false)
    /// Frames rendered or captured so far.
    private(set) var position: Int64 = 0
    /// The host time the next render or capture starts at: the backend's clock for the streams
    /// its advances move, the stream's own frames for one rendered directly (offline rendering).
    /// Time passes while corked; ``position`` does not.
    private let clock: Atomic<UInt64>

    init(backend: VirtualBackend, request: HALStreamRequest, device: HALDeviceInfo, source: (HALStreamClient)?, sink: (HALStreamClient)?) {
        self.backend = backend
        self.device = device
        self.request = request
        self.format = request.format
        self.grantedBufferDuration = request.bufferDuration
        self.source = source
        self.sink = sink
        self.corked = Atomic(request.startCorked)
        self.clock = Atomic(backend.hostTime)
    }

    var isOutput: Bool { source != nil }
    package var xrunCount: Int { 0 }

    package func currentTime() -> HALRenderTime? {
        HALRenderTime(sampleTime: position, hostTime: clock.load(ordering: .acquiring))
    }

    /// The host time of the render or capture that starts at `at` (its own clock when nil), and
    /// the clock moved past its `frames`.
    private func stamp(_ at: UInt64?, frames: Int) -> UInt64 {
        let start = at ?? clock.load(ordering: .relaxed)
        clock.store(start &+ UInt64(Double(frames) * 1e9 / format.sampleRate), ordering: .releasing)
        return start
    }

    /// Renders `frames` frames into `output` (silence while corked), as the server thread would,
    /// starting at host time `at` (the backend's clock; nil: where the last render ended).
    package func render(into output: UnsafeMutablePointer<Float>, frames: Int, at: UInt64? = nil) {
        state.withLock { _ in
            let start = stamp(at, frames: frames)
            // A drain asked for before this render completes with it (one asked for meanwhile,
            // by another thread, waits for the next render: the order stays deterministic).
            let drainRequested = draining.exchange(false, ordering: .relaxed)
            guard let source, !corked.load(ordering: .relaxed) else {
                if drainRequested { draining.store(true, ordering: .relaxed) }
                output.update(repeating: 0, count: frames * format.channels)
                return
            }
            let produced = source.render(output, frames: frames, time: HALRenderTime(sampleTime: position, hostTime: start))
            if produced < frames { (output + produced * format.channels).update(repeating: 0, count: (frames - produced) * format.channels) }
            position += Int64(frames)
            if drainRequested { source.streamDidDrain() }
        }
    }

    func captureFrom(_ input: UnsafePointer<Float>, frames: Int, at: UInt64? = nil) {
        state.withLock { _ in
            let start = stamp(at, frames: frames)
            guard let sink, !corked.load(ordering: .relaxed) else { return }
            sink.capture(input, frames: frames, time: HALRenderTime(sampleTime: position, hostTime: start))
            position += Int64(frames)
        }
    }

    /// Running again cancels a drain still pending, as ``PulseStream`` does: it belongs to the
    /// previous run, and completing now would tell the new one it had played out.
    package func setCorked(_ corked: Bool) {
        if corked {
            self.corked.store(true, ordering: .relaxed)
        } else {
            // Under the render's lock: a render meanwhile would keep the drain for later.
            state.withLock { _ in
                draining.store(false, ordering: .relaxed)
                self.corked.store(false, ordering: .relaxed)
            }
        }
    }
    package func flush() {}
    /// The virtual clock renders every output stream at each advance: nothing to ask.
    package func refill() {}
    package func refreshTiming() {}
    /// The virtual device has no buffer: written data has played when the next render returns.
    package func drain() {
        draining.store(true, ordering: .relaxed)
        backend.noteActivity()
    }
    var isDraining: Bool { draining.load(ordering: .relaxed) }
    package func withCallbacksBlocked<T>(_ body: () throws -> T) rethrows -> T {
        try state.withLock { _ in try body() }
    }
    package func close() { backend.remove(self) }
}
