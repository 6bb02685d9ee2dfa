// SoundTouch (Debian libsoundtouch-dev, LGPL-2.1-or-later): time stretch and pitch shift by
// overlap-add (WSOLA), for the benchmark's time-pitch comparison with libsonic.
// SoundTouch is C++; Debian ships its own C interface to it (SoundTouchDLL.h, libSoundTouchDll),
// so this bridge needs no C++ of its own.
#include <SoundTouchDLL.h>
