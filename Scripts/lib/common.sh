# Shared by Scripts/test and Scripts/demo: install missing Debian packages, idempotently.
#
# `apt-get update` runs only when something is missing. Runs as root, or through sudo.

# The Debian packages the project needs to build, test and run on a fresh Debian 12 machine.
OPENAVF_PACKAGES=(
    pkg-config
    libpulse-dev      # libpulse: the sound server's client library (AudioHAL)
    pulseaudio        # the private server tests, benchmark and headless demo start
    pulseaudio-utils  # pactl, pacat, parec: real peers the tests and benchmark measure against
    libavformat-dev   # FFmpeg: containers (AudioCodecs)
    libsonic-dev      # speed change with pitch kept (AVAudioPlayer.rate)
    libsoundtouch-dev # SoundTouch: the benchmark's time-pitch comparison with libsonic
    libwebrtc-audio-processing-dev  # voice processing (AudioGraph.VoiceProcessor), measured against
    libspeexdsp-dev                 # libspeexdsp's (openavf-bench --only voice)
    libopus-dev       # Opus decoding with its packet loss concealment (AudioCodecs.PacketDecoder)
    libavcodec-dev    # FFmpeg: codecs
    libavutil-dev
    libswresample-dev # FFmpeg: sample rate conversion
    ffmpeg            # ffmpeg/ffprobe: interoperability peers and the benchmark's anchor
    sox               # a second independent reader/writer for interoperability tests
    libsox-fmt-all    # sox: CAF (via libsndfile), MP3 and the other formats
    espeak-ng         # speech files written by a third program; the voice-processing measurements' voices
    time              # /usr/bin/time: the benchmark's per-process peak memory
    pipewire          # the second private server the tests start (PipeWire, as most desktops run)
    pipewire-pulse    # its PulseAudio protocol, which the library speaks
    wireplumber       # its session manager
    dbus-daemon       # a private session bus for PipeWire's daemons
)

ensure_packages() {
    local missing=()
    local pkg
    for pkg in "$@"; do
        if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
            missing+=("$pkg")
        fi
    done
    if [ ${#missing[@]} -eq 0 ]; then
        return 0
    fi
    echo "Installing missing Debian packages: ${missing[*]}"
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Swift flags for every build: warnings are errors.
OPENAVF_SWIFT_FLAGS=(-Xswiftc -warnings-as-errors)
