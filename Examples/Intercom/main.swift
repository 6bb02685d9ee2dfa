// Intercom: a two-way voice call over UDP, the way a VoIP app builds one on Apple's audio stack.
//
//   Intercom --port 5001 --peer 127.0.0.1:5002 [--input DEVICE] [--output DEVICE]
//            [--bitrate KBPS] [--loss 0.05] [--reorder 0.02] [--seed N] [--seconds N] [--quiet]
//
// The microphone goes through an AVAudioEngine with voice processing on (echo cancellation with
// what this side plays as the reference, noise suppression, gain control), is encoded with Opus
// through AudioConverter in 20 ms packets (64 kb/s unless `--bitrate` says otherwise) and sent
// to the peer; what the peer sends goes through a small jitter buffer (reordering put right, a
// lost packet concealed by Opus's decoder) and is played through the same engine. A level line
// shows both directions. `--loss` and `--reorder` drop and swap outgoing packets (a test's bad
// network); devices are the sound server's names (`pactl list short sinks`), the defaults
// otherwise. Sample code: small on purpose.
import AVFAudio
import AudioToolbox
import CoreAudio
import Foundation
import Synchronization

struct IntercomError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

struct Options {
    var port: UInt16 = 0
    var peerHost = "127.0.0.1"
    var peerPort: UInt16 = 0
    var input: String?
    var output: String?
    var loss = 0.0
    var reorder = 0.0
    /// Opus's rate, in kb/s.
    var bitRate = 64
    var seed: UInt64 = 1
    var seconds: Double?
    var quiet = false

    init(_ arguments: [String]) throws {
        var i = 0
        func value() throws -> String {
            i += 1
            guard i < arguments.count else { throw IntercomError("\(arguments[i - 1]) needs a value") }
            return arguments[i]
        }
        while i < arguments.count {
            switch arguments[i] {
            case "--port": port = try UInt16(value()) ?? 0
            case "--peer":
                let parts = try value().split(separator: ":")
                guard parts.count == 2, let p = UInt16(parts[1]) else { throw IntercomError("--peer takes HOST:PORT") }
                peerHost = String(parts[0])
                peerPort = p
            case "--input": input = try value()
            case "--output": output = try value()
            case "--loss": loss = try Double(value()) ?? 0
            case "--reorder": reorder = try Double(value()) ?? 0
            case "--bitrate":
                guard let rate = try Int(value()), (6...256).contains(rate) else { throw IntercomError("--bitrate takes kb/s from 6 to 256 (mono Opus)") }
                bitRate = rate
            case "--seed": seed = try UInt64(value()) ?? 1
            case "--seconds": seconds = try Double(value())
            case "--quiet": quiet = true
            default: throw IntercomError("unknown option \(arguments[i])")
            }
            i += 1
        }
        guard port != 0, peerPort != 0 else { throw IntercomError("usage: Intercom --port PORT --peer HOST:PORT [--input DEVICE] [--output DEVICE]") }
    }
}

/// A small seeded generator (xorshift), so that a test's losses are the same every run.
struct Dice {
    var state: UInt64
    mutating func roll() -> Double {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return Double(state % 1_000_000) / 1_000_000
    }
}

/// The UDP socket: datagrams of a 4-byte sequence number (big-endian) and an Opus packet.
final class Link: @unchecked Sendable {
    private let socket: Int32
    private var peer = sockaddr_in()

    init(port: UInt16, peerHost: String, peerPort: UInt16) throws {
        socket = Glibc.socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard socket >= 0 else { throw IntercomError("no socket: \(String(cString: strerror(errno)))") }
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_port = port.bigEndian
        local.sin_addr.s_addr = INADDR_ANY
        let bound = withUnsafePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0 else { throw IntercomError("cannot listen on port \(port): \(String(cString: strerror(errno)))") }
        peer.sin_family = sa_family_t(AF_INET)
        peer.sin_port = peerPort.bigEndian
        guard inet_pton(AF_INET, peerHost, &peer.sin_addr) == 1 else { throw IntercomError("\(peerHost) is not an IPv4 address") }
    }

    func send(sequence: UInt32, payload: [UInt8]) {
        var datagram = withUnsafeBytes(of: sequence.bigEndian) { Array($0) }
        datagram += payload
        _ = datagram.withUnsafeBytes { bytes in
            withUnsafePointer(to: &peer) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(socket, bytes.baseAddress, bytes.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
    }

    /// Blocks for the next datagram.
    func receive() -> (UInt32, [UInt8])? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
        guard n >= 4 else { return nil }
        let sequence = buffer[0..<4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        return (sequence, Array(buffer[4..<n]))
    }
}

/// Encodes the microphone's 20 ms buffers and sends them, dropping or swapping some when the
/// options ask for a bad network. The tap's thread only.
final class Sender: @unchecked Sendable {
    private let link: Link
    private let encoder: OpusEncoder
    private let loss: Double
    private let reorder: Double
    private var sequence: UInt32 = 0
    private var dice: Dice
    private var held: (UInt32, [UInt8])?

    init(link: Link, encoder: OpusEncoder, options: Options) {
        self.link = link
        self.encoder = encoder
        loss = options.loss
        reorder = options.reorder
        dice = Dice(state: options.seed | 1)
    }

    /// Sends a buffer; returns the packets encoded so far.
    @discardableResult
    func send(_ samples: UnsafePointer<Float>) -> UInt32 {
        let packet = encoder.encode(samples)
        guard !packet.isEmpty else { return sequence }
        let number = sequence
        sequence &+= 1
        if dice.roll() < loss { return sequence }
        if let earlier = held {
            // The packet held back goes after this one: the two arrive swapped.
            link.send(sequence: number, payload: packet)
            link.send(sequence: earlier.0, payload: earlier.1)
            held = nil
        } else if dice.roll() < reorder {
            held = (number, packet)
        } else {
            link.send(sequence: number, payload: packet)
        }
        return sequence
    }
}

/// A level in dBFS, and a bar for it.
func level(_ samples: UnsafeBufferPointer<Float>) -> Double {
    var sum: Float = 0
    for x in samples { sum += x * x }
    return 10 * log10(Double(sum) / Double(max(samples.count, 1)) + 1e-12)
}

func bar(_ db: Double) -> String {
    let n = max(0, min(20, Int((db + 60) / 3)))
    return String(repeating: "#", count: n).padding(toLength: 20, withPad: " ", startingAt: 0)
}

/// The CoreAudio device of server name `name`.
func device(named name: String) throws -> AudioDeviceID {
    var address = AudioObjectPropertyAddress(
        mSelector: kAudioHardwarePropertyTranslateUIDToDevice, mScope: kAudioObjectPropertyScopeGlobal, mElement: kAudioObjectPropertyElementMain)
    var id = AudioDeviceID(0)
    var size = UInt32(MemoryLayout<AudioDeviceID>.size)
    let uid: CFString = name as CFString
    let status = withUnsafePointer(to: uid) {
        AudioObjectGetPropertyData(AudioObjectID(kAudioObjectSystemObject), &address, UInt32(MemoryLayout<CFString>.size), $0, &size, &id)
    }
    guard status == noErr, id != 0 else { throw IntercomError("no device \(name)") }
    return id
}

func run() throws {
    let options = try Options(Array(CommandLine.arguments.dropFirst()))
    let session = AVAudioSession.sharedInstance()
    try session.setCategory(.playAndRecord, mode: .voiceChat)
    try session.setPreferredIOBufferDuration(0.01)
    try session.setActive(true)

    let engine = AVAudioEngine()
    try engine.inputNode.setVoiceProcessingEnabled(true)
    for (name, isInput) in [(options.input, true), (options.output, false)] {
        guard let name, let unit = (isInput ? engine.inputNode as AVAudioIONode : engine.outputNode).audioUnit else { continue }
        var id = try device(named: name)
        let status = AudioUnitSetProperty(unit, kAudioOutputUnitProperty_CurrentDevice, kAudioUnitScope_Global, 0, &id, 4)
        guard status == noErr else { throw IntercomError("cannot use \(name) (\(status))") }
    }

    let link = try Link(port: options.port, peerHost: options.peerHost, peerPort: options.peerPort)
    let encoder = try OpusEncoder(bitRate: options.bitRate * 1000), decoder = try OpusDecoder()
    // 25 ms: a packet swapped with the next comes a packet (20 ms) late, and the graph's cycles
    // (5.3 ms on PipeWire) add a few more.
    let jitter = JitterBuffer(delay: 0.025, packetDuration: 0.02)
    let micLevel = Mutex(-120.0), peerLevel = Mutex(-120.0)

    // The peer's voice: decoded ahead into a ring the output's render block drains.
    let voice = 48000
    let ring = VoiceRing(capacity: voice)
    let format = AVAudioFormat(standardFormatWithSampleRate: 48000, channels: 1)!
    let speaker = AVAudioSourceNode(format: format) { _, _, frames, data in
        let out = UnsafeMutableAudioBufferListPointer(data)[0].mData!.assumingMemoryBound(to: Float.self)
        ring.read(into: out, count: Int(frames))
        return noErr
    }
    engine.attach(speaker)
    engine.connect(speaker, to: engine.mainMixerNode, format: format)

    // The microphone: 20 ms at a time, encoded and sent (some dropped or swapped when asked).
    let sender = Sender(link: link, encoder: encoder, options: options)
    let flowing = DispatchSemaphore(value: 0)
    // The microphone at 48 kHz mono whatever the device's format: through a mixer of its own,
    // whose way into the main mixer is silent (the call does not play its own microphone).
    let microphone = AVAudioMixerNode()
    engine.attach(microphone)
    engine.connect(engine.inputNode, to: microphone, format: engine.inputNode.outputFormat(forBus: 0))
    engine.connect(microphone, to: engine.mainMixerNode, format: format)
    microphone.volume = 0
    microphone.installTap(onBus: 0, bufferSize: AVAudioFrameCount(OpusEncoder.frames), format: nil) { buffer, _ in
        guard buffer.format.sampleRate == 48000, Int(buffer.frameLength) == OpusEncoder.frames, let samples = buffer.floatChannelData?[0] else { return }
        micLevel.withLock { $0 = level(UnsafeBufferPointer(start: samples, count: OpusEncoder.frames)) }
        if sender.send(samples) == 1 { flowing.signal() }
    }

    // The network: what comes in goes to the jitter buffer; the player decodes as the ring
    // empties (a packet when less than the render block's request is left: what the ring holds
    // is latency).
    let receiver = Thread {
        while let (number, payload) = link.receive() { jitter.insert(sequence: number, payload: payload) }
    }
    receiver.start()
    let player = Thread {
        while true {
            ring.waitForRoom(below: ring.requestFrames)
            guard let slot = jitter.pop() else {
                // Still filling: look again after the output's next cycle.
                ring.waitForCycle()
                continue
            }
            var samples: [Float]
            switch slot {
            case .packet(let payload): samples = decoder.decode(payload)
            case .lost: samples = decoder.decode(nil)
            }
            // Held longer than needed: play less of a quiet packet (a pause is not missed), in
            // whole requests of the render block, which is when the ring is refilled.
            let request = ring.requestFrames, excess = Int(jitter.excess * 48000)
            if excess >= request && samples.withUnsafeBufferPointer({ level($0) }) < -50 {
                let cut = min(excess / request * request, samples.count / request * request)
                samples.removeFirst(cut)
                jitter.trimmed(Double(cut) / 48000)
            }
            samples.withUnsafeBufferPointer { p in
                peerLevel.withLock { $0 = level(p) }
                ring.write(p)
            }
        }
    }
    player.start()

    try engine.start()
    // Ready once the microphone's audio flows (the first packet went out): a sink that was idle
    // (a test server's fresh null sink) can take its time to start.
    guard flowing.wait(timeout: .now() + 10) == .success else { throw IntercomError("no audio from the microphone in 10 s") }
    FileHandle.standardOutput.write(Data("ready: port \(options.port), peer \(options.peerHost):\(options.peerPort)\n".utf8))
    // Ctrl-C (or a SIGTERM) ends the call as its time running out does: cleanly, with the counts.
    let ending = Atomic<Bool>(false)
    let signals = [SIGINT, SIGTERM].map { number in
        signal(number, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
        source.setEventHandler {
            // A second one while the call ends: end now.
            if ending.exchange(true, ordering: .relaxed) { exit(130) }
        }
        source.resume()
        return source
    }
    let started = Date()
    while !ending.load(ordering: .relaxed), options.seconds.map({ Date().timeIntervalSince(started) < $0 }) ?? true {
        Thread.sleep(forTimeInterval: 0.25)
        if !options.quiet {
            let mic = micLevel.withLock { $0 }, peer = peerLevel.withLock { $0 }
            let counts = jitter.counts
            let line = String(format: "\rmic %6.1f dBFS %@  peer %6.1f dBFS %@  lost %d late %d held %.0f ms", mic, bar(mic), peer, bar(peer), counts.lost, counts.late, counts.heldMS)
            FileHandle.standardError.write(Data(line.utf8))
        }
    }
    engine.stop()
    signals.forEach { $0.cancel() }
    let counts = jitter.counts
    let summary = String(format: "lost %d, late %d, skipped %d, held %.1f ms on average\n", counts.lost, counts.late, counts.skipped, counts.heldMS)
    FileHandle.standardOutput.write(Data(summary.utf8))
}

/// The decoded voice between the player thread and the render block: one writer, one reader; the
/// render block takes what is there and plays silence for the rest.
final class VoiceRing: @unchecked Sendable {
    private let storage: UnsafeMutablePointer<Float>
    private let capacity: Int
    private let readCount = Atomic<Int>(0)
    private let writeCount = Atomic<Int>(0)
    private let drained = DispatchSemaphore(value: 0)

    init(capacity: Int) {
        self.capacity = capacity
        storage = .allocate(capacity: capacity)
        storage.initialize(repeating: 0, count: capacity)
    }

    /// The most the render block asked for at once lately (its requests vary a little).
    private let request = Atomic<Int>(1)
    private var requestsSeen = 0, largestRequest = 0

    /// The render thread.
    func read(into out: UnsafeMutablePointer<Float>, count: Int) {
        largestRequest = max(largestRequest, count)
        requestsSeen += 1
        if requestsSeen == 100 || count > request.load(ordering: .relaxed) {
            request.store(largestRequest, ordering: .relaxed)
            if requestsSeen == 100 { (requestsSeen, largestRequest) = (0, 0) }
        }
        let r = readCount.load(ordering: .relaxed), w = writeCount.load(ordering: .acquiring)
        let n = min(count, w - r)
        for i in 0..<n { out[i] = storage[(r + i) % capacity] }
        for i in n..<count { out[i] = 0 }
        readCount.store(r + n, ordering: .releasing)
        drained.signal()
    }

    func write(_ samples: UnsafeBufferPointer<Float>) {
        let w = writeCount.load(ordering: .relaxed), r = readCount.load(ordering: .acquiring)
        let n = min(samples.count, capacity - (w - r))
        for i in 0..<n { storage[(w + i) % capacity] = samples[i] }
        writeCount.store(w + n, ordering: .releasing)
    }

    /// The most the render block asked for at once in its last hundred requests or so.
    var requestFrames: Int { request.load(ordering: .relaxed) }

    /// Waits until fewer than `frames` are left to play.
    func waitForRoom(below frames: Int) {
        while writeCount.load(ordering: .acquiring) - readCount.load(ordering: .acquiring) >= frames { drained.wait() }
    }

    /// Waits for the render block's next cycle.
    func waitForCycle() { drained.wait() }
}

do {
    try run()
} catch {
    FileHandle.standardError.write(Data("Intercom: \(error)\n".utf8))
    exit(1)
}
