public import Foundation

/// An audio file read or written in frames of a PCM *processing format*, whatever the file holds.
///
/// Built on ExtAudioFile. Errors are `NSError`s in `NSOSStatusErrorDomain` with Apple's codes.
/// Reading at the end of the file is not an error: the buffer comes back with `frameLength` 0.
open class AVAudioFile: NSObject, @unchecked Sendable {
    public let url: URL
    public let fileFormat: AVAudioFormat
    public let processingFormat: AVAudioFormat
    private var ext: ExtAudioFileRef?
    private let writing: Bool
    private var written: AVAudioFramePosition = 0

    /// Opens `fileURL` for reading in the standard format (deinterleaved float).
    public convenience init(forReading fileURL: URL) throws {
        try self.init(forReading: fileURL, commonFormat: .pcmFormatFloat32, interleaved: false)
    }

    public init(forReading fileURL: URL, commonFormat format: AVAudioCommonFormat, interleaved: Bool) throws {
        url = fileURL
        writing = false
        var ref: ExtAudioFileRef?
        let status = ExtAudioFileOpenURL(fileURL as CFURL, &ref)
        guard status == noErr, let ref else { throw statusError(status, "cannot open \(fileURL.path): \(ExtAudioFileLastFailureReason())") }
        ext = ref
        var file = AudioStreamBasicDescription()
        var size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
        _ = ExtAudioFileGetProperty(ref, kExtAudioFileProperty_FileDataFormat, &size, &file)
        let layout = Self.channelLayout(ref)
        guard let fileFormat = AVAudioFormat(streamDescription: &file, channelLayout: layout) ?? AVAudioFormat(streamDescription: &file) else {
            ExtAudioFileDispose(ref)
            throw statusError(kAudioFileUnsupportedDataFormatError, "\(fileURL.path) has a format AVAudioFormat cannot describe")
        }
        guard format != .otherFormat,
            let processing = AVAudioFormat.common(format, sampleRate: file.mSampleRate, channels: file.mChannelsPerFrame, interleaved: interleaved, layout: fileFormat.channelLayout)
        else {
            ExtAudioFileDispose(ref)
            throw statusError(kAudio_ParamError, "the processing format must be a common PCM format")
        }
        self.fileFormat = fileFormat
        processingFormat = processing
        super.init()
        try setClientFormat()
    }

    /// Creates `fileURL` (replacing it) with the format the settings describe; the file type comes
    /// from `AVAudioFileTypeKey` or the name's extension. Frames are written in the standard format.
    public convenience init(forWriting fileURL: URL, settings: [String: Any]) throws {
        try self.init(forWriting: fileURL, settings: settings, commonFormat: .pcmFormatFloat32, interleaved: false)
    }

    public init(forWriting fileURL: URL, settings: [String: Any], commonFormat format: AVAudioCommonFormat, interleaved: Bool) throws {
        url = fileURL
        writing = true
        guard let requested = AVAudioFormat(settings: settings) else {
            throw statusError(kAudioFileUnsupportedDataFormatError, "the settings do not describe a format: \(settings)")
        }
        let type: AudioFileTypeID
        if let t = settingsNumber(settings[AVAudioFileTypeKey]) {
            type = AudioFileTypeID(t)
        } else if let t = AudioFileTypeForExtension(fileURL.pathExtension) {
            type = t
        } else {
            throw statusError(kAudioFileUnsupportedFileTypeError, "cannot tell the file type of \(fileURL.lastPathComponent); set AVAudioFileTypeKey")
        }
        var desc = requested.streamDescription.pointee
        // Files hold interleaved frames: settings of a non-interleaved format (the engine's
        // standard format, `node.outputFormat(forBus:).settings`) describe the same samples, as
        // on Apple's platforms.
        if desc.mFormatID == kAudioFormatLinearPCM && desc.mFormatFlags & kAudioFormatFlagIsNonInterleaved != 0 {
            desc.mFormatFlags &= ~kAudioFormatFlagIsNonInterleaved
            desc.mBytesPerFrame *= desc.mChannelsPerFrame
            desc.mBytesPerPacket = desc.mBytesPerFrame
        }
        var ref: ExtAudioFileRef?
        let status = ExtAudioFileCreateWithURL(fileURL as CFURL, type, &desc, requested.channelLayout?.layout, AudioFileFlags.eraseFile.rawValue, &ref)
        guard status == noErr, let ref else { throw statusError(status, "cannot create \(fileURL.path): \(ExtAudioFileLastFailureReason())") }
        ext = ref
        var actual = AudioStreamBasicDescription()
        var size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
        _ = ExtAudioFileGetProperty(ref, kExtAudioFileProperty_FileDataFormat, &size, &actual)
        fileFormat = AVAudioFormat(streamDescription: &actual, channelLayout: requested.channelLayout) ?? requested
        guard format != .otherFormat,
            let processing = AVAudioFormat.common(format, sampleRate: desc.mSampleRate, channels: desc.mChannelsPerFrame, interleaved: interleaved, layout: requested.channelLayout)
        else {
            ExtAudioFileDispose(ref)
            throw statusError(kAudio_ParamError, "the processing format must be a common PCM format")
        }
        processingFormat = processing
        super.init()
        try setClientFormat()
        // Encoder settings: bit rate and quality.
        var converter: AudioConverterRef?
        size = UInt32(MemoryLayout<AudioConverterRef?>.size)
        if desc.mFormatID != kAudioFormatLinearPCM, ExtAudioFileGetProperty(ref, kExtAudioFileProperty_AudioConverter, &size, &converter) == noErr, let converter {
            var rate = settingsNumber(settings[AVEncoderBitRateKey]).map { UInt32($0) }
            if rate == nil, let perChannel = settingsNumber(settings[AVEncoderBitRatePerChannelKey]) { rate = UInt32(perChannel) * desc.mChannelsPerFrame }
            if var rate { _ = AudioConverterSetProperty(converter, kAudioConverterEncodeBitRate, 4, &rate) }
            if var quality = settingsNumber(settings[AVEncoderAudioQualityKey]).map({ UInt32($0) }) {
                _ = AudioConverterSetProperty(converter, kAudioConverterCodecQuality, 4, &quality)
            }
            _ = ExtAudioFileSetProperty(ref, kExtAudioFileProperty_ConverterConfig, 0, nil)
        }
    }

    deinit { close() }

    private static func channelLayout(_ ref: ExtAudioFileRef) -> AVAudioChannelLayout? {
        var size: UInt32 = 0
        guard ExtAudioFileGetPropertyInfo(ref, kExtAudioFileProperty_FileChannelLayout, &size, nil) == noErr, size >= 12 else { return nil }
        let bytes = UnsafeMutableRawPointer.allocate(byteCount: Int(max(size, UInt32(MemoryLayout<AudioChannelLayout>.size))), alignment: 8)
        defer { bytes.deallocate() }
        bytes.initializeMemory(as: UInt8.self, repeating: 0, count: Int(max(size, UInt32(MemoryLayout<AudioChannelLayout>.size))))
        guard ExtAudioFileGetProperty(ref, kExtAudioFileProperty_FileChannelLayout, &size, bytes) == noErr else { return nil }
        return AVAudioChannelLayout(layout: bytes.assumingMemoryBound(to: AudioChannelLayout.self))
    }

    private func setClientFormat() throws {
        guard let ext else { return }
        var client = processingFormat.streamDescription.pointee
        let status = ExtAudioFileSetProperty(ext, kExtAudioFileProperty_ClientDataFormat, UInt32(MemoryLayout<AudioStreamBasicDescription>.size), &client)
        guard status == noErr else {
            ExtAudioFileDispose(ext)
            self.ext = nil
            throw statusError(status, "cannot convert between \(fileFormat) and \(processingFormat): \(ExtAudioFileLastFailureReason())")
        }
    }

    /// Frames in the file, in the file's sample rate.
    public var length: AVAudioFramePosition {
        guard let ext else { return writing ? written : 0 }
        var frames: Int64 = 0
        var size = UInt32(8)
        _ = ExtAudioFileGetProperty(ext, kExtAudioFileProperty_FileLengthFrames, &size, &frames)
        return frames
    }

    /// Where the next read starts (or the next write goes), in the file's frames. Setting it seeks
    /// (clamped to the file's length). A file being written seeks within what is written, and the
    /// next write overwrites from there, when it holds linear PCM at the processing format's
    /// sample rate; a compressed or resampled file being written keeps its position (the setter
    /// cannot throw; read the property back to see where the next write goes).
    public var framePosition: AVAudioFramePosition {
        get {
            guard let ext else { return writing ? written : 0 }
            var position: Int64 = 0
            _ = ExtAudioFileTell(ext, &position)
            return position
        }
        set {
            guard let ext else { return }
            _ = ExtAudioFileSeek(ext, max(0, min(newValue, length)))
        }
    }

    public var isOpen: Bool { ext != nil }

    /// Reads up to the buffer's capacity.
    public func read(into buffer: AVAudioPCMBuffer) throws {
        try read(into: buffer, frameCount: buffer.frameCapacity)
    }

    /// Reads up to `frames` frames; the buffer must be in the processing format.
    public func read(into buffer: AVAudioPCMBuffer, frameCount frames: AVAudioFrameCount) throws {
        guard let ext, !writing else { throw statusError(kAudioFileNotOpenError, "the file is not open for reading") }
        guard buffer.format.isEqual(processingFormat) else {
            throw statusError(kAudio_ParamError, "the buffer's format \(buffer.format) is not the processing format \(processingFormat)")
        }
        let wanted = min(frames, buffer.frameCapacity)
        buffer.frameLength = buffer.frameCapacity  // full byte sizes for the read
        var done: UInt32 = 0
        let list = buffer.list
        let bytesPerFrame = Int(processingFormat.streamDescription.pointee.mBytesPerFrame)
        let scratch = AudioBufferList.allocate(maximumBuffers: list.count)
        defer { scratch.unsafeMutablePointer.deallocate() }
        while done < wanted {
            for i in 0..<list.count {
                scratch[i] = AudioBuffer(
                    mNumberChannels: list[i].mNumberChannels, mDataByteSize: UInt32(Int(wanted - done) * bytesPerFrame),
                    mData: list[i].mData! + Int(done) * bytesPerFrame)
            }
            var n = wanted - done
            let status = ExtAudioFileRead(ext, &n, scratch.unsafeMutablePointer)
            guard status == noErr else {
                buffer.frameLength = done
                throw statusError(status, "reading \(url.lastPathComponent) failed: \(ExtAudioFileLastFailureReason())")
            }
            if n == 0 { break }
            done += n
        }
        buffer.frameLength = done
    }

    /// Writes the buffer's `frameLength` frames; the buffer must be in the processing format.
    public func write(from buffer: AVAudioPCMBuffer) throws {
        guard let ext, writing else { throw statusError(kAudioFileNotOpenError, "the file is not open for writing") }
        guard buffer.format.isEqual(processingFormat) else {
            throw statusError(kAudio_ParamError, "the buffer's format \(buffer.format) is not the processing format \(processingFormat)")
        }
        guard buffer.frameLength > 0 else { return }
        let status = ExtAudioFileWrite(ext, buffer.frameLength, buffer.audioBufferList)
        guard status == noErr else { throw statusError(status, "writing \(url.lastPathComponent) failed: \(ExtAudioFileLastFailureReason())") }
        written = length  // kept for after close (a write after a seek back may not lengthen the file)
    }

    /// Finishes the file (headers, encoder flush) and closes it; later reads and writes throw.
    public func close() {
        if let ext { ExtAudioFileDispose(ext) }
        ext = nil
    }
}
