// Header-only: see include/CAudioQueueTypes.h.
