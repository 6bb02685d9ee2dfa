@testable import AudioHAL
import AudioToolbox
import AudioTestSupport
import Foundation
import Synchronization
import XCTest

/// The I/O unit's play-through on the virtual backend: the render callback pulls bus 1 into its
/// output, as iOS sample code does, while the test moves the playback and capture streams out of
/// step. Every frame the speaker plays is checked against the microphone's.
final class VirtualIOUnitTests: XCTestCase {
    private var virtual: VirtualBackend!
    private var environment: VirtualAudioSystem!

    override func setUp() {
        environment = VirtualAudioSystem()
        virtual = environment.backend
        // Frame k of the microphone reads 0.25 + (k mod 32768) / 131072: exact in a Float, never
        // quiet (a quiet moment is where the reader may drop a lasting backlog, by design).
        virtual.inputSignal = { format, first, buffer in
            for i in 0..<buffer.count { buffer[i] = 0.25 + Float((Int(first) + i / format.channels) % 32768) / 131072 }
        }
    }

    override func tearDown() {
        environment.restore()
        virtual = nil
    }

    final class PlayThrough: @unchecked Sendable {
        var unit: AudioUnit?
        static let render: AURenderCallback = { refCon, flags, time, _, frames, data in
            let me = Unmanaged<PlayThrough>.fromOpaque(refCon).takeUnretainedValue()
            return AudioUnitRender(me.unit!, flags, time, 1, frames, data!)
        }
    }

    /// A RemoteIO unit playing through, mono float at 48 kHz on both sides, started.
    private func startPlayThrough(_ loop: PlayThrough) throws -> AudioUnit {
        var description = AudioComponentDescription(
            componentType: kAudioUnitType_Output, componentSubType: kAudioUnitSubType_RemoteIO, componentManufacturer: kAudioUnitManufacturer_Apple,
            componentFlags: 0, componentFlagsMask: 0)
        let component = try XCTUnwrap(AudioComponentFindNext(nil, &description))
        var made: AudioUnit?
        XCTAssertEqual(AudioComponentInstanceNew(component, &made), noErr)
        let unit = try XCTUnwrap(made)
        var on: UInt32 = 1
        XCTAssertEqual(AudioUnitSetProperty(unit, kAudioOutputUnitProperty_EnableIO, kAudioUnitScope_Input, 1, &on, 4), noErr)
        var format = AudioStreamBasicDescription(
            mSampleRate: 48000, mFormatID: kAudioFormatLinearPCM, mFormatFlags: kAudioFormatFlagIsFloat | kAudioFormatFlagIsPacked,
            mBytesPerPacket: 4, mFramesPerPacket: 1, mBytesPerFrame: 4, mChannelsPerFrame: 1, mBitsPerChannel: 32, mReserved: 0)
        let size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
        XCTAssertEqual(AudioUnitSetProperty(unit, kAudioUnitProperty_StreamFormat, kAudioUnitScope_Input, 0, &format, size), noErr)
        XCTAssertEqual(AudioUnitSetProperty(unit, kAudioUnitProperty_StreamFormat, kAudioUnitScope_Output, 1, &format, size), noErr)
        loop.unit = unit
        var cb = AURenderCallbackStruct(inputProc: PlayThrough.render, inputProcRefCon: Unmanaged.passUnretained(loop).toOpaque())
        XCTAssertEqual(AudioUnitSetProperty(unit, kAudioUnitProperty_SetRenderCallback, kAudioUnitScope_Input, 0, &cb, UInt32(MemoryLayout<AURenderCallbackStruct>.size)), noErr)
        XCTAssertEqual(AudioUnitInitialize(unit), noErr)
        XCTAssertEqual(AudioOutputUnitStart(unit), noErr)
        return unit
    }

    /// What the speaker played, split into the microphone's frame numbers (in order) and the
    /// silences inside them (their lengths), from the first frame that sounded.
    private func read(_ played: [Float]) -> (frames: [Int], silences: [Int]) {
        var frames: [Int] = [], silences: [Int] = []
        var gap = 0
        for v in played.drop(while: { $0 == 0 }) {
            if v == 0 {
                gap += 1
                continue
            }
            if gap > 0 { silences.append(gap) }
            gap = 0
            frames.append(Int((v - 0.25) * 131072))
        }
        return (frames, silences)
    }

    private func firstBreak(_ frames: [Int]) -> String? {
        for (i, (a, b)) in zip(frames, frames.dropFirst()).enumerated() where b != (a + 1) % 32768 {
            return "played frame \(i + 1) is the microphone's \(b), after \(a)"
        }
        return nil
    }

    /// Input whose second half comes after the output's request now and then (every fourth
    /// cycle of 20 ms): the reader takes a request whole or not at all, so it plays one whole
    /// request of silence the first time (not half a request of sound and half of silence) and
    /// takes the input a request later from then on, which covers the later late halves.
    /// Nothing is lost or repeated.
    func testPlayThroughInputLateByUnderARequestCostsOneRequestOfSilenceOnce() throws {
        let loop = PlayThrough()
        let unit = try startPlayThrough(loop)
        defer { AudioComponentInstanceDispose(unit) }
        var played: [Float] = []
        for k in 0..<100 {
            let late = k % 4 == 1
            virtual.advance(frames: late ? 480 : 960, streams: .inputs)
            played += virtual.advance(frames: 960, streams: .outputs).values.first ?? []
            if late { virtual.advance(frames: 480, streams: .inputs) }
        }
        XCTAssertEqual(AudioOutputUnitStop(unit), noErr)
        let (frames, silences) = read(played)
        XCTAssertEqual(frames.first, 0, "the speaker starts at the microphone's first frame")
        XCTAssertNil(firstBreak(frames))
        XCTAssertEqual(silences, [960], "one request of silence, at the first late input")
    }

    /// The input stalls for three requests and then comes all at once: the speaker plays those
    /// three requests as silence, then every frame of the input in order, none lost to the burst.
    func testPlayThroughRidesOutAStalledInputWithoutLosingAFrame() throws {
        let loop = PlayThrough()
        let unit = try startPlayThrough(loop)
        defer { AudioComponentInstanceDispose(unit) }
        var played: [Float] = []
        var owed = 0
        for k in 0..<100 {
            if k < 40 || k > 42 {
                virtual.advance(frames: 960 + owed, streams: .inputs)
                owed = 0
            } else {
                owed += 960
            }
            played += virtual.advance(frames: 960, streams: .outputs).values.first ?? []
        }
        XCTAssertEqual(AudioOutputUnitStop(unit), noErr)
        let (frames, silences) = read(played)
        XCTAssertEqual(frames.first, 0)
        XCTAssertNil(firstBreak(frames))
        XCTAssertEqual(silences, [3 * 960], "the stall's three requests, and no other silence")
    }
}
