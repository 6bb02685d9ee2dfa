import AudioHAL
import Foundation

// Parameters and properties of audio queues (AudioQueue.h).

/// Reads a parameter: `kAudioQueueParam_Volume` (0…1), `kAudioQueueParam_VolumeRampTime`
/// (seconds) or `kAudioQueueParam_Pan` (−1…1).
@discardableResult
public func AudioQueueGetParameter(
    _ inAQ: AudioQueueRef, _ inParamID: AudioQueueParameterID, _ outValue: UnsafeMutablePointer<AudioQueueParameterValue>
) -> OSStatus {
    guard let queue = liveQueues.lookup(inAQ) else { return kAudio_ParamError }
    queue.lock.lock()
    defer { queue.lock.unlock() }
    switch inParamID {
    case kAudioQueueParam_Volume: outValue.pointee = queue.volume
    case kAudioQueueParam_VolumeRampTime: outValue.pointee = queue.volumeRampTime
    case kAudioQueueParam_Pan: outValue.pointee = queue.pan
    case kAudioQueueParam_PlayRate where queue.timePitch.enabled: outValue.pointee = queue.timePitch.rate
    case kAudioQueueParam_Pitch where queue.timePitch.enabled: outValue.pointee = queue.timePitch.pitchCents
    default: return kAudioQueueErr_InvalidParameter
    }
    return noErr
}

/// Sets a parameter; volume and pan take effect on the next samples the server asks for. A volume
/// change ramps over `kAudioQueueParam_VolumeRampTime` seconds. `kAudioQueueParam_PlayRate`
/// (0.5…2) and `kAudioQueueParam_Pitch` (−2400…2400 cents) need the time-pitch processor
/// (`kAudioQueueProperty_EnableTimePitch`; `kAudioQueueErr_InvalidParameter` without it) and apply
/// from the next buffer enqueued.
@discardableResult
public func AudioQueueSetParameter(
    _ inAQ: AudioQueueRef, _ inParamID: AudioQueueParameterID, _ inValue: AudioQueueParameterValue
) -> OSStatus {
    guard let queue = liveQueues.lookup(inAQ) else { return kAudio_ParamError }
    guard inValue.isFinite else { return kAudio_ParamError }
    queue.lock.lock()
    defer { queue.lock.unlock() }
    let engine = queue.engine
    switch inParamID {
    case kAudioQueueParam_Volume:
        queue.volume = max(0, inValue)
        engine.volumeBits.store(queue.volume.bitPattern, ordering: .relaxed)
    case kAudioQueueParam_VolumeRampTime:
        queue.volumeRampTime = max(0, inValue)
        engine.rampTimeBits.store(queue.volumeRampTime.bitPattern, ordering: .relaxed)
    case kAudioQueueParam_Pan:
        queue.pan = min(max(inValue, -1), 1)
        engine.panBits.store(queue.pan.bitPattern, ordering: .relaxed)
    case kAudioQueueParam_PlayRate where queue.timePitch.enabled:
        queue.timePitch.rate = min(max(inValue, 0.5), 2)
    case kAudioQueueParam_Pitch where queue.timePitch.enabled:
        queue.timePitch.pitchCents = min(max(inValue, -2400), 2400)
    default: return kAudioQueueErr_InvalidParameter
    }
    return noErr
}

/// The size of a property's value, as ``AudioQueueGetProperty(_:_:_:_:)`` writes it.
private func propertySize(_ queue: AudioQueueObject, _ id: AudioQueuePropertyID) -> Int? {
    switch id {
    case kAudioQueueProperty_IsRunning, kAudioQueueDeviceProperty_NumberChannels,
        kAudioQueueProperty_EnableLevelMetering, kAudioQueueProperty_HardwareCodecPolicy:
        return MemoryLayout<UInt32>.size
    case kAudioQueueProperty_DecodeBufferSizeFrames:
        return queue.isOutput ? MemoryLayout<UInt32>.size : nil
    case kAudioQueueProperty_EnableTimePitch, kAudioQueueProperty_TimePitchAlgorithm, kAudioQueueProperty_TimePitchBypass:
        return queue.isOutput ? MemoryLayout<UInt32>.size : nil
    case kAudioQueueDeviceProperty_SampleRate: return MemoryLayout<Float64>.size
    case kAudioQueueProperty_StreamDescription: return MemoryLayout<AudioStreamBasicDescription>.size
    case kAudioQueueProperty_CurrentDevice: return MemoryLayout<CFString?>.size
    case kAudioQueueProperty_CurrentLevelMeter, kAudioQueueProperty_CurrentLevelMeterDB:
        return MemoryLayout<AudioQueueLevelMeterState>.stride * queue.pcm.channels
    case kAudioQueueProperty_MagicCookie:
        guard let codec = queue.codec else { return nil }
        queue.lock.lock()
        defer { queue.lock.unlock() }
        return codec.magicCookie.count
    case kAudioQueueProperty_MaximumOutputPacketSize, kAudioQueueProperty_ConverterError:
        return MemoryLayout<UInt32>.size
    case kAudioQueueProperty_ChannelLayout:
        queue.lock.lock()
        defer { queue.lock.unlock() }
        return queue.channelLayout?.count ?? MemoryLayout<AudioChannelLayout>.size
    default: return nil
    }
}

/// The size of a property's value. Unknown IDs get `kAudioQueueErr_InvalidProperty`.
@discardableResult
public func AudioQueueGetPropertySize(
    _ inAQ: AudioQueueRef, _ inID: AudioQueuePropertyID, _ outDataSize: UnsafeMutablePointer<UInt32>
) -> OSStatus {
    guard let queue = liveQueues.lookup(inAQ) else { return kAudio_ParamError }
    guard let size = propertySize(queue, inID) else { return kAudioQueueErr_InvalidProperty }
    outDataSize.pointee = UInt32(size)
    return noErr
}

/// Reads a property. `ioDataSize` holds the room at `outData` and receives the bytes written; too
/// little room gets `kAudioQueueErr_InvalidPropertySize`.
///
/// `kAudioQueueProperty_ChannelLayout` is the layout set, or Mono or Stereo for a one- or
/// two-channel queue without one (more channels without one: `kAudioQueueErr_InvalidPropertyValue`).
///
/// `kAudioQueueProperty_DecodeBufferSizeFrames` (playback queues only) is the size in frames of
/// the buffer the queue decodes into: each enqueued buffer's audio is decoded (or, for linear PCM,
/// converted to float) whole, off the server thread, into a decode buffer of its own, sized from
/// the buffer's bytes (whole packets of the largest size for compressed formats) and grown when
/// a buffer's packets decode to more. The value read is the smallest of them (before any buffer
/// is allocated, the value set, or 0). Setting it makes every decode buffer at least that size
/// (memory set aside ahead, so no enqueue has to allocate); a value below one packet's frames of
/// the queue's format, or above 2^20 frames, cannot be honoured:
/// `kAudioQueueErr_InvalidPropertyValue`. The decode buffer never limits how much of a buffer is
/// decoded at once, as Apple's smaller one does.
///
/// Device properties describe the sound server's device the queue's stream is connected to (the
/// default sink or source before the stream opens). `kAudioQueueProperty_CurrentDevice` is the
/// server's device name (a PulseAudio sink or source name). Level meters need
/// `kAudioQueueProperty_EnableLevelMetering` set to 1 and report RMS and peak since the previous
/// read, one ``AudioQueueLevelMeterState`` per channel of the queue's format.
@discardableResult
public func AudioQueueGetProperty(
    _ inAQ: AudioQueueRef, _ inID: AudioQueuePropertyID, _ outData: UnsafeMutableRawPointer,
    _ ioDataSize: UnsafeMutablePointer<UInt32>
) -> OSStatus {
    guard let queue = liveQueues.lookup(inAQ) else { return kAudio_ParamError }
    guard let size = propertySize(queue, inID) else { return kAudioQueueErr_InvalidProperty }
    if inID == kAudioQueueProperty_ChannelLayout {
        queue.lock.lock()
        let set = queue.channelLayout
        queue.lock.unlock()
        var layout: [UInt8]
        if let set {
            layout = set
        } else {
            // Unset: one or two channels play as mono or stereo; more have no layout to report.
            guard queue.pcm.channels <= 2 else { return kAudioQueueErr_InvalidPropertyValue }
            var value = AudioChannelLayout()
            value.mChannelLayoutTag = queue.pcm.channels == 1 ? kAudioChannelLayoutTag_Mono : kAudioChannelLayoutTag_Stereo
            layout = bytes(value)
        }
        return PropertyData.copy(layout, to: outData, size: ioDataSize) ? noErr : kAudioQueueErr_InvalidPropertySize
    }
    let room = Int(ioDataSize.pointee)
    let isMeter = inID == kAudioQueueProperty_CurrentLevelMeter || inID == kAudioQueueProperty_CurrentLevelMeterDB
    // Meters may be read for fewer channels than the queue has; everything else needs full room.
    let needed = isMeter ? MemoryLayout<AudioQueueLevelMeterState>.stride : size
    guard room >= needed else { return kAudioQueueErr_InvalidPropertySize }

    switch inID {
    case kAudioQueueProperty_IsRunning:
        queue.lock.lock()
        outData.storeBytes(of: queue.isRunning, as: UInt32.self)
        queue.lock.unlock()
    case kAudioQueueProperty_StreamDescription:
        outData.storeBytes(of: queue.format, as: AudioStreamBasicDescription.self)
    case kAudioQueueProperty_EnableLevelMetering:
        queue.lock.lock()
        outData.storeBytes(of: queue.meteringEnabled ? 1 : 0, as: UInt32.self)
        queue.lock.unlock()
    case kAudioQueueProperty_DecodeBufferSizeFrames:
        queue.lock.lock()
        outData.storeBytes(of: queue.decodeBufferSizeFrames, as: UInt32.self)
        queue.lock.unlock()
    case kAudioQueueProperty_HardwareCodecPolicy:
        queue.lock.lock()
        outData.storeBytes(of: queue.hardwareCodecPolicy, as: UInt32.self)
        queue.lock.unlock()
    case kAudioQueueProperty_EnableTimePitch, kAudioQueueProperty_TimePitchAlgorithm, kAudioQueueProperty_TimePitchBypass:
        queue.lock.lock()
        let t = queue.timePitch
        let value: UInt32
        switch inID {
        case kAudioQueueProperty_EnableTimePitch: value = t.enabled ? 1 : 0
        case kAudioQueueProperty_TimePitchBypass: value = t.bypass ? 1 : 0
        default: value = t.algorithm
        }
        queue.lock.unlock()
        outData.storeBytes(of: value, as: UInt32.self)
    case kAudioQueueProperty_MagicCookie:
        queue.lock.lock()
        let cookie = queue.codec?.magicCookie ?? []
        queue.lock.unlock()
        return PropertyData.copy(cookie, to: outData, size: ioDataSize) ? noErr : kAudioQueueErr_InvalidPropertySize
    case kAudioQueueProperty_MaximumOutputPacketSize:
        let size = queue.codec?.maximumPacketSize ?? queue.pcm.bytesPerFrame
        outData.storeBytes(of: UInt32(size), as: UInt32.self)
    case kAudioQueueProperty_ConverterError:
        queue.lock.lock()
        outData.storeBytes(of: UInt32(bitPattern: queue.codec?.lastError ?? noErr), as: UInt32.self)
        queue.lock.unlock()
    case kAudioQueueDeviceProperty_SampleRate, kAudioQueueDeviceProperty_NumberChannels, kAudioQueueProperty_CurrentDevice:
        guard let device = currentDevice(queue) else { return kAudioQueueErr_InvalidDevice }
        if inID == kAudioQueueDeviceProperty_SampleRate {
            outData.storeBytes(of: device.sampleRate, as: Float64.self)
        } else if inID == kAudioQueueDeviceProperty_NumberChannels {
            outData.storeBytes(of: UInt32(device.channels), as: UInt32.self)
        } else {
            // A new reference, written over what the caller's variable holds (nil, as apps pass it).
            outData.bindMemory(to: CFString?.self, capacity: 1).initialize(to: device.name as CFString)
        }
    case kAudioQueueProperty_CurrentLevelMeter, kAudioQueueProperty_CurrentLevelMeterDB:
        queue.lock.lock()
        let enabled = queue.meteringEnabled
        queue.lock.unlock()
        guard enabled else { return kAudioQueueErr_InvalidPropertyValue }
        let levels = queue.readMeters()
        let count = min(levels.count, room / MemoryLayout<AudioQueueLevelMeterState>.stride)
        let out = outData.bindMemory(to: AudioQueueLevelMeterState.self, capacity: count)
        for c in 0..<count {
            let l = levels[c]
            out[c] = inID == kAudioQueueProperty_CurrentLevelMeter
                ? l : AudioQueueLevelMeterState(mAveragePower: Decibels.amplitude(l.mAveragePower), mPeakPower: Decibels.amplitude(l.mPeakPower))
        }
        ioDataSize.pointee = UInt32(count * MemoryLayout<AudioQueueLevelMeterState>.stride)
        return noErr
    default:
        return kAudioQueueErr_InvalidProperty
    }
    ioDataSize.pointee = UInt32(size)
    return noErr
}

private func currentDevice(_ queue: AudioQueueObject) -> HALDeviceInfo? {
    queue.lock.lock()
    let stream = queue.stream
    let name = queue.deviceName
    queue.lock.unlock()
    if let stream { return stream.device }
    guard let backend = try? AudioSystem.current.backend() else { return nil }
    return try? queue.isOutput ? backend.outputDevice(named: name) : backend.inputDevice(named: name)
}

/// Sets a property: `kAudioQueueProperty_EnableLevelMetering` (UInt32),
/// `kAudioQueueProperty_DecodeBufferSizeFrames` (UInt32, playback queues),
/// `kAudioQueueProperty_ChannelLayout` (an `AudioChannelLayout` of the format's channel count,
/// before the queue first primes or starts: it becomes the server stream's channel map, so the
/// server plays each channel where its label says, or records each from there; a mono queue plays
/// as mono whatever its layout; the virtual backend and offline rendering keep channels in the
/// queue's order), or `kAudioQueueProperty_CurrentDevice` (a `CFString?` naming a server device;
/// `nil` for the default), which applies when the queue's stream next opens. Read-only properties
/// get `kAudioQueueErr_InvalidProperty`.
@discardableResult
public func AudioQueueSetProperty(
    _ inAQ: AudioQueueRef, _ inID: AudioQueuePropertyID, _ inData: UnsafeRawPointer, _ inDataSize: UInt32
) -> OSStatus {
    guard let queue = liveQueues.lookup(inAQ) else { return kAudio_ParamError }
    if inID == kAudioQueueProperty_MagicCookie {
        guard let codec = queue.codec, codec.isOutput else { return kAudioQueueErr_InvalidProperty }
        queue.lock.lock()
        defer { queue.lock.unlock() }
        codec.magicCookie = Array(UnsafeRawBufferPointer(start: inData, count: Int(inDataSize)))
        return noErr
    }
    if inID == kAudioQueueProperty_ChannelLayout {
        queue.lock.lock()
        defer { queue.lock.unlock() }
        return queue.setChannelLayout(Array(UnsafeRawBufferPointer(start: inData, count: Int(inDataSize))))
    }
    guard let size = propertySize(queue, inID) else { return kAudioQueueErr_InvalidProperty }
    guard Int(inDataSize) >= size else { return kAudioQueueErr_InvalidPropertySize }
    queue.lock.lock()
    defer { queue.lock.unlock() }
    switch inID {
    case kAudioQueueProperty_EnableLevelMetering:
        queue.meteringEnabled = inData.load(as: UInt32.self) != 0
        queue.engine.metering.store(queue.meteringEnabled, ordering: .relaxed)
        while queue.engine.meters.pop() != nil {}
    case kAudioQueueProperty_DecodeBufferSizeFrames:
        guard queue.setDecodeBufferSizeFrames(inData.load(as: UInt32.self)) else { return kAudioQueueErr_InvalidPropertyValue }
    case kAudioQueueProperty_CurrentDevice:
        if queue.isRunning == 1 { return kAudioQueueErr_InvalidRunState }
        queue.deviceName = inData.assumingMemoryBound(to: CFString?.self).pointee.map { $0 as String }
    case kAudioQueueProperty_EnableTimePitch:
        if queue.isRunning == 1 { return kAudioQueueErr_InvalidRunState }
        queue.timePitch.enabled = inData.load(as: UInt32.self) != 0
    case kAudioQueueProperty_TimePitchAlgorithm:
        let algorithm = inData.load(as: UInt32.self)
        guard QueueTimePitch.isAlgorithm(algorithm) else { return kAudioQueueErr_InvalidPropertyValue }
        if algorithm != queue.timePitch.algorithm { queue.timePitch.reset() }
        queue.timePitch.algorithm = algorithm
    case kAudioQueueProperty_TimePitchBypass:
        let bypass = inData.load(as: UInt32.self) != 0
        // What the processor held from before a bypass is not played after it.
        if bypass != queue.timePitch.bypass { queue.timePitch.reset() }
        queue.timePitch.bypass = bypass
    case kAudioQueueProperty_HardwareCodecPolicy:
        let policy = inData.load(as: UInt32.self)
        guard policy <= kAudioQueueHardwareCodecPolicy_PreferHardware else { return kAudioQueueErr_InvalidPropertyValue }
        if queue.isRunning == 1 { return kAudioQueueErr_InvalidRunState }
        queue.hardwareCodecPolicy = policy
    default:
        return kAudioQueueErr_InvalidProperty
    }
    return noErr
}

/// Calls `inProc` on the queue's callback context whenever property `inID` changes.
@discardableResult
public func AudioQueueAddPropertyListener(
    _ inAQ: AudioQueueRef, _ inID: AudioQueuePropertyID, _ inProc: AudioQueuePropertyListenerProc,
    _ inUserData: UnsafeMutableRawPointer?
) -> OSStatus {
    guard let queue = liveQueues.lookup(inAQ) else { return kAudio_ParamError }
    guard propertySize(queue, inID) != nil else { return kAudioQueueErr_InvalidProperty }
    queue.lock.lock()
    queue.listeners.append((inID, inProc, inUserData))
    queue.lock.unlock()
    return noErr
}

/// Removes a listener added with the same property, function and user data.
@discardableResult
public func AudioQueueRemovePropertyListener(
    _ inAQ: AudioQueueRef, _ inID: AudioQueuePropertyID, _ inProc: AudioQueuePropertyListenerProc,
    _ inUserData: UnsafeMutableRawPointer?
) -> OSStatus {
    guard let queue = liveQueues.lookup(inAQ) else { return kAudio_ParamError }
    queue.lock.lock()
    defer { queue.lock.unlock() }
    let procAddress = unsafeBitCast(inProc, to: UnsafeRawPointer.self)
    guard let index = queue.listeners.firstIndex(where: {
        $0.id == inID && unsafeBitCast($0.proc, to: UnsafeRawPointer.self) == procAddress && $0.userData == inUserData
    }) else { return kAudioQueueErr_InvalidProperty }
    queue.listeners.remove(at: index)
    return noErr
}
