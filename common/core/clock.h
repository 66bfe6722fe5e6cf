/* common/core/clock.h: monotonic time (CLOCK_MONOTONIC) for timeouts, leases and timings. */
#ifndef DAPO_CLOCK_H
#define DAPO_CLOCK_H
#include <stdint.h>
#include <time.h>
#include <unistd.h>

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
/* A number that tells this process (and salt, an object of it) apart from any other start: pid, wall clock (ns)
 * and the address; never 0. For restart detection (Hello.nonce, the collective's HELLO), not for secrets. */
static inline uint64_t clock_nonce(const void *salt) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t n = ((uint64_t)(uint32_t)getpid() << 32) ^ (uint64_t)ts.tv_sec * 1000000000u ^ (uint64_t)ts.tv_nsec ^
                 (uint64_t)(uintptr_t)salt;
    return n ? n : 1;
}
#endif
