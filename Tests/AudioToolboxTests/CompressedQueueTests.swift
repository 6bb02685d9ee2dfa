import AudioTestSupport
import AudioToolbox
import Foundation
import XCTest

/// Feeds an output queue packet by packet from an AudioFile, as Apple's AQPlay does.
final class FilePacketFeeder: @unchecked Sendable {
    let file: AudioFileID
    let packetsPerBuffer: UInt32
    var nextPacket: Int64 = 0
    let lock = NSLock()
    let finished = DispatchSemaphore(value: 0)
    let running = RunningLog()
    private var done = false

    init(file: AudioFileID, packetsPerBuffer: UInt32) {
        self.file = file
        self.packetsPerBuffer = packetsPerBuffer
    }

    var context: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    static let callback: AudioQueueOutputCallback = { userData, queue, buffer in
        Unmanaged<FilePacketFeeder>.fromOpaque(userData!).takeUnretainedValue().fill(queue, buffer)
    }

    /// Reads the next packets into `buffer` (with their descriptions) and enqueues it.
    @discardableResult
    func fill(_ queue: AudioQueueRef, _ buffer: AudioQueueBufferRef) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        guard !done else { return false }
        var bytes = buffer.pointee.mAudioDataBytesCapacity
        var packets = min(packetsPerBuffer, buffer.pointee.mPacketDescriptionCapacity)
        let status = AudioFileReadPacketData(file, false, &bytes, buffer.pointee.mPacketDescriptions, nextPacket, &packets, buffer.pointee.mAudioData)
        guard status == noErr, packets > 0 else {
            done = true
            AudioQueueStop(queue, false)
            finished.signal()
            return false
        }
        nextPacket += Int64(packets)
        buffer.pointee.mAudioDataByteSize = bytes
        buffer.pointee.mPacketDescriptionCount = packets
        AudioQueueEnqueueBuffer(queue, buffer, packets, buffer.pointee.mPacketDescriptions)
        return true
    }
}

/// Acceptance 5: compressed formats through audio queues, on the private PulseAudio server.
final class CompressedQueueTests: XCTestCase {
    var dir: URL!
    override func setUpWithError() throws {
        _ = try TestSound.server()
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("openavf-cq-\(getpid())-\(UUID().uuidString.prefix(6))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }
    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: dir) }

    /// Writes `signal` (mono, 48 kHz) as `format` in a file of `type` with ExtAudioFile.
    func write(_ signal: [Float], to url: URL, type: AudioFileTypeID, format: AudioStreamBasicDescription) throws {
        var fileFormat = format
        var ext: ExtAudioFileRef?
        XCTAssertEqual(ExtAudioFileCreateWithURL(url as CFURL, type, &fileFormat, nil, AudioFileFlags.eraseFile.rawValue, &ext), noErr)
        var client = lpcm(rate: 48000, channels: 1, bits: 32, float: true)
        XCTAssertEqual(ExtAudioFileSetProperty(ext!, kExtAudioFileProperty_ClientDataFormat, UInt32(MemoryLayout<AudioStreamBasicDescription>.size), &client), noErr)
        var copy = signal
        copy.withUnsafeMutableBufferPointer { b in
            var list = AudioBufferList(mNumberBuffers: 1, mBuffers: AudioBuffer(mNumberChannels: 1, mDataByteSize: UInt32(b.count * 4), mData: b.baseAddress))
            XCTAssertEqual(ExtAudioFileWrite(ext!, UInt32(b.count), &list), noErr)
        }
        XCTAssertEqual(ExtAudioFileDispose(ext!), noErr)
    }

    /// Decodes `url` to mono float at 48 kHz with ExtAudioFile: what the queue should play.
    func decode(_ url: URL) throws -> [Float] {
        var ext: ExtAudioFileRef?
        XCTAssertEqual(ExtAudioFileOpenURL(url as CFURL, &ext), noErr)
        defer { ExtAudioFileDispose(ext!) }
        var client = lpcm(rate: 48000, channels: 1, bits: 32, float: true)
        XCTAssertEqual(ExtAudioFileSetProperty(ext!, kExtAudioFileProperty_ClientDataFormat, UInt32(MemoryLayout<AudioStreamBasicDescription>.size), &client), noErr)
        var out: [Float] = []
        var chunk = [Float](repeating: 0, count: 4096)
        while true {
            var n: UInt32 = 4096
            chunk.withUnsafeMutableBufferPointer { b in
                var list = AudioBufferList(mNumberBuffers: 1, mBuffers: AudioBuffer(mNumberChannels: 1, mDataByteSize: UInt32(b.count * 4), mData: b.baseAddress))
                XCTAssertEqual(ExtAudioFileRead(ext!, &n, &list), noErr)
            }
            if n == 0 { break }
            out += chunk[0..<Int(n)]
        }
        return out
    }

    /// Plays `url` through an output queue created with the file's own (compressed) description,
    /// fed packet by packet; returns what the speaker's monitor captured.
    func play(_ url: URL) throws -> [Float] {
        let server = try TestSound.server()
        var file: AudioFileID?
        XCTAssertEqual(AudioFileOpenURL(url as CFURL, .readPermission, 0, &file), noErr)
        let f = try XCTUnwrap(file)
        defer { AudioFileClose(f) }
        var format = AudioStreamBasicDescription()
        var size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
        XCTAssertEqual(AudioFileGetProperty(f, kAudioFilePropertyDataFormat, &size, &format), noErr)
        XCTAssertNotEqual(format.mFormatID, kAudioFormatLinearPCM)

        let feeder = FilePacketFeeder(file: f, packetsPerBuffer: 16)
        var queue: AudioQueueRef?
        XCTAssertEqual(AudioQueueNewOutput(&format, FilePacketFeeder.callback, feeder.context, nil, nil, 0, &queue), noErr)
        let q = try XCTUnwrap(queue)
        feeder.running.listen(to: q)
        // The magic cookie, as AQPlay copies it from the file.
        var cookieSize: UInt32 = 0
        if AudioFileGetPropertyInfo(f, kAudioFilePropertyMagicCookieData, &cookieSize, nil) == noErr, cookieSize > 0 {
            var cookie = [UInt8](repeating: 0, count: Int(cookieSize))
            XCTAssertEqual(AudioFileGetProperty(f, kAudioFilePropertyMagicCookieData, &cookieSize, &cookie), noErr)
            XCTAssertEqual(AudioQueueSetProperty(q, kAudioQueueProperty_MagicCookie, cookie, cookieSize), noErr)
        }
        var bound: UInt32 = 0
        size = 4
        XCTAssertEqual(AudioFileGetProperty(f, kAudioFilePropertyPacketSizeUpperBound, &size, &bound), noErr)
        let capture = try SignalCapture(server: server, device: "speaker.monitor")
        for _ in 0..<3 {
            var buffer: AudioQueueBufferRef?
            XCTAssertEqual(AudioQueueAllocateBufferWithPacketDescriptions(q, bound * 16, 16, &buffer), noErr)
            feeder.fill(q, buffer!)
        }
        XCTAssertEqual(AudioQueueStart(q, nil), noErr)
        XCTAssertEqual(feeder.finished.wait(timeout: .now() + 15), .success, "the file was not played through")
        XCTAssertEqual(feeder.running.stopped.wait(timeout: .now() + 10), .success, "IsRunning did not turn 0")
        AudioQueueDispose(q, true)
        try capture.waitFor(frames: capture.frameCount + 4800, timeout: 5)
        return capture.stop()[0]
    }

    func assertPlays(_ url: URL, file: StaticString = #filePath, line: UInt = #line) throws {
        let reference = try decode(url)
        let captured = try play(url)
        let start = try XCTUnwrap(SignalAnalysis.onset(captured, threshold: 0.02), "nothing was heard", file: file, line: line)
        let end = try XCTUnwrap(SignalAnalysis.offset(captured, threshold: 0.02), file: file, line: line)
        let heard = Array(captured[start...end])
        // The whole file, once, without gaps: the length is the reference's, give or take the edges.
        XCTAssertEqual(Double(heard.count), Double(reference.count), accuracy: 4800, "played length", file: file, line: line)
        XCTAssertLessThanOrEqual(SignalAnalysis.longestGap(heard[...], threshold: 0.002), TestSound.gapTolerance, "a gap longer than three server periods", file: file, line: line)
        let body = Array(reference[2400..<(reference.count - 2400)])
        let match = SignalAnalysis.align(body, in: captured, maxLag: captured.count - body.count)
        XCTAssertGreaterThanOrEqual(match.correlation, 0.95, "\(url.lastPathComponent): correlation with the decoded file", file: file, line: line)
        print("\(url.lastPathComponent): played \(heard.count) frames of \(reference.count), correlation \(match.correlation)")
    }

    func testOutputQueuePlaysAACFromM4AAndIMA4FromCAF() throws {
        let signal = SignalAnalysis.chirp(from: 200, to: 4000, sampleRate: 48000, seconds: 2, amplitude: 0.5)
        let aac = dir.appendingPathComponent("chirp.m4a")
        try write(signal, to: aac, type: kAudioFileM4AType, format: AudioStreamBasicDescription(
            mSampleRate: 48000, mFormatID: kAudioFormatMPEG4AAC, mFormatFlags: 0, mBytesPerPacket: 0, mFramesPerPacket: 0,
            mBytesPerFrame: 0, mChannelsPerFrame: 1, mBitsPerChannel: 0, mReserved: 0))
        try assertPlays(aac)
        let ima = dir.appendingPathComponent("chirp.caf")
        try write(signal, to: ima, type: kAudioFileCAFType, format: AudioStreamBasicDescription(
            mSampleRate: 48000, mFormatID: kAudioFormatAppleIMA4, mFormatFlags: 0, mBytesPerPacket: 34, mFramesPerPacket: 64,
            mBytesPerFrame: 0, mChannelsPerFrame: 1, mBitsPerChannel: 0, mReserved: 0))
        try assertPlays(ima)
    }
}

/// Writes what an input queue delivers into an AudioFile, as Apple's AQRecord does.
final class PacketRecorder: @unchecked Sendable {
    let file: AudioFileID
    let lock = NSLock()
    var packets: Int64 = 0
    var callbacks = 0
    var failures: [OSStatus] = []
    var keepGoing = true

    init(file: AudioFileID) { self.file = file }
    var context: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    static let callback: AudioQueueInputCallback = { userData, queue, buffer, _, count, descriptions in
        let me = Unmanaged<PacketRecorder>.fromOpaque(userData!).takeUnretainedValue()
        me.lock.lock()
        me.callbacks += 1
        if count > 0 {
            var n = count
            let status = AudioFileWritePackets(me.file, false, buffer.pointee.mAudioDataByteSize, descriptions, me.packets, &n, buffer.pointee.mAudioData)
            if status != noErr { me.failures.append(status) }
            me.packets += Int64(n)
        }
        let again = me.keepGoing
        me.lock.unlock()
        if again { AudioQueueEnqueueBuffer(queue, buffer, 0, nil) }
    }

    var callbackCount: Int {
        lock.lock()
        defer { lock.unlock() }
        return callbacks
    }
}

extension CompressedQueueTests {
    /// Records a chirp played into the microphone through an input queue of `format` into a file of
    /// `type`; returns the file.
    func record(_ format: AudioStreamBasicDescription, type: AudioFileTypeID, name: String, source: [Float]) throws -> URL {
        let server = try TestSound.server()
        let url = dir.appendingPathComponent(name)
        var queueFormat = format
        var queue: AudioQueueRef?
        var recorderFile: AudioFileID?
        // The queue completes the description (frames per packet…); the file is made from that.
        var placeholder: AudioQueueRef?
        XCTAssertEqual(AudioQueueNewInput(&queueFormat, { _, _, _, _, _, _ in }, nil, nil, nil, 0, &placeholder), noErr)
        var complete = AudioStreamBasicDescription()
        var size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
        XCTAssertEqual(AudioQueueGetProperty(placeholder!, kAudioQueueProperty_StreamDescription, &complete, &size), noErr)
        AudioQueueDispose(placeholder!, true)
        XCTAssertEqual(AudioFileCreateWithURL(url as CFURL, type, &complete, .eraseFile, &recorderFile), noErr)
        let recorder = PacketRecorder(file: try XCTUnwrap(recorderFile))
        XCTAssertEqual(AudioQueueNewInput(&queueFormat, PacketRecorder.callback, recorder.context, nil, nil, 0, &queue), noErr)
        let q = try XCTUnwrap(queue)
        copyCookie(from: q, to: recorder.file)
        var maxPacket: UInt32 = 0
        size = 4
        XCTAssertEqual(AudioQueueGetProperty(q, kAudioQueueProperty_MaximumOutputPacketSize, &maxPacket, &size), noErr)
        // Buffers of about 50 ms of packets.
        let packetsPerBuffer = max(UInt32(0.05 * complete.mSampleRate) / max(complete.mFramesPerPacket, 1), 1)
        for _ in 0..<4 {
            var buffer: AudioQueueBufferRef?
            XCTAssertEqual(AudioQueueAllocateBufferWithPacketDescriptions(q, maxPacket * packetsPerBuffer, packetsPerBuffer, &buffer), noErr)
            XCTAssertEqual(AudioQueueEnqueueBuffer(q, buffer!, 0, nil), noErr)
        }
        XCTAssertEqual(AudioQueueStart(q, nil), noErr)
        XCTAssertTrue(waitUntil(timeout: 5) { recorder.callbackCount >= 4 }, "no input callbacks")
        let player = try SignalPlayer(server: server, device: "micfeed", samples: source, sampleRate: 48000)
        player.waitUntilDone()
        let target = recorder.callbackCount + 12
        XCTAssertTrue(waitUntil(timeout: 5) { recorder.callbackCount >= target })
        recorder.lock.lock()
        recorder.keepGoing = false
        recorder.lock.unlock()
        XCTAssertEqual(AudioQueueStop(q, true), noErr)
        copyCookie(from: q, to: recorder.file)
        AudioQueueDispose(q, true)
        XCTAssertEqual(recorder.failures, [], "AudioFileWritePackets failed")
        XCTAssertGreaterThan(recorder.packets, 0)
        XCTAssertEqual(AudioFileClose(recorder.file), noErr)
        return url
    }

    /// The encoder's cookie into the file, as AQRecord does before and after recording.
    func copyCookie(from queue: AudioQueueRef, to file: AudioFileID) {
        var cookieSize: UInt32 = 0
        guard AudioQueueGetPropertySize(queue, kAudioQueueProperty_MagicCookie, &cookieSize) == noErr, cookieSize > 0 else { return }
        var cookie = [UInt8](repeating: 0, count: Int(cookieSize))
        XCTAssertEqual(AudioQueueGetProperty(queue, kAudioQueueProperty_MagicCookie, &cookie, &cookieSize), noErr)
        XCTAssertEqual(AudioFileSetProperty(file, kAudioFilePropertyMagicCookieData, cookieSize, cookie), noErr)
    }

    /// Decodes with ffmpeg (an independent decoder) to mono float at 48 kHz.
    func ffmpegDecode(_ url: URL) throws -> [Float] {
        let raw = dir.appendingPathComponent(url.lastPathComponent + ".f32")
        _ = try ChildProcess.run("/usr/bin/ffmpeg", ["-v", "error", "-y", "-i", url.path, "-ac", "1", "-ar", "48000", "-f", "f32le", raw.path],
                                 environment: ["PATH": "/usr/bin:/bin"], scratch: dir.appendingPathComponent("ff").path)
        let data = try Data(contentsOf: raw)
        return data.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
    }

    func testInputQueueRecordsIMA4IntoACAFThatFFprobeReads() throws {
        let source = SignalAnalysis.chirp(from: 200, to: 4000, sampleRate: 48000, seconds: 1.5, amplitude: 0.5)
        let url = try record(AudioStreamBasicDescription(
            mSampleRate: 48000, mFormatID: kAudioFormatAppleIMA4, mFormatFlags: 0, mBytesPerPacket: 0, mFramesPerPacket: 0,
            mBytesPerFrame: 0, mChannelsPerFrame: 1, mBitsPerChannel: 0, mReserved: 0), type: kAudioFileCAFType, name: "rec-ima4.caf", source: source)
        let probe = try ChildProcess.run("/usr/bin/ffprobe", ["-v", "error", "-show_entries", "stream=codec_name,sample_rate,channels", "-of", "default=noprint_wrappers=1", url.path],
                                         environment: ["PATH": "/usr/bin:/bin"], scratch: dir.appendingPathComponent("probe").path)
        XCTAssertTrue(probe.contains("codec_name=adpcm_ima_qt"), probe)
        XCTAssertTrue(probe.contains("sample_rate=48000"), probe)
        XCTAssertTrue(probe.contains("channels=1"), probe)
        let decoded = try ffmpegDecode(url)
        let body = Array(source[2400..<(source.count - 2400)])
        let match = SignalAnalysis.align(body, in: decoded, maxLag: decoded.count - body.count)
        XCTAssertGreaterThanOrEqual(match.correlation, 0.95, "the recording does not hold the chirp")
        print("IMA4 recording: \(decoded.count) frames, correlation \(match.correlation)")
    }

    func testInputQueueRecordsAACAndULaw() throws {
        let source = SignalAnalysis.chirp(from: 200, to: 3000, sampleRate: 48000, seconds: 1.5, amplitude: 0.5)
        for (id, type, name) in [(kAudioFormatMPEG4AAC, kAudioFileM4AType, "rec-aac.m4a"), (kAudioFormatULaw, kAudioFileWAVEType, "rec-ulaw.wav")] {
            let url = try record(AudioStreamBasicDescription(
                mSampleRate: 48000, mFormatID: id, mFormatFlags: 0, mBytesPerPacket: 0, mFramesPerPacket: 0,
                mBytesPerFrame: 0, mChannelsPerFrame: 1, mBitsPerChannel: 0, mReserved: 0), type: type, name: name, source: source)
            let decoded = try ffmpegDecode(url)
            let body = Array(source[2400..<(source.count - 2400)])
            let match = SignalAnalysis.align(body, in: decoded, maxLag: decoded.count - body.count)
            XCTAssertGreaterThanOrEqual(match.correlation, 0.95, "\(name) does not hold the chirp")
            print("\(name): \(decoded.count) frames, correlation \(match.correlation)")
        }
    }
}
