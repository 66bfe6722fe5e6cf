/* common/backend/cuda/backend_cuda.c: the CUDA backend's operation table (backend.h) over the .cu launchers of
 * cuda_ops.h and cuBLAS, in C11. Numerics as issue 10 fixed them: bf16 weights (a copy of the fp32 master slab made
 * by params_prepare and kept current by adamw) and bf16 GEMM inputs ("(act)" buffers), fp32 accumulation, fp32
 * residual stream, statistics, gradients and Adam state. One stream and one cuBLAS handle per model (BackendCtx).
 * The host index arrays of backend.h (tokens, targets, positions, cu_seqlens) are staged into device buffers here.
 * What it lacks is NULL in the table (backend.h says why): Qwen3 q/k norm, contiguous-cache attention, the paged
 * cache in the CPU engine's layout, weight packing. Not split-invariant like the CPU table: its weight gradients
 * are whole-batch GEMMs and the embedding gradient uses atomics.
 * Compiled and linked in CUDA builds only (USE_CUDA); no line of it has run on a GPU yet (bench/gpu_check.sh runs
 * tests/unit/test_backend_conformance.c on one).
 * Not here: the kernels (one per .cu file), the layer loop (model/forward.c). */
#ifdef USE_CUDA
#include <limits.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_host.h"
#include "backend/cuda/cuda_ops.h"

#define CK(x)                                                                                                 \
    do {                                                                                                      \
        cudaError_t e_ = (x);                                                                                 \
        if (e_ != cudaSuccess) DIE("%s: %s", #x, cudaGetErrorString(e_));                                    \
    } while (0)
#define CB(x)                                                                                                 \
    do {                                                                                                      \
        cublasStatus_t s_ = (x);                                                                              \
        if (s_ != CUBLAS_STATUS_SUCCESS) DIE("%s: cuBLAS status %d", #x, (int)s_);                           \
    } while (0)

/* device scratch slots, each grown on demand */
enum { SC_TOK, SC_TGT, SC_POS, SC_START, SC_END, SC_INVF, SC_BF16, SC_STATS, SC_DSUM, SC_NORM, SC_N };

struct BackendCtx {
    cudaStream_t   st;
    cublasHandle_t blas;
    const float   *params;     /* the bound master slab (params_prepare) */
    uint16_t      *wbf;        /* its bf16 copy */
    long           n_params;
    void          *sc[SC_N];
    size_t         sc_bytes[SC_N];
    int32_t       *h_idx;      /* host scratch for start / end */
    size_t         h_idx_n;
};

static void *scratch(BackendCtx *bc, int slot, size_t bytes) {
    if (bytes > bc->sc_bytes[slot]) {
        CK(cudaStreamSynchronize(bc->st));
        cudaFree(bc->sc[slot]);
        size_t n = bytes < 4096 ? 4096 : bytes + bytes / 2;
        CK(cudaMalloc(&bc->sc[slot], n));
        bc->sc_bytes[slot] = n;
    }
    return bc->sc[slot];
}

/* a host int32 array staged into a device scratch slot */
static int32_t *stage_i32(BackendCtx *bc, int slot, const int32_t *h, long n) {
    if (!h) return NULL;
    int32_t *d = scratch(bc, slot, (size_t)n * sizeof(int32_t));
    CK(cudaMemcpyAsync(d, h, (size_t)n * sizeof(int32_t), cudaMemcpyHostToDevice, bc->st));
    return d;
}

/* the bf16 copy of a weight of the bound slab */
static const uint16_t *wbf(BackendCtx *bc, const float *w) {
    long off = w - bc->params;
    if (!bc->wbf || off < 0 || off >= bc->n_params) DIE("cuda backend: weight %p is not in the bound parameter slab", (const void *)w);
    return bc->wbf + off;
}

/* start[i] / end[i] of each packed row's sequence (the varlen attention kernels' index), staged */
static void stage_seq_bounds(BackendCtx *bc, const int32_t *cu, int S, int32_t **d_start, int32_t **d_end) {
    int N = cu[S];
    if ((size_t)2 * N > bc->h_idx_n) {
        xfree(bc->h_idx);
        bc->h_idx_n = (size_t)2 * N;
        bc->h_idx = xmalloc(bc->h_idx_n * sizeof(int32_t));
    }
    char err[ERR_LEN];
    if (cuda_pack_index(cu, S, N, NULL, bc->h_idx, bc->h_idx + N, NULL, err)) DIE("cuda backend: %s", err);
    *d_start = stage_i32(bc, SC_START, bc->h_idx, N);
    if (d_end) *d_end = stage_i32(bc, SC_END, bc->h_idx + N, N);
}

/* ---- context and memory ---- */
static BackendCtx *g_ctx_new(char err[ERR_LEN]) {
    BackendCtx *bc = xcalloc(1, sizeof *bc);
    cudaError_t e = cudaStreamCreateWithFlags(&bc->st, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        err_set(err, ERR_UNSUPPORTED, "cuda: cannot create a stream: %s", cudaGetErrorString(e));
        xfree(bc);
        return NULL;
    }
    if (cublasCreate(&bc->blas) != CUBLAS_STATUS_SUCCESS) {
        err_set(err, ERR_UNSUPPORTED, "cuda: cublasCreate failed");
        cudaStreamDestroy(bc->st);
        xfree(bc);
        return NULL;
    }
    CB(cublasSetStream(bc->blas, bc->st));
    return bc;
}
static void g_ctx_free(BackendCtx *bc) {
    if (!bc) return;
    cudaStreamSynchronize(bc->st);
    for (int i = 0; i < SC_N; i++) cudaFree(bc->sc[i]);
    cudaFree(bc->wbf);
    cublasDestroy(bc->blas);
    cudaStreamDestroy(bc->st);
    xfree(bc->h_idx);
    xfree(bc);
}
static void *g_alloc(BackendCtx *bc, size_t bytes) {
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 4) != cudaSuccess) return NULL;
    CK(cudaMemsetAsync(p, 0, bytes, bc->st));
    CK(cudaStreamSynchronize(bc->st));
    return p;
}
static void g_release(BackendCtx *bc, void *p) {
    if (!p) return;
    CK(cudaStreamSynchronize(bc->st));
    CK(cudaFree(p));
}
static void g_to_device(BackendCtx *bc, void *dst, const void *src, size_t n) {
    if (n) CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, bc->st));
    CK(cudaStreamSynchronize(bc->st));   /* src is pageable host memory the caller may reuse at once */
}
static void g_to_host(BackendCtx *bc, void *dst, const void *src, size_t n) {
    if (n) CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, bc->st));
    CK(cudaStreamSynchronize(bc->st));
}
static void g_copy(BackendCtx *bc, void *dst, const void *src, size_t n) {
    if (n) CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, bc->st));
}
static void g_zero(BackendCtx *bc, void *p, size_t n) {
    if (n) CK(cudaMemsetAsync(p, 0, n, bc->st));
}
static void g_sync(BackendCtx *bc) { CK(cudaStreamSynchronize(bc->st)); }

static void g_params_refresh(BackendCtx *bc) {
    if (bc->wbf) cuda_cast_f32_bf16(bc->wbf, bc->params, bc->n_params, bc->st);
}
static void *g_params_prepare(BackendCtx *bc, const float *params, long n) {
    cudaFree(bc->wbf);
    CK(cudaMalloc((void **)&bc->wbf, (size_t)n * sizeof(uint16_t)));
    bc->params = params;
    bc->n_params = n;
    g_params_refresh(bc);
    return bc->wbf;
}
static long g_pack_floats(int N, int K, int glu) { (void)N; (void)K; (void)glu; return 0; }
static long g_att_scratch(int nk, int hd) { (void)nk; (void)hd; return 0; }
static long g_paged_scratch(int group, long ctx_max) { (void)group; (void)ctx_max; return 0; }

/* ---- forward ---- */
static void g_embed(BackendCtx *bc, float *x, const int32_t *tok, BkWeight emb, int N, int H) {
    cuda_embedding_fwd(x, stage_i32(bc, SC_TOK, tok, N), wbf(bc, emb.w), N, H, bc->st);
}
static void g_rope_tables(BackendCtx *bc, float *cs, float *sn, const int32_t *pos, int M, const float *inv_freq,
                          int half) {
    (void)bc; (void)cs; (void)sn; (void)pos; (void)M; (void)inv_freq; (void)half;   /* angles are computed in rope */
}
static void g_rope(BackendCtx *bc, float *x, int ld, const BkRope *r, int M, int nh, int hd, int inverse) {
    const int32_t *pos = stage_i32(bc, SC_POS, r->pos, M);
    float *invf = scratch(bc, SC_INVF, (size_t)hd / 2 * sizeof(float));
    CK(cudaMemcpyAsync(invf, r->inv_freq, (size_t)hd / 2 * sizeof(float), cudaMemcpyHostToDevice, bc->st));
    cuda_rope(x, ld, pos, invf, M, nh, hd, inverse, bc->st);
}
static void g_rmsnorm(BackendCtx *bc, void *y, float *rstd, const float *x, const float *w, int M, int D, float eps) {
    if (y == (const void *)x) DIE("cuda rmsnorm: bf16 output cannot overwrite its fp32 input");
    cuda_rmsnorm_fwd(y, rstd, x, w, M, D, eps, bc->st);
}
static void g_linear(BackendCtx *bc, float *y, long ldy, const void *x, BkWeight w, const float *b, int M, int N, int K,
                     int flags, float *scratch_unused) {
    (void)scratch_unused;
    cuda_gemm_fwd_ld(bc->blas, y, ldy, x, wbf(bc, w.w), M, N, K, (flags & BK_ACCUM) ? 1.0f : 0.0f);
    if (b) {
        if (ldy != N) DIE("cuda linear: a bias needs ldy == N (got %ld, %d)", ldy, N);
        cuda_bias_add(y, b, M, N, bc->st);
    }
}
static void g_linear_swiglu(BackendCtx *bc, void *h, float *gu, const void *x, BkWeight w, int M, int inter, int K,
                            float *scratch_unused) {
    (void)scratch_unused;
    cuda_gemm_fwd(bc->blas, gu, x, wbf(bc, w.w), M, 2 * inter, K, 0.0f);
    cuda_swiglu_fwd(h, gu, M, inter, bc->st);
}
static void g_swiglu(BackendCtx *bc, void *h, const float *gu, int M, int inter) { cuda_swiglu_fwd(h, gu, M, inter, bc->st); }

/* the CUDA attention kernels read q | k | v side by side in one row (model/forward.c's qkv layout) */
static void require_qkv(const float *q, const float *k, const float *v, int nh, int nkv, int hd, int ldq, int ldk,
                        int ldo) {
    if (k != q + (long)nh * hd || v != k + (long)nkv * hd || ldq != ldk || ldo != nh * hd)
        DIE("cuda attention: q, k, v must be one [N, qd + 2 kvd] buffer and out [N, qd]");
}
static void g_attention_varlen(BackendCtx *bc, void *out, float *lse, const float *q, const float *k, const float *v,
                               const int32_t *cu, int S, int nh, int nkv, int hd, int ldq, int ldk, int ldo,
                               float scale, float *scratch_unused) {
    (void)scratch_unused;
    require_qkv(q, k, v, nh, nkv, hd, ldq, ldk, ldo);
    int N = cu[S];
    float *l = lse ? lse : scratch(bc, SC_DSUM, (size_t)N * nh * sizeof(float));
    int32_t *start;
    stage_seq_bounds(bc, cu, S, &start, NULL);
    cuda_attention_fwd(out, l, q, ldq, start, N, nh, nkv, hd, scale, bc->st);
}
static void g_logprob_entropy(BackendCtx *bc, const float *logits, const int32_t *target, int M, int V, float T,
                              float *logp, float *ent) {
    const int32_t *tgt = stage_i32(bc, SC_TGT, target, M);
    float *stats = scratch(bc, SC_STATS, (size_t)4 * M * sizeof(float));
    cuda_lm_stats_init(stats, M, bc->st);
    cuda_lm_stats_update(stats, logits, V, tgt, M, V, 0, T, bc->st);
    cuda_lm_stats_finish(logp, ent, stats, tgt, M, bc->st);
}
static void g_add(BackendCtx *bc, float *y, const float *x, long n) {
    const float one = 1.0f;
    for (long i = 0; i < n; i += INT_MAX) {
        int c = n - i < INT_MAX ? (int)(n - i) : INT_MAX;
        CB(cublasSaxpy(bc->blas, c, &one, x + i, 1, y + i, 1));
    }
}

/* ---- backward ---- */
static void g_logprob_entropy_backward(BackendCtx *bc, float *logits, const int32_t *target, int M, int V, float T,
                                       const float *dlogp, const float *dent) {
    const int32_t *tgt = stage_i32(bc, SC_TGT, target, M);
    float *stats = scratch(bc, SC_STATS, (size_t)4 * M * sizeof(float));
    cuda_lm_stats_init(stats, M, bc->st);
    cuda_lm_stats_update(stats, logits, V, tgt, M, V, 0, T, bc->st);
    uint16_t *dl = scratch(bc, SC_BF16, (size_t)M * V * sizeof(uint16_t));
    cuda_lm_grad(dl, logits, V, stats, tgt, dlogp, dent, M, V, 0, T, bc->st);
    cuda_cast_bf16_f32(logits, dl, (long)M * V, bc->st);   /* exact: the GEMMs below read it as bf16 again */
}
static void g_linear_backward_varlen(BackendCtx *bc, float *dx, float *dw, float *db, const float *dy, const void *x,
                                     BkWeight w, const int32_t *cu, int S, int N, int K, int accum_dx) {
    int M = cu[S] - cu[0];
    uint16_t *dyb = scratch(bc, SC_BF16, (size_t)M * N * sizeof(uint16_t));
    cuda_cast_f32_bf16(dyb, dy, (long)M * N, bc->st);
    if (dx) cuda_gemm_dx(bc->blas, dx, dyb, wbf(bc, w.w), M, N, K, accum_dx ? 1.0f : 0.0f);
    if (dw) cuda_gemm_dw(bc->blas, dw, dyb, x, M, N, K);
    if (db) cuda_bias_grad(db, dy, M, N, bc->st);
}
static void g_rmsnorm_backward_varlen(BackendCtx *bc, float *dx, float *dw, const float *dy, const float *x,
                                      const float *w, const float *rstd, const int32_t *cu, int S, int D,
                                      int accum_dx) {
    cuda_rmsnorm_bwd(dx, dw, dy, x, w, rstd, cu[S] - cu[0], D, accum_dx, bc->st);
}
static void g_swiglu_backward(BackendCtx *bc, float *dgu, const float *dh, const float *gu, int M, int inter) {
    uint16_t *b = scratch(bc, SC_BF16, (size_t)M * 2 * inter * sizeof(uint16_t));
    cuda_swiglu_bwd(b, dh, gu, M, inter, bc->st);
    cuda_cast_bf16_f32(dgu, b, (long)M * 2 * inter, bc->st);
}
static void g_attention_backward_varlen(BackendCtx *bc, float *dq, float *dk, float *dv, const float *dout,
                                        const float *q, const float *k, const float *v, const void *out,
                                        const float *lse, const int32_t *cu, int S, int nh, int nkv, int hd, int ldq,
                                        int ldk, int ldo, float scale, float *scratch_unused) {
    (void)scratch_unused;
    require_qkv(q, k, v, nh, nkv, hd, ldq, ldk, ldo);
    require_qkv(dq, dk, dv, nh, nkv, hd, ldq, ldk, ldo);
    int N = cu[S];
    int32_t *start, *end;
    stage_seq_bounds(bc, cu, S, &start, &end);
    float *dsum = scratch(bc, SC_DSUM, (size_t)N * nh * sizeof(float));
    cuda_attention_bwd(dq, dsum, dout, q, ldq, out, lse, start, end, N, nh, nkv, hd, scale, bc->st);
}
static void g_embed_backward(BackendCtx *bc, float *demb, const int32_t *tok, const float *dx, int N, int H) {
    cuda_embedding_bwd(demb, stage_i32(bc, SC_TOK, tok, N), dx, N, H, bc->st);
}

/* ---- optimizer and reductions ---- */
static void g_adamw(BackendCtx *bc, float *p, const float *g, float *mom, float *var, long n, float lr, float beta1,
                    float beta2, float eps, float weight_decay, long step) {
    if (p != bc->params || n != bc->n_params) DIE("cuda adamw: runs on the bound parameter slab only");
    cuda_adamw(p, bc->wbf, g, mom, var, n, lr, beta1, beta2, eps, weight_decay, step, 1.0f, bc->st);
}
static double g_sumsq(BackendCtx *bc, const float *x, long n) {
    double *nb = scratch(bc, SC_NORM, 1040 * sizeof(double)), s = 0.0;
    cuda_sumsq(nb + 1024, nb, x, n, bc->st);
    CK(cudaMemcpyAsync(&s, nb + 1024, sizeof s, cudaMemcpyDeviceToHost, bc->st));
    CK(cudaStreamSynchronize(bc->st));
    return s;
}
static void g_scale(BackendCtx *bc, float *x, float s, long n) { cuda_scale(x, s, n, bc->st); }

const Backend backend_cuda = {
    .name = "cuda",
    .act_dtype = BK_BF16,
    .host_memory = 0,
    .ctx_new = g_ctx_new,
    .ctx_free = g_ctx_free,
    .alloc = g_alloc,
    .release = g_release,
    .to_device = g_to_device,
    .to_host = g_to_host,
    .copy = g_copy,
    .zero = g_zero,
    .sync = g_sync,
    .params_prepare = g_params_prepare,
    .params_refresh = g_params_refresh,
    .pack_floats = g_pack_floats,
    .pack_weights = NULL,
    .attention_scratch_floats = g_att_scratch,
    .paged_scratch_floats = g_paged_scratch,
    .embed = g_embed,
    .rope_tables = g_rope_tables,
    .rope = g_rope,
    .rmsnorm = g_rmsnorm,
    .rmsnorm_heads = NULL,
    .linear = g_linear,
    .linear_swiglu = g_linear_swiglu,
    .swiglu = g_swiglu,
    .attention_varlen = g_attention_varlen,
    .attention = NULL,
    .kv_store = NULL,
    .paged_attention = NULL,
    .logprob_entropy = g_logprob_entropy,
    .add = g_add,
    .logprob_entropy_backward = g_logprob_entropy_backward,
    .linear_backward_varlen = g_linear_backward_varlen,
    .rmsnorm_backward_varlen = g_rmsnorm_backward_varlen,
    .rmsnorm_heads_backward = NULL,
    .swiglu_backward = g_swiglu_backward,
    .attention_backward_varlen = g_attention_backward_varlen,
    .embed_backward = g_embed_backward,
    .adamw = g_adamw,
    .sumsq = g_sumsq,
    .scale = g_scale,
};
#else
typedef int backend_cuda_unused_in_cpu_builds;
#endif
