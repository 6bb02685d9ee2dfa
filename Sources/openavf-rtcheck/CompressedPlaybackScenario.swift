// compressed-playback: a compressed file's packets (IMA4 CAF, AAC M4A) played through a queue of the file's own format, to the drain.
import AudioToolbox
import Foundation

/// A compressed file's packets played through a queue of the file's own format.
final class PacketPlayback: @unchecked Sendable {
    let queue: AudioQueueRef
    let file: AudioFileID
    let packetCount: Int64
    private let lock = NSLock()
    private var next: Int64 = 0
    /// Every packet is enqueued.
    var finished: Bool { lock.withLock { _finished } }
    private var _finished = false

    init(url: URL) throws {
        var opened: AudioFileID?
        try check(AudioFileOpenURL(url as CFURL, .readPermission, 0, &opened), "AudioFileOpenURL \(url.lastPathComponent)")
        file = opened!
        var format = AudioStreamBasicDescription()
        var size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
        try check(AudioFileGetProperty(file, kAudioFilePropertyDataFormat, &size, &format), "the file's format")
        var count: Int64 = 0
        size = 8
        try check(AudioFileGetProperty(file, kAudioFilePropertyAudioDataPacketCount, &size, &count), "the packet count")
        packetCount = count
        var made: AudioQueueRef?
        let box = Box()
        try check(AudioQueueNewOutputWithDispatchQueue(&made, &format, 0, DispatchQueue(label: "rtcheck.packets")) { q, b in
            box.owner?.fill(q, b)
        }, "AudioQueueNewOutputWithDispatchQueue (\(url.lastPathComponent))")
        queue = made!
        box.owner = self
        var cookieSize: UInt32 = 0
        if AudioFileGetPropertyInfo(file, kAudioFilePropertyMagicCookieData, &cookieSize, nil) == noErr, cookieSize > 0 {
            var cookie = [UInt8](repeating: 0, count: Int(cookieSize))
            try check(AudioFileGetProperty(file, kAudioFilePropertyMagicCookieData, &cookieSize, &cookie), "the magic cookie")
            try check(AudioQueueSetProperty(queue, kAudioQueueProperty_MagicCookie, cookie, cookieSize), "the queue's magic cookie")
        }
        for _ in 0..<3 {
            var buffer: AudioQueueBufferRef?
            try check(AudioQueueAllocateBufferWithPacketDescriptions(queue, 8192, 64, &buffer), "AudioQueueAllocateBuffer")
            fill(queue, buffer!)
        }
    }

    deinit { AudioFileClose(file) }

    final class Box: @unchecked Sendable { weak var owner: PacketPlayback? }

    func fill(_ q: AudioQueueRef, _ b: AudioQueueBufferRef) {
        lock.lock()
        defer { lock.unlock() }
        guard next < packetCount else {
            _finished = true
            return
        }
        var bytes = b.pointee.mAudioDataBytesCapacity
        var packets = b.pointee.mPacketDescriptionCapacity
        guard AudioFileReadPacketData(file, false, &bytes, b.pointee.mPacketDescriptions, next, &packets, b.pointee.mAudioData) == noErr,
            packets > 0
        else { return }
        next += Int64(packets)
        b.pointee.mAudioDataByteSize = bytes
        _ = AudioQueueEnqueueBuffer(q, b, packets, b.pointee.mPacketDescriptions)
    }
}

@MainActor let compressedPlaybackScenario = Scenario(name: "compressed-playback") { _, files, thread in
    var total = Count()
    for name in ["tone.caf", "tone.m4a"] {
        let player = try PacketPlayback(url: files.appendingPathComponent(name))
        defer { AudioQueueDispose(player.queue, true) }
        try check(AudioQueuePrime(player.queue, 0, nil), "AudioQueuePrime")
        let count = try watching(thread) {
            try check(AudioQueueStart(player.queue, nil), "AudioQueueStart (\(name))")
            try wait("\(name)'s last packets") { player.finished }
            try check(AudioQueueStop(player.queue, false), "AudioQueueStop (asynchronous, \(name))")
            var running: UInt32 = 1
            var size = UInt32(4)
            try wait("\(name)'s drain") {
                _ = AudioQueueGetProperty(player.queue, kAudioQueueProperty_IsRunning, &running, &size)
                return running == 0
            }
        }
        total = total + count
    }
    return total
}
