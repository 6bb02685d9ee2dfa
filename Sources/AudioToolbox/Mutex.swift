import AudioHAL

/// The library's lock: `Synchronization.Mutex`, visible to ThreadSanitizer (see `AudioHAL.Mutex`).
/// Declared here, it shadows the standard `Mutex` throughout this module.
typealias Mutex = AudioHAL.Mutex
