import AVFoundation
import AudioToolbox
import AudioTestSupport
import Foundation
import Synchronization
import XCTest

// Code written the way Apple's documentation, sample code and public apps write it, compiled with
// warnings as errors (see Package.swift): a signature that differs from Apple's stops this target
// from building. The tests then run it on a private server.

/// A recorder set up as Apple's sample code does: the format ID as an `Int`, quality as a raw value.
func makeRecorder(at url: URL) throws -> AVAudioRecorder {
    let settings: [String: Any] = [
        AVFormatIDKey: Int(kAudioFormatMPEG4AAC),
        AVSampleRateKey: 44100,
        AVNumberOfChannelsKey: 1,
        AVEncoderAudioQualityKey: AVAudioQuality.high.rawValue,
    ]
    return try AVAudioRecorder(url: url, settings: settings)
}

/// An interruption handler reading the user info each way apps do.
func describeInterruption(_ notification: Notification) -> String {
    guard let info = notification.userInfo,
        let typeValue = info[AVAudioSessionInterruptionTypeKey] as? UInt,
        let type = AVAudioSession.InterruptionType(rawValue: typeValue)
    else { return "not an interruption" }
    let asInt = info[AVAudioSessionInterruptionTypeKey] as? Int
    let asNumber = info[AVAudioSessionInterruptionTypeKey] as? NSNumber
    let forced = info[AVAudioSessionInterruptionTypeKey] as! NSNumber
    switch type {
    case .began:
        let reason = (info[AVAudioSessionInterruptionReasonKey] as? NSNumber)?.uintValue ?? 0
        return "began \(asInt ?? -1) \(asNumber?.intValue ?? -1) \(forced.uintValue) reason \(reason)"
    case .ended:
        let options = AVAudioSession.InterruptionOptions(rawValue: (info[AVAudioSessionInterruptionOptionKey] as? UInt) ?? 0)
        return "ended \(options.contains(.shouldResume) ? "resume" : "stay")"
    @unknown default:
        return "unknown"
    }
}

/// A route-change handler.
func describeRouteChange(_ notification: Notification) -> String {
    guard let value = notification.userInfo?[AVAudioSessionRouteChangeReasonKey] as? UInt,
        let reason = AVAudioSession.RouteChangeReason(rawValue: value)
    else { return "?" }
    let previous = notification.userInfo?[AVAudioSessionRouteChangePreviousRouteKey] as? AVAudioSessionRouteDescription
    return "\(reason.rawValue) from \(previous?.outputs.first?.portType.rawValue ?? "-")"
}

/// File calls whose results an app ignores: imported C functions never warn about that.
func inspect(_ url: URL) -> (frames: Int64, rate: Double) {
    var file: AudioFileID?
    AudioFileOpenURL(url as CFURL, .readPermission, 0, &file)
    guard let file else { return (0, 0) }
    var format = AudioStreamBasicDescription()
    var size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
    AudioFileGetProperty(file, kAudioFilePropertyDataFormat, &size, &format)
    AudioFileClose(file)

    var ext: ExtAudioFileRef?
    ExtAudioFileOpenURL(url as CFURL, &ext)
    guard let ext else { return (0, format.mSampleRate) }
    var frames: Int64 = 0
    size = UInt32(MemoryLayout<Int64>.size)
    ExtAudioFileGetProperty(ext, kExtAudioFileProperty_FileLengthFrames, &size, &frames)
    var client = AudioStreamBasicDescription(
        mSampleRate: format.mSampleRate, mFormatID: kAudioFormatLinearPCM, mFormatFlags: kAudioFormatFlagsNativeFloatPacked,
        mBytesPerPacket: 4, mFramesPerPacket: 1, mBytesPerFrame: 4, mChannelsPerFrame: 1, mBitsPerChannel: 32, mReserved: 0)
    ExtAudioFileSetProperty(ext, kExtAudioFileProperty_ClientDataFormat, UInt32(MemoryLayout<AudioStreamBasicDescription>.size), &client)
    ExtAudioFileSeek(ext, 0)
    ExtAudioFileDispose(ext)

    var converter: AudioConverterRef?
    var from = format
    AudioConverterNew(&from, &client, &converter)
    if let converter { AudioConverterDispose(converter) }
    return (frames, format.mSampleRate)
}

/// A queue callback that copies into the buffer's memory without unwrapping it.
final class ToneSource {
    var phase = 0.0
    static let callback: AudioQueueOutputCallback = { userData, queue, buffer in
        let me = Unmanaged<ToneSource>.fromOpaque(userData!).takeUnretainedValue()
        let frames = Int(buffer.pointee.mAudioDataBytesCapacity) / 4
        var samples = [Float](repeating: 0, count: frames)
        for i in 0..<frames {
            samples[i] = Float(sin(me.phase)) * 0.3
            me.phase += 2 * Double.pi * 1000 / 48000
        }
        memcpy(buffer.pointee.mAudioData, samples, frames * 4)
        buffer.pointee.mAudioDataByteSize = UInt32(frames * 4)
        let user: UnsafeMutableRawPointer? = buffer.pointee.mUserData
        _ = user
        AudioQueueEnqueueBuffer(queue, buffer, 0, nil)
    }
}

/// A new directory for one test's files (the caller removes it).
func scratchDirectory(_ name: String) throws -> URL {
    let dir = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("\(name)-\(getpid())")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    return dir
}

/// How macOS apps read devices: a generic property reader on `AudioObjectID`, written as public
/// code does it.
extension AudioObjectID {
    static let system = AudioObjectID(kAudioObjectSystemObject)
    static let unknown = kAudioObjectUnknown

    func read<T>(_ selector: AudioObjectPropertySelector, scope: AudioObjectPropertyScope = kAudioObjectPropertyScopeGlobal,
                 defaultValue: T) throws -> T {
        var address = AudioObjectPropertyAddress(mSelector: selector, mScope: scope, mElement: kAudioObjectPropertyElementMain)
        guard AudioObjectHasProperty(self, &address) else { throw NSError(domain: NSOSStatusErrorDomain, code: Int(kAudioHardwareUnknownPropertyError)) }
        var value = defaultValue
        var size = UInt32(MemoryLayout<T>.size)
        let err = withUnsafeMutablePointer(to: &value) { AudioObjectGetPropertyData(self, &address, 0, nil, &size, $0) }
        guard err == noErr else { throw NSError(domain: NSOSStatusErrorDomain, code: Int(err)) }
        return value
    }

    func readString(_ selector: AudioObjectPropertySelector) throws -> String {
        var address = AudioObjectPropertyAddress(mSelector: selector, mScope: kAudioObjectPropertyScopeGlobal, mElement: kAudioObjectPropertyElementMain)
        var string: Unmanaged<CFString>?
        var size = UInt32(MemoryLayout<Unmanaged<CFString>?>.size)
        let err = AudioObjectGetPropertyData(self, &address, 0, nil, &size, &string)
        guard err == noErr, let string else { throw NSError(domain: NSOSStatusErrorDomain, code: Int(err)) }
        return string.takeRetainedValue() as String
    }

    static func readDeviceList() throws -> [AudioDeviceID] {
        var address = AudioObjectPropertyAddress(
            mSelector: kAudioHardwarePropertyDevices, mScope: kAudioObjectPropertyScopeGlobal, mElement: kAudioObjectPropertyElementMain)
        var size: UInt32 = 0
        var err = AudioObjectGetPropertyDataSize(AudioObjectID(kAudioObjectSystemObject), &address, 0, nil, &size)
        guard err == noErr else { throw NSError(domain: NSOSStatusErrorDomain, code: Int(err)) }
        var ids = [AudioDeviceID](repeating: 0, count: Int(size) / MemoryLayout<AudioDeviceID>.size)
        err = AudioObjectGetPropertyData(UInt32(kAudioObjectSystemObject), &address, 0, nil, &size, &ids)
        guard err == noErr else { throw NSError(domain: NSOSStatusErrorDomain, code: Int(err)) }
        return ids
    }
}

/// A view model as SwiftUI and UIKit apps write one: main-actor isolated, its own delegate.
@MainActor
final class SoundModel: NSObject, AVAudioPlayerDelegate {
    var player: AVAudioPlayer?
    var finished = false

    func play(_ url: URL) throws {
        player = try AVAudioPlayer(contentsOf: url)
        player?.delegate = self
        player?.prepareToPlay()
        player?.play()
    }

    func audioPlayerDidFinishPlaying(_ player: AVAudioPlayer, successfully flag: Bool) {
        finished = flag
    }
}

final class AppleIdiomTests: XCTestCase {
    override func setUpWithError() throws {
        _ = try TestSound.server()
    }

    /// The session is the process's: leave it as the other suites expect it (all suites run in one
    /// process), inactive, solo ambient, no preferred buffer.
    override func tearDown() {
        let session = AVAudioSession.sharedInstance()
        try? session.setActive(false)
        try? session.setCategory(.soloAmbient, mode: .default, options: [])
        try? session.setPreferredIOBufferDuration(0)
    }

    func testSessionSetUpWithEveryOptionSpelling() throws {
        let session = AVAudioSession.sharedInstance()
        try session.setCategory(.playAndRecord, mode: .voiceChat, options: [.allowBluetooth, .allowBluetoothA2DP, .defaultToSpeaker])
        try session.setCategory(.record, options: [.duckOthers])
        try session.setCategory(.record, mode: .default, options: .mixWithOthers)
        try session.setCategory(.playback, mode: .moviePlayback, policy: .longFormVideo, options: [])
        try session.setPreferredIOBufferDuration(0.005)
        try session.setActive(true)
        try session.setActive(false, options: .notifyOthersOnDeactivation)
        XCTAssertEqual(session.category, .playback)
    }

    func testNotificationUserInfoReadsEveryWay() {
        let began = Notification(name: AVAudioSession.interruptionNotification, object: nil, userInfo: [
            AVAudioSessionInterruptionTypeKey: NSNumber(value: AVAudioSession.InterruptionType.began.rawValue),
            AVAudioSessionInterruptionReasonKey: NSNumber(value: 0),
        ])
        XCTAssertEqual(describeInterruption(began), "began 1 1 1 reason 0")
    }

    /// What the session itself posts reads the same ways.
    func testPostedInterruptionReadsEveryWay() throws {
        let session = AVAudioSession.sharedInstance()
        try session.setCategory(.playback)
        let seen = Mutex<[String]>([])
        let token = NotificationCenter.default.addObserver(forName: AVAudioSession.interruptionNotification, object: session, queue: nil) { n in
            let text = describeInterruption(n)
            seen.withLock { $0.append(text) }
        }
        defer { NotificationCenter.default.removeObserver(token) }
        try session.setActive(true)
        defer { try? session.setActive(false) }
        // A call: another process's phone stream (quiet hum).
        let phone = try SignalPlayer(server: try TestSound.server(), device: "speaker", samples: [Float](repeating: 0.001, count: 48000),
                                     sampleRate: 48000, properties: ["media.role": "phone"])
        defer { phone.stop() }
        XCTAssertTrue(waitUntil(timeout: 5) { seen.withLock { $0.contains { $0.hasPrefix("began 1 1 1") } } }, "\(seen.withLock { $0 })")
    }

    func testRecorderSettingsReadBackAsNumbers() throws {
        let dir = try scratchDirectory("idioms")
        defer { try? FileManager.default.removeItem(at: dir) }
        let recorder = try makeRecorder(at: dir.appendingPathComponent("memo.m4a"))
        XCTAssertEqual(recorder.settings[AVFormatIDKey] as? Int, Int(kAudioFormatMPEG4AAC))
        XCTAssertEqual(recorder.settings[AVFormatIDKey] as? UInt32, kAudioFormatMPEG4AAC)
        XCTAssertEqual((recorder.settings[AVSampleRateKey] as? NSNumber)?.doubleValue, 44100)
        XCTAssertEqual(recorder.settings[AVNumberOfChannelsKey] as? Int, 1)
        XCTAssertEqual((recorder.settings[AVEncoderAudioQualityKey] as! NSNumber).intValue, AVAudioQuality.high.rawValue)
        let format = AVAudioFormat(standardFormatWithSampleRate: 48000, channels: 2)!
        XCTAssertEqual(format.settings[AVNumberOfChannelsKey] as? UInt, 2)
        XCTAssertEqual(format.settings[AVLinearPCMIsFloatKey] as? Bool, true)
    }

    func testFileCallsWithDiscardedResults() throws {
        let dir = try scratchDirectory("idioms-files")
        defer { try? FileManager.default.removeItem(at: dir) }
        let url = dir.appendingPathComponent("tone.wav")
        let format = AVAudioFormat(commonFormat: .pcmFormatFloat32, sampleRate: 22050, channels: 1, interleaved: false)!
        let file = try AVAudioFile(forWriting: url, settings: format.settings)
        let buffer = AVAudioPCMBuffer(pcmFormat: format, frameCapacity: 22050)!
        buffer.frameLength = 22050
        try file.write(from: buffer)
        let copy = buffer.copy() as! AVAudioPCMBuffer
        XCTAssertEqual(copy.frameLength, 22050)
        XCTAssertFalse(copy === buffer)
        let (frames, rate) = withExtendedLifetime(file) { inspect(url) }
        XCTAssertEqual(rate, 22050)
        XCTAssertEqual(frames, 22050, "a WAVE file's header is current after each write")
    }

    func testQueueCallbackCopiesIntoAudioData() throws {
        let source = ToneSource()
        defer { withExtendedLifetime(source) {} }
        var format = AudioStreamBasicDescription(
            mSampleRate: 48000, mFormatID: kAudioFormatLinearPCM, mFormatFlags: kAudioFormatFlagsNativeFloatPacked,
            mBytesPerPacket: 4, mFramesPerPacket: 1, mBytesPerFrame: 4, mChannelsPerFrame: 1, mBitsPerChannel: 32, mReserved: 0)
        var queue: AudioQueueRef?
        AudioQueueNewOutput(&format, ToneSource.callback, Unmanaged.passUnretained(source).toOpaque(), nil, nil, 0, &queue)
        let q = try XCTUnwrap(queue)
        defer { AudioQueueDispose(q, true) }
        XCTAssertEqual(MemoryLayout<CFString?>.size, 8, "one reference, as Apple's")
        let device: CFString? = "@DEFAULT_SINK@"
        let status = withUnsafePointer(to: device) {
            AudioQueueSetProperty(q, kAudioQueueProperty_CurrentDevice, $0, UInt32(MemoryLayout<CFString?>.size))
        }
        XCTAssertEqual(status, noErr)
        for _ in 0..<3 {
            var buffer: AudioQueueBufferRef?
            AudioQueueAllocateBuffer(q, 4800 * 4, &buffer)
            if let buffer { ToneSource.callback(Unmanaged.passUnretained(source).toOpaque(), q, buffer) }
        }
        let capture = try SignalCapture(server: try TestSound.server(), device: "speaker.monitor")
        AudioQueueStart(q, nil)
        try capture.waitFor(frames: capture.frameCount + 24000, timeout: 5)
        AudioQueueStop(q, true)
        let heard = capture.stop()[0]
        XCTAssertEqual(SignalAnalysis.frequency(heard.suffix(14400), sampleRate: 48000), 1000, accuracy: 2, "three 100 ms windows: one dropout does not move it")
    }

    func testDeviceEnumerationAndListeners() throws {
        let devices = try AudioObjectID.readDeviceList()
        XCTAssertFalse(devices.isEmpty)
        let output: AudioDeviceID = try AudioObjectID.system.read(kAudioHardwarePropertyDefaultOutputDevice, defaultValue: AudioObjectID.unknown)
        XCTAssertTrue(devices.contains(output))
        XCTAssertEqual(try output.readString(kAudioDevicePropertyDeviceUID), "speaker")
        XCTAssertFalse(try output.readString(kAudioObjectPropertyName).isEmpty)
        let rate: Float64 = try output.read(kAudioDevicePropertyNominalSampleRate, defaultValue: 0)
        XCTAssertEqual(rate, 48000)
        let transport: UInt32 = try output.read(kAudioDevicePropertyTransportType, defaultValue: 0)
        XCTAssertEqual(transport, kAudioDeviceTransportTypeVirtual)
        let frames: UInt32 = try output.read(kAudioDevicePropertyBufferFrameSize, scope: kAudioDevicePropertyScopeOutput, defaultValue: 0)
        XCTAssertEqual(frames, 512)
        var address = AudioObjectPropertyAddress(
            mSelector: kAudioHardwarePropertyDefaultOutputDevice, mScope: kAudioObjectPropertyScopeGlobal, mElement: kAudioObjectPropertyElementMain)
        let listener: AudioObjectPropertyListenerBlock = { _, _ in }
        let queue = DispatchQueue(label: "devices")
        AudioObjectAddPropertyListenerBlock(AudioObjectID(kAudioObjectSystemObject), &address, queue, listener)
        AudioObjectRemovePropertyListenerBlock(AudioObjectID(kAudioObjectSystemObject), &address, queue, listener)
        var settable: DarwinBoolean = false
        AudioObjectIsPropertySettable(AudioObjectID(kAudioObjectSystemObject), &address, &settable)
        XCTAssertTrue(settable.boolValue)
    }

    func testSystemSoundIdioms() throws {
        let dir = try scratchDirectory("idioms-sounds")
        defer { try? FileManager.default.removeItem(at: dir) }
        let url = dir.appendingPathComponent("pop.wav")
        let format = AVAudioFormat(standardFormatWithSampleRate: 48000, channels: 1)!
        let buffer = AVAudioPCMBuffer(pcmFormat: format, frameCapacity: 2400)!
        buffer.frameLength = 2400
        for n in 0..<2400 { buffer.floatChannelData![0][n] = 0.3 * sin(Float(n) * 0.1) }
        try AVAudioFile(forWriting: url, settings: format.settings).write(from: buffer)
        var soundID: SystemSoundID = 0
        let error = AudioServicesCreateSystemSoundID(url as CFURL, &soundID)
        XCTAssertEqual(error, kAudioServicesNoError)
        let done = expectation(description: "played")
        AudioServicesPlaySystemSoundWithCompletion(soundID) { done.fulfill() }
        wait(for: [done], timeout: 3)
        AudioServicesPlaySystemSound(kSystemSoundID_Vibrate)
        AudioServicesDisposeSystemSoundID(soundID)
    }

    @MainActor
    func testMainActorPlayerDelegate() throws {
        let dir = try scratchDirectory("idioms-delegate")
        defer { try? FileManager.default.removeItem(at: dir) }
        let url = dir.appendingPathComponent("blip.wav")
        let format = AVAudioFormat(standardFormatWithSampleRate: 48000, channels: 1)!
        let buffer = AVAudioPCMBuffer(pcmFormat: format, frameCapacity: 4800)!
        buffer.frameLength = 4800
        try AVAudioFile(forWriting: url, settings: format.settings).write(from: buffer)
        let model = SoundModel()
        try model.play(url)
        XCTAssertTrue(waitUntil(timeout: 3) { model.finished }, "the delegate heard the end on the main actor")
    }

    func testFileTypeHintsAndNewNames() throws {
        let dir = try scratchDirectory("idioms-hint")
        defer { try? FileManager.default.removeItem(at: dir) }
        let url = dir.appendingPathComponent("tone.wav")
        let format = AVAudioFormat(commonFormat: .pcmFormatInt16, sampleRate: 22050, channels: 1, interleaved: true)!
        do {
            let file = try AVAudioFile(forWriting: url, settings: format.settings, commonFormat: .pcmFormatInt16, interleaved: true)
            let buffer = AVAudioPCMBuffer(pcmFormat: format, frameCapacity: 2205)!
            buffer.frameLength = 2205
            try file.write(from: buffer)
        }
        let player = try AVAudioPlayer(data: try Data(contentsOf: url), fileTypeHint: AVFileType.wav.rawValue)
        XCTAssertEqual(player.duration, 0.1, accuracy: 0.001)
        XCTAssertEqual(AVAudioSession.CategoryOptions.allowBluetoothHFP, .allowBluetooth)
        XCTAssertEqual(AVAudioSession.InterruptionReason.routeDisconnected.rawValue, 4)
        try AVAudioSession.sharedInstance().setCategory(.playAndRecord, mode: .shortFormVideo, options: [.allowBluetoothHFP, .farFieldInput, .bluetoothHighQualityRecording])
        XCTAssertEqual(AVAudioSession.Port.continuityMicrophone.rawValue, "ContinuityMicrophone")
        let mono = AVAudioFormat(commonFormat: .pcmFormatFloat32, sampleRate: 48000, channels: 1, interleaved: true)!
        XCTAssertEqual(mono, AVAudioFormat(commonFormat: .pcmFormatFloat32, sampleRate: 48000, channels: 1, interleaved: false))
        XCTAssertNil(AVAudioFormat(commonFormat: .pcmFormatFloat32, sampleRate: 48000, channels: 6, interleaved: false))
    }

    func testActivationWithCompletionHandler() {
        let done = expectation(description: "activated")
        let results = NSMutableArray()
        AVAudioSession.sharedInstance().activate(options: []) { activated, error in
            results.add(activated && error == nil)
            done.fulfill()
        }
        wait(for: [done], timeout: 5)
        XCTAssertEqual(results.firstObject as? Bool, true)
        try? AVAudioSession.sharedInstance().setActive(false)
    }

    func testRecordPermissionIdioms() async {
        let granted = await AVAudioApplication.requestRecordPermission()
        XCTAssertTrue(granted)
        let done = expectation(description: "answered")
        let counter = NSMutableArray()  // not Sendable: Apple's handler does not ask it to be
        AVAudioSession.sharedInstance().requestRecordPermission { allowed in
            counter.add(allowed)
            done.fulfill()
        }
        await fulfillment(of: [done], timeout: 5)
        XCTAssertEqual(counter.count, 1)
        XCTAssertEqual(AVAudioApplication.shared.recordPermission, .granted)
    }
}
