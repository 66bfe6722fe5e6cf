/* common/backend/cuda/cuda_ops.h: the CUDA kernels of the transformer, one op per .cu file beside this header
 * (docs/conventions.md rule 7), each behind one C launcher that checks its shapes (die with file:line on a violated
 * contract: these are setup-grade programming errors, not input errors), enqueues on `st` and checks the
 * launch. CUDA builds only (USE_CUDA); usable from C11. All pointers are DEVICE pointers; matrices are
 * row-major, "[M, N]" = M rows of N elements. bf16 tensors are passed as uint16_t * (bit patterns, as
 * cuda_host.h converts them). Math is the CPU backend's (backend/cpu/cpu_ops.h, transformers Qwen2 / Llama);
 * reductions (RMSNorm statistics, softmax, log-prob / entropy, norms) are fp32 or wider.
 * Not here: the operation table over these launchers (backend_cuda.c), the model (model/model.h), host logic
 * (cuda_host.h), collectives (collective/collective.h). */
#ifndef DAPO_CUDA_OPS_H
#define DAPO_CUDA_OPS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* cast.cu: dst[n] = bf16_rn(src) / src as fp32. */
void cuda_cast_f32_bf16(uint16_t *dst, const float *src, long n, cudaStream_t st);
void cuda_cast_bf16_f32(float *dst, const uint16_t *src, long n, cudaStream_t st);

/* gemm.cu (cuBLAS cublasGemmEx, bf16 inputs, fp32 output and accumulation, CUBLAS_COMPUTE_32F).
 * handle: a cublasHandle_t already bound to the caller's stream.
 *   fwd: y[M, N] = x[M, K] @ w[N, K]^T + beta * y      (nn.Linear; w rows at stride K)
 *   dx:  dx[M, K] = dy[M, N] @ w[N, K] + beta * dx
 *   dw:  dw[N, K] += dy[M, N]^T @ x[M, K]            (gradient accumulation into the fp32 slab) */
void cuda_gemm_fwd(void *handle, float *y, const uint16_t *x, const uint16_t *w, int M, int N, int K, float beta);
/*   fwd_ld: fwd with y rows at stride ldy >= N (a column slice of a wider output, e.g. a vocabulary slice) */
void cuda_gemm_fwd_ld(void *handle, float *y, long ldy, const uint16_t *x, const uint16_t *w, int M, int N, int K,
                      float beta);
void cuda_gemm_dx(void *handle, float *dx, const uint16_t *dy, const uint16_t *w, int M, int N, int K, float beta);
void cuda_gemm_dw(void *handle, float *dw, const uint16_t *dy, const uint16_t *x, int M, int N, int K);

/* embedding.cu: x[N, H] = emb[tok[i], :] (bf16 table -> fp32 rows); backward demb[tok[i], :] += dx[i, :]
 * (fp32 atomics: rows repeat). tok in [0, V) (checked by the caller on the host). */
void cuda_embedding_fwd(float *x, const int32_t *tok, const uint16_t *emb, int N, int H, cudaStream_t st);
void cuda_embedding_bwd(float *demb, const int32_t *tok, const float *dx, int N, int H, cudaStream_t st);

/* rmsnorm.cu (Qwen2RMSNorm): rstd[m] = 1/sqrt(mean(x^2) + eps) (fp32); y = bf16(w * x * rstd).
 * x [M, D] fp32, w [D] fp32 (master), y [M, D] bf16, rstd [M]. D <= 8192.
 * Backward (cpu_rmsnorm_backward): dx = rstd*(w dy) - x rstd^3/D sum(w dy x) (accum: dx +=), dw[D] += sum_m dy x rstd. */
void cuda_rmsnorm_fwd(uint16_t *y, float *rstd, const float *x, const float *w, int M, int D, float eps, cudaStream_t st);
void cuda_rmsnorm_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w, const float *rstd, int M,
                      int D, int accum, cudaStream_t st);

/* rope.cu (apply_rotary_pos_emb, rotate_half): in place on x[M, ld], nh heads of hd at column h*hd, angle
 * pos[m] * inv_freq[i] (fp32 product, as cpu_rope_tables), inverse: the transposed rotation (backward). */
void cuda_rope(float *x, int ld, const int32_t *pos, const float *inv_freq, int M, int nh, int hd, int inverse,
               cudaStream_t st);

/* bias.cu: y[M, N] += b[N] (b fp32); db[N] += column sums of dy[M, N] (ld = N). */
void cuda_bias_add(float *y, const float *b, int M, int N, cudaStream_t st);
void cuda_bias_grad(float *db, const float *dy, int M, int N, cudaStream_t st);

/* attention.cu: causal GQA attention over PACKED variable-length sequences, memory-efficient (online softmax,
 * Milakov & Gimelshein 2018 / FlashAttention's recurrence; nothing of size T x T is ever stored).
 * qkv [N, ld] fp32: q heads at columns [0, qd), k at [qd, qd + kvd), v at [qd + kvd, qd + 2 kvd) (RoPE applied).
 * Query row i attends to keys start[i] .. i (start from cuda_pack_index). head h reads kv head h / (nh / nkv).
 * out [N, nh*hd] bf16, lse [N, nh] = log-sum-exp of the scaled scores (fp32, saved for backward). hd <= 256.
 * Backward (FlashAttention-2 algorithm 2 split in a dq pass over keys and a dk/dv pass over queries, no atomics):
 * dsum [N, nh] scratch; dqkv [N, qd + 2 kvd] fp32 is fully written (dq | dk | dv). end[i] = end of i's sequence. */
void cuda_attention_fwd(uint16_t *out, float *lse, const float *qkv, int ld, const int32_t *start, int N, int nh,
                        int nkv, int hd, float scale, cudaStream_t st);
void cuda_attention_bwd(float *dqkv, float *dsum, const float *dout, const float *qkv, int ld, const uint16_t *out,
                        const float *lse, const int32_t *start, const int32_t *end, int N, int nh, int nkv, int hd,
                        float scale, cudaStream_t st);

/* swiglu.cu (Qwen2MLP): gu [M, 2I] fp32 = gate | up; h [M, I] = bf16(silu(gate) * up).
 * Backward: dgu [M, 2I] bf16 = (dh up s (1 + gate (1 - s)) | dh silu(gate)), s = sigmoid(gate); dh [M, I] fp32. */
void cuda_swiglu_fwd(uint16_t *h, const float *gu, int M, int I, cudaStream_t st);
void cuda_swiglu_bwd(uint16_t *dgu, const float *dh, const float *gu, int M, int I, cudaStream_t st);

/* logprob.cu: the fused lm_head log-prob + entropy, one vocabulary chunk at a time (cuda_lm_plan).
 * stats [4, M] fp32: running max of z, sum exp(z - max), sum exp(z - max) z, z of the target; z = logits / T.
 *   init:   max = -inf, sums 0, target z = 0
 *   update: fold logits [M, Vc] (row stride ld) of vocabulary columns [v0, v0 + Vc) into the stats
 *   finish: logp[m] = z_t - lse (0 when target < 0), ent[m] = lse - sum p z  (either output may be NULL)
 *   grad:   dlogits [M, Vc] bf16 (stride Vc) = (dlogp (onehot - p) - dent p (z - sum p z)) / T for the chunk
 *           (cpu_logprob_entropy_backward; dlogp / dent may be NULL = 0). Source: verl logprobs_from_logits /
 *           entropy_from_logits. target may be NULL (all -1). */
void cuda_lm_stats_init(float *stats, int M, cudaStream_t st);
void cuda_lm_stats_update(float *stats, const float *logits, int ld, const int32_t *target, int M, int Vc, int v0,
                          float temperature, cudaStream_t st);
void cuda_lm_stats_finish(float *logp, float *ent, const float *stats, const int32_t *target, int M, cudaStream_t st);
void cuda_lm_grad(uint16_t *dlogits, const float *logits, int ld, const float *stats, const int32_t *target,
                  const float *dlogp, const float *dent, int M, int Vc, int v0, float temperature, cudaStream_t st);

/* adamw.cu: torch.optim.AdamW (model/adamw.h formula) on fp32 master p, state m, v, gradient g * gscale (the
 * clip coefficient); also writes the bf16 copy pbf the kernels read. step >= 1 (bias correction). */
void cuda_adamw(float *p, uint16_t *pbf, const float *g, float *m, float *v, long n, float lr, float beta1,
                float beta2, float eps, float wd, long step, float gscale, cudaStream_t st);

/* norm.cu: *out (device double) = sum of x[i]^2 over n (fp64 accumulation of fp32 block partials);
 * partial: 1024 doubles of device scratch. In-place scale x *= s (gradient clipping). */
void cuda_sumsq(double *out, double *partial, const float *x, long n, cudaStream_t st);
void cuda_scale(float *x, float s, long n, cudaStream_t st);

/* paged_attention.cu: the generation path's KV cache, bf16, [n_blocks, BS, kvd] for K and for V (per layer).
 * Row r of a step belongs to sequence seq[r] at absolute position pos[r]; its block table is
 * tables[seq[r] * max_blocks ..] (cuda_host.h CudaKvPager.table, uploaded).
 *   kv_store: writes k, v of each row (qkv columns [qd, qd + kvd) and [qd + kvd, qd + 2 kvd)) at pos[r]
 *   attention: row r attends to its sequence's keys 0 .. pos[r] (all stored first), out [R, nh*hd] bf16. */
void cuda_kv_store(uint16_t *kc, uint16_t *vc, const float *qkv, int ld, int qd, const int32_t *pos,
                   const int32_t *seq, const int32_t *tables, int max_blocks, int R, int BS, int kvd, cudaStream_t st);
void cuda_paged_attention(uint16_t *out, const float *qkv, int ld, const int32_t *pos, const int32_t *seq,
                          const int32_t *tables, int max_blocks, const uint16_t *kc, const uint16_t *vc, int R, int BS,
                          int nh, int nkv, int hd, float scale, cudaStream_t st);

/* gather.cu: dst[s, :] = src[idx[s], :] for s < S, rows of H bf16 (idx: device int32). */
void cuda_gather_rows_bf16(uint16_t *dst, const uint16_t *src, const int32_t *idx, int S, int H, cudaStream_t st);

/* sample.cu: one token per row of logits [S, V] (row stride ld) on the device, model/sample.h semantics
 * (temperature, top-k, top-p, greedy; log-prob over the full vocabulary before truncation), with the uniform
 * draw u = rng_uniform(seed, group[s], sample[s], pos[s]) computed on the device by the same Philox4x32-10
 * (core/rng.h mapping). scratch: 8 * V bytes per row. tok[s] = -1 when the row holds NaN / +inf / only -inf. */
void cuda_sample(int32_t *tok, float *logp, const float *logits, int ld, int S, int V, CudaSampleParams p,
                 uint64_t seed, const uint64_t *group, const uint32_t *sample, const uint32_t *pos, void *scratch,
                 cudaStream_t st);
/* u[n] = rng_uniform(seed, group[i], sample[i], pos[i]) on the device (for checking against core/rng.c). */
void cuda_rng_uniform(double *u, uint64_t seed, const uint64_t *group, const uint32_t *sample, const uint32_t *pos,
                      int n, cudaStream_t st);

#ifdef __cplusplus
}
#endif
#endif
