@testable import AudioHAL
import AVFAudio
import AudioToolbox
import AudioTestSupport
import Foundation
import Synchronization
import XCTest

/// AVAudioEngine on the virtual backend, set as the process's audio environment: the test plays
/// the server, moving the playback and capture streams by hand, and checks every sample the
/// engine's input hands on. Deterministic: where a tap's thread has work to do, the test waits for
/// it on a condition (bounded), never by sleeping.
final class VirtualEngineTests: XCTestCase {
    private var virtual: VirtualBackend!
    private var environment: VirtualAudioSystem!

    override func setUp() {
        environment = VirtualAudioSystem()
        virtual = environment.backend
        // The microphone says which frame each sample is: frame k reads (k mod 65536 + 1) / 65536
        // on channel 0 and its negative on channel 1 (exact in a Float, never silence).
        virtual.inputSignal = { format, first, buffer in
            for i in 0..<buffer.count {
                let frame = Int(first) + i / format.channels
                let value = Float(frame % 65536 + 1) / 65536
                buffer[i] = i % format.channels == 0 ? value : -value
            }
        }
    }

    override func tearDown() {
        environment.restore()
        virtual = nil
    }

    /// What a tap heard, with a condition to wait on.
    final class TapLog: @unchecked Sendable {
        struct State {
            var left: [Float] = []
            var right: [Float] = []
            var times: [(AVAudioFramePosition, Int)] = []
        }
        private let condition = NSCondition()
        private var heard = State()

        func add(_ buffer: AVAudioPCMBuffer, _ time: AVAudioTime) {
            let n = Int(buffer.frameLength)
            condition.lock()
            heard.left += UnsafeBufferPointer(start: buffer.floatChannelData![0], count: n)
            heard.right += UnsafeBufferPointer(start: buffer.floatChannelData![1], count: n)
            heard.times.append((time.sampleTime, n))
            condition.broadcast()
            condition.unlock()
        }

        var state: State {
            condition.lock()
            defer { condition.unlock() }
            return heard
        }

        /// Waits until `done` holds; false after `timeout` seconds.
        func wait(timeout: Double, until done: (State) -> Bool) -> Bool {
            let deadline = Date(timeIntervalSinceNow: timeout)
            condition.lock()
            defer { condition.unlock() }
            while !done(heard) {
                if !condition.wait(until: deadline) { return done(heard) }
            }
            return true
        }
    }

    /// The frame numbers a recording of the microphone holds, in order (nil for a sample that is
    /// no frame of the microphone's: silence inside the recording, or channels out of step).
    private func frames(_ left: [Float], _ right: [Float]) -> [Int?] {
        zip(left, right).map { l, r in l == -r && l > 0 ? Int(l * 65536) - 1 : nil }
    }

    /// What a run of the microphone's frames is missing: the first place where a frame is not its
    /// predecessor's successor (modulo the signal's period), or nil when whole.
    /// Silence before the first of the microphone's frames is not counted (the first assertion
    /// of each test says where the recording starts).
    private func firstBreak(_ all: [Int?]) -> String? {
        let numbers = Array(all.drop { $0 == nil })
        let lead = all.count - numbers.count
        for (i, (a, b)) in zip(numbers, numbers.dropFirst()).enumerated() {
            let i = i + lead
            guard let a, let b else { return "frame \(i + 1) of the recording is not the microphone's" }
            if b != (a + 1) % 65536 { return "frame \(i + 1) of the recording is the microphone's \(b), after \(a)" }
        }
        return nil
    }

    /// Moves the server's streams through `cycles` I/O buffers of 960 frames (the session's
    /// 20 ms), the input arriving out of step with the playback: every 17th cycle the capture
    /// stream stalls for three buffers and then hands over all four at once, as a busy server
    /// does; in between, it runs half a buffer late.
    private func runServer(cycles: Int) {
        var owed = 0
        for k in 0..<cycles {
            virtual.advance(frames: 960, streams: .outputs)
            owed += 960
            let stalled = (k % 17) >= 13 && (k % 17) <= 15
            if !stalled && owed >= 960 {
                virtual.advance(frames: owed - 480, streams: .inputs)
                owed = 480
            }
        }
        virtual.advance(frames: owed, streams: .inputs)
    }

    /// A tap on the input node records the microphone whole and in order whatever the playback
    /// does: the tap's chain runs as the input arrives, not when the output asks (pulled by the
    /// output, input that came late was silence in the recording and the rest a buffer late).
    /// The tap's buffers are the size asked for, their sample times contiguous.
    func testATapOnTheInputNodeRecordsEveryFrameOfTheMicrophoneInOrder() throws {
        let engine = AVAudioEngine()
        let input = engine.inputNode
        let format = input.outputFormat(forBus: 0)
        XCTAssertEqual(format.channelCount, 2)
        let heard = TapLog()
        input.installTap(onBus: 0, bufferSize: 4800, format: nil) { buffer, time in heard.add(buffer, time) }
        try engine.start()
        runServer(cycles: 200)  // 4 s
        XCTAssertTrue(heard.wait(timeout: 10) { $0.times.count >= 40 }, "four seconds of tap buffers")
        engine.stop()
        input.removeTap(onBus: 0)
        let got = heard.state
        let numbers = frames(got.left, got.right)
        XCTAssertEqual(numbers.first ?? nil, 0, "the recording starts at the microphone's first frame")
        XCTAssertNil(firstBreak(numbers))
        XCTAssertTrue(got.times.allSatisfy { $0.1 == 4800 }, "buffers of the size asked for")
        for (a, b) in zip(got.times, got.times.dropFirst()) { XCTAssertEqual(b.0, a.0 + 4800, "sample times contiguous") }
    }

    /// A sink node fed by the input node hears every frame of the microphone in order, in the
    /// I/O buffer's slices, out of step with the playback as above.
    func testASinkNodeOnTheInputHearsEveryFrameInOrder() throws {
        let engine = AVAudioEngine()
        let input = engine.inputNode
        let heard = Mutex<(left: [Float], right: [Float])>(([], []))
        let sink = AVAudioSinkNode { _, frames, list in
            let buffers = UnsafeMutableAudioBufferListPointer(UnsafeMutablePointer(mutating: list))
            let n = Int(frames)
            let l = UnsafeBufferPointer(start: buffers[0].mData!.assumingMemoryBound(to: Float.self), count: n)
            let r = UnsafeBufferPointer(start: buffers[1].mData!.assumingMemoryBound(to: Float.self), count: n)
            heard.withLock {
                $0.left += l
                $0.right += r
            }
            return noErr
        }
        engine.attach(sink)
        engine.connect(input, to: sink, format: nil)
        try engine.start()
        runServer(cycles: 100)
        engine.stop()
        let got = heard.withLock { $0 }
        XCTAssertEqual(got.left.count, 96000, "every frame captured, once")
        let numbers = frames(got.left, got.right)
        XCTAssertEqual(numbers.first ?? nil, 0)
        XCTAssertNil(firstBreak(numbers))
    }
}
