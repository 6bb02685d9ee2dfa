import Synchronization

/// A backend without a server: a clock the caller advances, for deterministic tests and for
/// rendering to memory (`AudioQueueOfflineRender`).
///
/// Nothing happens until ``advance(frames:)`` (or a stream's own ``VirtualStream/render(into:frames:)``)
/// is called; then every uncorked output stream renders that many frames on the caller's thread,
/// which plays the part of the server thread, and every uncorked input stream captures from
/// ``inputSignal``. Host time is derived from the rendered frames, never from the wall clock.
package final class VirtualBackend: AudioBackend, @unchecked Sendable {
    package let name = "virtual"
    package let events = HALEvents()
    package let device: HALDeviceInfo
    private let lock = Mutex<[VirtualStream]>([])
    private let frames = Atomic<Int64>(0)

    /// The samples fed to input streams: called with the stream's format, the first frame index and
    /// a buffer to fill (interleaved). Silence when `nil`.
    package nonisolated(unsafe) var inputSignal: (@Sendable (HALStreamFormat, Int64, UnsafeMutableBufferPointer<Float>) -> Void)?

    package init(sampleRate: Double = 48000, channels: Int = 2) {
        device = HALDeviceInfo(name: "virtual", description: "Virtual device", sampleRate: sampleRate, channels: channels)
    }

    /// The virtual host time: rendered frames converted to nanoseconds at the device rate.
    package var hostTime: UInt64 { UInt64(Double(frames.load(ordering: .relaxed)) * 1e9 / device.sampleRate) }

    /// The virtual backend has one device, whatever the name.
    package func outputDevice(named name: String?) throws(HALError) -> HALDeviceInfo { device }
    package func inputDevice(named name: String?) throws(HALError) -> HALDeviceInfo { device }

    package func openOutput(_ request: HALStreamRequest, source: HALStreamClient) throws(HALError) -> any HALStream {
        let stream = VirtualStream(backend: self, request: request, source: source, sink: nil)
        lock.withLock { $0.append(stream) }
        return stream
    }

    /// Whether the process asked to duck others (``setDuckingOthers(_:device:)``).
    package var isDuckingOthers: Bool { ducking.load(ordering: .relaxed) }
    private let ducking = Atomic<Bool>(false)

    /// There are no other clients on the virtual backend: the request is recorded (for tests,
    /// ``isDuckingOthers``) and nothing is lowered.
    package func setDuckingOthers(_ on: Bool, device: String?) throws(HALError) { ducking.store(on, ordering: .relaxed) }

    package func openInput(_ request: HALStreamRequest, sink: HALStreamClient) throws(HALError) -> any HALStream {
        let stream = VirtualStream(backend: self, request: request, source: nil, sink: sink)
        lock.withLock { $0.append(stream) }
        return stream
    }

    func remove(_ stream: VirtualStream) {
        lock.withLock { $0.removeAll { $0 === stream } }
    }

    /// Advances the clock by `count` device frames: each uncorked stream renders or captures the
    /// matching number of its own frames. Returns each output stream's samples.
    @discardableResult
    package func advance(frames count: Int) -> [ObjectIdentifier: [Float]] {
        let streams = lock.withLock { $0 }
        var rendered: [ObjectIdentifier: [Float]] = [:]
        for stream in streams {
            let n = Int((Double(count) * stream.format.sampleRate / device.sampleRate).rounded())
            var buffer = [Float](repeating: 0, count: n * stream.format.channels)
            buffer.withUnsafeMutableBufferPointer { p in
                if stream.isOutput {
                    stream.render(into: p.baseAddress!, frames: n)
                } else {
                    inputSignal?(stream.format, stream.position, p)
                    stream.captureFrom(p.baseAddress!, frames: n)
                }
            }
            if stream.isOutput { rendered[ObjectIdentifier(stream)] = buffer }
        }
        frames.add(Int64(count), ordering: .relaxed)
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
    package var device: HALDeviceInfo { backend.device }
    private let source: (HALStreamClient)?
    private let sink: (HALStreamClient)?
    private let state = Mutex<Void>(())
    private let corked: Atomic<Bool>
    private let draining = Atomic<Bool>(false)
    /// Frames rendered or captured so far.
    private(set) var position: Int64 = 0

    init(backend: VirtualBackend, request: HALStreamRequest, source: (HALStreamClient)?, sink: (HALStreamClient)?) {
        self.backend = backend
        self.format = request.format
        self.grantedBufferDuration = request.bufferDuration
        self.source = source
        self.sink = sink
        self.corked = Atomic(request.startCorked)
    }

    var isOutput: Bool { source != nil }
    package var xrunCount: Int { 0 }

    package func currentTime() -> HALRenderTime? {
        HALRenderTime(sampleTime: position, hostTime: UInt64(Double(position) * 1e9 / format.sampleRate))
    }

    /// Renders `frames` frames into `output` (silence while corked), as the server thread would.
    package func render(into output: UnsafeMutablePointer<Float>, frames: Int) {
        state.withLock { _ in
            guard let source, !corked.load(ordering: .relaxed) else {
                output.update(repeating: 0, count: frames * format.channels)
                return
            }
            let produced = source.render(output, frames: frames, time: HALRenderTime(sampleTime: position, hostTime: UInt64(Double(position) * 1e9 / format.sampleRate)))
            if produced < frames { (output + produced * format.channels).update(repeating: 0, count: (frames - produced) * format.channels) }
            position += Int64(frames)
            if draining.exchange(false, ordering: .relaxed) { source.streamDidDrain() }
        }
    }

    func captureFrom(_ input: UnsafePointer<Float>, frames: Int) {
        state.withLock { _ in
            guard let sink, !corked.load(ordering: .relaxed) else { return }
            sink.capture(input, frames: frames, time: HALRenderTime(sampleTime: position, hostTime: UInt64(Double(position) * 1e9 / format.sampleRate)))
            position += Int64(frames)
        }
    }

    package func setCorked(_ corked: Bool) { self.corked.store(corked, ordering: .relaxed) }
    package func flush() {}
    package func refreshTiming() {}
    /// The virtual device has no buffer: written data has played when the next render returns.
    package func drain() { draining.store(true, ordering: .relaxed) }
    package func withCallbacksBlocked<T>(_ body: () throws -> T) rethrows -> T {
        try state.withLock { _ in try body() }
    }
    package func close() { backend.remove(self) }
}
