import AudioToolbox
package import Foundation

extension VoiceUnitCall {
    /// Starts the unit, lets the input run half a second, plays `near` into the private server's
    /// `micfeed` (the microphone), with the far end (what the unit plays) from the same moment
    /// when `withFarEnd`; records until the talker is done and a third of a second more; stops.
    /// Returns what the unit gave, lined up with `clean` (the talker's words, found in it), or
    /// throws when the words are not there.
    public func talk(_ near: [Float], clean: [Float], server: PrivatePulseServer, withFarEnd: Bool) throws -> [Float] {
        try start()
        defer { stop() }
        guard waitUntil(timeout: 5, { self.recordedFrames >= Int(self.rate / 2) }) else { throw Self.failure("no input") }
        if withFarEnd { playFarEnd() }
        let player = try SignalPlayer(server: server, device: "micfeed", samples: near, sampleRate: Int(rate))
        player.waitUntilDone()
        let end = recordedFrames + Int(rate / 3)
        guard waitUntil(timeout: 5, { self.recordedFrames >= end }) else { throw Self.failure("the input stopped") }
        let recording = self.recording
        // The words' seconds 1 to 3 found in the recording: where the talker began.
        let second = Int(rate)
        let found = SignalAnalysis.align(Array(clean[second..<(3 * second)]), in: recording, maxLag: max(0, recording.count - 2 * second))
        guard found.correlation > 0.5 else {
            let level = SignalAnalysis.rmsDB(recording[...]), played = SignalAnalysis.rmsDB(near[...])
            throw Self.failure(String(format: "the talker's words are not in the recording (correlation %.3f; the recording at %.1f dBFS, what was played at %.1f)",
                                      found.correlation, level, played))
        }
        let start = found.lag - second
        guard start >= 0 else { throw Self.failure("the words began before the recording") }
        lastSlips = Self.slips(of: clean, in: recording, at: start, second: second)
        var aligned = Array(recording[start..<min(recording.count, start + clean.count)])
        aligned += [Float](repeating: 0, count: clean.count - aligned.count)
        return aligned
    }

    /// Each second of `clean` (where it speaks) looked for within 10 ms of where it is in
    /// `recording` when the whole starts at `start`: the seconds found elsewhere (see ``lastSlips``).
    static func slips(of clean: [Float], in recording: [Float], at start: Int, second: Int) -> [String] {
        let reach = second / 100
        var found: [String] = []
        var k = 0
        while (k + 1) * second <= clean.count {
            defer { k += 1 }
            let piece = Array(clean[(k * second)..<((k + 1) * second)]), at = start + k * second
            guard SignalAnalysis.rmsDB(piece[...]) > -50, let best = SignalAnalysis.locate(piece, in: recording, around: at, within: reach) else { continue }
            let shift = best.position - at
            if best.correlation > 0.5 && abs(shift) > 1 { found.append(String(format: "second %d: %+d (%.2f)", k, shift, best.correlation)) }
        }
        return found
    }

    /// Issue 14's lines 2–4 through a voice-processing unit on the private server, with the
    /// acoustic path loaded (`AcousticPath`): the set-up's near talker (and far end, and noise)
    /// played into `micfeed` as a microphone hears them. The same figures as
    /// ``VoiceSignals/figures(_:rate:in:)`` computes offline (the echo's loss and CPU are left
    /// at 0: ``echoLoss()`` measures those).
    package static func serverFigures(server: PrivatePulseServer, in dir: URL) throws -> VoiceSignals.Figures {
        let rate = 48000
        var talker = try VoiceSignals.speech(VoiceSignals.nearText, voice: VoiceSignals.nearVoice, sampleRate: rate, in: dir)
        talker = Array(talker.prefix(rate * 8))
        let far = VoiceSignals.scaled(
            try VoiceSignals.speech(VoiceSignals.farText, voice: VoiceSignals.farVoice, sampleRate: rate, in: dir), toSpeechRMS: -20, sampleRate: rate)
        let near = VoiceSignals.scaled(talker, toSpeechRMS: -26, sampleRate: rate)
        let talking = VoiceSignals.speaking(near, sampleRate: rate)
        let call = try VoiceUnitCall(far: far, rate: Double(rate), recordSeconds: 14)
        var figures = VoiceSignals.Figures()
        /// A talk, its failure saying which.
        func stage(_ what: String, _ talk: () throws -> [Float]) throws -> [Float] {
            do { return try talk() } catch let failure as PrivatePulseServer.Failure {
                throw PrivatePulseServer.Failure(description: "\(what): \(failure.description)")
            }
        }

        // 2. Double talk: the near talker alone, then over the far end's echo (gain control off,
        // as offline: it would even the two out).
        call.set(kAUVoiceIOProperty_VoiceProcessingEnableAGC, false)
        let alone = try stage("the near talker alone") { try call.talk(near, clean: near, server: server, withFarEnd: false) }
        let both = try stage("double talk") { try call.talk(near, clean: near, server: server, withFarEnd: true) }
        figures.slips += call.lastSlips.map { "double talk, " + $0 }
        figures.doubleTalkCorrelation = VoiceSignals.correlation(both, near, where: talking, sampleRate: rate, from: 200)
        figures.doubleTalkLevel =
            VoiceSignals.speechRMS(both, where: talking, sampleRate: rate, from: 200) - VoiceSignals.speechRMS(alone, where: talking, sampleRate: rate, from: 200)

        // 3. Steady noise at −35 dBFS with the words: between them, and the words kept.
        let noise = VoiceSignals.noise(count: near.count, dBFS: -35, seed: 2)
        let noisy = zip(near, noise).map { $0 + $1 }
        let denoised = try stage("words under noise") { try call.talk(noisy, clean: near, server: server, withFarEnd: false) }
        figures.slips += call.lastSlips.map { "words under noise, " + $0 }
        let gaps = VoiceSignals.silent(near, sampleRate: rate)
        figures.noiseReduction =
            VoiceSignals.speechRMS(noisy, where: gaps, sampleRate: rate, from: 100) - VoiceSignals.speechRMS(denoised, where: gaps, sampleRate: rate, from: 100)
        figures.wordsKept = VoiceSignals.correlation(denoised, near, where: talking, sampleRate: rate, from: 100)

        // 4. Gain control on: a quiet talker after 3 s, and a loud one's peaks.
        call.set(kAUVoiceIOProperty_VoiceProcessingEnableAGC, true)
        let quietTalker = VoiceSignals.scaled(talker, toSpeechRMS: -40, sampleRate: rate)
        let quiet = try stage("a quiet talker") { try call.talk(quietTalker, clean: quietTalker, server: server, withFarEnd: false) }
        figures.quietTalkerLevel = VoiceSignals.speechRMS(quiet, where: talking, sampleRate: rate, from: 300)
        let peak = talker.map { abs($0) }.max() ?? 1
        let loudTalker = talker.map { $0 / peak * 0.5 }  // peaks at −6 dBFS
        let loud = try stage("a loud talker") { try call.talk(loudTalker, clean: loudTalker, server: server, withFarEnd: false) }
        figures.loudTalkerPeak = 20 * log10(Double(loud.map { abs($0) }.max() ?? 0) + 1e-12)
        return figures
    }
}
