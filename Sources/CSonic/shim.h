// libsonic (Debian libsonic-dev): speed change with pitch kept, for AVAudioPlayer.rate.
#include <sonic.h>
