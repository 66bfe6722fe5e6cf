/* common/model/sample.h: choosing the next token from one row of logits [V] — temperature, top-k, top-p
 * (nucleus), greedy — driven by one uniform draw, so a response is reproducible from the counter-based RNG
 * (core/rng.h: u = rng_uniform(seed, group, sample, position)).
 *
 * Semantics (Hugging Face `generate` logits warpers, in their order, and vLLM's sampler):
 *   x = logits / temperature                                      (fp32, as torch's div)
 *   top-k: keep the k largest x (ties: lower token id first)      (k <= 0 or k >= V: off; verl's -1 = off)
 *   top-p: over the softmax of what top-k kept, sorted descending, keep the smallest prefix whose cumulative
 *          probability is >= top_p, and always at least one token (HF: drop tokens whose ascending cumulative
 *          probability is <= 1 - top_p; the same set) (top_p >= 1: off)
 *   draw:  weights w = exp(x - max x) (fp32, a vectorised Cephes-style exp good to about 1 ulp; exactly 0
 *          for -inf logits, so masked tokens are never drawn); untruncated, the tokens in id order, else the
 *          kept tokens in descending order; the first token whose running weight exceeds u * (total weight).
 *   greedy (params.greedy, or temperature <= 0): argmax of the logits, first index on ties (torch.argmax).
 * Returned log-prob: log_softmax(logits / temperature)[token] over the FULL vocabulary, before top-k/top-p
 * truncation (temperature 1 when greedy with temperature <= 0). This is deliberate: it is what the learner
 * recomputes from the same logits (docs/design.md §2, logp = log softmax(logits / temperature)[token]), so the
 * rollout's and the learner's log-probs are comparable (the rollout_corr metrics) and never -inf-shifted by
 * the truncation; it is not the probability the truncated sampler actually used.
 * Cost (V = 151936, one core, SSE2): untruncated 0.23 ms per token — one vectorised pass for the max, one
 * for the weights (fp32 block sums of 256 accumulated in double), an inverse-CDF scan that skips whole blocks;
 * top-p alone 0.4 ms on a peaked LM-like row (only tokens within log(V / ((1 - top_p) * mass)) nats of the
 * max can be in the nucleus, so only those are sorted); top-k 0.5 ms (a threshold from a fixed strided
 * sample, checked by counting, then a partial selection of the survivors). A flat row with a wide nucleus
 * costs a sort of the nucleus (ms), as in HF. Deterministic for a given build: every tie is broken by id.
 * Not here: repetition / presence penalties, min-p, logit bias, batched rows, the model forward. */
#ifndef DAPO_SAMPLE_H
#define DAPO_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

typedef struct {
    float temperature;   /* > 0 divides the logits; <= 0 means greedy */
    float top_p;         /* (0, 1]; 1 = off */
    int   top_k;         /* <= 0 or >= V = off */
    int   greedy;        /* nonzero: argmax (verl's do_sample = false) */
} SampleParams;

/* From the config: settings_sample_params (settings/settings.h). */

/* Scratch bytes sample_token / sample_support need for a vocabulary of V (8 bytes per token). */
size_t sample_scratch_bytes(int V);

/* Picks a token from logits[V] (borrowed, fp32, may hold -inf; NaN or +inf is an error) with the uniform
 * draw u in [0, 1). scratch: sample_scratch_bytes(V) bytes, 8-byte aligned, owned by the caller (reuse it per
 * row: nothing is allocated then); NULL makes the call allocate and free its own.
 * Writes *token (0..V-1) and *logprob (full-vocabulary log-softmax, see top). Returns 0, or ERR_INVAL with a
 * message for V < 1, NULL pointers, u outside [0, 1), top_p <= 0 or NaN, or logits that are NaN, +inf or all
 * -inf, or a temperature so small that logits / temperature overflows to inf. */
int sample_token(const float *logits, int V, const SampleParams *p, double u, void *scratch, int32_t *token,
                 float *logprob, char err[ERR_LEN]);

/* The kept set the sampler draws from (greedy: the argmax alone), in descending probability order:
 * writes kept[0 .. *n_kept) (caller-owned, room for V ids). Same errors as sample_token. For tests and
 * for showing a distribution; the sampler itself does not materialise the set when nothing is truncated. */
int sample_support(const float *logits, int V, const SampleParams *p, void *scratch, int32_t *kept, int *n_kept,
                   char err[ERR_LEN]);

/* log_softmax(logits / temperature)[token] over all V (temperature <= 0 counts as 1), with the same weights
 * and sum as sample_token. ERR_INVAL for bad arguments or logits as in sample_token. */
int sample_logprob(const float *logits, int V, float temperature, int32_t token, float *logprob, char err[ERR_LEN]);

#endif
