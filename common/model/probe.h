/* common/model/probe.h: the weight probe (issue 42) — a fixed token sequence whose log-probs the learner publishes with
 * every policy version (one more tensor of the weight-chunk protocol, PROBE_TENSOR, after the model's), and that a
 * rollout scores after swapping the version in: the two agree to fp32 rounding when the rollout serves exactly the
 * learner's weights, so a weight-sync bug (a tensor corrupted or left stale after the chunk checksums) shows as a
 * difference the coordinator acts on (cluster.weights_probe_tolerance).
 * The sequence: PROBE_TOKENS ids in [0, vocab) from a fixed LCG (the same on every machine); its log-probs are those of
 * tokens 1 .. n-1 given the ones before, at the rollouts' sampling temperature (model_forward's convention).
 * Not here: computing them on a sharded learner (services/learner: learner_probe runs it on every rank), comparing and
 * reporting (services/rollout), acting on it (services/coordinator). */
#ifndef DAPO_MODEL_PROBE_H
#define DAPO_MODEL_PROBE_H

#include <stdint.h>

#include "core/err.h"
#include "model/model.h"

#define PROBE_TOKENS 32                          /* ids in the sequence; PROBE_TOKENS - 1 log-probs */
#define PROBE_TENSOR "dapo.probe.logprobs"       /* its name among a version's weight chunks (F32, [n]) */

/* The probe's ids: n of them (n <= PROBE_TOKENS) into ids[n], each in [0, vocab). */
void probe_tokens(int vocab, int n, int32_t *ids);

/* The probe's length for a model that holds at most max_tokens positions in one forward: min(PROBE_TOKENS,
 * max_tokens), at least 2. */
int probe_len(int max_tokens);

/* Log-probs of the probe's first n ids (2 <= n <= PROBE_TOKENS) under m's weights at temperature t: out[n - 1], as a
 * rollout computes them — the KV-cache forward (model_forward_cached) one token at a time, so it needs no activation
 * slab beyond one row (an inference model loaded for the rollout engine), and log-softmax in double. The learner's
 * (learner_probe: its training forward) agree to fp32 rounding. Returns n - 1, or a negative code with err set. */
int probe_logprobs(Model *m, float temperature, int n, float *out, char err[ERR_LEN]);

/* max |a[i] - b[i]| over n values; +inf when any is not finite (NaN never passes a tolerance). */
double probe_diff(const float *a, const float *b, int n);

#endif
