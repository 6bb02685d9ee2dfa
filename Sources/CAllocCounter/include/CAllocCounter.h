// Counts heap allocations and frees made by one chosen thread, for tests that hold the server thread's
// allocation count at zero (in the spirit of swift-nio's allocation-counter tests).
//
// Linking this target into a test binary replaces malloc and friends for the whole process with
// thin wrappers around glibc's own (__libc_malloc…). The wrappers forward every call; when the
// calling thread is the watched one they also bump an atomic counter. Under a sanitizer nothing
// is replaced (the sanitizer's runtime owns malloc) and the counter reports itself inactive.
#ifndef OPENAVF_CALLOCCOUNTER_H
#define OPENAVF_CALLOCCOUNTER_H
#include <stdint.h>
#include <pthread.h>

/// Watch `thread` (replaces any earlier one) and reset the count to zero.
void openavf_alloc_watch_thread(pthread_t thread);
/// Stop watching.
void openavf_alloc_unwatch(void);
/// Allocations (malloc, calloc, realloc, memalign, posix_memalign, aligned_alloc) by the watched
/// thread since watching began.
int64_t openavf_alloc_count(void);
/// Frees (of non-NULL pointers) by the watched thread since watching began.
int64_t openavf_free_count(void);
/// Of those, the ones called from libpulse's own code (its protocol handlers, say).
int64_t openavf_alloc_count_in_libpulse(void);
int64_t openavf_free_count_in_libpulse(void);
/// The return addresses of the first (up to 16) counted allocations and frees: who called them.
int openavf_alloc_callers(void **out, int max);
/// The stack (up to `max` return addresses, innermost first) of counted call `index`.
int openavf_alloc_stack(int index, void **out, int max);
/// Writes "symbol+offset (library)" for a code address into `buffer`.
int openavf_alloc_describe(void *address, char *buffer, int length);
/// 1 when this binary's malloc is the counting one (the interposition took effect); always 0
/// under ThreadSanitizer or AddressSanitizer, whose runtimes own malloc.
int openavf_alloc_counter_active(void);
/// Swift retains and releases (swift_retain, swift_release, their _n and bridge-object forms) by
/// the watched thread since watching began, and where the first ones came from.
int64_t openavf_refcount_count(void);
int openavf_refcount_callers(void **out, int max);
/// 1 when this target was compiled with a sanitizer, so it replaces nothing and counts nothing.
int openavf_alloc_counter_under_sanitizer(void);
#endif
