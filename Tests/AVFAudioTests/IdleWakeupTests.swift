import AVFAudio
import AudioTestSupport
import AudioToolbox
import Foundation
import XCTest

/// No thread polls: an idle queue's callback thread and an idle active session's event thread
/// sleep until there is work. Their context switches, as the kernel counts them, over 2 s: 0.
final class IdleWakeupTests: XCTestCase {
    /// Hands every buffer back to nobody: the first callback of each marks it returned.
    final class Returns: @unchecked Sendable {
        let lock = NSLock()
        var count = 0
        static let callback: AudioQueueOutputCallback = { userData, _, _ in
            let me = Unmanaged<Returns>.fromOpaque(userData!).takeUnretainedValue()
            me.lock.lock()
            me.count += 1
            me.lock.unlock()
        }
        var returned: Int {
            lock.lock()
            defer { lock.unlock() }
            return count
        }
    }

    func testIdleQueuesAndAnIdleActiveSessionDoNotWakeUp() throws {
        _ = try TestSound.server()
        let session = AVAudioSession.sharedInstance()
        try session.setCategory(.playback)
        try session.setActive(true)
        defer { try? session.setActive(false) }

        var format = AudioStreamBasicDescription(
            mSampleRate: 48000, mFormatID: kAudioFormatLinearPCM, mFormatFlags: kAudioFormatFlagsNativeFloatPacked, mBytesPerPacket: 4,
            mFramesPerPacket: 1, mBytesPerFrame: 4, mChannelsPerFrame: 1, mBitsPerChannel: 32, mReserved: 0)
        let returns = Returns()
        let context = Unmanaged.passUnretained(returns).toOpaque()
        // One queue created with its buffers and never started; one started, its one buffer played
        // and handed back, and nothing enqueued since (running, with nothing to do).
        var unstarted: AudioQueueRef?
        XCTAssertEqual(AudioQueueNewOutput(&format, Returns.callback, context, nil, nil, 0, &unstarted), noErr)
        var spare: AudioQueueBufferRef?
        XCTAssertEqual(AudioQueueAllocateBuffer(try XCTUnwrap(unstarted), 4 * 480, &spare), noErr)
        defer { AudioQueueDispose(unstarted!, true) }
        var running: AudioQueueRef?
        XCTAssertEqual(AudioQueueNewOutput(&format, Returns.callback, context, nil, nil, 0, &running), noErr)
        defer { AudioQueueDispose(running!, true) }
        var buffer: AudioQueueBufferRef?
        XCTAssertEqual(AudioQueueAllocateBuffer(try XCTUnwrap(running), 4 * 480, &buffer), noErr)
        let b = try XCTUnwrap(buffer)
        memset(b.pointee.mAudioData, 0, 4 * 480)
        b.pointee.mAudioDataByteSize = 4 * 480
        XCTAssertEqual(AudioQueueEnqueueBuffer(running!, b, 0, nil), noErr)
        XCTAssertEqual(AudioQueueStart(running!, nil), noErr)
        XCTAssertTrue(waitUntil(timeout: 5) { returns.returned == 1 }, "the buffer came back")

        let watched = ["AudioQueue output", "AVAudioSession events"]
        let tick = DispatchSemaphore(value: 0)  // never signalled: each wait is a bounded pause
        // The server's events about the streams just opened (new, changed) are work the session
        // does; wait until a quarter second passes without any (5 s at most), then count.
        var settled = ThreadWakeups(namesStartingWith: watched)
        for _ in 0..<20 {
            _ = tick.wait(timeout: .now() + 0.25)
            let now = ThreadWakeups(namesStartingWith: watched)
            if now.since(settled).values.allSatisfy({ $0 == 0 }) { break }
            settled = now
        }
        let before = ThreadWakeups(namesStartingWith: watched)
        XCTAssertEqual(before.counts.count, 3, "two queue threads and the session's event thread are named: \(before.counts)")
        _ = tick.wait(timeout: .now() + 2)
        let woken = ThreadWakeups(namesStartingWith: watched).since(before)
        XCTAssertEqual(woken.count, 3)
        for (thread, switches) in woken { XCTAssertEqual(switches, 0, "\(thread) woke \(switches) times in 2 s while idle") }
        XCTAssertEqual(returns.returned, 1, "no callback while idle")
    }
}
