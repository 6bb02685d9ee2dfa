// Header-only: see include/CCoreAudio.h.
