internal import AudioCodecs

// AudioConverterGetProperty / GetPropertyInfo / SetProperty.

private func propertyBytes(_ id: AudioConverterPropertyID, _ core: ConverterCore) -> [UInt8]? {
    switch id {
    case kAudioConverterCurrentInputStreamDescription: return bytes(core.source)
    case kAudioConverterCurrentOutputStreamDescription: return bytes(core.destination)
    case kAudioConverterSampleRateConverterQuality: return bytes(UInt32(core.sampleRateConverterQuality))
    case kAudioConverterCodecQuality: return bytes(UInt32(core.codecQuality ?? Int(kAudioConverterQuality_High)))
    case kAudioConverterEncodeBitRate:
        guard !core.destinationIsPCM else { return nil }
        return bytes(UInt32(core.bitRate ?? 0))
    case kAudioConverterCompressionMagicCookie:
        guard !core.destinationIsPCM else { return nil }
        return core.compressionCookie
    case kAudioConverterDecompressionMagicCookie:
        guard !core.sourceIsPCM else { return nil }
        return core.decompressionCookie
    case kAudioConverterPrimeInfo:
        return bytes(AudioConverterPrimeInfo(leadingFrames: UInt32(core.primingFrames), trailingFrames: UInt32(clamping: core.trailingFrames)))
    case kAudioConverterPropertyMaximumOutputPacketSize:
        guard let size = core.maximumOutputPacketSize else { return nil }
        return bytes(UInt32(clamping: size))
    case kAudioConverterPropertyMaximumInputPacketSize:
        let s = core.source
        return bytes(UInt32(s.mBytesPerPacket > 0 ? Int(s.mBytesPerPacket) : max(Int(s.mChannelsPerFrame) * 768, 8192)))
    case kAudioConverterPropertyMinimumInputBufferSize: return bytes(UInt32(max(core.source.mBytesPerPacket, 1)))
    case kAudioConverterPropertyMinimumOutputBufferSize: return bytes(UInt32(max(core.destination.mBytesPerPacket, 1)))
    case kAudioConverterApplicableEncodeSampleRates, kAudioConverterAvailableEncodeSampleRates:
        guard !core.destinationIsPCM else { return nil }
        let rates = PacketEncoder.supportedSampleRates(core.destination.mFormatID) ?? [Int(core.destination.mSampleRate)]
        return rates.flatMap { bytes(AudioValueRange(mMinimum: Double($0), mMaximum: Double($0))) }
    default: return nil
    }
}

@discardableResult
public func AudioConverterGetPropertyInfo(
    _ inAudioConverter: AudioConverterRef, _ inPropertyID: AudioConverterPropertyID, _ outSize: UnsafeMutablePointer<UInt32>?,
    _ outWritable: UnsafeMutablePointer<DarwinBoolean>?
) -> OSStatus {
    guard let c = liveConverters.lookup(inAudioConverter) else { return kAudio_ParamError }
    guard let b = propertyBytes(inPropertyID, c.core) else { return kAudioConverterErr_PropertyNotSupported }
    outSize?.pointee = UInt32(b.count)
    let writable = [kAudioConverterSampleRateConverterQuality, kAudioConverterCodecQuality, kAudioConverterEncodeBitRate,
                    kAudioConverterDecompressionMagicCookie].contains(inPropertyID)
    outWritable?.pointee = DarwinBoolean(writable)
    return noErr
}

@discardableResult
public func AudioConverterGetProperty(
    _ inAudioConverter: AudioConverterRef, _ inPropertyID: AudioConverterPropertyID, _ ioPropertyDataSize: UnsafeMutablePointer<UInt32>,
    _ outPropertyData: UnsafeMutableRawPointer
) -> OSStatus {
    guard let c = liveConverters.lookup(inAudioConverter) else { return kAudio_ParamError }
    guard let b = propertyBytes(inPropertyID, c.core) else { return kAudioConverterErr_PropertyNotSupported }
    return PropertyData.copy(b, to: outPropertyData, size: ioPropertyDataSize) ? noErr : kAudioConverterErr_BadPropertySizeError
}

/// Sets the sample rate converter or codec quality, the encode bit rate (before the first
/// conversion) or the decompression magic cookie.
@discardableResult
public func AudioConverterSetProperty(
    _ inAudioConverter: AudioConverterRef, _ inPropertyID: AudioConverterPropertyID, _ inPropertyDataSize: UInt32,
    _ inPropertyData: UnsafeRawPointer
) -> OSStatus {
    guard let c = liveConverters.lookup(inAudioConverter) else { return kAudio_ParamError }
    let core = c.core
    func u32() -> UInt32? { PropertyData.load(UInt32.self, from: inPropertyData, size: inPropertyDataSize) }
    switch inPropertyID {
    case kAudioConverterSampleRateConverterQuality:
        guard let v = u32() else { return kAudioConverterErr_BadPropertySizeError }
        core.sampleRateConverterQuality = Int(min(v, 0x7F))
    case kAudioConverterCodecQuality:
        guard let v = u32() else { return kAudioConverterErr_BadPropertySizeError }
        core.codecQuality = Int(min(v, 0x7F))
    case kAudioConverterEncodeBitRate:
        guard let v = u32() else { return kAudioConverterErr_BadPropertySizeError }
        guard !core.destinationIsPCM else { return kAudioConverterErr_PropertyNotSupported }
        core.bitRate = Int(v)
    case kAudioConverterDecompressionMagicCookie:
        guard !core.sourceIsPCM else { return kAudioConverterErr_PropertyNotSupported }
        core.decompressionCookie = Array(UnsafeRawBufferPointer(start: inPropertyData, count: Int(inPropertyDataSize)))
    default:
        return kAudioConverterErr_PropertyNotSupported
    }
    return noErr
}
