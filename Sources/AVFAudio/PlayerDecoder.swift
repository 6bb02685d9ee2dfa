internal import AudioCodecs
import AudioToolbox
import Foundation

/// Decodes an ``AVAudioPlayer``'s file for its queue: reading, looping, and rate change through the
/// time-pitch processor, one queue buffer at a time, with the next buffer decoded ahead.
///
/// The decoded-ahead buffer is the hand-over: when a queue buffer comes back, the refill copies
/// the buffer decoded last time into it, so the queue gets it back at once, and only then decodes
/// the next one (a loop point's seek and decoder restart happen there, while four buffers play).
///
/// Threads: everything here is under ``lock``, the player's decode lock, held while decoding (on
/// the queue's callback thread, or on the caller's when playback starts or seeks). The player's
/// state lock, which every property read takes, is never held while decoding; where both are
/// held, the decode lock is taken first.
final class PlayerDecoder {
    let lock = NSLock()
    private let file: ExtAudioFileRef
    private let channels: Int
    private let sampleRate: Double
    private let length: Int64
    /// Frames per queue buffer: what one ``produce(into:speed:)`` gives at most.
    let bufferFrames: Int
    /// Next file frame to decode, and loops still to play at the end.
    private var readPosition: Int64 = 0
    private var loopsLeft = 0
    private var stretcher: TimePitchProcessor?
    private var inputEnded = false
    private var scratch: [Float]
    /// The decoded-ahead buffer, its frames (0 at the end of the sound) and the speed it was made at.
    private let ahead: UnsafeMutablePointer<Float>
    private var aheadFrames: Int?
    private var aheadSpeed = 1.0
    /// The first decoding error since the last ``reset(to:loops:keepStretcher:)``.
    private(set) var error: OSStatus = noErr
    /// An error to report, taken once by ``takeFailure()``.
    private var failure: (any Error)?

    init(file: ExtAudioFileRef, channels: Int, sampleRate: Double, length: Int64, bufferFrames: Int) {
        self.file = file
        self.channels = channels
        self.sampleRate = sampleRate
        self.length = length
        self.bufferFrames = bufferFrames
        scratch = Array(repeating: 0, count: 2048 * channels)
        ahead = .allocate(capacity: bufferFrames * channels)
        ahead.initialize(repeating: 0, count: bufferFrames * channels)
    }

    deinit { ahead.deallocate() }

    /// Starts decoding at file frame `start`, with `loops` loops to play (negative: for ever).
    func reset(to start: Int64, loops: Int, keepStretcher: Bool) {
        _ = ExtAudioFileSeek(file, min(max(start, 0), max(length - 1, 0)))
        readPosition = start
        loopsLeft = loops
        error = noErr
        failure = nil
        inputEnded = false
        stretcher?.reset()
        if !keepStretcher { stretcher = nil }
        aheadFrames = nil
    }

    /// Fills `out` (room for ``bufferFrames``) with the next audio: the buffer decoded ahead when
    /// there is one, else decoded now at `speed`. Returns the frames (0 at the end of the sound)
    /// and the speed they were made at.
    func produce(into out: UnsafeMutablePointer<Float>, speed: Double) -> (frames: Int, speed: Double) {
        if let frames = aheadFrames {
            aheadFrames = nil
            out.update(from: ahead, count: frames * channels)
            return (frames, aheadSpeed)
        }
        return (decode(into: out, speed: speed), speed)
    }

    /// Decodes the next buffer ahead, at `speed`, unless one is waiting already.
    func decodeAhead(speed: Double) {
        guard aheadFrames == nil else { return }
        aheadFrames = decode(into: ahead, speed: speed)
        aheadSpeed = speed
    }

    /// The decoding error to tell the delegate about, once.
    func takeFailure() -> (any Error)? {
        defer { failure = nil }
        return failure
    }

    private func decode(into out: UnsafeMutablePointer<Float>, speed: Double) -> Int {
        if speed != 1 || stretcher != nil { return stretch(into: out, speed: speed) }
        return read(into: out, frames: bufferFrames)
    }

    /// Reads up to `frames` frames of the file at `readPosition`, looping as asked.
    private func read(into out: UnsafeMutablePointer<Float>, frames: Int) -> Int {
        var got = 0
        while got < frames {
            var n = UInt32(frames - got)
            var list = AudioBufferList(
                mNumberBuffers: 1,
                mBuffers: AudioBuffer(mNumberChannels: UInt32(channels), mDataByteSize: n * UInt32(4 * channels), mData: UnsafeMutableRawPointer(out + got * channels)))
            let status = ExtAudioFileRead(file, &n, &list)
            if status != noErr {
                if error == noErr { error = status }
                failure = statusError(status, "the audio could not be decoded at \(String(format: "%.3f", Double(readPosition) / sampleRate)) s: \(ExtAudioFileLastFailureReason())")
                loopsLeft = 0
                return got
            }
            if n == 0 {
                guard loopsLeft != 0, readPosition > 0 else { return got }
                if loopsLeft > 0 { loopsLeft -= 1 }
                _ = ExtAudioFileSeek(file, 0)
                readPosition = 0
                continue
            }
            got += Int(n)
            readPosition += Int64(n)
        }
        return got
    }

    /// Fills `out` with time-stretched audio.
    private func stretch(into out: UnsafeMutablePointer<Float>, speed: Double) -> Int {
        if stretcher == nil { stretcher = try? TimePitchProcessor(sampleRate: Int(sampleRate), channels: channels) }
        guard let stretcher else { return read(into: out, frames: bufferFrames) }
        stretcher.speed = Float(speed)
        var produced = 0
        while produced < bufferFrames {
            let n = stretcher.read(into: out + produced * channels, maxFrames: bufferFrames - produced)
            produced += n
            if n > 0 { continue }
            if inputEnded { break }
            let got = scratch.withUnsafeMutableBufferPointer { read(into: $0.baseAddress!, frames: 2048) }
            if got > 0 {
                scratch.withUnsafeBufferPointer { stretcher.write($0.baseAddress!, frames: got) }
            } else {
                stretcher.flush()
                inputEnded = true
            }
        }
        return produced
    }
}
