import AudioToolbox
import Foundation
import XCTest

/// AudioFile properties and global info beyond what the round trips read.
final class AudioFilePropertyTests: XCTestCase {
    var dir: URL!
    override func setUpWithError() throws { dir = try temporaryDirectory() }
    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: dir) }

    func testCAFKeepsLayoutInfoAndPacketTable() throws {
        let url = dir.appendingPathComponent("meta.caf")
        var format = pcmFormat(channels: 6, bits: 16)
        var file: AudioFileID?
        try check(AudioFileCreateWithURL(url as CFURL, kAudioFileCAFType, &format, .eraseFile, &file), "create")
        var layout = AudioChannelLayout()
        layout.mChannelLayoutTag = (121 << 16) | 6
        try check(AudioFileSetProperty(file!, kAudioFilePropertyChannelLayout, UInt32(MemoryLayout<AudioChannelLayout>.size), &layout), "layout")
        let info: NSDictionary = [kAFInfoDictionary_Title: "A test", kAFInfoDictionary_Artist: "OpenAVFAudio"]
        var reference = Unmanaged.passUnretained(info).toOpaque()
        try check(AudioFileSetProperty(file!, kAudioFilePropertyInfoDictionary, UInt32(MemoryLayout<UnsafeMutableRawPointer>.size), &reference), "info")
        var frames = [Int16](repeating: 7, count: 6 * 100)
        var n: UInt32 = 100
        try check(AudioFileWritePackets(file!, false, UInt32(frames.count * 2), nil, 0, &n, &frames), "write")
        try check(AudioFileClose(file!), "close")

        try check(AudioFileOpenURL(url as CFURL, .readPermission, 0, &file), "open")
        defer { AudioFileClose(file!) }
        let back = try fileProperty(file!, kAudioFilePropertyChannelLayout, AudioChannelLayout())
        XCTAssertEqual(back.mChannelLayoutTag, layout.mChannelLayoutTag)
        var dictionary: Unmanaged<NSDictionary>?
        var size = UInt32(MemoryLayout<Unmanaged<NSDictionary>?>.size)
        try check(AudioFileGetProperty(file!, kAudioFilePropertyInfoDictionary, &size, &dictionary), "info")
        let read = try XCTUnwrap(dictionary?.takeRetainedValue())
        XCTAssertEqual(read[kAFInfoDictionary_Title] as? String, "A test")
        XCTAssertEqual(read[kAFInfoDictionary_Artist] as? String, "OpenAVFAudio")
        XCTAssertNotNil(read[kAFInfoDictionary_ApproximateDurationInSeconds])
        XCTAssertEqual(try fileProperty(file!, kAudioFilePropertyEstimatedDuration, Double(0)), 100.0 / 44100, accuracy: 1e-9)
        XCTAssertEqual(try fileProperty(file!, kAudioFilePropertyBitRate, UInt32(0)), 44100 * 16 * 6)
        // Errors: wrong size, unknown property, writing a read-only file, a closed file.
        var tooSmall: UInt16 = 0
        size = 2
        XCTAssertEqual(AudioFileGetProperty(file!, kAudioFilePropertyDataFormat, &size, &tooSmall), kAudioFileBadPropertySizeError)
        size = 4
        XCTAssertEqual(AudioFileGetProperty(file!, fourCC("nope"), &size, &tooSmall), kAudioFileUnsupportedPropertyError)
        n = 1
        XCTAssertEqual(AudioFileWritePackets(file!, false, 12, nil, 100, &n, &frames), kAudioFilePermissionsError)
        XCTAssertEqual(AudioFileGetProperty(OpaquePointer(bitPattern: 0x1234)!, kAudioFilePropertyDataFormat, &size, &tooSmall), kAudioFileNotOpenError)
    }

    func testCompressedCAFRecordsPrimingAndRemainder() throws {
        let url = dir.appendingPathComponent("aac.caf")
        let frames = 10_000
        try writeWithExtAudioFile(url, type: kAudioFileCAFType, format: compressed(kAudioFormatMPEG4AAC), samples: testSignal(frames: frames, channels: 2), channels: 2, rate: 44100)
        var file: AudioFileID?
        try check(AudioFileOpenURL(url as CFURL, .readPermission, 0, &file), "open")
        defer { AudioFileClose(file!) }
        let table = try fileProperty(file!, kAudioFilePropertyPacketTableInfo, AudioFilePacketTableInfo())
        let packets = try fileProperty(file!, kAudioFilePropertyAudioDataPacketCount, UInt64(0))
        XCTAssertEqual(table.mNumberValidFrames, Int64(frames))
        XCTAssertEqual(table.mPrimingFrames, 1024)
        XCTAssertEqual(Int64(packets) * 1024, table.mNumberValidFrames + Int64(table.mPrimingFrames) + Int64(table.mRemainderFrames))
        var cookieSize: UInt32 = 0
        try check(AudioFileGetPropertyInfo(file!, kAudioFilePropertyMagicCookieData, &cookieSize, nil), "cookie")
        XCTAssertGreaterThan(cookieSize, 0)
        let maximum = try fileProperty(file!, kAudioFilePropertyMaximumPacketSize, UInt32(0))
        let bound = try fileProperty(file!, kAudioFilePropertyPacketSizeUpperBound, UInt32(0))
        XCTAssertGreaterThan(maximum, 0)
        XCTAssertGreaterThanOrEqual(bound, maximum)
    }

    func testGlobalInfo() throws {
        func ids(_ property: AudioFilePropertyID, _ specifier: UInt32? = nil) throws -> [UInt32] {
            var spec = specifier ?? 0
            let specSize: UInt32 = specifier == nil ? 0 : 4
            return try withUnsafeMutableBytes(of: &spec) { raw in
                let pointer = specifier == nil ? nil : raw.baseAddress
                var size: UInt32 = 0
                try check(AudioFileGetGlobalInfoSize(property, specSize, pointer, &size), "size")
                var out = [UInt32](repeating: 0, count: Int(size) / 4)
                try check(AudioFileGetGlobalInfo(property, specSize, pointer, &size, &out), "info")
                return out
            }
        }
        let readable = try ids(kAudioFileGlobalInfo_ReadableTypes)
        let writable = try ids(kAudioFileGlobalInfo_WritableTypes)
        for t in [kAudioFileCAFType, kAudioFileWAVEType, kAudioFileAIFFType, kAudioFileAIFCType, kAudioFileM4AType, kAudioFileFLACType] {
            XCTAssertTrue(readable.contains(t) && writable.contains(t), t.fourCharCodeString)
        }
        XCTAssertTrue(readable.contains(kAudioFileMP3Type))
        XCTAssertTrue(readable.contains(kAudioFileOggType))
        XCTAssertEqual(Set(try ids(kAudioFileGlobalInfo_AvailableFormatIDs, kAudioFileWAVEType)), [kAudioFormatLinearPCM, kAudioFormatULaw, kAudioFormatALaw])
        XCTAssertTrue(try ids(kAudioFileGlobalInfo_AvailableFormatIDs, kAudioFileM4AType).contains(kAudioFormatMPEG4AAC))
        var spec = fourCC("nope")
        var size: UInt32 = 0
        XCTAssertEqual(AudioFileGetGlobalInfoSize(kAudioFileGlobalInfo_AvailableFormatIDs, 4, &spec, &size), kAudioFileUnsupportedFileTypeError)
        var pair = AudioFileTypeAndFormatID(mFileType: kAudioFileAIFFType, mFormatID: kAudioFormatLinearPCM)
        try check(AudioFileGetGlobalInfoSize(kAudioFileGlobalInfo_AvailableStreamDescriptionsForFormat, UInt32(MemoryLayout<AudioFileTypeAndFormatID>.size), &pair, &size), "descriptions")
        XCTAssertEqual(Int(size) / MemoryLayout<AudioStreamBasicDescription>.size, 4, "AIFF: 8, 16, 24, 32-bit integers")
    }
}
