// session: an active playback session while another process's call interrupts it and headphones come and go.
import AVFAudio
import AudioTestSupport
import Foundation

/// Collects one notification's posts.
final class Posts: @unchecked Sendable {
    private let lock = NSLock()
    private var infos: [[AnyHashable: Any]] = []
    private var token: (any NSObjectProtocol)?
    init(_ name: Notification.Name) {
        token = NotificationCenter.default.addObserver(forName: name, object: nil, queue: nil) { [weak self] note in
            guard let self else { return }
            self.lock.withLock { self.infos.append(note.userInfo ?? [:]) }
        }
    }
    deinit { if let token { NotificationCenter.default.removeObserver(token) } }
    var count: Int { lock.withLock { infos.count } }
}

@MainActor let sessionScenario = Scenario(
    name: "session",
    libpulseOwn: "the server sends the streams a call's cork request and moves them on a route change; libpulse parses each "
        + "(pa_proplist_new, the new device's name)"
) { server, _, thread in
    // An active playback session while another process's call interrupts it and headphones
    // come and go.
    let session = AVAudioSession.sharedInstance()
    try session.setCategory(.playback)
    try session.setActive(true)
    defer { try? session.setActive(false) }
    let interruptions = Posts(AVAudioSession.interruptionNotification)
    let routes = Posts(AVAudioSession.routeChangeNotification)
    let tone = try TonePlayback()
    defer { AudioQueueDispose(tone.queue, true) }
    try check(AudioQueuePrime(tone.queue, 0, nil), "AudioQueuePrime")
    return try watching(thread) {
        try check(AudioQueueStart(tone.queue, nil), "AudioQueueStart")
        try tone.waitForCallbacks(20)
        let call = try SignalPlayer(
            server: server, device: "speaker", samples: [Float](repeating: 0.001, count: 24000), sampleRate: 48000,
            properties: ["media.role": "phone"])
        try wait("the interruption to begin") { interruptions.count >= 1 }
        call.waitUntilDone()
        try wait("the interruption to end") { interruptions.count >= 2 }
        try check(AudioQueueStart(tone.queue, nil), "AudioQueueStart (after the call)")
        try tone.waitForCallbacks(20)
        let module = try server.pactl(["load-module", "module-null-sink", "sink_name=rtphones", "sink_properties=device.form_factor=headphone"])
            .trimmingCharacters(in: .whitespacesAndNewlines)
        _ = try server.pactl(["set-default-sink", "rtphones"])
        try wait("the route change to headphones") { routes.count >= 1 }
        _ = try server.pactl(["unload-module", module])
        _ = try server.pactl(["set-default-sink", "speaker"])
        try wait("the route change back") { routes.count >= 2 }
        try tone.waitForCallbacks(20)
        try check(AudioQueueStop(tone.queue, true), "AudioQueueStop")
    }
}
