public import Foundation
import Synchronization

// Apple's ExtendedAudioFile.h with Swift signatures.
//
// An ExtAudioFileRef that is not an open ExtAudioFile (disposed, never one, or another kind of
// reference) gets `kAudio_ParamError`: ExtendedAudioFile.h has no error of its own for it.
// References are never reused, so a disposed one stays invalid for the life of the process.

public typealias ExtAudioFileRef = OpaquePointer
public typealias ExtAudioFilePropertyID = UInt32

public let kExtAudioFileProperty_FileDataFormat: ExtAudioFilePropertyID = fourCC("ffmt")
public let kExtAudioFileProperty_FileChannelLayout: ExtAudioFilePropertyID = fourCC("fclo")
public let kExtAudioFileProperty_ClientDataFormat: ExtAudioFilePropertyID = fourCC("cfmt")
public let kExtAudioFileProperty_ClientChannelLayout: ExtAudioFilePropertyID = fourCC("cclo")
public let kExtAudioFileProperty_CodecManufacturer: ExtAudioFilePropertyID = fourCC("cman")
public let kExtAudioFileProperty_AudioConverter: ExtAudioFilePropertyID = fourCC("acnv")
public let kExtAudioFileProperty_AudioFile: ExtAudioFilePropertyID = fourCC("afil")
public let kExtAudioFileProperty_FileMaxPacketSize: ExtAudioFilePropertyID = fourCC("fmps")
public let kExtAudioFileProperty_ClientMaxPacketSize: ExtAudioFilePropertyID = fourCC("cmps")
public let kExtAudioFileProperty_FileLengthFrames: ExtAudioFilePropertyID = fourCC("#frm")
public let kExtAudioFileProperty_ConverterConfig: ExtAudioFilePropertyID = fourCC("accf")
public let kExtAudioFileProperty_IOBufferSizeBytes: ExtAudioFilePropertyID = fourCC("iobs")
public let kExtAudioFileProperty_PacketTable: ExtAudioFilePropertyID = fourCC("xpti")

public let kExtAudioFileError_InvalidProperty: OSStatus = -66561
public let kExtAudioFileError_InvalidPropertySize: OSStatus = -66562
public let kExtAudioFileError_NonPCMClientFormat: OSStatus = -66563
public let kExtAudioFileError_InvalidChannelMap: OSStatus = -66564
public let kExtAudioFileError_InvalidOperationOrder: OSStatus = -66565
public let kExtAudioFileError_InvalidDataFormat: OSStatus = -66566
public let kExtAudioFileError_MaxPacketSizeUnknown: OSStatus = -66567
public let kExtAudioFileError_InvalidSeek: OSStatus = -66568
public let kExtAudioFileError_AsyncWriteTooLarge: OSStatus = -66569
public let kExtAudioFileError_AsyncWriteBufferOverflow: OSStatus = -66570


private let lastReason = Mutex<String>("")

/// Why the last ExtAudioFile call failed, in words, for tools and test messages.
package func ExtAudioFileLastFailureReason() -> String { lastReason.withLock { $0 } }

private func run(_ body: () throws(AudioFailure) -> Void) -> OSStatus {
    do {
        try body()
        return noErr
    } catch {
        lastReason.withLock { $0 = error.reason }
        return error.status
    }
}

private func with(_ ref: ExtAudioFileRef, _ body: (ExtAudioFileObject) throws(AudioFailure) -> Void) -> OSStatus {
    guard let f = liveExtAudioFiles.lookup(ref) else { return kAudio_ParamError }
    return run { () throws(AudioFailure) in try body(f) }
}

/// Opens a file for reading. Set `kExtAudioFileProperty_ClientDataFormat` to read in another
/// linear PCM format (the file's own, when it is linear PCM, is the default).
@discardableResult
public func ExtAudioFileOpenURL(_ inURL: CFURL, _ outExtAudioFile: UnsafeMutablePointer<ExtAudioFileRef?>) -> OSStatus {
    outExtAudioFile.pointee = nil
    var id: AudioFileID?
    let status = AudioFileOpenURL(inURL, .readPermission, 0, &id)
    guard status == noErr, let id, let file = liveAudioFiles.lookup(id) else {
        lastReason.withLock { $0 = AudioFileLastFailureReason() }
        return status
    }
    return run { () throws(AudioFailure) in
        do throws(AudioFailure) {
            let ext = try ExtAudioFileObject(file: file, ownsFile: true, forWriting: false)
            liveExtAudioFiles.add(ext)
            outExtAudioFile.pointee = ext.ref
        } catch {
            AudioFileClose(id)
            throw error
        }
    }
}

/// Wraps an open AudioFile; disposing the ExtAudioFile leaves it open.
@discardableResult
public func ExtAudioFileWrapAudioFileID(_ inFileID: AudioFileID, _ inForWriting: Bool, _ outExtAudioFile: UnsafeMutablePointer<ExtAudioFileRef?>) -> OSStatus {
    outExtAudioFile.pointee = nil
    guard let file = liveAudioFiles.lookup(inFileID) else { return kAudioFileNotOpenError }
    return run { () throws(AudioFailure) in
        let ext = try ExtAudioFileObject(file: file, ownsFile: false, forWriting: inForWriting)
        liveExtAudioFiles.add(ext)
        outExtAudioFile.pointee = ext.ref
    }
}

/// Creates a file of `inFileType` holding `inStreamDesc`. For a compressed file format, set a
/// linear PCM client format before writing; encoding happens inside.
@discardableResult
public func ExtAudioFileCreateWithURL(
    _ inURL: CFURL, _ inFileType: AudioFileTypeID, _ inStreamDesc: UnsafePointer<AudioStreamBasicDescription>,
    _ inChannelLayout: UnsafePointer<AudioChannelLayout>?, _ inFlags: UInt32, _ outExtAudioFile: UnsafeMutablePointer<ExtAudioFileRef?>
) -> OSStatus {
    outExtAudioFile.pointee = nil
    var format: AudioStreamBasicDescription
    do {
        format = try ConverterCore.complete(inStreamDesc.pointee, sampleRateFrom: nil)
    } catch {
        lastReason.withLock { $0 = error.reason }
        return kAudioFileUnsupportedDataFormatError
    }
    var id: AudioFileID?
    let status = AudioFileCreateWithURL(inURL, inFileType, &format, AudioFileFlags(rawValue: inFlags), &id)
    guard status == noErr, let id, let file = liveAudioFiles.lookup(id) else {
        lastReason.withLock { $0 = AudioFileLastFailureReason() }
        return status
    }
    if let inChannelLayout {
        _ = AudioFileSetProperty(id, kAudioFilePropertyChannelLayout, UInt32(MemoryLayout<AudioChannelLayout>.size), inChannelLayout)
    }
    return run { () throws(AudioFailure) in
        do throws(AudioFailure) {
            let ext = try ExtAudioFileObject(file: file, ownsFile: true, forWriting: true)
            liveExtAudioFiles.add(ext)
            outExtAudioFile.pointee = ext.ref
        } catch {
            AudioFileClose(id)
            throw error
        }
    }
}

/// Finishes writing (flushing the encoder and recording priming and remainder) and closes.
@discardableResult
public func ExtAudioFileDispose(_ inExtAudioFile: ExtAudioFileRef) -> OSStatus {
    guard let f = liveExtAudioFiles.remove(inExtAudioFile) else { return kAudio_ParamError }
    return run { () throws(AudioFailure) in try f.dispose() }
}

/// Reads up to `ioNumberFrames` frames in the client format; 0 frames back means the end.
@discardableResult
public func ExtAudioFileRead(
    _ inExtAudioFile: ExtAudioFileRef, _ ioNumberFrames: UnsafeMutablePointer<UInt32>, _ ioData: UnsafeMutablePointer<AudioBufferList>
) -> OSStatus {
    let wanted = Int(ioNumberFrames.pointee)
    ioNumberFrames.pointee = 0
    return with(inExtAudioFile) { f throws(AudioFailure) in
        ioNumberFrames.pointee = UInt32(try f.read(wanted, into: UnsafeMutableAudioBufferListPointer(ioData)))
    }
}

/// Writes `inNumberFrames` frames in the client format.
@discardableResult
public func ExtAudioFileWrite(
    _ inExtAudioFile: ExtAudioFileRef, _ inNumberFrames: UInt32, _ ioData: UnsafePointer<AudioBufferList>
) -> OSStatus {
    with(inExtAudioFile) { f throws(AudioFailure) in
        try f.write(Int(inNumberFrames), from: UnsafeMutableAudioBufferListPointer(UnsafeMutablePointer(mutating: ioData)))
    }
}

/// Apple's asynchronous write. Here the write is synchronous: it returns once the data is in the
/// file, so nothing is lost, but it blocks and allocates — never call it on a real-time thread.
/// A call with 0 frames and a nil list (Apple's priming idiom) does nothing.
@discardableResult
public func ExtAudioFileWriteAsync(
    _ inExtAudioFile: ExtAudioFileRef, _ inNumberFrames: UInt32, _ ioData: UnsafePointer<AudioBufferList>?
) -> OSStatus {
    guard let ioData, inNumberFrames > 0 else { return liveExtAudioFiles.lookup(inExtAudioFile) == nil ? kAudio_ParamError : noErr }
    return ExtAudioFileWrite(inExtAudioFile, inNumberFrames, ioData)
}

/// Moves the read position to `inFrameOffset`, in the file's sample frames (Apple's QA1609). A
/// file being written seeks within what is written, and later writes overwrite from there, when
/// it holds linear PCM at the client format's sample rate; otherwise `kExtAudioFileError_InvalidSeek`.
@discardableResult
public func ExtAudioFileSeek(_ inExtAudioFile: ExtAudioFileRef, _ inFrameOffset: Int64) -> OSStatus {
    with(inExtAudioFile) { f throws(AudioFailure) in try f.seek(to: inFrameOffset) }
}

/// The read/write position in the file's sample frames.
@discardableResult
public func ExtAudioFileTell(_ inExtAudioFile: ExtAudioFileRef, _ outFrameOffset: UnsafeMutablePointer<Int64>) -> OSStatus {
    with(inExtAudioFile) { f throws(AudioFailure) in outFrameOffset.pointee = f.currentFrame }
}

private func propertyBytes(_ id: ExtAudioFilePropertyID, _ f: ExtAudioFileObject) throws(AudioFailure) -> [UInt8] {
    switch id {
    case kExtAudioFileProperty_FileDataFormat: return bytes(f.fileFormat)
    case kExtAudioFileProperty_ClientDataFormat: return bytes(f.clientFormat)
    case kExtAudioFileProperty_FileLengthFrames: return bytes(f.fileLengthFrames)
    case kExtAudioFileProperty_AudioFile: return bytes(f.fileID)
    case kExtAudioFileProperty_AudioConverter:
        guard let c = f.converter else { throw AudioFailure(kExtAudioFileError_InvalidOperationOrder, "set a client format first") }
        return bytes(c.ref)
    case kExtAudioFileProperty_FileMaxPacketSize:
        var size: UInt32 = 0
        var n = UInt32(MemoryLayout<UInt32>.size)
        _ = AudioFileGetProperty(f.fileID, kAudioFilePropertyPacketSizeUpperBound, &n, &size)
        return bytes(size)
    case kExtAudioFileProperty_ClientMaxPacketSize: return bytes(f.clientFormat.mBytesPerPacket)
    case kExtAudioFileProperty_ClientChannelLayout where f.clientChannelLayout != nil:
        return f.clientChannelLayout!
    case kExtAudioFileProperty_FileChannelLayout, kExtAudioFileProperty_ClientChannelLayout:
        var size: UInt32 = 0
        guard AudioFileGetPropertyInfo(f.fileID, kAudioFilePropertyChannelLayout, &size, nil) == noErr else {
            throw AudioFailure(kExtAudioFileError_InvalidProperty, "the file has no channel layout")
        }
        var layout = [UInt8](repeating: 0, count: Int(size))
        _ = layout.withUnsafeMutableBytes { AudioFileGetProperty(f.fileID, kAudioFilePropertyChannelLayout, &size, $0.baseAddress!) }
        return layout
    case kExtAudioFileProperty_PacketTable:
        var info = AudioFilePacketTableInfo()
        var n = UInt32(MemoryLayout<AudioFilePacketTableInfo>.size)
        guard AudioFileGetProperty(f.fileID, kAudioFilePropertyPacketTableInfo, &n, &info) == noErr else {
            throw AudioFailure(kExtAudioFileError_InvalidProperty, "the file has no packet table")
        }
        return bytes(info)
    default:
        throw AudioFailure(kExtAudioFileError_InvalidProperty, "property '\(id.fourCharCodeString)' is not supported")
    }
}

@discardableResult
public func ExtAudioFileGetPropertyInfo(
    _ inExtAudioFile: ExtAudioFileRef, _ inPropertyID: ExtAudioFilePropertyID, _ outSize: UnsafeMutablePointer<UInt32>?,
    _ outWritable: UnsafeMutablePointer<DarwinBoolean>?
) -> OSStatus {
    with(inExtAudioFile) { f throws(AudioFailure) in
        outSize?.pointee = UInt32(try propertyBytes(inPropertyID, f).count)
        outWritable?.pointee = DarwinBoolean(
            [kExtAudioFileProperty_ClientDataFormat, kExtAudioFileProperty_ClientChannelLayout, kExtAudioFileProperty_ConverterConfig].contains(inPropertyID))
    }
}

@discardableResult
public func ExtAudioFileGetProperty(
    _ inExtAudioFile: ExtAudioFileRef, _ inPropertyID: ExtAudioFilePropertyID, _ ioPropertyDataSize: UnsafeMutablePointer<UInt32>,
    _ outPropertyData: UnsafeMutableRawPointer
) -> OSStatus {
    with(inExtAudioFile) { f throws(AudioFailure) in
        let b = try propertyBytes(inPropertyID, f)
        guard PropertyData.copy(b, to: outPropertyData, size: ioPropertyDataSize) else {
            throw AudioFailure(kExtAudioFileError_InvalidPropertySize, "the property needs \(b.count) bytes")
        }
    }
}

/// Sets the client data format (and with it the converter), the client channel layout (the
/// client's channels become the file's reordered by label, or mixed between mono and stereo; see
/// `ExtAudioFileObject.setClientChannelLayout`: a layout that is not a reordering of the file's
/// is `kExtAudioFileError_InvalidChannelMap`), or `ConverterConfig` (after changing the
/// converter's properties; nothing else to do here, so it is accepted).
@discardableResult
public func ExtAudioFileSetProperty(
    _ inExtAudioFile: ExtAudioFileRef, _ inPropertyID: ExtAudioFilePropertyID, _ inPropertyDataSize: UInt32,
    _ inPropertyData: UnsafeRawPointer?
) -> OSStatus {
    with(inExtAudioFile) { f throws(AudioFailure) in
        switch inPropertyID {
        case kExtAudioFileProperty_ClientDataFormat:
            guard let format = PropertyData.load(AudioStreamBasicDescription.self, from: inPropertyData, size: inPropertyDataSize) else {
                throw AudioFailure(kExtAudioFileError_InvalidPropertySize, "the client format is an AudioStreamBasicDescription")
            }
            try f.setClientFormat(format)
        case kExtAudioFileProperty_ClientChannelLayout:
            guard let inPropertyData, inPropertyDataSize >= 12 else {
                throw AudioFailure(kExtAudioFileError_InvalidPropertySize, "a channel layout takes at least 12 bytes")
            }
            try f.setClientChannelLayout(Array(UnsafeRawBufferPointer(start: inPropertyData, count: Int(inPropertyDataSize))))
        case kExtAudioFileProperty_ConverterConfig:
            break
        default:
            throw AudioFailure(kExtAudioFileError_InvalidProperty, "property '\(inPropertyID.fourCharCodeString)' cannot be set")
        }
    }
}
