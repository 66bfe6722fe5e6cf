/* common/core/rng.h: a counter-based random number generator, Philox4x32-R (Salmon et al., "Parallel random
 * numbers: as easy as 1, 2, 3", SC'11; Random123 reference implementation), and the keyed uniform draws the
 * rollout sampler uses so a run is reproducible from (seed, group id, sample index, position) alone — no
 * generator state to carry, checkpoint or share between workers.
 *
 * Mapping (fixed; changing it changes every sampled response):
 *   key     = { seed & 0xffffffff, seed >> 32 }
 *   counter = { position, sample index, group_id & 0xffffffff, group_id >> 32 }
 *   out     = Philox4x32-10(counter, key): four independent 32-bit words per (seed, group, sample, position).
 * Not here: distributions other than uniform (normal, gamma, ...), sequential-stream state, shuffles. */
#ifndef DAPO_RNG_H
#define DAPO_RNG_H

#include <stdint.h>

#define RNG_PHILOX_ROUNDS 10   /* Random123's default and the crush-resistant choice */

/* One Philox4x32 block: out = Philox4x32-rounds(ctr, key). rounds in [1, 16] (clamped into that range);
 * rounds = 10 is the standard generator, 7 also has published known-answer vectors. Pure, thread-safe.
 * Source: Random123 philox.h (philox4x32round / philox4x32bumpkey, multipliers 0xD2511F53 / 0xCD9E8D57,
 * Weyl key increments 0x9E3779B9 / 0xBB67AE85). Known answers: Random123 tests/kat_vectors. */
void rng_philox4x32(const uint32_t ctr[4], const uint32_t key[2], int rounds, uint32_t out[4]);

/* The four raw words for (seed, group_id, sample, pos) under the mapping above (10 rounds). */
void rng_words(uint64_t seed, uint64_t group_id, uint32_t sample, uint32_t pos, uint32_t out[4]);

/* A uniform double in [0, 1) with 53 random bits (words 0 and 1 of rng_words). This is the draw the
 * sampler uses for token `pos` of response `sample` of prompt group `group_id`. */
double rng_uniform(uint64_t seed, uint64_t group_id, uint32_t sample, uint32_t pos);

/* Four uniform floats in [0, 1) with 24 random bits each (one per word of rng_words), for callers that
 * need several independent draws at one position. */
void rng_uniform4f(uint64_t seed, uint64_t group_id, uint32_t sample, uint32_t pos, float u[4]);

/* perm[0..n) = a permutation of 0..n-1 by Fisher-Yates, the swap of position k-1 (k = n .. 2) drawn as
 * floor(rng_uniform(seed, stream, tag, k) * k): the same order for the same (seed, stream, tag), whoever asks (the
 * coordinator's epoch order: stream = epoch, tag 0x5eed; dapo-sft's: stream = epoch, tag 0x5f7). */
void rng_permutation(int *perm, long n, uint64_t seed, uint64_t stream, uint32_t tag);

/* Seeds libc's rand() once per process from getrandom(2) (thread-safe; later calls do nothing). Not for dapo's
 * own draws (those are the keyed Philox ones above): libzmq draws a ROUTER socket's first generated routing id from
 * rand() and counts up from it, so unseeded every process's first ROUTER starts at the same id (0x6b8b4567 on glibc),
 * which a client could claim ahead of the ROUTER with ZMQ_ROUTING_ID; libzmq aborts when it then generates that id
 * (issue 38). Call before creating a ROUTER (net_socket and the CPU collective do). */
void rng_seed_libc(void);

/* Word -> float in [0, 1): (x >> 8) * 2^-24 (exactly representable, never 1.0). */
float rng_u32_to_float(uint32_t x);

/* Two words -> double in [0, 1): ((hi >> 5) * 2^26 + (lo >> 6)) * 2^-53 (as Random123's u01 / numpy). */
double rng_u32x2_to_double(uint32_t hi, uint32_t lo);

#endif
