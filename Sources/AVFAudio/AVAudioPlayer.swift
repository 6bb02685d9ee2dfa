internal import AudioCodecs
import AudioToolbox
public import Foundation

/// What an ``AVAudioPlayer`` tells its delegate, on the main actor as Apple's (so that a view
/// controller or any `@MainActor` type conforms as it does on Apple's platforms). Both methods
/// have empty default implementations.
///
/// The calls come through the main dispatch queue: a program without an app's event loop hears
/// them while its main thread runs the main run loop or `dispatchMain()`, as on a Mac.
@MainActor
public protocol AVAudioPlayerDelegate: AnyObject {
    /// Playback reached the end (after every loop): `flag` is `false` when it stopped because the
    /// data could not be decoded. Not called after ``AVAudioPlayer/stop()`` or an interruption.
    func audioPlayerDidFinishPlaying(_ player: AVAudioPlayer, successfully flag: Bool)
    /// The data could not be decoded part way through; playback stops.
    func audioPlayerDecodeErrorDidOccur(_ player: AVAudioPlayer, error: (any Error)?)
}

@MainActor
extension AVAudioPlayerDelegate {
    public func audioPlayerDidFinishPlaying(_ player: AVAudioPlayer, successfully flag: Bool) {}
    public func audioPlayerDecodeErrorDidOccur(_ player: AVAudioPlayer, error: (any Error)?) {}
}

/// Plays a sound file or in-memory data on the sound server: Apple's `AVAudioPlayer`.
///
/// Built on an output audio queue fed from an `ExtAudioFile` on the queue's thread; decoding,
/// looping and rate change happen there, volume, pan and metering in the queue. Interruptions of
/// the audio session pause it (``isPlaying`` turns false; call ``play()`` after `.ended`); route
/// changes keep it playing on the new device.
open class AVAudioPlayer: NSObject, @unchecked Sendable {
    public let url: URL?
    public let data: Data?
    /// The format of the file's audio data.
    public let format: AVAudioFormat
    public var settings: [String: Any] { format.settings }
    public var numberOfChannels: Int { Int(format.channelCount) }
    /// Total duration of the sound, in seconds.
    public let duration: TimeInterval
    public weak var delegate: (any AVAudioPlayerDelegate)?

    private let core: PlayerCore

    public convenience init(contentsOf url: URL) throws {
        try self.init(contentsOf: url, fileTypeHint: nil)
    }

    /// `utiString` names the file type (`"com.apple.m4a-audio"`, `"public.mp3"`, or an
    /// `AVFileType` raw value); it is only a hint: the type is found from the content.
    public init(contentsOf url: URL, fileTypeHint utiString: String?) throws {
        self.url = url
        self.data = nil
        core = try PlayerCore(path: url.path, name: url.path)
        format = core.fileFormat
        duration = core.duration
        super.init()
        core.owner = self
    }

    public convenience init(data: Data) throws {
        try self.init(data: data, fileTypeHint: nil)
    }

    /// Plays `data` as a file's content. On Linux the bytes go to an unlinked temporary file
    /// (in `$TMPDIR`) that the decoder reads; it disappears with the player.
    public init(data: Data, fileTypeHint utiString: String?) throws {
        self.url = nil
        self.data = data
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("openavf-player-\(UUID().uuidString)").path
        guard FileManager.default.createFile(atPath: path, contents: data) else {
            throw statusError(kAudioFilePermissionsError, "cannot store the data in \(path)")
        }
        defer { unlink(path) }  // once open, the file stays readable until the player closes it
        core = try PlayerCore(path: path, name: "the data")
        format = core.fileFormat
        duration = core.duration
        super.init()
        core.owner = self
    }

    deinit { core.dispose() }

    // MARK: Transport

    /// Opens the server stream and decodes the first buffers so that ``play()`` starts at once.
    @discardableResult
    open func prepareToPlay() -> Bool { core.prepare() }

    /// Plays from ``currentTime``, or resumes after ``pause()``. `false` when no sound server answers.
    @discardableResult
    open func play() -> Bool { core.play(at: nil) }

    /// Plays at `time`, a value of ``deviceCurrentTime`` (for example `deviceCurrentTime + 0.5`):
    /// the first sample reaches the device then. A time in the past plays at once.
    @discardableResult
    open func play(atTime time: TimeInterval) -> Bool {
        core.play(at: time > 0 ? UInt64(time * 1e9) : nil)
    }

    /// Pauses; ``play()`` resumes at the same sample.
    open func pause() { core.pause() }

    /// Stops and lets go of the stream. ``currentTime`` stays where playback stopped; the
    /// delegate's `audioPlayerDidFinishPlaying` is not called.
    open func stop() { core.stop() }

    open var isPlaying: Bool { core.isPlaying }

    // MARK: Position and time

    /// Seconds into the sound: where playback is (what is heard now), or where ``play()`` starts.
    /// Setting it seeks, also while playing.
    open var currentTime: TimeInterval {
        get { core.currentTime }
        set { core.seek(to: newValue) }
    }

    /// The output device's clock in seconds: the host clock (`CLOCK_MONOTONIC`), which is the
    /// time base audio queues and the sound server's timing use on Linux. Grows while the player
    /// exists; use it with ``play(atTime:)``.
    open var deviceCurrentTime: TimeInterval { Double(AudioGetCurrentHostTime()) / 1e9 }

    /// Extra plays after the first: 0 plays once, n plays n + 1 times, any negative number loops
    /// until ``stop()``.
    open var numberOfLoops: Int {
        get { core.withLock { core.numberOfLoops } }
        set { core.withLock { core.numberOfLoops = newValue } }
    }

    // MARK: Level, pan, rate

    /// Playback gain, 0…1 (linear).
    open var volume: Float {
        get { core.volume }
        set { core.setVolume(newValue, fade: 0) }
    }

    /// Moves ``volume`` to `volume` linearly over `duration` seconds.
    open func setVolume(_ volume: Float, fadeDuration duration: TimeInterval) {
        core.setVolume(volume, fade: duration)
    }

    /// Stereo position, −1 (left) … 1 (right). A mono sound is placed between the two channels; a
    /// stereo sound is balanced (the other channel is attenuated).
    open var pan: Float {
        get { core.pan }
        set { core.setPan(newValue) }
    }

    /// Allows ``rate`` to change the speed. Set it before ``prepareToPlay()`` or ``play()``.
    open var enableRate: Bool {
        get { core.withLock { core.enableRate } }
        set { core.withLock { core.enableRate = newValue } }
    }

    /// Playback speed, 0.5…2 (clamped), with the pitch kept (libsonic); 1 unless ``enableRate``.
    open var rate: Float {
        get { core.withLock { core.rate } }
        set { core.withLock { core.rate = min(max(newValue, 0.5), 2) } }
    }

    // MARK: Metering

    /// Turns the meters on; off by default.
    open var isMeteringEnabled: Bool {
        get { core.isMeteringEnabled }
        set { core.isMeteringEnabled = newValue }
    }

    /// Refreshes the values ``averagePower(forChannel:)`` and ``peakPower(forChannel:)`` return
    /// with what played since the previous call.
    open func updateMeters() { core.updateMeters() }

    /// Average power of `channelNumber` in dBFS: 0 is full scale, −160 silence; a full-scale sine
    /// reads −3.01. Smoothed as ``AVAudioPlayer`` meters are (see `AVAudioPowerMeter`).
    open func averagePower(forChannel channelNumber: Int) -> Float { core.meterValue(channelNumber, peak: false) }

    /// Peak power of `channelNumber` in dBFS, held for half a second and then falling.
    open func peakPower(forChannel channelNumber: Int) -> Float { core.meterValue(channelNumber, peak: true) }

    /// The output device's name on the sound server (a PulseAudio sink), or `nil` for the default.
    open var currentDevice: String? {
        get { core.withLock { core.deviceName } }
        set { core.withLock { core.deviceName = newValue } }
    }

    // MARK: Delegate delivery (called by the core; the delegate hears it on the main actor)

    fileprivate func tellFinished(successfully: Bool) {
        DispatchQueue.main.async { [self] in
            MainActor.assumeIsolated { delegate?.audioPlayerDidFinishPlaying(self, successfully: successfully) }
        }
    }

    fileprivate func tellDecodeError(_ error: any Error) {
        let box = UncheckedError(error: error)
        DispatchQueue.main.async { [self] in
            MainActor.assumeIsolated { delegate?.audioPlayerDecodeErrorDidOccur(self, error: box.error) }
        }
    }
}

/// The player's machinery: the file, the queue and its buffers, the map from the queue's timeline
/// to file positions; decoding, looping and rate change are the ``PlayerDecoder``'s.
///
/// Locks. `lock` guards the player's state (transport, settings, segments, meters) and is never
/// held while decoding or enqueueing, so a property read that takes it returns at once;
/// ``currentTime`` and ``isPlaying`` do not even take it, they read a copy published under a lock
/// held only to copy it. The decoder's lock is held while decoding, on the queue's callback thread
/// (refills) or the caller's (start and seek), and while stop and seek turn feeding off; where
/// both are taken, the decoder's comes first. Queue calls that wait for callbacks are made
/// without either lock.
private final class PlayerCore: @unchecked Sendable {
    enum State { case idle, prepared, playing, paused }

    /// A buffer on the queue: where it starts on the queue's timeline and in the file.
    struct Segment {
        var queueStart: Double
        var frames: Int
        var fileStart: Double
        var rate: Double
    }

    let lock = NSLock()
    let file: ExtAudioFileRef
    let fileFormat: AVAudioFormat
    let channels: Int
    let sampleRate: Double
    let length: Int64
    var duration: TimeInterval { Double(length) / sampleRate }
    weak var owner: AVAudioPlayer?
    private var interruptions: InterruptionWatch?

    // Settings.
    var numberOfLoops = 0
    var enableRate = false
    var rate: Float = 1
    var deviceName: String?
    private(set) var volume: Float = 1
    private(set) var pan: Float = 0

    // Transport.
    private var queue: AudioQueueRef? { didSet { publish() } }
    private var idle: [AudioQueueBufferRef] = []
    private let decoder: PlayerDecoder
    private var state = State.idle { didSet { publish() } }
    /// Callbacks refill buffers (false while stopping, seeking, or after the end).
    private var feeding = false
    /// The file is exhausted and an asynchronous stop was asked for (or will be at start).
    private var ended = false
    private var endNeedsStop = false
    private var decodeError: OSStatus = noErr
    /// File position (frames, unwrapped) of the next output frame when the rate changes speed.
    private var producedPosition: Double = 0
    /// Where playback starts when not playing (frames).
    private var restPosition: Double = 0 { didSet { publish() } }
    private var segments: [Segment] = [] { didSet { publish() } }
    /// What ``currentTime`` and ``isPlaying`` read, copied from the four above whenever one
    /// changes, under a lock of its own held only to copy it: a read waits neither for a decode
    /// nor for anything done under `lock`.
    private var published = Published()
    private let publishedLock = NSLock()

    struct Published {
        var state = State.idle
        var queue: AudioQueueRef?
        var restPosition: Double = 0
        var segments: [Segment] = []
    }

    private var meter: AVAudioPowerMeter

    /// `name` is how errors name the audio (the path, or "the data").
    init(path: String, name: String) throws {
        var ref: ExtAudioFileRef?
        let status = ExtAudioFileOpenURL(URL(fileURLWithPath: path) as CFURL, &ref)
        guard status == noErr, let ref else {
            throw statusError(status, "cannot open \(name) as audio: \(ExtAudioFileLastFailureReason())")
        }
        var desc = AudioStreamBasicDescription()
        var size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
        var frames: Int64 = 0
        var frameSize = UInt32(8)
        guard ExtAudioFileGetProperty(ref, kExtAudioFileProperty_FileDataFormat, &size, &desc) == noErr,
            ExtAudioFileGetProperty(ref, kExtAudioFileProperty_FileLengthFrames, &frameSize, &frames) == noErr,
            desc.mSampleRate > 0, (1...8).contains(desc.mChannelsPerFrame),
            let format = AVAudioFormat(streamDescription: &desc, channelLayout: nil)
        else {
            ExtAudioFileDispose(ref)
            throw statusError(kAudioFileUnsupportedDataFormatError, "the audio has no playable format (1 to 8 channels)")
        }
        let channels = Int(desc.mChannelsPerFrame)
        var client = AudioStreamBasicDescription(
            mSampleRate: desc.mSampleRate, mFormatID: kAudioFormatLinearPCM, mFormatFlags: kAudioFormatFlagsNativeFloatPacked,
            mBytesPerPacket: UInt32(4 * channels), mFramesPerPacket: 1, mBytesPerFrame: UInt32(4 * channels),
            mChannelsPerFrame: UInt32(channels), mBitsPerChannel: 32, mReserved: 0)
        let set = ExtAudioFileSetProperty(ref, kExtAudioFileProperty_ClientDataFormat, UInt32(MemoryLayout<AudioStreamBasicDescription>.size), &client)
        guard set == noErr else {
            ExtAudioFileDispose(ref)
            throw statusError(set, "cannot decode the audio: \(ExtAudioFileLastFailureReason())")
        }
        file = ref
        fileFormat = format
        self.channels = channels
        sampleRate = desc.mSampleRate
        length = frames
        // Four buffers of 100 ms: the queue's stream buffer follows them (100 ms, the most a queue
        // asks for), refilled in thirds (PulseAudio keeps a sixth, 17 ms, as its sink's latency),
        // so the server thread wakes 30 times a second and the decoder 10; a slow decode has
        // 300 ms of slack, and the buffer decoded ahead 100 ms more.
        // What a seek cannot take back from the server, and how late a volume change or fade is
        // heard, is at most that 100 ms. Start latency does not depend on it: primed audio goes to
        // the server when play() starts. Measured with openavf-bench on 60 s of MP3 when requests
        // were halves: 0.26 s of CPU against paplay's 0.33 s; with 50 ms buffers 0.38 s against
        // 0.35 s. With the server's CPU counted (openavf-bench --only player) the player and
        // server together cost about 1.45× paplay's, which buffers 2 s.
        decoder = PlayerDecoder(
            file: ref, channels: channels, sampleRate: desc.mSampleRate, length: frames, bufferFrames: max(256, Int(desc.mSampleRate * 0.1)))
        meter = AVAudioPowerMeter(channels: channels)
        interruptions = InterruptionWatch { [weak self] in self?.interrupted() }
    }

    func dispose() {
        interruptions = nil
        lock.lock()
        feeding = false
        let q = queue
        queue = nil
        lock.unlock()
        if let q { AudioQueueDispose(q, true) }
        decoder.lock.withLock { _ = ExtAudioFileDispose(file) }
    }

    func withLock<T>(_ body: () -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body()
    }

    // MARK: Queue

    static let callback: AudioQueueOutputCallback = { userData, queue, buffer in
        Unmanaged<PlayerCore>.fromOpaque(userData!).takeUnretainedValue().refill(queue, buffer)
    }

    static let runningListener: AudioQueuePropertyListenerProc = { userData, queue, _ in
        Unmanaged<PlayerCore>.fromOpaque(userData!).takeUnretainedValue().runningChanged(queue)
    }

    /// Creates the queue and its buffers. Call with `lock` held.
    private func makeQueue() -> Bool {
        if queue != nil { return true }
        var desc = AudioStreamBasicDescription(
            mSampleRate: sampleRate, mFormatID: kAudioFormatLinearPCM, mFormatFlags: kAudioFormatFlagsNativeFloatPacked,
            mBytesPerPacket: UInt32(4 * channels), mFramesPerPacket: 1, mBytesPerFrame: UInt32(4 * channels),
            mChannelsPerFrame: UInt32(channels), mBitsPerChannel: 32, mReserved: 0)
        var q: AudioQueueRef?
        let me = Unmanaged.passUnretained(self).toOpaque()
        guard AudioQueueNewOutput(&desc, Self.callback, me, nil, nil, 0, &q) == noErr, let q else { return false }
        AudioQueueAddPropertyListener(q, kAudioQueueProperty_IsRunning, Self.runningListener, me)
        if let deviceName {
            let name: CFString? = deviceName as CFString
            _ = withUnsafePointer(to: name) { AudioQueueSetProperty(q, kAudioQueueProperty_CurrentDevice, $0, UInt32(MemoryLayout<CFString?>.size)) }
        }
        for _ in 0..<4 {
            var b: AudioQueueBufferRef?
            guard AudioQueueAllocateBuffer(q, UInt32(decoder.bufferFrames * 4 * channels), &b) == noErr, let b else {
                AudioQueueDispose(q, true)
                return false
            }
            idle.append(b)
        }
        AudioQueueSetParameter(q, kAudioQueueParam_Volume, volume)
        AudioQueueSetParameter(q, kAudioQueueParam_Pan, pan)
        meter.apply(to: q)
        queue = q
        return true
    }

    /// The queue's callback: a buffer has played. Hands it the buffer decoded ahead (or decodes
    /// it now), then decodes the next one, unless playback is winding down. Runs on the queue's
    /// callback thread; decodes without `lock`.
    private func refill(_ q: AudioQueueRef, _ buffer: AudioQueueBufferRef) {
        lock.lock()
        guard feeding, !ended, q == queue else {
            idle.append(buffer)
            lock.unlock()
            return
        }
        lock.unlock()
        decoder.lock.lock()
        defer { decoder.lock.unlock() }
        let speed = withLock { enableRate ? Double(rate) : 1 }
        fill(buffer, q, speed: speed)
        if withLock({ feeding && !ended && q == queue }) { decoder.decodeAhead(speed: speed) }
    }

    /// Decodes into `buffer` and enqueues it; at the end of the sound asks the queue to stop once
    /// everything enqueued has played. A buffer not enqueued goes back to `idle`. Call with the
    /// decoder's lock held and not `lock`: the decoding happens before `lock` is taken.
    private func fill(_ buffer: AudioQueueBufferRef, _ q: AudioQueueRef, speed: Double) {
        let out = buffer.pointee.mAudioData.assumingMemoryBound(to: Float.self)
        let (produced, madeAt) = decoder.produce(into: out, speed: speed)
        if let failure = decoder.takeFailure() { report(failure) }
        lock.lock()
        if decoder.error != noErr && decodeError == noErr { decodeError = decoder.error }
        guard feeding, !ended, q == queue else {
            idle.append(buffer)
            lock.unlock()
            return
        }
        guard produced > 0 else {
            finishFeeding(q)
            idle.append(buffer)
            lock.unlock()
            return
        }
        lock.unlock()
        // Enqueued without `lock` too (converting the buffer is most of the time it takes): stop
        // and seek turn `feeding` off only while holding the decoder's lock, held here, so the
        // buffer is still wanted; a dispose meanwhile makes the enqueue fail.
        buffer.pointee.mAudioDataByteSize = UInt32(produced * 4 * channels)
        var actual = AudioTimeStamp()
        let status = AudioQueueEnqueueBufferWithParameters(q, buffer, 0, nil, 0, 0, 0, nil, nil, &actual)
        lock.lock()
        defer { lock.unlock() }
        guard status == noErr else {
            idle.append(buffer)
            return
        }
        if segments.count >= 16 { segments.removeFirst(segments.count - 15) }
        segments.append(Segment(queueStart: actual.mSampleTime, frames: produced, fileStart: producedPosition, rate: madeAt))
        producedPosition += Double(produced) * madeAt
    }

    /// The sound is exhausted: stop after what is enqueued has played. Call with `lock` held.
    private func finishFeeding(_ q: AudioQueueRef) {
        ended = true
        if state == .playing {
            AudioQueueStop(q, false)
        } else {
            endNeedsStop = true  // stopped when play() starts the queue
        }
    }

    /// `kAudioQueueProperty_IsRunning` changed: after an asynchronous stop at the end, the
    /// sound has finished.
    private func runningChanged(_ q: AudioQueueRef) {
        var running: UInt32 = 0
        var size = UInt32(4)
        AudioQueueGetProperty(q, kAudioQueueProperty_IsRunning, &running, &size)
        lock.lock()
        guard running == 0, ended, state == .playing, q == queue else {
            lock.unlock()
            return
        }
        state = .idle
        feeding = false
        restPosition = 0
        segments = []
        let success = decodeError == noErr
        lock.unlock()
        owner?.tellFinished(successfully: success)
    }

    private func report(_ error: any Error) {
        owner?.tellDecodeError(error)
    }

    /// Resets decoding to start at `restPosition` and fills every idle buffer. Call with the
    /// decoder's lock held and not `lock`, every buffer idle.
    private func startFeeding(_ q: AudioQueueRef) {
        lock.lock()
        let start = Int64(restPosition.rounded(.down))
        producedPosition = Double(start)
        ended = false
        endNeedsStop = false
        decodeError = noErr
        segments = []
        feeding = true
        let loops = numberOfLoops
        let speed = enableRate ? Double(rate) : 1
        let buffers = idle
        idle = []
        lock.unlock()
        decoder.reset(to: start, loops: loops, keepStretcher: speed != 1)
        for b in buffers { fill(b, q, speed: speed) }
    }

    // MARK: Transport

    /// Waits (without the lock) until buffers handed back by a stop or reset are idle again.
    private func settle() {
        guard let q = withLock({ queue }) else { return }
        _ = AudioQueueWaitForReturnedBuffers(q, timeout: 2)
    }

    func prepare() -> Bool {
        settle()
        decoder.lock.lock()
        defer { decoder.lock.unlock() }
        return prepareDecoding()
    }

    /// Creates the queue, decodes the first buffers and primes. Call with the decoder's lock held
    /// and not `lock`.
    private func prepareDecoding() -> Bool {
        lock.lock()
        guard makeQueue(), let q = queue else {
            lock.unlock()
            return false
        }
        guard state == .idle else {
            lock.unlock()
            return true
        }
        lock.unlock()
        startFeeding(q)
        lock.lock()
        defer { lock.unlock() }
        guard AudioQueuePrime(q, 0, nil) == noErr else { return false }
        state = .prepared
        return true
    }

    func play(at hostTime: UInt64?) -> Bool {
        settle()
        decoder.lock.lock()
        defer { decoder.lock.unlock() }
        if withLock({ state == .playing }) { return true }
        guard prepareDecoding() else { return false }
        lock.lock()
        defer { lock.unlock() }
        if state == .playing { return true }
        guard let q = queue else { return false }
        var when = AudioTimeStamp()
        if let hostTime, hostTime > AudioGetCurrentHostTime() {
            when.mHostTime = hostTime
            when.mFlags = [.hostTimeValid]
        }
        let status = when.mFlags.isEmpty ? AudioQueueStart(q, nil) : AudioQueueStart(q, &when)
        guard status == noErr else { return false }
        state = .playing
        if endNeedsStop {
            endNeedsStop = false
            AudioQueueStop(q, false)
        }
        return true
    }

    func pause() {
        lock.lock()
        defer { lock.unlock() }
        guard state == .playing, let q = queue else { return }
        AudioQueuePause(q)
        state = .paused
    }

    private func interrupted() {
        lock.lock()
        defer { lock.unlock() }
        guard state == .playing, let q = queue else { return }
        AudioQueuePause(q)  // the session pauses the queue already; this makes it certain
        state = .paused
    }

    func stop() {
        // The decoder's lock while feeding stops, so that no buffer is between decoded and
        // enqueued; not while waiting for the buffers (their callbacks may want it).
        decoder.lock.lock()
        lock.lock()
        guard let q = queue, state != .idle else {
            lock.unlock()
            decoder.lock.unlock()
            return
        }
        restPosition = positionLocked()
        state = .idle
        feeding = false
        segments = []
        lock.unlock()
        AudioQueueStop(q, true)
        decoder.lock.unlock()
        _ = AudioQueueWaitForReturnedBuffers(q, timeout: 2)
    }

    var isPlaying: Bool { publishedLock.withLock { published.state == .playing } }

    var currentTime: TimeInterval { position(publishedLock.withLock { published }) / sampleRate }

    /// Copies the state ``currentTime`` and ``isPlaying`` read. Call with `lock` held.
    private func publish() {
        let now = Published(state: state, queue: queue, restPosition: restPosition, segments: segments)
        publishedLock.withLock { published = now }
    }

    /// The file position being heard (frames). Call with `lock` held.
    private func positionLocked() -> Double {
        position(Published(state: state, queue: queue, restPosition: restPosition, segments: segments))
    }

    /// The file position being heard (frames), from a copy of the state it depends on.
    private func position(_ p: Published) -> Double {
        let segments = p.segments
        guard p.state != .idle, let q = p.queue, !segments.isEmpty else { return p.restPosition }
        var now = AudioTimeStamp()
        guard AudioQueueGetCurrentTime(q, nil, &now, nil) == noErr else { return segments[0].fileStart }
        let t = now.mSampleTime
        var playing = segments[0]
        for s in segments where s.queueStart <= t { playing = s }
        let into = min(max(t - playing.queueStart, 0), Double(playing.frames))
        let position = playing.fileStart + into * playing.rate
        return length > 0 ? position.truncatingRemainder(dividingBy: Double(length)) : position
    }

    func seek(to time: TimeInterval) {
        let target = min(max(time.isFinite ? time : 0, 0), duration) * sampleRate
        // As in stop(): feeding stops with the decoder's lock held, the wait is without it.
        decoder.lock.lock()
        lock.lock()
        guard let q = queue, state != .idle else {
            restPosition = target
            lock.unlock()
            decoder.lock.unlock()
            return
        }
        feeding = false
        lock.unlock()
        AudioQueueReset(q)
        decoder.lock.unlock()
        _ = AudioQueueWaitForReturnedBuffers(q, timeout: 2)
        decoder.lock.lock()
        defer { decoder.lock.unlock() }
        lock.lock()
        guard queue == q, state != .idle else {
            lock.unlock()
            return
        }
        restPosition = target
        lock.unlock()
        startFeeding(q)
        lock.lock()
        defer { lock.unlock() }
        if endNeedsStop && state == .playing {
            endNeedsStop = false
            AudioQueueStop(q, false)
        }
    }

    // MARK: Level, pan, meters

    func setVolume(_ value: Float, fade: TimeInterval) {
        lock.lock()
        defer { lock.unlock() }
        volume = min(max(value.isFinite ? value : 0, 0), 1)
        guard let q = queue else { return }
        AudioQueueSetParameter(q, kAudioQueueParam_VolumeRampTime, Float(max(fade, 0)))
        AudioQueueSetParameter(q, kAudioQueueParam_Volume, volume)
    }

    func setPan(_ value: Float) {
        lock.lock()
        defer { lock.unlock() }
        pan = min(max(value.isFinite ? value : 0, -1), 1)
        if let q = queue { AudioQueueSetParameter(q, kAudioQueueParam_Pan, pan) }
    }

    var isMeteringEnabled: Bool {
        get { withLock { meter.isEnabled } }
        set { withLock { meter.setEnabled(newValue, queue: queue) } }
    }

    func updateMeters() { withLock { meter.update(from: queue) } }

    func meterValue(_ channel: Int, peak: Bool) -> Float { withLock { meter.value(channel: channel, peak: peak) } }
}

/// Carries an error to the delegate queue.
private struct UncheckedError: @unchecked Sendable {
    let error: any Error
}
