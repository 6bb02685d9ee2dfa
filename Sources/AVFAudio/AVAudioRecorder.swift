import AudioToolbox
public import Foundation

/// What an ``AVAudioRecorder`` tells its delegate. Both methods have empty default implementations.
///
/// Calls arrive on a serial queue private to the recorder rather than the main thread; the
/// protocol is Sendable, as Apple's is (unlike ``AVAudioPlayerDelegate``, it is not main-actor
/// isolated), so a conforming type takes them on any thread.
public protocol AVAudioRecorderDelegate: AnyObject, Sendable {
    /// The recording ended (``AVAudioRecorder/stop()`` or the duration was reached) and the file is
    /// closed; `flag` is `false` when encoding or writing failed.
    func audioRecorderDidFinishRecording(_ recorder: AVAudioRecorder, successfully flag: Bool)
    /// Encoding or writing failed; recording stops.
    func audioRecorderEncodeErrorDidOccur(_ recorder: AVAudioRecorder, error: (any Error)?)
}

extension AVAudioRecorderDelegate {
    public func audioRecorderDidFinishRecording(_ recorder: AVAudioRecorder, successfully flag: Bool) {}
    public func audioRecorderEncodeErrorDidOccur(_ recorder: AVAudioRecorder, error: (any Error)?) {}
}

/// Records from the sound server's input into a file: Apple's `AVAudioRecorder`.
///
/// An input audio queue captures in the file's format (its codec encodes on the queue's thread),
/// and each buffer's packets are written to the file as they arrive. A CAF of a constant-size
/// format (linear PCM, IMA4, µ-law, A-law) and WAVE/AIFF files stay readable up to the last buffer
/// if the process dies; variable-size formats in CAF (AAC, ALAC) and M4A need ``stop()``.
/// Interruptions of the audio session pause recording.
open class AVAudioRecorder: NSObject, @unchecked Sendable {
    public let url: URL
    /// The file's format.
    public let format: AVAudioFormat
    /// The recorder's settings: the format's keys, with the file type and encoder keys given.
    public let settings: [String: Any]
    public weak var delegate: (any AVAudioRecorderDelegate)?

    private let lock = NSLock()
    private let fileType: AudioFileTypeID
    private let bitRate: Int?
    private let quality: Int?
    private let delegateQueue = DispatchQueue(label: "AVAudioRecorder.delegate")
    private var interruptions: InterruptionWatch?
    private var file: AudioFileID?
    private var queue: AudioQueueRef?
    /// The queue's completed description (frames and bytes per packet), read once when prepared.
    private var packetFormat = AudioStreamBasicDescription()
    private var recording = false
    private var paused = false
    private var packetIndex: Int64 = 0
    private var framesWritten: Int64 = 0
    /// Frames to record before stopping by itself (``record(forDuration:)``).
    private var limitFrames: Int64?
    private var failure: (any Error)?
    private var finishing = false
    private var meter: AVAudioPowerMeter

    /// `settings` uses Apple's keys: `AVFormatIDKey`, `AVSampleRateKey`, `AVNumberOfChannelsKey`,
    /// `AVEncoderBitDepthHintKey`, `AVEncoderAudioQualityKey` (an ``AVAudioQuality`` or its raw
    /// value), `AVEncoderBitRateKey`, the `AVLinearPCM…` keys and `AVAudioFileTypeKey`. Without a
    /// file type the URL's extension decides; a type that cannot hold the format (a .wav of AAC)
    /// throws `kAudioFileUnsupportedDataFormatError`.
    public init(url: URL, settings: [String: Any]) throws {
        var settings = settings
        if settings[AVSampleRateKey] == nil { settings[AVSampleRateKey] = 44100.0 }
        if settings[AVNumberOfChannelsKey] == nil { settings[AVNumberOfChannelsKey] = 1 }
        if let hint = settingsNumber(settings[AVEncoderBitDepthHintKey]), settings[AVLinearPCMBitDepthKey] == nil,
            (settingsNumber(settings[AVFormatIDKey]).map { AudioFormatID($0) } ?? kAudioFormatLinearPCM) == kAudioFormatLinearPCM
        {
            settings[AVLinearPCMBitDepthKey] = hint
        }
        guard var format = AVAudioFormat(settings: settings) else {
            throw statusError(kAudioFormatUnsupportedDataFormatError, "the settings do not describe a format: \(settings)")
        }
        let type: AudioFileTypeID
        if let t = settingsNumber(settings[AVAudioFileTypeKey]) {
            type = AudioFileTypeID(t)
        } else if let t = AudioFileTypeForExtension(url.pathExtension) {
            type = t
        } else {
            throw statusError(kAudioFileUnsupportedFileTypeError, "cannot tell the file type of '\(url.lastPathComponent)': give AVAudioFileTypeKey or a known extension")
        }
        var desc = format.streamDescription.pointee
        // Linear PCM in AIFF is big-endian and in WAVE little-endian, whatever the keys said.
        if desc.mFormatID == kAudioFormatLinearPCM && desc.mBitsPerChannel > 8 {
            if type == kAudioFileAIFFType { desc.mFormatFlags |= kAudioFormatFlagIsBigEndian }
            if type == kAudioFileWAVEType { desc.mFormatFlags &= ~kAudioFormatFlagIsBigEndian }
            format = AVAudioFormat(streamDescription: &desc, channelLayout: format.channelLayout) ?? format
        }
        try Self.check(type: type, holds: desc.mFormatID, url: url)
        self.url = url
        self.format = format
        fileType = type
        bitRate = settingsNumber(settings[AVEncoderBitRateKey]).map { Int($0) }
            ?? settingsNumber(settings[AVEncoderBitRatePerChannelKey]).map { Int($0) * Int(desc.mChannelsPerFrame) }
        quality = settingsNumber(settings[AVEncoderAudioQualityKey]).map { Int($0) }
        var all = format.settings
        all[AVAudioFileTypeKey] = NSNumber(value: type)
        for key in [AVEncoderBitRateKey, AVEncoderAudioQualityKey, AVEncoderBitDepthHintKey, AVEncoderBitRatePerChannelKey] {
            if let v = settingsNumber(settings[key]) { all[key] = NSNumber(value: Int(v)) }
        }
        self.settings = all
        meter = AVAudioPowerMeter(channels: Int(desc.mChannelsPerFrame))
        super.init()
        interruptions = InterruptionWatch { [weak self] in self?.pause() }
    }

    /// Records in `format` into the file `url` names.
    public convenience init(url: URL, format: AVAudioFormat) throws {
        try self.init(url: url, settings: format.settings)
    }

    deinit {
        interruptions = nil
        lock.lock()
        let q = queue
        queue = nil
        lock.unlock()
        if let q { AudioQueueDispose(q, true) }
        closeFile()
    }

    private static func check(type: AudioFileTypeID, holds id: AudioFormatID, url: URL) throws {
        var t = type
        var size: UInt32 = 0
        guard AudioFileGetGlobalInfoSize(kAudioFileGlobalInfo_AvailableFormatIDs, 4, &t, &size) == noErr, size > 0 else {
            throw statusError(kAudioFileUnsupportedFileTypeError, "'\(type.fourCharCodeString)' files cannot be written")
        }
        var ids = [AudioFormatID](repeating: 0, count: Int(size) / 4)
        _ = AudioFileGetGlobalInfo(kAudioFileGlobalInfo_AvailableFormatIDs, 4, &t, &size, &ids)
        guard ids.contains(id) else {
            throw statusError(
                kAudioFileUnsupportedDataFormatError,
                "a '\(type.fourCharCodeString)' file (\(url.lastPathComponent)) cannot hold '\(id.fourCharCodeString)' audio; it holds \(ids.map { "'\($0.fourCharCodeString)'" }.joined(separator: ", "))")
        }
    }

    // MARK: Preparing

    /// Creates (or empties) the file and opens the input, so that ``record()`` starts at once.
    @discardableResult
    open func prepareToRecord() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        return prepareLocked()
    }

    private func prepareLocked() -> Bool {
        if queue != nil && file != nil { return true }
        var desc = format.streamDescription.pointee
        var q: AudioQueueRef?
        let me = Unmanaged.passUnretained(self).toOpaque()
        let status = AudioQueueNewInput(&desc, Self.callback, me, nil, nil, 0, &q)
        guard status == noErr, let q else { return false }
        AudioQueueSetEncoderOptions(q, bitRate: bitRate, quality: quality)
        var completed = desc
        var size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
        AudioQueueGetProperty(q, kAudioQueueProperty_StreamDescription, &completed, &size)
        var f: AudioFileID?
        let created = AudioFileCreateWithURL(url as CFURL, fileType, &completed, .eraseFile, &f)
        guard created == noErr, let f else {
            AudioQueueDispose(q, true)
            return false
        }
        // Buffers of 50 ms, whole packets: four of them ride out a slow disk for 150 ms.
        let framesPerPacket = max(Int(completed.mFramesPerPacket), 1)
        let packets = max(1, Int((completed.mSampleRate * 0.05).rounded(.up)) / framesPerPacket + 1)
        var maxPacket: UInt32 = 0
        size = 4
        AudioQueueGetProperty(q, kAudioQueueProperty_MaximumOutputPacketSize, &maxPacket, &size)
        let variable = completed.mBytesPerPacket == 0
        for _ in 0..<4 {
            var b: AudioQueueBufferRef?
            let bytes = UInt32(packets) * max(maxPacket, 1)
            let allocated = variable
                ? AudioQueueAllocateBufferWithPacketDescriptions(q, bytes, UInt32(packets), &b)
                : AudioQueueAllocateBuffer(q, bytes, &b)
            guard allocated == noErr, let b, AudioQueueEnqueueBuffer(q, b, 0, nil) == noErr else {
                AudioQueueDispose(q, true)
                AudioFileClose(f)
                return false
            }
        }
        meter.apply(to: q)
        writeCookie(q, f)
        queue = q
        file = f
        packetFormat = completed
        packetIndex = 0
        framesWritten = 0
        failure = nil
        finishing = false
        meter.clear()
        return true
    }

    private func writeCookie(_ q: AudioQueueRef, _ f: AudioFileID) {
        var size: UInt32 = 0
        guard AudioQueueGetPropertySize(q, kAudioQueueProperty_MagicCookie, &size) == noErr, size > 0 else { return }
        var cookie = [UInt8](repeating: 0, count: Int(size))
        guard AudioQueueGetProperty(q, kAudioQueueProperty_MagicCookie, &cookie, &size) == noErr, size > 0 else { return }
        _ = AudioFileSetProperty(f, kAudioFilePropertyMagicCookieData, size, cookie)
    }

    // MARK: Recording

    /// Starts or resumes recording. `false` when the file cannot be created or no input answers.
    @discardableResult
    open func record() -> Bool { start(at: nil, duration: nil) }

    /// Starts recording at `time`, a value of ``deviceCurrentTime``: audio before it is not recorded.
    @discardableResult
    open func record(atTime time: TimeInterval) -> Bool { start(at: time, duration: nil) }

    /// Records `duration` seconds, then stops by itself (the delegate hears it).
    @discardableResult
    open func record(forDuration duration: TimeInterval) -> Bool { start(at: nil, duration: duration) }

    @discardableResult
    open func record(atTime time: TimeInterval, forDuration duration: TimeInterval) -> Bool { start(at: time, duration: duration) }

    private func start(at time: TimeInterval?, duration: TimeInterval?) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        if recording { return true }
        guard prepareLocked(), let q = queue else { return false }
        if let duration {
            guard duration > 0, duration.isFinite else { return false }
            limitFrames = framesWritten + Int64((duration * format.sampleRate).rounded())
        }
        var when = AudioTimeStamp()
        if let time, time > deviceCurrentTime {
            when.mHostTime = UInt64(time * 1e9)
            when.mFlags = [.hostTimeValid]
        }
        let status = when.mFlags.isEmpty ? AudioQueueStart(q, nil) : AudioQueueStart(q, &when)
        guard status == noErr else { return false }  // no input answers; the prepared file stays
        recording = true
        paused = false
        return true
    }

    /// Pauses; ``record()`` resumes into the same file.
    open func pause() {
        lock.lock()
        defer { lock.unlock() }
        guard recording, let q = queue else { return }
        AudioQueuePause(q)
        recording = false
        paused = true
    }

    /// Stops and closes the file; the delegate's `audioRecorderDidFinishRecording` follows.
    open func stop() { finish(successfully: true) }

    /// Deletes the file; only once stopped (`false` while recording or paused, or when there is
    /// nothing to delete).
    @discardableResult
    open func deleteRecording() -> Bool {
        lock.lock()
        let busy = queue != nil
        lock.unlock()
        guard !busy else { return false }
        return unlink(url.path) == 0
    }

    open var isRecording: Bool {
        lock.lock()
        defer { lock.unlock() }
        return recording
    }

    /// Seconds recorded so far: time spent paused does not count. 0 when stopped.
    open var currentTime: TimeInterval {
        lock.lock()
        defer { lock.unlock() }
        guard let q = queue, recording || paused else { return 0 }
        var now = AudioTimeStamp()
        let captured = AudioQueueGetCurrentTime(q, nil, &now, nil) == noErr ? Int64(now.mSampleTime) : 0
        var frames = max(captured, framesWritten)
        if let limitFrames { frames = min(frames, limitFrames) }  // record(forDuration:) stops there
        return Double(frames) / format.sampleRate
    }

    /// The input device's clock in seconds: the host clock, as for ``AVAudioPlayer/deviceCurrentTime``.
    open var deviceCurrentTime: TimeInterval { Double(AudioGetCurrentHostTime()) / 1e9 }

    // MARK: Metering

    open var isMeteringEnabled: Bool {
        get { lock.withLock { meter.isEnabled } }
        set { lock.withLock { meter.setEnabled(newValue, queue: queue) } }
    }

    /// Refreshes the meters with what was captured since the previous call.
    open func updateMeters() { lock.withLock { meter.update(from: queue) } }

    /// Average power of `channelNumber` in dBFS (−160 silence, a full-scale sine −3.01).
    open func averagePower(forChannel channelNumber: Int) -> Float { lock.withLock { meter.value(channel: channelNumber, peak: false) } }

    /// Peak power of `channelNumber` in dBFS, held for half a second and then falling.
    open func peakPower(forChannel channelNumber: Int) -> Float { lock.withLock { meter.value(channel: channelNumber, peak: true) } }

    // MARK: Queue callback (the queue's thread)

    private static let callback: AudioQueueInputCallback = { userData, queue, buffer, _, packetCount, descriptions in
        Unmanaged<AVAudioRecorder>.fromOpaque(userData!).takeUnretainedValue().captured(queue, buffer, packetCount, descriptions)
    }

    private func captured(
        _ q: AudioQueueRef, _ buffer: AudioQueueBufferRef, _ packetCount: UInt32, _ descriptions: UnsafePointer<AudioStreamPacketDescription>?
    ) {
        lock.lock()
        guard let f = file, q == queue, failure == nil else {
            lock.unlock()
            return
        }
        let completed = packetFormat
        let framesPerPacket = Int64(max(completed.mFramesPerPacket, 1))
        var packets = packetCount
        if packets == 0 && completed.mBytesPerPacket > 0 { packets = buffer.pointee.mAudioDataByteSize / completed.mBytesPerPacket }
        // record(forDuration:): whole packets up to the limit.
        var reachedLimit = false
        if let limit = limitFrames {
            let room = max(0, limit - framesWritten)
            let allowed = (room + framesPerPacket - 1) / framesPerPacket
            if Int64(packets) >= allowed {
                packets = UInt32(allowed)
                reachedLimit = true
            }
        }
        var bytes: UInt32 = 0
        if packets > 0 {
            if let descriptions {
                let last = descriptions[Int(packets) - 1]
                bytes = UInt32(last.mStartOffset) + last.mDataByteSize
            } else {
                bytes = packets * completed.mBytesPerPacket
            }
            var n = packets
            let status = AudioFileWritePackets(f, false, bytes, descriptions, packetIndex, &n, buffer.pointee.mAudioData)
            if status != noErr {
                let error = statusError(status, "writing \(url.lastPathComponent) failed: \(AudioFileLastFailureReason())")
                failure = error
                lock.unlock()
                delegateQueue.async { [weak self] in
                    guard let self else { return }
                    self.delegate?.audioRecorderEncodeErrorDidOccur(self, error: error)
                }
                finishAsync(successfully: false)
                return
            }
            packetIndex += Int64(n)
            framesWritten += Int64(n) * framesPerPacket
        }
        let keepGoing = !reachedLimit && (recording || paused) && !finishing
        if keepGoing { AudioQueueEnqueueBuffer(q, buffer, 0, nil) }
        lock.unlock()
        if reachedLimit { finishAsync(successfully: true) }
    }

    /// Finishes from the queue's thread, which must not wait for its own callbacks.
    private func finishAsync(successfully: Bool) {
        delegateQueue.async { [weak self] in self?.finish(successfully: successfully, notifyOnThisQueue: true) }
    }

    // MARK: Finishing

    private func finish(successfully: Bool, notifyOnThisQueue: Bool = false) {
        lock.lock()
        guard let q = queue, !finishing else {
            lock.unlock()
            return
        }
        finishing = true
        let wasActive = recording || paused || file != nil
        lock.unlock()
        // Immediate: what was captured so far comes back through the callback and is written.
        AudioQueueStop(q, true)
        _ = AudioQueueWaitForReturnedBuffers(q, timeout: 2)
        lock.lock()
        recording = false
        paused = false
        limitFrames = nil
        queue = nil
        let ok = successfully && failure == nil
        if let f = file { writeCookie(q, f) }
        lock.unlock()
        AudioQueueDispose(q, true)
        closeFile()
        guard wasActive else { return }
        let tell: @Sendable () -> Void = { [weak self] in
            guard let self else { return }
            self.delegate?.audioRecorderDidFinishRecording(self, successfully: ok)
        }
        if notifyOnThisQueue { tell() } else { delegateQueue.async(execute: tell) }
    }

    private func closeFile() {
        lock.lock()
        let f = file
        file = nil
        lock.unlock()
        if let f { AudioFileClose(f) }
    }
}
