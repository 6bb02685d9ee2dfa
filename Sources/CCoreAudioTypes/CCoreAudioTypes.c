// Header-only: see include/CCoreAudioTypes.h.
