#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include "CAllocCounter.h"
#include <stdatomic.h>
#include <stddef.h>
#include <errno.h>
#include <string.h>
#include <execinfo.h>
#include <link.h>

// Under a sanitizer the runtime owns malloc and free (ThreadSanitizer and AddressSanitizer
// intercept them to track every block); replacements that call glibc directly would bypass
// those interceptors and crash the process before its first test. So the counter steps aside:
// nothing is replaced, openavf_alloc_counter_active() reports 0 and the allocation test skips.
#if defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer) || __has_feature(memory_sanitizer)
#define OPENAVF_UNDER_SANITIZER 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define OPENAVF_UNDER_SANITIZER 1
#endif

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static _Atomic(int) watching = 0;
static _Atomic(pthread_t) watched;
static _Atomic(int64_t) counted = 0;
static _Atomic(int64_t) freed = 0;
static _Atomic(int) seen = 0;

#define OPENAVF_CALLERS 16
#define OPENAVF_DEPTH 8
static void *callers[OPENAVF_CALLERS][OPENAVF_DEPTH];

static _Atomic(int) caller_slots = 0;
static _Atomic(int64_t) retained = 0;
static _Atomic(int) refcount_slots = 0;
static void *refcount_callers[OPENAVF_CALLERS];

// Where libpulse's code lies (its executable segments), so that calls made by libpulse itself
// (pa_xmalloc, pa_xfree…) can be told from the project's. Found when watching begins.
#define OPENAVF_RANGES 8
static uintptr_t range_start[OPENAVF_RANGES], range_end[OPENAVF_RANGES];
static _Atomic(int) range_count = 0;
static _Atomic(int64_t) counted_libpulse = 0;
static _Atomic(int64_t) freed_libpulse = 0;

static int find_libpulse(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    (void)data;
    if (!info->dlpi_name || !strstr(info->dlpi_name, "libpulse")) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
        int n = atomic_load(&range_count);
        if (n >= OPENAVF_RANGES) return 1;
        range_start[n] = info->dlpi_addr + ph->p_vaddr;
        range_end[n] = range_start[n] + ph->p_memsz;
        atomic_store(&range_count, n + 1);
    }
    return 0;
}

static inline int in_libpulse(void *address) {
    uintptr_t a = (uintptr_t)address;
    int n = atomic_load_explicit(&range_count, memory_order_relaxed);
    for (int i = 0; i < n; i++)
        if (a >= range_start[i] && a < range_end[i]) return 1;
    return 0;
}

static inline int on_watched_thread(void) {
    return atomic_load_explicit(&watching, memory_order_relaxed) &&
           pthread_equal(pthread_self(), atomic_load_explicit(&watched, memory_order_relaxed));
}

// The first calls' stacks, for saying who allocated. backtrace() was called once when watching
// began, so that its own first-call setup (loading libgcc_s) does not happen in here.
static inline void remember(void *caller) {
    int slot = atomic_fetch_add_explicit(&caller_slots, 1, memory_order_relaxed);
    if (slot >= OPENAVF_CALLERS) return;
    void *frames[OPENAVF_DEPTH + 2];
    int n = backtrace(frames, OPENAVF_DEPTH + 2);
    // Skip remember and the hook itself; keep the caller first.
    callers[slot][0] = caller;
    for (int i = 1; i < OPENAVF_DEPTH; i++) callers[slot][i] = (i + 2 < n) ? frames[i + 2] : NULL;
}

#define note() note_from(__builtin_return_address(0))
static inline void note_from(void *caller) {
    atomic_store_explicit(&seen, 1, memory_order_relaxed);
    if (on_watched_thread()) {
        atomic_fetch_add_explicit(&counted, 1, memory_order_relaxed);
        if (in_libpulse(caller)) atomic_fetch_add_explicit(&counted_libpulse, 1, memory_order_relaxed);
        remember(caller);
    }
}

#define note_free(p) note_free_from(p, __builtin_return_address(0))
static inline void note_free_from(void *p, void *caller) {
    // free(NULL) does nothing, in C as here.
    if (p && on_watched_thread()) {
        atomic_fetch_add_explicit(&freed, 1, memory_order_relaxed);
        if (in_libpulse(caller)) atomic_fetch_add_explicit(&freed_libpulse, 1, memory_order_relaxed);
        remember(caller);
    }
}

int openavf_alloc_callers(void **out, int max) {
    int n = atomic_load(&caller_slots);
    int count = n < OPENAVF_CALLERS ? n : OPENAVF_CALLERS;
    if (count > max) count = max;
    for (int i = 0; i < count; i++) out[i] = callers[i][0];
    return count;
}

int openavf_alloc_stack(int index, void **out, int max) {
    int n = atomic_load(&caller_slots);
    if (index < 0 || index >= n || index >= OPENAVF_CALLERS) return 0;
    int count = 0;
    for (int i = 0; i < OPENAVF_DEPTH && i < max && callers[index][i]; i++) out[count++] = callers[index][i];
    return count;
}

void openavf_alloc_watch_thread(pthread_t thread) {
    void *warm[2];
    backtrace(warm, 2);
    if (atomic_load(&range_count) == 0) dl_iterate_phdr(find_libpulse, NULL);
    atomic_store(&counted_libpulse, 0);
    atomic_store(&freed_libpulse, 0);
    atomic_store(&retained, 0);
    atomic_store(&refcount_slots, 0);
    atomic_store(&watched, thread);
    atomic_store(&counted, 0);
    atomic_store(&freed, 0);
    atomic_store(&caller_slots, 0);
    atomic_store(&watching, 1);
}
void openavf_alloc_unwatch(void) { atomic_store(&watching, 0); }
int64_t openavf_alloc_count(void) { return atomic_load(&counted); }
int64_t openavf_free_count(void) { return atomic_load(&freed); }
int64_t openavf_alloc_count_in_libpulse(void) { return atomic_load(&counted_libpulse); }
int64_t openavf_free_count_in_libpulse(void) { return atomic_load(&freed_libpulse); }
int openavf_alloc_counter_active(void) { return atomic_load(&seen); }
int openavf_alloc_counter_under_sanitizer(void) {
#ifdef OPENAVF_UNDER_SANITIZER
    return 1;
#else
    return 0;
#endif
}

#ifndef OPENAVF_UNDER_SANITIZER
void *malloc(size_t size) { note(); return __libc_malloc(size); }
void *calloc(size_t n, size_t size) { note(); return __libc_calloc(n, size); }
// realloc may allocate, move or free: counted as an allocation.
void *realloc(void *p, size_t size) { note(); return __libc_realloc(p, size); }
void free(void *p) { note_free(p); __libc_free(p); }
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
#endif

int openavf_alloc_describe(void *address, char *buffer, int length) {
    Dl_info info;
    if (!dladdr(address, &info)) return snprintf(buffer, (size_t)length, "%p", address);
    const char *file = info.dli_fname ? strrchr(info.dli_fname, '/') : NULL;
    return snprintf(buffer, (size_t)length, "%s+%#lx (%s)", info.dli_sname ? info.dli_sname : "?",
                    (unsigned long)((char *)address - (char *)(info.dli_saddr ? info.dli_saddr : info.dli_fbase)),
                    file ? file + 1 : "?");
}

// Swift's reference counting on the watched thread: a retain or release is an atomic operation on
// an object's header that other threads touch too. The executable's definitions take the place of
// the runtime's exported ones (the dynamic linker finds these first) and forward to them.

static inline void note_refcount(void *object, void *caller) {
    if (object && on_watched_thread()) {
        atomic_fetch_add_explicit(&retained, 1, memory_order_relaxed);
        int slot = atomic_fetch_add_explicit(&refcount_slots, 1, memory_order_relaxed);
        if (slot < OPENAVF_CALLERS) refcount_callers[slot] = caller;
    }
}

#ifndef OPENAVF_UNDER_SANITIZER
#define FORWARD(name, type) \
    static type real_##name; \
    static inline type get_##name(void) { \
        type f = __atomic_load_n(&real_##name, __ATOMIC_ACQUIRE); \
        if (!f) { \
            f = (type)dlsym(RTLD_NEXT, #name); \
            __atomic_store_n(&real_##name, f, __ATOMIC_RELEASE); \
        } \
        return f; \
    }

typedef void *(*retain_t)(void *);
typedef void (*release_t)(void *);
typedef void *(*retain_n_t)(void *, uint32_t);
typedef void (*release_n_t)(void *, uint32_t);
FORWARD(swift_retain, retain_t)
FORWARD(swift_release, release_t)
FORWARD(swift_retain_n, retain_n_t)
FORWARD(swift_release_n, release_n_t)
FORWARD(swift_bridgeObjectRetain, retain_t)
FORWARD(swift_bridgeObjectRelease, release_t)

void *swift_retain(void *o) { note_refcount(o, __builtin_return_address(0)); return get_swift_retain()(o); }
void swift_release(void *o) { note_refcount(o, __builtin_return_address(0)); get_swift_release()(o); }
void *swift_retain_n(void *o, uint32_t n) { note_refcount(o, __builtin_return_address(0)); return get_swift_retain_n()(o, n); }
void swift_release_n(void *o, uint32_t n) { note_refcount(o, __builtin_return_address(0)); get_swift_release_n()(o, n); }
void *swift_bridgeObjectRetain(void *o) { note_refcount(o, __builtin_return_address(0)); return get_swift_bridgeObjectRetain()(o); }
void swift_bridgeObjectRelease(void *o) { note_refcount(o, __builtin_return_address(0)); get_swift_bridgeObjectRelease()(o); }

#endif

int64_t openavf_refcount_count(void) { return atomic_load(&retained); }
int openavf_refcount_callers(void **out, int max) {
    int n = atomic_load(&refcount_slots);
    int count = n < OPENAVF_CALLERS ? n : OPENAVF_CALLERS;
    if (count > max) count = max;
    for (int i = 0; i < count; i++) out[i] = refcount_callers[i];
    return count;
}
