import CSpeexDSP
import CWebRTCAudioProcessing

/// Echo cancellation, noise suppression and gain control for a call's microphone, with what the
/// call plays as the echo's reference: mono, in frames of 10 ms, by one of two libraries
/// (libwebrtc-audio-processing or libspeexdsp; DESIGN.md has them chosen by measurement).
///
/// ``process(near:far:)`` takes a microphone frame and the far-end frame that was playing as it
/// was captured (the caller lines them up by its streams' latencies); the echo may reach the
/// microphone up to ``echoTail`` later than its far-end frame (the room, or an acoustic path the
/// caller cannot see), never earlier.
///
/// Memory is made in `init`; ``process(near:far:)`` converts through buffers made there, so a
/// real-time thread may call it (what the libraries do inside is theirs: the allocation test
/// holds them to it).
package final class VoiceProcessor: @unchecked Sendable {
    package enum Library: String, CaseIterable, Sendable {
        case webrtc, speex
    }

    /// Which stages run.
    package struct Stages: Equatable, Sendable {
        package var echoCancellation: Bool
        package var noiseSuppression: Bool
        package var gainControl: Bool

        package init(echoCancellation: Bool = true, noiseSuppression: Bool = true, gainControl: Bool = true) {
            self.echoCancellation = echoCancellation
            self.noiseSuppression = noiseSuppression
            self.gainControl = gainControl
        }
    }

    package let library: Library
    package let sampleRate: Int
    /// Samples in a frame: 10 ms.
    package let frameLength: Int
    /// How much later than its far-end frame an echo may arrive and still be cancelled: speex's
    /// filter length. webrtc reaches about as far through its own delay estimate and extended
    /// filter (128 ms), which this does not set.
    package static let echoTail = 0.2
    /// speex's gain control level (a loudness in 16-bit units, not an RMS) that brings a talker
    /// to about −20 dBFS of speech RMS, a call's microphone level: measured on the benchmark's
    /// voices (`openavf-bench --only voice`: a talker at −40 dBFS comes out at −22 dBFS).
    private static let speexAGCLevel: Float = 12000

    private let webrtc: OpaquePointer?
    private let echo: OpaquePointer?
    private let preprocess: OpaquePointer?
    private let nearShorts: UnsafeMutablePointer<Int16>
    private let farShorts: UnsafeMutablePointer<Int16>
    private let outShorts: UnsafeMutablePointer<Int16>
    /// A far-end frame of silence, for webrtc when nothing plays (its delay estimate needs the
    /// far stream to run on).
    private let zeros: UnsafeMutablePointer<Float>

    /// A processor at `sampleRate`: 8, 16, 32 or 48 kHz, the rates webrtc runs at (speex would
    /// take others; one list keeps the libraries interchangeable). Nil for any other rate, or
    /// when the library cannot make its state.
    package init?(library: Library, sampleRate: Int, stages: Stages = Stages()) {
        guard [8000, 16000, 32000, 48000].contains(sampleRate) else { return nil }
        self.library = library
        self.sampleRate = sampleRate
        frameLength = sampleRate / 100
        nearShorts = .allocate(capacity: frameLength)
        farShorts = .allocate(capacity: frameLength)
        outShorts = .allocate(capacity: frameLength)
        zeros = .allocate(capacity: frameLength)
        zeros.initialize(repeating: 0, count: frameLength)
        switch library {
        case .webrtc:
            webrtc = oa_webrtc_new(
                Int32(sampleRate), stages.echoCancellation ? 1 : 0, stages.noiseSuppression ? 1 : 0, stages.gainControl ? 1 : 0)
            echo = nil
            preprocess = nil
            // A failed init still runs deinit (every property is set), which frees what was made.
            guard webrtc != nil else { return nil }
        case .speex:
            webrtc = nil
            let tail = Int32(Double(sampleRate) * Self.echoTail)
            echo = stages.echoCancellation ? speex_echo_state_init(Int32(frameLength), tail) : nil
            preprocess = speex_preprocess_state_init(Int32(frameLength), Int32(sampleRate))
            guard let preprocess, echo != nil || !stages.echoCancellation else { return nil }
            var rate = Int32(sampleRate)
            if let echo {
                speex_echo_ctl(echo, SPEEX_ECHO_SET_SAMPLING_RATE, &rate)
                // The preprocessor suppresses the residual echo the filter leaves.
                speex_preprocess_ctl(preprocess, SPEEX_PREPROCESS_SET_ECHO_STATE, UnsafeMutableRawPointer(echo))
            }
            var on: Int32 = stages.noiseSuppression ? 1 : 0
            speex_preprocess_ctl(preprocess, SPEEX_PREPROCESS_SET_DENOISE, &on)
            // Noise down by up to 30 dB (the library's default is 15).
            var suppression: Int32 = -30
            speex_preprocess_ctl(preprocess, SPEEX_PREPROCESS_SET_NOISE_SUPPRESS, &suppression)
            var agc: Int32 = stages.gainControl ? 1 : 0
            speex_preprocess_ctl(preprocess, SPEEX_PREPROCESS_SET_AGC, &agc)
            var level = Self.speexAGCLevel
            speex_preprocess_ctl(preprocess, SPEEX_PREPROCESS_SET_AGC_LEVEL, &level)
        }
    }

    deinit {
        if let webrtc { oa_webrtc_free(webrtc) }
        if let echo { speex_echo_state_destroy(echo) }
        if let preprocess { speex_preprocess_state_destroy(preprocess) }
        nearShorts.deallocate()
        farShorts.deallocate()
        outShorts.deallocate()
        zeros.deallocate()
    }

    /// Processes a frame of the microphone in place, `far` the far end's frame that was playing
    /// as it was captured (nil: nothing was).
    package func process(near: UnsafeMutablePointer<Float>, far: UnsafePointer<Float>?) {
        let n = frameLength
        if let webrtc {
            _ = oa_webrtc_far(webrtc, far ?? UnsafePointer(zeros))
            _ = oa_webrtc_near(webrtc, near, 0)
            return
        }
        guard let preprocess else { return }
        Self.shorts(near, into: nearShorts, count: n)
        if let echo {
            if let far { Self.shorts(far, into: farShorts, count: n) } else { farShorts.update(repeating: 0, count: n) }
            speex_echo_cancellation(echo, nearShorts, farShorts, outShorts)
            speex_preprocess_run(preprocess, outShorts)
            for i in 0..<n { near[i] = Float(outShorts[i]) / 32768 }
        } else {
            speex_preprocess_run(preprocess, nearShorts)
            for i in 0..<n { near[i] = Float(nearShorts[i]) / 32768 }
        }
    }

    private static func shorts(_ samples: UnsafePointer<Float>, into out: UnsafeMutablePointer<Int16>, count: Int) {
        for i in 0..<count { out[i] = Int16(max(-32768, min(32767, (samples[i] * 32768).rounded()))) }
    }
}
