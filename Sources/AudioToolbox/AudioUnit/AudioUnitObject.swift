package import CAudioQueueTypes
package import CoreAudioTypes
package import Synchronization

/// One input of a unit: where its audio comes from (nothing, a render callback, or another
/// unit's output), and the buffers it is pulled into.
///
/// The source is written by control threads under the unit's lock and read by the render
/// thread through a sequence count (a write makes it odd, then even again), so neither waits.
final class UnitInput: @unchecked Sendable {
    enum Source {
        case none
        case callback(AURenderCallback, UnsafeMutableRawPointer?)
        case unit(Unmanaged<AudioUnitObject>, UInt32)
    }

    private let sequence = Atomic<UInt>(0)
    private let kind = Atomic<UInt>(0)
    private let first = Atomic<UInt>(0)
    private let second = Atomic<UInt>(0)
    /// The connected unit, kept alive while connected (control side only).
    var connected: AudioUnitObject?

    /// The render thread's buffers: `channels` non-interleaved runs of `frames` floats.
    private(set) var storage: UnsafeMutablePointer<Float>?
    let list = AudioBufferList.allocate(maximumBuffers: 16)
    private(set) var channels = 0
    private(set) var frames = 0

    deinit {
        storage?.deallocate()
        list.unsafeMutablePointer.deallocate()
    }

    /// Sets the source (control thread, with the unit's lock held).
    func setSource(_ source: Source) {
        sequence.add(1, ordering: .acquiringAndReleasing)
        switch source {
        case .none:
            kind.store(0, ordering: .relaxed)
        case let .callback(proc, refCon):
            kind.store(1, ordering: .relaxed)
            first.store(UInt(bitPattern: unsafeBitCast(proc, to: UnsafeRawPointer.self)), ordering: .relaxed)
            second.store(UInt(bitPattern: refCon), ordering: .relaxed)
        case let .unit(unit, bus):
            kind.store(2, ordering: .relaxed)
            first.store(UInt(bitPattern: unit.toOpaque()), ordering: .relaxed)
            second.store(UInt(bus), ordering: .relaxed)
        }
        sequence.add(1, ordering: .acquiringAndReleasing)
    }

    /// The source as it stands (any thread; the render thread's read).
    func source() -> Source {
        while true {
            let before = sequence.load(ordering: .acquiring)
            if before & 1 == 1 { continue }
            let k = kind.load(ordering: .relaxed), a = first.load(ordering: .relaxed), b = second.load(ordering: .relaxed)
            guard sequence.load(ordering: .acquiring) == before else { continue }
            switch k {
            case 1: return .callback(unsafeBitCast(UnsafeRawPointer(bitPattern: a)!, to: AURenderCallback.self), UnsafeMutableRawPointer(bitPattern: b))
            case 2: return .unit(Unmanaged.fromOpaque(UnsafeRawPointer(bitPattern: a)!), UInt32(b))
            default: return .none
            }
        }
    }

    var hasSource: Bool { if case .none = source() { return false } else { return true } }

    /// Makes the buffers (control thread, the unit not rendering).
    func allocate(channels: Int, frames: Int) {
        storage?.deallocate()
        self.channels = min(channels, 16)
        self.frames = frames
        let s = UnsafeMutablePointer<Float>.allocate(capacity: max(self.channels * frames, 1))
        s.initialize(repeating: 0, count: max(self.channels * frames, 1))
        storage = s
    }

    /// The input's buffer list, pointed at its own buffers and sized for `count` frames.
    func preparedList(frames count: Int) -> UnsafeMutablePointer<AudioBufferList> {
        list.unsafeMutablePointer.pointee.mNumberBuffers = UInt32(channels)
        for c in 0..<channels {
            list[c] = AudioBuffer(mNumberChannels: 1, mDataByteSize: UInt32(count * 4), mData: UnsafeMutableRawPointer(storage! + c * frames))
        }
        return list.unsafeMutablePointer
    }
}

/// An audio unit: what every kind shares (identity, stream formats per scope and element,
/// parameters, inputs and how they are pulled, listeners, initialization). Kinds override
/// ``renderOutput(flags:time:bus:frames:output:)`` and the property hooks.
///
/// Threads: the `AudioUnit…` calls run on any thread, one at a time per unit (``lock``); the
/// render path (``render(flags:time:bus:frames:data:)``) runs on whichever thread pulls the unit,
/// usually a real-time one, and takes no lock: it reads atomics and what ``initialize()`` made.
package class AudioUnitObject: ReferencedObject, @unchecked Sendable {
    package let ref = newObjectReference(.audioUnit)
    let component: AudioComponentEntry
    package let lock = Mutex(())
    let parameters: ParameterTable
    /// Set by ``initialize()``, cleared by ``uninitialize()``; read by the render thread.
    let initializedFlag = Atomic<Bool>(false)
    package var isInitialized: Bool { initializedFlag.load(ordering: .acquiring) }

    /// Formats per element, control side. Kinds say how many elements and what they accept.
    package var inputFormats: [AudioStreamBasicDescription]
    package var outputFormats: [AudioStreamBasicDescription]
    let inputs: [UnitInput]
    /// The inputs for the render thread, unretained (``inputs`` owns them).
    let inputRefs: UnsafeMutablePointer<Unmanaged<UnitInput>>
    var maximumFramesPerSlice: UInt32 = 4096
    package let maximumFrames = Atomic<Int>(4096)
    var shouldAllocateBuffer = true
    var bypass = false
    let bypassFlag = Atomic<Bool>(false)
    /// Units replaced as a source while this one may be rendering: kept until it stops.
    var retired: [AudioUnitObject] = []
    var listeners: [(AudioUnitPropertyID, AudioUnitPropertyListenerProc, UnsafeMutableRawPointer?)] = []
    let lastRenderError = Atomic<Int32>(0)

    /// Each output bus's tap (an unretained ``RenderTap``, 0 for none); ``setTap(_:bus:)`` keeps it.
    private let tapSlots: UnsafeMutablePointer<Atomic<UInt>>
    private let tapCount: Int
    private var tapsKept: [Int: RenderTap] = [:]

    /// Turns an I/O unit's voice processing on or off (an engine's `setVoiceProcessingEnabled`),
    /// uninitialized; `kAudioUnitErr_InvalidProperty` for units that have none.
    package func setVoiceProcessing(_ on: Bool) -> OSStatus { kAudioUnitErr_InvalidProperty }
    package var isVoiceProcessing: Bool { false }

    /// An I/O unit's next read of its input (on the reading thread) starts at the newest input
    /// and drops what waited before it; nothing for other units.
    package func discardInputBacklog() {}

    /// Puts a tap on output `bus` (nil removes it). The caller sees that no render is in progress
    /// (an engine holds its cycles), so the tap replaced can go at once.
    package func setTap(_ tap: RenderTap?, bus: Int) {
        guard bus < tapCount else { return }
        lock.withLock { _ in
            tapSlots[bus].store(tap.map { UInt(bitPattern: Unmanaged.passUnretained($0).toOpaque()) } ?? 0, ordering: .releasing)
            tapsKept[bus] = tap
        }
    }

    /// Each output bus's share (an unretained ``OutputShare``, 0 for none): a bus that feeds
    /// several inputs renders once per cycle. ``setShared(_:bus:)`` keeps it.
    private let shareSlots: UnsafeMutablePointer<Atomic<UInt>>
    private var sharesKept: [Int: OutputShare] = [:]

    /// Makes output `bus` render once per cycle however many inputs pull it (an engine's
    /// one-to-many connection), or not. The caller sees that no render is in progress.
    package func setShared(_ shared: Bool, bus: Int) {
        guard bus < tapCount else { return }
        lock.withLock { _ in
            let channels = Int(outputFormats[bus].mChannelsPerFrame), frames = Int(maximumFramesPerSlice)
            if shared, let kept = sharesKept[bus], kept.fits(channels: channels, frames: frames) { return }
            let share = shared ? OutputShare(channels: channels, frames: frames) : nil
            shareSlots[bus].store(share.map { UInt(bitPattern: Unmanaged.passUnretained($0).toOpaque()) } ?? 0, ordering: .releasing)
            sharesKept[bus] = share
        }
    }

    /// Forgets the renders shared buses keep (before sample times start again: an engine's
    /// start). The caller sees that no render is in progress.
    package func forgetSharedRenders() {
        lock.withLock { _ in for share in sharesKept.values { share.forget() } }
    }

    /// The output buffers handed out when a caller passes buffers without memory, and how many
    /// channels of them there are.
    private(set) var outputStorage: UnsafeMutablePointer<Float>?
    private var outputStorageChannels = 0

    /// `inputCapacity` inputs can exist (a mixer's element count can grow to it); `inputs` do.
    init(
        component: AudioComponentEntry, inputs: Int, outputs: Int, format: AudioStreamBasicDescription, parameters: [ParameterSpec],
        inputCapacity: Int? = nil
    ) {
        self.component = component
        self.parameters = ParameterTable(parameters)
        inputFormats = Array(repeating: format, count: inputs)
        outputFormats = Array(repeating: format, count: outputs)
        self.inputs = (0..<max(inputCapacity ?? inputs, inputs)).map { _ in UnitInput() }
        inputRefs = .allocate(capacity: max(self.inputs.count, 1))
        tapCount = max(outputs, 1)
        tapSlots = .allocate(capacity: tapCount)
        for i in 0..<tapCount { (tapSlots + i).initialize(to: Atomic(0)) }
        shareSlots = .allocate(capacity: tapCount)
        for i in 0..<tapCount { (shareSlots + i).initialize(to: Atomic(0)) }
        for (i, input) in self.inputs.enumerated() { (inputRefs + i).initialize(to: .passUnretained(input)) }
    }

    deinit {
        inputRefs.deallocate()
        tapSlots.deinitialize(count: tapCount)
        tapSlots.deallocate()
        shareSlots.deinitialize(count: tapCount)
        shareSlots.deallocate()
        outputStorage?.deallocate()
    }

    /// Apple's canonical format for units: 32-bit float, non-interleaved.
    package static func canonical(sampleRate: Double, channels: Int) -> AudioStreamBasicDescription {
        AudioStreamBasicDescription(
            mSampleRate: sampleRate, mFormatID: kAudioFormatLinearPCM,
            mFormatFlags: kAudioFormatFlagsNativeFloatPacked | kAudioFormatFlagIsNonInterleaved, mBytesPerPacket: 4, mFramesPerPacket: 1,
            mBytesPerFrame: 4, mChannelsPerFrame: UInt32(channels), mBitsPerChannel: 32, mReserved: 0)
    }

    /// 32-bit float, non-interleaved (one channel is the same either way), 1–16 channels.
    static func isCanonical(_ f: AudioStreamBasicDescription) -> Bool {
        f.mFormatID == kAudioFormatLinearPCM && f.mFormatFlags & kAudioFormatFlagIsFloat != 0 && f.mBitsPerChannel == 32
            && (f.mFormatFlags & kAudioFormatFlagIsNonInterleaved != 0 || f.mChannelsPerFrame == 1) && f.mChannelsPerFrame >= 1 && f.mChannelsPerFrame <= 16
            && f.mSampleRate > 0 && f.mSampleRate.isFinite
    }

    // MARK: Lifecycle (control threads, lock held by the caller)

    /// Makes what rendering needs. Kinds extend it (and call this).
    func initialize() -> OSStatus {
        let frames = Int(maximumFramesPerSlice)
        for (i, format) in inputFormats.enumerated() { inputs[i].allocate(channels: Int(format.mChannelsPerFrame), frames: frames) }
        let widest = outputFormats.map { Int($0.mChannelsPerFrame) }.max() ?? 0
        outputStorage?.deallocate()
        outputStorage = .allocate(capacity: max(widest * frames, 1))
        outputStorage!.initialize(repeating: 0, count: max(widest * frames, 1))
        outputStorageChannels = max(widest, 1)
        maximumFrames.store(frames, ordering: .relaxed)
        let status = prepareRendering()
        guard status == noErr else { return status }
        // Published last: a render that finds the unit initialized finds it whole.
        initializedFlag.store(true, ordering: .releasing)
        RenderRegistry.add(self)
        return noErr
    }

    /// Makes the kind's render state (filters, delay lines, resamplers), after the base's buffers
    /// and before the unit is published as initialized. Kinds override it.
    func prepareRendering() -> OSStatus { noErr }

    func uninitialize() {
        if initializedFlag.exchange(false, ordering: .acquiringAndReleasing) { RenderRegistry.remove(self) }
        retired.removeAll()
    }

    /// Clears what the unit remembers of past audio (filter memory, delay lines). Kinds override.
    /// Runs on the render thread, at the start of the first render after ``requestReset()``: the
    /// render thread owns that state, and a reset from another thread could clear it mid-slice.
    func reset(scope: AudioUnitScope, element: AudioUnitElement) -> OSStatus { noErr }

    /// Set by `AudioUnitReset`, taken by the next render.
    private let resetPending = Atomic<Bool>(false)

    /// `AudioUnitReset`: the next render starts with ``reset(scope:element:)``. What the unit
    /// remembers only matters to its next render, so nobody can tell the difference, and the
    /// render thread never sees its state cleared under it.
    func requestReset() { resetPending.store(true, ordering: .releasing) }

    /// Called after ``dispose`` takes the unit out of the table (an I/O unit stops here).
    func dispose() {
        lock.withLock { _ in
            uninitialize()
            for input in inputs {
                input.setSource(.none)
                input.connected = nil
            }
        }
    }

    // MARK: The render path (any thread; no lock)

    /// `AudioUnitRender`: checks the call, hands out buffers where the caller gave none, and
    /// renders output `bus`.
    package final func render(
        flags: UnsafeMutablePointer<AudioUnitRenderActionFlags>, time: UnsafePointer<AudioTimeStamp>, bus: UInt32, frames: UInt32,
        data: UnsafeMutablePointer<AudioBufferList>
    ) -> OSStatus {
        guard isInitialized else { return kAudioUnitErr_Uninitialized }
        guard Int(frames) <= maximumFrames.load(ordering: .relaxed) else { return kAudioUnitErr_TooManyFramesToProcess }
        guard let status = renderStatus(bus: bus) else { return kAudioUnitErr_InvalidElement }
        if status != noErr { return status }
        let list = UnsafeMutableAudioBufferListPointer(data)
        let n = Int(frames)
        let maximum = maximumFrames.load(ordering: .relaxed)
        for i in 0..<list.count where list[i].mData == nil {
            guard let storage = outputStorage else { return kAudioUnitErr_Uninitialized }
            guard i < outputStorageChannels else { return kAudio_ParamError }
            list[i].mData = UnsafeMutableRawPointer(storage + i * maximum)
            list[i].mDataByteSize = UInt32(n * 4)
        }
        if Int(bus) < tapCount, let raw = UnsafeRawPointer(bitPattern: shareSlots[Int(bus)].load(ordering: .acquiring)) {
            return Unmanaged<OutputShare>.fromOpaque(raw)._withUnsafeGuaranteedRef { share in
                if share.holds(time: time.pointee.mSampleTime, frames: n, buffers: list.count) {
                    share.copy(to: list, frames: n)
                    flags.pointee = share.flags
                    return share.status
                }
                let result = renderFresh(flags: flags, time: time, bus: bus, frames: n, data: data)
                share.keep(list, frames: n, time: time.pointee.mSampleTime, flags: flags.pointee, status: result)
                return result
            }
        }
        return renderFresh(flags: flags, time: time, bus: bus, frames: n, data: data)
    }

    private func renderFresh(
        flags: UnsafeMutablePointer<AudioUnitRenderActionFlags>, time: UnsafePointer<AudioTimeStamp>, bus: UInt32, frames n: Int,
        data: UnsafeMutablePointer<AudioBufferList>
    ) -> OSStatus {
        if resetPending.load(ordering: .relaxed), resetPending.exchange(false, ordering: .acquiring) {
            _ = reset(scope: kAudioUnitScope_Global, element: 0)
        }
        let result = renderOutput(flags: flags, time: time, bus: bus, frames: n, output: data)
        if result != noErr { lastRenderError.store(result, ordering: .relaxed) }
        if Int(bus) < tapCount, let tap = UnsafeRawPointer(bitPattern: tapSlots[Int(bus)].load(ordering: .acquiring)) {
            if result == noErr { Unmanaged<RenderTap>.fromOpaque(tap)._withUnsafeGuaranteedRef { $0.capture(data, frames: n, time: time) } }
        }
        return result
    }

    /// `nil` for a bus the unit has no output at; else `noErr` or why it cannot render there.
    func renderStatus(bus: UInt32) -> OSStatus? { Int(bus) < outputFormats.count ? noErr : nil }

    /// Renders `frames` frames of output `bus` into `output` (buffers present). Kinds override.
    package func renderOutput(
        flags: UnsafeMutablePointer<AudioUnitRenderActionFlags>, time: UnsafePointer<AudioTimeStamp>, bus: UInt32, frames: Int,
        output: UnsafeMutablePointer<AudioBufferList>
    ) -> OSStatus {
        kAudioUnitErr_InvalidElement
    }

    /// Pulls input `index` for `frames` frames into `list` (or the input's own buffers when `list`
    /// is nil), from its callback or connected unit. `kAudioUnitErr_NoConnection` when it has none.
    package final func pull(
        input index: Int, flags: UnsafeMutablePointer<AudioUnitRenderActionFlags>, time: UnsafePointer<AudioTimeStamp>, frames: Int,
        into list: UnsafeMutablePointer<AudioBufferList>? = nil
    ) -> OSStatus {
        // Each source gets flags of its own: a silent source says so for itself, not for this unit.
        var sourceFlags = AudioUnitRenderActionFlags()
        return withUnsafeMutablePointer(to: &sourceFlags) { sourceFlags in
            inputRefs[index]._withUnsafeGuaranteedRef { input in
                let target = list ?? input.preparedList(frames: frames)
                switch input.source() {
                case .none:
                    return kAudioUnitErr_NoConnection
                case let .callback(proc, refCon):
                    return proc(refCon ?? UnsafeMutableRawPointer(bitPattern: 1)!, sourceFlags, time, UInt32(index), UInt32(frames), target)
                case let .unit(unit, bus):
                    return unit._withUnsafeGuaranteedRef { $0.render(flags: sourceFlags, time: time, bus: bus, frames: UInt32(frames), data: target) }
                }
            }
        }
    }

    /// Input `index`'s own buffers after ``pull(input:flags:time:frames:into:)`` without a list.
    package final func inputList(_ index: Int) -> UnsafeMutablePointer<AudioBufferList> {
        inputRefs[index]._withUnsafeGuaranteedRef { $0.list.unsafeMutablePointer }
    }

    // MARK: Properties (control threads, lock held by the caller)

    /// The size and writability of a property, `nil` when the unit has no such property there.
    func propertyInfo(_ id: AudioUnitPropertyID, scope: AudioUnitScope, element: AudioUnitElement) -> (size: Int, writable: Bool)? {
        switch id {
        case kAudioUnitProperty_StreamFormat:
            return elementExists(scope, element) ? (MemoryLayout<AudioStreamBasicDescription>.size, formatWritable(scope: scope, element: element)) : nil
        case kAudioUnitProperty_SampleRate:
            return elementExists(scope, element) ? (8, formatWritable(scope: scope, element: element)) : nil
        case kAudioUnitProperty_ElementCount:
            return scope <= kAudioUnitScope_Output ? (4, false) : nil
        case kAudioUnitProperty_MaximumFramesPerSlice:
            return (4, true)
        case kAudioUnitProperty_Latency, kAudioUnitProperty_TailTime:
            return (8, false)
        case kAudioUnitProperty_ParameterList:
            return (4 * parameters.specs.count { $0.scope == scope && $0.element == element }, false)
        case kAudioUnitProperty_SetRenderCallback:
            return scope == kAudioUnitScope_Input && Int(element) < inputFormats.count ? (MemoryLayout<AURenderCallbackStruct>.size, true) : nil
        case kAudioUnitProperty_MakeConnection:
            return scope == kAudioUnitScope_Input && Int(element) < inputFormats.count ? (MemoryLayout<AudioUnitConnection>.size, true) : nil
        case kAudioUnitProperty_ShouldAllocateBuffer:
            return elementExists(scope, element) ? (4, true) : nil
        case kAudioUnitProperty_BypassEffect:
            return self is EffectUnit ? (4, true) : nil
        case kAudioUnitProperty_LastRenderError:
            return (4, false)
        case kAudioUnitProperty_InPlaceProcessing:
            return (4, true)
        default:
            return nil
        }
    }

    func elementExists(_ scope: AudioUnitScope, _ element: AudioUnitElement) -> Bool {
        switch scope {
        case kAudioUnitScope_Input: return Int(element) < inputFormats.count
        case kAudioUnitScope_Output: return Int(element) < outputFormats.count
        case kAudioUnitScope_Global: return element == 0
        default: return false
        }
    }

    func formatWritable(scope: AudioUnitScope, element: AudioUnitElement) -> Bool { scope != kAudioUnitScope_Global }

    /// The format at a scope and element (the global scope: output 0's).
    func format(scope: AudioUnitScope, element: AudioUnitElement) -> AudioStreamBasicDescription? {
        switch scope {
        case kAudioUnitScope_Input: return Int(element) < inputFormats.count ? inputFormats[Int(element)] : nil
        case kAudioUnitScope_Output: return Int(element) < outputFormats.count ? outputFormats[Int(element)] : nil
        default: return outputFormats.first ?? inputFormats.first
        }
    }

    /// Whether the unit takes `format` there. The base takes Apple's canonical format, the
    /// effect units' only one; kinds that convert take more.
    func accepts(_ format: AudioStreamBasicDescription, scope: AudioUnitScope, element: AudioUnitElement) -> Bool {
        Self.isCanonical(format)
    }

    /// Sets a format after ``accepts(_:scope:element:)``. Effects keep both sides alike in rate.
    func setFormat(_ format: AudioStreamBasicDescription, scope: AudioUnitScope, element: AudioUnitElement) -> OSStatus {
        guard !isInitialized else { return kAudioUnitErr_Initialized }
        guard accepts(format, scope: scope, element: element) else { return kAudioUnitErr_FormatNotSupported }
        switch scope {
        case kAudioUnitScope_Input: inputFormats[Int(element)] = format
        case kAudioUnitScope_Output: outputFormats[Int(element)] = format
        default: return kAudioUnitErr_InvalidScope
        }
        return noErr
    }

    /// The property's bytes, or an error. Kinds add theirs and call this for the rest.
    func getProperty(_ id: AudioUnitPropertyID, scope: AudioUnitScope, element: AudioUnitElement) -> Result<[UInt8], StatusError> {
        switch id {
        case kAudioUnitProperty_StreamFormat:
            guard let f = format(scope: scope, element: element) else { return .failure(StatusError(kAudioUnitErr_InvalidElement)) }
            return .success(bytes(of: f))
        case kAudioUnitProperty_SampleRate:
            guard let f = format(scope: scope, element: element) else { return .failure(StatusError(kAudioUnitErr_InvalidElement)) }
            return .success(bytes(of: f.mSampleRate))
        case kAudioUnitProperty_ElementCount:
            let count = scope == kAudioUnitScope_Input ? inputFormats.count : scope == kAudioUnitScope_Output ? outputFormats.count : 1
            return .success(bytes(of: UInt32(count)))
        case kAudioUnitProperty_MaximumFramesPerSlice:
            return .success(bytes(of: maximumFramesPerSlice))
        case kAudioUnitProperty_Latency:
            return .success(bytes(of: latency))
        case kAudioUnitProperty_TailTime:
            return .success(bytes(of: tailTime))
        case kAudioUnitProperty_ParameterList:
            let ids = parameters.specs.filter { $0.scope == scope && $0.element == element }.map(\.id)
            return .success(ids.flatMap { bytes(of: $0) })
        case kAudioUnitProperty_ShouldAllocateBuffer:
            return .success(bytes(of: UInt32(shouldAllocateBuffer ? 1 : 0)))
        case kAudioUnitProperty_BypassEffect:
            return .success(bytes(of: UInt32(bypass ? 1 : 0)))
        case kAudioUnitProperty_LastRenderError:
            return .success(bytes(of: lastRenderError.exchange(0, ordering: .relaxed)))
        case kAudioUnitProperty_InPlaceProcessing:
            return .success(bytes(of: UInt32(1)))
        case kAudioUnitProperty_SetRenderCallback, kAudioUnitProperty_MakeConnection:
            // Write-only, as Apple's.
            return .failure(StatusError(kAudioUnitErr_InvalidProperty))
        default:
            return .failure(StatusError(kAudioUnitErr_InvalidProperty))
        }
    }

    /// The unit's own processing delay, in seconds. Kinds override.
    var latency: Double { 0 }
    /// How long output goes on after input stops, in seconds. Kinds override.
    var tailTime: Double { 0 }

    func setProperty(_ id: AudioUnitPropertyID, scope: AudioUnitScope, element: AudioUnitElement, data: UnsafeRawPointer?, size: UInt32) -> OSStatus {
        switch id {
        case kAudioUnitProperty_StreamFormat:
            guard elementExists(scope, element) else { return kAudioUnitErr_InvalidElement }
            guard let f = PropertyData.load(AudioStreamBasicDescription.self, from: data, size: size) else { return kAudio_ParamError }
            return setFormat(f, scope: scope, element: element)
        case kAudioUnitProperty_SampleRate:
            guard elementExists(scope, element), var f = format(scope: scope, element: element) else { return kAudioUnitErr_InvalidElement }
            guard let rate = PropertyData.load(Double.self, from: data, size: size) else { return kAudio_ParamError }
            f.mSampleRate = rate
            return setFormat(f, scope: scope, element: element)
        case kAudioUnitProperty_MaximumFramesPerSlice:
            guard let frames = PropertyData.load(UInt32.self, from: data, size: size) else { return kAudio_ParamError }
            guard !isInitialized else { return kAudioUnitErr_Initialized }
            guard frames > 0, frames <= 1 << 16 else { return kAudioUnitErr_InvalidPropertyValue }
            maximumFramesPerSlice = frames
            return noErr
        case kAudioUnitProperty_SetRenderCallback:
            guard scope == kAudioUnitScope_Input else { return kAudioUnitErr_InvalidScope }
            guard Int(element) < inputFormats.count else { return kAudioUnitErr_InvalidElement }
            guard let cb = PropertyData.load(AURenderCallbackStruct.self, from: data, size: size) else { return kAudio_ParamError }
            let input = inputs[Int(element)]
            if let old = input.connected { retired.append(old) }
            input.connected = nil
            if let proc = cb.inputProc { input.setSource(.callback(proc, cb.inputProcRefCon)) } else { input.setSource(.none) }
            return noErr
        case kAudioUnitProperty_MakeConnection:
            guard scope == kAudioUnitScope_Input else { return kAudioUnitErr_InvalidScope }
            guard Int(element) < inputFormats.count else { return kAudioUnitErr_InvalidElement }
            guard let c = PropertyData.load(AudioUnitConnection.self, from: data, size: size) else { return kAudio_ParamError }
            let input = inputs[Int(element)]
            if let old = input.connected { retired.append(old) }
            input.connected = nil
            guard let source = c.sourceAudioUnit else {
                input.setSource(.none)
                return noErr
            }
            guard let unit = liveUnits.lookup(source), unit !== self else { return kAudioUnitErr_InvalidPropertyValue }
            guard Int(c.sourceOutputNumber) < unit.outputFormats.count else { return kAudioUnitErr_InvalidElement }
            input.connected = unit
            input.setSource(.unit(.passUnretained(unit), c.sourceOutputNumber))
            return noErr
        case kAudioUnitProperty_ShouldAllocateBuffer:
            guard let v = PropertyData.load(UInt32.self, from: data, size: size) else { return kAudio_ParamError }
            shouldAllocateBuffer = v != 0
            return noErr
        case kAudioUnitProperty_BypassEffect:
            guard self is EffectUnit else { return kAudioUnitErr_InvalidProperty }
            guard let v = PropertyData.load(UInt32.self, from: data, size: size) else { return kAudio_ParamError }
            bypass = v != 0
            bypassFlag.store(bypass, ordering: .relaxed)
            return noErr
        case kAudioUnitProperty_InPlaceProcessing:
            return PropertyData.load(UInt32.self, from: data, size: size) == nil ? kAudio_ParamError : noErr
        default:
            return propertyInfo(id, scope: scope, element: element) == nil ? kAudioUnitErr_InvalidProperty : kAudioUnitErr_PropertyNotWritable
        }
    }

    func bytes<T>(of value: T) -> [UInt8] { withUnsafeBytes(of: value) { Array($0) } }

    // MARK: Parameters (any thread)

    func parameterIndex(_ id: AudioUnitParameterID, scope: AudioUnitScope, element: AudioUnitElement) -> Result<Int, StatusError> {
        if let i = parameters.index(id, scope: scope, element: element) { return .success(i) }
        if !parameters.hasScope(scope) { return .failure(StatusError(scope > kAudioUnitScope_Output ? kAudioUnitErr_InvalidScope : kAudioUnitErr_InvalidParameter)) }
        return .failure(StatusError(parameters.specs.contains { $0.id == id && $0.scope == scope } ? kAudioUnitErr_InvalidElement : kAudioUnitErr_InvalidParameter))
    }
}

let liveUnits = LiveObjects<AudioUnitObject>(.audioUnit)

/// The initialized units, for `AudioUnitRender` on a real-time thread: a fixed table of atomic
/// slots (reference, object), searched without a lock and without counting references. A unit
/// is entered by ``AudioUnitObject/initialize()`` and leaves at uninitialize; the table does not
/// own it (``liveUnits`` does).
enum RenderRegistry {
    static let capacity = 1024
    nonisolated(unsafe) private static let keys: UnsafeMutablePointer<Atomic<UInt>> = {
        let p = UnsafeMutablePointer<Atomic<UInt>>.allocate(capacity: capacity)
        for i in 0..<capacity { (p + i).initialize(to: Atomic(0)) }
        return p
    }()
    nonisolated(unsafe) private static let objects: UnsafeMutablePointer<Atomic<UInt>> = {
        let p = UnsafeMutablePointer<Atomic<UInt>>.allocate(capacity: capacity)
        for i in 0..<capacity { (p + i).initialize(to: Atomic(0)) }
        return p
    }()
    private static let writers = Mutex(())

    static func add(_ unit: AudioUnitObject) {
        let key = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(unit.ref)))
        writers.withLock { _ in
            for i in 0..<capacity where keys[i].load(ordering: .relaxed) == 0 {
                objects[i].store(UInt(bitPattern: Unmanaged.passUnretained(unit).toOpaque()), ordering: .relaxed)
                keys[i].store(key, ordering: .releasing)
                return
            }
        }
    }

    static func remove(_ unit: AudioUnitObject) {
        let key = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(unit.ref)))
        writers.withLock { _ in
            for i in 0..<capacity where keys[i].load(ordering: .relaxed) == key {
                keys[i].store(0, ordering: .releasing)
                objects[i].store(0, ordering: .relaxed)
            }
        }
    }

    /// Runs `body` with the initialized unit `ref` stands for; `nil` when it is not one.
    static func withUnit<R>(_ ref: OpaquePointer?, _ body: (AudioUnitObject) -> R) -> R? {
        guard let ref else { return nil }
        let key = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(ref)))
        for i in 0..<capacity where keys[i].load(ordering: .acquiring) == key {
            let bits = objects[i].load(ordering: .relaxed)
            guard let raw = UnsafeRawPointer(bitPattern: bits) else { return nil }
            return Unmanaged<AudioUnitObject>.fromOpaque(raw)._withUnsafeGuaranteedRef(body)
        }
        return nil
    }
}

/// An output bus's last render, kept for the other inputs the bus feeds in the same cycle (same
/// sample time and frame count). Made, and forgotten, on a control thread while nothing renders;
/// used by the render thread. A render it cannot keep (larger than it was made for) is rendered
/// again for each input.
final class OutputShare: @unchecked Sendable {
    /// One slot of a channel's `frames` 32-bit samples per buffer (a single interleaved buffer
    /// may use them all).
    private let storage: UnsafeMutableRawPointer
    private let sizes: UnsafeMutablePointer<UInt32>
    private let buffers: Int
    private let capacity: Int
    private var sampleTime = -Double.infinity
    private var frames = -1
    private var kept = 0
    private(set) var status = noErr
    private(set) var flags = AudioUnitRenderActionFlags()

    /// Room for `frames` frames of `channels` channels of 32-bit samples, interleaved or not.
    init(channels: Int, frames: Int) {
        buffers = max(channels, 1)
        capacity = max(frames, 1) * 4
        storage = .allocate(byteCount: buffers * capacity, alignment: 16)
        storage.initializeMemory(as: UInt8.self, repeating: 0, count: buffers * capacity)
        sizes = .allocate(capacity: buffers)
        sizes.initialize(repeating: 0, count: buffers)
    }

    deinit {
        storage.deallocate()
        sizes.deallocate()
    }

    func forget() { frames = -1 }

    func fits(channels: Int, frames: Int) -> Bool { buffers == max(channels, 1) && capacity == max(frames, 1) * 4 }

    /// Whether the render of this cycle (`time`, `frames`) is here, for a list of `count` buffers.
    func holds(time: Double, frames n: Int, buffers count: Int) -> Bool {
        sampleTime == time && frames == n && count == kept
    }

    func copy(to list: UnsafeMutableAudioBufferListPointer, frames n: Int) {
        for b in 0..<list.count {
            guard let p = list[b].mData else { continue }
            p.copyMemory(from: storage + b * capacity, byteCount: Int(sizes[b]))
            list[b].mDataByteSize = sizes[b]
        }
    }

    /// Keeps `list`'s render of `frames` frames at `time`; a render too big to keep is not.
    func keep(_ list: UnsafeMutableAudioBufferListPointer, frames n: Int, time: Double, flags: AudioUnitRenderActionFlags, status: OSStatus) {
        frames = -1
        guard list.count <= buffers else { return }
        for b in 0..<list.count {
            let size = Int(list[b].mDataByteSize)
            guard size <= (list.count == 1 ? buffers * capacity : capacity) else { return }
            if let p = list[b].mData {
                (storage + b * capacity).copyMemory(from: p, byteCount: size)
            } else {
                (storage + b * capacity).initializeMemory(as: UInt8.self, repeating: 0, count: size)
            }
            sizes[b] = UInt32(size)
        }
        kept = list.count
        sampleTime = time
        frames = n
        self.flags = flags
        self.status = status
    }
}
