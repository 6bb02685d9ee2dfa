// Another process with an audio session, for the session tests: activates a non-mixable
// playback session, plays a quiet tone through an audio queue for the given seconds, then
// deactivates and exits. Prints "active" once its session is active.
//
// In "duck" mode it activates a playback session that ducks others and plays nothing (a test
// kills it while it ducks). In "voice" mode it runs a voice-processing unit, which ducks others
// at its default level while it runs, and no session (a test kills it too).
//
// usage: openavf-sessionpeer [duck | voice] <seconds>
import AVFAudio
import Foundation

final class Tone: @unchecked Sendable {
    var phase = 0.0
    static let callback: AudioQueueOutputCallback = { userData, queue, buffer in
        let me = Unmanaged<Tone>.fromOpaque(userData!).takeUnretainedValue()
        let frames = Int(buffer.pointee.mAudioDataBytesCapacity) / 4
        let out = buffer.pointee.mAudioData.assumingMemoryBound(to: Float.self)
        for i in 0..<frames {
            out[i] = Float(0.05 * sin(me.phase))
            me.phase += 2 * Double.pi * 300 / 48000
        }
        buffer.pointee.mAudioDataByteSize = UInt32(frames * 4)
        AudioQueueEnqueueBuffer(queue, buffer, 0, nil)
    }
}

var arguments = Array(CommandLine.arguments.dropFirst())
let ducks = arguments.first == "duck"
let voice = arguments.first == "voice"
if ducks || voice { arguments.removeFirst() }
let seconds = arguments.first.flatMap(Double.init) ?? 2
if voice {
    var description = AudioComponentDescription(
        componentType: kAudioUnitType_Output, componentSubType: kAudioUnitSubType_VoiceProcessingIO, componentManufacturer: kAudioUnitManufacturer_Apple,
        componentFlags: 0, componentFlagsMask: 0)
    var unit: AudioUnit?
    var on: UInt32 = 1
    guard let component = AudioComponentFindNext(nil, &description), AudioComponentInstanceNew(component, &unit) == noErr, let unit,
        AudioUnitSetProperty(unit, kAudioOutputUnitProperty_EnableIO, kAudioUnitScope_Input, 1, &on, 4) == noErr,
        AudioUnitInitialize(unit) == noErr, AudioOutputUnitStart(unit) == noErr
    else {
        FileHandle.standardError.write(Data("openavf-sessionpeer: the voice-processing unit did not start\n".utf8))
        exit(1)
    }
    let line = Array("active\n".utf8)
    _ = line.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
    Thread.sleep(forTimeInterval: seconds)  // ducking for a while; the test kills it meanwhile
    AudioOutputUnitStop(unit)
    exit(0)
}
let session = AVAudioSession.sharedInstance()
do {
    try session.setCategory(.playback, options: ducks ? .duckOthers : [])
    try session.setActive(true)
} catch {
    FileHandle.standardError.write(Data("openavf-sessionpeer: \(error)\n".utf8))
    exit(1)
}
if ducks {
    let line = Array("active\n".utf8)
    _ = line.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
    Thread.sleep(forTimeInterval: seconds)  // ducking for a while; the test kills it meanwhile
    try? session.setActive(false)
    exit(0)
}
let tone = Tone()
var format = AudioStreamBasicDescription(
    mSampleRate: 48000, mFormatID: kAudioFormatLinearPCM, mFormatFlags: kAudioFormatFlagsNativeFloatPacked, mBytesPerPacket: 4,
    mFramesPerPacket: 1, mBytesPerFrame: 4, mChannelsPerFrame: 1, mBitsPerChannel: 32, mReserved: 0)
var queue: AudioQueueRef?
AudioQueueNewOutput(&format, Tone.callback, Unmanaged.passUnretained(tone).toOpaque(), nil, nil, 0, &queue)
for _ in 0..<3 {
    var buffer: AudioQueueBufferRef?
    AudioQueueAllocateBuffer(queue!, 4 * 960, &buffer)
    Tone.callback(Unmanaged.passUnretained(tone).toOpaque(), queue!, buffer!)
}
AudioQueueStart(queue!, nil)
let line = Array("active\n".utf8)
_ = line.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
Thread.sleep(forTimeInterval: seconds)  // the peer's "app" plays for a while; the test waits on conditions
AudioQueueDispose(queue!, true)
try? session.setActive(false, options: .notifyOthersOnDeactivation)
exit(0)
