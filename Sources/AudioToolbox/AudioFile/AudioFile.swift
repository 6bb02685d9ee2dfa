public import Foundation
import Synchronization

// Apple's AudioFile.h functions, with Swift signatures as Apple's SDK imports them.
//
// An AudioFileID that is not an open file (closed, never one, or another kind of reference) gets
// `kAudioFileNotOpenError` (AudioFile.h: "The file is closed"). IDs are never reused, so a closed
// one stays invalid for the life of the process.

private let lastReason = Mutex<String>("")

/// Why the last AudioFile call of this process failed, in words (the status says which error;
/// this says what was wrong), for command-line tools and test messages.
package func AudioFileLastFailureReason() -> String { lastReason.withLock { $0 } }

/// The file type a name's extension stands for (`caf`, `wav`, `m4a`…), `nil` for none.
package func AudioFileTypeForExtension(_ pathExtension: String) -> AudioFileTypeID? {
    AudioFileObject.type(forExtension: pathExtension)
}

private func fail(_ failure: AudioFailure) -> OSStatus {
    lastReason.withLock { $0 = failure.reason }
    return failure.status
}

private func withFile(_ id: AudioFileID, _ body: (any AudioFileContainer) throws(AudioFailure) -> Void) -> OSStatus {
    guard let file = liveAudioFiles.lookup(id) else {
        return fail(AudioFailure(kAudioFileNotOpenError, "the AudioFileID is not an open file"))
    }
    let status = file.with(body)
    if status != noErr { lastReason.withLock { $0 = file.lastReason } }
    return status
}

/// Opens an existing audio file. The type is found from the file's contents; `inFileTypeHint`
/// is only a hint, as on Apple's platforms. Types read through FFmpeg (M4A, MP3, FLAC, Ogg…)
/// open for reading only: write access to them is `kAudioFileOperationNotSupportedError`.
@discardableResult
public func AudioFileOpenURL(
    _ inFileRef: CFURL, _ inPermissions: AudioFilePermissions, _ inFileTypeHint: AudioFileTypeID,
    _ outAudioFile: UnsafeMutablePointer<AudioFileID?>
) -> OSStatus {
    guard inFileRef.isFileURL else { return fail(AudioFailure(kAudio_BadFilePathError, "\(inFileRef) is not a file URL")) }
    do {
        let file = try AudioFileObject.open(path: inFileRef.path, permissions: inPermissions, hint: inFileTypeHint)
        liveAudioFiles.add(file)
        outAudioFile.pointee = file.id
        return noErr
    } catch {
        outAudioFile.pointee = nil
        return fail(error)
    }
}

/// Creates a new audio file of `inFileType` holding `inFormat`. Without `.eraseFile` an existing
/// file is not replaced (`kAudioFilePermissionsError`). A type that cannot hold the format is
/// `kAudioFileUnsupportedDataFormatError`, and nothing is created.
@discardableResult
public func AudioFileCreateWithURL(
    _ inFileRef: CFURL, _ inFileType: AudioFileTypeID, _ inFormat: UnsafePointer<AudioStreamBasicDescription>,
    _ inFlags: AudioFileFlags, _ outAudioFile: UnsafeMutablePointer<AudioFileID?>
) -> OSStatus {
    guard inFileRef.isFileURL else { return fail(AudioFailure(kAudio_BadFilePathError, "\(inFileRef) is not a file URL")) }
    do {
        let file = try AudioFileObject.create(path: inFileRef.path, type: inFileType, format: inFormat.pointee, flags: inFlags)
        liveAudioFiles.add(file)
        outAudioFile.pointee = file.id
        return noErr
    } catch {
        outAudioFile.pointee = nil
        return fail(error)
    }
}

/// Finishes the file's headers and closes it; the ID is invalid afterwards.
@discardableResult
public func AudioFileClose(_ inAudioFile: AudioFileID) -> OSStatus {
    guard let file = liveAudioFiles.remove(inAudioFile) else {
        return fail(AudioFailure(kAudioFileNotOpenError, "the AudioFileID is not an open file"))
    }
    let status = file.with { c throws(AudioFailure) in try c.close() }
    if status != noErr { lastReason.withLock { $0 = file.lastReason } }
    return status
}

/// Reads whole packets starting at `inStartingPacket` into `outBuffer`, as many of
/// `ioNumPackets` as fit in `ioNumBytes`. At the end of the file `ioNumPackets` comes back 0.
@discardableResult
public func AudioFileReadPacketData(
    _ inAudioFile: AudioFileID, _ inUseCache: Bool, _ ioNumBytes: UnsafeMutablePointer<UInt32>,
    _ outPacketDescriptions: UnsafeMutablePointer<AudioStreamPacketDescription>?, _ inStartingPacket: Int64,
    _ ioNumPackets: UnsafeMutablePointer<UInt32>, _ outBuffer: UnsafeMutableRawPointer?
) -> OSStatus {
    readPackets(inAudioFile, capacity: Int(ioNumBytes.pointee), ioNumBytes, outPacketDescriptions, inStartingPacket, ioNumPackets, outBuffer)
}

/// Reads `ioNumPackets` packets; the buffer must hold them all (deprecated by Apple in favour of
/// ``AudioFileReadPacketData(_:_:_:_:_:_:_:)``, kept for the code that still calls it).
@discardableResult
public func AudioFileReadPackets(
    _ inAudioFile: AudioFileID, _ inUseCache: Bool, _ outNumBytes: UnsafeMutablePointer<UInt32>,
    _ outPacketDescriptions: UnsafeMutablePointer<AudioStreamPacketDescription>?, _ inStartingPacket: Int64,
    _ ioNumPackets: UnsafeMutablePointer<UInt32>, _ outBuffer: UnsafeMutableRawPointer?
) -> OSStatus {
    readPackets(inAudioFile, capacity: Int.max, outNumBytes, outPacketDescriptions, inStartingPacket, ioNumPackets, outBuffer)
}

private func readPackets(
    _ id: AudioFileID, capacity: Int, _ ioNumBytes: UnsafeMutablePointer<UInt32>,
    _ descriptions: UnsafeMutablePointer<AudioStreamPacketDescription>?, _ start: Int64,
    _ ioNumPackets: UnsafeMutablePointer<UInt32>, _ outBuffer: UnsafeMutableRawPointer?
) -> OSStatus {
    withFile(id) { c throws(AudioFailure) in
        guard start >= 0 else { throw AudioFailure(kAudioFileInvalidPacketOffsetError, "packet \(start) is negative") }
        let wanted = Int(min(Int64(ioNumPackets.pointee), max(c.packetCount - start, 0)))
        var count = 0
        var bytes = 0
        let variableFrames = c.format.mFramesPerPacket == 0
        while count < wanted, let p = c.packetSize(start + Int64(count)) {
            guard bytes + p.bytes <= capacity else { break }
            descriptions?[count] = AudioStreamPacketDescription(
                mStartOffset: Int64(bytes), mVariableFramesInPacket: variableFrames ? UInt32(p.frames) : 0, mDataByteSize: UInt32(p.bytes))
            bytes += p.bytes
            count += 1
        }
        if count == 0 && wanted > 0 {
            throw AudioFailure(kAudio_ParamError, "\(capacity) bytes cannot hold packet \(start) (\(c.packetSize(start)?.bytes ?? 0) bytes)")
        }
        if let outBuffer, count > 0 {
            bytes = try c.readPacketBytes(start: start, count: count, into: outBuffer)
        }
        ioNumPackets.pointee = UInt32(count)
        ioNumBytes.pointee = UInt32(bytes)
    }
}

/// Writes `ioNumPackets` packets at `inStartingPacket` (the packet count, to append). Packets of
/// variable size need `inPacketDescriptions`.
@discardableResult
public func AudioFileWritePackets(
    _ inAudioFile: AudioFileID, _ inUseCache: Bool, _ inNumBytes: UInt32,
    _ inPacketDescriptions: UnsafePointer<AudioStreamPacketDescription>?, _ inStartingPacket: Int64,
    _ ioNumPackets: UnsafeMutablePointer<UInt32>, _ inBuffer: UnsafeRawPointer
) -> OSStatus {
    withFile(inAudioFile) { c throws(AudioFailure) in
        let count = Int(ioNumPackets.pointee)
        try c.writePackets(
            start: inStartingPacket, count: count, bytes: UnsafeRawBufferPointer(start: inBuffer, count: Int(inNumBytes)),
            descriptions: inPacketDescriptions)
    }
}

/// Reads audio data bytes from `inStartingByte` (counted from the start of the audio data).
@discardableResult
public func AudioFileReadBytes(
    _ inAudioFile: AudioFileID, _ inUseCache: Bool, _ inStartingByte: Int64, _ ioNumBytes: UnsafeMutablePointer<UInt32>,
    _ outBuffer: UnsafeMutableRawPointer
) -> OSStatus {
    withFile(inAudioFile) { c throws(AudioFailure) in
        let n = try c.readBytes(start: inStartingByte, count: Int(ioNumBytes.pointee), into: outBuffer)
        ioNumBytes.pointee = UInt32(n)
        if n == 0 && inStartingByte >= c.dataByteCount {
            throw AudioFailure(kAudioFileEndOfFileError, "byte \(inStartingByte) is at or past the end of the audio data")
        }
    }
}

/// Writes audio data bytes at `inStartingByte` (CAF, WAVE, AIFF of constant-size packets).
@discardableResult
public func AudioFileWriteBytes(
    _ inAudioFile: AudioFileID, _ inUseCache: Bool, _ inStartingByte: Int64, _ ioNumBytes: UnsafeMutablePointer<UInt32>,
    _ inBuffer: UnsafeRawPointer
) -> OSStatus {
    withFile(inAudioFile) { c throws(AudioFailure) in
        guard !c.format.isVariablePacketSize else {
            throw AudioFailure(kAudioFileOperationNotSupportedError, "variable-size packets are written with AudioFileWritePackets")
        }
        try c.writeBytes(start: inStartingByte, bytes: UnsafeRawBufferPointer(start: inBuffer, count: Int(ioNumBytes.pointee)))
    }
}
