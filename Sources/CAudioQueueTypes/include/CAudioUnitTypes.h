// The flag set of Apple's AUComponent.h, in C for the same reason as CCoreAudioTypes: render
// callbacks are `@convention(c)` and point to it. Re-exported by AudioToolbox. No logic here.
#ifndef OPENAVF_CAUDIOUNITTYPES_H
#define OPENAVF_CAUDIOUNITTYPES_H
#include <stdint.h>
#include "CCoreAudioTypes.h"

typedef OAV_OPTIONS(uint32_t, AudioUnitRenderActionFlags) {
    kAudioUnitRenderAction_PreRender = (1U << 2),
    kAudioUnitRenderAction_PostRender = (1U << 3),
    kAudioUnitRenderAction_OutputIsSilence = (1U << 4),
    kAudioOfflineUnitRenderAction_Preflight = (1U << 5),
    kAudioOfflineUnitRenderAction_Render = (1U << 6),
    kAudioOfflineUnitRenderAction_Complete = (1U << 7),
    kAudioUnitRenderAction_PostRenderError = (1U << 8),
    kAudioUnitRenderAction_DoNotCheckRenderArgs = (1U << 9)
} AudioUnitRenderActionFlags;

#endif
