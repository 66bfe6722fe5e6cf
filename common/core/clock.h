/* common/core/clock.h: monotonic time (CLOCK_MONOTONIC) for timeouts, leases and timings. */
#ifndef DAPO_CLOCK_H
#define DAPO_CLOCK_H
#include <stdint.h>
#include <time.h>

static inline int64_t clock_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
static inline double clock_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}
#endif
