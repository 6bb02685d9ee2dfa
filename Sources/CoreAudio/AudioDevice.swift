public import Dispatch
import AudioHAL
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

// Apple's IOProcs (AudioHardware.h): the user's own I/O callback on a device, called on the
// device's real-time I/O thread with the device's buffers, as the HAL calls it on a Mac.

public typealias AudioDeviceIOProc =
    @convention(c) (
        AudioObjectID, UnsafePointer<AudioTimeStamp>, UnsafePointer<AudioBufferList>, UnsafePointer<AudioTimeStamp>,
        UnsafeMutablePointer<AudioBufferList>, UnsafePointer<AudioTimeStamp>, UnsafeMutableRawPointer?
    ) -> OSStatus
public typealias AudioDeviceIOBlock = (
    UnsafePointer<AudioTimeStamp>, UnsafePointer<AudioBufferList>, UnsafePointer<AudioTimeStamp>, UnsafeMutablePointer<AudioBufferList>,
    UnsafePointer<AudioTimeStamp>
) -> Void
/// An IOProc's registration. As on Apple's platforms it has the IOProc's type; here it is a token
/// that is never called, only handed back to ``AudioDeviceStart(_:_:)`` and friends.
public typealias AudioDeviceIOProcID = AudioDeviceIOProc

/// Registers `inProc` on the device; ``AudioDeviceStart(_:_:)`` with the ID it returns starts it.
///
/// The IOProc runs on the device's I/O thread (one per device and process, real-time where the
/// system allows), once per `kAudioDevicePropertyBufferFrameSize` frames (512 unless set), with
/// the device's own format (`kAudioStreamPropertyVirtualFormat`: interleaved 32-bit float at the
/// device's rate and channel count): an output device's IOProc fills the output buffer list (one
/// buffer, zeroed before the call) and gets an empty input list, an input device's gets one
/// input buffer and an empty output list. Several IOProcs on one output are mixed. It must do
/// what a real-time callback may: no locks, no allocation, no waiting.
@discardableResult
public func AudioDeviceCreateIOProcID(
    _ inDevice: AudioObjectID, _ inProc: AudioDeviceIOProc, _ inClientData: UnsafeMutableRawPointer?,
    _ outIOProcID: UnsafeMutablePointer<AudioDeviceIOProcID?>
) -> OSStatus {
    DeviceIO.shared.create(device: inDevice, callback: .proc(inProc, inClientData), id: outIOProcID)
}

/// As ``AudioDeviceCreateIOProcID(_:_:_:_:)`` for a block. With a dispatch queue, each call runs
/// the block through `DispatchQueue.sync` from the I/O thread (which makes it wait for whatever
/// else the queue runs: give a queue only to keep the block away from other work of yours);
/// without, on the I/O thread.
@discardableResult
public func AudioDeviceCreateIOProcIDWithBlock(
    _ outIOProcID: UnsafeMutablePointer<AudioDeviceIOProcID?>, _ inDevice: AudioObjectID, _ inDispatchQueue: DispatchQueue?,
    _ inIOBlock: @escaping AudioDeviceIOBlock
) -> OSStatus {
    DeviceIO.shared.create(device: inDevice, callback: .block(inDispatchQueue, inIOBlock), id: outIOProcID)
}

/// Unregisters an IOProc, stopping it first if it runs.
@discardableResult
public func AudioDeviceDestroyIOProcID(_ inDevice: AudioObjectID, _ inIOProcID: AudioDeviceIOProcID) -> OSStatus {
    DeviceIO.shared.destroy(device: inDevice, id: inIOProcID)
}

/// Starts an IOProc (the device's I/O starts with the first); `nil` starts the device without one.
@discardableResult
public func AudioDeviceStart(_ inDevice: AudioObjectID, _ inProcID: AudioDeviceIOProcID?) -> OSStatus {
    DeviceIO.shared.start(device: inDevice, id: inProcID)
}

/// Stops an IOProc (the device's I/O stops with the last); `nil` undoes a start without one.
/// Called from the IOProc itself, it is not called again after it returns.
@discardableResult
public func AudioDeviceStop(_ inDevice: AudioObjectID, _ inProcID: AudioDeviceIOProcID?) -> OSStatus {
    DeviceIO.shared.stop(device: inDevice, id: inProcID)
}

/// The device's current time: the frame being played or recorded now, and the host time now.
/// `kAudioHardwareNotRunningError` while no IOProc runs on it.
@discardableResult
public func AudioDeviceGetCurrentTime(_ inDevice: AudioObjectID, _ outTime: UnsafeMutablePointer<AudioTimeStamp>) -> OSStatus {
    DeviceIO.shared.currentTime(device: inDevice, outTime)
}

/// The IOProcs of the process, by device.
final class DeviceIO: Sendable {
    static let shared = DeviceIO()

    enum Callback {
        case proc(AudioDeviceIOProc, UnsafeMutableRawPointer?)
        case block(DispatchQueue?, AudioDeviceIOBlock)
    }

    /// One device's I/O: its registrations, and its stream while any runs.
    private final class Runner {
        let device: AudioObjectID
        let client: DeviceIOClient
        var stream: (any HALStream)?
        /// Registrations by token, each with its slot in ``client``.
        var registered: [UInt: Int] = [:]
        /// ``AudioDeviceStart(_:_:)`` calls without an IOProc not yet undone.
        var bareStarts = 0
        init(device: AudioObjectID, client: DeviceIOClient) {
            self.device = device
            self.client = client
        }
        var isRunning: Bool { stream != nil }
        var wanted: Bool { bareStarts > 0 || client.activeCount > 0 }
    }

    private struct State {
        var runners: [AudioObjectID: Runner] = [:]
        var nextToken: UInt = 0x10
    }
    private let state = Mutex(State())

    private static func token(_ id: AudioDeviceIOProcID) -> UInt { UInt(bitPattern: unsafeBitCast(id, to: UnsafeRawPointer.self)) }

    func isRunning(_ device: AudioObjectID) -> Bool { state.withLock { $0.runners[device]?.isRunning ?? false } }

    func create(device: AudioObjectID, callback: Callback, id: UnsafeMutablePointer<AudioDeviceIOProcID?>) -> OSStatus {
        guard let entry = try? Hardware.shared.snapshot().device(device) else { return kAudioHardwareBadDeviceError }
        return state.withLock { s in
            let runner = s.runners[device] ?? Runner(device: device, client: DeviceIOClient(device: device, output: entry.isOutput))
            guard let slot = runner.client.claimSlot(callback) else { return kAudioHardwareIllegalOperationError }
            s.runners[device] = runner
            s.nextToken += 0x10
            runner.registered[s.nextToken] = slot
            id.pointee = unsafeBitCast(UnsafeRawPointer(bitPattern: s.nextToken)!, to: AudioDeviceIOProcID.self)
            return kAudioHardwareNoError
        }
    }

    func destroy(device: AudioObjectID, id: AudioDeviceIOProcID) -> OSStatus {
        let result = stop(device: device, id: id)
        guard result == kAudioHardwareNoError else { return result }
        return state.withLock { s in
            guard let runner = s.runners[device], let slot = runner.registered.removeValue(forKey: Self.token(id)) else {
                return kAudioHardwareIllegalOperationError
            }
            runner.client.releaseSlot(slot)
            return kAudioHardwareNoError
        }
    }

    func start(device: AudioObjectID, id: AudioDeviceIOProcID?) -> OSStatus {
        guard let entry = try? Hardware.shared.snapshot().device(device) else { return kAudioHardwareBadDeviceError }
        let frames = Hardware.shared.bufferFrames(device)
        return state.withLock { s in
            let runner = s.runners[device] ?? Runner(device: device, client: DeviceIOClient(device: device, output: entry.isOutput))
            s.runners[device] = runner
            if let id {
                guard let slot = runner.registered[Self.token(id)] else { return kAudioHardwareIllegalOperationError }
                runner.client.setActive(slot, true)
            } else {
                runner.bareStarts += 1
            }
            guard runner.stream == nil else { return kAudioHardwareNoError }
            do {
                try open(runner, entry.info, frames: frames)
                return kAudioHardwareNoError
            } catch {
                if let id, let slot = runner.registered[Self.token(id)] { runner.client.setActive(slot, false) }
                if id == nil { runner.bareStarts -= 1 }
                return kAudioHardwareUnspecifiedError
            }
        }
    }

    private func open(_ runner: Runner, _ info: HALDeviceInfo, frames: UInt32) throws(HALError) {
        let backend = try AudioSystem.current.backend()
        runner.client.prepare(frames: Int(frames), channels: info.channels, rate: info.sampleRate)
        // Two I/O buffers in the server, as a HAL device double-buffers.
        var request = HALStreamRequest(
            format: HALStreamFormat(sampleRate: info.sampleRate, channels: info.channels), bufferDuration: 2 * Double(frames) / info.sampleRate,
            name: "AudioDevice IOProc", startCorked: false, device: info.name)
        request.ownThread = true
        runner.stream = runner.client.isOutput
            ? try backend.openOutput(request, source: runner.client) : try backend.openInput(request, sink: runner.client)
    }

    func stop(device: AudioObjectID, id: AudioDeviceIOProcID?) -> OSStatus {
        var status = kAudioHardwareNoError
        var fromIOThread = false
        var running: (any HALStream)?
        let closing: (any HALStream)? = state.withLock { s in
            guard let runner = s.runners[device] else {
                status = id == nil ? kAudioHardwareNotRunningError : kAudioHardwareIllegalOperationError
                return nil
            }
            fromIOThread = runner.client.isIOThread
            if let id {
                guard let slot = runner.registered[Self.token(id)] else {
                    status = kAudioHardwareIllegalOperationError
                    return nil
                }
                runner.client.setActive(slot, false)
            } else {
                guard runner.bareStarts > 0 else { return nil }
                runner.bareStarts -= 1
            }
            running = runner.stream
            guard !runner.wanted, let stream = runner.stream else { return nil }
            runner.stream = nil
            return stream
        }
        guard let closing else {
            // The I/O goes on for others: once the I/O thread is out of its current cycle, the
            // stopped IOProc is not called again (outside the lock, which an IOProc may want).
            if !fromIOThread { running?.withCallbacksBlocked {} }
            return status
        }
        if fromIOThread {
            // From inside the IOProc: the I/O thread cannot end itself; a helper closes it.
            let stream = UncheckedBox(closing)
            DispatchQueue.global().async { stream.value.close() }
        } else {
            closing.close()
        }
        return kAudioHardwareNoError
    }

    /// The I/O buffer size changed: a running device restarts its I/O at the new size.
    func bufferSizeChanged(_ device: AudioObjectID) {
        guard let entry = try? Hardware.shared.snapshot().device(device) else { return }
        let frames = Hardware.shared.bufferFrames(device)
        state.withLock { s in
            guard let runner = s.runners[device], let stream = runner.stream else { return }
            stream.close()
            runner.stream = nil
            try? open(runner, entry.info, frames: frames)
        }
    }

    func currentTime(device: AudioObjectID, _ out: UnsafeMutablePointer<AudioTimeStamp>) -> OSStatus {
        guard let client = state.withLock({ s in s.runners[device].flatMap { $0.isRunning ? $0.client : nil } }) else {
            return (try? Hardware.shared.snapshot().device(device)) == nil ? kAudioHardwareBadDeviceError : kAudioHardwareNotRunningError
        }
        guard let now = client.currentTime() else { return kAudioHardwareNotReadyError }
        out.pointee = AudioTimeStamp(
            mSampleTime: Double(now.sampleTime), mHostTime: now.hostTime, mRateScalar: 1, mWordClockTime: 0, mSMPTETime: SMPTETime(),
            mFlags: [.sampleTimeValid, .hostTimeValid, .rateScalarValid], mReserved: 0)
        return kAudioHardwareNoError
    }
}
