import AudioHAL
import Foundation

/// The process's system sounds: their samples, where they are uploaded, and their completions.
final class SystemSounds: Sendable {
    static let shared = SystemSounds()
    /// Apple's limit on a system sound's length.
    static let maximumDuration = 30.0

    struct Completion: @unchecked Sendable {
        let routine: AudioServicesSystemSoundCompletionProc
        let clientData: UnsafeMutableRawPointer?
        let runLoop: RunLoop
        let mode: RunLoop.Mode
    }

    private struct Sound {
        let name: String
        let format: HALStreamFormat
        let samples: [Float]
        var isUISound = true
        var completion: Completion?
        /// The backend the samples were uploaded to: after a server restart the cache is empty.
        var uploadedTo: (any AudioBackend)?
    }

    private struct State {
        var sounds: [SystemSoundID: Sound] = [:]
        var next: SystemSoundID = 0x1001
    }
    private let state = Mutex(State())
    /// Where completion blocks run.
    private let queue = DispatchQueue(label: "AudioServices completions")

    func create(_ url: URL, _ out: UnsafeMutablePointer<SystemSoundID>) -> OSStatus {
        let decoded: (HALStreamFormat, [Float])
        switch Self.decode(url) {
        case .success(let value): decoded = value
        case .failure(let failure): return failure.status
        }
        let id = state.withLock { s -> SystemSoundID in
            let id = s.next
            s.next += 1
            s.sounds[id] = Sound(name: "openavf.\(getpid()).\(id)", format: decoded.0, samples: decoded.1)
            return id
        }
        // Uploaded now, so that the first play starts as fast as the others.
        guard (try? upload(id)) != nil else {
            _ = state.withLock { $0.sounds.removeValue(forKey: id) }
            return kAudioServicesSystemSoundUnspecifiedError
        }
        out.pointee = id
        return kAudioServicesNoError
    }

    /// The file's audio as interleaved float at its own rate and channel count.
    private static func decode(_ url: URL) -> Result<(HALStreamFormat, [Float]), Failure> {
        var file: ExtAudioFileRef?
        let opened = ExtAudioFileOpenURL(url, &file)
        guard opened == noErr, let file else { return .failure(Failure(status: opened)) }
        defer { ExtAudioFileDispose(file) }
        var fileFormat = AudioStreamBasicDescription()
        var size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
        var status = ExtAudioFileGetProperty(file, kExtAudioFileProperty_FileDataFormat, &size, &fileFormat)
        guard status == noErr else { return .failure(Failure(status: status)) }
        var length: Int64 = 0
        size = 8
        status = ExtAudioFileGetProperty(file, kExtAudioFileProperty_FileLengthFrames, &size, &length)
        guard status == noErr else { return .failure(Failure(status: status)) }
        guard Double(length) <= maximumDuration * fileFormat.mSampleRate else { return .failure(Failure(status: kAudioServicesSystemSoundExceededMaximumDurationError)) }
        let channels = Int(fileFormat.mChannelsPerFrame)
        var client = AudioStreamBasicDescription(
            mSampleRate: fileFormat.mSampleRate, mFormatID: kAudioFormatLinearPCM, mFormatFlags: kAudioFormatFlagsNativeFloatPacked,
            mBytesPerPacket: UInt32(4 * channels), mFramesPerPacket: 1, mBytesPerFrame: UInt32(4 * channels), mChannelsPerFrame: UInt32(channels),
            mBitsPerChannel: 32, mReserved: 0)
        status = ExtAudioFileSetProperty(file, kExtAudioFileProperty_ClientDataFormat, UInt32(MemoryLayout<AudioStreamBasicDescription>.size), &client)
        guard status == noErr else { return .failure(Failure(status: status)) }
        var samples = [Float](repeating: 0, count: max(Int(length), 1) * channels)
        var read = 0
        while read < Int(length) {
            var frames = UInt32(Int(length) - read)
            let got = samples.withUnsafeMutableBufferPointer { p -> OSStatus in
                var list = AudioBufferList(
                    mNumberBuffers: 1,
                    mBuffers: AudioBuffer(mNumberChannels: UInt32(channels), mDataByteSize: frames * UInt32(4 * channels), mData: p.baseAddress! + read * channels))
                return ExtAudioFileRead(file, &frames, &list)
            }
            guard got == noErr else { return .failure(Failure(status: got)) }
            if frames == 0 { break }
            read += Int(frames)
        }
        guard read > 0 else { return .failure(Failure(status: kAudioServicesSystemSoundUnspecifiedError)) }
        samples.removeLast(samples.count - read * channels)
        return .success((HALStreamFormat(sampleRate: fileFormat.mSampleRate, channels: channels), samples))
    }

    /// Uploads the sound to the current backend unless it is there; returns the backend, its
    /// cache name and whether it is a UI sound.
    private func upload(_ id: SystemSoundID) throws(HALError) -> (any AudioBackend, String, Bool)? {
        let backend = try AudioSystem.current.backend()
        guard let sound = state.withLock({ $0.sounds[id] }) else { return nil }
        if sound.uploadedTo !== backend {
            try backend.uploadSample(sound.name, format: sound.format, samples: sound.samples)
            state.withLock { $0.sounds[id]?.uploadedTo = backend }
        }
        return (backend, sound.name, sound.isUISound)
    }

    func dispose(_ id: SystemSoundID) -> OSStatus {
        guard let sound = state.withLock({ $0.sounds.removeValue(forKey: id) }) else { return kAudioServicesSystemSoundUnspecifiedError }
        sound.uploadedTo?.removeSample(sound.name)
        return kAudioServicesNoError
    }

    func play(_ id: SystemSoundID, completion: SoundCompletionBlock?) {
        let routine = state.withLock { $0.sounds[id]?.completion }
        let queue = queue
        /// Runs what waits for the end: the block on the private queue, the routine on its run loop.
        @Sendable func ended() {
            if let completion { queue.async { completion.value() } }
            if let routine {
                routine.runLoop.perform(inModes: [routine.mode]) { routine.routine(id, routine.clientData) }
            }
        }
        if id == kSystemSoundID_Vibrate || id == kSystemSoundID_FlashScreen { return ended() }
        if id == kSystemSoundID_UserPreferredAlert {
            guard let backend = try? AudioSystem.current.backend() else { return ended() }
            return backend.playSample("bell-window-system", device: nil, purpose: .announcement) { _ in ended() }
        }
        guard let (backend, name, isUI) = try? upload(id) else { return ended() }
        backend.playSample(name, device: nil, purpose: isUI ? .announcement : .mixable) { _ in ended() }
    }

    func setCompletion(_ id: SystemSoundID, _ completion: Completion?) -> OSStatus {
        state.withLock { s in
            guard s.sounds[id] != nil else { return kAudioServicesSystemSoundUnspecifiedError }
            s.sounds[id]?.completion = completion
            return kAudioServicesNoError
        }
    }

    /// Whether the sound is a UI sound; `nil` for an ID that is no sound.
    func isUISound(_ id: SystemSoundID) -> Bool? { state.withLock { $0.sounds[id]?.isUISound } }
    func setUISound(_ id: SystemSoundID, _ on: Bool) { state.withLock { $0.sounds[id]?.isUISound = on } }
}

/// A file that cannot be a system sound, with the status that says why.
struct Failure: Error {
    let status: OSStatus
}

/// A completion block of `AudioServicesPlaySystemSoundWithCompletion` (not `Sendable` by Apple's
/// signature), called once on the private completion queue.
struct SoundCompletionBlock: @unchecked Sendable {
    let value: () -> Void
}
