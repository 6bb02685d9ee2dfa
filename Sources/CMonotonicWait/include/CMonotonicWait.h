// A semaphore wait bounded on the monotonic clock.
//
// sem_timedwait measures its deadline on CLOCK_REALTIME, which NTP or an administrator may step:
// a step back during a wait would hold the waiter for as long as the step. glibc's sem_clockwait
// (2.30) takes the clock, but Swift's Glibc module is built without _GNU_SOURCE and does not show
// it; this file, compiled with it, does.
#ifndef OPENAVF_CMONOTONICWAIT_H
#define OPENAVF_CMONOTONICWAIT_H
#include <semaphore.h>

/// Waits until `sem` is posted or `seconds` pass on CLOCK_MONOTONIC, retrying on EINTR. Returns 0
/// when posted, -1 with errno set (ETIMEDOUT, or what sem_clockwait gave) otherwise.
int openavf_sem_wait_monotonic(sem_t *sem, double seconds);

#endif
