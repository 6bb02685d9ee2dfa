// libopus's decoder, from Debian's libopus-dev: the Opus decoder's own packet loss concealment,
// which FFmpeg's decoders do not reach (an empty packet ends their stream).
#include <opus/opus.h>
