internal import AudioCodecs
import CoreAudioTypes
internal import Foundation
import Glibc
import Synchronization

/// An open AudioFile: its container behind a lock (Apple's AudioFile calls may come from any
/// thread), reachable from an ``AudioFileID`` only while it is open.
final class AudioFileObject: ReferencedObject, @unchecked Sendable {
    private let lock = NSLock()
    private let container: any AudioFileContainer
    let permissions: AudioFilePermissions
    /// The reason for the last failure, for command-line tools to print.
    private(set) var lastReason = ""

    init(_ container: any AudioFileContainer, permissions: AudioFilePermissions) {
        self.container = container
        self.permissions = permissions
    }

    /// The ``AudioFileID`` handed to the user, never reused (``newObjectReference(_:)``).
    let ref: AudioFileID = newObjectReference(.audioFile)
    var id: AudioFileID { ref }

    /// Runs `body` on the container under the lock; a failure becomes its status.
    func with(_ body: (any AudioFileContainer) throws(AudioFailure) -> Void) -> OSStatus {
        lock.lock()
        defer { lock.unlock() }
        do {
            try body(container)
            return noErr
        } catch {
            lastReason = error.reason
            return error.status
        }
    }

    // MARK: Opening and creating

    static func open(path: String, permissions: AudioFilePermissions, hint: AudioFileTypeID) throws(AudioFailure) -> AudioFileObject {
        let flags = permissions == .readPermission ? O_RDONLY : O_RDWR
        let fd = Glibc.open(path, flags | O_CLOEXEC)
        guard fd >= 0 else { throw openFailure(path) }
        var head = [UInt8](repeating: 0, count: 12)
        let got = head.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 12, 0) }
        var st = stat()
        if fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR {
            Glibc.close(fd)
            throw AudioFailure(kAudioFileUnsupportedFileTypeError, "\(path) is a directory")
        }
        let kind: ChunkFile.Type?
        if got == 12 {
            var r = ByteReader(head)
            let magic = r.fourCC()!
            _ = r.be(UInt32.self)
            let form = r.fourCC()!
            switch (magic, form) {
            case (fourCC("caff"), _): kind = CAFFile.self
            case (fourCC("RIFF"), fourCC("WAVE")): kind = WAVEFile.self
            case (fourCC("FORM"), fourCC("AIFF")): kind = AIFFFile.self
            case (fourCC("FORM"), fourCC("AIFC")): kind = AIFCFile.self
            default: kind = nil
            }
        } else {
            kind = nil
        }
        if let kind {
            do {
                return AudioFileObject(try kind.init(fd: fd, writable: permissions != .readPermission), permissions: permissions)
            } catch {
                Glibc.close(fd)
                throw error
            }
        }
        Glibc.close(fd)
        if got < 4 {
            let named = hint != 0 || AudioFileObject.type(forExtension: (path as NSString).pathExtension) != nil
            throw AudioFailure(
                named ? kAudioFileInvalidFileError : kAudioFileUnsupportedFileTypeError,
                "\(path) is too short (\(max(got, 0)) bytes) to be an audio file")
        }
        guard permissions == .readPermission else {
            throw AudioFailure(kAudioFileOperationNotSupportedError, "\(path): this file type opens for reading only")
        }
        return AudioFileObject(try CodecFile(reading: path), permissions: permissions)
    }

    static func create(path: String, type: AudioFileTypeID, format: AudioStreamBasicDescription, flags: AudioFileFlags) throws(AudioFailure) -> AudioFileObject {
        let kind: ChunkFile.Type?
        switch type {
        case kAudioFileCAFType: kind = CAFFile.self
        case kAudioFileWAVEType: kind = WAVEFile.self
        case kAudioFileAIFFType: kind = AIFFFile.self
        case kAudioFileAIFCType: kind = AIFCFile.self
        default: kind = nil
        }
        guard kind != nil || CodecFile.writable[type] != nil else {
            throw AudioFailure(kAudioFileUnsupportedFileTypeError, "files of type '\(type.fourCharCodeString)' cannot be written")
        }
        // Check the format before touching the disk.
        if let kind { try kind.check(format) }
        let fd = Glibc.open(path, O_RDWR | O_CREAT | O_CLOEXEC | (flags.contains(.eraseFile) ? O_TRUNC : O_EXCL), 0o644)
        guard fd >= 0 else {
            if errno == EEXIST { throw AudioFailure(kAudioFilePermissionsError, "\(path) exists; pass .eraseFile to replace it") }
            throw openFailure(path)
        }
        if let kind {
            do {
                return AudioFileObject(try kind.init(creating: fd, format: format), permissions: .readWritePermission)
            } catch {
                Glibc.close(fd)
                unlink(path)
                throw error
            }
        }
        Glibc.close(fd)
        do {
            return AudioFileObject(try CodecFile(creating: path, type: type, format: format), permissions: .writePermission)
        } catch {
            unlink(path)
            throw error
        }
    }

    private static func openFailure(_ path: String) -> AudioFailure {
        let reason = "\(path): \(String(cString: strerror(errno)))"
        switch errno {
        case ENOENT, ENOTDIR: return AudioFailure(kAudioFileFileNotFoundError, reason)
        case EACCES, EPERM, EROFS: return AudioFailure(kAudioFilePermissionsError, reason)
        case EISDIR: return AudioFailure(kAudioFileUnsupportedFileTypeError, reason)
        case EMFILE, ENFILE: return AudioFailure(kAudio_TooManyFilesOpenError, reason)
        default: return AudioFailure(kAudioFileUnspecifiedError, reason)
        }
    }

    /// Apple's type for a file name extension, `nil` when none matches.
    static func type(forExtension ext: String) -> AudioFileTypeID? {
        switch ext.lowercased() {
        case "caf": kAudioFileCAFType
        case "wav", "wave": kAudioFileWAVEType
        case "aif", "aiff": kAudioFileAIFFType
        case "aifc": kAudioFileAIFCType
        case "m4a": kAudioFileM4AType
        case "m4b": kAudioFileM4BType
        case "mp4": kAudioFileMPEG4Type
        case "aac", "adts": kAudioFileAAC_ADTSType
        case "mp3": kAudioFileMP3Type
        case "flac": kAudioFileFLACType
        case "ogg", "opus", "oga": kAudioFileOggType
        case "3gp": kAudioFile3GPType
        case "3g2": kAudioFile3GP2Type
        case "amr": kAudioFileAMRType
        case "ac3": kAudioFileAC3Type
        case "au", "snd": kAudioFileNextType
        default: nil
        }
    }

    /// Types this library reads and writes.
    static var readableTypes: [AudioFileTypeID] {
        [kAudioFileCAFType, kAudioFileWAVEType, kAudioFileAIFFType, kAudioFileAIFCType, kAudioFileM4AType, kAudioFileM4BType,
         kAudioFileMPEG4Type, kAudioFileAAC_ADTSType, kAudioFileMP3Type, kAudioFileFLACType, kAudioFileOggType,
         kAudioFile3GPType, kAudioFile3GP2Type, kAudioFileAMRType, kAudioFileAC3Type, kAudioFileNextType]
    }

    static var writableTypes: [AudioFileTypeID] {
        [kAudioFileCAFType, kAudioFileWAVEType, kAudioFileAIFFType, kAudioFileAIFCType] + CodecFile.writable.keys.sorted()
    }

    /// The format IDs a writable `type` holds.
    static func formats(for type: AudioFileTypeID) -> [AudioFormatID]? {
        switch type {
        case kAudioFileCAFType: [kAudioFormatLinearPCM] + CodecCatalog.all.map(\.formatID)
        case kAudioFileWAVEType: [kAudioFormatLinearPCM, kAudioFormatULaw, kAudioFormatALaw]
        case kAudioFileAIFFType: [kAudioFormatLinearPCM]
        case kAudioFileAIFCType: [kAudioFormatLinearPCM, kAudioFormatULaw, kAudioFormatALaw, kAudioFormatAppleIMA4]
        default: CodecFile.writable[type]?.formats
        }
    }
}

