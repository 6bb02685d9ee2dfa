import Foundation

/// Waits until `condition` holds, checking every millisecond; `false` after `timeout` seconds.
/// On the main thread it runs the main run loop meanwhile, checking every 5 ms (a turn of
/// Foundation's run loop costs about 0.1 ms of CPU here), so that what the library hands to the
/// main queue (AVAudioPlayer's delegate calls) arrives while a test waits for it.
public func waitUntil(timeout: Double, _ condition: () -> Bool) -> Bool {
    let deadline = Date(timeIntervalSinceNow: timeout)
    while !condition() {
        if Date() >= deadline { return false }
        if Thread.isMainThread {
            _ = RunLoop.main.run(mode: .default, before: Date(timeIntervalSinceNow: 0.005))
        } else {
            usleep(1000)
        }
    }
    return true
}

/// Whether this process runs under ThreadSanitizer (`Scripts/sanitize thread`): every access is
/// instrumented, so the library's threads run several times slower than in the plain build.
public let runsUnderThreadSanitizer: Bool = dlsym(nil, "__tsan_init") != nil
