import AudioToolbox
import Foundation
import XCTest

/// A disposed queue, buffer, file, ExtAudioFile or converter stays invalid for the life of the
/// process: its reference never comes to stand for a newer object, however many are created after
/// it, and every call given it returns Apple's error for an invalid object instead of acting on
/// someone else's object or crashing. No sound server needed: queues open no stream until they
/// are primed or started.
final class HandleTests: XCTestCase {
    private static let rounds = 10_000
    private static let ignore: AudioQueueOutputCallback = { _, _, _ in }

    private func newQueue() throws -> AudioQueueRef {
        var format = lpcm(rate: 48000, channels: 1)
        var queue: AudioQueueRef?
        XCTAssertEqual(AudioQueueNewOutput(&format, Self.ignore, nil, nil, nil, 0, &queue), noErr)
        return try XCTUnwrap(queue)
    }

    /// The process's thread count, from the kernel.
    private func threadCount() throws -> Int {
        let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        let line = try XCTUnwrap(status.split(separator: "\n").first { $0.hasPrefix("Threads:") })
        return try XCTUnwrap(Int(line.dropFirst("Threads:".count).trimmingCharacters(in: .whitespaces)))
    }

    func testDisposedQueueStaysInvalid() throws {
        let first = try newQueue()
        XCTAssertEqual(AudioQueueDispose(first, true), noErr)
        let threadsBefore = try threadCount()
        let started = Date()
        var running: UInt32 = 7
        var size = UInt32(MemoryLayout<UInt32>.size)
        for round in 0..<Self.rounds {
            let queue = try newQueue()
            XCTAssertNotEqual(queue, first)
            if AudioQueueStart(first, nil) != kAudio_ParamError
                || AudioQueueGetProperty(first, kAudioQueueProperty_IsRunning, &running, &size) != kAudio_ParamError
            {
                XCTFail("round \(round): the disposed queue's reference reached a live queue")
                AudioQueueDispose(queue, true)
                break
            }
            XCTAssertEqual(AudioQueueDispose(queue, true), noErr)
        }
        let elapsed = Date().timeIntervalSince(started)
        print("HandleTests: \(Self.rounds) queues created and disposed in \(String(format: "%.2f", elapsed)) s")
        XCTAssertEqual(running, 7, "nothing written through the stale reference")
        XCTAssertEqual(AudioQueueDispose(first, true), kAudio_ParamError)
        // Each queue's callback thread ended with its dispose.
        XCTAssertLessThanOrEqual(try threadCount(), threadsBefore + 2)
    }

    func testFreedBufferStaysInvalid() throws {
        let queue = try newQueue()
        defer { AudioQueueDispose(queue, true) }
        var freed: AudioQueueBufferRef?
        XCTAssertEqual(AudioQueueAllocateBuffer(queue, 960, &freed), noErr)
        let stale = try XCTUnwrap(freed)
        XCTAssertEqual(AudioQueueFreeBuffer(queue, stale), noErr)
        for round in 0..<Self.rounds {
            var buffer: AudioQueueBufferRef?
            XCTAssertEqual(AudioQueueAllocateBuffer(queue, 960, &buffer), noErr)
            let fresh = try XCTUnwrap(buffer)
            XCTAssertNotEqual(fresh, stale)
            if AudioQueueEnqueueBuffer(queue, stale, 0, nil) != kAudioQueueErr_InvalidBuffer
                || AudioQueueFreeBuffer(queue, stale) != kAudioQueueErr_InvalidBuffer
            {
                XCTFail("round \(round): the freed buffer reached a live buffer")
                break
            }
            XCTAssertEqual(AudioQueueFreeBuffer(queue, fresh), noErr)
        }
        // A retired header reads as empty: no pointer to freed memory.
        let dataOffset = try XCTUnwrap(MemoryLayout<AudioQueueBuffer>.offset(of: \.mAudioData))
        XCTAssertEqual(UnsafeRawPointer(stale).load(fromByteOffset: dataOffset, as: UInt.self), 0)
        XCTAssertEqual(stale.pointee.mAudioDataBytesCapacity, 0)
    }

    func testBufferOfDisposedQueueIsInvalidOnAnother() throws {
        let gone = try newQueue()
        var buffer: AudioQueueBufferRef?
        XCTAssertEqual(AudioQueueAllocateBuffer(gone, 960, &buffer), noErr)
        let stale = try XCTUnwrap(buffer)
        XCTAssertEqual(AudioQueueDispose(gone, true), noErr)
        let queue = try newQueue()
        defer { AudioQueueDispose(queue, true) }
        var fresh: [AudioQueueBufferRef] = []
        for _ in 0..<1000 {
            var b: AudioQueueBufferRef?
            XCTAssertEqual(AudioQueueAllocateBuffer(queue, 960, &b), noErr)
            fresh.append(try XCTUnwrap(b))
            XCTAssertEqual(AudioQueueEnqueueBuffer(queue, stale, 0, nil), kAudioQueueErr_InvalidBuffer)
        }
        XCTAssertFalse(fresh.contains(stale))
    }

    func testReferenceOfAnotherKindIsRefused() throws {
        let queue = try newQueue()
        defer { AudioQueueDispose(queue, true) }
        let converter = try newConverter()
        defer { AudioConverterDispose(converter) }
        XCTAssertEqual(AudioQueueStart(converter, nil), kAudio_ParamError)
        XCTAssertEqual(AudioConverterReset(queue), kAudio_ParamError)
        var timeline: AudioQueueTimelineRef?
        XCTAssertEqual(AudioQueueCreateTimeline(queue, &timeline), noErr)
        XCTAssertEqual(AudioQueueDisposeTimeline(queue, queue), kAudio_ParamError)
        XCTAssertEqual(AudioQueueDisposeTimeline(queue, try XCTUnwrap(timeline)), noErr)
        XCTAssertEqual(AudioQueueDisposeTimeline(queue, try XCTUnwrap(timeline)), kAudio_ParamError)
    }

    // MARK: Files and converters

    private var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("handles-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
    }

    /// A WAVE file of 480 frames of 16-bit mono silence.
    private func tinyFile() throws -> URL {
        let url = directory.appendingPathComponent("tiny.wav")
        var format = lpcm(rate: 48000, channels: 1)
        var file: AudioFileID?
        XCTAssertEqual(AudioFileCreateWithURL(url as CFURL, kAudioFileWAVEType, &format, .eraseFile, &file), noErr)
        var packets: UInt32 = 480
        let silence = [Int16](repeating: 0, count: 480)
        XCTAssertEqual(AudioFileWritePackets(try XCTUnwrap(file), false, 960, nil, 0, &packets, silence), noErr)
        XCTAssertEqual(AudioFileClose(try XCTUnwrap(file)), noErr)
        return url
    }

    private func newConverter() throws -> AudioConverterRef {
        var source = lpcm(rate: 48000, channels: 1)
        var destination = lpcm(rate: 48000, channels: 2, bits: 32, float: true)
        var converter: AudioConverterRef?
        XCTAssertEqual(AudioConverterNew(&source, &destination, &converter), noErr)
        return try XCTUnwrap(converter)
    }

    func testClosedAudioFileStaysInvalid() throws {
        let url = try tinyFile()
        func open() throws -> AudioFileID {
            var file: AudioFileID?
            XCTAssertEqual(AudioFileOpenURL(url as CFURL, .readPermission, 0, &file), noErr)
            return try XCTUnwrap(file)
        }
        let first = try open()
        XCTAssertEqual(AudioFileClose(first), noErr)
        var format = AudioStreamBasicDescription()
        var size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
        for round in 0..<Self.rounds {
            let file = try open()
            XCTAssertNotEqual(file, first)
            if AudioFileGetProperty(first, kAudioFilePropertyDataFormat, &size, &format) != kAudioFileNotOpenError {
                XCTFail("round \(round): the closed file's ID reached an open file")
                AudioFileClose(file)
                break
            }
            XCTAssertEqual(AudioFileClose(file), noErr)
        }
        XCTAssertEqual(format.mSampleRate, 0, "nothing read through the stale ID")
        XCTAssertEqual(AudioFileClose(first), kAudioFileNotOpenError)
    }

    func testDisposedExtAudioFileStaysInvalid() throws {
        let url = try tinyFile()
        func open() throws -> ExtAudioFileRef {
            var file: ExtAudioFileRef?
            XCTAssertEqual(ExtAudioFileOpenURL(url as CFURL, &file), noErr)
            return try XCTUnwrap(file)
        }
        let first = try open()
        var innerFile: AudioFileID?
        var idSize = UInt32(MemoryLayout<AudioFileID?>.size)
        XCTAssertEqual(ExtAudioFileGetProperty(first, kExtAudioFileProperty_AudioFile, &idSize, &innerFile), noErr)
        let firstInner = try XCTUnwrap(innerFile)
        XCTAssertEqual(ExtAudioFileDispose(first), noErr)
        var frames: Int64 = -1
        var size = UInt32(MemoryLayout<Int64>.size)
        for round in 0..<Self.rounds {
            let file = try open()
            XCTAssertNotEqual(file, first)
            if ExtAudioFileGetProperty(first, kExtAudioFileProperty_FileLengthFrames, &size, &frames) != kAudio_ParamError
                || ExtAudioFileTell(first, &frames) != kAudio_ParamError
                || AudioFileGetProperty(firstInner, kAudioFilePropertyAudioDataPacketCount, &size, &frames) != kAudioFileNotOpenError
            {
                XCTFail("round \(round): the disposed ExtAudioFile's reference reached an open one")
                ExtAudioFileDispose(file)
                break
            }
            XCTAssertEqual(ExtAudioFileDispose(file), noErr)
        }
        XCTAssertEqual(frames, -1, "nothing read through the stale reference")
        XCTAssertEqual(ExtAudioFileDispose(first), kAudio_ParamError)
    }

    func testDisposedConverterStaysInvalid() throws {
        let first = try newConverter()
        XCTAssertEqual(AudioConverterDispose(first), noErr)
        var format = AudioStreamBasicDescription()
        var size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
        for round in 0..<Self.rounds {
            let converter = try newConverter()
            XCTAssertNotEqual(converter, first)
            if AudioConverterGetProperty(first, kAudioConverterCurrentOutputStreamDescription, &size, &format) != kAudio_ParamError
                || AudioConverterReset(first) != kAudio_ParamError
            {
                XCTFail("round \(round): the disposed converter's reference reached a live converter")
                AudioConverterDispose(converter)
                break
            }
            XCTAssertEqual(AudioConverterDispose(converter), noErr)
        }
        XCTAssertEqual(format.mSampleRate, 0, "nothing read through the stale reference")
        XCTAssertEqual(AudioConverterDispose(first), kAudio_ParamError)
    }
}
