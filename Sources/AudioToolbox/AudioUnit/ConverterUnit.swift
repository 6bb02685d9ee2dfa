import AudioGraph
internal import CAudioQueueTypes
import CoreAudioTypes
import Synchronization

/// Apple's `AUConverter`: one input, one output, each any linear PCM of 16- or 32-bit integers
/// or 32-bit floats, interleaved or not, native-endian, 1–16 channels, at any rate. It converts
/// the sample format and the interleaving, maps the channels and converts the rate (windowed
/// sinc, ``PullResampler``; the input is pulled for as many frames as the output slice needs,
/// in pulls of at most a slice, with sample times of its own).
///
/// Channels: `kAudioOutputUnitProperty_ChannelMap` (an `Int32` per output channel, the input
/// channel it takes or −1 for silence; any scope, element 0; may change while rendering). With
/// no map, mono is copied to both sides of stereo, stereo is averaged into mono, and other
/// counts take input channel n for output channel n, the rest silent (a map read back is that,
/// except that stereo to mono reads [0]). Floats beyond ±1 are clipped when written as
/// integers; there is no dither. `kAudioUnitProperty_SampleRateConverterComplexity` and
/// channel layouts are not implemented.
final class ConverterUnit: AudioUnitObject, @unchecked Sendable {
    static let maximumChannels = 16
    /// The channel map as set (control side); empty for the default mapping.
    private var channelMap: [Int32] = []
    /// What each output channel takes (the render thread's copy): an input channel, −1 for
    /// silence, −2 for the average of input channels 0 and 1.
    private let routes: UnsafeMutablePointer<Atomic<Int>>

    // The render state, made by prepareRendering.
    private var inShape: PCMShape?
    private var outShape: PCMShape?
    private var inChannels = 0
    private var outChannels = 0
    private var sliceLimit = 0
    private var resampler: PullResampler?
    private var resamplerRef: Unmanaged<PullResampler>?
    /// The input as pulled, in its own format, and the list pointed at it.
    private var pulled = UnsafeMutableRawPointer.allocate(byteCount: 4, alignment: 16)
    private let pulledList = AudioBufferList.allocate(maximumBuffers: ConverterUnit.maximumChannels)
    /// The input as float, interleaved then planar; the resampler's output (planar); the output
    /// as float interleaved. Planar runs are `sliceLimit` frames apart.
    private var interleavedIn = UnsafeMutablePointer<Float>.allocate(capacity: 1)
    private var planar = UnsafeMutablePointer<Float>.allocate(capacity: 1)
    private var resampled = UnsafeMutablePointer<Float>.allocate(capacity: 1)
    private var mapped = UnsafeMutablePointer<Float>.allocate(capacity: 1)
    /// The time stamp handed to the input when resampling: the input's own sample time.
    private let stamp = UnsafeMutablePointer<AudioTimeStamp>.allocate(capacity: 1)
    private var inputSampleTime = 0.0

    init(component: AudioComponentEntry) {
        routes = .allocate(capacity: Self.maximumChannels)
        for i in 0..<Self.maximumChannels { (routes + i).initialize(to: Atomic(i)) }
        stamp.initialize(to: AudioTimeStamp())
        super.init(component: component, inputs: 1, outputs: 1, format: Self.canonical(sampleRate: 44100, channels: 2), parameters: [])
    }

    deinit {
        routes.deinitialize(count: Self.maximumChannels)
        routes.deallocate()
        pulled.deallocate()
        pulledList.unsafeMutablePointer.deallocate()
        interleavedIn.deallocate()
        planar.deallocate()
        resampled.deallocate()
        mapped.deallocate()
        stamp.deallocate()
    }

    // MARK: Formats and properties (control threads)

    override func accepts(_ f: AudioStreamBasicDescription, scope: AudioUnitScope, element: AudioUnitElement) -> Bool {
        PCMShape(f) != nil
    }

    /// Sets ``routes`` from the map and the two formats' channel counts.
    private func updateRoutes() {
        let i = Int(inputFormats[0].mChannelsPerFrame), o = Int(outputFormats[0].mChannelsPerFrame)
        for k in 0..<Self.maximumChannels {
            let route: Int
            if !channelMap.isEmpty {
                let m = k < channelMap.count ? Int(channelMap[k]) : -1
                route = m >= 0 && m < i ? m : -1
            } else if i == 1 && o == 2 {
                route = 0
            } else if i == 2 && o == 1 {
                route = -2
            } else {
                route = k < i ? k : -1
            }
            routes[k].store(route, ordering: .relaxed)
        }
    }

    /// The map in force, as `kAudioOutputUnitProperty_ChannelMap` reads.
    private var effectiveMap: [Int32] {
        if !channelMap.isEmpty { return channelMap }
        let i = Int(inputFormats[0].mChannelsPerFrame), o = Int(outputFormats[0].mChannelsPerFrame)
        if i == 1 && o == 2 { return [0, 0] }
        return (0..<o).map { k in Int32(k < i ? k : -1) }
    }

    override func propertyInfo(_ id: AudioUnitPropertyID, scope: AudioUnitScope, element: AudioUnitElement) -> (size: Int, writable: Bool)? {
        guard id == kAudioOutputUnitProperty_ChannelMap else { return super.propertyInfo(id, scope: scope, element: element) }
        return element == 0 && scope <= kAudioUnitScope_Output ? (4 * effectiveMap.count, true) : nil
    }

    override func getProperty(_ id: AudioUnitPropertyID, scope: AudioUnitScope, element: AudioUnitElement) -> Result<[UInt8], StatusError> {
        guard id == kAudioOutputUnitProperty_ChannelMap else { return super.getProperty(id, scope: scope, element: element) }
        guard element == 0 else { return .failure(StatusError(kAudioUnitErr_InvalidElement)) }
        return .success(effectiveMap.flatMap { bytes(of: $0) })
    }

    /// A map of no entries goes back to the default mapping.
    override func setProperty(_ id: AudioUnitPropertyID, scope: AudioUnitScope, element: AudioUnitElement, data: UnsafeRawPointer?, size: UInt32) -> OSStatus {
        guard id == kAudioOutputUnitProperty_ChannelMap else { return super.setProperty(id, scope: scope, element: element, data: data, size: size) }
        guard scope <= kAudioUnitScope_Output else { return kAudioUnitErr_InvalidScope }
        guard element == 0 else { return kAudioUnitErr_InvalidElement }
        guard size % 4 == 0, size / 4 <= Self.maximumChannels, size == 0 || data != nil else { return kAudio_ParamError }
        let map = (0..<Int(size / 4)).map { data!.loadUnaligned(fromByteOffset: 4 * $0, as: Int32.self) }
        guard map.allSatisfy({ $0 >= -1 && $0 < Self.maximumChannels }) else { return kAudioUnitErr_InvalidPropertyValue }
        channelMap = map
        updateRoutes()
        return noErr
    }

    override func setFormat(_ format: AudioStreamBasicDescription, scope: AudioUnitScope, element: AudioUnitElement) -> OSStatus {
        let status = super.setFormat(format, scope: scope, element: element)
        if status == noErr { updateRoutes() }
        return status
    }

    override func prepareRendering() -> OSStatus {
        guard let i = PCMShape(inputFormats[0]), let o = PCMShape(outputFormats[0]) else { return kAudioUnitErr_FormatNotSupported }
        inShape = i
        outShape = o
        inChannels = i.channels
        outChannels = o.channels
        let frames = Int(maximumFramesPerSlice)
        sliceLimit = frames
        let inRate = inputFormats[0].mSampleRate, outRate = outputFormats[0].mSampleRate
        resampler = inRate == outRate ? nil : PullResampler(channels: inChannels, inputRate: inRate, outputRate: outRate, maximumOutput: frames)
        resamplerRef = resampler.map { .passUnretained($0) }
        pulled.deallocate()
        pulled = .allocate(byteCount: frames * inChannels * 4, alignment: 16)
        pulled.initializeMemory(as: UInt8.self, repeating: 0, count: frames * inChannels * 4)
        func floats(_ count: Int) -> UnsafeMutablePointer<Float> {
            let p = UnsafeMutablePointer<Float>.allocate(capacity: count)
            p.initialize(repeating: 0, count: count)
            return p
        }
        interleavedIn.deallocate()
        interleavedIn = floats(frames * inChannels)
        planar.deallocate()
        planar = floats(frames * inChannels)
        resampled.deallocate()
        resampled = floats(frames * inChannels)
        mapped.deallocate()
        mapped = floats(frames * outChannels)
        inputSampleTime = 0
        updateRoutes()
        return noErr
    }

    override func reset(scope: AudioUnitScope, element: AudioUnitElement) -> OSStatus {
        // On the render thread: the unretained reference, as rendering uses.
        resamplerRef?._withUnsafeGuaranteedRef { $0.reset() }
        inputSampleTime = 0
        return noErr
    }

    // MARK: Rendering (the render thread)

    override package func renderOutput(
        flags: UnsafeMutablePointer<AudioUnitRenderActionFlags>, time: UnsafePointer<AudioTimeStamp>, bus: UInt32, frames: Int,
        output: UnsafeMutablePointer<AudioBufferList>
    ) -> OSStatus {
        guard let inShape, let outShape else { return kAudioUnitErr_Uninitialized }
        let source: UnsafeMutablePointer<Float>
        if let resamplerRef {
            let status = resamplerRef._withUnsafeGuaranteedRef { r -> OSStatus in
                // In pulls no larger than a slice: the source renders at most that many frames.
                var need = r.needed(forOutput: frames)
                while need > 0 {
                    let n = min(need, sliceLimit)
                    stamp.pointee = time.pointee
                    stamp.pointee.mSampleTime = inputSampleTime
                    let status = pullPlanar(inShape, flags: flags, time: stamp, frames: n)
                    guard status == noErr else { return status }
                    inputSampleTime += Double(n)
                    let base = planar, stride = sliceLimit
                    r.take({ UnsafePointer(base + $0 * stride) }, frames: n)
                    need -= n
                }
                let base = resampled, stride = sliceLimit
                r.produce({ base + $0 * stride }, frames: frames)
                return noErr
            }
            guard status == noErr else { return status }
            source = resampled
        } else {
            let status = pullPlanar(inShape, flags: flags, time: time, frames: frames)
            guard status == noErr else { return status }
            source = planar
        }
        let oc = outChannels, stride = sliceLimit
        for k in 0..<oc {
            let route = routes[k].load(ordering: .relaxed)
            switch route {
            case 0...:
                let s = source + route * stride
                for i in 0..<frames { mapped[i * oc + k] = s[i] }
            case -2:
                let l = source, r = source + stride
                for i in 0..<frames { mapped[i * oc + k] = (l[i] + r[i]) * 0.5 }
            default:
                for i in 0..<frames { mapped[i * oc + k] = 0 }
            }
        }
        outShape.write(from: mapped, frames: frames, to: output)
        return noErr
    }

    /// Pulls `frames` input frames in the input's format and leaves them as float in ``planar``.
    private func pullPlanar(
        _ shape: PCMShape, flags: UnsafeMutablePointer<AudioUnitRenderActionFlags>, time: UnsafePointer<AudioTimeStamp>, frames: Int
    ) -> OSStatus {
        shape.prepare(pulledList, storage: pulled, frames: frames)
        let status = pull(input: 0, flags: flags, time: time, frames: frames, into: pulledList.unsafeMutablePointer)
        guard status == noErr else { return status }
        shape.read(pulledList, frames: frames, into: interleavedIn)
        let ic = inChannels, stride = sliceLimit
        for c in 0..<ic {
            let p = planar + c * stride
            for i in 0..<frames { p[i] = interleavedIn[i * ic + c] }
        }
        return noErr
    }
}
