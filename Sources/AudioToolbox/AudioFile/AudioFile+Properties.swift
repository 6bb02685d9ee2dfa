internal import AudioCodecs
internal import Foundation

// AudioFileGetProperty / GetPropertyInfo / SetProperty and AudioFileGetGlobalInfo(Size).

private func load<T>(_ type: T.Type, _ size: UInt32, _ data: UnsafeRawPointer) throws(AudioFailure) -> T {
    guard let value = PropertyData.load(type, from: data, size: size) else {
        throw AudioFailure(kAudioFileBadPropertySizeError, "the property takes \(MemoryLayout<T>.size) bytes; \(size) given")
    }
    return value
}

/// A property's value as bytes, and whether it can be set on this file.
private enum PropertyValue {
    case bytes([UInt8], writable: Bool)
    /// An object returned +1 (the caller releases it, as with Apple's CF results).
    case object(NSObject)
}

private func value(_ id: AudioFilePropertyID, of c: any AudioFileContainer) throws(AudioFailure) -> PropertyValue {
    let f = c.format
    switch id {
    case kAudioFilePropertyFileFormat: return .bytes(bytes(c.fileType), writable: false)
    case kAudioFilePropertyDataFormat: return .bytes(bytes(f), writable: true)
    case kAudioFilePropertyIsOptimized: return .bytes(bytes(UInt32(c.isOptimized ? 1 : 0)), writable: false)
    case kAudioFilePropertyMagicCookieData:
        guard !c.magicCookie.isEmpty else { throw AudioFailure(kAudioFileUnsupportedPropertyError, "the file has no magic cookie") }
        return .bytes(c.magicCookie, writable: true)
    case kAudioFilePropertyAudioDataByteCount: return .bytes(bytes(UInt64(c.dataByteCount)), writable: false)
    case kAudioFilePropertyAudioDataPacketCount: return .bytes(bytes(UInt64(c.packetCount)), writable: false)
    case kAudioFilePropertyMaximumPacketSize: return .bytes(bytes(UInt32(c.maximumPacketSize)), writable: false)
    case kAudioFilePropertyPacketSizeUpperBound:
        // AAC's largest possible packet is 6144 bits per channel.
        let bound =
            f.mBytesPerPacket > 0 ? Int(f.mBytesPerPacket)
            : f.mFormatID == kAudioFormatMPEG4AAC ? max(768 * Int(f.mChannelsPerFrame), c.maximumPacketSize) : c.maximumPacketSize
        return .bytes(bytes(UInt32(bound)), writable: false)
    case kAudioFilePropertyDataOffset: return .bytes(bytes(Int64(c.dataOffset)), writable: false)
    case kAudioFilePropertyChannelLayout:
        if let layout = c.channelLayout { return .bytes(layout, writable: true) }
        let tag: AudioChannelLayoutTag
        switch f.mChannelsPerFrame {
        case 1: tag = kAudioChannelLayoutTag_Mono
        case 2: tag = kAudioChannelLayoutTag_Stereo
        default: throw AudioFailure(kAudioFileUnsupportedPropertyError, "the file has no channel layout")
        }
        var layout = AudioChannelLayout()
        layout.mChannelLayoutTag = tag
        return .bytes(bytes(layout), writable: true)
    case kAudioFilePropertyPacketTableInfo:
        guard let info = c.packetTableInfo else { throw AudioFailure(kAudioFileUnsupportedPropertyError, "the file has no packet table") }
        return .bytes(bytes(info), writable: true)
    case kAudioFilePropertyEstimatedDuration:
        let frames =
            c.packetTableInfo.map { Double($0.mNumberValidFrames) }
            ?? Double(c.packetCount) * Double(f.mFramesPerPacket == 0 ? 1 : f.mFramesPerPacket)
        return .bytes(bytes(f.mSampleRate > 0 ? frames / f.mSampleRate : 0), writable: false)
    case kAudioFilePropertyBitRate: return .bytes(bytes(UInt32(clamping: c.bitRate)), writable: false)
    case kAudioFilePropertySourceBitDepth:
        let bits: Int32 =
            f.mFormatID == kAudioFormatLinearPCM ? Int32(f.mBitsPerChannel)
            : (f.mFormatID == kAudioFormatAppleLossless || f.mFormatID == kAudioFormatFLAC) ? ([1: 16, 2: 20, 3: 24, 4: 32][f.mFormatFlags] ?? 0) : 0
        guard bits > 0 else { throw AudioFailure(kAudioFileUnsupportedPropertyError, "the format has no source bit depth") }
        return .bytes(bytes(bits), writable: false)
    case kAudioFilePropertyAudioTrackCount: return .bytes(bytes(UInt32(c.audioTrackCount)), writable: false)
    case kAudioFilePropertyDeferSizeUpdates: return .bytes(bytes(UInt32(c.deferSizeUpdates ? 1 : 0)), writable: true)
    case kAudioFilePropertyInfoDictionary:
        var info = c.info
        let seconds = (try? value(kAudioFilePropertyEstimatedDuration, of: c)).flatMap { v -> Double? in
            if case .bytes(let b, _) = v { return b.withUnsafeBytes { $0.loadUnaligned(as: Double.self) } }
            return nil
        }
        if let seconds { info[kAFInfoDictionary_ApproximateDurationInSeconds] = String(format: "%.3f", seconds) }
        let dict = NSMutableDictionary()
        for (k, v) in info { dict[NSString(string: k)] = NSString(string: v) }
        return .object(dict)
    default:
        throw AudioFailure(kAudioFileUnsupportedPropertyError, "property '\(id.fourCharCodeString)' is not supported")
    }
}

@discardableResult
public func AudioFileGetPropertyInfo(
    _ inAudioFile: AudioFileID, _ inPropertyID: AudioFilePropertyID, _ outDataSize: UnsafeMutablePointer<UInt32>?,
    _ isWritable: UnsafeMutablePointer<UInt32>?
) -> OSStatus {
    fileCall(inAudioFile) { c throws(AudioFailure) in
        switch try value(inPropertyID, of: c) {
        case .bytes(let b, let writable):
            outDataSize?.pointee = UInt32(b.count)
            isWritable?.pointee = writable ? 1 : 0
        case .object:
            outDataSize?.pointee = UInt32(MemoryLayout<UnsafeRawPointer>.size)
            isWritable?.pointee = 0
        }
    }
}

/// Copies the property's value. `ioDataSize` must be at least the value's size (see
/// ``AudioFileGetPropertyInfo(_:_:_:_:)``) and comes back as the size written.
/// `kAudioFilePropertyInfoDictionary` writes a retained `CFDictionary` (`NSDictionary`) reference.
@discardableResult
public func AudioFileGetProperty(
    _ inAudioFile: AudioFileID, _ inPropertyID: AudioFilePropertyID, _ ioDataSize: UnsafeMutablePointer<UInt32>,
    _ outPropertyData: UnsafeMutableRawPointer
) -> OSStatus {
    fileCall(inAudioFile) { c throws(AudioFailure) in
        switch try value(inPropertyID, of: c) {
        case .bytes(let b, _):
            guard PropertyData.copy(b, to: outPropertyData, size: ioDataSize) else {
                throw AudioFailure(kAudioFileBadPropertySizeError, "the property needs \(b.count) bytes; \(ioDataSize.pointee) given")
            }
        case .object(let object):
            guard Int(ioDataSize.pointee) >= MemoryLayout<UnsafeRawPointer>.size else {
                throw AudioFailure(kAudioFileBadPropertySizeError, "the property is a reference")
            }
            outPropertyData.storeBytes(of: Unmanaged.passRetained(object).toOpaque(), as: UnsafeMutableRawPointer.self)
            ioDataSize.pointee = UInt32(MemoryLayout<UnsafeRawPointer>.size)
        }
    }
}

/// Sets DataFormat (before any audio is written), MagicCookieData, ChannelLayout, PacketTableInfo,
/// InfoDictionary (a `CFDictionary` reference) or DeferSizeUpdates.
///
/// DeferSizeUpdates 1 writes the header's sizes only when the file closes (or when it is set back
/// to 0), as Apple's does; 0, the default, keeps them current after every write. The trade-off is
/// crash safety: a WAVE file cut short while deferring still reads to its end (a data size of 0
/// marks an unfinished recording), but an AIFF file's header then says it holds no audio. CAF is
/// the same either way (its data chunk says "size unknown, to the end of the file" until it
/// closes). Files written through FFmpeg (M4A, FLAC, MP3, ADTS) always write their sizes at close:
/// they report 1 and refuse 0 with `kAudioFileOperationNotSupportedError`.
@discardableResult
public func AudioFileSetProperty(
    _ inAudioFile: AudioFileID, _ inPropertyID: AudioFilePropertyID, _ inDataSize: UInt32, _ inPropertyData: UnsafeRawPointer
) -> OSStatus {
    fileCall(inAudioFile) { c throws(AudioFailure) in
        switch inPropertyID {
        case kAudioFilePropertyDataFormat:
            try c.setDataFormat(try load(AudioStreamBasicDescription.self, inDataSize, inPropertyData))
        case kAudioFilePropertyMagicCookieData:
            try c.setMagicCookie(Array(UnsafeRawBufferPointer(start: inPropertyData, count: Int(inDataSize))))
        case kAudioFilePropertyChannelLayout:
            guard Int(inDataSize) >= 12 else { throw AudioFailure(kAudioFileBadPropertySizeError, "a channel layout takes at least 12 bytes") }
            try c.setChannelLayout(Array(UnsafeRawBufferPointer(start: inPropertyData, count: Int(inDataSize))))
        case kAudioFilePropertyPacketTableInfo:
            try c.setPacketTableInfo(try load(AudioFilePacketTableInfo.self, inDataSize, inPropertyData))
        case kAudioFilePropertyDeferSizeUpdates:
            try c.setDeferSizeUpdates(try load(UInt32.self, inDataSize, inPropertyData) != 0)
        case kAudioFilePropertyInfoDictionary:
            guard Int(inDataSize) >= MemoryLayout<UnsafeRawPointer>.size else {
                throw AudioFailure(kAudioFileBadPropertySizeError, "the info dictionary is passed by reference")
            }
            let pointer = inPropertyData.loadUnaligned(as: UnsafeRawPointer.self)
            guard let dict = Unmanaged<AnyObject>.fromOpaque(pointer).takeUnretainedValue() as? NSDictionary else {
                throw AudioFailure(kAudio_ParamError, "the info dictionary is not a dictionary")
            }
            var info: [String: String] = [:]
            for (k, v) in dict {
                if let k = k as? String { info[k] = "\(v)" } else if let k = k as? NSString { info[k as String] = "\(v)" }
            }
            try c.setInfo(info)
        case kAudioFilePropertyFileFormat, kAudioFilePropertyAudioDataByteCount, kAudioFilePropertyAudioDataPacketCount,
            kAudioFilePropertyMaximumPacketSize, kAudioFilePropertyDataOffset, kAudioFilePropertyIsOptimized,
            kAudioFilePropertyEstimatedDuration, kAudioFilePropertyBitRate, kAudioFilePropertyPacketSizeUpperBound,
            kAudioFilePropertyAudioTrackCount:
            throw AudioFailure(kAudioFileUnsupportedPropertyError, "property '\(inPropertyID.fourCharCodeString)' is read-only")
        default:
            throw AudioFailure(kAudioFileUnsupportedPropertyError, "property '\(inPropertyID.fourCharCodeString)' is not supported")
        }
    }
}

private func fileCall(_ id: AudioFileID, _ body: (any AudioFileContainer) throws(AudioFailure) -> Void) -> OSStatus {
    guard let file = liveAudioFiles.lookup(id) else { return kAudioFileNotOpenError }
    return file.with(body)
}

// MARK: Global info

private func globalInfo(_ id: AudioFilePropertyID, _ specifierSize: UInt32, _ specifier: UnsafeMutableRawPointer?) throws(AudioFailure) -> [UInt8] {
    func list(_ ids: [UInt32]) -> [UInt8] { ids.flatMap { bytes($0) } }
    switch id {
    case kAudioFileGlobalInfo_ReadableTypes: return list(AudioFileObject.readableTypes)
    case kAudioFileGlobalInfo_WritableTypes: return list(AudioFileObject.writableTypes)
    case kAudioFileGlobalInfo_AvailableFormatIDs:
        guard let specifier, specifierSize >= 4 else { throw AudioFailure(kAudioFileBadPropertySizeError, "the specifier is a file type") }
        let type = specifier.loadUnaligned(as: AudioFileTypeID.self)
        guard let formats = AudioFileObject.formats(for: type) else {
            throw AudioFailure(kAudioFileUnsupportedFileTypeError, "'\(type.fourCharCodeString)' is not a writable type")
        }
        return list(formats)
    case kAudioFileGlobalInfo_AvailableStreamDescriptionsForFormat:
        guard let specifier, Int(specifierSize) >= MemoryLayout<AudioFileTypeAndFormatID>.size else {
            throw AudioFailure(kAudioFileBadPropertySizeError, "the specifier is an AudioFileTypeAndFormatID")
        }
        let pair = specifier.loadUnaligned(as: AudioFileTypeAndFormatID.self)
        guard let formats = AudioFileObject.formats(for: pair.mFileType) else {
            throw AudioFailure(kAudioFileUnsupportedFileTypeError, "'\(pair.mFileType.fourCharCodeString)' is not a writable type")
        }
        guard formats.contains(pair.mFormatID) else {
            throw AudioFailure(kAudioFileUnsupportedDataFormatError, "'\(pair.mFileType.fourCharCodeString)' cannot hold '\(pair.mFormatID.fourCharCodeString)'")
        }
        var descriptions: [AudioStreamBasicDescription] = []
        if pair.mFormatID == kAudioFormatLinearPCM {
            let big = pair.mFileType == kAudioFileAIFFType || pair.mFileType == kAudioFileAIFCType
            for bits: UInt32 in [8, 16, 24, 32] {
                let signed = !(pair.mFileType == kAudioFileWAVEType && bits == 8)
                descriptions.append(
                    AudioStreamBasicDescription(
                        mSampleRate: 0, mFormatID: kAudioFormatLinearPCM,
                        mFormatFlags: (signed ? kAudioFormatFlagIsSignedInteger : 0) | kAudioFormatFlagIsPacked | (big && bits > 8 ? kAudioFormatFlagIsBigEndian : 0),
                        mBytesPerPacket: 0, mFramesPerPacket: 1, mBytesPerFrame: 0, mChannelsPerFrame: 0, mBitsPerChannel: bits, mReserved: 0))
            }
            if pair.mFileType != kAudioFileAIFFType {
                for bits: UInt32 in [32, 64] {
                    descriptions.append(
                        AudioStreamBasicDescription(
                            mSampleRate: 0, mFormatID: kAudioFormatLinearPCM,
                            mFormatFlags: kAudioFormatFlagIsFloat | kAudioFormatFlagIsPacked | (big ? kAudioFormatFlagIsBigEndian : 0),
                            mBytesPerPacket: 0, mFramesPerPacket: 1, mBytesPerFrame: 0, mChannelsPerFrame: 0, mBitsPerChannel: bits, mReserved: 0))
                }
            }
        } else {
            descriptions.append(
                AudioStreamBasicDescription(
                    mSampleRate: 0, mFormatID: pair.mFormatID, mFormatFlags: 0, mBytesPerPacket: 0,
                    mFramesPerPacket: UInt32(CodecCatalog.info(pair.mFormatID)?.framesPerPacket ?? 0), mBytesPerFrame: 0,
                    mChannelsPerFrame: 0, mBitsPerChannel: 0, mReserved: 0))
        }
        return descriptions.flatMap { bytes($0) }
    default:
        throw AudioFailure(kAudioFileUnsupportedPropertyError, "global property '\(id.fourCharCodeString)' is not supported")
    }
}

@discardableResult
public func AudioFileGetGlobalInfoSize(
    _ inPropertyID: AudioFilePropertyID, _ inSpecifierSize: UInt32, _ inSpecifier: UnsafeMutableRawPointer?,
    _ outDataSize: UnsafeMutablePointer<UInt32>
) -> OSStatus {
    do {
        outDataSize.pointee = UInt32(try globalInfo(inPropertyID, inSpecifierSize, inSpecifier).count)
        return noErr
    } catch {
        return error.status
    }
}

@discardableResult
public func AudioFileGetGlobalInfo(
    _ inPropertyID: AudioFilePropertyID, _ inSpecifierSize: UInt32, _ inSpecifier: UnsafeMutableRawPointer?,
    _ ioDataSize: UnsafeMutablePointer<UInt32>, _ outPropertyData: UnsafeMutableRawPointer
) -> OSStatus {
    do {
        let b = try globalInfo(inPropertyID, inSpecifierSize, inSpecifier)
        let n = min(b.count, Int(ioDataSize.pointee))
        b.withUnsafeBytes { outPropertyData.copyMemory(from: $0.baseAddress!, byteCount: n) }
        ioDataSize.pointee = UInt32(n)
        return noErr
    } catch {
        return error.status
    }
}
