import AudioHAL
import Dispatch
import Foundation
import Synchronization

/// The notification thread of `import CoreAudio` ("CoreAudio notifications", one per process,
/// started by the first use of the device API): it sleeps on the audio environment's events,
/// compares the server's devices after each with what it last told listeners, and calls the
/// property listeners whose addresses changed: procs on this thread, as Apple's HAL calls them on
/// its own notification thread; blocks on the dispatch queue they were added with (this thread
/// when none was given).
final class HardwareNotifier: @unchecked Sendable {
    static let shared = HardwareNotifier()

    /// A registered listener.
    struct Listener: @unchecked Sendable {
        enum Callback {
            case proc(AudioObjectPropertyListenerProc, UnsafeMutableRawPointer?)
            case block(DispatchQueue?, AudioObjectPropertyListenerBlock)
        }
        let object: AudioObjectID
        let address: AudioObjectPropertyAddress
        let callback: Callback

        /// Whether this is the registration `other` names (same object, address and callback).
        func same(as other: Listener) -> Bool {
            guard object == other.object, address == other.address else { return false }
            switch (callback, other.callback) {
            case let (.proc(a, da), .proc(b, db)): return unsafeBitCast(a, to: UnsafeRawPointer.self) == unsafeBitCast(b, to: UnsafeRawPointer.self) && da == db
            case let (.block(qa, a), .block(qb, b)): return qa === qb && Self.identity(a) == Self.identity(b)
            default: return false
            }
        }

        /// A closure's identity: its function and context, so that the closure value given to
        /// `AudioObjectAddPropertyListenerBlock` removes the same registration when given again.
        ///
        /// Read through a struct of the block's own type: handing the closure itself to a generic
        /// (`withUnsafeBytes(of:)`, `unsafeBitCast`) would wrap it in a fresh thunk each time.
        static func identity(_ block: @escaping AudioObjectPropertyListenerBlock) -> [Int] {
            struct Holder { let block: AudioObjectPropertyListenerBlock }
            var holder = Holder(block: block)
            return withUnsafeBytes(of: &holder) { Array($0.bindMemory(to: Int.self)) }
        }
    }

    private let listeners = Mutex<[Listener]>([])
    /// The backend whose events the thread follows now.
    private let followed = Mutex<(any AudioBackend)?>(nil)

    /// Whether the thread follows `backend`'s events now (for tests that switch environments).
    func isFollowing(_ backend: any AudioBackend) -> Bool { followed.withLock { $0 === backend } }
    private let started = Atomic<Bool>(false)

    func add(_ listener: Listener) { listeners.withLock { $0.append(listener) } }

    /// Removes one registration; `false` when there was none.
    func remove(_ listener: Listener) -> Bool {
        listeners.withLock { list in
            guard let n = list.firstIndex(where: { $0.same(as: listener) }) else { return false }
            list.remove(at: n)
            return true
        }
    }

    /// Starts the thread on first use, subscribed to the environment's events before this returns,
    /// so that a change made from here on is seen.
    func start() {
        guard !started.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let first = follow()
        let thread = Thread { [self] in run(following: first) }
        thread.name = "CoreAudio notifications"
        thread.start()
    }

    /// Subscribes to the current environment's backend, connecting it if need be.
    /// The backend whose server went away: the audio session's event thread lets it go, and until
    /// then the environment still hands it out; following it would wait on a dead connection.
    /// Held (not just its identity) so that no new backend can take its address meanwhile.
    private var lostBackend: (any AudioBackend)?

    private func follow() -> (any AudioBackend, HALEvents.Subscription)? {
        guard let backend = try? AudioSystem.current.backend(), backend !== lostBackend,
            let subscription = backend.events.subscribe()
        else { return nil }
        lostBackend = nil
        followed.withLock { $0 = backend }
        return (backend, subscription)
    }

    private func run(following first: (any AudioBackend, HALEvents.Subscription)?) {
        var following = first
        var told = (try? Hardware.shared.snapshot()) ?? HardwareSnapshot()
        var backoff = 0.05
        while true {
            guard let (backend, subscription) = following else {
                // No server: nothing exists to wait on until one answers (as the audio session's
                // event thread, this retries, 50 ms doubling to 1 s).
                Thread.sleep(forTimeInterval: backoff)
                backoff = min(backoff * 2, 1)
                following = follow()
                if following != nil {
                    backoff = 0.05
                    Hardware.shared.invalidate()
                    told = notify(since: told)
                }
                continue
            }
            subscription.wakeup.wait()
            let raised = subscription.take()
            if raised.contains(.retired) || raised.contains(.serverLost) {
                if raised.contains(.serverLost) { lostBackend = backend }
                backend.events.unsubscribe(subscription)
                followed.withLock { $0 = nil }
                following = nil
            }
            guard !raised.intersection([.devices, .retired, .serverLost]).isEmpty else { continue }
            Hardware.shared.invalidate()
            if following == nil { following = follow() }
            if following != nil { told = notify(since: told) }
        }
    }

    /// Tells the listeners what changed since `old`; returns the snapshot told.
    private func notify(since old: HardwareSnapshot) -> HardwareSnapshot {
        guard let new = try? Hardware.shared.snapshot() else { return old }
        let changes = Self.changes(from: old, to: new)
        guard !changes.isEmpty else { return new }
        let registered = listeners.withLock { $0 }
        for (object, addresses) in changes {
            for listener in registered where listener.object == object {
                let matched = addresses.filter { Self.matches(listener.address, $0) }
                guard !matched.isEmpty else { continue }
                switch listener.callback {
                case let .proc(proc, clientData):
                    _ = matched.withUnsafeBufferPointer { proc(object, UInt32($0.count), $0.baseAddress!, clientData) }
                case let .block(queue, block):
                    let call = UncheckedBox { matched.withUnsafeBufferPointer { block(UInt32($0.count), $0.baseAddress!) } }
                    if let queue { queue.async { call.value() } } else { call.value() }
                }
            }
        }
        return new
    }

    /// Whether a listener's address (with wildcards) covers a changed one.
    static func matches(_ wanted: AudioObjectPropertyAddress, _ changed: AudioObjectPropertyAddress) -> Bool {
        (wanted.mSelector == kAudioObjectPropertySelectorWildcard || wanted.mSelector == changed.mSelector)
            && (wanted.mScope == kAudioObjectPropertyScopeWildcard || wanted.mScope == changed.mScope)
            && (wanted.mElement == kAudioObjectPropertyElementWildcard || wanted.mElement == changed.mElement)
    }

    /// The properties that differ between two snapshots, by object.
    static func changes(from old: HardwareSnapshot, to new: HardwareSnapshot) -> [(AudioObjectID, [AudioObjectPropertyAddress])] {
        func at(_ selector: AudioObjectPropertySelector, _ scope: AudioObjectPropertyScope = kAudioObjectPropertyScopeGlobal, _ element: UInt32 = 0) -> AudioObjectPropertyAddress {
            AudioObjectPropertyAddress(mSelector: selector, mScope: scope, mElement: element)
        }
        var result: [(AudioObjectID, [AudioObjectPropertyAddress])] = []
        var system: [AudioObjectPropertyAddress] = []
        if old.devices.map(\.id) != new.devices.map(\.id) {
            system += [at(kAudioHardwarePropertyDevices), at(kAudioObjectPropertyOwnedObjects)]
        }
        if old.defaultOutput != new.defaultOutput {
            system += [at(kAudioHardwarePropertyDefaultOutputDevice), at(kAudioHardwarePropertyDefaultSystemOutputDevice)]
        }
        if old.defaultInput != new.defaultInput { system.append(at(kAudioHardwarePropertyDefaultInputDevice)) }
        if !system.isEmpty { result.append((Hardware.systemObject, system)) }
        for before in old.devices {
            guard let after = new.device(before.id) else {
                result.append((before.id, [at(kAudioDevicePropertyDeviceIsAlive)]))
                continue
            }
            let a = before.info, b = after.info, scope = after.scope
            var changed: [AudioObjectPropertyAddress] = []
            if a.volumes != b.volumes {
                changed += [at(kAudioDevicePropertyVolumeScalar, scope), at(kAudioDevicePropertyVolumeDecibels, scope)]
                for n in 0..<max(a.volumes.count, b.volumes.count) where a.volumes.indices.contains(n) != b.volumes.indices.contains(n) || a.volumes[n] != b.volumes[n] {
                    changed += [at(kAudioDevicePropertyVolumeScalar, scope, UInt32(n + 1)), at(kAudioDevicePropertyVolumeDecibels, scope, UInt32(n + 1))]
                }
            }
            if a.muted != b.muted { changed.append(at(kAudioDevicePropertyMute, scope)) }
            if a.portName != b.portName { changed.append(at(kAudioDevicePropertyDataSource, scope)) }
            let jack = { (i: HALDeviceInfo) in i.ports.first { $0.name == i.portName }?.connected }
            if jack(a) != jack(b) { changed.append(at(kAudioDevicePropertyJackIsConnected, scope)) }
            if a.isRunning != b.isRunning { changed.append(at(kAudioDevicePropertyDeviceIsRunningSomewhere)) }
            if a.sampleRate != b.sampleRate { changed.append(at(kAudioDevicePropertyNominalSampleRate)) }
            if a.channels != b.channels { changed.append(at(kAudioDevicePropertyStreamConfiguration, scope)) }
            if a.description != b.description { changed.append(at(kAudioObjectPropertyName)) }
            if !changed.isEmpty { result.append((after.id, changed)) }
        }
        return result
    }
}

/// Carries a value across a `@Sendable` boundary where the library knows the hand-over is safe
/// (a user's listener block, called once on the queue the user gave).
struct UncheckedBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
