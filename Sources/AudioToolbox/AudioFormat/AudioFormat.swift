internal import AudioCodecs
internal import Foundation

// Apple's AudioFormat.h: what the system knows about formats.

public typealias AudioFormatPropertyID = UInt32

public let kAudioFormatProperty_FormatInfo: AudioFormatPropertyID = fourCC("fmti")
public let kAudioFormatProperty_FormatName: AudioFormatPropertyID = fourCC("fnam")
public let kAudioFormatProperty_EncodeFormatIDs: AudioFormatPropertyID = fourCC("acof")
public let kAudioFormatProperty_DecodeFormatIDs: AudioFormatPropertyID = fourCC("acif")
public let kAudioFormatProperty_FormatIsVBR: AudioFormatPropertyID = fourCC("fvbr")
public let kAudioFormatProperty_FormatIsExternallyFramed: AudioFormatPropertyID = fourCC("fexf")
public let kAudioFormatProperty_AvailableEncodeSampleRates: AudioFormatPropertyID = fourCC("aesr")

/// The value of `id` as bytes, or an object reference for FormatName.
private enum FormatValue {
    case bytes([UInt8])
    case object(NSObject)
}

private func formatValue(_ id: AudioFormatPropertyID, _ specifierSize: UInt32, _ specifier: UnsafeRawPointer?, _ io: UnsafeMutableRawPointer?, _ ioSize: UInt32) throws(AudioFormatFailure) -> FormatValue {
    func asbdSpecifier() throws(AudioFormatFailure) -> AudioStreamBasicDescription {
        guard let specifier, Int(specifierSize) >= MemoryLayout<AudioStreamBasicDescription>.size else {
            throw AudioFormatFailure(kAudioFormatBadSpecifierSizeError)
        }
        return specifier.loadUnaligned(as: AudioStreamBasicDescription.self)
    }
    switch id {
    case kAudioFormatProperty_EncodeFormatIDs:
        return .bytes(([kAudioFormatLinearPCM] + CodecCatalog.encodable).flatMap { bytes($0) })
    case kAudioFormatProperty_DecodeFormatIDs:
        return .bytes(([kAudioFormatLinearPCM] + CodecCatalog.decodable).flatMap { bytes($0) })
    case kAudioFormatProperty_FormatInfo:
        // The description to complete comes in the data; a magic cookie may come as the specifier.
        guard let io, Int(ioSize) >= MemoryLayout<AudioStreamBasicDescription>.size else { throw AudioFormatFailure(kAudioFormatBadPropertySizeError) }
        var asbd = io.loadUnaligned(as: AudioStreamBasicDescription.self)
        if let specifier, specifierSize > 0, asbd.mFormatID == kAudioFormatMPEG4AAC || asbd.mFormatID == kAudioFormatMPEG4AAC_HE {
            let cookie = Array(UnsafeRawBufferPointer(start: specifier, count: Int(specifierSize)))
            if let config = AACConfig(cookie: cookie) {
                if asbd.mSampleRate == 0 { asbd.mSampleRate = config.sampleRate }
                if asbd.mChannelsPerFrame == 0 { asbd.mChannelsPerFrame = config.channels }
            }
        }
        // A partial description may leave fields 0; beyond the limits it is no real stream.
        guard FormatLimits.bitsPerChannel.contains(asbd.mBitsPerChannel), asbd.mChannelsPerFrame <= FormatLimits.channels.upperBound else {
            throw AudioFormatFailure(kAudioFormatUnsupportedDataFormatError)
        }
        if asbd.mFormatID == kAudioFormatLinearPCM {
            guard asbd.mBitsPerChannel > 0, asbd.mChannelsPerFrame > 0 else { throw AudioFormatFailure(kAudioFormatUnsupportedDataFormatError) }
            let frameBytes = (asbd.mBitsPerChannel + 7) / 8 * (asbd.mFormatFlags & kAudioFormatFlagIsNonInterleaved != 0 ? 1 : asbd.mChannelsPerFrame)
            asbd.mFramesPerPacket = 1
            asbd.mBytesPerFrame = frameBytes
            asbd.mBytesPerPacket = frameBytes
        } else {
            guard let info = CodecCatalog.info(asbd.mFormatID) else { throw AudioFormatFailure(kAudioFormatUnsupportedDataFormatError) }
            if asbd.mFramesPerPacket == 0 { asbd.mFramesPerPacket = UInt32(info.framesPerPacket) }
            if asbd.mBytesPerPacket == 0 && info.isConstantBitRate { asbd.mBytesPerPacket = UInt32(info.bytesPerPacketPerChannel) * asbd.mChannelsPerFrame }
            if info.framesPerPacket == 1 && info.isConstantBitRate {
                asbd.mBytesPerFrame = asbd.mBytesPerPacket
                asbd.mBitsPerChannel = 8
            }
        }
        return .bytes(bytes(asbd))
    case kAudioFormatProperty_FormatIsVBR:
        let asbd = try asbdSpecifier()
        let vbr = asbd.mFormatID != kAudioFormatLinearPCM && !(CodecCatalog.info(asbd.mFormatID)?.isConstantBitRate ?? false)
        return .bytes(bytes(UInt32(vbr ? 1 : 0)))
    case kAudioFormatProperty_FormatIsExternallyFramed:
        let asbd = try asbdSpecifier()
        let framed = asbd.mFormatID != kAudioFormatLinearPCM && !(CodecCatalog.info(asbd.mFormatID)?.isConstantBitRate ?? false)
        return .bytes(bytes(UInt32(framed ? 1 : 0)))
    case kAudioFormatProperty_AvailableEncodeSampleRates:
        guard let specifier, specifierSize >= 4 else { throw AudioFormatFailure(kAudioFormatBadSpecifierSizeError) }
        let format = specifier.loadUnaligned(as: AudioFormatID.self)
        guard CodecCatalog.info(format)?.canEncode == true else { throw AudioFormatFailure(kAudioFormatUnsupportedDataFormatError) }
        let rates = PacketEncoder.supportedSampleRates(format).map { $0.map { (Double($0), Double($0)) } } ?? [(1, 384_000)]
        return .bytes(rates.flatMap { bytes(AudioValueRange(mMinimum: $0.0, mMaximum: $0.1)) })
    case kAudioFormatProperty_FormatName:
        let asbd = try asbdSpecifier()
        let name: String
        if asbd.mFormatID == kAudioFormatLinearPCM {
            let float = asbd.mFormatFlags & kAudioFormatFlagIsFloat != 0
            let big = asbd.mFormatFlags & kAudioFormatFlagIsBigEndian != 0
            let kind = float ? "Float" : asbd.mFormatFlags & kAudioFormatFlagIsSignedInteger != 0 ? "Signed Integer" : "Unsigned Integer"
            name = "Linear PCM, \(kind), \(asbd.mBitsPerChannel)-bit\(asbd.mBitsPerChannel > 8 ? (big ? " big-endian" : " little-endian") : "")"
        } else {
            guard let info = CodecCatalog.info(asbd.mFormatID) else { throw AudioFormatFailure(kAudioFormatUnknownFormatError) }
            name = info.name
        }
        return .object(NSString(string: name))
    default:
        throw AudioFormatFailure(kAudioFormatUnsupportedPropertyError)
    }
}

struct AudioFormatFailure: Error {
    let status: OSStatus
    init(_ status: OSStatus) { self.status = status }
}

@discardableResult
public func AudioFormatGetPropertyInfo(
    _ inPropertyID: AudioFormatPropertyID, _ inSpecifierSize: UInt32, _ inSpecifier: UnsafeRawPointer?,
    _ outPropertyDataSize: UnsafeMutablePointer<UInt32>
) -> OSStatus {
    if inPropertyID == kAudioFormatProperty_FormatInfo {
        outPropertyDataSize.pointee = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
        return noErr
    }
    do {
        switch try formatValue(inPropertyID, inSpecifierSize, inSpecifier, nil, 0) {
        case .bytes(let b): outPropertyDataSize.pointee = UInt32(b.count)
        case .object: outPropertyDataSize.pointee = UInt32(MemoryLayout<UnsafeRawPointer>.size)
        }
        return noErr
    } catch {
        return error.status
    }
}

/// Apple's format queries. FormatName writes a retained `NSString` reference (Apple's is a
/// `CFString`, which Linux has no class for): read it as `Unmanaged<NSString>?` and take the
/// retained value, Apple's idiom with `Unmanaged<CFString>?`.
@discardableResult
public func AudioFormatGetProperty(
    _ inPropertyID: AudioFormatPropertyID, _ inSpecifierSize: UInt32, _ inSpecifier: UnsafeRawPointer?,
    _ ioPropertyDataSize: UnsafeMutablePointer<UInt32>?, _ outPropertyData: UnsafeMutableRawPointer?
) -> OSStatus {
    guard let ioPropertyDataSize else { return kAudio_ParamError }
    do {
        switch try formatValue(inPropertyID, inSpecifierSize, inSpecifier, outPropertyData, ioPropertyDataSize.pointee) {
        case .bytes(let b):
            guard let outPropertyData else {
                ioPropertyDataSize.pointee = UInt32(b.count)
                return noErr
            }
            let n = min(b.count, Int(ioPropertyDataSize.pointee))
            guard n == b.count || inPropertyID == kAudioFormatProperty_EncodeFormatIDs || inPropertyID == kAudioFormatProperty_DecodeFormatIDs
                || inPropertyID == kAudioFormatProperty_AvailableEncodeSampleRates
            else { return kAudioFormatBadPropertySizeError }
            b.withUnsafeBytes { if n > 0 { outPropertyData.copyMemory(from: $0.baseAddress!, byteCount: n) } }
            ioPropertyDataSize.pointee = UInt32(n)
        case .object(let object):
            guard let outPropertyData, Int(ioPropertyDataSize.pointee) >= MemoryLayout<UnsafeRawPointer>.size else {
                return kAudioFormatBadPropertySizeError
            }
            outPropertyData.storeBytes(of: Unmanaged.passRetained(object).toOpaque(), as: UnsafeMutableRawPointer.self)
            ioPropertyDataSize.pointee = UInt32(MemoryLayout<UnsafeRawPointer>.size)
        }
        return noErr
    } catch {
        return error.status
    }
}

/// Sample rate and channels from an AAC cookie (ES descriptor or bare AudioSpecificConfig).
struct AACConfig {
    let sampleRate: Double
    let channels: UInt32

    init?(cookie: [UInt8]) {
        let asc = MagicCookie.extradata(fromCookie: cookie, formatID: kAudioFormatMPEG4AAC)
        guard asc.count >= 2 else { return nil }
        var bit = 0
        func read(_ n: Int) -> Int? {
            var v = 0
            for _ in 0..<n {
                guard bit / 8 < asc.count else { return nil }
                v = (v << 1) | Int((asc[bit / 8] >> (7 - UInt8(bit % 8))) & 1)
                bit += 1
            }
            return v
        }
        guard var object = read(5) else { return nil }
        if object == 31 { object = 32 + (read(6) ?? 0) }
        guard let index = read(4) else { return nil }
        let rates = [96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350]
        let rate: Int
        if index == 15 { guard let r = read(24) else { return nil }; rate = r } else {
            guard index < rates.count else { return nil }
            rate = rates[index]
        }
        guard let config = read(4) else { return nil }
        let channelsByConfig = [0, 1, 2, 3, 4, 5, 6, 8]
        sampleRate = Double(rate)
        channels = UInt32(config < channelsByConfig.count ? channelsByConfig[config] : 0)
    }
}
