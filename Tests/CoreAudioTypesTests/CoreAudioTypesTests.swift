import CoreAudioTypes
import XCTest

final class CoreAudioTypesTests: XCTestCase {
    func testFourCharacterCodesMatchApple() {
        XCTAssertEqual(kAudioFormatLinearPCM, 0x6C70_636D)
        XCTAssertEqual(kAudioFormatMPEG4AAC, 0x6161_6320)
        XCTAssertEqual(kAudioFormatAppleIMA4, 0x696D_6134)
        XCTAssertEqual(kAudioFormatMPEGLayer3, 0x2E6D_7033)
        XCTAssertEqual(kAudioFormatDVIIntelIMA, 0x6D73_0011)
        XCTAssertEqual(kAudioFormatLinearPCM.fourCharCodeString, "lpcm")
        XCTAssertEqual(OSStatus(bitPattern: fourCC("fmt?")).osStatusDescription, "'fmt?'")
        XCTAssertEqual(OSStatus(-50).osStatusDescription, "-50")
    }

    func testFlags() {
        XCTAssertEqual(kAudioFormatFlagsNativeEndian, 0, "this project builds for little-endian machines")
        XCTAssertEqual(kAudioFormatFlagsNativeFloatPacked, kAudioFormatFlagIsFloat | kAudioFormatFlagIsPacked)
        XCTAssertEqual(kLinearPCMFormatFlagsSampleFractionMask, 0x1F80)
    }

    func testLayoutsMatchApple() {
        XCTAssertEqual(MemoryLayout<AudioStreamBasicDescription>.size, 40)
        XCTAssertEqual(MemoryLayout<AudioTimeStamp>.size, 64)
        XCTAssertEqual(MemoryLayout<AudioStreamPacketDescription>.size, 16)
        let asbd = AudioStreamBasicDescription(
            mSampleRate: 44100, mFormatID: kAudioFormatLinearPCM, mFormatFlags: 0, mBytesPerPacket: 4,
            mFramesPerPacket: 1, mBytesPerFrame: 4, mChannelsPerFrame: 2, mBitsPerChannel: 16, mReserved: 0)
        XCTAssertEqual(asbd.mChannelsPerFrame, 2)
        XCTAssertEqual(AudioStreamBasicDescription().mSampleRate, 0)
    }

    func testTimeStampFlagsAndChannelTags() {
        var stamp = AudioTimeStamp()
        stamp.mFlags = [.sampleTimeValid, .hostTimeValid]
        XCTAssertTrue(stamp.mFlags.contains(.sampleHostTimeValid))
        XCTAssertEqual(kAudioTimeStampSampleHostTimeValid.rawValue, 3)
        XCTAssertEqual(AudioChannelLayoutTag_GetNumberOfChannels(kAudioChannelLayoutTag_MPEG_5_1_A), 6)
        XCTAssertEqual(kAudioChannelLayoutTag_Stereo, (101 << 16) | 2)
        let a = AudioGetCurrentHostTime()
        let b = AudioGetCurrentHostTime()
        XCTAssertGreaterThanOrEqual(b, a, "the host clock is monotonic")
        XCTAssertTrue(DarwinBoolean(true).boolValue)
    }
}
