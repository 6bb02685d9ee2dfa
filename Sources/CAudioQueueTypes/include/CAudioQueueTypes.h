// The structs of Apple's AudioQueue.h, in C for the same reason as CCoreAudioTypes: the queue
// callbacks are `@convention(c)` and point to them. Re-exported by AudioToolbox. No logic here.
#ifndef OPENAVF_CAUDIOQUEUETYPES_H
#define OPENAVF_CAUDIOQUEUETYPES_H
#include <stdint.h>
#include "CCoreAudioTypes.h"
#include "CAudioUnitTypes.h"

// Nullability as Apple's header gives it: the audio data is always there, user data and packet
// descriptions may be absent.
typedef struct AudioQueueBuffer {
    const uint32_t mAudioDataBytesCapacity;
    void *const _Nonnull mAudioData;
    uint32_t mAudioDataByteSize;
    void *_Nullable mUserData;
    const uint32_t mPacketDescriptionCapacity;
    AudioStreamPacketDescription *const _Nullable mPacketDescriptions;
    uint32_t mPacketDescriptionCount;
} AudioQueueBuffer;

typedef struct AudioQueueParameterEvent {
    uint32_t mID;
    float mValue;
} AudioQueueParameterEvent;

typedef struct AudioQueueLevelMeterState {
    float mAveragePower;
    float mPeakPower;
} AudioQueueLevelMeterState;

#endif
