// openavf-rtcheck: counts heap allocations, frees and Swift retains/releases on the real-time
// server thread while the public API does everything an app does with it, on the project's
// private PulseAudio server. (Retains and releases are held to 0 in release builds only.)
//
//   openavf-rtcheck [scenario…]     all scenarios when none is named; exit 1 if any count is not 0
//
// CAllocCounter replaces malloc and free for this process and counts the calls made on one
// watched thread: the audio connection's main-loop thread, the only real-time thread there is
// (introspection and subscriptions run on the control connection's own thread), and in the
// `ioproc` scenario a device's I/O thread, where IOProcs run, in the `engine` and
// `engine-timepitch` scenarios an AVAudioEngine's render thread (its I/O unit's own), and in
// `engine-input` the engine's recording thread, where its input's taps and sinks render. Each scenario's
// streams are opened before its window (opening a stream is setup, not rendering); the window
// runs from the first render of a run to its end: starts, parameter changes, pauses, stops,
// resets, drains, a player's loops and seeks, and a session's interruption and route changes.
// Scripts/test runs the debug build on a private PipeWire and the release build on a private
// PulseAudio (OPENAVF_TEST_SERVER picks the server).
import AudioHAL
import AudioTestSupport
import CAllocCounter
import Foundation

#if DEBUG
let buildKind = "debug"
#else
let buildKind = "release"
#endif

@MainActor func main() -> Int32 {
    let wanted = Set(CommandLine.arguments.dropFirst())
    let all = scenarios
    let unknown = wanted.subtracting(all.map(\.name))
    guard unknown.isEmpty else {
        FileHandle.standardError.write(Data("openavf-rtcheck: no scenario \(unknown.sorted()); there are \(all.map(\.name))\n".utf8))
        return 2
    }
    guard openavf_alloc_counter_active() == 1 else {
        print("openavf-rtcheck: the counting malloc is not in effect (a sanitizer build?): nothing to count")
        return 0
    }
    do {
        let server = try TestSound.server()
        let files = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("openavf-rtcheck-\(getpid())")
        defer { try? FileManager.default.removeItem(at: files) }
        try makeFiles(in: files)
        guard let backend = try AudioSystem.current.backend() as? PulseBackend else { throw Failure("the backend is not PulseAudio") }
        let thread = backend.serverThread()
        var clean = true
        print("allocations and frees on the real-time server thread, per scenario (target 0; \(buildKind) build)")
        for scenario in all where wanted.isEmpty || wanted.contains(scenario.name) {
            let count = try scenario.run(server, files, thread)
            let ours = (count.allocations - count.allocationsInLibpulse, count.frees - count.freesInLibpulse)
            // Reference counting is checked in release builds: a debug build retains and releases
            // around nearly every call, which the optimizer removes.
            let ok = ours == (0, 0) && (scenario.libpulseOwn != nil || (count.allocations, count.frees) == (0, 0))
                && (buildKind == "debug" || count.refcounts == 0)
            clean = clean && ok
            let libpulse = count.allocationsInLibpulse + count.freesInLibpulse > 0
                ? "   (all in libpulse's own code: \(count.allocationsInLibpulse) allocations, \(count.freesInLibpulse) frees; \(scenario.libpulseOwn ?? "not expected"))" : ""
            print("  \(scenario.name.padding(toLength: 24, withPad: " ", startingAt: 0)) allocations \(count.allocations)  frees \(count.frees)  retains/releases \(count.refcounts)\(libpulse)")
            if count.refcounts > 0 && buildKind != "debug" { print("      refcounting from: \(Array(Set(count.refcountCallers)).sorted())") }
            if !ok || libpulse.isEmpty == false { for caller in count.callers.prefix(ok ? 3 : 16) { print("      \(caller)") } }
        }
        return clean ? 0 : 1
    } catch {
        FileHandle.standardError.write(Data("openavf-rtcheck: \(error)\n".utf8))
        return 1
    }
}

exit(main())
