// The structs of Apple's AudioQueue.h, in C for the same reason as CCoreAudioTypes: the queue
// callbacks are `@convention(c)` and point to them. Re-exported by AudioToolbox. No logic here.
#ifndef OPENAVF_CAUDIOQUEUETYPES_H
#define OPENAVF_CAUDIOQUEUETYPES_H
#include <stdint.h>
#include "CCoreAudioTypes.h"

typedef struct AudioQueueBuffer {
    const uint32_t mAudioDataBytesCapacity;
    void *const mAudioData;
    uint32_t mAudioDataByteSize;
    void *mUserData;
    const uint32_t mPacketDescriptionCapacity;
    AudioStreamPacketDescription *const mPacketDescriptions;
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
