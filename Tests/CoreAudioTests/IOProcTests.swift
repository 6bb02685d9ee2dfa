import AudioTestSupport
import CoreAudio
import Foundation
import Synchronization
import XCTest

/// IOProcs on the private server's devices: a tone played by one is heard on the sink's monitor,
/// and one on the microphone receives what was played into it.
final class IOProcTests: XCTestCase {
    /// What an IOProc shares with its test: preallocated samples and atomics, nothing the I/O
    /// thread has to allocate or lock.
    private final class Tape: @unchecked Sendable {
        let capacity: Int
        let samples: UnsafeMutablePointer<Float>
        let written = Atomic<Int>(0)
        let calls = Atomic<Int>(0)
        let framesPerCall = Atomic<Int>(0)
        let lastSampleTime = Atomic<Int>(-1)
        let steadyTimes = Atomic<Bool>(true)
        var phase = 0.0
        init(capacity: Int) {
            self.capacity = capacity
            samples = .allocate(capacity: capacity)
        }
        deinit { samples.deallocate() }
        var recorded: [Float] { Array(UnsafeBufferPointer(start: samples, count: written.load(ordering: .acquiring))) }

        /// Each call's frames follow the previous call's.
        func note(_ time: AudioTimeStamp, frames: Int) {
            calls.add(1, ordering: .relaxed)
            framesPerCall.store(frames, ordering: .relaxed)
            let t = Int(time.mSampleTime)
            let last = lastSampleTime.exchange(t, ordering: .relaxed)
            if last >= 0 && t - last != frames { steadyTimes.store(false, ordering: .relaxed) }
        }
    }

    private func defaultDevice(_ selector: AudioObjectPropertySelector) -> AudioObjectID {
        var a = AudioObjectPropertyAddress(mSelector: selector, mScope: kAudioObjectPropertyScopeGlobal, mElement: kAudioObjectPropertyElementMain)
        var id = kAudioObjectUnknown
        var size = UInt32(MemoryLayout<AudioObjectID>.size)
        XCTAssertEqual(AudioObjectGetPropertyData(AudioObjectID(kAudioObjectSystemObject), &a, 0, nil, &size, &id), noErr)
        return id
    }

    func testOutputIOProcPlaysATone() throws {
        let server = try TestSound.server()
        let device = defaultDevice(kAudioHardwarePropertyDefaultOutputDevice)
        let tape = Tape(capacity: 1)
        let proc: AudioDeviceIOProc = { _, _, input, _, output, outputTime, data in
            let tape = Unmanaged<Tape>.fromOpaque(data!).takeUnretainedValue()
            let buffers = UnsafeMutableAudioBufferListPointer(output)
            guard input.pointee.mNumberBuffers == 0, buffers.count == 1, let samples = buffers[0].mData?.assumingMemoryBound(to: Float.self) else {
                return kAudioHardwareUnspecifiedError
            }
            let channels = Int(buffers[0].mNumberChannels)
            let frames = Int(buffers[0].mDataByteSize) / (4 * channels)
            tape.note(outputTime.pointee, frames: frames)
            for f in 0..<frames {
                let v = Float(0.5 * sin(tape.phase))
                tape.phase += 2 * Double.pi * 1000 / 48000
                for c in 0..<channels { samples[f * channels + c] = v }
            }
            return noErr
        }
        var id: AudioDeviceIOProcID?
        XCTAssertEqual(AudioDeviceCreateIOProcID(device, proc, Unmanaged.passUnretained(tape).toOpaque(), &id), noErr)
        let procID = try XCTUnwrap(id)
        let capture = try SignalCapture(server: server, device: "speaker.monitor")
        XCTAssertEqual(AudioDeviceStart(device, procID), noErr)
        var running = AudioObjectPropertyAddress(mSelector: kAudioDevicePropertyDeviceIsRunning, mScope: kAudioObjectPropertyScopeGlobal, mElement: 0)
        var isRunning: UInt32 = 0
        var size: UInt32 = 4
        XCTAssertEqual(AudioObjectGetPropertyData(device, &running, 0, nil, &size, &isRunning), noErr)
        XCTAssertEqual(isRunning, 1)
        let start = capture.frameCount
        try capture.waitFor(frames: start + 48000 * 3 / 2, timeout: 5)
        var now = AudioTimeStamp()
        XCTAssertEqual(AudioDeviceGetCurrentTime(device, &now), noErr)
        XCTAssertGreaterThan(now.mSampleTime, 0)
        XCTAssertEqual(AudioDeviceStop(device, procID), noErr)
        let calls = tape.calls.load(ordering: .relaxed)
        XCTAssertEqual(AudioDeviceDestroyIOProcID(device, procID), noErr)
        let heard = capture.stop()[0]
        XCTAssertEqual(tape.framesPerCall.load(ordering: .relaxed), 512, "Apple's default buffer frame size")
        XCTAssertTrue(tape.steadyTimes.load(ordering: .relaxed), "output time stamps advance by one buffer")
        XCTAssertEqual(tape.calls.load(ordering: .relaxed), calls, "no call after AudioDeviceStop returned")
        XCTAssertEqual(AudioDeviceGetCurrentTime(device, &now), kAudioHardwareNotRunningError)
        // The tone, steady and whole, in the middle of what the monitor heard.
        let onset = try XCTUnwrap(SignalAnalysis.onset(heard, threshold: 0.1), "nothing heard")
        let middle = heard[(onset + 4800)..<(onset + 4800 + 48000)]
        // Criteria that hold on a busy machine: the frequency of most 100 ms windows (a dropout
        // shifts the phase of the one it falls in), the level, and no silence longer than three
        // I/O buffers (a 1 kHz sine passes near zero for a sample at each crossing). A dropout
        // count is the benchmark's (openavf-bench --only underruns).
        let windows = stride(from: middle.startIndex, to: middle.endIndex - 4799, by: 4800).map {
            SignalAnalysis.frequency(middle[$0..<($0 + 4800)], sampleRate: 48000)
        }.sorted()
        XCTAssertEqual(windows[windows.count / 2], 1000, accuracy: 2, "the tone's frequency (median of 100 ms windows: \(windows))")
        XCTAssertEqual(SignalAnalysis.rmsDB(middle), 20 * log10(0.5 / 2.squareRoot()), accuracy: 1)
        let gap = SignalAnalysis.longestGap(middle, threshold: 0.002)
        if gap > 2 { print("the output IOProc's tone had a silence of \(gap) frames") }
        XCTAssertLessThanOrEqual(gap, TestSound.gapTolerance, "a silence in the tone longer than three server periods")
    }

    func testInputIOProcHearsTheMicrophone() throws {
        let server = try TestSound.server()
        let device = defaultDevice(kAudioHardwarePropertyDefaultInputDevice)
        let tape = Tape(capacity: 48000 * 6)
        let block: AudioDeviceIOBlock = { _, input, inputTime, output, _ in
            let buffers = UnsafeMutableAudioBufferListPointer(UnsafeMutablePointer(mutating: input))
            guard output.pointee.mNumberBuffers == 0, buffers.count == 1, let samples = buffers[0].mData?.assumingMemoryBound(to: Float.self) else { return }
            let count = Int(buffers[0].mDataByteSize) / 4
            tape.note(inputTime.pointee, frames: count / Int(buffers[0].mNumberChannels))
            let at = tape.written.load(ordering: .relaxed)
            let n = min(count, tape.capacity - at)
            (tape.samples + at).update(from: samples, count: n)
            tape.written.store(at + n, ordering: .releasing)
        }
        var id: AudioDeviceIOProcID?
        XCTAssertEqual(AudioDeviceCreateIOProcIDWithBlock(&id, device, nil, block), noErr)
        let procID = try XCTUnwrap(id)
        // A buffer of 256 frames, set before it starts.
        var frames: UInt32 = 256
        var a = AudioObjectPropertyAddress(mSelector: kAudioDevicePropertyBufferFrameSize, mScope: kAudioObjectPropertyScopeGlobal, mElement: 0)
        XCTAssertEqual(AudioObjectSetPropertyData(device, &a, 0, nil, 4, &frames), noErr)
        defer {
            var standard: UInt32 = 512
            AudioObjectSetPropertyData(device, &a, 0, nil, 4, &standard)
        }
        XCTAssertEqual(AudioDeviceStart(device, procID), noErr)
        XCTAssertTrue(waitUntil(timeout: 5) { tape.calls.load(ordering: .relaxed) >= 10 }, "no input cycles")
        let chirp = try MicrophoneChirp(server: server)
        try chirp.waitUntilPlayed()
        let target = tape.written.load(ordering: .relaxed) + 48000 / 4
        XCTAssertTrue(waitUntil(timeout: 5) { tape.written.load(ordering: .relaxed) >= target })
        XCTAssertEqual(AudioDeviceStop(device, procID), noErr)
        XCTAssertEqual(AudioDeviceDestroyIOProcID(device, procID), noErr)
        XCTAssertEqual(tape.framesPerCall.load(ordering: .relaxed), 256)
        XCTAssertTrue(tape.steadyTimes.load(ordering: .relaxed), "input time stamps advance by one buffer")
        XCTAssertNil(chirp.failure(of: tape.recorded))
    }

    func testBadCallsGetApplesErrors() throws {
        _ = try TestSound.server()
        let device = defaultDevice(kAudioHardwarePropertyDefaultOutputDevice)
        let proc: AudioDeviceIOProc = { _, _, _, _, _, _, _ in noErr }
        var id: AudioDeviceIOProcID?
        XCTAssertEqual(AudioDeviceCreateIOProcID(12345, proc, nil, &id), kAudioHardwareBadDeviceError)
        XCTAssertEqual(AudioDeviceStop(device, nil), kAudioHardwareNotRunningError, "nothing was started")
        XCTAssertEqual(AudioDeviceCreateIOProcID(device, proc, nil, &id), noErr)
        XCTAssertEqual(AudioDeviceDestroyIOProcID(device, id!), noErr)
        XCTAssertEqual(AudioDeviceStart(device, id!), kAudioHardwareIllegalOperationError, "a destroyed IOProc")
        var frames: UInt32 = 10
        var a = AudioObjectPropertyAddress(mSelector: kAudioDevicePropertyBufferFrameSize, mScope: kAudioObjectPropertyScopeGlobal, mElement: 0)
        XCTAssertEqual(AudioObjectSetPropertyData(device, &a, 0, nil, 4, &frames), kAudioHardwareIllegalOperationError, "below the range")
    }
}
