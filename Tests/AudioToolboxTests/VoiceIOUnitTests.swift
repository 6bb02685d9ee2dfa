import AudioTestSupport
import AudioToolbox
import Foundation
import Synchronization
import XCTest

/// The voice-processing I/O unit on the private server, with issue 14's acoustic path: what the
/// unit plays comes back into the microphone 40 ms later at −6 dB (`module-loopback`).
final class VoiceIOUnitTests: XCTestCase {
    /// A call's two ends: the render callback plays the far end once `playing` is set, the input
    /// callback records what the unit gives on bus 1.
    final class Call: @unchecked Sendable {
        let far: [Float]
        let played = Atomic<Int>(0)
        let playing = Atomic<Bool>(false)
        /// The recording's length when the far end's first frame was rendered.
        let farStart = Atomic<Int>(-1)
        let capacity: Int
        let tape: UnsafeMutablePointer<Float>
        let written = Atomic<Int>(0)
        var unit: AudioUnit?
        let list = AudioBufferList.allocate(maximumBuffers: 1)

        init(far: [Float], seconds: Int) {
            self.far = far
            capacity = 48000 * seconds
            tape = .allocate(capacity: capacity)
            tape.initialize(repeating: 0, count: capacity)
        }

        deinit {
            tape.deallocate()
            free(list.unsafeMutablePointer)
        }

        func reset() {
            played.store(0, ordering: .relaxed)
            playing.store(false, ordering: .relaxed)
            farStart.store(-1, ordering: .relaxed)
            written.store(0, ordering: .relaxed)
        }

        var recording: [Float] { Array(UnsafeBufferPointer(start: tape, count: written.load(ordering: .acquiring))) }

        static let render: AURenderCallback = { refCon, _, _, _, frames, data in
            let call = Unmanaged<Call>.fromOpaque(refCon).takeUnretainedValue()
            let out = UnsafeMutableAudioBufferListPointer(data!)[0].mData!.assumingMemoryBound(to: Float.self)
            let n = Int(frames)
            out.update(repeating: 0, count: n)
            guard call.playing.load(ordering: .relaxed) else { return noErr }
            let at = call.played.load(ordering: .relaxed)
            if at == 0 { call.farStart.store(call.written.load(ordering: .relaxed), ordering: .relaxed) }
            let count = max(0, min(n, call.far.count - at))
            call.far.withUnsafeBufferPointer { f in
                if count > 0 { out.update(from: f.baseAddress! + at, count: count) }
            }
            call.played.store(at + count, ordering: .releasing)
            return noErr
        }

        static let input: AURenderCallback = { refCon, flags, time, bus, frames, _ in
            let call = Unmanaged<Call>.fromOpaque(refCon).takeUnretainedValue()
            let at = call.written.load(ordering: .relaxed)
            guard at + Int(frames) <= call.capacity else { return noErr }
            call.list.unsafeMutablePointer.pointee.mNumberBuffers = 1
            call.list[0] = AudioBuffer(mNumberChannels: 1, mDataByteSize: frames * 4, mData: call.tape + at)
            let status = AudioUnitRender(call.unit!, flags, time, bus, frames, call.list.unsafeMutablePointer)
            if status == noErr { call.written.store(at + Int(frames), ordering: .releasing) }
            return status
        }
    }

    private static let floatMono = AudioStreamBasicDescription(
        mSampleRate: 48000, mFormatID: kAudioFormatLinearPCM, mFormatFlags: kAudioFormatFlagsNativeFloatPacked, mBytesPerPacket: 4,
        mFramesPerPacket: 1, mBytesPerFrame: 4, mChannelsPerFrame: 1, mBitsPerChannel: 32, mReserved: 0)

    private var dir: URL!

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("vpio-tests-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    override func tearDown() { try? FileManager.default.removeItem(at: dir) }

    /// A voice-processing unit playing and recording 48 kHz mono float through `call`.
    private func makeUnit(_ call: Call) throws -> AudioUnit {
        var description = AudioComponentDescription(
            componentType: kAudioUnitType_Output, componentSubType: kAudioUnitSubType_VoiceProcessingIO, componentManufacturer: kAudioUnitManufacturer_Apple,
            componentFlags: 0, componentFlagsMask: 0)
        let component = try XCTUnwrap(AudioComponentFindNext(nil, &description), "no voice-processing unit")
        var made: AudioUnit?
        XCTAssertEqual(AudioComponentInstanceNew(component, &made), noErr)
        let unit = try XCTUnwrap(made)
        call.unit = unit
        var on: UInt32 = 1
        XCTAssertEqual(AudioUnitSetProperty(unit, kAudioOutputUnitProperty_EnableIO, kAudioUnitScope_Input, 1, &on, 4), noErr)
        var format = Self.floatMono
        let size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
        XCTAssertEqual(AudioUnitSetProperty(unit, kAudioUnitProperty_StreamFormat, kAudioUnitScope_Input, 0, &format, size), noErr)
        XCTAssertEqual(AudioUnitSetProperty(unit, kAudioUnitProperty_StreamFormat, kAudioUnitScope_Output, 1, &format, size), noErr)
        let refCon = Unmanaged.passUnretained(call).toOpaque()
        var render = AURenderCallbackStruct(inputProc: Call.render, inputProcRefCon: refCon)
        var input = AURenderCallbackStruct(inputProc: Call.input, inputProcRefCon: refCon)
        let callbackSize = UInt32(MemoryLayout<AURenderCallbackStruct>.size)
        XCTAssertEqual(AudioUnitSetProperty(unit, kAudioUnitProperty_SetRenderCallback, kAudioUnitScope_Input, 0, &render, callbackSize), noErr)
        XCTAssertEqual(AudioUnitSetProperty(unit, kAudioOutputUnitProperty_SetInputCallback, kAudioUnitScope_Global, 0, &input, callbackSize), noErr)
        XCTAssertEqual(AudioUnitInitialize(unit), noErr)
        return unit
    }

    private static func setSwitch(_ unit: AudioUnit, _ id: AudioUnitPropertyID, _ on: Bool) {
        var value: UInt32 = on ? 1 : 0
        XCTAssertEqual(AudioUnitSetProperty(unit, id, kAudioUnitScope_Global, 0, &value, 4), noErr)
    }

    /// Starts the unit, lets it settle, plays the far end once and records until it has been
    /// heard and its echo has died away; returns the recording and where the far end started in it.
    private func run(_ unit: AudioUnit, _ call: Call) throws -> (recording: [Float], farStart: Int) {
        call.reset()
        XCTAssertEqual(AudioOutputUnitStart(unit), noErr)
        XCTAssertTrue(waitUntil(timeout: 5) { call.written.load(ordering: .relaxed) >= 24000 }, "no input")
        call.playing.store(true, ordering: .relaxed)
        let seconds = Double(call.far.count) / 48000 + 5
        XCTAssertTrue(waitUntil(timeout: seconds) { call.played.load(ordering: .relaxed) >= call.far.count }, "the far end did not play")
        let end = call.written.load(ordering: .relaxed) + 48000 / 2
        XCTAssertTrue(waitUntil(timeout: 5) { call.written.load(ordering: .relaxed) >= end }, "the input stopped")
        XCTAssertEqual(AudioOutputUnitStop(unit), noErr)
        return (call.recording, call.farStart.load(ordering: .relaxed))
    }

    /// Far-end speech only: bypassed, the unit gives the echo; processing, after 2 s it leaves
    /// the echo at least 30 dB down (issue 14's first line, through the server).
    func testTheEchoOfWhatTheUnitPlaysIsCancelled() throws {
        let server = try TestSound.server()
        let path = try AcousticPath(server: server)
        defer { path.close() }
        var far = try VoiceSignals.speech(VoiceSignals.farText, voice: VoiceSignals.farVoice, sampleRate: 48000, in: dir)
        far = Array(VoiceSignals.scaled(far, toSpeechRMS: -20, sampleRate: 48000).prefix(48000 * 7))
        let call = Call(far: far, seconds: 16)
        let unit = try makeUnit(call)
        defer { AudioComponentInstanceDispose(unit) }

        Self.setSwitch(unit, kAUVoiceIOProperty_BypassVoiceProcessing, true)
        let raw = try run(unit, call)
        Self.setSwitch(unit, kAUVoiceIOProperty_BypassVoiceProcessing, false)
        Self.setSwitch(unit, kAUVoiceIOProperty_VoiceProcessingEnableAGC, false)
        let processed = try run(unit, call)

        // The echo's place in the bypassed recording: the far end, late by the path and the streams.
        XCTAssertGreaterThanOrEqual(raw.farStart, 0)
        let rawTail = Array(raw.recording[raw.farStart...])
        let found = SignalAnalysis.align(Array(far[48000..<(48000 * 3)]), in: rawTail, maxLag: 48000 * 3 / 2)
        XCTAssertGreaterThan(found.correlation, 0.9, "no echo in the bypassed recording")
        let lag = found.lag - 48000
        XCTAssertGreaterThanOrEqual(lag, 48000 * 40 / 1000, "the echo came back earlier than the path's 40 ms")
        // Frames 2 s into the far end, where it speaks, in each recording from its own start.
        let mask = VoiceSignals.speaking(far, sampleRate: 48000)
        func level(_ r: (recording: [Float], farStart: Int)) -> Double {
            let from = r.farStart + lag
            let span = Array(r.recording[from..<min(r.recording.count, from + far.count)])
            return VoiceSignals.speechRMS(span, where: mask, sampleRate: 48000, from: 200)
        }
        let echo = level(raw), left = level(processed)
        print("echo \(echo) dBFS, left \(left) dBFS, loss \(echo - left) dB, echo path \(Double(lag) / 48) ms")
        XCTAssertGreaterThan(echo, -40, "the echo is too quiet to measure")
        XCTAssertGreaterThanOrEqual(echo - left, 30, "echo return loss enhancement")
    }

    /// Bypassed, the unit hands over the microphone untouched: a chirp played into `micfeed`
    /// comes out sample for sample (issue 14's fifth line).
    func testBypassGivesTheMicrophoneBitForBit() throws {
        let server = try TestSound.server()
        let call = Call(far: [], seconds: 8)
        let unit = try makeUnit(call)
        defer { AudioComponentInstanceDispose(unit) }
        Self.setSwitch(unit, kAUVoiceIOProperty_BypassVoiceProcessing, true)
        XCTAssertEqual(AudioOutputUnitStart(unit), noErr)
        XCTAssertTrue(waitUntil(timeout: 5) { call.written.load(ordering: .relaxed) >= 9600 }, "no input")
        let source = SignalAnalysis.chirp(from: 200, to: 8000, sampleRate: 48000, seconds: 1)
        let player = try SignalPlayer(server: server, device: "micfeed", samples: source, sampleRate: 48000)
        player.waitUntilDone()
        let end = call.written.load(ordering: .relaxed) + 48000 / 4
        XCTAssertTrue(waitUntil(timeout: 5) { call.written.load(ordering: .relaxed) >= end }, "the input stopped")
        XCTAssertEqual(AudioOutputUnitStop(unit), noErr)
        let recording = call.recording
        let start = try XCTUnwrap(recording.firstIndex { $0 != 0 }, "nothing recorded")
        XCTAssertGreaterThanOrEqual(recording.count - start, source.count)
        let heard = Array(recording[start..<min(recording.count, start + source.count)])
        let first = try XCTUnwrap(source.firstIndex { $0 != 0 })
        let differing = zip(heard, source[first...]).filter { $0 != $1 }.count
        XCTAssertEqual(differing, 0, "samples that differ from the source")
    }

    /// Events the listener got, with when (host time, ns).
    final class Events: @unchecked Sendable {
        private let lock = NSLock()
        private var list: [(AUVoiceIOSpeechActivityEvent, UInt64)] = []
        func add(_ e: AUVoiceIOSpeechActivityEvent) {
            lock.lock()
            list.append((e, DispatchTime.now().uptimeNanoseconds))
            lock.unlock()
        }
        var all: [(AUVoiceIOSpeechActivityEvent, UInt64)] {
            lock.lock()
            defer { lock.unlock() }
            return list
        }
    }

    /// Muted, the unit gives exact zeros; someone speaking into the muted microphone raises the
    /// muted-speech event within 500 ms, and its end after the words stop (issue 14's fifth line).
    func testMuteGivesZerosAndSpeechWhileMutedRaisesTheEvent() throws {
        let server = try TestSound.server()
        let call = Call(far: [], seconds: 12)
        let unit = try makeUnit(call)
        defer { AudioComponentInstanceDispose(unit) }
        let events = Events()
        let listener: AUVoiceIOMutedSpeechActivityEventListener = { events.add($0) }
        let set = withUnsafePointer(to: listener) {
            AudioUnitSetProperty(
                unit, kAUVoiceIOProperty_MutedSpeechActivityEventListener, kAudioUnitScope_Global, 0, $0,
                UInt32(MemoryLayout<AUVoiceIOMutedSpeechActivityEventListener>.size))
        }
        XCTAssertEqual(set, noErr)
        Self.setSwitch(unit, kAUVoiceIOProperty_MuteOutput, true)
        var muted: UInt32 = 0
        var size = UInt32(4)
        XCTAssertEqual(AudioUnitGetProperty(unit, kAUVoiceIOProperty_MuteOutput, kAudioUnitScope_Global, 0, &muted, &size), noErr)
        XCTAssertEqual(muted, 1)
        XCTAssertEqual(AudioOutputUnitStart(unit), noErr)
        // A second of the quiet room first: the detector learns its floor.
        XCTAssertTrue(waitUntil(timeout: 5) { call.written.load(ordering: .relaxed) >= 48000 }, "no input")
        var words = try VoiceSignals.speech("Hello, is anybody there? I am talking to you.", voice: VoiceSignals.nearVoice, sampleRate: 48000, in: dir)
        words = Array(words[(words.firstIndex { abs($0) > 0.01 } ?? 0)...])
        words = VoiceSignals.scaled(words, toSpeechRMS: -26, sampleRate: 48000)
        let spoke = DispatchTime.now().uptimeNanoseconds
        let player = try SignalPlayer(server: server, device: "micfeed", samples: words, sampleRate: 48000, latencyMsec: 20)
        XCTAssertTrue(waitUntil(timeout: 3) { !events.all.isEmpty }, "no muted-speech event")
        player.waitUntilDone()
        XCTAssertTrue(waitUntil(timeout: 3) { events.all.count >= 2 }, "no end of muted speech")
        XCTAssertEqual(AudioOutputUnitStop(unit), noErr)
        let got = events.all
        XCTAssertEqual(got.first?.0, kAUVoiceIOSpeechActivityHasStarted)
        XCTAssertEqual(got.dropFirst().first?.0, kAUVoiceIOSpeechActivityHasEnded)
        let delay = Double((got.first?.1 ?? spoke) &- spoke) / 1e9
        XCTAssertLessThanOrEqual(delay, 0.5, "the event came \(delay) s after the words began")
        let recording = call.recording
        XCTAssertGreaterThan(recording.count, 48000 * 2)
        XCTAssertTrue(recording.allSatisfy { $0 == 0 }, "a muted unit gave sound")
    }
}
