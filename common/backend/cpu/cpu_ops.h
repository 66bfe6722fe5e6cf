/* common/backend/cpu/cpu_ops.h: the fp32 CPU kernels of the transformer (forward and backward), shared by
 * the learner's packed-batch model (model/forward.c) and the rollout engine's KV-cache decode.
 * GEMMs go to OpenBLAS cblas_sgemm; everything else is OpenMP loops over rows.
 * All matrices are row-major fp32; "[M, N]" means M rows of N floats, contiguous unless an ld is given.
 * Formulas follow Hugging Face transformers' modeling_qwen2 / modeling_qwen3 / modeling_llama (v5.x):
 * Qwen2RMSNorm, apply_rotary_pos_emb (rotate_half), eager_attention_forward, Qwen2MLP (SwiGLU).
 * Not here: bf16 GEMMs, the CUDA backend, sampling (model/sample.h), the parameter layout (model/model.h).
 * None of these functions allocate; none fail (shapes are the caller's contract). Threads: OpenMP for the
 * element-wise loops (OMP_NUM_THREADS), OpenBLAS's own pool for the GEMMs (OPENBLAS_NUM_THREADS). */
#ifndef DAPO_CPU_OPS_H
#define DAPO_CPU_OPS_H

#include <stdint.h>

/* The OpenBLAS kernel in use (openblas_get_corename(); "SkylakeX", "Haswell", "Prescott", ...). Borrowed. */
const char *cpu_blas_corename(void);

/* y[M, N] = x[M, K] @ w[N, K]^T (+ b[N] broadcast when b != NULL); PyTorch nn.Linear.
 * The cpu_linear* GEMMs split the larger output dimension over the OpenMP threads, each slice one
 * single-threaded cblas_sgemm (OpenBLAS's thread count is set to 1 during the call and restored), so the
 * process runs one thread pool; small products (M*N*K < 2M) run as one call. */
void cpu_linear(float *y, const float *x, const float *w, const float *b, int M, int N, int K);

/* y[M, N] += x[M, K] @ w[N, K]^T (residual connections: no separate add pass, no zeroing pass). */
void cpu_linear_add(float *y, const float *x, const float *w, int M, int N, int K);

/* Backward of cpu_linear given dy[M, N]:
 *   dx[M, K]  = dy @ w  (accum_dx: dx += instead of =; dx NULL: skipped)
 *   dw[N, K] += dy^T @ x          (dw NULL: skipped)
 *   db[N]    += column sums of dy (db NULL: skipped) */
void cpu_linear_backward(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
                         int M, int N, int K, int accum_dx);

/* Sequence-invariant linear layers over a packed batch (model_backward; the forward uses cpu_linear_packed_ex):
 * sequence s is rows cu_seqlens[s] .. cu_seqlens[s+1]-1 (cu_seqlens[0] = 0) of x, y, dy, dx. Every product is a
 * single-threaded cblas_sgemm on ONE sequence's rows (blocks of 512 rows from the sequence's start) and a slice of
 * the output columns whose bounds depend on the dimension alone, so a sequence's outputs are bitwise the same whatever else is
 * packed with it, wherever it sits, and whatever the thread count (OpenBLAS's result for a row otherwise depends on
 * the call's row count: tail kernels, its small-matrix path). The tasks run over the OpenMP threads. Cost against
 * whole-batch GEMMs: OpenBLAS re-packs the weight for every sequence (a few % at ~70-token sequences). 
 *   cpu_linear_varlen:   y = x @ w^T (+ b), or y += x @ w^T when accumulate (b ignored then). y: [N_rows, N].
 *   cpu_linear_backward_varlen: dx (= or += when accum_dx) dy @ w per sequence; dw[N, K] += dy_s^T @ x_s and
 *     db[N] += column sums of dy_s (row by row) for s = 0, 1, ... IN ORDER, each as its own GEMM (beta = 1) into
 *     dw. So a run of consecutive calls over sequences 0..S-1 split anyhow into batches adds the same terms into
 *     dw in the same order: the sums are bitwise equal to one call over all S (that is what makes micro-batch
 *     gradient accumulation split-invariant). dx / dw / db may be NULL (skipped). */
void cpu_linear_varlen(float *y, const float *x, const float *w, const float *b, const int32_t *cu_seqlens,
                       int n_seqs, int N, int K, int accumulate);
void cpu_linear_backward_varlen(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
                                const int32_t *cu_seqlens, int n_seqs, int N, int K, int accum_dx);

/* RMSNorm (Qwen2RMSNorm / LlamaRMSNorm): rstd[m] = 1/sqrt(mean_d(x[m,d]^2) + eps);
 * y[m, d] = w[d] * (x[m, d] * rstd[m]).  x, y: [M, D]; rstd: [M] (saved for backward; may be NULL).
 * y may equal x (in place). */
void cpu_rmsnorm(float *y, float *rstd, const float *x, const float *w, int M, int D, float eps);

/* Backward of cpu_rmsnorm: given dy[M, D], x and rstd of the forward:
 *   dx = rstd * (w*dy) - x * rstd^3 / D * sum_d(w*dy*x)   (accum_dx: dx += instead of =)
 *   dw[D] += sum_m dy * x * rstd                          (dw NULL: skipped)
 * dx must not alias dy or x unless accum_dx == 0 and dx == dy. */
void cpu_rmsnorm_backward(float *dx, float *dw, const float *dy, const float *x, const float *w,
                          const float *rstd, int M, int D, int accum_dx);
/* cpu_rmsnorm_backward over a packed batch, rows cu_seqlens[0] .. cu_seqlens[n_seqs]-1: dx as above; dw gets one
 * partial sum per sequence (its rows in order), added sequence by sequence in order, so consecutive calls over any
 * split of the sequences add the same terms in the same order (split-invariant like cpu_linear_backward_varlen).
 * cpu_rmsnorm_backward is the one-sequence case. */
void cpu_rmsnorm_backward_varlen(float *dx, float *dw, const float *dy, const float *x, const float *w,
                                 const float *rstd, const int32_t *cu_seqlens, int n_seqs, int D, int accum_dx);

/* RoPE angle tables for positions pos[M]: cos/sin[m, i] = cos/sin(pos[m] * inv_freq[i]), i < hd/2.
 * cs, sn: [M, hd/2]. inv_freq from model/config.h (rope_theta and llama3 scaling already applied). */
void cpu_rope_tables(float *cs, float *sn, const int32_t *pos, int M, const float *inv_freq, int half);

/* In-place rotary embedding on x[M, ld] holding nh heads of hd at column offsets h*hd (rotate_half layout:
 * out[:h] = x1*cos - x2*sin, out[h:] = x2*cos + x1*sin with x1 = x[:hd/2], x2 = x[hd/2:]).
 * inverse != 0 applies the transpose rotation (the backward of the forward rotation). */
void cpu_rope(float *x, int ld, const float *cs, const float *sn, int M, int nh, int hd, int inverse);

/* Causal grouped-query attention of one sequence (eager_attention_forward with the causal mask):
 * nq query rows at absolute positions p0 .. p0+nq-1 attend to keys 0 .. p0+i (so nk >= p0 + nq).
 * q: [nq, ldq] (nh heads of hd), k, v: [nk, ldk] (nkv heads of hd; head h uses kv head h / (nh/nkv)),
 * out: [nq, ldo]; lse: [nq, nh] log-sum-exp of the scaled scores per row/head (saved for backward; may be
 * NULL). scale: 1/sqrt(hd) in HF. scratch: cpu_attention_scratch_floats(nk, hd) floats. hd <= 256.
 * Parallel over (kv head, 64-row query block) tasks with OpenMP; the block products are our own register-blocked
 * loops (concurrent small cblas_sgemm calls serialise inside OpenBLAS). */
void cpu_attention(float *out, float *lse, const float *q, const float *k, const float *v, int nq, int p0,
                   int nk, int nh, int nkv, int hd, int ldq, int ldk, int ldo, float scale, float *scratch);
/* cpu_attention over a packed batch: sequence s is rows cu_seqlens[s] .. cu_seqlens[s+1]-1 of q/k/v/out/lse
 * (p0 = 0 each), all (sequence, kv head, query block) tasks in one parallel region.
 * scratch: cpu_attention_scratch_floats(longest sequence, hd). */
void cpu_attention_varlen(float *out, float *lse, const float *q, const float *k, const float *v,
                          const int32_t *cu_seqlens, int n_seqs, int nh, int nkv, int hd, int ldq, int ldk, int ldo,
                          float scale, float *scratch);
/* Floats of scratch cpu_attention / cpu_attention_backward need for nk keys of head_dim hd (all threads). */
long cpu_attention_scratch_floats(int nk, int hd);

/* Backward of cpu_attention over a whole sequence (p0 = 0, nq = nk = T): given dout[T, ldo] and the
 * forward's q, k, v, out, lse: dq[T, ldq] = (written), dk, dv [T, ldk] += (accumulated; zero them first).
 * Parallel over kv heads. scratch: cpu_attention_scratch_floats(T, hd). */
void cpu_attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                            const float *v, const float *out, const float *lse, int T, int nh, int nkv, int hd,
                            int ldq, int ldk, int ldo, float scale, float *scratch);
/* cpu_attention_backward over a packed batch (as cpu_attention_varlen); tasks = (sequence, kv head). */
void cpu_attention_backward_varlen(float *dq, float *dk, float *dv, const float *dout, const float *q,
                                   const float *k, const float *v, const float *out, const float *lse,
                                   const int32_t *cu_seqlens, int n_seqs, int nh, int nkv, int hd, int ldq, int ldk,
                                   int ldo, float scale, float *scratch);

/* SwiGLU (Qwen2MLP, act_fn = silu) on a fused gate|up buffer: gu[M, 2I] holds gate in columns [0, I) and
 * up in [I, 2I); h[M, I] = silu(gate) * up. */
void cpu_swiglu(float *h, const float *gu, int M, int I);
/* Backward: dgu[M, 2I] = (dh * up * s * (1 + gate * (1 - s)) | dh * silu(gate)), s = sigmoid(gate). */
void cpu_swiglu_backward(float *dgu, const float *dh, const float *gu, int M, int I);

/* Per-head RMSNorm (Qwen3 q_norm/k_norm over head_dim): for each of M rows and nh heads,
 * y[m, h*hd + d] = w[d] * x[m, h*hd + d] * rstd[m*nh + h]; x rows at stride ldx, y rows at stride ldy.
 * rstd: [M, nh] (may be NULL). y may equal x when ldy == ldx. */
void cpu_rmsnorm_heads(float *y, int ldy, float *rstd, const float *x, int ldx, const float *w, int M, int nh,
                       int hd, float eps);
/* Backward of cpu_rmsnorm_heads, in place on g (rows at stride ldg: dy in, dx out); dw[hd] += ... */
void cpu_rmsnorm_heads_backward(float *g, int ldg, float *dw, const float *x, int ldx, const float *w,
                                const float *rstd, int M, int nh, int hd);

/* Token log-probs and entropies from logits[M, V] at temperature T (> 0), rows independent:
 *   z = logits / T, lse = logsumexp(z), logp[m] = z[target[m]] - lse (0 when target < 0 or >= V),
 *   ent[m] = lse - sum_v softmax(z)_v z_v.  logp, ent may be NULL. Returns nothing; NaN propagates.
 * Source: verl's logprobs_from_logits / entropy_from_logits (torch log_softmax and the lse - sum p z form). */
void cpu_logprob_entropy(const float *logits, const int32_t *target, int M, int V, float temperature,
                         float *logp, float *ent);

/* In place: turns logits[M, V] into d(loss)/d(logits) given dlogp[M], dent[M] (either may be NULL = 0):
 *   d/dz_v = dlogp * (onehot_v - p_v) - dent * p_v * (log p_v + H);  d/dlogits = d/dz / T. */
void cpu_logprob_entropy_backward(float *logits, const int32_t *target, int M, int V, float temperature,
                                  const float *dlogp, const float *dent);

/* y[i] += x[i] over n (residual adds, gradient accumulation). */
void cpu_add(float *y, const float *x, long n);

#endif
