/* common/backend/cpu/cpu_decode.h: attention of packed query rows against a paged KV cache (the rollout engine's
 * KV-cache decoding, model/generate.h), and the linear layer on packed weights whose every output element is reduced
 * in an order fixed by K alone ("batch-invariant"): the rollout's decode path and every product of model_forward.
 * Formulas: transformers eager_attention_forward (softmax(q k^T * scale) v, causal) and nn.Linear.
 * Not here: the dense kernels shared with the learner (cpu_ops.h), cache bookkeeping (model/generate.c).
 * None of these functions allocate or fail (shapes are the caller's contract). */
#ifndef DAPO_CPU_DECODE_H
#define DAPO_CPU_DECODE_H

#include <stdint.h>

/* Packed weights for cpu_linear_packed: w[N, K] (nn.Linear layout) re-laid as column panels of
 * CPU_PACK_COLS: dst[(nb * K + k) * CPU_PACK_COLS + j] = w[nb * CPU_PACK_COLS + j, k] (0 beyond N).
 * cpu_pack_floats gives the size of dst in floats. */
#define CPU_PACK_COLS 32
long cpu_pack_floats(int N, int K);
void cpu_pack_weights(float *dst, const float *w, int N, int K);

/* y[M, N] = x[M, K] @ w^T (+ b[N]) with w packed by cpu_pack_weights. Each y[m, n] is one fused multiply-add chain
 * over k = 0 .. K-1 in order (AVX-512; a plain multiply-then-add chain on CPUs without it), then + b[n]: the result
 * of a row never depends on M, the other rows or the thread count (batch-invariant), and the weights stream once
 * per panel for up to 8 rows at a time, which is what makes small-batch decoding fast (no per-call packing of
 * the weight matrix, unlike sgemm). Big products are cache-blocked (row blocks of 128; K split into blocks only past
 * 1536, the accumulators kept in y between them, which leaves the chain order unchanged), so prefill-sized M runs at
 * the FMA peak (8 x 32 register tiles). Threads (OpenMP, from 4M multiply-adds): a run of panels each, a thread done
 * with its own taking the others' remaining row blocks; rows per thread when there are fewer panels than threads.
 * All arrays caller-owned; M <= 0 or N <= 0: nothing done. */
void cpu_linear_packed(float *y, const float *x, const float *wp, const float *b, int M, int N, int K);
/* The general form: y rows at stride ldy >= N (a column slice of a wider output, e.g. a vocabulary slice of the
 * logits); accumulate: y += x @ w^T with each chain STARTING FROM the old y[m, n] (residual adds: no separate product,
 * no add pass), else y = x @ w^T as cpu_linear_packed; b (may be NULL) is added after the chain either way.
 * Batch-invariant like cpu_linear_packed. */
void cpu_linear_packed_ex(float *y, long ldy, const float *x, const float *wp, const float *b, int M, int N, int K,
                          int accumulate);

/* bf16 weight storage (the rollout's actor_rollout_ref.rollout.dtype: bfloat16): the layout of cpu_pack_weights with
 * each weight rounded to bf16 (core/dtype.h: nearest, ties to even; cpu_pack_floats(N, K) uint16 elements, half the
 * bytes), and the product on it: each weight widened exactly to fp32 (a 16-bit shift) and the same fixed-order fp32
 * FMA chain as cpu_linear_packed_ex. So the result is BITWISE cpu_linear_packed_ex's on the bf16-rounded fp32 weights,
 * batch-invariant in the same way, and a decode step streams half the weight bytes. Arithmetic stays fp32 (bf16
 * arithmetic is the AMX issue's). */
void cpu_pack_weights_bf16(uint16_t *dst, const float *w, int N, int K);
void cpu_linear_packed_bf16_ex(float *y, long ldy, const float *x, const uint16_t *wp, const float *b, int M, int N,
                               int K, int accumulate);

/* The gate/up product of a SwiGLU MLP with the activation fused: w = [gate; up] ([2I, K], gate_proj rows then
 * up_proj rows, as model.h stores wgu) packed by cpu_pack_weights_glu (panel p = gate rows 16p..16p+15 beside the
 * matching up rows 16p..16p+15 of up_proj; cpu_pack_floats_glu(I, K) floats). Writes gu[M, 2I] = x @ w^T (gate | up, each element the same
 * fixed-order FMA chain as cpu_linear_packed) and h[M, I] = silu(gate) * up = g / (1 + exp(-g)) * u (cpu_swiglu's
 * formula, exp as core/fexp.h) from each block while it is still in cache: no separate pass over gu.
 * Batch-invariant like cpu_linear_packed. Source: transformers Qwen2MLP (down_proj(act_fn(gate_proj(x)) * up_proj(x))). */
long cpu_pack_floats_glu(int I, int K);
void cpu_pack_weights_glu(float *dst, const float *w, int I, int K);
void cpu_linear_packed_swiglu(float *h, float *gu, const float *x, const float *wp, int M, int I, int K);

/* cpu_linear_packed_ex / cpu_linear_packed_swiglu from the raw weight w ([N, K] / [2I, K]): pack w into wp
 * (cpu_pack_floats(N, K) / cpu_pack_floats_glu(I, K) floats, overwritten) inside the product's own parallel region,
 * each thread packing the panels it then computes (no separate pass and barrier per product: the forward packs
 * every weight per call, as the weights may change between calls). Same results as packing first. */
void cpu_linear_packw_ex(float *y, long ldy, const float *x, const float *w, float *wp, const float *b, int M, int N,
                         int K, int accumulate);
void cpu_linear_packw_swiglu(float *h, float *gu, const float *x, const float *w, float *wp, int M, int I, int K);

/* Attention of R packed query rows against a paged KV cache (causal: row r attends to its sequence's keys at
 * positions 0 .. pos[r], which must already be in the cache).
 *   q:      [R, ldq]  nh heads of hd per row (RoPE applied)
 *   out:    [R, ldo]  nh heads of hd
 *   pos:    [R]       absolute position of each row in its sequence
 *   table:  [R]       the row's sequence block table: block ids, one per block_tokens (BS) positions
 *   kc:     the layer's keys, TRANSPOSED within a block: [n_blocks, nkv, hd, BS] (see cpu_kv_store), so the
 *           scores of BS keys are one vector FMA chain over d
 *   vc:     the layer's values [n_blocks, BS, nkv * hd]; head h reads kv head h / (nh / nkv)
 *   scale:  1 / sqrt(hd) (HF)
 *   scratch: n_threads * (nh / nkv) * ctx_max floats, ctx_max >= max(pos) + 1, n_threads = omp_get_max_threads()
 * Per (row, head): s_j = (sum_d q_d k_jd, in d order) * scale, p_j = exp(s_j - max) / sum_j (double sum in j
 * order), out = (sum_j p_j v_j in j order) / sum: a fixed order per row, so the result is batch-invariant.
 * exp is a Cephes-style polynomial (relative error ~2e-7). Parallel over (row, kv head) pairs. */
void cpu_paged_attention(float *out, int ldo, const float *q, int ldq, int R, const int32_t *pos,
                         const int32_t *const *table, const float *kc, const float *vc, int block_tokens, int nh,
                         int nkv, int hd, float scale, float *scratch, long ctx_max);

/* Writes the k and v rows [nkv * hd] of position p into the caches of the layouts above (block = table[p / BS]). */
void cpu_kv_store(float *kc, float *vc, const int32_t *table, int p, const float *k, const float *v, int block_tokens,
                  int nkv, int hd);

/* The bf16 KV cache (the rollout's rollout.kv_cache_dtype: bfloat16): the same layouts with uint16 elements, k and v
 * rounded to bf16 when stored (core/dtype.h), each widened exactly to fp32 when read; otherwise the same arithmetic in
 * the same order as cpu_paged_attention, so the result is bitwise cpu_paged_attention's on a fp32 cache holding the
 * rounded values. Half the bytes a long context's decode step reads. */
void cpu_kv_store_bf16(uint16_t *kc, uint16_t *vc, const int32_t *table, int p, const float *k, const float *v,
                       int block_tokens, int nkv, int hd);
void cpu_paged_attention_bf16(float *out, int ldo, const float *q, int ldq, int R, const int32_t *pos,
                              const int32_t *const *table, const uint16_t *kc, const uint16_t *vc, int block_tokens,
                              int nh, int nkv, int hd, float scale, float *scratch, long ctx_max);

#endif
