#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include "CAllocCounter.h"
#include <stdatomic.h>
#include <stddef.h>
#include <errno.h>
#include <string.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static _Atomic(int) watching = 0;
static _Atomic(pthread_t) watched;
static _Atomic(int64_t) counted = 0;
static _Atomic(int) seen = 0;

#define OPENAVF_CALLERS 16
static void *callers[OPENAVF_CALLERS];

#define note() note_from(__builtin_return_address(0))
static inline void note_from(void *caller) {
    atomic_store_explicit(&seen, 1, memory_order_relaxed);
    if (atomic_load_explicit(&watching, memory_order_relaxed) &&
        pthread_equal(pthread_self(), atomic_load_explicit(&watched, memory_order_relaxed))) {
        int64_t n = atomic_fetch_add_explicit(&counted, 1, memory_order_relaxed);
        if (n < OPENAVF_CALLERS) callers[n] = caller;
    }
}

int openavf_alloc_callers(void **out, int max) {
    int64_t n = atomic_load(&counted);
    int count = (int)(n < OPENAVF_CALLERS ? n : OPENAVF_CALLERS);
    if (count > max) count = max;
    for (int i = 0; i < count; i++) out[i] = callers[i];
    return count;
}

void openavf_alloc_watch_thread(pthread_t thread) {
    atomic_store(&watched, thread);
    atomic_store(&counted, 0);
    atomic_store(&watching, 1);
}
void openavf_alloc_unwatch(void) { atomic_store(&watching, 0); }
int64_t openavf_alloc_count(void) { return atomic_load(&counted); }
int openavf_alloc_counter_active(void) { return atomic_load(&seen); }

void *malloc(size_t size) { note(); return __libc_malloc(size); }
void *calloc(size_t n, size_t size) { note(); return __libc_calloc(n, size); }
void *realloc(void *p, size_t size) { note(); return __libc_realloc(p, size); }
void free(void *p) { __libc_free(p); }
void *memalign(size_t alignment, size_t size) { note(); return __libc_memalign(alignment, size); }
void *aligned_alloc(size_t alignment, size_t size) { note(); return __libc_memalign(alignment, size); }
int posix_memalign(void **out, size_t alignment, size_t size) {
    note();
    if (alignment < sizeof(void *) || (alignment & (alignment - 1)) != 0) return EINVAL;
    void *p = __libc_memalign(alignment, size);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}

int openavf_alloc_describe(void *address, char *buffer, int length) {
    Dl_info info;
    if (!dladdr(address, &info)) return snprintf(buffer, (size_t)length, "%p", address);
    const char *file = info.dli_fname ? strrchr(info.dli_fname, '/') : NULL;
    return snprintf(buffer, (size_t)length, "%s+%#lx (%s)", info.dli_sname ? info.dli_sname : "?",
                    (unsigned long)((char *)address - (char *)(info.dli_saddr ? info.dli_saddr : info.dli_fbase)),
                    file ? file + 1 : "?");
}
