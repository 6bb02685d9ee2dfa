@testable import AudioHAL
import AudioTestSupport
import Foundation
import XCTest

/// How the PulseAudio backend reads and extends `module-role-ducking`'s arguments.
final class DuckingArgumentTests: XCTestCase {
    func testArgumentsParse() {
        XCTAssertEqual(PulseBackend.moduleArguments(#"trigger_roles=phone ducking_roles="music,video" volume='40%'"#),
                       ["trigger_roles": "phone", "ducking_roles": "music,video", "volume": "40%"])
        XCTAssertEqual(PulseBackend.moduleArguments(""), [:])
        XCTAssertNil(PulseBackend.moduleArguments("trigger_roles"))
        XCTAssertNil(PulseBackend.moduleArguments(#"volume="20%"#))
    }

    func testTriggerRoles() {
        XCTAssertEqual(PulseBackend.triggerRoles(of: ""), ["phone"], "the module's default")
        XCTAssertEqual(PulseBackend.triggerRoles(of: "trigger_roles=phone,event/duck-others"), ["phone", "event", "duck-others"])
        XCTAssertEqual(PulseBackend.triggerRoles(of: PulseBackend.duckModuleArguments), ["duck-others", "duck-others-10dB", "duck-others-20dB"])
    }

    func testGroupAddedToAnotherInstance() throws {
        let plain = try XCTUnwrap(PulseBackend.argumentsAddingDuckGroup(to: ""))
        XCTAssertEqual(PulseBackend.moduleArguments(plain), [
            "trigger_roles": "phone/duck-others/duck-others-10dB/duck-others-20dB",
            "ducking_roles": "music,video/no_role,music,video/no_role,music,video/no_role,music,video", "volume": "-20dB/20%/-10dB/-20dB",
        ])
        // An instance an earlier version of this library loaded (the full level only) gets the others.
        let older = try XCTUnwrap(PulseBackend.argumentsAddingDuckGroup(to: "trigger_roles=duck-others ducking_roles=no_role,music,video volume=20% global=true"))
        XCTAssertEqual(PulseBackend.triggerRoles(of: older), Set(DuckLevel.allCases.map { PulseBackend.triggerRole(for: $0) }))
        XCTAssertEqual(PulseBackend.moduleArguments(older)?["volume"], "20%/-10dB/-20dB")
        let grouped = try XCTUnwrap(PulseBackend.argumentsAddingDuckGroup(
            to: "trigger_roles=phone/event ducking_roles=music/video volume=10%/30% global=true use_source_trigger=1"))
        XCTAssertEqual(PulseBackend.moduleArguments(grouped), [
            "trigger_roles": "phone/event/duck-others/duck-others-10dB/duck-others-20dB",
            "ducking_roles": "music/video/no_role,music,video/no_role,music,video/no_role,music,video", "volume": "10%/30%/20%/-10dB/-20dB",
            "global": "true", "use_source_trigger": "1",
        ])
        XCTAssertNil(PulseBackend.argumentsAddingDuckGroup(to: "trigger_roles=phone/event ducking_roles=music"), "groups that do not match")
    }
}

/// Ducking on the private server, where the server's configuration already has its own
/// `module-role-ducking` (it loads only once): the backend adds its group to that instance, the
/// server's own group keeps working, and the music is ducked to the library's level.
final class DuckingServerTests: XCTestCase {
    private func duckingModules(_ server: PrivatePulseServer) throws -> [(index: String, arguments: String)] {
        try server.pactl(["list", "modules", "short"]).split(separator: "\n").compactMap { line in
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
            guard fields.count >= 3, fields[1] == "module-role-ducking" else { return nil }
            return (String(fields[0]), String(fields[2]))
        }
    }

    func testJoinsTheServersOwnDuckingModule() throws {
        let server = try TestSound.server()
        // pipewire-pulse has no module-role-ducking to join (the library ducks by volume there:
        // AudioSessionDuckingTests measure it on both servers).
        guard server.kind == .pulseaudio else { throw XCTSkip("PulseAudio's module-role-ducking only") }
        for module in try duckingModules(server) { _ = try server.pactl(["unload-module", module.index]) }
        _ = try server.pactl(["load-module", "module-role-ducking", "trigger_roles=event", "ducking_roles=music", "volume=50%"])
        defer {
            // Leave no merged instance behind for the other tests: the library loads its own again.
            for module in (try? duckingModules(server)) ?? [] { _ = try? server.pactl(["unload-module", module.index]) }
        }
        let capture = try SignalCapture(server: server, device: "speaker.monitor")
        defer { _ = capture.stop() }
        let tone = SignalAnalysis.sine(frequency: 440, sampleRate: 48000, seconds: 8, amplitude: 0.3)
        let music = try SignalPlayer(
            server: server, device: "speaker", samples: tone, sampleRate: 48000, properties: ["media.role": "music"], latencyMsec: 100)
        defer { music.stop() }
        /// The music's level over the latest 250 ms, `frames` from now.
        func level(after frames: Int) throws -> Double {
            let mark = capture.frameCount
            try capture.waitFor(frames: mark + max(frames, 12000), timeout: 5)
            return SignalAnalysis.medianDB(capture.samples()[0].suffix(12000), window: 2400)
        }
        XCTAssertTrue(waitUntil(timeout: 3) { (try? level(after: 4800)) ?? -200 > -20 }, "the music plays")
        let before = try level(after: 9600)

        let backend = try PulseBackend(server: server.serverString)
        try backend.setDuckingOthers(.full, device: nil)
        let modules = try duckingModules(server)
        XCTAssertEqual(modules.count, 1)
        let roles = PulseBackend.triggerRoles(of: modules.first?.arguments ?? "")
        XCTAssertEqual(roles, ["event", "duck-others", "duck-others-10dB", "duck-others-20dB"], "the server's group kept, the library's added")
        let ducked = try level(after: 14400)
        XCTAssertEqual(ducked - before, 20 * log10(pow(0.2, 3.0)), accuracy: 1.5, "ducked by the library's level")
        try backend.setDuckingOthers(.full, device: nil)  // idempotent
        XCTAssertEqual(try duckingModules(server).count, 1)
        try backend.setDuckingOthers(nil, device: nil)
        XCTAssertEqual(try level(after: 14400), before, accuracy: 0.5, "restored")

        // The server's own group still ducks by its own level: an `event` stream lowers the music
        // to 50 % on the server's scale (−18 dB).
        let event = try SignalPlayer(
            server: server, device: "speaker", samples: [Float](repeating: 0, count: 48000 * 4), sampleRate: 48000, properties: ["media.role": "event"])
        defer { event.stop() }
        XCTAssertTrue(waitUntil(timeout: 3) { ((try? level(after: 2400)) ?? 0) < before - 10 }, "the server's own group does not duck")
        XCTAssertEqual(try level(after: 9600) - before, 20 * log10(pow(0.5, 3.0)), accuracy: 1.5, "by its own level")
        print("music at \(before) dBFS, ducked by the library \(ducked - before) dB through the server's merged instance")
    }
}
