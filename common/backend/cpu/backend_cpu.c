/* common/backend/cpu/backend_cpu.c: the CPU backend's operation table (backend.h) over the kernels of cpu_ops.h and
 * cpu_decode.h. Memory is host memory (counted xmalloc), copies are memcpy, nothing is asynchronous. Activations are
 * fp32 (act_dtype BK_F32); a weight's prep is its cpu_pack_weights panels. This table is the reference every other
 * backend is checked against (tests/unit/test_backend_conformance.c).
 * Not here: the kernels themselves (cpu_ops.c, cpu_decode.c), the layer loop (model/). */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_decode.h"
#include "backend/cpu/cpu_ops.h"

static BackendCtx *c_ctx_new(char err[ERR_LEN]) {
    (void)err;
    return NULL;   /* the CPU backend keeps no per-model state */
}
static void c_ctx_free(BackendCtx *bc) { (void)bc; }

static void *c_alloc(BackendCtx *bc, size_t bytes) {
    (void)bc;
    void *p = xmalloc(bytes ? bytes : 1);
    memset(p, 0, bytes);
    return p;
}
static void c_release(BackendCtx *bc, void *p) { (void)bc; xfree(p); }
static void c_copy(BackendCtx *bc, void *dst, const void *src, size_t n) {
    (void)bc;
    if (n) memmove(dst, src, n);
}
static void c_zero(BackendCtx *bc, void *p, size_t n) {
    (void)bc;
    if (n) memset(p, 0, n);
}
static void c_sync(BackendCtx *bc) { (void)bc; }

static long c_pack_floats(int N, int K, int glu) { return glu ? cpu_pack_floats_glu(N, K) : cpu_pack_floats(N, K); }
static void c_pack_weights(BackendCtx *bc, float *prep, const float *w, int N, int K, int glu) {
    (void)bc;
    if (glu) cpu_pack_weights_glu(prep, w, N, K);
    else cpu_pack_weights(prep, w, N, K);
}
static void c_pack_weights_bf16(BackendCtx *bc, uint16_t *prep, const float *w, int N, int K) {
    (void)bc;
    cpu_pack_weights_bf16(prep, w, N, K);
}
static long c_att_scratch(int nk, int hd) { return cpu_attention_scratch_floats(nk, hd); }
static long c_paged_scratch(int group, long ctx_max) { return (long)omp_get_max_threads() * group * ctx_max; }

static void c_embed(BackendCtx *bc, float *x, const int32_t *tok, BkWeight emb, int N, int H) {
    (void)bc;
    for (int i = 0; i < N; i++) memcpy(x + (long)i * H, emb.w + (long)tok[i] * H, (size_t)H * sizeof(float));
}
static void c_rope_tables(BackendCtx *bc, float *cs, float *sn, const int32_t *pos, int M, const float *inv_freq,
                          int half) {
    (void)bc;
    cpu_rope_tables(cs, sn, pos, M, inv_freq, half);
}
static void c_rope(BackendCtx *bc, float *x, int ld, const BkRope *r, int M, int nh, int hd, int inverse) {
    (void)bc;
    cpu_rope(x, ld, r->cs, r->sn, M, nh, hd, inverse);
}
static void c_rmsnorm(BackendCtx *bc, void *y, float *rstd, const float *x, const float *w, int M, int D, float eps) {
    (void)bc;
    cpu_rmsnorm(y, rstd, x, w, M, D, eps);
}
static void c_rmsnorm_heads(BackendCtx *bc, float *y, int ldy, float *rstd, const float *x, int ldx, const float *w,
                            int M, int nh, int hd, float eps) {
    (void)bc;
    cpu_rmsnorm_heads(y, ldy, rstd, x, ldx, w, M, nh, hd, eps);
}
/* BK_FAST: OpenBLAS sgemm (cpu_linear / cpu_linear_add, ldy = N); otherwise the fixed-order packed kernel on the
 * prepared panels, or packing w into scratch inside the product. */
static void c_linear(BackendCtx *bc, float *y, long ldy, const void *x, BkWeight w, const float *b, int M, int N,
                     int K, int flags, float *scratch) {
    (void)bc;
    int acc = (flags & BK_ACCUM) != 0;
    if (flags & BK_FAST) {
        if (acc) cpu_linear_add(y, x, w.w, M, N, K);
        else cpu_linear(y, x, w.w, b, M, N, K);
    } else if (w.prep && w.prep_dtype == BK_BF16) {
        cpu_linear_packed_bf16_ex(y, ldy, x, w.prep, b, M, N, K, acc);
    } else if (w.prep) {
        cpu_linear_packed_ex(y, ldy, x, w.prep, b, M, N, K, acc);
    } else {
        cpu_linear_packw_ex(y, ldy, x, w.w, scratch, b, M, N, K, acc);
    }
}
static void c_linear_swiglu(BackendCtx *bc, void *h, float *gu, const void *x, BkWeight w, int M, int I, int K,
                            float *scratch) {
    (void)bc;
    if (w.prep) cpu_linear_packed_swiglu(h, gu, x, w.prep, M, I, K);
    else cpu_linear_packw_swiglu(h, gu, x, w.w, scratch, M, I, K);
}
static void c_swiglu(BackendCtx *bc, void *h, const float *gu, int M, int I) {
    (void)bc;
    cpu_swiglu(h, gu, M, I);
}
static void c_attention_varlen(BackendCtx *bc, void *out, float *lse, const float *q, const float *k, const float *v,
                               const int32_t *cu, int S, int nh, int nkv, int hd, int ldq, int ldk, int ldo,
                               float scale, float *scratch) {
    (void)bc;
    cpu_attention_varlen(out, lse, q, k, v, cu, S, nh, nkv, hd, ldq, ldk, ldo, scale, scratch);
}
static void c_attention(BackendCtx *bc, void *out, float *lse, const float *q, const float *k, const float *v, int nq,
                        int p0, int nk, int nh, int nkv, int hd, int ldq, int ldk, int ldo, float scale,
                        float *scratch) {
    (void)bc;
    cpu_attention(out, lse, q, k, v, nq, p0, nk, nh, nkv, hd, ldq, ldk, ldo, scale, scratch);
}
static void c_kv_store(BackendCtx *bc, void *kc, void *vc, BkDtype dt, const int32_t *table, int p, const float *k,
                       const float *v, int BS, int nkv, int hd) {
    (void)bc;
    if (dt == BK_BF16) cpu_kv_store_bf16(kc, vc, table, p, k, v, BS, nkv, hd);
    else cpu_kv_store(kc, vc, table, p, k, v, BS, nkv, hd);
}
static void c_paged_attention(BackendCtx *bc, void *out, int ldo, const float *q, int ldq, int R, const int32_t *pos,
                              const int32_t *const *table, const void *kc, const void *vc, BkDtype dt, int BS, int nh,
                              int nkv, int hd, float scale, float *scratch, long ctx_max) {
    (void)bc;
    if (dt == BK_BF16)
        cpu_paged_attention_bf16(out, ldo, q, ldq, R, pos, table, kc, vc, BS, nh, nkv, hd, scale, scratch, ctx_max);
    else cpu_paged_attention(out, ldo, q, ldq, R, pos, table, kc, vc, BS, nh, nkv, hd, scale, scratch, ctx_max);
}
static void c_logprob_entropy(BackendCtx *bc, const float *logits, const int32_t *target, int M, int V, float T,
                              float *logp, float *ent) {
    (void)bc;
    cpu_logprob_entropy(logits, target, M, V, T, logp, ent);
}
static void c_add(BackendCtx *bc, float *y, const float *x, long n) {
    (void)bc;
    cpu_add(y, x, n);
}

static void c_logprob_entropy_backward(BackendCtx *bc, float *logits, const int32_t *target, int M, int V, float T,
                                       const float *dlogp, const float *dent) {
    (void)bc;
    cpu_logprob_entropy_backward(logits, target, M, V, T, dlogp, dent);
}
static void c_linear_backward_varlen(BackendCtx *bc, float *dx, float *dw, float *db, const float *dy, const void *x,
                                     BkWeight w, const int32_t *cu, int S, int N, int K, int accum_dx) {
    (void)bc;
    cpu_linear_backward_varlen(dx, dw, db, dy, x, w.w, cu, S, N, K, accum_dx);
}
static void c_rmsnorm_backward_varlen(BackendCtx *bc, float *dx, float *dw, const float *dy, const float *x,
                                      const float *w, const float *rstd, const int32_t *cu, int S, int D,
                                      int accum_dx) {
    (void)bc;
    cpu_rmsnorm_backward_varlen(dx, dw, dy, x, w, rstd, cu, S, D, accum_dx);
}
static void c_rmsnorm_heads_backward(BackendCtx *bc, float *g, int ldg, float *dw, const float *x, int ldx,
                                     const float *w, const float *rstd, int M, int nh, int hd) {
    (void)bc;
    cpu_rmsnorm_heads_backward(g, ldg, dw, x, ldx, w, rstd, M, nh, hd);
}
static void c_swiglu_backward(BackendCtx *bc, float *dgu, const float *dh, const float *gu, int M, int I) {
    (void)bc;
    cpu_swiglu_backward(dgu, dh, gu, M, I);
}
static void c_attention_backward_varlen(BackendCtx *bc, float *dq, float *dk, float *dv, const float *dout,
                                        const float *q, const float *k, const float *v, const void *out,
                                        const float *lse, const int32_t *cu, int S, int nh, int nkv, int hd, int ldq,
                                        int ldk, int ldo, float scale, float *scratch) {
    (void)bc;
    cpu_attention_backward_varlen(dq, dk, dv, dout, q, k, v, out, lse, cu, S, nh, nkv, hd, ldq, ldk, ldo, scale,
                                  scratch);
}
static void c_embed_backward(BackendCtx *bc, float *demb, const int32_t *tok, const float *dx, int N, int H) {
    (void)bc;
    for (int i = 0; i < N; i++) cpu_add(demb + (long)tok[i] * H, dx + (long)i * H, H);
}

/* torch.optim.AdamW (decoupled weight decay, bias-corrected; the formula of model/adamw.h). */
static void c_adamw(BackendCtx *bc, float *p, const float *g, float *mom, float *var, long n, float lr, float beta1,
                    float beta2, float eps, float weight_decay, long step) {
    (void)bc;
    double bc1 = 1.0 - pow(beta1, (double)step), bc2 = 1.0 - pow(beta2, (double)step);
    float step_size = (float)(lr / bc1), bc2_sqrt = (float)sqrt(bc2), decay = 1.0f - lr * weight_decay;
    float w1 = 1.0f - beta1, b2 = beta2, w2 = 1.0f - beta2;
#pragma omp parallel for schedule(static) if (n >= 65536)
    for (long i = 0; i < n; i++) {
        float gi = g[i];
        p[i] *= decay;
        mom[i] += w1 * (gi - mom[i]);
        var[i] = var[i] * b2 + w2 * gi * gi;
        float denom = sqrtf(var[i]) / bc2_sqrt + eps;
        p[i] -= step_size * (mom[i] / denom);
    }
}
static double c_sumsq(BackendCtx *bc, const float *x, long n) {
    (void)bc;
    double s = 0.0;
#pragma omp parallel for reduction(+ : s) schedule(static)
    for (long i = 0; i < n; i++) s += (double)x[i] * x[i];
    return s;
}
static void c_scale(BackendCtx *bc, float *x, float s, long n) {
    (void)bc;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) x[i] *= s;
}

const Backend backend_cpu = {
    .name = "cpu",
    .act_dtype = BK_F32,
    .host_memory = 1,
    .ctx_new = c_ctx_new,
    .ctx_free = c_ctx_free,
    .alloc = c_alloc,
    .release = c_release,
    .to_device = c_copy,
    .to_host = c_copy,
    .copy = c_copy,
    .zero = c_zero,
    .sync = c_sync,
    .pack_floats = c_pack_floats,
    .pack_weights = c_pack_weights,
    .pack_weights_bf16 = c_pack_weights_bf16,
    .attention_scratch_floats = c_att_scratch,
    .paged_scratch_floats = c_paged_scratch,
    .embed = c_embed,
    .rope_tables = c_rope_tables,
    .rope = c_rope,
    .rmsnorm = c_rmsnorm,
    .rmsnorm_heads = c_rmsnorm_heads,
    .linear = c_linear,
    .linear_swiglu = c_linear_swiglu,
    .swiglu = c_swiglu,
    .attention_varlen = c_attention_varlen,
    .attention = c_attention,
    .kv_store = c_kv_store,
    .paged_attention = c_paged_attention,
    .logprob_entropy = c_logprob_entropy,
    .add = c_add,
    .logprob_entropy_backward = c_logprob_entropy_backward,
    .linear_backward_varlen = c_linear_backward_varlen,
    .rmsnorm_backward_varlen = c_rmsnorm_backward_varlen,
    .rmsnorm_heads_backward = c_rmsnorm_heads_backward,
    .swiglu_backward = c_swiglu_backward,
    .attention_backward_varlen = c_attention_backward_varlen,
    .embed_backward = c_embed_backward,
    .adamw = c_adamw,
    .sumsq = c_sumsq,
    .scale = c_scale,
};
