/* common/backend/cpu/cpu_decode.h: the CPU kernels that only the rollout engine's KV-cache decoding needs
 * (model/generate.h): attention of packed query rows against a paged KV cache, and a row-independent
 * ("batch-invariant") linear layer whose every output element is reduced in an order fixed by K alone.
 * Formulas: transformers eager_attention_forward (softmax(q k^T * scale) v, causal) and nn.Linear.
 * Not here: the dense kernels shared with the learner (cpu_ops.h), cache bookkeeping (model/generate.c).
 * None of these functions allocate or fail (shapes are the caller's contract). */
#ifndef DAPO_CPU_DECODE_H
#define DAPO_CPU_DECODE_H

#include <stdint.h>

/* y[M, N] = x[M, K] @ w[N, K]^T (+ b[N] when b != NULL), fp32, row-major. Each y[m, n] is computed as the
 * same fixed sequence of fp32 operations on (x[m, :], w[n, :], b[n]) whatever M, the other rows and the thread
 * count are: 16 interleaved partial sums over k (k mod 16), combined by a fixed pairwise tree, then + b.
 * That is what makes the rollout's batch-invariant mode (rollout.batch_invariant) reproducible: a row's result
 * never depends on the batch it rides in. Parallel over N (OpenMP). Slower than cblas_sgemm. */
void cpu_linear_rowwise(float *y, const float *x, const float *w, const float *b, int M, int N, int K);

/* Attention of R packed query rows against a paged KV cache (causal: row r attends to its sequence's keys at
 * positions 0 .. pos[r], which must already be in the cache).
 *   q:      [R, ldq]  nh heads of hd per row (RoPE applied)
 *   out:    [R, ldo]  nh heads of hd
 *   pos:    [R]       absolute position of each row in its sequence
 *   table:  [R]       the row's sequence block table: block ids, one per block_tokens positions
 *   kc, vc: the layer's caches [n_blocks, block_tokens, nkv * hd]; head h reads kv head h / (nh / nkv)
 *   scale:  1 / sqrt(hd) (HF)
 *   scratch: n_threads * ctx_max floats, ctx_max >= max(pos) + 1, n_threads = omp_get_max_threads()
 * Per (row, head): s_j = (q . k_j) * scale with 16-lane partial sums, p_j = exp(s_j - max) / sum_j (double
 * sum in j order), out = sum_j p_j v_j in j order: a fixed order per row, so the result is batch-invariant.
 * Parallel over (row, head) pairs. */
void cpu_paged_attention(float *out, int ldo, const float *q, int ldq, int R, const int32_t *pos,
                         const int32_t *const *table, const float *kc, const float *vc, int block_tokens, int nh,
                         int nkv, int hd, float scale, float *scratch, long ctx_max);

#endif
