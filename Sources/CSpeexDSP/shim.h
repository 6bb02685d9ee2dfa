// libspeexdsp's echo canceller and preprocessor (noise suppression, gain control), from Debian's
// libspeexdsp-dev (headers and library in the default paths).
#include <speex/speex_echo.h>
#include <speex/speex_preprocess.h>
