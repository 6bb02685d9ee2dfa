# The suite's two layers (DESIGN.md, "Tests and benchmarks"), for Scripts/test, Scripts/soak and
# Scripts/sanitize.
#
# The real-server layer: the test classes that start a private server (TestSound.server()) to
# prove that a capability sounds, records, routes and interrupts on PulseAudio and on PipeWire.
# Every other class is the deterministic layer, which runs with OPENAVF_TEST_SERVER=none and no
# server reachable (PULSE_SERVER points nowhere): a class that asks for a server there fails with
# TestSound.NoServer, naming this list. A new real-server class goes here; a new deterministic
# one needs nothing.
OPENAVF_SERVER_TEST_CLASSES=(
    AVAudioPlayerTests
    AVAudioRecorderTests
    AfplayTests
    AfrecordTests
    AppleIdiomTests
    AudioEnginePlayAtTests
    AudioEngineRunningChangesTests
    AudioEngineSampleGraphTests
    AudioEngineServerTests
    AudioSessionServerTests
    CompressedQueueTests
    ControlSemanticsTests
    DeviceTests
    DuckingServerTests
    IOProcTests
    IOUnitServerTests
    IdleWakeupTests
    InputQueueTests
    IntercomTests
    MicrophoneChirpTests
    OutputQueueTests
    PlayerCompletionTests
    QueueChannelMapServerTests
    SystemSoundTests
    TimePitchQueueTests
    VoiceDuckingTests
    VoiceIOUnitTests
    VoiceProcessingEngineTests
)

# Test names are "Module.Class/test"; this matches the real-server classes.
OPENAVF_SERVER_TESTS="\\.($(IFS='|'; echo "${OPENAVF_SERVER_TEST_CLASSES[*]}"))/"

# Deterministic classes that run on the test's own thread only (the voice processor offline over
# long signals): ThreadSanitizer has no concurrency to check in them and slows them about tenfold
# (137 s of the layer's 262 s under it), so `Scripts/sanitize thread --deterministic` leaves them
# out. They run in the plain layer and under AddressSanitizer.
OPENAVF_SINGLE_THREAD_CLASSES=(
    VoiceProcessorTests
)
OPENAVF_SINGLE_THREAD_TESTS="\\.($(IFS='|'; echo "${OPENAVF_SINGLE_THREAD_CLASSES[*]}"))/"

# Runs the tests of the test binary built in scratch path $1 whose names match the extended regex
# $2 and not $3 (empty: none left out), in the order the binary lists them. The binary itself,
# not `swift test`: SwiftPM holds a lock on the scratch path while it runs, so two `swift test`
# runs side by side would take turns.
openavf_xctest() {
    local bin="$1/debug/OpenAVFAudioPackageTests.xctest" match=$2 skip=$3 tests
    tests=$("$bin" --list-tests 2>/dev/null | grep -E '^[A-Za-z0-9_]+\.[A-Za-z0-9_]+/' | grep -E -- "$match" |
        { if [ -n "$skip" ]; then grep -vE -- "$skip"; else cat; fi; } | paste -sd, -) || true
    if [ -z "$tests" ]; then
        echo "no test in $bin matches ${match} (built with swift build --build-tests?)"
        return 1
    fi
    "$bin" "$tests"
}

# The deterministic layer, with no server reachable, from the build in scratch path $1 (.build),
# less the tests matching $2 if given.
run_deterministic_layer() {
    OPENAVF_TEST_SERVER=none PULSE_SERVER=unix:/nonexistent/openavf-no-server \
        openavf_xctest "${1:-.build}" . "$OPENAVF_SERVER_TESTS${2:+|$2}"
}

# The real-server layer on a private server of kind $1 (pulseaudio or pipewire), from the build in
# scratch path $2 (.build).
run_server_layer() {
    OPENAVF_TEST_SERVER=$1 openavf_xctest "${2:-.build}" "$OPENAVF_SERVER_TESTS" ""
}
