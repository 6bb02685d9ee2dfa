import AudioCodecs
import AudioGraph
internal import CAudioQueueTypes
import CoreAudioTypes
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A unit that reads its input at another pace than it writes its output: it pulls as many input
/// frames as its processing needs into its own buffers (up to four slices' worth a pull).
class RateUnit: EffectUnit, @unchecked Sendable {
    static let maximumRatio = 4.0
    /// The most input frames a pull takes.
    var pulledCapacity: Int { Int(Double(maximumFramesPerSlice) * Self.maximumRatio) + 64 }

    override func prepareRendering() -> OSStatus {
        inputs[0].allocate(channels: Int(inputFormats[0].mChannelsPerFrame), frames: pulledCapacity)
        return super.prepareRendering()
    }

    /// Pulls `frames` input frames into the input's own buffers (at most ``pulledCapacity``).
    final func pullInput(flags: UnsafeMutablePointer<AudioUnitRenderActionFlags>, time: UnsafePointer<AudioTimeStamp>, frames: Int) -> UnsafeMutableAudioBufferListPointer? {
        guard pull(input: 0, flags: flags, time: time, frames: min(frames, pulledCapacity)) == noErr else { return nil }
        return UnsafeMutableAudioBufferListPointer(inputList(0))
    }
}

/// Apple's `AUVarispeed`: plays faster or slower with the pitch following, as a tape does:
/// playback rate 0.25–4 (1) or the same in cents, −2400–2400 (0); the last one set wins. A
/// windowed-sinc resampler (``PullResampler``).
final class VarispeedUnit: RateUnit, @unchecked Sendable {
    private var resampler: PullResampler?
    /// The same, unretained, for the render thread.
    private var resamplerRef: Unmanaged<PullResampler>?
    /// The rate in force, and the two parameters as last seen (whichever changes sets the rate).
    private var rate = 1.0
    private var seenRate: Float = 1, seenCents: Float = 0

    init(component: AudioComponentEntry) {
        super.init(component: component, parameters: [
            ParameterSpec(id: kVarispeedParam_PlaybackRate, minimum: 0.25, maximum: 4, defaultValue: 1),
            ParameterSpec(id: kVarispeedParam_PlaybackCents, minimum: -2400, maximum: 2400, defaultValue: 0),
        ])
    }

    override func prepare(channels: Int, sampleRate: Double) {
        let r = PullResampler(
            channels: channels, inputRate: sampleRate, outputRate: sampleRate, maximumOutput: Int(maximumFramesPerSlice), maximumRatio: Self.maximumRatio)
        resampler = r
        resamplerRef = .passUnretained(r)
        rate = 1
        seenRate = 1
        seenCents = 0
    }

    override func reset(scope: AudioUnitScope, element: AudioUnitElement) -> OSStatus {
        // On the render thread: the unretained reference, as rendering uses.
        resamplerRef?._withUnsafeGuaranteedRef { $0.reset() }
        return noErr
    }

    /// The rate in force: whichever of rate and cents changed last.
    private func currentRate() -> Double {
        let r = parameters[0], cents = parameters[1]
        if cents != seenCents {
            seenCents = cents
            rate = pow(2, Double(cents) / 1200)
        }
        if r != seenRate {
            seenRate = r
            rate = Double(r)
        }
        return rate
    }

    override package func renderOutput(
        flags: UnsafeMutablePointer<AudioUnitRenderActionFlags>, time: UnsafePointer<AudioTimeStamp>, bus: UInt32, frames: Int,
        output: UnsafeMutablePointer<AudioBufferList>
    ) -> OSStatus {
        guard let resamplerRef else { return kAudioUnitErr_Uninitialized }
        let out = UnsafeMutableAudioBufferListPointer(output)
        if bypassFlag.load(ordering: .relaxed) {
            return pull(input: 0, flags: flags, time: time, frames: frames, into: output)
        }
        return resamplerRef._withUnsafeGuaranteedRef { resampler in render(resampler, flags: flags, time: time, frames: frames, out: out) }
    }

    private func render(
        _ resampler: PullResampler, flags: UnsafeMutablePointer<AudioUnitRenderActionFlags>, time: UnsafePointer<AudioTimeStamp>, frames: Int,
        out: UnsafeMutableAudioBufferListPointer
    ) -> OSStatus {
        resampler.setRatio(currentRate())
        // In pulls no larger than a slice: what feeds this unit renders at most that many frames.
        var need = resampler.needed(forOutput: frames)
        while need > 0 {
            let n = min(need, Int(maximumFramesPerSlice))
            guard let input = pullInput(flags: flags, time: time, frames: n) else { return kAudioUnitErr_NoConnection }
            resampler.take({ UnsafePointer(input[min($0, input.count - 1)].mData!.assumingMemoryBound(to: Float.self)) }, frames: n)
            need -= n
        }
        resampler.produce({ out[min($0, out.count - 1)].mData!.assumingMemoryBound(to: Float.self) }, frames: frames)
        return noErr
    }
}

/// Apple's `AUNewTimePitch`: rate (1/32–32, 1) changes the duration and keeps the pitch, pitch
/// (−2400–2400 cents, 0) changes the pitch and keeps the duration. The duration is stretched by
/// libsonic (the queue's and the player's time-pitch processor) to rate ÷ pitch, then the
/// stretched audio is resampled by the pitch factor (``PullResampler``), which raises the pitch and
/// brings the duration to the rate. (libsonic 0.2's own pitch setting, fed 512-frame slices,
/// was measured to leave a 440 Hz tone at 440 Hz.)
/// Overlap (3–32) and peak locking are accepted and have no effect on this algorithm. Rates and
/// pitch factors beyond 1/4–4 are held at those limits.
final class TimePitchUnit: RateUnit, @unchecked Sendable {
    private var processor: TimePitchProcessor?
    private var resampler: PullResampler?
    /// The same two, unretained, for the render thread.
    private var processorRef: Unmanaged<TimePitchProcessor>?
    private var resamplerRef: Unmanaged<PullResampler>?
    private var interleaved = UnsafeMutablePointer<Float>.allocate(capacity: 1)
    private var planar = UnsafeMutablePointer<Float>.allocate(capacity: 1)
    private var scratchFrames = 0
    private var channels = 2

    init(component: AudioComponentEntry) {
        super.init(component: component, parameters: [
            ParameterSpec(id: kNewTimePitchParam_Rate, minimum: 1.0 / 32, maximum: 32, defaultValue: 1),
            ParameterSpec(id: kNewTimePitchParam_Pitch, minimum: -2400, maximum: 2400, defaultValue: 0),
            ParameterSpec(id: kNewTimePitchParam_Overlap, minimum: 3, maximum: 32, defaultValue: 8),
            ParameterSpec(id: kNewTimePitchParam_EnablePeakLocking, minimum: 0, maximum: 1, defaultValue: 1),
        ])
    }

    deinit {
        interleaved.deallocate()
        planar.deallocate()
    }

    override func prepare(channels: Int, sampleRate: Double) {
        self.channels = min(channels, 8)
        let slice = Int(maximumFramesPerSlice)
        processor = try? TimePitchProcessor(sampleRate: Int(sampleRate), channels: self.channels)
        resampler = PullResampler(
            channels: self.channels, inputRate: sampleRate, outputRate: sampleRate, maximumOutput: slice, maximumRatio: Self.maximumRatio)
        processorRef = processor.map { .passUnretained($0) }
        resamplerRef = resampler.map { .passUnretained($0) }
        scratchFrames = pulledCapacity
        interleaved.deallocate()
        interleaved = .allocate(capacity: scratchFrames * self.channels)
        interleaved.initialize(repeating: 0, count: scratchFrames * self.channels)
        planar.deallocate()
        planar = .allocate(capacity: scratchFrames * self.channels)
        planar.initialize(repeating: 0, count: scratchFrames * self.channels)
        // libsonic grows its buffers as it needs: grow them now to the most rendering can need.
        // Rendering keeps to what `reserve` asks: it writes at most a slice, only once it has
        // read the output empty, at a speed of rate ÷ pitch, each within 1/4…4, and it flushes
        // (a reset) at speed 1 with the output empty.
        processor?.reserve(maximumWrite: slice, minimumSpeed: Float(1 / (Self.limit * Self.limit)))
        // The first shifted slice through the resampler instantiates generic metadata (its SIMD
        // vectors) in a debug build, which allocates: make one here, of silence, and forget it.
        if let resampler {
            resampler.setRatio(2)
            let input = interleaved, output = planar, stride = scratchFrames
            resampler.take({ UnsafePointer(input + $0 * stride) }, frames: min(stride, resampler.needed(forOutput: slice)))
            resampler.produce({ output + $0 * stride }, frames: slice)
            resampler.reset()
            resampler.setRatio(1)
        }
    }

    /// Rates and pitch factors are held within 1/`limit`…`limit`.
    private static let limit = 4.0

    /// Empties the processor and the resampler (on the render thread, before a slice).
    override func reset(scope: AudioUnitScope, element: AudioUnitElement) -> OSStatus {
        guard let processorRef, let resamplerRef else { return noErr }
        processorRef._withUnsafeGuaranteedRef { p in
            // Emptied, then flushed at speed 1 (a copy: no pitch search, and no more room than
            // `reserve` made); what comes out is dropped.
            while p.read(into: interleaved, maxFrames: scratchFrames) > 0 {}
            p.speed = 1
            p.flush()
            while p.read(into: interleaved, maxFrames: scratchFrames) > 0 {}
        }
        resamplerRef._withUnsafeGuaranteedRef { $0.reset() }
        return noErr
    }

    override var latency: Double { 0.02 }

    override package func renderOutput(
        flags: UnsafeMutablePointer<AudioUnitRenderActionFlags>, time: UnsafePointer<AudioTimeStamp>, bus: UInt32, frames: Int,
        output: UnsafeMutablePointer<AudioBufferList>
    ) -> OSStatus {
        guard let processorRef, let resamplerRef else { return kAudioUnitErr_Uninitialized }
        if bypassFlag.load(ordering: .relaxed) { return pull(input: 0, flags: flags, time: time, frames: frames, into: output) }
        return processorRef._withUnsafeGuaranteedRef { p in
            resamplerRef._withUnsafeGuaranteedRef { resampler in render(p, resampler, flags: flags, time: time, frames: frames, output: output) }
        }
    }

    private func render(
        _ p: TimePitchProcessor, _ resampler: PullResampler, flags: UnsafeMutablePointer<AudioUnitRenderActionFlags>,
        time: UnsafePointer<AudioTimeStamp>, frames: Int, output: UnsafeMutablePointer<AudioBufferList>
    ) -> OSStatus {
        let limit = Self.limit
        let rate = min(max(Double(parameters[0]), 1 / limit), limit), pitch = min(max(pow(2, Double(parameters[1]) / 1200), 1 / limit), limit)
        p.speed = Float(rate / pitch)
        let shifting = abs(pitch - 1) > 1e-6
        if shifting { resampler.setRatio(pitch) }
        // Stretched frames wanted: the output's, or what the resampler needs for it.
        let wanted = min(scratchFrames, shifting ? resampler.needed(forOutput: frames) : frames)
        let sc = channels
        var got = 0
        var pulls = 0
        while got < wanted {
            got += p.read(into: interleaved + got * sc, maxFrames: wanted - got)
            guard got < wanted, pulls < 64 else { break }
            pulls += 1
            // Feed the processor about what the rest needs at this speed.
            // In pulls no larger than a slice: what feeds this unit renders at most that many frames.
            let need = min(Int(maximumFramesPerSlice), max(64, Int(Double(wanted - got) * rate / pitch) + 64))
            guard let input = pullInput(flags: flags, time: time, frames: need) else { return kAudioUnitErr_NoConnection }
            // The processor takes interleaved frames; the planar scratch holds them meanwhile.
            for c in 0..<sc {
                let s = input[min(c, input.count - 1)].mData!.assumingMemoryBound(to: Float.self)
                for i in 0..<need { planar[i * sc + c] = s[i] }
            }
            p.write(planar, frames: need)
        }
        if got < wanted { (interleaved + got * sc).update(repeating: 0, count: (wanted - got) * sc) }
        let out = UnsafeMutableAudioBufferListPointer(output)
        if shifting {
            for c in 0..<sc {
                for i in 0..<wanted { planar[c * scratchFrames + i] = interleaved[i * sc + c] }
            }
            let base = planar, stride = scratchFrames
            resampler.take({ UnsafePointer(base + $0 * stride) }, frames: wanted)
            resampler.produce({ out[min($0, out.count - 1)].mData!.assumingMemoryBound(to: Float.self) }, frames: frames)
            for c in sc..<max(out.count, sc) { out[c].mData!.assumingMemoryBound(to: Float.self).update(from: out[sc - 1].mData!.assumingMemoryBound(to: Float.self), count: frames) }
        } else {
            for c in 0..<out.count {
                let d = out[c].mData!.assumingMemoryBound(to: Float.self)
                let from = min(c, sc - 1)
                for i in 0..<frames { d[i] = interleaved[i * sc + from] }
            }
        }
        return noErr
    }
}
