internal import AudioCodecs
import Synchronization

// Apple's AudioConverter.h with Swift signatures.
//
// An AudioConverterRef that is not a live converter (disposed, never one, or another kind of
// reference) gets `kAudio_ParamError`: AudioConverter.h has no error of its own for it.
// References are never reused, so a disposed one stays invalid for the life of the process.

public typealias AudioConverterRef = OpaquePointer
public typealias AudioConverterPropertyID = UInt32

/// Apple's input callback: fill `ioData` with up to `ioNumberDataPackets` packets (set it to the
/// count given; 0 means the input has ended) and, for compressed sources, point
/// `outDataPacketDescription` at their descriptions. A non-zero return stops the conversion and
/// is passed back to the caller of ``AudioConverterFillComplexBuffer(_:_:_:_:_:_:)``.
public typealias AudioConverterComplexInputDataProc = @convention(c) (
    AudioConverterRef, UnsafeMutablePointer<UInt32>, UnsafeMutablePointer<AudioBufferList>,
    UnsafeMutablePointer<UnsafeMutablePointer<AudioStreamPacketDescription>?>?, UnsafeMutableRawPointer?
) -> OSStatus

/// `kAudioConverterPrimeInfo`. `leadingFrames` is an encoder's delay (the priming frames at the
/// start of its output, 1024 for FFmpeg's AAC encoder). `trailingFrames` is what the conversion
/// holds or adds past the last input frame: for an encoder, the remainder frames of its stream
/// (the padding of its last packet plus what its look-ahead flushes: what a packet table records
/// as `mRemainderFrames`), known once the input has ended (`AudioConverterFillComplexBuffer`
/// saw the input proc return no more data) and 0 before; for a sample rate conversion, the input
/// frames its filter still holds, which the converter flushes with silence at the end, as
/// Apple's does; 0 for conversions that hold nothing (linear PCM, and FFmpeg's decoders, which
/// return every frame of a packet as it is decoded).
public struct AudioConverterPrimeInfo: Sendable {
    public var leadingFrames: UInt32
    public var trailingFrames: UInt32
    public init() { self.init(leadingFrames: 0, trailingFrames: 0) }
    public init(leadingFrames: UInt32, trailingFrames: UInt32) {
        self.leadingFrames = leadingFrames
        self.trailingFrames = trailingFrames
    }
}

// Errors.
public let kAudioConverterErr_FormatNotSupported: OSStatus = OSStatus(bitPattern: fourCC("fmt?"))
public let kAudioConverterErr_OperationNotSupported: OSStatus = 0x6F70_3F3F
public let kAudioConverterErr_PropertyNotSupported: OSStatus = OSStatus(bitPattern: fourCC("prop"))
public let kAudioConverterErr_InvalidInputSize: OSStatus = OSStatus(bitPattern: fourCC("insz"))
public let kAudioConverterErr_InvalidOutputSize: OSStatus = OSStatus(bitPattern: fourCC("otsz"))
public let kAudioConverterErr_UnspecifiedError: OSStatus = OSStatus(bitPattern: fourCC("what"))
public let kAudioConverterErr_BadPropertySizeError: OSStatus = OSStatus(bitPattern: fourCC("!siz"))
public let kAudioConverterErr_RequiresPacketDescriptionsError: OSStatus = OSStatus(bitPattern: fourCC("!pkd"))
public let kAudioConverterErr_InputSampleRateOutOfRange: OSStatus = OSStatus(bitPattern: fourCC("!isr"))
public let kAudioConverterErr_OutputSampleRateOutOfRange: OSStatus = OSStatus(bitPattern: fourCC("!osr"))

// Properties.
public let kAudioConverterPropertyMinimumInputBufferSize: AudioConverterPropertyID = fourCC("mibs")
public let kAudioConverterPropertyMinimumOutputBufferSize: AudioConverterPropertyID = fourCC("mobs")
public let kAudioConverterPropertyMaximumInputPacketSize: AudioConverterPropertyID = fourCC("xips")
public let kAudioConverterPropertyMaximumOutputPacketSize: AudioConverterPropertyID = fourCC("xops")
public let kAudioConverterSampleRateConverterQuality: AudioConverterPropertyID = fourCC("srcq")
public let kAudioConverterCodecQuality: AudioConverterPropertyID = fourCC("cdqu")
public let kAudioConverterEncodeBitRate: AudioConverterPropertyID = fourCC("brat")
public let kAudioConverterCurrentOutputStreamDescription: AudioConverterPropertyID = fourCC("acod")
public let kAudioConverterCurrentInputStreamDescription: AudioConverterPropertyID = fourCC("acid")
public let kAudioConverterDecompressionMagicCookie: AudioConverterPropertyID = fourCC("dmgc")
public let kAudioConverterCompressionMagicCookie: AudioConverterPropertyID = fourCC("cmgc")
public let kAudioConverterPrimeInfo: AudioConverterPropertyID = fourCC("prim")
public let kAudioConverterApplicableEncodeSampleRates: AudioConverterPropertyID = fourCC("aesr")
public let kAudioConverterAvailableEncodeSampleRates: AudioConverterPropertyID = fourCC("vesr")

// Qualities.
public let kAudioConverterQuality_Max: UInt32 = 0x7F
public let kAudioConverterQuality_High: UInt32 = 0x60
public let kAudioConverterQuality_Medium: UInt32 = 0x40
public let kAudioConverterQuality_Low: UInt32 = 0x20
public let kAudioConverterQuality_Min: UInt32 = 0

/// An AudioConverter: the core, plus the list it hands to the input callback.
final class AudioConverterObject: ReferencedObject, @unchecked Sendable {
    let core: ConverterCore
    /// Handed to the input callback; the callback points its buffers at its own memory.
    private let inputList: UnsafeMutableAudioBufferListPointer

    init(_ core: ConverterCore) {
        self.core = core
        inputList = AudioBufferList.allocate(maximumBuffers: core.sourcePCM?.bufferCount ?? 1)
    }

    deinit { inputList.unsafeMutablePointer.deallocate() }

    /// The ``AudioConverterRef`` handed to the user, never reused (``newObjectReference(_:)``).
    let ref: AudioConverterRef = newObjectReference(.audioConverter)

    /// Pulls input until `enough()` or the input ends or fails; returns the callback's error.
    func pull(_ proc: AudioConverterComplexInputDataProc, _ userData: UnsafeMutableRawPointer?, want: Int, enough: () -> Bool) throws(AudioFailure) -> OSStatus {
        while !enough() && !core.inputEnded {
            let buffers = core.sourcePCM?.bufferCount ?? 1
            inputList.count = buffers
            for i in 0..<buffers {
                inputList[i] = AudioBuffer(mNumberChannels: core.sourcePCM?.nonInterleaved == true ? 1 : core.source.mChannelsPerFrame, mDataByteSize: 0, mData: nil)
            }
            var packets: UInt32
            if core.sourceIsPCM {
                // Frames needed at the source rate for what is still missing, in one request.
                let ratio = core.source.mSampleRate / core.destination.mSampleRate
                let frames = core.destinationIsPCM ? max(want - core.availableFrames, 1) : max(Int(core.destination.mFramesPerPacket), 1024)
                packets = UInt32(min(max(Int((Double(frames) * ratio).rounded(.up)), 1), 1 << 16))
            } else {
                packets = 1
            }
            var descriptions: UnsafeMutablePointer<AudioStreamPacketDescription>?
            let status =
                core.sourceIsPCM
                ? proc(ref, &packets, inputList.unsafeMutablePointer, nil, userData)
                : proc(ref, &packets, inputList.unsafeMutablePointer, &descriptions, userData)
            if packets > 0 {
                if core.sourceIsPCM {
                    let available = core.sourcePCM!.frames(in: inputList)
                    try core.pushPCM(inputList, frames: min(Int(packets), available))
                } else {
                    guard let data = inputList[0].mData else {
                        throw AudioFailure(kAudioConverterErr_InvalidInputSize, "the input callback returned packets without data")
                    }
                    let total = Int(inputList[0].mDataByteSize)
                    for i in 0..<Int(packets) {
                        let offset: Int
                        let size: Int
                        if let descriptions {
                            offset = Int(descriptions[i].mStartOffset)
                            size = Int(descriptions[i].mDataByteSize)
                        } else if core.source.mBytesPerPacket > 0 {
                            size = Int(core.source.mBytesPerPacket)
                            offset = i * size
                        } else {
                            throw AudioFailure(kAudioConverterErr_RequiresPacketDescriptionsError, "variable-size packets need descriptions")
                        }
                        guard offset >= 0, size >= 0, offset <= total - size else {
                            throw AudioFailure(kAudioConverterErr_InvalidInputSize, "packet \(i) lies outside the input buffer")
                        }
                        try core.pushPacket(UnsafeRawBufferPointer(start: data + offset, count: size))
                    }
                }
            }
            if status != noErr { return status }
            if packets == 0 { try core.endInput() }
        }
        return noErr
    }
}


/// Creates a converter between any two formats this library decodes and encodes: linear PCM of
/// any layout, rate and channel count, and the compressed formats of the codec catalog (AAC, ALAC,
/// FLAC, IMA4, µ-law, A-law, MP3 decode, Opus…). Fields left 0 in the destination (rate,
/// channels, packet shape) are filled in; read them back with
/// `kAudioConverterCurrentOutputStreamDescription`.
@discardableResult
public func AudioConverterNew(
    _ inSourceFormat: UnsafePointer<AudioStreamBasicDescription>, _ inDestinationFormat: UnsafePointer<AudioStreamBasicDescription>,
    _ outAudioConverter: UnsafeMutablePointer<AudioConverterRef?>
) -> OSStatus {
    do {
        let converter = AudioConverterObject(try ConverterCore(from: inSourceFormat.pointee, to: inDestinationFormat.pointee))
        liveConverters.add(converter)
        outAudioConverter.pointee = converter.ref
        return noErr
    } catch {
        outAudioConverter.pointee = nil
        return error.status
    }
}

@discardableResult
public func AudioConverterDispose(_ inAudioConverter: AudioConverterRef) -> OSStatus {
    liveConverters.remove(inAudioConverter) == nil ? kAudio_ParamError : noErr
}

/// Forgets buffered data and codec state, as after a seek.
@discardableResult
public func AudioConverterReset(_ inAudioConverter: AudioConverterRef) -> OSStatus {
    guard let c = liveConverters.lookup(inAudioConverter) else { return kAudio_ParamError }
    c.core.reset()
    return noErr
}

/// Converts a buffer of linear PCM to linear PCM of the same sample rate in one call. Rate
/// changes and compressed formats need ``AudioConverterFillComplexBuffer(_:_:_:_:_:_:)``
/// (`kAudioConverterErr_OperationNotSupported` here, as on Apple's platforms).
@discardableResult
public func AudioConverterConvertBuffer(
    _ inAudioConverter: AudioConverterRef, _ inInputDataSize: UInt32, _ inInputData: UnsafeRawPointer,
    _ ioOutputDataSize: UnsafeMutablePointer<UInt32>, _ outOutputData: UnsafeMutableRawPointer
) -> OSStatus {
    guard let c = liveConverters.lookup(inAudioConverter) else { return kAudio_ParamError }
    let core = c.core
    guard let src = core.sourcePCM, let dst = core.destinationPCM, !src.nonInterleaved, !dst.nonInterleaved,
        core.source.mSampleRate == core.destination.mSampleRate
    else { return kAudioConverterErr_OperationNotSupported }
    let frames = Int(inInputDataSize) / src.bytesPerFrame
    guard frames * src.bytesPerFrame == Int(inInputDataSize) else { return kAudioConverterErr_InvalidInputSize }
    guard Int(ioOutputDataSize.pointee) >= frames * dst.bytesPerFrame else { return kAudioConverterErr_InvalidOutputSize }
    var input = AudioBufferList(mNumberBuffers: 1, mBuffers: AudioBuffer(mNumberChannels: core.source.mChannelsPerFrame, mDataByteSize: inInputDataSize, mData: UnsafeMutableRawPointer(mutating: inInputData)))
    var output = AudioBufferList(mNumberBuffers: 1, mBuffers: AudioBuffer(mNumberChannels: core.destination.mChannelsPerFrame, mDataByteSize: ioOutputDataSize.pointee, mData: outOutputData))
    do {
        try core.pushPCM(UnsafeMutableAudioBufferListPointer(&input), frames: frames)
    } catch {
        return error.status
    }
    let written = core.takeFrames(frames, into: UnsafeMutableAudioBufferListPointer(&output))
    ioOutputDataSize.pointee = UInt32(written * dst.bytesPerFrame)
    return noErr
}

/// Produces up to `ioOutputDataPacketSize` packets (frames, for linear PCM) into `outOutputData`,
/// pulling input through `inInputDataProc` as needed. Returns with fewer only at the end of the
/// input (the callback gave 0 packets) or when the callback returned an error, which is returned.
@discardableResult
public func AudioConverterFillComplexBuffer(
    _ inAudioConverter: AudioConverterRef, _ inInputDataProc: AudioConverterComplexInputDataProc,
    _ inInputDataProcUserData: UnsafeMutableRawPointer?, _ ioOutputDataPacketSize: UnsafeMutablePointer<UInt32>,
    _ outOutputData: UnsafeMutablePointer<AudioBufferList>, _ outPacketDescription: UnsafeMutablePointer<AudioStreamPacketDescription>?
) -> OSStatus {
    guard let c = liveConverters.lookup(inAudioConverter) else { return kAudio_ParamError }
    let core = c.core
    let wanted = Int(ioOutputDataPacketSize.pointee)
    let list = UnsafeMutableAudioBufferListPointer(outOutputData)
    var status = noErr
    if let dst = core.destinationPCM {
        guard list.count >= dst.bufferCount else { return kAudioConverterErr_InvalidOutputSize }
        let capacity = min(wanted, dst.frames(in: list))
        do {
            status = try c.pull(inInputDataProc, inInputDataProcUserData, want: capacity) { core.availableFrames >= capacity }
        } catch {
            ioOutputDataPacketSize.pointee = 0
            return error.status
        }
        let n = core.takeFrames(capacity, into: list)
        for i in 0..<dst.bufferCount { list[i].mDataByteSize = UInt32(n * dst.bytesPerFrame) }
        ioOutputDataPacketSize.pointee = UInt32(n)
        return status
    }
    guard list.count >= 1, let data = list[0].mData else { return kAudioConverterErr_InvalidOutputSize }
    let capacity = Int(list[0].mDataByteSize)
    do {
        status = try c.pull(inInputDataProc, inInputDataProcUserData, want: wanted) { core.availablePackets >= wanted }
    } catch {
        ioOutputDataPacketSize.pointee = 0
        return error.status
    }
    let taken = core.takePackets(
        max: wanted, capacity: capacity, into: data, descriptions: outPacketDescription,
        variableFrames: core.destination.mFramesPerPacket == 0)
    let count = taken.packets
    let bytes = taken.bytes
    if count == 0 && wanted > 0 && core.nextPacketSize != nil {
        ioOutputDataPacketSize.pointee = 0
        return kAudioConverterErr_InvalidOutputSize
    }
    list[0].mDataByteSize = UInt32(bytes)
    ioOutputDataPacketSize.pointee = UInt32(count)
    return status
}
