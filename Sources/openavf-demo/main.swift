// The demo: a short melody played through an Audio Queue output queue and recorded back through
// an input queue listening to the speaker's monitor, with levels printed as it goes and a table
// of what came back at the end. The code uses only Apple's API, as an iOS app would.
import AudioTestSupport
import AudioToolbox
import Foundation

func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

let privateServer: PrivatePulseServer?
do {
    privateServer = try PrivatePulseServer.serverForThisProcess(announce: say)
} catch {
    say("No sound server answers here and a private one could not start: \(error)")
    exit(1)
}

let sampleRate = 48000.0
let notes: [(name: String, frequency: Double)] = [
    ("C5", 523.25), ("E5", 659.26), ("G5", 783.99), ("C6", 1046.50), ("G5", 783.99), ("E5", 659.26), ("C5", 523.25),
]
let noteSeconds = 0.3
let noteFrames = Int(noteSeconds * sampleRate)

/// The melody, generated on demand by the output callback.
final class Melody: @unchecked Sendable {
    var position = 0
    let total = notes.count * noteFrames
    let done = DispatchSemaphore(value: 0)
    let stopped = DispatchSemaphore(value: 0)

    func sample(_ i: Int) -> Int16 {
        let note = notes[i / noteFrames]
        let t = Double(i % noteFrames) / sampleRate
        let envelope = min(1, t / 0.01) * min(1, (noteSeconds - t) / 0.05)
        return Int16(0.5 * envelope * sin(2 * Double.pi * note.frequency * t) * 32767)
    }

    /// Fills `buffer` with the next stretch of the melody and enqueues it.
    func fill(_ queue: AudioQueueRef, _ buffer: AudioQueueBufferRef) {
        let n = min(Int(buffer.pointee.mAudioDataBytesCapacity) / 2, total - position)
        guard n > 0 else { return }
        let out = buffer.pointee.mAudioData.assumingMemoryBound(to: Int16.self)
        for i in 0..<n { out[i] = sample(position + i) }
        position += n
        buffer.pointee.mAudioDataByteSize = UInt32(n * 2)
        AudioQueueEnqueueBuffer(queue, buffer, 0, nil)
        if position >= total { done.signal() }
    }

    static let callback: AudioQueueOutputCallback = { userData, queue, buffer in
        Unmanaged<Melody>.fromOpaque(userData!).takeUnretainedValue().fill(queue, buffer)
    }

    static let runningListener: AudioQueuePropertyListenerProc = { userData, queue, id in
        var running: UInt32 = 1
        var size = UInt32(4)
        AudioQueueGetProperty(queue, id, &running, &size)
        if running == 0 { Unmanaged<Melody>.fromOpaque(userData!).takeUnretainedValue().stopped.signal() }
    }
}

/// What the input queue hands back.
final class Recording: @unchecked Sendable {
    let lock = NSLock()
    var samples: [Float] = []
    var recording = true

    /// The input callback. (Declared in a type, not as a closure in top-level code: closures
    /// there belong to the main actor, and the callback runs on the queue's thread.)
    static let callback: AudioQueueInputCallback = { userData, queue, buffer, _, _, _ in
        let rec = Unmanaged<Recording>.fromOpaque(userData!).takeUnretainedValue()
        let data = buffer.pointee.mAudioData.assumingMemoryBound(to: Int16.self)
        let n = Int(buffer.pointee.mAudioDataByteSize) / 2
        rec.lock.lock()
        for i in 0..<n { rec.samples.append(Float(data[i]) / 32768) }
        let again = rec.recording
        rec.lock.unlock()
        if again { AudioQueueEnqueueBuffer(queue, buffer, 0, nil) }
    }
}

let melody = Melody()
let recording = Recording()
var format = AudioStreamBasicDescription(
    mSampleRate: sampleRate, mFormatID: kAudioFormatLinearPCM,
    mFormatFlags: kAudioFormatFlagIsSignedInteger | kAudioFormatFlagIsPacked,
    mBytesPerPacket: 2, mFramesPerPacket: 1, mBytesPerFrame: 2, mChannelsPerFrame: 1, mBitsPerChannel: 16, mReserved: 0)
let bufferBytes = UInt32(0.020 * sampleRate) * 2

// Input queue on the default sink's monitor: it hears exactly what the output queue plays.
var input: AudioQueueRef?
var status = AudioQueueNewInput(&format, Recording.callback, Unmanaged.passUnretained(recording).toOpaque(), nil, nil, 0, &input)
guard status == noErr, let input else {
    say("AudioQueueNewInput failed: \(status.osStatusDescription)")
    exit(1)
}
let monitor: CFString? = "@DEFAULT_MONITOR@"
withUnsafePointer(to: monitor) {
    _ = AudioQueueSetProperty(input, kAudioQueueProperty_CurrentDevice, $0, UInt32(MemoryLayout<CFString?>.size))
}
var on: UInt32 = 1
AudioQueueSetProperty(input, kAudioQueueProperty_EnableLevelMetering, &on, 4)
for _ in 0..<4 {
    var b: AudioQueueBufferRef?
    AudioQueueAllocateBuffer(input, bufferBytes, &b)
    AudioQueueEnqueueBuffer(input, b!, 0, nil)
}

// Output queue, refilled by its callback.
var output: AudioQueueRef?
status = AudioQueueNewOutput(&format, Melody.callback, Unmanaged.passUnretained(melody).toOpaque(), nil, nil, 0, &output)
guard status == noErr, let output else {
    say("AudioQueueNewOutput failed: \(status.osStatusDescription)")
    exit(1)
}
AudioQueueAddPropertyListener(output, kAudioQueueProperty_IsRunning, Melody.runningListener, Unmanaged.passUnretained(melody).toOpaque())

var deviceRate: Float64 = 0
var size = UInt32(8)
AudioQueueGetProperty(output, kAudioQueueDeviceProperty_SampleRate, &deviceRate, &size)
say("Output device runs at \(Int(deviceRate)) Hz; the queue plays 16-bit mono at \(Int(sampleRate)) Hz in 20 ms buffers.")

status = AudioQueueStart(input, nil)
guard status == noErr else {
    say("AudioQueueStart (input) failed: \(status.osStatusDescription)")
    exit(1)
}
for _ in 0..<3 {
    var b: AudioQueueBufferRef?
    AudioQueueAllocateBuffer(output, bufferBytes, &b)
    melody.fill(output, b!)
}
status = AudioQueueStart(output, nil)
guard status == noErr else {
    say("AudioQueueStart (output) failed: \(status.osStatusDescription)")
    exit(1)
}
say("Playing \(notes.map(\.name).joined(separator: " ")) and recording it back:")
let deadline = Date(timeIntervalSinceNow: Double(notes.count) * noteSeconds + 5)
while melody.done.wait(timeout: .now() + 0.1) == .timedOut, Date() < deadline {
    var meter = AudioQueueLevelMeterState()
    var meterSize = UInt32(MemoryLayout<AudioQueueLevelMeterState>.size)
    if AudioQueueGetProperty(input, kAudioQueueProperty_CurrentLevelMeterDB, &meter, &meterSize) == noErr {
        let bars = String(repeating: "#", count: max(0, Int((meter.mAveragePower + 60) / 2)))
        say(String(format: "  input level %6.1f dBFS avg %6.1f dBFS peak  %@", meter.mAveragePower, meter.mPeakPower, bars))
    }
}
AudioQueueStop(output, false)
_ = melody.stopped.wait(timeout: .now() + 5)
// Let the last note reach the monitor before the recording stops.
let heardUntil = Date(timeIntervalSinceNow: 0.3)
while Date() < heardUntil { _ = CFRunLoopRunInMode(.defaultMode, 0.05, false) }
recording.lock.lock()
recording.recording = false
recording.lock.unlock()
AudioQueueStop(input, true)
AudioQueueDispose(output, true)
AudioQueueDispose(input, true)

recording.lock.lock()
let recorded = recording.samples
recording.lock.unlock()
guard let onset = SignalAnalysis.onset(recorded, threshold: 0.02) else {
    say("Nothing came back: the recording is silent.")
    exit(1)
}
say("Recorded \(String(format: "%.2f", Double(recorded.count) / sampleRate)) s; the melody starts \(String(format: "%.0f", Double(onset) / sampleRate * 1000)) ms in.")
say("note   played Hz   recorded Hz   level dBFS")
var ok = true
for (i, note) in notes.enumerated() {
    let from = onset + i * noteFrames + noteFrames / 5
    let to = min(recorded.count, onset + (i + 1) * noteFrames - noteFrames / 5)
    guard from < to else { break }
    let window = recorded[from..<to]
    let frequency = SignalAnalysis.frequency(window, sampleRate: sampleRate)
    let level = SignalAnalysis.rmsDB(window)
    ok = ok && abs(frequency - note.frequency) < 2
    say(String(format: "%-4@ %10.2f %13.2f %12.1f", note.name, note.frequency, frequency, level))
}
say(ok ? "Every note came back at its pitch." : "Some notes came back off pitch.")

// The recording as a file: AAC in M4A through ExtAudioFile, read back, as an app keeps a memo.
let memo = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("openavf-demo-\(getpid()).m4a")
defer { try? FileManager.default.removeItem(at: memo) }
func saveAndReload() -> Bool {
    var aac = AudioStreamBasicDescription(
        mSampleRate: sampleRate, mFormatID: kAudioFormatMPEG4AAC, mFormatFlags: 0, mBytesPerPacket: 0, mFramesPerPacket: 0, mBytesPerFrame: 0,
        mChannelsPerFrame: 1, mBitsPerChannel: 0, mReserved: 0)
    var client = AudioStreamBasicDescription(
        mSampleRate: sampleRate, mFormatID: kAudioFormatLinearPCM, mFormatFlags: kAudioFormatFlagsNativeFloatPacked, mBytesPerPacket: 4,
        mFramesPerPacket: 1, mBytesPerFrame: 4, mChannelsPerFrame: 1, mBitsPerChannel: 32, mReserved: 0)
    let size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
    var file: ExtAudioFileRef?
    guard ExtAudioFileCreateWithURL(memo as CFURL, kAudioFileM4AType, &aac, nil, AudioFileFlags.eraseFile.rawValue, &file) == noErr, let file,
        ExtAudioFileSetProperty(file, kExtAudioFileProperty_ClientDataFormat, size, &client) == noErr
    else { return false }
    var samples = recorded
    let written = samples.withUnsafeMutableBufferPointer { b -> OSStatus in
        var list = AudioBufferList(mNumberBuffers: 1, mBuffers: AudioBuffer(mNumberChannels: 1, mDataByteSize: UInt32(b.count * 4), mData: b.baseAddress))
        return ExtAudioFileWrite(file, UInt32(b.count), &list)
    }
    guard written == noErr, ExtAudioFileDispose(file) == noErr else { return false }
    var reader: ExtAudioFileRef?
    guard ExtAudioFileOpenURL(memo as CFURL, &reader) == noErr, let reader,
        ExtAudioFileSetProperty(reader, kExtAudioFileProperty_ClientDataFormat, size, &client) == noErr
    else { return false }
    defer { ExtAudioFileDispose(reader) }
    var back = [Float](repeating: 0, count: recorded.count + 4096)
    var frames = UInt32(back.count)
    let read = back.withUnsafeMutableBufferPointer { b -> OSStatus in
        var list = AudioBufferList(mNumberBuffers: 1, mBuffers: AudioBuffer(mNumberChannels: 1, mDataByteSize: UInt32(b.count * 4), mData: b.baseAddress))
        return ExtAudioFileRead(reader, &frames, &list)
    }
    guard read == noErr else { return false }
    let bytes = (try? FileManager.default.attributesOfItem(atPath: memo.path)[.size] as? Int) ?? 0
    let middle = onset + notes.count / 2 * noteFrames + noteFrames / 5
    let pitch = SignalAnalysis.frequency(back[middle..<min(Int(frames), middle + noteFrames / 2)], sampleRate: sampleRate)
    say(String(format: "Saved as AAC in %@: %d bytes for %.2f s (%.0f kb/s); read back %d frames, the middle note at %.2f Hz.",
               memo.lastPathComponent, bytes, Double(recorded.count) / sampleRate, Double(bytes * 8) / (Double(recorded.count) / sampleRate) / 1000,
               Int(frames), pitch))
    return Int(frames) == recorded.count && abs(pitch - notes[notes.count / 2].frequency) < 2
}
let saved = saveAndReload()
if !saved { say("Saving the recording as M4A and reading it back failed.") }
privateServer?.stop()
exit(ok && saved ? 0 : 1)
