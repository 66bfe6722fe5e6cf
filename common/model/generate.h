/* common/model/generate.h: the rollout engine — prefill + decode of many sequences with a paged KV cache on the
 * CPU, continuous batching, chunked prefill, preemption with recompute, and per-token sampling with the
 * counter-based RNG (issue 6; docs/design.md §1 "rollout", §3 sampling).
 *
 * Each call to gen_engine_step runs ONE forward over a packed set of rows:
 *   - every running sequence whose context is fully cached contributes one decode row (its last token);
 *   - running sequences still prefilling contribute a chunk of their uncached context tokens, as many as
 *     fit in max_batch_tokens after the decode rows (chunked prefill, interleaved with decoding);
 *   - waiting sequences are admitted (FIFO, preempted ones first) while there are fewer than max_num_seqs
 *     running and the free cache blocks hold their whole current context.
 * A sequence whose context is complete after this step's rows samples its next token from the last row's
 * logits. When a running sequence needs one more cache block and none is free, the most recently admitted
 * running sequence is preempted (vLLM's recompute policy): its blocks are freed, it keeps the tokens it has
 * sampled, and it goes to the front of the waiting queue; when re-admitted, its prompt + sampled tokens are
 * prefilled again. So a full cache delays sequences but never fails them.
 *
 * Prefix sharing (on unless GenOptions.no_prefix_sharing; config actor_rollout_ref.rollout.enable_prefix_caching,
 * vLLM's automatic prefix caching for the n samples of a group): a running sequence with nothing cached yet (just
 * admitted, or re-admitted after preemption with its prompt + sampled tokens) whose context shares a prefix with
 * another running sequence's (the donor: the longest common prefix, first in run order on ties; at most all
 * but its own last token) does not compute that prefix. Once the donor has the K/V of those positions (cached
 * before, or computed in this very step), the follower copies them from the donor's blocks into its own, layer
 * by layer right after the step's K/V stores (whole blocks with memcpy, then the slots of the last partial
 * block), and computes only the rest — for a group's prompt, one row. Until then it is parked: it holds the
 * blocks admission gave it and contributes no rows. Nothing is refcounted or kept across steps: the donor is
 * chosen again every step, so a donor preempted or cancelled leaves its followers to pick another donor or
 * compute themselves (preemption takes the newest sequence first, so a donor admitted before its followers is
 * preempted only after them), and sequences only follow sequences before them in run order (or ones that have
 * something cached), so some sequence always computes. The cost is a copy of 2 x prefix x n_kv_heads x head_dim
 * floats per layer. Batch-invariant mode: a position's K/V depend only on the tokens up to it (row-invariant
 * kernels), so the copied values are bitwise what the follower would compute and responses are bitwise the same
 * with or without sharing. Default mode: the donor's big prefill chunks may run through sgemm, so the copies may
 * differ from a one-row computation by rounding. Counters: GenStats.prefill_rows (positions computed),
 * prefill_shared (positions copied), prefix_hits, prefix_parked.
 *
 * KV cache: kv_cache_tokens rounded up to blocks of block_tokens positions; per layer one K array
 * [n_blocks, n_kv_heads, head_dim, block_tokens] (transposed in a block, so a block's scores are one vector
 * FMA chain) and one V array [n_blocks, block_tokens, n_kv_heads * head_dim], fp32 or bf16 (GenOptions.kv_dtype), allocated once at
 * gen_engine_new (logged).
 *
 * Sampling (model/sample.h): token t of response `sample` of group `group_id` uses the uniform draw
 * rng_uniform(seed, group_id, sample, t) (core/rng.h), so a response depends only on (seed, group, sample,
 * prompt, weights, sampling params) — not on the worker, the batch or preemptions (exactly so in
 * batch-invariant mode). Stop: a token in the request's stop ids or the model's EOS ids (config.json and
 * generation_config.json) ends the response with finish reason "stop" (the stop token is included in the
 * response and counted); reaching max_tokens ends it with "length".
 * Log-probs: per sampled token, log_softmax(logits / temperature)[token] over the FULL vocabulary, before
 * top-k / top-p truncation (temperature 1 for greedy) — what the learner recomputes (docs/design.md §2), so the
 * rollout-vs-learner mismatch metrics compare like with like; it is not the truncated sampler's probability.
 *
 * Linear layers run on a packed copy of the weights (cpu_pack_weights, made at gen_engine_new and by
 * gen_engine_reload_weights) through cpu_linear_packed: one fixed-order FMA chain per output, weights streamed
 * once per 8 rows, no per-call packing — the decode path. Attention: cpu_paged_attention (fixed order per row).
 * Batch-invariant mode (GenOptions.batch_invariant, config rollout.batch_invariant): every linear layer takes that
 * path; RMSNorm, RoPE, SwiGLU are per row already. Then a row's logits are bitwise the same whatever else is
 * in the step (other sequences, prefill chunk boundaries, recompute after preemption, thread count), and the
 * same seed gives the same tokens on any number of workers. Default mode sends steps of more than 64 rows (big
 * prefill chunks) to cblas_sgemm instead (faster there); its log-probs equal model_forward's (dapo-logprobs)
 * to ~1e-5. Memory: the packed copy is one more copy of the linear weights.
 *
 * bf16 weights (GenOptions.weight_dtype BK_BF16; vLLM's dtype=bfloat16 as storage, with fp32 arithmetic): at
 * gen_engine_new and each gen_engine_reload_weights every parameter of the model (embeddings, norms, linear weights) is
 * rounded to bf16 in place (core/dtype.h: nearest, ties to even) and the packed copy holds bf16 (Backend.
 * pack_weights_bf16): half the bytes a decode step streams. Products widen each weight exactly, so the engine computes
 * bitwise what it computes in fp32 on the rounded weights; the rollout-vs-learner mismatch this adds is what
 * rollout_corr metrics measure.
 *
 * Threads: one engine is used from one thread; kernels inside use OpenMP (omp_set_num_threads by the caller).
 * Not here: the wire protocol (services/rollout), CUDA, speculative decoding, beam search, repetition penalties,
 * a prefix cache that outlives its sequences (sharing is only between sequences running at the same time) or
 * refcounted shared blocks (copies instead: followers still hold a full block table each). */
#ifndef DAPO_GENERATE_H
#define DAPO_GENERATE_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "model/model.h"
#include "model/sample.h"

typedef struct {
    int  max_num_seqs;       /* most sequences running (holding cache) at once; >= 1 */
    long kv_cache_tokens;    /* KV-cache budget in token positions (all sequences together); >= block_tokens */
    int  max_batch_tokens;   /* rows per forward step (decode rows + prefill chunk); raised to max_num_seqs */
    int  block_tokens;       /* positions per cache block; 0: 16 */
    int  batch_invariant;    /* nonzero: fixed-order kernels (see top) */
    int  no_prefix_sharing;  /* nonzero: every sequence computes its whole context itself (see top); 0 = share */
    BkDtype weight_dtype;    /* storage of the rollout's weights (config actor_rollout_ref.rollout.dtype): BK_F32, or
                                BK_BF16 (see "bf16 weights" above) */
    BkDtype kv_dtype;        /* storage of the KV cache (config rollout.kv_cache_dtype): BK_F32, or BK_BF16 (K/V
                                rounded to bf16 when stored, widened exactly when read: half the cache's bytes) */
} GenOptions;

typedef enum { GEN_FINISH_NONE = 0, GEN_FINISH_STOP, GEN_FINISH_LENGTH } GenFinish;

/* One sequence to generate. Everything is copied by gen_engine_add. */
typedef struct {
    uint64_t       tag;          /* caller's key (e.g. a group's lease); gen_engine_cancel drops by tag */
    uint64_t       seed, group_id;
    uint32_t       sample;       /* index of the response within its group */
    const int32_t *prompt;       /* [n_prompt] token ids in [0, vocab) */
    int            n_prompt;     /* >= 1 */
    int            max_tokens;   /* >= 1 response tokens at most (data.max_response_length) */
    SampleParams   sp;
    const int32_t *stop_ids;     /* [n_stop] extra stop ids (beside the model's EOS ids); may be NULL */
    int            n_stop;
    int            ignore_eos;   /* nonzero: the model's EOS ids do not end it (vLLM SamplingParams.ignore_eos; stop_ids
                                    still do): fixed-length responses for benchmarks */
    uint32_t       rng_offset;   /* response position of the first token sampled here (0 normally; k when the
                                    prompt ends with the first k tokens of a response being continued) */
} GenRequest;

/* A finished sequence; arrays owned by the result (gen_result_free). */
typedef struct {
    uint64_t  id, tag, group_id;
    uint32_t  sample;
    int32_t  *tokens;        /* [n] response token ids (stop token included) */
    float    *logprobs;      /* [n] full-vocabulary log-probs, see top */
    int64_t  *versions;      /* [n] the weights version each token was sampled with (gen_engine_set_version; a
                                sequence continued across a swap holds two or more) */
    int       n;
    GenFinish finish;
    int       preemptions;   /* times this sequence was preempted and recomputed */
} GenResult;

typedef struct {
    int  running, waiting, finished;   /* sequences in each state */
    int  in_progress;                  /* running + waiting sequences that hold sampled tokens or cache */
    long free_blocks, n_blocks;
    long steps, rows, preemptions, sampled;
    long prefill_rows;     /* context positions computed, except decode rows (prompt, recompute after preemption) */
    long decode_rows;      /* rows feeding a sequence's last sampled token (one per sampled token not ending it) */
    long prefill_shared;   /* context positions whose K/V were copied from a donor instead of computed */
    long prefix_hits;      /* sequences that copied a prefix (once per admission) */
    long prefix_parked;    /* sequence-steps a follower waited for its donor's prefill (no rows) */
} GenStats;

typedef struct GenEngine GenEngine;

/* Creates an engine over m (borrowed; must outlive the engine; its weights may change between steps only
 * when no sequence holds cache: gen_engine_stats().in_progress == 0 (gen_engine_hold_new drains), or right after
 * gen_engine_preempt_all, or — keeping K/V computed with the old weights — whenever the caller accepts that). Allocates the cache and the step buffers
 * (logged). NULL with a message on bad options (ERR_INVAL) or head_dim > 512 (ERR_UNSUPPORTED). */
GenEngine *gen_engine_new(Model *m, const GenOptions *o, char err[ERR_LEN]);
/* 0 when the engine can run on backend be (the CPU one so far), else ERR_UNSUPPORTED naming it: programs ask before
 * they load a model onto that backend. */
int        gen_engine_supports(const Backend *be, char err[ERR_LEN]);
void       gen_engine_free(GenEngine *e);   /* NULL-safe; drops unfinished sequences */

/* Re-packs the weights after the model's parameters changed (a weight swap); call when no sequence holds cache (see
 * gen_engine_new), or knowingly keeping K/V of the old weights. With GenOptions.weight_dtype BK_BF16 it first rounds
 * the model's parameters to bf16 in place (so read anything that needs the fp32 values, the weight probe, before). */
void gen_engine_reload_weights(GenEngine *e);

/* Queues a sequence (copies the request). Returns 0 and its id in *id, or ERR_INVAL (bad token, lengths,
 * sampling params) / ERR_TOO_BIG (prompt + max_tokens exceeds the whole cache: it could never finish). */
int gen_engine_add(GenEngine *e, const GenRequest *r, uint64_t *id, char err[ERR_LEN]);

/* One forward step (see top). Returns the number of sequences still running or waiting (0: idle; nothing
 * was done), or a negative code (ERR_INVAL from the sampler on NaN logits: the affected sequences are
 * finished with finish reason "length" and what they have, so the engine keeps going). */
int gen_engine_step(GenEngine *e, char err[ERR_LEN]);

/* Pops one finished sequence into *out (caller frees with gen_result_free). Returns 1, or 0 when none. */
int gen_engine_take(GenEngine *e, GenResult *out);
void gen_result_free(GenResult *r);   /* frees the arrays; NULL-safe */

/* Offline generation of a whole set (dapo-generate, dapo-eval): queues k samples of each of the n prompts
 * (prompt i: prompts[i] [n_prompt[i]] ids; sample j gets tag i, group_id i, sample j and the rest of tmpl), steps the
 * engine until it is idle and stores each result at res[i * k + j] (res[n * k], caller-owned, zeroed; free each with
 * gen_result_free). *n_tokens gets the response tokens generated. Returns 0, or the first error of gen_engine_add
 * (naming the prompt index; nothing generated) or of gen_engine_step (the sequences it hit are dropped, their res
 * entries stay zero; the others finish). */
int gen_engine_run_all(GenEngine *e, const int32_t *const *prompts, const int *n_prompt, size_t n, int k,
                       const GenRequest *tmpl, GenResult *res, long *n_tokens, char err[ERR_LEN]);

/* Drops every sequence with this tag (waiting, running or finished-but-not-taken) and frees its cache.
 * Returns how many were dropped. */
int gen_engine_cancel(GenEngine *e, uint64_t tag);

/* hold != 0: admit no sequence that has not started (no sampled token, no cache); sequences in progress go
 * on. Used to drain before a weight swap so no response mixes two weight versions. */
void gen_engine_hold_new(GenEngine *e, int hold);

/* The weights version stamped on each token sampled from now on (GenResult.versions); 0 until set. */
void gen_engine_set_version(GenEngine *e, int64_t version);

/* Partial rollouts (an in-flight weight update): preempts every running sequence as the cache-pressure path does — its
 * cache blocks are freed, it keeps its prompt, sampled tokens, log-probs and versions, and goes to the front of the
 * waiting queue, so when admitted again its whole context (prompt + sampled tokens) is recomputed with the weights
 * then loaded. After it nothing holds cache: the weights may change (gen_engine_reload_weights) and every sequence
 * continues under them, sampling its next token where it stopped (the RNG is keyed by response position, so a
 * continued sequence draws as an unbroken one would). Returns the sequences preempted. */
int gen_engine_preempt_all(GenEngine *e);

/* Rows per step (after raising to max_num_seqs) and the cache size in positions. */
void gen_engine_stats(const GenEngine *e, GenStats *s);
long gen_engine_capacity_tokens(const GenEngine *e);

/* "stop" / "length" / "" */
const char *gen_finish_name(GenFinish f);

#endif
