// The structs of Apple's AudioHardwareBase.h and AudioHardware.h, laid out as Apple's C headers
// lay them out: C so that `@convention(c)` listener procs and IOProcs may point to them. The Swift
// module CoreAudio re-exports this one and holds the constants and functions. No logic here.
#ifndef OPENAVF_CCOREAUDIO_H
#define OPENAVF_CCOREAUDIO_H
#include <stdint.h>
#include "CCoreAudioTypes.h"

typedef struct AudioObjectPropertyAddress {
    uint32_t mSelector;
    uint32_t mScope;
    uint32_t mElement;
} AudioObjectPropertyAddress;

typedef struct AudioValueTranslation {
    void *_Nonnull mInputData;
    uint32_t mInputDataSize;
    void *_Nonnull mOutputData;
    uint32_t mOutputDataSize;
} AudioValueTranslation;

typedef struct AudioStreamRangedDescription {
    AudioStreamBasicDescription mFormat;
    AudioValueRange mSampleRateRange;
} AudioStreamRangedDescription;

_Static_assert(sizeof(AudioObjectPropertyAddress) == 12, "AudioObjectPropertyAddress layout must match Apple's");
_Static_assert(sizeof(AudioValueTranslation) == 32, "AudioValueTranslation layout must match Apple's");
_Static_assert(sizeof(AudioStreamRangedDescription) == 56, "AudioStreamRangedDescription layout must match Apple's");

#endif
