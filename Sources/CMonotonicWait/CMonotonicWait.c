#define _GNU_SOURCE
#include "CMonotonicWait.h"
#include <errno.h>
#include <semaphore.h>
#include <time.h>

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
        if (sem_clockwait(sem, CLOCK_MONOTONIC, &deadline) == 0) return 0;
        if (errno != EINTR) return -1;
    }
}
