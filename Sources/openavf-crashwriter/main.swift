// A recorder that is meant to be killed: the crash-safety test starts it, lets it write packets
// into a CAF with AudioFileWritePackets, and sends SIGKILL mid-recording. After every completed
// write call it prints the number of packets written so far, so the test knows what must survive.
//
// usage: openavf-crashwriter <path.caf> <lpcm|ima4|ulaw>
import AudioToolbox
import Foundation

/// The bytes of packet `index`: a pattern the test recomputes.
func packetBytes(_ index: Int, size: Int) -> [UInt8] {
    (0..<size).map { UInt8(truncatingIfNeeded: index &* 131 &+ $0 &* 7 &+ ($0 >> 3)) }
}

let arguments = CommandLine.arguments
guard arguments.count == 3 else {
    FileHandle.standardError.write(Data("usage: openavf-crashwriter <path.caf> <lpcm|ima4|ulaw>\n".utf8))
    exit(2)
}
var format: AudioStreamBasicDescription
switch arguments[2] {
case "ima4":
    format = AudioStreamBasicDescription(
        mSampleRate: 44100, mFormatID: kAudioFormatAppleIMA4, mFormatFlags: 0, mBytesPerPacket: 68, mFramesPerPacket: 64,
        mBytesPerFrame: 0, mChannelsPerFrame: 2, mBitsPerChannel: 0, mReserved: 0)
case "ulaw":
    format = AudioStreamBasicDescription(
        mSampleRate: 8000, mFormatID: kAudioFormatULaw, mFormatFlags: 0, mBytesPerPacket: 1, mFramesPerPacket: 1,
        mBytesPerFrame: 1, mChannelsPerFrame: 1, mBitsPerChannel: 8, mReserved: 0)
default:
    format = AudioStreamBasicDescription(
        mSampleRate: 48000, mFormatID: kAudioFormatLinearPCM, mFormatFlags: kAudioFormatFlagIsSignedInteger | kAudioFormatFlagIsPacked,
        mBytesPerPacket: 4, mFramesPerPacket: 1, mBytesPerFrame: 4, mChannelsPerFrame: 2, mBitsPerChannel: 16, mReserved: 0)
}
var file: AudioFileID?
let status = AudioFileCreateWithURL(URL(fileURLWithPath: arguments[1]) as CFURL, kAudioFileCAFType, &format, .eraseFile, &file)
guard status == noErr, let file else {
    FileHandle.standardError.write(Data("create failed: \(status.osStatusDescription)\n".utf8))
    exit(1)
}
let packetsPerWrite = 100
let size = Int(format.mBytesPerPacket)
var written = 0
while true {
    var chunk: [UInt8] = []
    for i in 0..<packetsPerWrite { chunk += packetBytes(written + i, size: size) }
    var n = UInt32(packetsPerWrite)
    guard AudioFileWritePackets(file, false, UInt32(chunk.count), nil, Int64(written), &n, chunk) == noErr else { exit(1) }
    written += Int(n)
    let line = Array("\(written)\n".utf8)
    _ = line.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }  // unbuffered: the test reads it while we run
    usleep(1000)  // pace like a recorder; the test kills it at a moment of its choosing
}
