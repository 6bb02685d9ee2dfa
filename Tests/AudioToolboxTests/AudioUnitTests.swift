import AudioTestSupport
import AudioToolbox
import Foundation
import Synchronization
import XCTest

/// Audio units rendered by the test itself (`AudioUnitRender` pulling a render callback), so the
/// DSP is checked sample by sample without a server.
final class AudioUnitOfflineTests: XCTestCase {
    /// A sine (or an impulse) handed out by a render callback, one channel copied to every buffer.
    final class Source: @unchecked Sendable {
        var phase = 0.0
        var frequency = 1000.0
        var rate = 44100.0
        var amplitude: Float = 0.25
        var impulse = false
        var position = 0
        static let callback: AURenderCallback = { refCon, _, _, _, frames, data in
            let me = Unmanaged<Source>.fromOpaque(refCon).takeUnretainedValue()
            let list = UnsafeMutableAudioBufferListPointer(data!)
            for i in 0..<Int(frames) {
                let v: Float
                if me.impulse {
                    v = me.position + i == 0 ? 1 : 0
                } else {
                    v = me.amplitude * Float(sin(me.phase))
                    me.phase += 2 * Double.pi * me.frequency / me.rate
                }
                for b in 0..<list.count { list[b].mData!.assumingMemoryBound(to: Float.self)[i] = v }
            }
            me.position += Int(frames)
            return noErr
        }
    }

    static func make(_ subType: OSType, _ type: OSType) throws -> AudioUnit {
        var d = AudioComponentDescription(componentType: type, componentSubType: subType, componentManufacturer: kAudioUnitManufacturer_Apple, componentFlags: 0, componentFlagsMask: 0)
        let component = try XCTUnwrap(AudioComponentFindNext(nil, &d))
        var unit: AudioUnit?
        XCTAssertEqual(AudioComponentInstanceNew(component, &unit), noErr)
        return try XCTUnwrap(unit)
    }

    static func feed(_ unit: AudioUnit, _ source: Source, bus: UInt32 = 0) {
        var cb = AURenderCallbackStruct(inputProc: Source.callback, inputProcRefCon: Unmanaged.passUnretained(source).toOpaque())
        XCTAssertEqual(AudioUnitSetProperty(unit, kAudioUnitProperty_SetRenderCallback, kAudioUnitScope_Input, bus, &cb, UInt32(MemoryLayout<AURenderCallbackStruct>.size)), noErr)
    }

    /// Renders `frames` frames in slices of 512, returning each channel.
    static func render(_ unit: AudioUnit, frames: Int, channels: Int = 2) -> [[Float]] {
        var out = Array(repeating: [Float](), count: channels)
        var time = AudioTimeStamp()
        time.mFlags = .sampleTimeValid
        let list = AudioBufferList.allocate(maximumBuffers: channels)
        defer { free(list.unsafeMutablePointer) }
        var done = 0
        while done < frames {
            let n = min(512, frames - done)
            for c in 0..<channels { list[c] = AudioBuffer(mNumberChannels: 1, mDataByteSize: UInt32(n * 4), mData: nil) }
            var flags = AudioUnitRenderActionFlags()
            XCTAssertEqual(AudioUnitRender(unit, &flags, &time, 0, UInt32(n), list.unsafeMutablePointer), noErr)
            for c in 0..<channels { out[c] += UnsafeBufferPointer(start: list[c].mData!.assumingMemoryBound(to: Float.self), count: n) }
            time.mSampleTime += Double(n)
            done += n
        }
        return out
    }

    static func maxDifference(_ a: [Float], _ b: [Float]) -> Float {
        guard a.count == b.count else { return .infinity }
        return zip(a, b).map { abs($0 - $1) }.max() ?? 0
    }

    func testComponentsAreFoundByTheirDescriptions() throws {
        var any = AudioComponentDescription(componentType: kAudioUnitType_Effect, componentSubType: 0, componentManufacturer: 0, componentFlags: 0, componentFlagsMask: 0)
        var names: [String] = []
        var c = AudioComponentFindNext(nil, &any)
        // The out parameter is not optional: it starts at a placeholder that is overwritten, not
        // released (a retained one would leak).
        let placeholder = "" as CFString
        while let component = c {
            var name = Unmanaged.passUnretained(placeholder)
            XCTAssertEqual(AudioComponentCopyName(component, &name), noErr)
            names.append(name.takeRetainedValue() as String)
            var d = AudioComponentDescription()
            XCTAssertEqual(AudioComponentGetDescription(component, &d), noErr)
            XCTAssertEqual(d.componentType, kAudioUnitType_Effect)
            c = AudioComponentFindNext(component, &any)
        }
        XCTAssertEqual(names, ["Apple: AUNBandEQ", "Apple: AUDelay", "Apple: AUReverb2", "Apple: AUDistortion"])
        XCTAssertEqual(AudioComponentCount(&any), 4)
        var converter = AudioComponentDescription(componentType: kAudioUnitType_FormatConverter, componentSubType: kAudioUnitSubType_AUConverter, componentManufacturer: kAudioUnitManufacturer_Apple, componentFlags: 0, componentFlagsMask: 0)
        XCTAssertNotNil(AudioComponentFindNext(nil, &converter))
        var io = AudioComponentDescription(componentType: kAudioUnitType_Output, componentSubType: kAudioUnitSubType_RemoteIO, componentManufacturer: kAudioUnitManufacturer_Apple, componentFlags: 0, componentFlagsMask: 0)
        XCTAssertNotNil(AudioComponentFindNext(nil, &io))
        var missing = AudioComponentDescription(componentType: kAudioUnitType_Effect, componentSubType: fourCC("zzzz"), componentManufacturer: 0, componentFlags: 0, componentFlagsMask: 0)
        XCTAssertNil(AudioComponentFindNext(nil, &missing))
    }

    func testAParametricBandRaisesTheToneBy12dB() throws {
        let eq = try Self.make(kAudioUnitSubType_NBandEQ, kAudioUnitType_Effect)
        defer { AudioComponentInstanceDispose(eq) }
        let source = Source()
        Self.feed(eq, source)
        XCTAssertEqual(AudioUnitSetParameter(eq, kAUNBandEQParam_FilterType, kAudioUnitScope_Global, 0, Float(kAUNBandEQFilterType_Parametric), 0), noErr)
        XCTAssertEqual(AudioUnitSetParameter(eq, kAUNBandEQParam_Frequency, kAudioUnitScope_Global, 0, 1000, 0), noErr)
        XCTAssertEqual(AudioUnitSetParameter(eq, kAUNBandEQParam_Gain, kAudioUnitScope_Global, 0, 12, 0), noErr)
        XCTAssertEqual(AudioUnitSetParameter(eq, kAUNBandEQParam_Bandwidth, kAudioUnitScope_Global, 0, 0.5, 0), noErr)
        XCTAssertEqual(AudioUnitInitialize(eq), noErr)
        // Bands start bypassed: the tone passes unchanged.
        let flat = Self.render(eq, frames: 44100)[0]
        XCTAssertEqual(AudioUnitSetParameter(eq, kAUNBandEQParam_BypassBand, kAudioUnitScope_Global, 0, 0, 0), noErr)
        let raised = Self.render(eq, frames: 44100)
        let settled = raised[0][22050...], before = flat[22050...]
        XCTAssertEqual(SignalAnalysis.rmsDB(settled) - SignalAnalysis.rmsDB(before), 12, accuracy: 0.5)
        XCTAssertEqual(SignalAnalysis.frequency(settled, sampleRate: 44100), 1000, accuracy: 1)
        XCTAssertEqual(raised[0], raised[1], "both channels alike")
        // A tone two octaves away is barely touched.
        source.frequency = 4000
        let far = Self.render(eq, frames: 44100)[0][22050...]
        XCTAssertEqual(SignalAnalysis.rmsDB(far), 20 * log10(0.25 / 2.squareRoot()), accuracy: 1)
        // Global gain −6 dB on top.
        XCTAssertEqual(AudioUnitSetParameter(eq, kAUNBandEQParam_GlobalGain, kAudioUnitScope_Global, 0, -6, 0), noErr)
        let quieter = Self.render(eq, frames: 44100)[0][22050...]
        XCTAssertEqual(SignalAnalysis.rmsDB(quieter) - SignalAnalysis.rmsDB(far), -6, accuracy: 0.05)
        // Bypassing the whole unit gives the input bit for bit.
        var on: UInt32 = 1
        XCTAssertEqual(AudioUnitSetProperty(eq, kAudioUnitProperty_BypassEffect, kAudioUnitScope_Global, 0, &on, 4), noErr)
        let phase = source.phase
        let bypassed = Self.render(eq, frames: 1000)[0]
        source.phase = phase
        let expected = (0..<1000).map { i in Float(0.25) * Float(sin(phase + Double(i) * 2 * Double.pi * 4000 / 44100)) }
        XCTAssertLessThanOrEqual(Self.maxDifference(bypassed, expected), 1e-6, "the input unchanged")
    }

    func testTheMixerSumsItsInputsWithVolumeAndPan() throws {
        let mixer = try Self.make(kAudioUnitSubType_MultiChannelMixer, kAudioUnitType_Mixer)
        defer { AudioComponentInstanceDispose(mixer) }
        var mono = AudioStreamBasicDescription(
            mSampleRate: 44100, mFormatID: kAudioFormatLinearPCM, mFormatFlags: kAudioFormatFlagsNativeFloatPacked | kAudioFormatFlagIsNonInterleaved,
            mBytesPerPacket: 4, mFramesPerPacket: 1, mBytesPerFrame: 4, mChannelsPerFrame: 1, mBitsPerChannel: 32, mReserved: 0)
        var count: UInt32 = 2
        XCTAssertEqual(AudioUnitSetProperty(mixer, kAudioUnitProperty_ElementCount, kAudioUnitScope_Input, 0, &count, 4), noErr)
        XCTAssertEqual(AudioUnitSetProperty(mixer, kAudioUnitProperty_StreamFormat, kAudioUnitScope_Input, 0, &mono, UInt32(MemoryLayout<AudioStreamBasicDescription>.size)), noErr)
        let a = Source(), b = Source()
        b.frequency = 300
        Self.feed(mixer, a, bus: 0)
        Self.feed(mixer, b, bus: 1)
        XCTAssertEqual(AudioUnitSetParameter(mixer, kMultiChannelMixerParam_Pan, kAudioUnitScope_Input, 0, -1, 0), noErr)
        XCTAssertEqual(AudioUnitSetParameter(mixer, kMultiChannelMixerParam_Volume, kAudioUnitScope_Input, 0, 0.5, 0), noErr)
        XCTAssertEqual(AudioUnitSetParameter(mixer, kMultiChannelMixerParam_Enable, kAudioUnitScope_Input, 1, 0, 0), noErr)
        XCTAssertEqual(AudioUnitSetParameter(mixer, kMultiChannelMixerParam_Pan, kAudioUnitScope_Input, 2, 0, 0), kAudioUnitErr_InvalidElement)
        XCTAssertEqual(AudioUnitInitialize(mixer), noErr)
        let out = Self.render(mixer, frames: 4410)
        let expected = (0..<4410).map { i in Float(0.25) * Float(sin(Double(i) * 2 * Double.pi * 1000 / 44100)) * 0.5 }
        XCTAssertLessThanOrEqual(Self.maxDifference(out[0], expected), 1e-6, "the mono input on the left at half volume")
        XCTAssertEqual(out[1].map(abs).max(), 0, "nothing on the right at pan −1; the second input is disabled")
        // Both inputs, centred, with the output volume: the exact sum.
        XCTAssertEqual(AudioUnitSetParameter(mixer, kMultiChannelMixerParam_Enable, kAudioUnitScope_Input, 1, 1, 0), noErr)
        XCTAssertEqual(AudioUnitSetParameter(mixer, kMultiChannelMixerParam_Pan, kAudioUnitScope_Input, 0, 0, 0), noErr)
        XCTAssertEqual(AudioUnitSetParameter(mixer, kMultiChannelMixerParam_Volume, kAudioUnitScope_Output, 0, 0.5, 0), noErr)
        let (pa, pb) = (a.phase, b.phase)
        let both = Self.render(mixer, frames: 1000)
        for i in stride(from: 0, to: 1000, by: 97) {
            let va = 0.25 * sin(pa + Double(i) * 2 * Double.pi * 1000 / 44100) * 0.5, vb = 0.25 * sin(pb + Double(i) * 2 * Double.pi * 300 / 44100)
            XCTAssertEqual(Double(both[0][i]), (va + vb) * 0.5, accuracy: 1e-6)
            XCTAssertEqual(Double(both[1][i]), (va + vb) * 0.5, accuracy: 1e-6)
        }
    }

    func testUnitsConnectIntoAChain() throws {
        // callback → EQ → delay, pulled at the delay: an impulse comes out once, 0.1 s late.
        let eq = try Self.make(kAudioUnitSubType_NBandEQ, kAudioUnitType_Effect)
        let delay = try Self.make(kAudioUnitSubType_Delay, kAudioUnitType_Effect)
        defer {
            AudioComponentInstanceDispose(delay)
            AudioComponentInstanceDispose(eq)
        }
        let source = Source()
        source.impulse = true
        Self.feed(eq, source)
        var connection = AudioUnitConnection(sourceAudioUnit: eq, sourceOutputNumber: 0, destInputNumber: 0)
        XCTAssertEqual(AudioUnitSetProperty(delay, kAudioUnitProperty_MakeConnection, kAudioUnitScope_Input, 0, &connection, UInt32(MemoryLayout<AudioUnitConnection>.size)), noErr)
        AudioUnitSetParameter(delay, kDelayParam_DelayTime, kAudioUnitScope_Global, 0, 0.1, 0)
        AudioUnitSetParameter(delay, kDelayParam_WetDryMix, kAudioUnitScope_Global, 0, 100, 0)
        AudioUnitSetParameter(delay, kDelayParam_Feedback, kAudioUnitScope_Global, 0, 0, 0)
        AudioUnitSetParameter(delay, kDelayParam_LopassCutoff, kAudioUnitScope_Global, 0, 22050, 0)
        XCTAssertEqual(AudioUnitInitialize(eq), noErr)
        XCTAssertEqual(AudioUnitInitialize(delay), noErr)
        let out = Self.render(delay, frames: 8820)[0]
        let peak = out.indices.max { abs(out[$0]) < abs(out[$1]) }!
        XCTAssertEqual(peak, 4410, "the echo 0.1 s after the impulse")
        XCTAssertLessThan(abs(out[0]), 1e-6, "nothing dry at wet 100 %")
        var tail = Double(0)
        var size = UInt32(8)
        XCTAssertEqual(AudioUnitGetProperty(delay, kAudioUnitProperty_TailTime, kAudioUnitScope_Global, 0, &tail, &size), noErr)
        XCTAssertGreaterThan(tail, 0)
    }

    func testBadCallsGetApplesErrors() throws {
        let eq = try Self.make(kAudioUnitSubType_NBandEQ, kAudioUnitType_Effect)
        var time = AudioTimeStamp()
        let list = AudioBufferList.allocate(maximumBuffers: 2)
        defer { free(list.unsafeMutablePointer) }
        for c in 0..<2 { list[c] = AudioBuffer(mNumberChannels: 1, mDataByteSize: 2048, mData: nil) }
        XCTAssertEqual(AudioUnitRender(eq, nil, &time, 0, 512, list.unsafeMutablePointer), kAudioUnitErr_Uninitialized)
        var int16 = AudioStreamBasicDescription(
            mSampleRate: 44100, mFormatID: kAudioFormatLinearPCM, mFormatFlags: kAudioFormatFlagIsSignedInteger | kAudioFormatFlagIsPacked,
            mBytesPerPacket: 4, mFramesPerPacket: 1, mBytesPerFrame: 4, mChannelsPerFrame: 2, mBitsPerChannel: 16, mReserved: 0)
        let asbdSize = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
        XCTAssertEqual(AudioUnitSetProperty(eq, kAudioUnitProperty_StreamFormat, kAudioUnitScope_Input, 0, &int16, asbdSize), kAudioUnitErr_FormatNotSupported)
        XCTAssertEqual(AudioUnitSetProperty(eq, kAudioUnitProperty_StreamFormat, kAudioUnitScope_Input, 3, &int16, asbdSize), kAudioUnitErr_InvalidElement)
        var value: Float = 0
        XCTAssertEqual(AudioUnitGetParameter(eq, 12345, kAudioUnitScope_Global, 0, &value), kAudioUnitErr_InvalidParameter)
        XCTAssertEqual(AudioUnitGetParameter(eq, kAUNBandEQParam_Gain, kAudioUnitScope_Global, 0, &value), noErr)
        XCTAssertEqual(AudioUnitSetParameter(eq, kAUNBandEQParam_Gain, kAudioUnitScope_Global, 0, 100, 0), noErr)
        XCTAssertEqual(AudioUnitGetParameter(eq, kAUNBandEQParam_Gain, kAudioUnitScope_Global, 0, &value), noErr)
        XCTAssertEqual(value, 24, "clamped to the range")
        var size = UInt32(4)
        var anything: UInt32 = 0
        XCTAssertEqual(AudioUnitGetProperty(eq, 99999, kAudioUnitScope_Global, 0, &anything, &size), kAudioUnitErr_InvalidProperty)
        XCTAssertEqual(AudioUnitGetProperty(eq, kAudioUnitProperty_ElementCount, 7, 0, &anything, &size), kAudioUnitErr_InvalidScope)
        XCTAssertEqual(AudioUnitInitialize(eq), noErr)
        // No source yet: Apple's "no connection".
        XCTAssertEqual(AudioUnitRender(eq, nil, &time, 0, 512, list.unsafeMutablePointer), kAudioUnitErr_NoConnection)
        Self.feed(eq, Source())
        XCTAssertEqual(AudioUnitRender(eq, nil, &time, 0, 5000, list.unsafeMutablePointer), kAudioUnitErr_TooManyFramesToProcess)
        var frames: UInt32 = 256
        XCTAssertEqual(AudioUnitSetProperty(eq, kAudioUnitProperty_MaximumFramesPerSlice, kAudioUnitScope_Global, 0, &frames, 4), kAudioUnitErr_Initialized)
        XCTAssertEqual(AudioOutputUnitStart(eq), kAudioUnitErr_InvalidProperty, "not an I/O unit")
        XCTAssertEqual(AudioComponentInstanceDispose(eq), noErr)
        XCTAssertEqual(AudioUnitInitialize(eq), kAudio_ParamError, "a disposed unit")
        XCTAssertEqual(AudioUnitRender(eq, nil, &time, 0, 512, list.unsafeMutablePointer), kAudio_ParamError)
        XCTAssertEqual(AudioComponentInstanceDispose(eq), kAudio_ParamError)
    }
}

/// I/O units on the private server: a render callback heard on the speaker's monitor, and the
/// microphone read through bus 1.
final class IOUnitServerTests: XCTestCase {
    private final class Tape: @unchecked Sendable {
        let capacity: Int
        let samples: UnsafeMutablePointer<Int16>
        let written = Atomic<Int>(0)
        let calls = Atomic<Int>(0)
        let frames = Atomic<Int>(0)
        /// The most frames one callback was asked for.
        let largest = Atomic<Int>(0)
        var unit: AudioUnit?
        var phase = 0.0
        let list = AudioBufferList.allocate(maximumBuffers: 1)
        init(capacity: Int) {
            self.capacity = capacity
            samples = .allocate(capacity: max(capacity, 1))
        }
        deinit {
            samples.deallocate()
            free(list.unsafeMutablePointer)
        }
    }

    private static func ioUnit() throws -> AudioUnit {
        try AudioUnitOfflineTests.make(kAudioUnitSubType_RemoteIO, kAudioUnitType_Output)
    }

    /// 44.1 kHz mono 16-bit interleaved, as iOS sample code sets RemoteIO's client side.
    private static var int16Mono: AudioStreamBasicDescription {
        AudioStreamBasicDescription(
            mSampleRate: 44100, mFormatID: kAudioFormatLinearPCM, mFormatFlags: kAudioFormatFlagIsSignedInteger | kAudioFormatFlagIsPacked,
            mBytesPerPacket: 2, mFramesPerPacket: 1, mBytesPerFrame: 2, mChannelsPerFrame: 1, mBitsPerChannel: 16, mReserved: 0)
    }

    func testARenderCallbackIsHeardOnTheSpeaker() throws {
        let server = try TestSound.server()
        let unit = try Self.ioUnit()
        defer { AudioComponentInstanceDispose(unit) }
        var format = Self.int16Mono
        XCTAssertEqual(AudioUnitSetProperty(unit, kAudioUnitProperty_StreamFormat, kAudioUnitScope_Input, 0, &format, UInt32(MemoryLayout<AudioStreamBasicDescription>.size)), noErr)
        let tape = Tape(capacity: 0)
        let render: AURenderCallback = { refCon, _, _, bus, frames, data in
            let tape = Unmanaged<Tape>.fromOpaque(refCon).takeUnretainedValue()
            tape.calls.add(1, ordering: .relaxed)
            tape.frames.store(Int(frames), ordering: .relaxed)
            if Int(frames) > tape.largest.load(ordering: .relaxed) { tape.largest.store(Int(frames), ordering: .relaxed) }
            let samples = UnsafeMutableAudioBufferListPointer(data!)[0].mData!.assumingMemoryBound(to: Int16.self)
            for i in 0..<Int(frames) {
                samples[i] = Int16(16384 * sin(tape.phase))
                tape.phase += 2 * Double.pi * 1000 / 44100
            }
            return bus == 0 ? noErr : -1
        }
        var cb = AURenderCallbackStruct(inputProc: render, inputProcRefCon: Unmanaged.passUnretained(tape).toOpaque())
        XCTAssertEqual(AudioUnitSetProperty(unit, kAudioUnitProperty_SetRenderCallback, kAudioUnitScope_Input, 0, &cb, UInt32(MemoryLayout<AURenderCallbackStruct>.size)), noErr)
        XCTAssertEqual(AudioOutputUnitStart(unit), kAudioUnitErr_Uninitialized)
        XCTAssertEqual(AudioUnitInitialize(unit), noErr)
        let capture = try SignalCapture(server: server, device: "speaker.monitor")
        XCTAssertEqual(AudioOutputUnitStart(unit), noErr)
        var running: UInt32 = 0
        var size = UInt32(4)
        XCTAssertEqual(AudioUnitGetProperty(unit, kAudioOutputUnitProperty_IsRunning, kAudioUnitScope_Global, 0, &running, &size), noErr)
        XCTAssertEqual(running, 1)
        let start = capture.frameCount
        try capture.waitFor(frames: start + 48000 * 3 / 2, timeout: 5)
        if server.kind == .pulseaudio {
            // The unit's stream leaves the sink its latency: the keepers' 2.5 ms, not the 0.5 ms
            // minimum that a stream asking for half its buffer at a time forced on it.
            XCTAssertGreaterThanOrEqual(try server.configuredLatency("sinks", "speaker"), 0.002, "the sink runs at its minimum latency")
        }
        XCTAssertEqual(AudioOutputUnitStop(unit), noErr)
        let calls = tape.calls.load(ordering: .relaxed)
        let heard = capture.stop()[0]
        XCTAssertEqual(tape.calls.load(ordering: .relaxed), calls, "no call after AudioOutputUnitStop returned")
        // Callbacks come for what the server asks, at most the I/O buffer: the session's default
        // 20 ms, 882 frames at the client's 44.1 kHz (PulseAudio asks for whole buffers; pipewire-pulse
        // asks as its graph runs).
        XCTAssertGreaterThan(tape.largest.load(ordering: .relaxed), 0)
        XCTAssertLessThanOrEqual(tape.largest.load(ordering: .relaxed), 882)
        let onset = try XCTUnwrap(SignalAnalysis.onset(heard, threshold: 0.1), "nothing heard")
        let middle = heard[(onset + 4800)..<(onset + 4800 + 48000)]
        XCTAssertEqual(SignalAnalysis.frequency(middle, sampleRate: 48000), 1000, accuracy: 1)
        XCTAssertEqual(SignalAnalysis.rmsDB(middle), 20 * log10(0.5 / 2.squareRoot()), accuracy: 0.3)
        XCTAssertLessThanOrEqual(SignalAnalysis.longestGap(middle, threshold: 0.002), TestSound.gapTolerance, "a gap in the tone")
    }

    func testTheInputCallbackReadsTheMicrophoneThroughBusOne() throws {
        let server = try TestSound.server()
        let unit = try Self.ioUnit()
        defer { AudioComponentInstanceDispose(unit) }
        var on: UInt32 = 1, off: UInt32 = 0
        XCTAssertEqual(AudioUnitSetProperty(unit, kAudioOutputUnitProperty_EnableIO, kAudioUnitScope_Input, 1, &on, 4), noErr)
        XCTAssertEqual(AudioUnitSetProperty(unit, kAudioOutputUnitProperty_EnableIO, kAudioUnitScope_Output, 0, &off, 4), noErr)
        var format = Self.int16Mono
        format.mSampleRate = 48000
        XCTAssertEqual(AudioUnitSetProperty(unit, kAudioUnitProperty_StreamFormat, kAudioUnitScope_Output, 1, &format, UInt32(MemoryLayout<AudioStreamBasicDescription>.size)), noErr)
        let tape = Tape(capacity: 48000 * 8)
        tape.unit = unit
        let input: AURenderCallback = { refCon, flags, time, bus, frames, _ in
            let tape = Unmanaged<Tape>.fromOpaque(refCon).takeUnretainedValue()
            tape.calls.add(1, ordering: .relaxed)
            tape.frames.store(Int(frames), ordering: .relaxed)
            let at = tape.written.load(ordering: .relaxed)
            guard at + Int(frames) <= tape.capacity else { return noErr }
            tape.list.unsafeMutablePointer.pointee.mNumberBuffers = 1
            tape.list[0] = AudioBuffer(mNumberChannels: 1, mDataByteSize: frames * 2, mData: tape.samples + at)
            let status = AudioUnitRender(tape.unit!, flags, time, bus, frames, tape.list.unsafeMutablePointer)
            if status == noErr { tape.written.store(at + Int(frames), ordering: .releasing) }
            return status
        }
        var cb = AURenderCallbackStruct(inputProc: input, inputProcRefCon: Unmanaged.passUnretained(tape).toOpaque())
        XCTAssertEqual(AudioUnitSetProperty(unit, kAudioOutputUnitProperty_SetInputCallback, kAudioUnitScope_Global, 0, &cb, UInt32(MemoryLayout<AURenderCallbackStruct>.size)), noErr)
        XCTAssertEqual(AudioUnitInitialize(unit), noErr)
        XCTAssertEqual(AudioOutputUnitStart(unit), noErr)
        XCTAssertTrue(waitUntil(timeout: 5) { tape.calls.load(ordering: .relaxed) >= 10 }, "no input callbacks")
        let chirp = try MicrophoneChirp(server: server)
        try chirp.waitUntilPlayed()
        let target = tape.written.load(ordering: .relaxed) + 48000 / 4
        XCTAssertTrue(waitUntil(timeout: 5) { tape.written.load(ordering: .relaxed) >= target })
        XCTAssertEqual(AudioOutputUnitStop(unit), noErr)
        XCTAssertEqual(tape.frames.load(ordering: .relaxed), 960, "the session's default I/O buffer, 20 ms")
        XCTAssertNil(chirp.failure(of: (0..<tape.written.load(ordering: .acquiring)).map { Float(tape.samples[$0]) / 32768 }))
    }

    /// Play-through as iOS sample code does it: the render callback pulls bus 1 into its output.
    final class PlayThrough: @unchecked Sendable {
        var unit: AudioUnit?
        let calls = Atomic<Int>(0)
        static let render: AURenderCallback = { refCon, flags, time, _, frames, data in
            let me = Unmanaged<PlayThrough>.fromOpaque(refCon).takeUnretainedValue()
            me.calls.add(1, ordering: .relaxed)
            return AudioUnitRender(me.unit!, flags, time, 1, frames, data!)
        }
    }

    func testPlayThroughCarriesTheMicrophoneToTheSpeakerWholeAndInOrder() throws {
        let server = try TestSound.server()
        let unit = try Self.ioUnit()
        defer { AudioComponentInstanceDispose(unit) }
        var on: UInt32 = 1
        XCTAssertEqual(AudioUnitSetProperty(unit, kAudioOutputUnitProperty_EnableIO, kAudioUnitScope_Input, 1, &on, 4), noErr)
        var format = Self.int16Mono
        format.mSampleRate = 48000
        let size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
        XCTAssertEqual(AudioUnitSetProperty(unit, kAudioUnitProperty_StreamFormat, kAudioUnitScope_Input, 0, &format, size), noErr)
        XCTAssertEqual(AudioUnitSetProperty(unit, kAudioUnitProperty_StreamFormat, kAudioUnitScope_Output, 1, &format, size), noErr)
        let loop = PlayThrough()
        loop.unit = unit
        var cb = AURenderCallbackStruct(inputProc: PlayThrough.render, inputProcRefCon: Unmanaged.passUnretained(loop).toOpaque())
        XCTAssertEqual(AudioUnitSetProperty(unit, kAudioUnitProperty_SetRenderCallback, kAudioUnitScope_Input, 0, &cb, UInt32(MemoryLayout<AURenderCallbackStruct>.size)), noErr)
        XCTAssertEqual(AudioUnitInitialize(unit), noErr)
        let capture = try SignalCapture(server: server, device: "speaker.monitor")
        XCTAssertEqual(AudioOutputUnitStart(unit), noErr)
        XCTAssertTrue(waitUntil(timeout: 5) { loop.calls.load(ordering: .relaxed) >= 20 }, "no render callbacks")
        let source = SignalAnalysis.chirp(from: 200, to: 4000, sampleRate: 48000, seconds: 2)
        let player = try SignalPlayer(server: server, device: "micfeed", samples: source, sampleRate: 48000)
        player.waitUntilDone()
        try capture.waitFor(frames: capture.frameCount + 48000 / 4, timeout: 5)
        XCTAssertEqual(AudioOutputUnitStop(unit), noErr)
        let heard = capture.stop()[0]
        // The reader takes whole requests or nothing: where the input was late it plays a
        // request of silence and the rest a request later. Nothing is lost or repeated: with
        // such silences taken out, what the speaker played is the source. On a real server the
        // criterion holds under scheduling noise: no silence longer than three I/O buffers (the
        // reader's exact bound, one request, is the virtual backend's to test).
        let first = try XCTUnwrap(heard.firstIndex { abs($0) > 0.05 }, "nothing played through")
        let last = heard.lastIndex { abs($0) > 0.05 } ?? first
        var cleaned: [Float] = [], silences: [Int] = []
        var i = 0
        while i < heard.count {
            var j = i
            while j < heard.count && abs(heard[j]) < 0.001 { j += 1 }
            if j - i >= 3 && i > first && j < last {
                silences.append(j - i)
            } else {
                cleaned += heard[i..<max(j, i + 1)]
            }
            i = max(j, i + 1)
        }
        XCTAssertLessThanOrEqual(silences.max() ?? 0, 3 * 960, "a silence inside what was played through longer than three I/O buffers: \(silences)")
        let found = SignalAnalysis.align(source, in: cleaned, maxLag: cleaned.count - source.count)
        XCTAssertGreaterThanOrEqual(found.correlation, 0.98, "what the speaker played vs the microphone's source, at lag \(found.lag)")
    }
}
