/* common/backend/cpu/cpu_kernels.h: the CPU backend's kernels that come in one build per kernel family (cpu_family.h):
 * every void function of cpu_ops.h and cpu_decode.h, as X(name, (parameters), (arguments)). cpu_family.c makes the
 * dispatch table and the public functions from it; cpu_family_names.h the per-family names. Kept in step with the two
 * headers by tests/unit/test_cpu_family.c (a function missing here has no public symbol: the link fails). */
#ifndef DAPO_CPU_KERNELS_H
#define DAPO_CPU_KERNELS_H

#define CPU_KERNELS(X) \
    X(cpu_linear, (float *y, const float *x, const float *w, const float *b, int M, int N, int K), (y, x, w, b, M, N, K)) \
    X(cpu_linear_add, (float *y, const float *x, const float *w, int M, int N, int K), (y, x, w, M, N, K)) \
    X(cpu_linear_backward, (float *dx, float *dw, float *db, const float *dy, const float *x, const float *w, int M, int N, int K, int accum_dx), (dx, dw, db, dy, x, w, M, N, K, accum_dx)) \
    X(cpu_linear_varlen, (float *y, const float *x, const float *w, const float *b, const int32_t *cu_seqlens, int n_seqs, int N, int K, int accumulate), (y, x, w, b, cu_seqlens, n_seqs, N, K, accumulate)) \
    X(cpu_linear_backward_varlen, (float *dx, float *dw, float *db, const float *dy, const float *x, const float *w, const int32_t *cu_seqlens, int n_seqs, int N, int K, int accum_dx), (dx, dw, db, dy, x, w, cu_seqlens, n_seqs, N, K, accum_dx)) \
    X(cpu_rmsnorm, (float *y, float *rstd, const float *x, const float *w, int M, int D, float eps), (y, rstd, x, w, M, D, eps)) \
    X(cpu_rmsnorm_backward, (float *dx, float *dw, const float *dy, const float *x, const float *w, const float *rstd, int M, int D, int accum_dx), (dx, dw, dy, x, w, rstd, M, D, accum_dx)) \
    X(cpu_rmsnorm_backward_varlen, (float *dx, float *dw, const float *dy, const float *x, const float *w, const float *rstd, const int32_t *cu_seqlens, int n_seqs, int D, int accum_dx), (dx, dw, dy, x, w, rstd, cu_seqlens, n_seqs, D, accum_dx)) \
    X(cpu_rope_tables, (float *cs, float *sn, const int32_t *pos, int M, const float *inv_freq, int half), (cs, sn, pos, M, inv_freq, half)) \
    X(cpu_rope, (float *x, int ld, const float *cs, const float *sn, int M, int nh, int hd, int inverse), (x, ld, cs, sn, M, nh, hd, inverse)) \
    X(cpu_attention, (float *out, float *lse, const float *q, const float *k, const float *v, int nq, int p0, int nk, int nh, int nkv, int hd, int ldq, int ldk, int ldo, float scale, float *scratch), (out, lse, q, k, v, nq, p0, nk, nh, nkv, hd, ldq, ldk, ldo, scale, scratch)) \
    X(cpu_attention_varlen, (float *out, float *lse, const float *q, const float *k, const float *v, const int32_t *cu_seqlens, int n_seqs, int nh, int nkv, int hd, int ldq, int ldk, int ldo, float scale, float *scratch), (out, lse, q, k, v, cu_seqlens, n_seqs, nh, nkv, hd, ldq, ldk, ldo, scale, scratch)) \
    X(cpu_attention_backward, (float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k, const float *v, const float *out, const float *lse, int T, int nh, int nkv, int hd, int ldq, int ldk, int ldo, float scale, float *scratch), (dq, dk, dv, dout, q, k, v, out, lse, T, nh, nkv, hd, ldq, ldk, ldo, scale, scratch)) \
    X(cpu_attention_backward_varlen, (float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k, const float *v, const float *out, const float *lse, const int32_t *cu_seqlens, int n_seqs, int nh, int nkv, int hd, int ldq, int ldk, int ldo, float scale, float *scratch), (dq, dk, dv, dout, q, k, v, out, lse, cu_seqlens, n_seqs, nh, nkv, hd, ldq, ldk, ldo, scale, scratch)) \
    X(cpu_swiglu, (float *h, const float *gu, int M, int I), (h, gu, M, I)) \
    X(cpu_swiglu_backward, (float *dgu, const float *dh, const float *gu, int M, int I), (dgu, dh, gu, M, I)) \
    X(cpu_rmsnorm_heads, (float *y, int ldy, float *rstd, const float *x, int ldx, const float *w, int M, int nh, int hd, float eps), (y, ldy, rstd, x, ldx, w, M, nh, hd, eps)) \
    X(cpu_rmsnorm_heads_backward, (float *g, int ldg, float *dw, const float *x, int ldx, const float *w, const float *rstd, int M, int nh, int hd), (g, ldg, dw, x, ldx, w, rstd, M, nh, hd)) \
    X(cpu_logprob_entropy, (const float *logits, const int32_t *target, int M, int V, float temperature, float *logp, float *ent), (logits, target, M, V, temperature, logp, ent)) \
    X(cpu_logprob_entropy_backward, (float *logits, const int32_t *target, int M, int V, float temperature, const float *dlogp, const float *dent), (logits, target, M, V, temperature, dlogp, dent)) \
    X(cpu_add, (float *y, const float *x, long n), (y, x, n)) \
    X(cpu_pack_weights, (float *dst, const float *w, int N, int K), (dst, w, N, K)) \
    X(cpu_linear_packed, (float *y, const float *x, const float *wp, const float *b, int M, int N, int K), (y, x, wp, b, M, N, K)) \
    X(cpu_linear_packed_ex, (float *y, long ldy, const float *x, const float *wp, const float *b, int M, int N, int K, int accumulate), (y, ldy, x, wp, b, M, N, K, accumulate)) \
    X(cpu_pack_weights_bf16, (uint16_t *dst, const float *w, int N, int K), (dst, w, N, K)) \
    X(cpu_linear_packed_bf16_ex, (float *y, long ldy, const float *x, const uint16_t *wp, const float *b, int M, int N, int K, int accumulate), (y, ldy, x, wp, b, M, N, K, accumulate)) \
    X(cpu_pack_weights_glu, (float *dst, const float *w, int I, int K), (dst, w, I, K)) \
    X(cpu_linear_packed_swiglu, (float *h, float *gu, const float *x, const float *wp, int M, int I, int K), (h, gu, x, wp, M, I, K)) \
    X(cpu_linear_packw_ex, (float *y, long ldy, const float *x, const float *w, float *wp, const float *b, int M, int N, int K, int accumulate), (y, ldy, x, w, wp, b, M, N, K, accumulate)) \
    X(cpu_linear_packw_swiglu, (float *h, float *gu, const float *x, const float *w, float *wp, int M, int I, int K), (h, gu, x, w, wp, M, I, K)) \
    X(cpu_paged_attention, (float *out, int ldo, const float *q, int ldq, int R, const int32_t *pos, const int32_t *const *table, const float *kc, const float *vc, int block_tokens, int nh, int nkv, int hd, float scale, float *scratch, long ctx_max), (out, ldo, q, ldq, R, pos, table, kc, vc, block_tokens, nh, nkv, hd, scale, scratch, ctx_max)) \
    X(cpu_kv_store, (float *kc, float *vc, const int32_t *table, int p, const float *k, const float *v, int block_tokens, int nkv, int hd), (kc, vc, table, p, k, v, block_tokens, nkv, hd)) \
    X(cpu_kv_store_bf16, (uint16_t *kc, uint16_t *vc, const int32_t *table, int p, const float *k, const float *v, int block_tokens, int nkv, int hd), (kc, vc, table, p, k, v, block_tokens, nkv, hd)) \
    X(cpu_paged_attention_bf16, (float *out, int ldo, const float *q, int ldq, int R, const int32_t *pos, const int32_t *const *table, const uint16_t *kc, const uint16_t *vc, int block_tokens, int nh, int nkv, int hd, float scale, float *scratch, long ctx_max), (out, ldo, q, ldq, R, pos, table, kc, vc, block_tokens, nh, nkv, hd, scale, scratch, ctx_max))

#endif
