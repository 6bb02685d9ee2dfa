// A C face for libwebrtc-audio-processing (Debian's 0.3, a C++ library): one mono processor for
// a call's microphone, with what the call plays as the far end. No logic here beyond calling the
// library; AudioGraph's VoiceProcessor wraps it.
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

typedef struct OAWebRTCProcessor OAWebRTCProcessor;

/// A processor at `sample_rate` (8000, 16000, 32000 or 48000 Hz), mono, taking 10 ms frames.
/// Echo cancellation (with the library's delay-agnostic and extended filter), noise suppression
/// and adaptive digital gain control are switched by the flags. NULL when the library refuses.
OAWebRTCProcessor *oa_webrtc_new(int sample_rate, int echo_cancellation, int noise_suppression, int gain_control);
void oa_webrtc_free(OAWebRTCProcessor *processor);

/// Gives the processor a 10 ms frame of the far end (what the call plays).
int oa_webrtc_far(OAWebRTCProcessor *processor, const float *frame);

/// Processes a 10 ms frame of the near end (the microphone) in place. `delay_ms` is the time
/// from a far frame being given to its echo reaching the near frames.
int oa_webrtc_near(OAWebRTCProcessor *processor, float *frame, int delay_ms);

#ifdef __cplusplus
}
#endif
