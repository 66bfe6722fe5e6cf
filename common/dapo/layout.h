/* common/dapo/layout.h: how a training batch is laid out for the learners (docs/design.md §1 step 5).
 *  1. Mini-batches: the batch's groups, in order, cut into mini-batches of `mini_groups` groups
 *     (ppo_mini_batch_size prompts x their n responses); the last one may be smaller (verl's data.split).
 *  2. Shards: each mini-batch is split across W learner ranks with EQUAL sequence counts (so every rank runs
 *     the same optimizer steps and all-reduces), balanced by tokens: sequences taken largest-first (ties: lower
 *     index first), each into the rank with the fewest tokens so far among those that still have room (ties:
 *     lower rank). Every shard carries its mini-batch's global response-token and sequence counts, the
 *     denominators of token-mean and seq-mean-* (loss.h: batch_num_tokens / global_batch_size), so no extra
 *     all-reduce is needed.
 *  3. Micro-batches within a shard: fixed `ppo_micro_batch_size_per_gpu` sequences in order, or, with
 *     use_dynamic_bsz, packs of at most `ppo_max_token_len_per_gpu` tokens. verl (utils/seqlen_balancing.py,
 *     rearrange_micro_batches) takes k = ceil(total / max_len) micro-batches and balances them with
 *     Karmarkar-Karp on an attention-cost estimate, without re-checking the cap; ours starts from the same k,
 *     balances by tokens largest-first, and raises k (a few steps, then bisection) until every micro-batch
 *     fits the cap (so a micro-batch never exceeds it). Gradients accumulate over micro-batches, so the split
 *     changes only speed and memory.
 * Not here: messages (proto/), the coordinator's batch assembly, the loss (loss.h). */
#ifndef DAPO_LAYOUT_H
#define DAPO_LAYOUT_H

#include "core/err.h"

typedef struct {
    int        mini;           /* mini-batch index, 0-based */
    int        rank;           /* learner rank, 0..world-1 */
    int        n_seq;          /* sequences on this shard (= global_seqs / world) */
    int       *seq;            /* [n_seq] batch-wide sequence indices, ascending; owned by the Layout */
    long long  tokens;         /* response (loss) tokens on this shard */
    long long  cost;           /* balance tokens on this shard (cost_tokens, or tokens) */
    long long  global_tokens;  /* response tokens of the whole mini-batch -> LossParams.batch_num_tokens */
    int        global_seqs;    /* sequences of the whole mini-batch -> LossParams.global_batch_size */
} LayoutShard;

typedef struct {
    int          n_mini;       /* mini-batches */
    int          world;        /* W */
    LayoutShard *shard;        /* [n_mini * world]; shard of (mini m, rank r) at m * world + r */
    int         *pool;         /* backing store of every shard's seq list */
} Layout;

/* group_size[n_groups] (>= 1 each; sequences of group g contiguous, groups in batch order);
 * resp_tokens[n_seq]: loss tokens per sequence (>= 0); cost_tokens[n_seq]: what to balance (e.g. prompt +
 * response length), NULL = resp_tokens. mini_groups >= 1, world >= 1. On success fills *out (free with
 * layout_free) and returns 0. ERR_INVAL with a message when a mini-batch's sequence count is not divisible
 * by world (names the mini-batch and both numbers), for bad sizes or negative token counts. */
int  layout_build(const int *group_size, int n_groups, const int *resp_tokens, const int *cost_tokens,
                  int mini_groups, int world, Layout *out, char err[ERR_LEN]);
void layout_free(Layout *l);   /* NULL-safe; leaves *l zeroed */

typedef struct {
    int  n_micro;
    int *off;                  /* [n_micro + 1]: micro-batch j = idx[off[j] .. off[j+1]) */
    int *idx;                  /* [n] positions 0..n-1 into the shard's sequence list, ascending per micro */
} LayoutMicro;

/* Fixed size: ceil(n / micro_bsz) micro-batches of micro_bsz sequences in order (the last may be smaller).
 * n >= 0, micro_bsz >= 1, else ERR_INVAL. Free with layout_micro_free. */
int  layout_micro_fixed(int n, int micro_bsz, LayoutMicro *out, char err[ERR_LEN]);

/* Dynamic (use_dynamic_bsz): tokens[n] per sequence (the forward's length, prompt + response), every
 * micro-batch's token sum <= max_tokens; micro-batches ordered by their first sequence. ERR_INVAL when a
 * single sequence exceeds max_tokens (verl asserts the same), or for bad arguments. */
int  layout_micro_dynamic(const int *tokens, int n, int max_tokens, LayoutMicro *out, char err[ERR_LEN]);
void layout_micro_free(LayoutMicro *m);   /* NULL-safe; leaves *m zeroed */

#endif
