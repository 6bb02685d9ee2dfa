// swift-tools-version:6.0
import PackageDescription

/// Layers, bottom to top (see DESIGN.md): C bridges → CoreAudioTypes → AudioHAL → CoreAudio → AudioToolbox → AVFAudio → AVFoundation.
/// An arrow only points down; C types never leave the bridge and the one internal module that wraps it.
let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "OpenAVFAudio",
    products: [
        .library(name: "CoreAudioTypes", targets: ["CoreAudioTypes"]),
        .library(name: "CoreAudio", targets: ["CoreAudio"]),
        .library(name: "AudioToolbox", targets: ["AudioToolbox"]),
        .library(name: "AVFAudio", targets: ["AVFAudio"]),
        .library(name: "AVFoundation", targets: ["AVFoundation"]),
        .executable(name: "afinfo", targets: ["afinfo"]),
        .executable(name: "afconvert", targets: ["afconvert"]),
        .executable(name: "afplay", targets: ["afplay"]),
        .executable(name: "afrecord", targets: ["afrecord"]),
        .executable(name: "openavf-bench", targets: ["openavf-bench"]),
        .executable(name: "openavf-demo", targets: ["openavf-demo"]),
        .executable(name: "openavf-rtcheck", targets: ["openavf-rtcheck"]),
    ],
    targets: [
        // C bridges: module map + shim header, no logic.
        // No pkgConfig: libpulse's headers and library sit in the default paths, and its .pc file
        // gives only `-D_REENTRANT -pthread`, flags SwiftPM refuses with a warning on every build.
        .systemLibrary(name: "CPulseAudio", providers: [.apt(["libpulse-dev"])]),
        .systemLibrary(
            name: "CFFmpeg",
            pkgConfig: "libavformat",
            providers: [.apt(["libavformat-dev", "libavcodec-dev", "libavutil-dev", "libswresample-dev"])]
        ),
        // libsonic has no pkg-config file; Debian's libsonic-dev puts sonic.h and libsonic.so in the default paths.
        .systemLibrary(name: "CSonic", providers: [.apt(["libsonic-dev"])]),
        // SoundTouch through the C interface Debian's libsoundtouch-dev ships (SoundTouchDLL.h and
        // libSoundTouchDll.so in the default paths); linked only by the benchmark, which measures it
        // against libsonic.
        .systemLibrary(name: "CSoundTouch", providers: [.apt(["libsoundtouch-dev"])]),
        // Voice processing: libwebrtc-audio-processing (C++) behind a C header, its headers through
        // `system/webrtc`, a link to Debian's (the library's pkg-config has -D flags SwiftPM
        // refuses); libspeexdsp's C API as it is.
        .target(
            name: "CWebRTCAudioProcessing",
            cxxSettings: [.headerSearchPath("system"), .define("WEBRTC_POSIX"), .define("WEBRTC_AUDIO_PROCESSING_ONLY_BUILD")],
            linkerSettings: [.linkedLibrary("webrtc_audio_processing")]),
        .systemLibrary(name: "CSpeexDSP", providers: [.apt(["libspeexdsp-dev"])]),
        .systemLibrary(name: "COpus", providers: [.apt(["libopus-dev"])]),
        .target(name: "CAllocCounter"),
        // The child process that puts other clients' volumes back when a ducking process ends.
        .target(name: "CDuckGuard"),
        // A semaphore wait bounded on the monotonic clock (sem_clockwait, which Swift's Glibc hides).
        .target(name: "CMonotonicWait"),
        // Apple's C structs (the queue callbacks are @convention(c) and point to them).
        .target(name: "CCoreAudioTypes"),
        .target(name: "CAudioQueueTypes", dependencies: ["CCoreAudioTypes"]),
        .target(name: "CCoreAudio", dependencies: ["CCoreAudioTypes"]),

        // Plain values, no dependencies.
        .target(name: "CoreAudioTypes", dependencies: ["CCoreAudioTypes"], swiftSettings: strict),
        // Device layer: backends, streams, clock, lock-free rings.
        .target(name: "AudioHAL", dependencies: ["CoreAudioTypes", "CPulseAudio", "CDuckGuard", "CMonotonicWait"], swiftSettings: strict),
        // FFmpeg: demux/decode, encode/mux, resample.
        .target(name: "AudioCodecs", dependencies: ["CoreAudioTypes", "CFFmpeg", "CSonic", "COpus"], swiftSettings: strict),
        // The DSP that audio units and engine nodes share: filters, delay lines, sample rings.
        .target(name: "AudioGraph", dependencies: ["CWebRTCAudioProcessing", "CSpeexDSP"], swiftSettings: strict),
        // The device API: AudioObject properties and listeners, IOProcs (re-exports CoreAudioTypes).
        .target(name: "CoreAudio", dependencies: ["CoreAudioTypes", "CCoreAudio", "AudioHAL"], swiftSettings: strict),
        // Apple's C-style API with Swift signatures (re-exports CoreAudio).
        .target(
            name: "AudioToolbox", dependencies: ["CoreAudioTypes", "CoreAudio", "CAudioQueueTypes", "AudioHAL", "AudioCodecs", "AudioGraph"],
            swiftSettings: strict),
        .target(name: "AVFAudio", dependencies: ["AudioToolbox", "AudioCodecs"], swiftSettings: strict),
        .target(name: "AVFoundation", dependencies: ["AVFAudio"], swiftSettings: strict),

        // A private PulseAudio or PipeWire server started by the project itself, and the tools that
        // play into and capture from it: for the demo, the benchmark and the tests.
        .target(name: "PrivateSoundServer", swiftSettings: strict),
        // Signal analysis and test signals (speech, noise, synthetic echo): for the demo, the
        // benchmark and the tests.
        .target(name: "AudioSignals", dependencies: ["PrivateSoundServer", "AudioGraph"], swiftSettings: strict),
        // Test-only rigs (the shared test server, the virtual audio system, calls through a voice
        // unit…); re-exports the two above. Linked by the tests, the benchmark and rtcheck, never
        // by the tools or the demo.
        .target(name: "AudioTestSupport", dependencies: ["AudioToolbox", "AudioGraph", "PrivateSoundServer", "AudioSignals"], swiftSettings: strict),

        // macOS's command-line tools.
        // The tools' plumbing: failures and exit codes, argument walking, progress lines, format names.
        .target(name: "CommandLineSupport", dependencies: ["AVFAudio"], swiftSettings: strict),
        .executableTarget(name: "afinfo", dependencies: ["AudioToolbox"], swiftSettings: strict),
        .executableTarget(name: "afconvert", dependencies: ["AudioToolbox", "CommandLineSupport"], swiftSettings: strict),
        .executableTarget(name: "afplay", dependencies: ["AVFAudio", "CommandLineSupport"], swiftSettings: strict),
        .executableTarget(name: "afrecord", dependencies: ["AVFAudio", "CommandLineSupport"], swiftSettings: strict),
        // A recorder the crash-safety test kills mid-write.
        .executableTarget(name: "openavf-crashwriter", dependencies: ["AudioToolbox"], swiftSettings: strict),
        // Another process with an audio session, for the session tests.
        .executableTarget(name: "openavf-sessionpeer", dependencies: ["AVFAudio"], swiftSettings: strict),
        // The file readers' fuzzer: a mutating driver, or libFuzzer's target (Scripts/fuzz).
        .executableTarget(name: "openavf-fuzz", dependencies: ["AudioToolbox"], swiftSettings: strict),
        // Counts allocations and frees on the real-time thread while the API does everything.
        .executableTarget(
            name: "openavf-rtcheck", dependencies: ["AVFAudio", "AudioGraph", "AudioHAL", "CoreAudio", "AudioTestSupport", "CAllocCounter"],
            swiftSettings: strict),
        .executableTarget(
            name: "openavf-bench", dependencies: ["AVFAudio", "AudioGraph", "AudioTestSupport", "CPulseAudio", "CSoundTouch"], swiftSettings: strict),
        // Sample code: a two-way call over UDP through a voice-processing engine and Opus.
        .executableTarget(name: "Intercom", dependencies: ["AVFAudio"], path: "Examples/Intercom", swiftSettings: strict),
        .executableTarget(name: "openavf-demo", dependencies: ["AudioToolbox", "PrivateSoundServer", "AudioSignals"], swiftSettings: strict),

        .testTarget(name: "CoreAudioTypesTests", dependencies: ["CoreAudioTypes"], swiftSettings: strict),
        .testTarget(name: "CoreAudioTests", dependencies: ["CoreAudio", "AudioHAL", "AudioToolbox", "AudioTestSupport"], swiftSettings: strict),
        .testTarget(name: "AudioHALTests", dependencies: ["AudioHAL", "AudioTestSupport"], swiftSettings: strict),
        .testTarget(name: "AVFAudioTests", dependencies: ["AVFAudio", "AudioHAL", "AudioTestSupport"], swiftSettings: strict),
        .testTarget(name: "AudioFileTests", dependencies: ["AudioToolbox", "AudioTestSupport"], swiftSettings: strict),
        // Apple-idiom programs that must compile unchanged: warnings are errors here.
        .testTarget(
            name: "SourceCompatibilityTests", dependencies: ["AVFoundation", "AudioToolbox", "AudioHAL", "AudioTestSupport"],
            swiftSettings: [.unsafeFlags(["-warnings-as-errors"])]),
        .testTarget(
            name: "AudioToolboxTests",
            dependencies: ["AudioToolbox", "AudioGraph", "AudioHAL", "AudioTestSupport"],
            swiftSettings: strict
        ),
    ],
    swiftLanguageModes: [.v6]
)
