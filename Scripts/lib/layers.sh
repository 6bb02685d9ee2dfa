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
    CallbackContextTests
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
    QueueLayoutAndDecodeBufferTests
    SystemSoundTests
    TimePitchQueueTests
    VoiceDuckingTests
    VoiceIOUnitTests
    VoiceProcessingEngineTests
)

# `swift test --filter/--skip` match "Module.Class/test".
OPENAVF_SERVER_TESTS="\\.($(IFS='|'; echo "${OPENAVF_SERVER_TEST_CLASSES[*]}"))/"

# The deterministic layer, with no server: extra arguments go to `swift test`.
run_deterministic_layer() {
    OPENAVF_TEST_SERVER=none PULSE_SERVER=unix:/nonexistent/openavf-no-server \
        swift test --skip-build --skip "$OPENAVF_SERVER_TESTS" "$@"
}

# The real-server layer on a private server of kind $1 (pulseaudio or pipewire).
run_server_layer() {
    local kind=$1
    shift
    OPENAVF_TEST_SERVER=$kind swift test --skip-build --filter "$OPENAVF_SERVER_TESTS" "$@"
}
