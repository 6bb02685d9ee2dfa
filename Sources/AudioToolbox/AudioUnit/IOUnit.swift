import AudioGraph
import AudioHAL
internal import CAudioQueueTypes
import CoreAudio
import CoreAudioTypes
import Dispatch
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Apple's I/O units: `RemoteIO` (iOS), `HALOutput`, `DefaultOutput` and `SystemOutput` (macOS).
///
/// Element 0 plays: its input scope is the client's format (what the render callback or the
/// connected unit produces), its output scope the device's. Element 1 records (RemoteIO and
/// HALOutput, once `kAudioOutputUnitProperty_EnableIO` turns it on): its input scope is the
/// device's format, its output scope the client's, read by `AudioUnitRender` on bus 1.
///
/// Each direction is a stream of the sound server opened at the client's rate and channel count
/// (the server resamples and remaps; the unit converts only the sample type and interleaving) on
/// a real-time thread of its own, so a callback that blocks stalls this unit only.
///
/// The I/O buffer is the audio session's preferred I/O buffer duration when one is set, else the
/// session's default `ioBufferDuration` (20 ms), at most `kAudioUnitProperty_MaximumFramesPerSlice`.
/// The server holds one buffer of output when the app asked for its latency, two otherwise, and
/// then asks for a whole buffer at a time (half the wake-ups of its own choice). Render callbacks
/// are called when the server asks, for what it asks, in slices of at most the I/O buffer: as
/// Apple says, `inNumberFrames` varies. At a preferred 5 ms PulseAudio asks for 1.25 ms at a time;
/// rendering a whole buffer ahead of that measured 1.75× a raw libpulse client's round trip in
/// play-through, rendering what is asked 1.0× (openavf-bench's `duplex`).
///
/// The input callback (`kAudioOutputUnitProperty_SetInputCallback`) is called on the recording
/// stream's thread as each I/O buffer of input arrives; `AudioUnitRender` on bus 1 reads the
/// oldest input not yet read, from whichever thread asks (ask from one thread: the input
/// callback's, or the render callback's for play-through). A play-through reader that finds too
/// little gets silence and the input a request later from then on (the two streams' cycles do
/// not line up: the input settles at the least latency their timing allows, as a raw client's
/// does); a reader stalled beyond three buffers finds recent input, not old.
///
/// `SystemOutput` plays where `DefaultOutput` does: the server has one default output, and the
/// alert sounds' place is the server's sample cache (`AudioServicesPlaySystemSound`).
final class IOUnit: AudioUnitObject, @unchecked Sendable {
    let hasInput: Bool
    /// The voice-processing unit's switches while it processes; nil for the other I/O units,
    /// and for RemoteIO unless an engine turned its processing on (``setVoiceProcessing(_:)``).
    private var voice: VoiceSettings? { voiceOn ? voiceSettings : nil }
    private var voiceOn: Bool
    private let voiceSettings: VoiceSettings?
    /// A voice-processing unit's component: processing cannot be turned off.
    private let voiceComponent: Bool
    /// The running voice-processing link (made at start), and the same unretained for the
    /// streams' threads.
    private var voiceLink: VoiceLink?
    fileprivate var voiceLinkRef: Unmanaged<VoiceLink>?
    /// Streams a callback stopping its own unit left to a helper to close: a start waits for
    /// them, so that their threads are gone before the unit's link and rings are replaced.
    private let closing = DispatchGroup()
    private var outputEnabled = true
    private var inputEnabled = false
    /// The device chosen through `kAudioOutputUnitProperty_CurrentDevice` (server names), or nil.
    private var outputDevice: String?
    private var inputDevice: String?
    private let inputCallback = UnitInput()
    private var player: Player?
    private var recorder: Recorder?
    private var playStream: (any HALStream)?
    private var recordStream: (any HALStream)?
    private let running = Atomic<Bool>(false)
    /// Captured audio, float interleaved at the client's input rate and channels. Written by the
    /// recording thread, read by bus 1's renders.
    private var inputRing: SampleRing?
    /// The same ring unretained, and the client's input shape, for the render threads.
    private var inputRingRef: Unmanaged<SampleRing>?
    private var recordShape: PCMShape?
    private var inputScratch = UnsafeMutablePointer<Float>.allocate(capacity: 1)
    /// What a read from another thread drops of the ring's backlog; set at start, then the
    /// reading thread's.
    private var backlog = InputBacklog(sliceFrames: 1, channels: 1, capacity: 1, windowFrames: 1)
    /// The input's recent peak as that thread read it, falling about 9 dB a second at 10 ms reads.
    private var recentPeak: Float = 0
    /// Set by ``discardInputBacklog()``; the next read drops all but what it takes.
    private let discardBacklog = Atomic<Bool>(false)
    private var sliceFrames = 512

    init(component: AudioComponentEntry, hasInput: Bool, voiceProcessing: Bool = false) {
        self.hasInput = hasInput
        voiceOn = voiceProcessing
        voiceComponent = voiceProcessing
        voiceSettings = hasInput ? VoiceSettings() : nil
        let output = (try? AudioSystem.current.backend().outputDevice(named: nil)) ?? nil
        let input = hasInput ? (try? AudioSystem.current.backend().inputDevice(named: nil)) ?? nil : nil
        let outRate = output?.sampleRate ?? 48000, inRate = input?.sampleRate ?? outRate
        let hardwareOut = Self.canonical(sampleRate: outRate, channels: output?.channels ?? 2)
        let hardwareIn = Self.canonical(sampleRate: inRate, channels: input?.channels ?? 1)
        super.init(component: component, inputs: hasInput ? 2 : 1, outputs: hasInput ? 2 : 1, format: hardwareOut, parameters: [])
        inputFormats[0] = Self.canonical(sampleRate: outRate, channels: 2)
        if hasInput {
            inputFormats[1] = hardwareIn
            outputFormats[1] = hardwareIn
        }
    }

    deinit {
        inputScratch.deallocate()
        voiceSettings?.events.close()
        voiceSettings?.ducking.close()
    }

    // MARK: Formats

    /// Client sides take any packed linear PCM of 16- or 32-bit integers or 32-bit floats,
    /// interleaved or not, native-endian, 1–16 channels; the device sides are the server's.
    override func accepts(_ f: AudioStreamBasicDescription, scope: AudioUnitScope, element: AudioUnitElement) -> Bool {
        PCMShape(f) != nil
    }

    override func formatWritable(scope: AudioUnitScope, element: AudioUnitElement) -> Bool {
        (scope == kAudioUnitScope_Input && element == 0) || (scope == kAudioUnitScope_Output && element == 1)
    }

    override func setFormat(_ format: AudioStreamBasicDescription, scope: AudioUnitScope, element: AudioUnitElement) -> OSStatus {
        guard formatWritable(scope: scope, element: element) else { return kAudioUnitErr_PropertyNotWritable }
        guard !running.load(ordering: .relaxed) else { return kAudioUnitErr_Initialized }
        guard accepts(format, scope: scope, element: element) else { return kAudioUnitErr_FormatNotSupported }
        if scope == kAudioUnitScope_Input { inputFormats[0] = format } else { outputFormats[1] = format }
        return noErr
    }

    // MARK: Properties

    override func propertyInfo(_ id: AudioUnitPropertyID, scope: AudioUnitScope, element: AudioUnitElement) -> (size: Int, writable: Bool)? {
        switch id {
        case kAudioOutputUnitProperty_EnableIO, kAudioOutputUnitProperty_HasIO:
            guard element == 0 || (element == 1 && hasInput) else { return nil }
            return (4, id == kAudioOutputUnitProperty_EnableIO && hasInput)
        case kAudioOutputUnitProperty_SetInputCallback:
            return hasInput ? (MemoryLayout<AURenderCallbackStruct>.size, true) : nil
        case kAudioOutputUnitProperty_CurrentDevice:
            return (4, true)
        case kAudioOutputUnitProperty_IsRunning:
            return (4, false)
        case kAUVoiceIOProperty_BypassVoiceProcessing, kAUVoiceIOProperty_VoiceProcessingEnableAGC, kAUVoiceIOProperty_MuteOutput:
            return voice == nil ? nil : (4, true)
        case kAUVoiceIOProperty_MutedSpeechActivityEventListener:
            return voice == nil ? nil : (MemoryLayout<AUVoiceIOMutedSpeechActivityEventListener>.size, true)
        case kAUVoiceIOProperty_OtherAudioDuckingConfiguration:
            return voice == nil ? nil : (MemoryLayout<AUVoiceIOOtherAudioDuckingConfiguration>.size, true)
        case kAudioUnitProperty_MakeConnection, kAudioUnitProperty_SetRenderCallback:
            return scope == kAudioUnitScope_Input && element == 0 ? super.propertyInfo(id, scope: scope, element: element) : nil
        default:
            return super.propertyInfo(id, scope: scope, element: element)
        }
    }

    override func getProperty(_ id: AudioUnitPropertyID, scope: AudioUnitScope, element: AudioUnitElement) -> Result<[UInt8], StatusError> {
        switch id {
        case kAudioOutputUnitProperty_EnableIO, kAudioOutputUnitProperty_HasIO:
            guard element == 0 || (element == 1 && hasInput) else { return .failure(StatusError(kAudioUnitErr_InvalidElement)) }
            let on = id == kAudioOutputUnitProperty_HasIO ? true : element == 0 ? outputEnabled : inputEnabled
            return .success(bytes(of: UInt32(on ? 1 : 0)))
        case kAudioOutputUnitProperty_IsRunning:
            return .success(bytes(of: UInt32(running.load(ordering: .relaxed) ? 1 : 0)))
        case kAUVoiceIOProperty_BypassVoiceProcessing, kAUVoiceIOProperty_VoiceProcessingEnableAGC, kAUVoiceIOProperty_MuteOutput:
            guard let voice else { return .failure(StatusError(kAudioUnitErr_InvalidProperty)) }
            return .success(bytes(of: UInt32(voice.value(id) ? 1 : 0)))
        case kAUVoiceIOProperty_OtherAudioDuckingConfiguration:
            guard let voice else { return .failure(StatusError(kAudioUnitErr_InvalidProperty)) }
            return .success(bytes(of: voice.ducking.configuration))
        case kAUVoiceIOProperty_MutedSpeechActivityEventListener:
            // Apple's is write-only.
            return .failure(StatusError(voice == nil ? kAudioUnitErr_InvalidProperty : kAudioUnitErr_PropertyNotInUse))
        case kAudioOutputUnitProperty_CurrentDevice:
            let input = hasInput && !outputEnabled && inputEnabled
            return .success(bytes(of: Self.deviceID(named: input ? inputDevice : outputDevice, input: input)))
        case kAudioOutputUnitProperty_SetInputCallback:
            return .failure(StatusError(kAudioUnitErr_InvalidProperty))
        case kAudioUnitProperty_Latency:
            // What the server holds ahead of the device, as Apple reports the device's latency.
            return .success(bytes(of: playStream?.grantedBufferDuration ?? 0))
        default:
            return super.getProperty(id, scope: scope, element: element)
        }
    }

    override func setProperty(_ id: AudioUnitPropertyID, scope: AudioUnitScope, element: AudioUnitElement, data: UnsafeRawPointer?, size: UInt32) -> OSStatus {
        switch id {
        case kAudioOutputUnitProperty_EnableIO:
            guard element == 0 || (element == 1 && hasInput) else { return kAudioUnitErr_InvalidElement }
            guard hasInput else { return kAudioUnitErr_PropertyNotWritable }
            guard let v = PropertyData.load(UInt32.self, from: data, size: size) else { return kAudio_ParamError }
            guard !isInitialized else { return kAudioUnitErr_Initialized }
            if element == 0 { outputEnabled = v != 0 } else { inputEnabled = v != 0 }
            return noErr
        case kAudioOutputUnitProperty_SetInputCallback:
            guard hasInput else { return kAudioUnitErr_InvalidProperty }
            guard let cb = PropertyData.load(AURenderCallbackStruct.self, from: data, size: size) else { return kAudio_ParamError }
            inputCallback.setSource(cb.inputProc.map { .callback($0, cb.inputProcRefCon) } ?? .none)
            return noErr
        case kAUVoiceIOProperty_BypassVoiceProcessing, kAUVoiceIOProperty_VoiceProcessingEnableAGC, kAUVoiceIOProperty_MuteOutput:
            guard let voice else { return kAudioUnitErr_InvalidProperty }
            guard let v = PropertyData.load(UInt32.self, from: data, size: size) else { return kAudio_ParamError }
            voice.set(id, v != 0)
            return noErr
        case kAUVoiceIOProperty_OtherAudioDuckingConfiguration:
            guard let voice else { return kAudioUnitErr_InvalidProperty }
            guard let data, size == UInt32(MemoryLayout<AUVoiceIOOtherAudioDuckingConfiguration>.size) else { return kAudio_ParamError }
            // Read as raw values first: a level that is none of Apple's is refused, not loaded.
            let advanced = data.load(fromByteOffset: MemoryLayout<AUVoiceIOOtherAudioDuckingConfiguration>.offset(of: \.mEnableAdvancedDucking)!, as: UInt8.self)
            let rawLevel = data.load(fromByteOffset: MemoryLayout<AUVoiceIOOtherAudioDuckingConfiguration>.offset(of: \.mDuckingLevel)!, as: UInt8.self)
            guard advanced <= 1, Int(rawLevel) < 4 else { return kAudioUnitErr_InvalidPropertyValue }
            voice.ducking.configuration = data.load(as: AUVoiceIOOtherAudioDuckingConfiguration.self)
            return noErr
        case kAUVoiceIOProperty_MutedSpeechActivityEventListener:
            guard let voice else { return kAudioUnitErr_InvalidProperty }
            guard let data else {
                voice.events.setListener(nil)
                return noErr
            }
            guard size >= UInt32(MemoryLayout<AUVoiceIOMutedSpeechActivityEventListener>.size) else { return kAudio_ParamError }
            voice.events.setListener(data.load(as: AUVoiceIOMutedSpeechActivityEventListener.self))
            return noErr
        case kAudioOutputUnitProperty_CurrentDevice:
            guard let id = PropertyData.load(UInt32.self, from: data, size: size) else { return kAudio_ParamError }
            guard !running.load(ordering: .relaxed) else { return kAudioUnitErr_CannotDoInCurrentContext }
            guard let (name, isOutput) = Self.device(id) else { return kAudioOutputUnitErr_InvalidDevice }
            if isOutput { outputDevice = name } else { inputDevice = name }
            return noErr
        case kAudioUnitProperty_MakeConnection, kAudioUnitProperty_SetRenderCallback:
            guard scope == kAudioUnitScope_Input, element == 0 else { return kAudioUnitErr_InvalidElement }
            return super.setProperty(id, scope: scope, element: element, data: data, size: size)
        default:
            return super.setProperty(id, scope: scope, element: element, data: data, size: size)
        }
    }

    /// The CoreAudio ID of the device of that server name (the default when nil), 0 when none.
    static func deviceID(named name: String?, input: Bool) -> AudioObjectID {
        var address = AudioObjectPropertyAddress(
            mSelector: input ? kAudioHardwarePropertyDefaultInputDevice : kAudioHardwarePropertyDefaultOutputDevice,
            mScope: kAudioObjectPropertyScopeGlobal, mElement: kAudioObjectPropertyElementMain)
        var id = AudioObjectID(0)
        var size = UInt32(4)
        if let name {
            // The UID goes in as the qualifier, the device comes out (Apple's current form).
            let uid: CFString = name as CFString
            address.mSelector = kAudioHardwarePropertyTranslateUIDToDevice
            _ = withUnsafePointer(to: uid) { AudioObjectGetPropertyData(AudioObjectID(kAudioObjectSystemObject), &address, UInt32(MemoryLayout<CFString>.size), $0, &size, &id) }
            return id
        }
        _ = AudioObjectGetPropertyData(AudioObjectID(kAudioObjectSystemObject), &address, 0, nil, &size, &id)
        return id
    }

    /// The server name of CoreAudio device `id`, and whether it plays; nil for no such device.
    static func device(_ id: AudioObjectID) -> (String, Bool)? {
        var address = AudioObjectPropertyAddress(
            mSelector: kAudioDevicePropertyDeviceUID, mScope: kAudioObjectPropertyScopeGlobal, mElement: kAudioObjectPropertyElementMain)
        var uid: Unmanaged<CFString>?
        var size = UInt32(MemoryLayout<Unmanaged<CFString>?>.size)
        guard AudioObjectGetPropertyData(id, &address, 0, nil, &size, &uid) == noErr, let name = uid?.takeRetainedValue() as String? else { return nil }
        address = AudioObjectPropertyAddress(
            mSelector: kAudioDevicePropertyStreams, mScope: kAudioObjectPropertyScopeOutput, mElement: kAudioObjectPropertyElementMain)
        var streamsSize = UInt32(0)
        _ = AudioObjectGetPropertyDataSize(id, &address, 0, nil, &streamsSize)
        return (name, streamsSize > 0)
    }

    override package func setVoiceProcessing(_ on: Bool) -> OSStatus {
        lock.withLock { _ in
            guard voiceSettings != nil, !voiceComponent || on else { return kAudioUnitErr_InvalidProperty }
            guard !isInitialized else { return kAudioUnitErr_Initialized }
            voiceOn = on
            return noErr
        }
    }

    override package var isVoiceProcessing: Bool { lock.withLock { _ in voiceOn } }

    // MARK: Running

    override func initialize() -> OSStatus {
        guard outputEnabled || inputEnabled else { return kAudioUnitErr_FailedInitialization }
        let rate = outputEnabled ? inputFormats[0].mSampleRate : outputFormats[1].mSampleRate
        let duration = AudioSessionHost.preferredIOBufferDuration ?? defaultIOBufferDuration
        sliceFrames = max(16, min(Int(maximumFramesPerSlice), Int((duration * rate).rounded())))
        return super.initialize()
    }

    func start() -> OSStatus {
        closing.wait()
        return lock.withLock { _ in
            guard isInitialized else { return kAudioUnitErr_Uninitialized }
            guard !running.load(ordering: .relaxed) else { return noErr }
            // No stream runs now: the last run's link goes (a unit whose processing was turned
            // off since must not find it).
            voiceLinkRef = nil
            voiceLink = nil
            do throws(HALError) {
                let backend = try AudioSystem.current.backend()
                if let voice {
                    // Made first: each stream's thread finds it from its first callback.
                    guard
                        let link = VoiceLink(
                            settings: voice, outputRate: outputEnabled ? inputFormats[0].mSampleRate : outputFormats[1].mSampleRate,
                            inputRate: outputFormats[1].mSampleRate, inputChannels: Int(outputFormats[1].mChannelsPerFrame))
                    else { return kAudioUnitErr_FailedInitialization }
                    voiceLink = link
                    voiceLinkRef = .passUnretained(link)
                }
                if inputEnabled {
                    let f = outputFormats[1]
                    let channels = Int(f.mChannelsPerFrame)
                    // Room for a burst after a stall of either stream's thread (a quarter second,
                    // at least eight slices): the reader takes it back rather than losing it.
                    let ringFrames = max(sliceFrames * 8, Int(f.mSampleRate / 4))
                    let ring = SampleRing(capacity: ringFrames * channels)
                    backlog = InputBacklog(
                        sliceFrames: sliceFrames, channels: channels, capacity: ringFrames * channels, windowFrames: Int(f.mSampleRate))
                    inputRing = ring
                    inputRingRef = .passUnretained(ring)
                    recordShape = PCMShape(f)
                    inputScratch.deallocate()
                    inputScratch = .allocate(capacity: sliceFrames * channels)
                    inputScratch.initialize(repeating: 0, count: sliceFrames * channels)
                    let recorder = Recorder(unit: self, channels: channels, slice: sliceFrames, rate: f.mSampleRate)
                    let use = AudioSessionHost.streamUse(output: false)
                    // A voice-processing unit records mono at its processing rate.
                    let format = voiceLink.map { HALStreamFormat(sampleRate: Double($0.rate), channels: 1) } ?? HALStreamFormat(sampleRate: f.mSampleRate, channels: channels)
                    var request = HALStreamRequest(
                        format: format, bufferDuration: Double(sliceFrames) / f.mSampleRate,
                        name: "AudioUnit input", purpose: use?.purpose, startCorked: false, device: inputDevice ?? AudioSessionHost.routing.input)
                    // One canceller, not two: a voice-processing unit cancels in-process.
                    request.echoCancellation = voice == nil && (use?.echoCancellation ?? false)
                    request.ownThread = true
                    self.recorder = recorder
                    recordStream = try backend.openInput(request, sink: recorder)
                }
                if outputEnabled {
                    let f = inputFormats[0]
                    // An app that asked the session for an I/O buffer wants its latency: one slice
                    // at the server. Otherwise three slices in all, asked for a slice at a time
                    // (below). PulseAudio gives its sink what two requests leave, halved: half a
                    // slice; the stream holds the other two and a half (at least two, as a HAL
                    // device double-buffers: one was measured to let playback run dry on a loaded
                    // machine). With two slices in all the sink got nothing and ran at its minimum
                    // latency, waking every half millisecond (0.5 ms configured on the test
                    // server's sink, an ALSA card's minimum too).
                    let latencyAsked = AudioSessionHost.preferredIOBufferDuration != nil
                    let aheadSlices = latencyAsked ? 1 : 3
                    let player = Player(unit: self, format: f, slice: sliceFrames)
                    let use = AudioSessionHost.streamUse(output: true)
                    var purpose = use?.purpose ?? .media
                    // A voice-processing unit ducks others while it runs; its own playback is not
                    // theirs: mixable, as a session's that ducks others is (the ducking leaves it).
                    if voice != nil && (purpose == .media || purpose == .movie) { purpose = .mixable }
                    var request = HALStreamRequest(
                        format: HALStreamFormat(sampleRate: f.mSampleRate, channels: Int(f.mChannelsPerFrame)),
                        bufferDuration: Double(aheadSlices * sliceFrames) / f.mSampleRate, name: "AudioUnit output", purpose: purpose,
                        startCorked: false, device: outputDevice ?? AudioSessionHost.routing.output)
                    request.echoCancellation = voice == nil && (use?.echoCancellation ?? false)
                    request.ownThread = true
                    // The link lines the far end up with the microphone by frame counts: a
                    // playback underrun must not move what plays after it.
                    request.keepsTimeline = voice != nil
                    // Unasked, the server asks for a whole slice at a time: a wake-up a slice.
                    if !latencyAsked { request.requestDuration = Double(sliceFrames) / f.mSampleRate }
                    self.player = player
                    playStream = try backend.openOutput(request, source: player)
                }
            } catch {
                closeStreams()
                return kAudioUnitErr_FailedInitialization
            }
            running.store(true, ordering: .releasing)
            // Other clients' playback ducked while the call runs (its configuration says how).
            voice?.ducking.start()
            return noErr
        }
    }

    func stop() -> OSStatus {
        let onRenderThread = (player?.isRenderThread ?? false) || (recorder?.isRenderThread ?? false)
        let streams: [any HALStream] = lock.withLock { _ in
            guard running.exchange(false, ordering: .acquiringAndReleasing) else { return [] }
            // Ducking ends (its thread asks the server; this only wakes it).
            voice?.ducking.stop()
            defer {
                playStream = nil
                recordStream = nil
            }
            return [playStream, recordStream].compactMap { $0 }
        }
        if onRenderThread {
            // A callback stopping its own unit: the thread cannot end itself; a helper closes it.
            // The link stays until the next start or uninitialize, which wait for the helper.
            let boxed = StreamsToClose(streams: streams)
            closing.enter()
            DispatchQueue.global().async { [closing] in
                for s in boxed.streams { s.close() }
                closing.leave()
            }
        } else {
            for s in streams { s.close() }
            lock.withLock { _ in
                if !running.load(ordering: .relaxed) {
                    voiceLinkRef = nil
                    voiceLink = nil
                }
            }
        }
        return noErr
    }

    /// What moved the running voice link's canceller reference (``voiceReferenceEvents(_:)``).
    fileprivate var voiceReferenceEvents: [String]? { lock.withLock { _ in voiceLink?.referenceEvents } }

    private func closeStreams() {
        voiceSettings?.ducking.stop()
        playStream?.close()
        recordStream?.close()
        playStream = nil
        recordStream = nil
        voiceLinkRef = nil
        voiceLink = nil
    }

    override func uninitialize() {
        closing.wait()
        if running.load(ordering: .relaxed) {
            running.store(false, ordering: .relaxed)
            closeStreams()
        }
        voiceLinkRef = nil
        voiceLink = nil
        super.uninitialize()
    }

    override func dispose() {
        _ = stop()
        closing.wait()
        voiceSettings?.events.close()
        voiceSettings?.ducking.close()
        super.dispose()
    }

    // MARK: Bus 1: the captured input

    override func renderStatus(bus: UInt32) -> OSStatus? {
        guard bus == 1, hasInput else { return bus == 0 ? kAudioUnitErr_InvalidElement : nil }
        return inputRing == nil ? kAudioUnitErr_CannotDoInCurrentContext : noErr
    }

    override package func discardInputBacklog() { discardBacklog.store(true, ordering: .releasing) }

    override package func renderOutput(
        flags: UnsafeMutablePointer<AudioUnitRenderActionFlags>, time: UnsafePointer<AudioTimeStamp>, bus: UInt32, frames: Int,
        output: UnsafeMutablePointer<AudioBufferList>
    ) -> OSStatus {
        guard let ringRef = inputRingRef, let shape = recordShape else { return kAudioUnitErr_CannotDoInCurrentContext }
        return ringRef._withUnsafeGuaranteedRef { ring in readInput(ring, shape: shape, flags: flags, frames: frames, output: output) }
    }

    /// Input quiet enough that a lasting backlog may go unheard (`InputBacklog`): its peak below
    /// −50 dBFS, or 30 dB under the input's recent peak (a pause between words, where noise or
    /// gain control keeps the input above −50 dBFS: waiting for −50 there, the intercom's mouth to
    /// ear on pipewire-pulse read 125–140 ms in two runs of four against 102–114).
    static let quietPeak: Float = 0.00316
    static let quietUnderRecent: Float = 0.0316

    private func readInput(
        _ ring: SampleRing, shape: PCMShape, flags: UnsafeMutablePointer<AudioUnitRenderActionFlags>, frames: Int,
        output: UnsafeMutablePointer<AudioBufferList>
    ) -> OSStatus {
        let channels = shape.channels
        let n = min(frames, sliceFrames)
        let wanted = n * channels
        var got = 0
        if case .none = inputCallback.source() {
            // Read from another thread than the recording's (play-through, or an engine's input):
            // the two streams' cycles do not line up (the server moves both at the same moment,
            // and either thread may run first). A read takes its frames whole or not at all: a
            // short one is silence and leaves what came for the next, so the input runs a request
            // later from then on, and the ring settles at the least latency the two threads'
            // timing allows (a raw client's, measured equal) without breaking up the audio again.
            // A backlog that lasted a second goes in a quiet moment; a burst stays to be read
            // (`InputBacklog`).
            let quiet = max(Self.quietPeak, recentPeak * Self.quietUnderRecent)
            let drop = backlog.excess(available: ring.available, wanted: wanted) { ring.peak(ofOldest: $0) < quiet }
            if drop > 0 { ring.skip(drop) }
            if ring.available >= wanted { got = ring.read(into: inputScratch, count: wanted) }
            var peak = recentPeak * 0.99
            for i in 0..<got { peak = max(peak, abs(inputScratch[i])) }
            recentPeak = peak
        } else {
            if discardBacklog.exchange(false, ordering: .acquiringAndReleasing), ring.available > wanted { ring.skip(ring.available - wanted) }
            got = ring.read(into: inputScratch, count: wanted)
        }
        if got < wanted { (inputScratch + got).update(repeating: 0, count: wanted - got) }
        if got == 0 { flags.pointee.insert(.unitRenderAction_OutputIsSilence) }
        shape.write(from: inputScratch, frames: n, to: output)
        return noErr
    }

    // MARK: The streams' clients (real-time threads)

    /// Plays element 0: pulls the render callback or connected unit for what the server asks, in
    /// pieces of at most a slice, straight into the server's buffer.
    final class Player: HALStreamClient, @unchecked Sendable {
        private let unit: Unmanaged<IOUnit>
        private let shape: PCMShape
        private let slice: Int
        private let channels: Int
        private let rate: Double
        private let clientStorage: UnsafeMutableRawPointer
        private let list: UnsafeMutableAudioBufferListPointer
        private let stamp = UnsafeMutablePointer<AudioTimeStamp>.allocate(capacity: 1)
        private let flags = UnsafeMutablePointer<AudioUnitRenderActionFlags>.allocate(capacity: 1)
        private var sampleTime = 0.0
        private let thread = Atomic<UInt>(0)
        private let validFlags: AudioTimeStampFlags = [.sampleTimeValid, .hostTimeValid, .rateScalarValid]

        init(unit: IOUnit, format: AudioStreamBasicDescription, slice: Int) {
            self.unit = .passUnretained(unit)
            shape = PCMShape(format)!
            self.slice = slice
            channels = shape.channels
            rate = format.mSampleRate
            clientStorage = .allocate(byteCount: slice * channels * 4, alignment: 16)
            clientStorage.initializeMemory(as: UInt8.self, repeating: 0, count: slice * channels * 4)
            list = AudioBufferList.allocate(maximumBuffers: max(channels, 1))
            stamp.initialize(to: AudioTimeStamp())
            flags.initialize(to: [])
            super.init()
        }

        deinit {
            clientStorage.deallocate()
            list.unsafeMutablePointer.deallocate()
            stamp.deallocate()
            flags.deallocate()
        }

        var isRenderThread: Bool { thread.load(ordering: .relaxed) == UInt(pthread_self()) }

        override func render(_ output: UnsafeMutablePointer<Float>, frames count: Int, time: HALRenderTime) -> Int {
            thread.store(UInt(pthread_self()), ordering: .relaxed)
            var done = 0
            while done < count {
                let n = min(slice, count - done)
                renderSlice(n, into: output + done * channels, hostTime: time.hostTime + UInt64(Double(done) * 1e9 / rate))
                done += n
            }
            unit._withUnsafeGuaranteedRef { unit in
                unit.voiceLinkRef?._withUnsafeGuaranteedRef { $0.renderedOutput(output, frames: count, channels: channels) }
            }
            return count
        }

        /// Pulls `frames` frames (at most a slice) and writes them, float interleaved, to `out`.
        private func renderSlice(_ frames: Int, into out: UnsafeMutablePointer<Float>, hostTime: UInt64) {
            shape.prepare(list, storage: clientStorage, frames: frames)
            stamp.pointee = AudioTimeStamp(
                mSampleTime: sampleTime, mHostTime: hostTime, mRateScalar: 1, mWordClockTime: 0, mSMPTETime: SMPTETime(), mFlags: validFlags,
                mReserved: 0)
            flags.pointee = []
            let status = unit._withUnsafeGuaranteedRef { $0.pull(input: 0, flags: flags, time: stamp, frames: frames, into: list.unsafeMutablePointer) }
            if status == noErr && !flags.pointee.contains(.unitRenderAction_OutputIsSilence) {
                shape.read(list, frames: frames, into: out)
            } else {
                out.update(repeating: 0, count: frames * channels)
            }
            sampleTime += Double(frames)
        }
    }

    /// Records element 1: gathers what the server hands over into slices, keeps them for bus 1's
    /// renders and calls the input callback for each.
    final class Recorder: HALStreamClient, @unchecked Sendable {
        private let unit: Unmanaged<IOUnit>
        let shape: PCMShape
        private let channels: Int
        private let slice: Int
        private let rate: Double
        private var gathered = 0
        private var sliceHostTime: UInt64 = 0
        private var sampleTime = 0.0
        private let stamp = UnsafeMutablePointer<AudioTimeStamp>.allocate(capacity: 1)
        private let flags = UnsafeMutablePointer<AudioUnitRenderActionFlags>.allocate(capacity: 1)
        private let thread = Atomic<UInt>(0)
        private let validFlags: AudioTimeStampFlags = [.sampleTimeValid, .hostTimeValid, .rateScalarValid]

        init(unit: IOUnit, channels: Int, slice: Int, rate: Double) {
            self.unit = .passUnretained(unit)
            shape = PCMShape(unit.outputFormats[1])!
            self.channels = channels
            self.slice = slice
            self.rate = rate
            stamp.initialize(to: AudioTimeStamp())
            flags.initialize(to: [])
            super.init()
        }

        deinit {
            stamp.deallocate()
            flags.deallocate()
        }

        var isRenderThread: Bool { thread.load(ordering: .relaxed) == UInt(pthread_self()) }

        override func capture(_ input: UnsafePointer<Float>, frames count: Int, time: HALRenderTime) {
            thread.store(UInt(pthread_self()), ordering: .relaxed)
            unit._withUnsafeGuaranteedRef { unit in
                guard let ringRef = unit.inputRingRef else { return }
                ringRef._withUnsafeGuaranteedRef { ring in
                    if let link = unit.voiceLinkRef {
                        link._withUnsafeGuaranteedRef { link in
                            // Mono at the processing rate, a frame at a time; what comes out is
                            // the client's.
                            var done = 0
                            while done < count {
                                let n = min(link.frameLength, count - done)
                                let at = HALRenderTime(
                                    sampleTime: time.sampleTime + Int64(done), hostTime: time.hostTime &+ UInt64(Double(done) * 1e9 / Double(link.rate)))
                                let ready = link.captured(input + done, frames: n, time: at)
                                if ready > 0 { gather(unit, ring, link.output, count: ready, time: HALRenderTime(sampleTime: 0, hostTime: link.outputHostTime)) }
                                done += n
                            }
                        }
                    } else {
                        gather(unit, ring, input, count: count, time: time)
                    }
                }
            }
        }

        private func gather(_ unit: IOUnit, _ ring: SampleRing, _ input: UnsafePointer<Float>, count: Int, time: HALRenderTime) {
            do {
                var done = 0
                while done < count {
                    if gathered == 0 { sliceHostTime = time.hostTime + UInt64(Double(done) * 1e9 / rate) }
                    let n = min(slice - gathered, count - done)
                    ring.write(input + done * channels, count: n * channels)
                    gathered += n
                    done += n
                    guard gathered == slice else { continue }
                    gathered = 0
                    stamp.pointee = AudioTimeStamp(
                        mSampleTime: sampleTime, mHostTime: sliceHostTime, mRateScalar: 1, mWordClockTime: 0, mSMPTETime: SMPTETime(),
                        mFlags: validFlags, mReserved: 0)
                    sampleTime += Double(slice)
                    if case let .callback(proc, refCon) = unit.inputCallback.source() {
                        flags.pointee = []
                        _ = proc(refCon ?? UnsafeMutableRawPointer(bitPattern: 1)!, flags, stamp, 1, UInt32(slice), nil)
                    }
                }
            }
        }
    }
}

/// Streams handed to a helper thread to close (streams are Sendable; the array crosses once).
private struct StreamsToClose: @unchecked Sendable {
    let streams: [any HALStream]
}

/// What a client's linear PCM looks like, for converting it to and from the server's float
/// interleaved samples: 16- or 32-bit integers or 32-bit floats, interleaved or not.
struct PCMShape {
    enum Sample { case float32, int16, int32 }
    let sample: Sample
    let channels: Int
    let interleaved: Bool

    init?(_ f: AudioStreamBasicDescription) {
        guard f.mFormatID == kAudioFormatLinearPCM, f.mChannelsPerFrame >= 1, f.mChannelsPerFrame <= 16, f.mSampleRate > 0,
            f.mSampleRate.isFinite, f.mFormatFlags & kAudioFormatFlagIsBigEndian == 0, f.mFramesPerPacket == 1
        else { return nil }
        let isFloat = f.mFormatFlags & kAudioFormatFlagIsFloat != 0
        switch (isFloat, f.mBitsPerChannel) {
        case (true, 32): sample = .float32
        case (false, 16): sample = .int16
        case (false, 32): sample = .int32
        default: return nil
        }
        channels = Int(f.mChannelsPerFrame)
        interleaved = f.mFormatFlags & kAudioFormatFlagIsNonInterleaved == 0
        let bytes = sample == .int16 ? 2 : 4
        guard f.mBytesPerFrame == UInt32(interleaved ? bytes * channels : bytes) else { return nil }
        // Integers are signed; the fixed-point (8.24) flavour is not taken.
        guard isFloat || f.mFormatFlags & kAudioFormatFlagIsSignedInteger != 0 else { return nil }
        guard isFloat || (f.mFormatFlags >> kLinearPCMFormatFlagsSampleFractionShift) & 0x3F == 0 else { return nil }
    }

    var bytesPerSample: Int { sample == .int16 ? 2 : 4 }

    /// Points `list` at `storage` for `frames` frames of this shape.
    func prepare(_ list: UnsafeMutableAudioBufferListPointer, storage: UnsafeMutableRawPointer, frames: Int) {
        let buffers = interleaved ? 1 : channels
        list.unsafeMutablePointer.pointee.mNumberBuffers = UInt32(buffers)
        let size = frames * bytesPerSample * (interleaved ? channels : 1)
        for b in 0..<buffers {
            list[b] = AudioBuffer(mNumberChannels: UInt32(interleaved ? channels : 1), mDataByteSize: UInt32(size), mData: storage + b * size)
        }
    }

    /// Float interleaved samples from `list` (the client's), `frames` frames.
    func read(_ list: UnsafeMutableAudioBufferListPointer, frames: Int, into out: UnsafeMutablePointer<Float>) {
        for c in 0..<channels {
            let b = interleaved ? 0 : c
            guard b < list.count, let data = list[b].mData else {
                for i in 0..<frames { out[i * channels + c] = 0 }
                continue
            }
            let step = interleaved ? channels : 1, first = interleaved ? c : 0
            switch sample {
            case .float32:
                let p = data.assumingMemoryBound(to: Float.self)
                for i in 0..<frames { out[i * channels + c] = p[first + i * step] }
            case .int16:
                let p = data.assumingMemoryBound(to: Int16.self)
                for i in 0..<frames { out[i * channels + c] = Float(p[first + i * step]) / 32768 }
            case .int32:
                let p = data.assumingMemoryBound(to: Int32.self)
                for i in 0..<frames { out[i * channels + c] = Float(Double(p[first + i * step]) / 2147483648) }
            }
        }
    }

    /// Writes float interleaved `samples` into `output` (the client's buffers), `frames` frames.
    func write(from samples: UnsafePointer<Float>, frames: Int, to output: UnsafeMutablePointer<AudioBufferList>) {
        let list = UnsafeMutableAudioBufferListPointer(output)
        for c in 0..<channels {
            let b = interleaved ? 0 : c
            guard b < list.count, let data = list[b].mData else { continue }
            let step = interleaved ? channels : 1, first = interleaved ? c : 0
            switch sample {
            case .float32:
                let p = data.assumingMemoryBound(to: Float.self)
                for i in 0..<frames { p[first + i * step] = samples[i * channels + c] }
            case .int16:
                let p = data.assumingMemoryBound(to: Int16.self)
                for i in 0..<frames { p[first + i * step] = Int16(max(-32768, min(32767, (samples[i * channels + c] * 32768).rounded()))) }
            case .int32:
                let p = data.assumingMemoryBound(to: Int32.self)
                for i in 0..<frames {
                    p[first + i * step] = Int32(max(-2147483648, min(2147483647, (Double(samples[i * channels + c]) * 2147483648).rounded())))
                }
            }
        }
        let size = UInt32(frames * bytesPerSample * (interleaved ? channels : 1))
        for b in 0..<min(list.count, interleaved ? 1 : channels) { list[b].mDataByteSize = size }
    }
}

/// While a voice-processing unit runs: what moved its canceller's reference so far (the delays
/// taken, start-overs, the lining-up's and the follower's moves, by 10 ms frame), for a
/// measurement to print; nil for another unit or one not running.
package func voiceReferenceEvents(_ unit: AudioUnit) -> [String]? {
    (liveUnits.lookup(unit) as? IOUnit)?.voiceReferenceEvents
}
