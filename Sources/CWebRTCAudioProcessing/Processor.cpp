// Calls into libwebrtc-audio-processing 0.3 for CWebRTCAudioProcessing.h. The headers come
// through `system/webrtc`, a link to Debian's /usr/include/webrtc_audio_processing/webrtc (its
// pkg-config flags include -D flags SwiftPM refuses).
#include "CWebRTCAudioProcessing.h"

#include <new>
#include <webrtc/modules/audio_processing/include/audio_processing.h>

struct OAWebRTCProcessor {
    webrtc::AudioProcessing *apm;
    int rate;
    size_t frame;
};

static int configure(webrtc::AudioProcessing *apm, int echo, int noise, int gain) {
    int failed = 0;
    failed |= apm->high_pass_filter()->Enable(true);
    failed |= apm->echo_cancellation()->Enable(echo != 0);
    // The lowest suppression: on the benchmark's voices it cancels as much echo as the highest
    // (47 dB) and keeps more of a near talker over it (openavf-bench --only voice).
    if (echo) failed |= apm->echo_cancellation()->set_suppression_level(webrtc::EchoCancellation::kLowSuppression);
    failed |= apm->noise_suppression()->Enable(noise != 0);
    if (noise) failed |= apm->noise_suppression()->set_level(webrtc::NoiseSuppression::kVeryHigh);
    if (gain) {
        failed |= apm->gain_control()->set_mode(webrtc::GainControl::kAdaptiveDigital);
        // A talker's peaks near -3 dBFS, speech's level around -20 dBFS; up to 30 dB of gain.
        failed |= apm->gain_control()->set_target_level_dbfs(3);
        failed |= apm->gain_control()->set_compression_gain_db(30);
        failed |= apm->gain_control()->enable_limiter(true);
    }
    failed |= apm->gain_control()->Enable(gain != 0);
    return failed ? -1 : 0;
}

extern "C" OAWebRTCProcessor *oa_webrtc_new(int sample_rate, int echo, int noise, int gain) {
    if (sample_rate != 8000 && sample_rate != 16000 && sample_rate != 32000 && sample_rate != 48000) return nullptr;
    webrtc::Config config;
    config.Set<webrtc::ExtendedFilter>(new webrtc::ExtendedFilter(true));
    config.Set<webrtc::DelayAgnostic>(new webrtc::DelayAgnostic(true));
    webrtc::AudioProcessing *apm = webrtc::AudioProcessing::Create(config);
    if (!apm) return nullptr;
    webrtc::ProcessingConfig streams = {{
        webrtc::StreamConfig(sample_rate, 1), webrtc::StreamConfig(sample_rate, 1),
        webrtc::StreamConfig(sample_rate, 1), webrtc::StreamConfig(sample_rate, 1),
    }};
    if (apm->Initialize(streams) != webrtc::AudioProcessing::kNoError || configure(apm, echo, noise, gain) != 0) {
        delete apm;
        return nullptr;
    }
    OAWebRTCProcessor *p = new (std::nothrow) OAWebRTCProcessor{apm, sample_rate, static_cast<size_t>(sample_rate / 100)};
    if (!p) delete apm;
    return p;
}

extern "C" void oa_webrtc_free(OAWebRTCProcessor *p) {
    if (!p) return;
    delete p->apm;
    delete p;
}

extern "C" int oa_webrtc_far(OAWebRTCProcessor *p, const float *frame) {
    const float *channels[1] = {frame};
    return p->apm->AnalyzeReverseStream(channels, p->frame, p->rate, webrtc::AudioProcessing::kMono) == 0 ? 0 : -1;
}

extern "C" int oa_webrtc_near(OAWebRTCProcessor *p, float *frame, int delay_ms) {
    p->apm->set_stream_delay_ms(delay_ms);
    const float *in[1] = {frame};
    float *out[1] = {frame};
    webrtc::StreamConfig mono(p->rate, 1);
    return p->apm->ProcessStream(in, mono, mono, out) == 0 ? 0 : -1;
}
