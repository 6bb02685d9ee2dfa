import AudioToolbox
public import Foundation

public enum AVAudioConverterInputStatus: Int, Sendable {
    /// The block returned a buffer.
    case haveData = 0
    /// No input for now: the conversion returns what it has, and goes on at the next call.
    case noDataNow = 1
    /// The input has ended: the conversion flushes what it holds.
    case endOfStream = 2
}

public enum AVAudioConverterOutputStatus: Int, Sendable {
    case haveData = 0
    case inputRanDry = 1
    case endOfStream = 2
    case error = 3
}

public enum AVAudioConverterPrimeMethod: Int, Sendable {
    case pre = 0
    case normal = 1
    case none = 2
}

public struct AVAudioConverterPrimeInfo: Sendable {
    public var leadingFrames: AVAudioFrameCount
    public var trailingFrames: AVAudioFrameCount
    public init() { self.init(leadingFrames: 0, trailingFrames: 0) }
    public init(leadingFrames: AVAudioFrameCount, trailingFrames: AVAudioFrameCount) {
        self.leadingFrames = leadingFrames
        self.trailingFrames = trailingFrames
    }
}

/// Asked for input: return a buffer of up to `inNumberOfPackets` packets (frames for linear PCM)
/// and set the status, or nil with `.noDataNow` or `.endOfStream`.
public typealias AVAudioConverterInputBlock = (
    _ inNumberOfPackets: AVAudioPacketCount, _ outStatus: UnsafeMutablePointer<AVAudioConverterInputStatus>
) -> AVAudioBuffer?

/// Converts audio between formats: linear PCM to linear PCM (sample format, rate, channel count,
/// interleaving), and to and from the compressed formats of AudioToolbox's codecs, through an
/// `AudioConverter` (so its output is `AudioConverter`'s for the same settings, bit for bit).
///
/// Not here: `channelMap` other than the identity (setting another is ignored), `downmix` and
/// `dither` are kept but the converter mixes channels whenever the counts differ and never
/// dithers; `sampleRateConverterAlgorithm` is kept and the quality decides; `primeMethod` is kept,
/// the converter always primes as `.normal` for decoders and reports encoders' priming in
/// `primeInfo`; `bitRateStrategy`, `audioSyncPacketFrequency` and the encoder lists are absent.
/// The error pointer is `UnsafeMutablePointer<NSError?>?` (Linux has no `NSErrorPointer`):
/// `error: &error` and `error: nil` read as on Apple's platforms.
open class AVAudioConverter: NSObject, @unchecked Sendable {
    public let inputFormat: AVAudioFormat
    public let outputFormat: AVAudioFormat
    private let converter: AudioConverterRef
    /// The conversion's input ended (the block said `.endOfStream`); cleared by ``reset()``.
    private var inputEnded = false
    private var ranDry = false
    /// The buffer handed to the converter last, kept alive until the next is asked for.
    private var current: AVAudioBuffer?
    private var block: AVAudioConverterInputBlock?
    private var blockError: NSError?

    /// nil when no conversion between the two formats exists here.
    public init?(from fromFormat: AVAudioFormat, to toFormat: AVAudioFormat) {
        var ref: AudioConverterRef?
        guard AudioConverterNew(fromFormat.streamDescription, toFormat.streamDescription, &ref) == noErr, let ref else { return nil }
        inputFormat = fromFormat
        outputFormat = toFormat
        converter = ref
        super.init()
    }

    deinit { AudioConverterDispose(converter) }

    /// Forgets buffered input and codec state: the next conversion starts a new stream.
    open func reset() {
        AudioConverterReset(converter)
        inputEnded = false
        ranDry = false
        current = nil
    }

    // MARK: Settings

    open var channelMap: [NSNumber] = []
    open var downmix = false
    open var dither = false
    open var sampleRateConverterAlgorithm: String? = AVSampleRateConverterAlgorithm_Normal
    open var primeMethod: AVAudioConverterPrimeMethod = .normal

    /// 0 (min) … 127 (max), as `AVAudioQuality`; the converter's `kAudioConverterSampleRateConverterQuality`.
    open var sampleRateConverterQuality: Int {
        get { Int(property(kAudioConverterSampleRateConverterQuality) ?? UInt32(AVAudioQuality.high.rawValue)) }
        set { setProperty(kAudioConverterSampleRateConverterQuality, UInt32(clamping: newValue)) }
    }

    /// The encoder's bit rate, bits per second.
    open var bitRate: Int {
        get { Int(property(kAudioConverterEncodeBitRate) ?? 0) }
        set { setProperty(kAudioConverterEncodeBitRate, UInt32(clamping: newValue)) }
    }

    /// The largest packet the conversion produces, in bytes.
    open var maximumOutputPacketSize: Int { Int(property(kAudioConverterPropertyMaximumOutputPacketSize) ?? 0) }

    open var primeInfo: AVAudioConverterPrimeInfo {
        get {
            var info = AudioConverterPrimeInfo()
            var size = UInt32(MemoryLayout<AudioConverterPrimeInfo>.size)
            AudioConverterGetProperty(converter, kAudioConverterPrimeInfo, &size, &info)
            return AVAudioConverterPrimeInfo(leadingFrames: info.leadingFrames, trailingFrames: info.trailingFrames)
        }
        // Read-only in AudioToolbox here; a value set is not kept.
        set {}
    }

    /// The encoder's magic cookie (compressed output) or the decoder's (compressed input).
    open var magicCookie: Data? {
        get {
            let id = outputFormat.streamDescription.pointee.mFormatID != kAudioFormatLinearPCM
                ? kAudioConverterCompressionMagicCookie : kAudioConverterDecompressionMagicCookie
            var size: UInt32 = 0
            guard AudioConverterGetPropertyInfo(converter, id, &size, nil) == noErr, size > 0 else { return nil }
            var bytes = [UInt8](repeating: 0, count: Int(size))
            guard AudioConverterGetProperty(converter, id, &size, &bytes) == noErr else { return nil }
            return Data(bytes.prefix(Int(size)))
        }
        set {
            guard let newValue else { return }
            var bytes = [UInt8](newValue)
            AudioConverterSetProperty(converter, kAudioConverterDecompressionMagicCookie, UInt32(bytes.count), &bytes)
        }
    }

    private func property(_ id: AudioConverterPropertyID) -> UInt32? {
        var v: UInt32 = 0
        var size = UInt32(4)
        return AudioConverterGetProperty(converter, id, &size, &v) == noErr ? v : nil
    }

    private func setProperty(_ id: AudioConverterPropertyID, _ value: UInt32) {
        var v = value
        AudioConverterSetProperty(converter, id, 4, &v)
    }

    // MARK: Converting

    /// Converts `inputBuffer` into `outputBuffer`, linear PCM to linear PCM at one sample rate
    /// (as Apple's, this call does not change the rate; use the block form).
    open func convert(to outputBuffer: AVAudioPCMBuffer, from inputBuffer: AVAudioPCMBuffer) throws {
        guard inputFormat.sampleRate == outputFormat.sampleRate else {
            throw statusError(kAudioConverterErr_OperationNotSupported, "convert(to:from:) does not change the sample rate; use convert(to:error:withInputFrom:)")
        }
        guard outputBuffer.frameCapacity >= inputBuffer.frameLength else {
            throw statusError(kAudioConverterErr_InvalidOutputSize, "the output buffer holds fewer frames than the input")
        }
        var given = false
        var error: NSError?
        let status = convert(to: outputBuffer, error: &error) { _, status in
            if given {
                status.pointee = .endOfStream
                return nil
            }
            given = true
            status.pointee = .haveData
            return inputBuffer
        }
        reset()
        if status == .error { throw error ?? statusError(kAudioConverterErr_UnspecifiedError, "the conversion failed") }
    }

    /// Fills `outputBuffer` (an `AVAudioPCMBuffer` to its capacity, or an
    /// `AVAudioCompressedBuffer` to its packet capacity), asking `inputBlock` for input as needed.
    open func convert(
        to outputBuffer: AVAudioBuffer, error outError: UnsafeMutablePointer<NSError?>?, withInputFrom inputBlock: AVAudioConverterInputBlock
    ) -> AVAudioConverterOutputStatus {
        // The block is only called during this call (Apple's is NS_NOESCAPE).
        withoutActuallyEscaping(inputBlock) { block in convert(to: outputBuffer, error: outError, block: block) }
    }

    private func convert(
        to outputBuffer: AVAudioBuffer, error outError: UnsafeMutablePointer<NSError?>?, block inputBlock: @escaping AVAudioConverterInputBlock
    ) -> AVAudioConverterOutputStatus {
        block = inputBlock
        blockError = nil
        ranDry = false
        defer { block = nil }
        let me = Unmanaged.passUnretained(self).toOpaque()
        var status: OSStatus
        var produced: UInt32
        let requested: UInt32
        if let pcm = outputBuffer as? AVAudioPCMBuffer {
            requested = pcm.frameCapacity
            var count = pcm.frameCapacity
            let list = UnsafeMutableAudioBufferListPointer(pcm.mutableAudioBufferList)
            let bytes = pcm.frameCapacity * pcm.format.streamDescription.pointee.mBytesPerFrame
            for i in 0..<list.count { list[i].mDataByteSize = bytes }
            status = AudioConverterFillComplexBuffer(converter, Self.inputProc, me, &count, pcm.mutableAudioBufferList, nil)
            produced = count
            pcm.frameLength = status == noErr || status == Self.noDataNow ? count : 0
        } else if let compressed = outputBuffer as? AVAudioCompressedBuffer {
            requested = compressed.packetCapacity
            var count = compressed.packetCapacity
            compressed.byteLength = compressed.byteCapacity
            status = AudioConverterFillComplexBuffer(converter, Self.inputProc, me, &count, compressed.mutableAudioBufferList, compressed.packetDescriptions)
            produced = count
            compressed.packetCount = status == noErr || status == Self.noDataNow ? count : 0
            if compressed.packetCount == 0 { compressed.byteLength = 0 }
        } else {
            outError?.pointee = statusError(kAudio_ParamError, "the output must be a PCM or a compressed buffer")
            return .error
        }
        current = nil
        // Apple's statuses: input ran dry (the buffer may hold some output), the end of the
        // stream reached (likewise), or a full buffer.
        if status == Self.noDataNow || ranDry { return .inputRanDry }
        guard status == noErr else {
            outError?.pointee = blockError ?? statusError(status, "the conversion failed")
            return .error
        }
        if inputEnded && produced < requested { return .endOfStream }
        return .haveData
    }

    /// What the input proc returns when the block has no data now: the fill stops there.
    private static let noDataNow = OSStatus(bitPattern: fourCC("!dat"))

    private static let inputProc: AudioConverterComplexInputDataProc = { _, packets, data, descriptions, user in
        let me = Unmanaged<AVAudioConverter>.fromOpaque(user!).takeUnretainedValue()
        return me.provide(packets, data, descriptions)
    }

    private func provide(
        _ packets: UnsafeMutablePointer<UInt32>, _ data: UnsafeMutablePointer<AudioBufferList>,
        _ descriptions: UnsafeMutablePointer<UnsafeMutablePointer<AudioStreamPacketDescription>?>?
    ) -> OSStatus {
        guard !inputEnded, let block else {
            packets.pointee = 0
            return noErr
        }
        var status = AVAudioConverterInputStatus.haveData
        let buffer = block(packets.pointee, &status)
        switch status {
        case .noDataNow:
            ranDry = true
            packets.pointee = 0
            return Self.noDataNow
        case .endOfStream:
            inputEnded = true
            packets.pointee = 0
            return noErr
        case .haveData:
            break
        }
        guard let buffer else {
            blockError = statusError(kAudio_ParamError, "the input block said haveData and returned no buffer")
            packets.pointee = 0
            return kAudio_ParamError
        }
        current = buffer
        let list = UnsafeMutableAudioBufferListPointer(data)
        let source = UnsafeMutableAudioBufferListPointer(buffer.mutableAudioBufferList)
        for i in 0..<min(list.count, source.count) { list[i] = source[i] }
        if let pcm = buffer as? AVAudioPCMBuffer {
            packets.pointee = pcm.frameLength
        } else if let compressed = buffer as? AVAudioCompressedBuffer {
            packets.pointee = compressed.packetCount
            descriptions?.pointee = compressed.packetDescriptions
        }
        return noErr
    }
}
