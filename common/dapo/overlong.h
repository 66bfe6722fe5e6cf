/* common/dapo/overlong.h: DAPO's soft overlong punishment and overlong filtering (docs/design.md §2), pure.
 * Penalty source: verl DAPORewardManager (verl/workers/reward_manager/dapo.py):
 *     expected_len = max_resp_len - overlong_buffer_len
 *     exceed_len   = valid_response_length - expected_len
 *     overlong_reward = min(-exceed_len / overlong_buffer_len * overlong_penalty_factor, 0)
 * where valid_response_length is a torch int64 0-d tensor (attention-mask sum of the response, EOS
 * included), so the division and the product run in float32 (torch true division of int64 promotes to the
 * default float32; the Python float factor is applied in float32). We compute it the same way, in fp32.
 * Overlong filtering (algorithm.overlong_filtering; TRL's mask_truncated_completions, verl has none): a
 * response whose finish reason is "length" gets loss mask 0. Truncation is decided by the finish reason,
 * never by looking at the last token.
 * Not here: adding the penalty to the score (the verifier/coordinator), the loss (loss.h). */
#ifndef DAPO_OVERLONG_H
#define DAPO_OVERLONG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

/* The overlong penalty of one response (<= 0, float32 as in verl; 0 while response_len <= L - B).
 * response_len: generated tokens including the final EOS (>= 0); max_response_len L (tokens, > 0);
 * buffer_len B (tokens, 0 < B <= L: verl asserts both); factor: overlong_buffer.penalty_factor (finite,
 * >= 0). Returns 0 and sets *penalty; ERR_INVAL with a message naming the bad value otherwise (*penalty
 * is then 0). B = 0 is refused: it divides by zero (verl: "overlong_buffer.len must be positive"). */
int overlong_penalty(int64_t response_len, int64_t max_response_len, int64_t buffer_len, double factor,
                     float *penalty, char err[ERR_LEN]);

/* Overlong filtering: true when the response's loss mask must be all 0, i.e. filtering is enabled and
 * finish_reason is exactly "length" (NULL or anything else, e.g. "stop": false). */
bool overlong_filter_masked(bool enabled, const char *finish_reason);

/* Applies overlong_filter_masked to one response's loss mask [n] (float 0/1): zeroes it when masked.
 * Returns the number of mask entries that were non-zero and are now 0 (tokens taken out of the loss). */
size_t overlong_filter_apply(bool enabled, const char *finish_reason, float *mask, size_t n);

#endif
