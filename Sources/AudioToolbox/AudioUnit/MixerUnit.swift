import AudioGraph
internal import CAudioQueueTypes
import CoreAudioTypes
import Synchronization

/// Apple's `AUMultiChannelMixer`: inputs (8 until `kAudioUnitProperty_ElementCount` says
/// otherwise, at most 64) each with a volume (0–1), a pan (−1–1) and an enable, summed into one
/// output with its own volume. Inputs without a source are silent.
///
/// Pan is a balance: centre passes each side at unity (a mono input plays at full level on both
/// sides), and pan p scales the left by min(1, 1 − p) and the right by min(1, 1 + p), so −1
/// silences the right side entirely. An input at another sample rate than the output's is
/// resampled (windowed sinc, ``PullResampler``); a mono input is spread to both sides, a stereo
/// one to a mono output is averaged, other channel counts map channel to channel.
final class MixerUnit: AudioUnitObject, @unchecked Sendable {
    static let maximumInputs = 64

    init(component: AudioComponentEntry) {
        var specs: [ParameterSpec] = []
        for e in 0..<UInt32(Self.maximumInputs) {
            specs += [
                ParameterSpec(id: kMultiChannelMixerParam_Volume, scope: kAudioUnitScope_Input, element: e, minimum: 0, maximum: 1, defaultValue: 1),
                ParameterSpec(id: kMultiChannelMixerParam_Enable, scope: kAudioUnitScope_Input, element: e, minimum: 0, maximum: 1, defaultValue: 1),
                ParameterSpec(id: kMultiChannelMixerParam_Pan, scope: kAudioUnitScope_Input, element: e, minimum: -1, maximum: 1, defaultValue: 0),
            ]
        }
        specs.append(ParameterSpec(id: kMultiChannelMixerParam_Volume, scope: kAudioUnitScope_Output, element: 0, minimum: 0, maximum: 1, defaultValue: 1))
        super.init(
            component: component, inputs: 8, outputs: 1, format: Self.canonical(sampleRate: 44100, channels: 2), parameters: specs,
            inputCapacity: Self.maximumInputs)
    }

    /// Parameters of inputs beyond the element count do not exist.
    override func parameterIndex(_ id: AudioUnitParameterID, scope: AudioUnitScope, element: AudioUnitElement) -> Result<Int, StatusError> {
        if scope == kAudioUnitScope_Input && Int(element) >= elementCount.load(ordering: .relaxed) { return .failure(StatusError(kAudioUnitErr_InvalidElement)) }
        return super.parameterIndex(id, scope: scope, element: element)
    }

    private var renderInputs = 0
    /// The input count, for parameter calls (which take no lock: any thread, the render thread too).
    private let elementCount = Atomic<Int>(8)

    /// Each input's resampler (nil at the output's rate), and the same unretained for rendering.
    private var resamplers: [PullResampler?] = []
    private var resamplerRefs = UnsafeMutablePointer<UInt>.allocate(capacity: 1)
    private var resampled = UnsafeMutablePointer<Float>.allocate(capacity: 1)
    private var resampledFrames = 0
    private var sliceLimit = 4096
    /// A resampled input's own sample time (its frames pulled so far), and the time stamp that
    /// carries it: the input's timeline is at its own rate, as Apple's converters pull (a tap on
    /// the source sees its frames follow each other).
    private var inputSampleTimes = UnsafeMutablePointer<Double>.allocate(capacity: 1)
    private let stamp = UnsafeMutablePointer<AudioTimeStamp>.allocate(capacity: 1)

    deinit {
        resamplerRefs.deallocate()
        resampled.deallocate()
        inputSampleTimes.deallocate()
        stamp.deallocate()
    }

    override func prepareRendering() -> OSStatus {
        let rate = outputFormats[0].mSampleRate
        renderInputs = inputFormats.count
        let frames = Int(maximumFramesPerSlice)
        resamplers = inputFormats.map { f in
            f.mSampleRate == rate ? nil
                : PullResampler(channels: Int(f.mChannelsPerFrame), inputRate: f.mSampleRate, outputRate: rate, maximumOutput: frames)
        }
        resamplerRefs.deallocate()
        resamplerRefs = .allocate(capacity: max(resamplers.count, 1))
        inputSampleTimes.deallocate()
        inputSampleTimes = .allocate(capacity: max(resamplers.count, 1))
        inputSampleTimes.initialize(repeating: 0, count: max(resamplers.count, 1))
        stamp.initialize(to: AudioTimeStamp())
        for (i, r) in resamplers.enumerated() {
            resamplerRefs[i] = r.map { UInt(bitPattern: Unmanaged.passUnretained($0).toOpaque()) } ?? 0
            // An input that is resampled is pulled for more (or fewer) frames than the output's.
            if let r { inputs[i].allocate(channels: Int(inputFormats[i].mChannelsPerFrame), frames: Int(Double(frames) * r.ratio) + 64) }
        }
        resampled.deallocate()
        resampledFrames = frames
        sliceLimit = frames
        resampled = .allocate(capacity: 16 * frames)
        resampled.initialize(repeating: 0, count: 16 * frames)
        return noErr
    }

    override func reset(scope: AudioUnitScope, element: AudioUnitElement) -> OSStatus {
        // On the render thread: the unretained references, as rendering uses.
        for i in 0..<renderInputs {
            if let raw = UnsafeRawPointer(bitPattern: resamplerRefs[i]) { Unmanaged<PullResampler>.fromOpaque(raw)._withUnsafeGuaranteedRef { $0.reset() } }
            inputSampleTimes[i] = 0
        }
        return noErr
    }

    override func propertyInfo(_ id: AudioUnitPropertyID, scope: AudioUnitScope, element: AudioUnitElement) -> (size: Int, writable: Bool)? {
        if id == kAudioUnitProperty_ElementCount && scope == kAudioUnitScope_Input { return (4, true) }
        return super.propertyInfo(id, scope: scope, element: element)
    }

    override func setProperty(_ id: AudioUnitPropertyID, scope: AudioUnitScope, element: AudioUnitElement, data: UnsafeRawPointer?, size: UInt32) -> OSStatus {
        guard id == kAudioUnitProperty_ElementCount else { return super.setProperty(id, scope: scope, element: element, data: data, size: size) }
        guard scope == kAudioUnitScope_Input else { return kAudioUnitErr_PropertyNotWritable }
        guard let n = PropertyData.load(UInt32.self, from: data, size: size) else { return kAudio_ParamError }
        guard !isInitialized else { return kAudioUnitErr_Initialized }
        guard n >= 1, n <= Self.maximumInputs else { return kAudioUnitErr_InvalidPropertyValue }
        var format = inputFormats.first ?? outputFormats[0]
        format.mSampleRate = outputFormats[0].mSampleRate
        while inputFormats.count < n { inputFormats.append(format) }
        while inputFormats.count > n {
            let input = inputs[inputFormats.count - 1]
            if let old = input.connected { retired.append(old) }
            input.connected = nil
            input.setSource(.none)
            inputFormats.removeLast()
        }
        elementCount.store(inputFormats.count, ordering: .relaxed)
        return noErr
    }

    /// A new output rate is taken by the inputs with nothing connected.
    override func setFormat(_ format: AudioStreamBasicDescription, scope: AudioUnitScope, element: AudioUnitElement) -> OSStatus {
        let status = super.setFormat(format, scope: scope, element: element)
        if status == noErr && scope == kAudioUnitScope_Output {
            for i in inputFormats.indices where !inputs[i].hasSource { inputFormats[i].mSampleRate = format.mSampleRate }
        }
        return status
    }

    /// Both sides may be any channel count up to 16, any rate (the inputs' must match the output's).
    override func accepts(_ format: AudioStreamBasicDescription, scope: AudioUnitScope, element: AudioUnitElement) -> Bool {
        Self.isCanonical(format)
    }

    override package func renderOutput(
        flags: UnsafeMutablePointer<AudioUnitRenderActionFlags>, time: UnsafePointer<AudioTimeStamp>, bus: UInt32, frames: Int,
        output: UnsafeMutablePointer<AudioBufferList>
    ) -> OSStatus {
        let out = UnsafeMutableAudioBufferListPointer(output)
        let outChannels = out.count
        for c in 0..<outChannels { out[c].mData!.assumingMemoryBound(to: Float.self).update(repeating: 0, count: frames) }
        var heard = false
        for i in 0..<renderInputs {
            let volume = parameters[i * 3], enabled = parameters[i * 3 + 1] >= 0.5, pan = parameters[i * 3 + 2]
            guard enabled else { continue }
            let input = UnsafeMutableAudioBufferListPointer(inputList(i))
            let resampler = UnsafeRawPointer(bitPattern: resamplerRefs[i]).map { Unmanaged<PullResampler>.fromOpaque($0) }
            if let resampler {
                let ok = resampler._withUnsafeGuaranteedRef { r -> Bool in
                    // In pulls no larger than a slice: the source renders at most that many frames.
                    var need = r.needed(forOutput: frames)
                    while need > 0 {
                        let n = min(need, self.sliceLimit)
                        stamp.pointee = time.pointee
                        stamp.pointee.mSampleTime = inputSampleTimes[i]
                        guard pull(input: i, flags: flags, time: stamp, frames: n) == noErr else { return false }
                        inputSampleTimes[i] += Double(n)
                        r.take({ UnsafePointer(input[$0].mData!.assumingMemoryBound(to: Float.self)) }, frames: n)
                        need -= n
                    }
                    r.produce({ self.resampled + $0 * self.resampledFrames }, frames: frames)
                    return true
                }
                guard ok else { continue }
            } else {
                guard pull(input: i, flags: flags, time: time, frames: frames) == noErr else { continue }
            }
            heard = true
            let inChannels = input.count
            let resampledBase = resampled, stride = resampledFrames
            func src(_ c: Int) -> UnsafeMutablePointer<Float> {
                resampler != nil ? resampledBase + c * stride : input[c].mData!.assumingMemoryBound(to: Float.self)
            }
            func dst(_ c: Int) -> UnsafeMutablePointer<Float> { out[c].mData!.assumingMemoryBound(to: Float.self) }
            if outChannels == 2 && inChannels <= 2 {
                let left = volume * min(1, 1 - pan), right = volume * min(1, 1 + pan)
                let l = src(0), r = src(inChannels == 2 ? 1 : 0), dl = dst(0), dr = dst(1)
                for k in 0..<frames {
                    dl[k] += l[k] * left
                    dr[k] += r[k] * right
                }
            } else if outChannels == 1 && inChannels == 2 {
                let l = src(0), r = src(1), d = dst(0), g = volume * 0.5
                for k in 0..<frames { d[k] += (l[k] + r[k]) * g }
            } else {
                for c in 0..<min(inChannels, outChannels) {
                    let s = src(c), d = dst(c)
                    for k in 0..<frames { d[k] += s[k] * volume }
                }
            }
        }
        let master = parameters[Self.maximumInputs * 3]
        if master != 1 {
            for c in 0..<outChannels {
                let d = out[c].mData!.assumingMemoryBound(to: Float.self)
                for k in 0..<frames { d[k] *= master }
            }
        }
        if !heard { flags.pointee.insert(.unitRenderAction_OutputIsSilence) }
        return noErr
    }
}
