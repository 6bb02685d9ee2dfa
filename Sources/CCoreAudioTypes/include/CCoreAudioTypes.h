// Apple's CoreAudioTypes structs, laid out as Apple's C headers lay them out.
//
// Why C: Apple's Audio Queue callbacks are `@convention(c)` function types whose parameters point
// to these structs, and Swift allows only C-representable types there. Declaring them in C (as
// Apple does) makes `UnsafePointer<AudioTimeStamp>` and friends legal in those signatures and
// keeps the memory layout Apple's. Constants and helpers live in the Swift module CoreAudioTypes,
// which re-exports this one. No logic here.
#ifndef OPENAVF_CCOREAUDIOTYPES_H
#define OPENAVF_CCOREAUDIOTYPES_H
#include <stdint.h>

// Enumerations that import into Swift as Apple's do: OptionSet structs and enums.
#define OAV_OPTIONS(_type, _name) enum __attribute__((flag_enum, enum_extensibility(open))) _name : _type
#define OAV_ENUM(_type, _name) enum __attribute__((enum_extensibility(open))) _name : _type

typedef struct AudioStreamBasicDescription {
    double mSampleRate;
    uint32_t mFormatID;
    uint32_t mFormatFlags;
    uint32_t mBytesPerPacket;
    uint32_t mFramesPerPacket;
    uint32_t mBytesPerFrame;
    uint32_t mChannelsPerFrame;
    uint32_t mBitsPerChannel;
    uint32_t mReserved;
} AudioStreamBasicDescription;

typedef struct AudioStreamPacketDescription {
    int64_t mStartOffset;
    uint32_t mVariableFramesInPacket;
    uint32_t mDataByteSize;
} AudioStreamPacketDescription;

typedef OAV_ENUM(uint32_t, SMPTETimeType) {
    kSMPTETimeType24 = 0,
    kSMPTETimeType25 = 1,
    kSMPTETimeType30Drop = 2,
    kSMPTETimeType30 = 3,
    kSMPTETimeType2997 = 4,
    kSMPTETimeType2997Drop = 5,
    kSMPTETimeType60 = 6,
    kSMPTETimeType5994 = 7,
    kSMPTETimeType60Drop = 8,
    kSMPTETimeType5994Drop = 9,
    kSMPTETimeType50 = 10,
    kSMPTETimeType2398 = 11
} SMPTETimeType;

typedef OAV_OPTIONS(uint32_t, SMPTETimeFlags) {
    kSMPTETimeUnknown = 0,
    kSMPTETimeValid = (1U << 0),
    kSMPTETimeRunning = (1U << 1)
} SMPTETimeFlags;

typedef struct SMPTETime {
    int16_t mSubframes;
    int16_t mSubframeDivisor;
    uint32_t mCounter;
    SMPTETimeType mType;
    SMPTETimeFlags mFlags;
    int16_t mHours;
    int16_t mMinutes;
    int16_t mSeconds;
    int16_t mFrames;
} SMPTETime;

typedef OAV_OPTIONS(uint32_t, AudioTimeStampFlags) {
    kAudioTimeStampNothingValid = 0,
    kAudioTimeStampSampleTimeValid = (1U << 0),
    kAudioTimeStampHostTimeValid = (1U << 1),
    kAudioTimeStampRateScalarValid = (1U << 2),
    kAudioTimeStampWordClockTimeValid = (1U << 3),
    kAudioTimeStampSMPTETimeValid = (1U << 4),
    kAudioTimeStampSampleHostTimeValid = (kAudioTimeStampSampleTimeValid | kAudioTimeStampHostTimeValid)
} AudioTimeStampFlags;

typedef struct AudioTimeStamp {
    double mSampleTime;
    uint64_t mHostTime;
    double mRateScalar;
    uint64_t mWordClockTime;
    SMPTETime mSMPTETime;
    AudioTimeStampFlags mFlags;
    uint32_t mReserved;
} AudioTimeStamp;

typedef OAV_OPTIONS(uint32_t, AudioChannelBitmap) {
    kAudioChannelBit_Left = (1U << 0),
    kAudioChannelBit_Right = (1U << 1),
    kAudioChannelBit_Center = (1U << 2),
    kAudioChannelBit_LFEScreen = (1U << 3),
    kAudioChannelBit_LeftSurround = (1U << 4),
    kAudioChannelBit_RightSurround = (1U << 5),
    kAudioChannelBit_LeftCenter = (1U << 6),
    kAudioChannelBit_RightCenter = (1U << 7),
    kAudioChannelBit_CenterSurround = (1U << 8),
    kAudioChannelBit_LeftSurroundDirect = (1U << 9),
    kAudioChannelBit_RightSurroundDirect = (1U << 10)
} AudioChannelBitmap;

typedef OAV_OPTIONS(uint32_t, AudioChannelFlags) {
    kAudioChannelFlags_AllOff = 0,
    kAudioChannelFlags_RectangularCoordinates = (1U << 0),
    kAudioChannelFlags_SphericalCoordinates = (1U << 1),
    kAudioChannelFlags_Meters = (1U << 2)
} AudioChannelFlags;

typedef struct AudioChannelDescription {
    uint32_t mChannelLabel;
    AudioChannelFlags mChannelFlags;
    float mCoordinates[3];
} AudioChannelDescription;

typedef struct AudioChannelLayout {
    uint32_t mChannelLayoutTag;
    AudioChannelBitmap mChannelBitmap;
    uint32_t mNumberChannelDescriptions;
    AudioChannelDescription mChannelDescriptions[1];
} AudioChannelLayout;

typedef struct AudioValueRange {
    double mMinimum;
    double mMaximum;
} AudioValueRange;

typedef struct AudioBuffer {
    uint32_t mNumberChannels;
    uint32_t mDataByteSize;
    void *_Nullable mData;
} AudioBuffer;

/// Variable length: `mNumberBuffers` buffers follow; Swift code walks them with
/// `UnsafeMutableAudioBufferListPointer`.
typedef struct AudioBufferList {
    uint32_t mNumberBuffers;
    AudioBuffer mBuffers[1];
} AudioBufferList;

typedef struct AudioClassDescription {
    uint32_t mType;
    uint32_t mSubType;
    uint32_t mManufacturer;
} AudioClassDescription;

_Static_assert(sizeof(AudioStreamBasicDescription) == 40, "ASBD layout must match Apple's");
_Static_assert(sizeof(AudioStreamPacketDescription) == 16, "packet description layout must match Apple's");
_Static_assert(sizeof(SMPTETime) == 24, "SMPTETime layout must match Apple's");
_Static_assert(sizeof(AudioTimeStamp) == 64, "AudioTimeStamp layout must match Apple's");
_Static_assert(sizeof(AudioBuffer) == 16, "AudioBuffer layout must match Apple's");
_Static_assert(sizeof(AudioBufferList) == 24, "AudioBufferList layout must match Apple's");
_Static_assert(sizeof(AudioChannelLayout) == 32, "AudioChannelLayout layout must match Apple's");

#endif
