import AudioHAL

/// The tests' lock is the library's: `Synchronization.Mutex` made visible to ThreadSanitizer
/// (see `AudioHAL.Mutex`). The standard one waits in uninstrumented futex code, so under
/// contention ThreadSanitizer reports what it guards as raced. Declared here, it shadows the
/// standard `Mutex` throughout this test module.
typealias Mutex = AudioHAL.Mutex
