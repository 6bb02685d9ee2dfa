// FFmpeg's libraries (Debian: libavformat-dev libavcodec-dev libswresample-dev libavutil-dev).
// Only AudioCodecs imports this module. The inline helpers below stand in for FFmpeg's
// function-like macros, which Swift cannot import. No logic here.
#ifndef OPENAVF_CFFMPEG_SHIM_H
#define OPENAVF_CFFMPEG_SHIM_H
#include <errno.h>
#include <libavformat/avformat.h>
#include <libavformat/avio.h>
#include <libavcodec/avcodec.h>
#include <libavutil/avutil.h>
#include <libavutil/channel_layout.h>
#include <libavutil/dict.h>
#include <libavutil/error.h>
#include <libavutil/log.h>
#include <libavutil/mem.h>
#include <libavutil/opt.h>
#include <libavutil/samplefmt.h>
#include <libswresample/swresample.h>

static inline int oav_averror_eagain(void) { return AVERROR(EAGAIN); }
static inline int oav_averror_eof(void) { return AVERROR_EOF; }
static inline int oav_averror_enomem(void) { return AVERROR(ENOMEM); }
static inline int oav_averror_invaliddata(void) { return AVERROR_INVALIDDATA; }
static inline int64_t oav_nopts_value(void) { return AV_NOPTS_VALUE; }
static inline AVRational oav_time_base_q(void) { return AV_TIME_BASE_Q; }
static inline int oav_input_buffer_padding(void) { return AV_INPUT_BUFFER_PADDING_SIZE; }
#endif
