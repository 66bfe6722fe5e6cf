/* common/core/rng.c: Philox4x32-R and the keyed uniform draws of rng.h.
 * Written from the published algorithm (Salmon et al., SC'11, and Random123's philox.h): each round
 * multiplies words 0 and 2 by the two Philox constants as 32x32 -> 64-bit products, mixes the high halves
 * with the other two words and the round key, and the key is bumped by the Weyl constants between rounds.
 * Not here: vectorised (SIMD) blocks — one block per call is plenty for one draw per sampled token. */
#include "core/rng.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

static void philox_round(uint32_t c[4], const uint32_t k[2]) {
    uint64_t p0 = (uint64_t)PHILOX_M0 * c[0];
    uint64_t p1 = (uint64_t)PHILOX_M1 * c[2];
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    uint32_t n0 = hi1 ^ c[1] ^ k[0];
    uint32_t n2 = hi0 ^ c[3] ^ k[1];
    c[0] = n0; c[1] = lo1; c[2] = n2; c[3] = lo0;
}

void rng_philox4x32(const uint32_t ctr[4], const uint32_t key[2], int rounds, uint32_t out[4]) {
    if (rounds < 1) rounds = 1;
    if (rounds > 16) rounds = 16;
    uint32_t c[4] = { ctr[0], ctr[1], ctr[2], ctr[3] };
    uint32_t k[2] = { key[0], key[1] };
    for (int r = 0; r < rounds; r++) {
        if (r > 0) { k[0] += PHILOX_W0; k[1] += PHILOX_W1; }
        philox_round(c, k);
    }
    out[0] = c[0]; out[1] = c[1]; out[2] = c[2]; out[3] = c[3];
}

void rng_words(uint64_t seed, uint64_t group_id, uint32_t sample, uint32_t pos, uint32_t out[4]) {
    const uint32_t ctr[4] = { pos, sample, (uint32_t)group_id, (uint32_t)(group_id >> 32) };
    const uint32_t key[2] = { (uint32_t)seed, (uint32_t)(seed >> 32) };
    rng_philox4x32(ctr, key, RNG_PHILOX_ROUNDS, out);
}

float rng_u32_to_float(uint32_t x) {
    return (float)(x >> 8) * 0x1p-24f;
}

double rng_u32x2_to_double(uint32_t hi, uint32_t lo) {
    return ((double)(hi >> 5) * 67108864.0 + (double)(lo >> 6)) * 0x1p-53;
}

double rng_uniform(uint64_t seed, uint64_t group_id, uint32_t sample, uint32_t pos) {
    uint32_t w[4];
    rng_words(seed, group_id, sample, pos, w);
    return rng_u32x2_to_double(w[0], w[1]);
}

void rng_uniform4f(uint64_t seed, uint64_t group_id, uint32_t sample, uint32_t pos, float u[4]) {
    uint32_t w[4];
    rng_words(seed, group_id, sample, pos, w);
    for (int i = 0; i < 4; i++) u[i] = rng_u32_to_float(w[i]);
}

void rng_permutation(int *perm, long n, uint64_t seed, uint64_t stream, uint32_t tag) {
    for (long i = 0; i < n; i++) perm[i] = (int)i;
    for (long k = n; k > 1; k--) {
        double u = rng_uniform(seed, stream, tag, (uint32_t)k);
        long j = (long)(u * (double)k);
        if (j >= k) j = k - 1;
        int t = perm[k - 1];
        perm[k - 1] = perm[j];
        perm[j] = t;
    }
}

static void seed_libc_once(void) {
    unsigned seed = 0;
    if (getrandom(&seed, sizeof seed, 0) != (ssize_t)sizeof seed) {   /* no entropy yet: time and pid at least */
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        seed = (unsigned)t.tv_nsec ^ (unsigned)t.tv_sec ^ ((unsigned)getpid() << 16);
    }
    srand(seed);
}

void rng_seed_libc(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, seed_libc_once);
}
