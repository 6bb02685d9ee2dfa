public import Foundation

// Apple's AudioFile.h names and values.

/// An open audio file.
public typealias AudioFileID = OpaquePointer
public typealias AudioFileTypeID = UInt32
public typealias AudioFilePropertyID = UInt32

/// Apple's `CFURL`; on Linux a Foundation `URL`, so `url as CFURL` compiles unchanged.
public typealias CFURL = URL
/// Apple's `CFDictionary`; on Linux Foundation's `NSDictionary`.
public typealias CFDictionary = NSDictionary

public enum AudioFilePermissions: Int8, Sendable {
    case readPermission = 1
    case writePermission = 2
    case readWritePermission = 3
}

public struct AudioFileFlags: OptionSet, Sendable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    /// Replace an existing file.
    public static let eraseFile = AudioFileFlags(rawValue: 1)
    /// No padding before the audio data (this library never pads, so it changes nothing).
    public static let dontPageAlignAudioData = AudioFileFlags(rawValue: 2)
}

public let kAudioFileFlags_EraseFile = AudioFileFlags.eraseFile
public let kAudioFileFlags_DontPageAlignAudioData = AudioFileFlags.dontPageAlignAudioData

/// Frames of a compressed stream: valid audio, encoder delay at the start and padding at the end.
public struct AudioFilePacketTableInfo: Equatable, Sendable {
    public var mNumberValidFrames: Int64
    public var mPrimingFrames: Int32
    public var mRemainderFrames: Int32
    public init() { self.init(mNumberValidFrames: 0, mPrimingFrames: 0, mRemainderFrames: 0) }
    public init(mNumberValidFrames: Int64, mPrimingFrames: Int32, mRemainderFrames: Int32) {
        self.mNumberValidFrames = mNumberValidFrames
        self.mPrimingFrames = mPrimingFrames
        self.mRemainderFrames = mRemainderFrames
    }
}

/// A file type and format ID pair, the specifier of `kAudioFileGlobalInfo_AvailableStreamDescriptionsForFormat`.
public struct AudioFileTypeAndFormatID: Sendable {
    public var mFileType: AudioFileTypeID
    public var mFormatID: AudioFormatID
    public init(mFileType: AudioFileTypeID, mFormatID: AudioFormatID) {
        self.mFileType = mFileType
        self.mFormatID = mFormatID
    }
}

// File types.
public let kAudioFileAIFFType: AudioFileTypeID = fourCC("AIFF")
public let kAudioFileAIFCType: AudioFileTypeID = fourCC("AIFC")
public let kAudioFileWAVEType: AudioFileTypeID = fourCC("WAVE")
public let kAudioFileRF64Type: AudioFileTypeID = fourCC("RF64")
public let kAudioFileBW64Type: AudioFileTypeID = fourCC("BW64")
public let kAudioFileWave64Type: AudioFileTypeID = fourCC("W64f")
public let kAudioFileSoundDesigner2Type: AudioFileTypeID = fourCC("Sd2f")
public let kAudioFileNextType: AudioFileTypeID = fourCC("NeXT")
public let kAudioFileMP3Type: AudioFileTypeID = fourCC("MPG3")
public let kAudioFileMP2Type: AudioFileTypeID = fourCC("MPG2")
public let kAudioFileMP1Type: AudioFileTypeID = fourCC("MPG1")
public let kAudioFileAC3Type: AudioFileTypeID = fourCC("ac-3")
public let kAudioFileAAC_ADTSType: AudioFileTypeID = fourCC("adts")
public let kAudioFileMPEG4Type: AudioFileTypeID = fourCC("mp4f")
public let kAudioFileM4AType: AudioFileTypeID = fourCC("m4af")
public let kAudioFileM4BType: AudioFileTypeID = fourCC("m4bf")
public let kAudioFileCAFType: AudioFileTypeID = fourCC("caff")
public let kAudioFile3GPType: AudioFileTypeID = fourCC("3gpp")
public let kAudioFile3GP2Type: AudioFileTypeID = fourCC("3gp2")
public let kAudioFileAMRType: AudioFileTypeID = fourCC("amrf")
public let kAudioFileFLACType: AudioFileTypeID = fourCC("flac")
public let kAudioFileLATMInLOASType: AudioFileTypeID = fourCC("loas")
/// Ogg (Opus, Vorbis, FLAC in Ogg). Apple's headers name no Ogg type; this is this library's
/// value, the container's own magic.
public let kAudioFileOggType: AudioFileTypeID = fourCC("OggS")

// Errors.
public let kAudioFileUnspecifiedError: OSStatus = OSStatus(bitPattern: fourCC("wht?"))
public let kAudioFileUnsupportedFileTypeError: OSStatus = OSStatus(bitPattern: fourCC("typ?"))
public let kAudioFileUnsupportedDataFormatError: OSStatus = OSStatus(bitPattern: fourCC("fmt?"))
public let kAudioFileUnsupportedPropertyError: OSStatus = OSStatus(bitPattern: fourCC("pty?"))
public let kAudioFileBadPropertySizeError: OSStatus = OSStatus(bitPattern: fourCC("!siz"))
public let kAudioFilePermissionsError: OSStatus = OSStatus(bitPattern: fourCC("prm?"))
public let kAudioFileNotOptimizedError: OSStatus = OSStatus(bitPattern: fourCC("optm"))
public let kAudioFileInvalidChunkError: OSStatus = OSStatus(bitPattern: fourCC("chk?"))
public let kAudioFileDoesNotAllow64BitDataSizeError: OSStatus = OSStatus(bitPattern: fourCC("off?"))
public let kAudioFileInvalidPacketOffsetError: OSStatus = OSStatus(bitPattern: fourCC("pck?"))
public let kAudioFileInvalidPacketDependencyError: OSStatus = OSStatus(bitPattern: fourCC("dep?"))
public let kAudioFileInvalidFileError: OSStatus = OSStatus(bitPattern: fourCC("dta?"))
public let kAudioFileOperationNotSupportedError: OSStatus = 0x6F70_3F3F
public let kAudioFileNotOpenError: OSStatus = -38
public let kAudioFileEndOfFileError: OSStatus = -39
public let kAudioFilePositionError: OSStatus = -40
public let kAudioFileFileNotFoundError: OSStatus = -43

// Properties.
public let kAudioFilePropertyFileFormat: AudioFilePropertyID = fourCC("ffmt")
public let kAudioFilePropertyDataFormat: AudioFilePropertyID = fourCC("dfmt")
public let kAudioFilePropertyIsOptimized: AudioFilePropertyID = fourCC("optm")
public let kAudioFilePropertyMagicCookieData: AudioFilePropertyID = fourCC("mgic")
public let kAudioFilePropertyAudioDataByteCount: AudioFilePropertyID = fourCC("bcnt")
public let kAudioFilePropertyAudioDataPacketCount: AudioFilePropertyID = fourCC("pcnt")
public let kAudioFilePropertyMaximumPacketSize: AudioFilePropertyID = fourCC("psze")
public let kAudioFilePropertyDataOffset: AudioFilePropertyID = fourCC("doff")
public let kAudioFilePropertyChannelLayout: AudioFilePropertyID = fourCC("cmap")
public let kAudioFilePropertyDeferSizeUpdates: AudioFilePropertyID = fourCC("dszu")
public let kAudioFilePropertyInfoDictionary: AudioFilePropertyID = fourCC("info")
public let kAudioFilePropertyPacketTableInfo: AudioFilePropertyID = fourCC("pnfo")
public let kAudioFilePropertyPacketSizeUpperBound: AudioFilePropertyID = fourCC("pkub")
public let kAudioFilePropertyEstimatedDuration: AudioFilePropertyID = fourCC("edur")
public let kAudioFilePropertyBitRate: AudioFilePropertyID = fourCC("brat")
public let kAudioFilePropertySourceBitDepth: AudioFilePropertyID = fourCC("sbtd")
public let kAudioFilePropertyAudioTrackCount: AudioFilePropertyID = fourCC("atct")

// Global info.
public let kAudioFileGlobalInfo_ReadableTypes: AudioFilePropertyID = fourCC("afrf")
public let kAudioFileGlobalInfo_WritableTypes: AudioFilePropertyID = fourCC("afwf")
public let kAudioFileGlobalInfo_AvailableFormatIDs: AudioFilePropertyID = fourCC("fmid")
public let kAudioFileGlobalInfo_AvailableStreamDescriptionsForFormat: AudioFilePropertyID = fourCC("sdid")

// Info dictionary keys (kAFInfoDictionary_…).
public let kAFInfoDictionary_Artist = "artist"
public let kAFInfoDictionary_Album = "album"
public let kAFInfoDictionary_Tempo = "tempo"
public let kAFInfoDictionary_KeySignature = "key signature"
public let kAFInfoDictionary_TimeSignature = "time signature"
public let kAFInfoDictionary_TrackNumber = "track number"
public let kAFInfoDictionary_Year = "year"
public let kAFInfoDictionary_Composer = "composer"
public let kAFInfoDictionary_Lyricist = "lyricist"
public let kAFInfoDictionary_Genre = "genre"
public let kAFInfoDictionary_Title = "title"
public let kAFInfoDictionary_RecordedDate = "recorded date"
public let kAFInfoDictionary_Comments = "comments"
public let kAFInfoDictionary_Copyright = "copyright"
public let kAFInfoDictionary_SourceEncoder = "source encoder"
public let kAFInfoDictionary_EncodingApplication = "encoding application"
public let kAFInfoDictionary_NominalBitRate = "nominal bit rate"
public let kAFInfoDictionary_ChannelLayout = "channel layout"
public let kAFInfoDictionary_ApproximateDurationInSeconds = "approximate duration in seconds"
public let kAFInfoDictionary_SourceBitDepth = "source bit depth"
public let kAFInfoDictionary_ISRC = "ISRC"
public let kAFInfoDictionary_SubTitle = "subtitle"
