// Bridge to libpulse (PulseAudio's client library; PipeWire's pipewire-pulse speaks the same protocol).
// Only AudioHAL imports this module, and only with `internal import`.
#ifndef OPENAVF_CPULSEAUDIO_SHIM_H
#define OPENAVF_CPULSEAUDIO_SHIM_H
#include <pulse/pulseaudio.h>
#include <pulse/ext-stream-restore.h>
#endif
