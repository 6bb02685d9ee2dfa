public import CoreAudioTypes
public import CAudioQueueTypes

// Apple's AUComponent.h and AudioOutputUnit.h calls. Each finds the unit (a disposed or foreign
// reference is `kAudio_ParamError`, as Apple answers for a unit it does not know), takes its lock
// for control calls, and calls listeners after, outside it.

private func withUnit(_ ref: AudioUnit?, _ body: (AudioUnitObject) -> OSStatus) -> OSStatus {
    guard let unit = liveUnits.lookup(ref) else { return kAudio_ParamError }
    return body(unit)
}

/// Makes what the unit needs to render (buffers for its formats and slice size); the formats
/// and slice size are fixed until ``AudioUnitUninitialize(_:)``.
@discardableResult
public func AudioUnitInitialize(_ inUnit: AudioUnit) -> OSStatus {
    withUnit(inUnit) { unit in unit.lock.withLock { _ in unit.isInitialized ? noErr : unit.initialize() } }
}

@discardableResult
public func AudioUnitUninitialize(_ inUnit: AudioUnit) -> OSStatus {
    withUnit(inUnit) { unit in
        unit.lock.withLock { _ in unit.uninitialize() }
        return noErr
    }
}

@discardableResult
public func AudioUnitGetPropertyInfo(
    _ inUnit: AudioUnit, _ inID: AudioUnitPropertyID, _ inScope: AudioUnitScope, _ inElement: AudioUnitElement,
    _ outDataSize: UnsafeMutablePointer<UInt32>?, _ outWritable: UnsafeMutablePointer<DarwinBoolean>?
) -> OSStatus {
    withUnit(inUnit) { unit in
        guard inScope <= kAudioUnitScope_Output else { return kAudioUnitErr_InvalidScope }
        guard let info = unit.lock.withLock({ _ in unit.propertyInfo(inID, scope: inScope, element: inElement) }) else {
            return kAudioUnitErr_InvalidProperty
        }
        outDataSize?.pointee = UInt32(info.size)
        outWritable?.pointee = DarwinBoolean(info.writable)
        return noErr
    }
}

@discardableResult
public func AudioUnitGetProperty(
    _ inUnit: AudioUnit, _ inID: AudioUnitPropertyID, _ inScope: AudioUnitScope, _ inElement: AudioUnitElement,
    _ outData: UnsafeMutableRawPointer, _ ioDataSize: UnsafeMutablePointer<UInt32>
) -> OSStatus {
    withUnit(inUnit) { unit in
        guard inScope <= kAudioUnitScope_Output else { return kAudioUnitErr_InvalidScope }
        switch unit.lock.withLock({ _ in unit.getProperty(inID, scope: inScope, element: inElement) }) {
        case let .failure(error):
            return error.status
        case let .success(value):
            // Apple copies what fits of a variable-size value and says how much it wrote; a
            // fixed-size value needs its whole size.
            if inID == kAudioUnitProperty_ParameterList {
                let n = min(Int(ioDataSize.pointee) / 4 * 4, value.count)
                value.withUnsafeBytes { if n > 0 { outData.copyMemory(from: $0.baseAddress!, byteCount: n) } }
                ioDataSize.pointee = UInt32(n)
                return noErr
            }
            return PropertyData.copy(value, to: outData, size: ioDataSize) ? noErr : kAudioUnitErr_InvalidPropertyValue
        }
    }
}

@discardableResult
public func AudioUnitSetProperty(
    _ inUnit: AudioUnit, _ inID: AudioUnitPropertyID, _ inScope: AudioUnitScope, _ inElement: AudioUnitElement,
    _ inData: UnsafeRawPointer?, _ inDataSize: UInt32
) -> OSStatus {
    guard let unit = liveUnits.lookup(inUnit) else { return kAudio_ParamError }
    guard inScope <= kAudioUnitScope_Output else { return kAudioUnitErr_InvalidScope }
    let (status, listeners) = unit.lock.withLock { _ in
        (unit.setProperty(inID, scope: inScope, element: inElement, data: inData, size: inDataSize), unit.listeners.filter { $0.0 == inID })
    }
    if status == noErr {
        for (_, proc, data) in listeners { proc(data, inUnit, inID, inScope, inElement) }
    }
    return status
}

/// Calls `inProc` on the thread that changes the property, after the change.
@discardableResult
public func AudioUnitAddPropertyListener(
    _ inUnit: AudioUnit, _ inID: AudioUnitPropertyID, _ inProc: AudioUnitPropertyListenerProc, _ inProcUserData: UnsafeMutableRawPointer?
) -> OSStatus {
    withUnit(inUnit) { unit in
        unit.lock.withLock { _ in unit.listeners.append((inID, inProc, inProcUserData)) }
        return noErr
    }
}

@discardableResult
public func AudioUnitRemovePropertyListenerWithUserData(
    _ inUnit: AudioUnit, _ inID: AudioUnitPropertyID, _ inProc: AudioUnitPropertyListenerProc, _ inProcUserData: UnsafeMutableRawPointer?
) -> OSStatus {
    withUnit(inUnit) { unit in
        unit.lock.withLock { _ in
            let proc = unsafeBitCast(inProc, to: UnsafeRawPointer.self)
            unit.listeners.removeAll { $0.0 == inID && unsafeBitCast($0.1, to: UnsafeRawPointer.self) == proc && $0.2 == inProcUserData }
        }
        return noErr
    }
}

/// An initialized unit is found without a lock (parameters are set and read from render
/// callbacks); others through the table.
private func withParameterUnit(_ ref: AudioUnit, _ body: (AudioUnitObject) -> OSStatus) -> OSStatus {
    if let status = RenderRegistry.withUnit(ref, body) { return status }
    return withUnit(ref, body)
}

/// Any thread, the render thread included: an atomic read.
@discardableResult
public func AudioUnitGetParameter(
    _ inUnit: AudioUnit, _ inID: AudioUnitParameterID, _ inScope: AudioUnitScope, _ inElement: AudioUnitElement,
    _ outValue: UnsafeMutablePointer<AudioUnitParameterValue>
) -> OSStatus {
    withParameterUnit(inUnit) { unit in
        switch unit.parameterIndex(inID, scope: inScope, element: inElement) {
        case let .failure(e): return e.status
        case let .success(i):
            outValue.pointee = unit.parameters[i]
            return noErr
        }
    }
}

/// Any thread: an atomic write the render thread picks up at its next slice. Values outside the
/// parameter's range are clamped; `inBufferOffsetInFrames` is not used (the change applies from
/// the next slice).
@discardableResult
public func AudioUnitSetParameter(
    _ inUnit: AudioUnit, _ inID: AudioUnitParameterID, _ inScope: AudioUnitScope, _ inElement: AudioUnitElement,
    _ inValue: AudioUnitParameterValue, _ inBufferOffsetInFrames: UInt32
) -> OSStatus {
    withParameterUnit(inUnit) { unit in
        guard inValue.isFinite else { return kAudioUnitErr_InvalidParameterValue }
        switch unit.parameterIndex(inID, scope: inScope, element: inElement) {
        case let .failure(e): return e.status
        case let .success(i):
            unit.parameters.set(i, inValue)
            return noErr
        }
    }
}

/// Renders `inNumberFrames` frames of output bus `inOutputBusNumber` into `ioData`, pulling the
/// unit's inputs. Buffers whose `mData` is nil get the unit's own. On an I/O unit, bus 1 is the
/// captured input.
@discardableResult
public func AudioUnitRender(
    _ inUnit: AudioUnit, _ ioActionFlags: UnsafeMutablePointer<AudioUnitRenderActionFlags>?, _ inTimeStamp: UnsafePointer<AudioTimeStamp>,
    _ inOutputBusNumber: UInt32, _ inNumberFrames: UInt32, _ ioData: UnsafeMutablePointer<AudioBufferList>
) -> OSStatus {
    // The render path takes no lock and counts no references: initialized units are found in a
    // lock-free table (``RenderRegistry``).
    var none = AudioUnitRenderActionFlags()
    let result = RenderRegistry.withUnit(inUnit) { unit in
        if let ioActionFlags { return unit.render(flags: ioActionFlags, time: inTimeStamp, bus: inOutputBusNumber, frames: inNumberFrames, data: ioData) }
        return unit.render(flags: &none, time: inTimeStamp, bus: inOutputBusNumber, frames: inNumberFrames, data: ioData)
    }
    if let result { return result }
    return liveUnits.lookup(inUnit) == nil ? kAudio_ParamError : kAudioUnitErr_Uninitialized
}

/// Clears the unit's memory of past audio (filter and delay state). The unit clears it at the
/// start of its next render, on the render thread, which owns that state; nothing but a render
/// could tell the difference.
@discardableResult
public func AudioUnitReset(_ inUnit: AudioUnit, _ inScope: AudioUnitScope, _ inElement: AudioUnitElement) -> OSStatus {
    withUnit(inUnit) { unit in
        unit.requestReset()
        return noErr
    }
}

/// Starts an I/O unit: its render callback (or connected unit) is pulled on a real-time thread
/// at the server's period, and its input callback called as input arrives.
@discardableResult
public func AudioOutputUnitStart(_ ci: AudioUnit) -> OSStatus {
    withUnit(ci) { unit in
        guard let io = unit as? IOUnit else { return kAudioUnitErr_InvalidProperty }
        return io.start()
    }
}

@discardableResult
public func AudioOutputUnitStop(_ ci: AudioUnit) -> OSStatus {
    withUnit(ci) { unit in
        guard let io = unit as? IOUnit else { return kAudioUnitErr_InvalidProperty }
        return io.stop()
    }
}
