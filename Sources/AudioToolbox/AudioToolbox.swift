// AudioToolbox re-exports CoreAudioTypes, as Apple's does, and the C structs of AudioQueue.h.
@_exported public import CoreAudioTypes
@_exported public import CAudioQueueTypes
