import AudioHAL

/// The library's lock (see `AudioHAL.Mutex`); it shadows the standard `Mutex` in this module.
typealias Mutex = AudioHAL.Mutex
