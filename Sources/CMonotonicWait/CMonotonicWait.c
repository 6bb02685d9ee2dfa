#define _GNU_SOURCE
#include "CMonotonicWait.h"
#include <errno.h>
#include <semaphore.h>
#include <time.h>

// ThreadSanitizer intercepts sem_post (a release on the semaphore's address) and sem_wait and
// sem_timedwait (an acquire on it), but not sem_clockwait: without the acquire below, what the
// poster wrote before sem_post would be reported as raced with what the waiter reads after. The
// weak reference is null outside a ThreadSanitizer build.
extern void __tsan_acquire(void *addr) __attribute__((weak));

int openavf_sem_wait_monotonic(sem_t *sem, double seconds) {
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    // NaN and negative waits end at once; no wait is longer than about 30 years (the cast below
    // must stay in range).
    if (!(seconds > 0)) seconds = 0;
    if (seconds > 1e9) seconds = 1e9;
    long long whole = (long long)seconds;
    long long nanos = deadline.tv_nsec + (long long)((seconds - (double)whole) * 1e9);
    deadline.tv_sec += (time_t)(whole + nanos / 1000000000LL);
    deadline.tv_nsec = (long)(nanos % 1000000000LL);
    for (;;) {
        if (sem_clockwait(sem, CLOCK_MONOTONIC, &deadline) == 0) {
            if (__tsan_acquire) __tsan_acquire(sem);
            return 0;
        }
        if (errno != EINTR) return -1;
    }
}
