/* common/backend/backend.h: a compute backend as a const table of kernel-level operations (docs/conventions.md rule 6,
 * ggml's ggml_backend_i). The model (common/model) is written once against this table: it allocates its slabs,
 * moves data and runs every kernel through `const Backend *`, so the layer loop does not know which device runs it.
 * One table per backend: backend_cpu (backend/cpu/backend_cpu.c: OpenBLAS + our AVX-512/AVX2 kernels, the
 * reference) and, in CUDA builds, backend_cuda (backend/cuda/backend_cuda.c: the .cu kernels and cuBLAS).
 *
 * Conventions for every operation:
 *   - `BackendCtx *bc` is the backend's per-model state (a CUDA stream and cuBLAS handle; NULL-able on the CPU),
 *     created by ctx_new and passed first to every op.
 *   - every pointer is backend memory (from alloc) unless the comment says "host"; matrices row-major, "[M, N]" =
 *     M rows of N elements, contiguous unless an ld is given.
 *   - float * is fp32; `void *` activations marked "(act)" hold Backend.act_dtype (BK_F32 on the CPU; BK_BF16 on
 *     CUDA: the GEMM inputs xn1/att/xn2/hm are bf16 there, as issue 10 specified). The CPU table's act is fp32.
 *   - a weight is a BkWeight: its fp32 master rows w [N, K] (nn.Linear layout) and the backend's prepared copy
 *     prep (CPU: panels packed by pack_weights, or NULL: packed per call into the op's scratch; CUDA: NULL, the bf16
 *     copy of params_prepare is found from w).
 *   - index arrays (tokens, targets, positions, cu_seqlens, block tables) are HOST arrays: a device backend stages
 *     them itself, so the model keeps its bookkeeping on the host whatever runs the math.
 *   - ops enqueue and return nothing: shapes are the caller's contract (the model checks its inputs first);
 *     device failures are fatal with file:line (docs/conventions.md rule 3). Only ctx_new and alloc report errors.
 *   - an op a backend lacks is NULL, and the model refuses what needs it at creation (ERR_UNSUPPORTED naming it):
 *     CUDA has no Qwen3 q/k norm kernel yet (rmsnorm_heads), no contiguous-cache attention (attention, only
 *     model_forward_cached's test path) and no paged cache in the CPU layout (kv_store / paged_attention: the rollout
 *     engine's CUDA cache is the GPU issue's), and packs nothing (pack_weights: cuBLAS reads its bf16 copy).
 *   - formulas: transformers modeling_qwen2 / modeling_qwen3 / modeling_llama (v5.24) and torch.optim.AdamW; the
 *     per-op comments in backend/cpu/cpu_ops.h and cpu_decode.h are the reference semantics, which every backend
 *     matches (tests/unit/test_backend_conformance.c checks each backend present against them).
 * Not here: the layer loop and parameter layout (model/model.h), sampling (model/sample.h), collectives. */
#ifndef DAPO_BACKEND_H
#define DAPO_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

typedef enum { BK_F32 = 0, BK_BF16 = 1 } BkDtype;

typedef struct BackendCtx BackendCtx;

typedef struct {
    const float *w;          /* [N, K] fp32 master rows */
    const void  *prep;       /* backend-prepared copy, or NULL */
    BkDtype      prep_dtype; /* CPU: the dtype of prep's elements (BK_BF16: pack_weights_bf16's panels) */
} BkWeight;

/* RoPE angles of M rows: CPU tables cs/sn [M, hd/2] (rope_tables fills them); pos [M] and inv_freq [hd/2] kept for
 * backends that compute the angles inside the rotation. */
typedef struct {
    const float   *cs, *sn;
    const int32_t *pos;
    const float   *inv_freq;
} BkRope;

/* linear flags */
enum {
    BK_ACCUM = 1,   /* y += x w^T (each chain continues from the old y) instead of y = */
    BK_FAST  = 2,   /* a throughput GEMM whose rounding may depend on M (CPU: sgemm; ldy must be N). Without it the
                       product is batch-invariant: each y[m, n] one fixed-order chain over k (cpu_linear_packed) */
};

typedef struct Backend {
    const char *name;        /* "cpu", "cuda" */
    BkDtype     act_dtype;   /* dtype of the "(act)" GEMM-input activations */
    int         host_memory; /* 1: alloc returns host memory the caller may read and write directly (CPU) */

    /* ---- context and memory ---- */
    BackendCtx *(*ctx_new)(char err[ERR_LEN]);            /* NULL + err when the device is unusable */
    void  (*ctx_free)(BackendCtx *bc);                    /* NULL-safe */
    void *(*alloc)(BackendCtx *bc, size_t bytes);         /* zeroed, 64-byte aligned; NULL when out of memory */
    void  (*release)(BackendCtx *bc, void *p);            /* NULL-safe */
    void  (*to_device)(BackendCtx *bc, void *dst, const void *host_src, size_t bytes);
    void  (*to_host)(BackendCtx *bc, void *host_dst, const void *src, size_t bytes);
    void  (*copy)(BackendCtx *bc, void *dst, const void *src, size_t bytes);   /* within the backend's memory */
    void  (*zero)(BackendCtx *bc, void *p, size_t bytes);
    void  (*sync)(BackendCtx *bc);                        /* waits for every enqueued op */

    /* ---- the parameter slab's prepared copy ---- */
    /* Called once with the model's fp32 parameter slab (n floats): the backend derives its own copy of every weight
     * (CUDA: bf16, same layout, and it finds a weight's copy from its master pointer, so a BkWeight into this slab
     * needs no prep) and returns it, or NULL when it reads fp32 directly (CPU). refresh re-derives the copy after the
     * slab was written from outside an op (load, upload); adamw keeps it current itself. Both NULL-able. */
    void *(*params_prepare)(BackendCtx *bc, const float *params, long n);
    void  (*params_refresh)(BackendCtx *bc);

    /* ---- scratch sizes (floats) and prepared weights ---- */
    long  (*pack_floats)(int N, int K, int glu);          /* prep size of a [N, K] weight (glu: [2 inter, K], N = inter) */
    void  (*pack_weights)(BackendCtx *bc, float *prep, const float *w, int N, int K, int glu);
    /* bf16 storage of a plain [N, K] weight (the rollout's rollout.dtype bfloat16): pack_floats(N, K, 0) uint16
     * elements; linear on it (prep_dtype BK_BF16) is bitwise linear on the bf16-rounded fp32 weight. NULL: none. */
    void  (*pack_weights_bf16)(BackendCtx *bc, uint16_t *prep, const float *w, int N, int K);
    long  (*attention_scratch_floats)(int nk, int hd);    /* attention / attention_varlen / backward scratch */
    long  (*paged_scratch_floats)(int group, long ctx_max);   /* paged_attention scratch; group = nh / nkv */

    /* ---- forward kernels ---- */
    /* x[N, H] = emb[tok[i], :]; tok: host [N] (checked in [0, V) by the caller). */
    void (*embed)(BackendCtx *bc, float *x, const int32_t *tok, BkWeight emb, int N, int H);
    void (*rope_tables)(BackendCtx *bc, float *cs, float *sn, const int32_t *pos, int M, const float *inv_freq,
                        int half);
    void (*rope)(BackendCtx *bc, float *x, int ld, const BkRope *r, int M, int nh, int hd, int inverse);
    /* y (act) [M, D] = w * x * rstd; rstd [M] may be NULL; y may equal x when act is fp32. */
    void (*rmsnorm)(BackendCtx *bc, void *y, float *rstd, const float *x, const float *w, int M, int D, float eps);
    void (*rmsnorm_heads)(BackendCtx *bc, float *y, int ldy, float *rstd, const float *x, int ldx, const float *w,
                          int M, int nh, int hd, float eps);
    /* y [M, ldy] (=|+=) x (act) [M, K] @ w^T (+ b [N]); flags BK_ACCUM, BK_FAST; scratch: pack_floats(N, K, 0). */
    void (*linear)(BackendCtx *bc, float *y, long ldy, const void *x, BkWeight w, const float *b, int M, int N, int K,
                   int flags, float *scratch);
    /* gate|up product with SwiGLU: gu [M, 2 inter] = x @ w^T (batch-invariant), h (act) [M, inter] = silu(gate) * up.
     * scratch: pack_floats(inter, K, 1). */
    void (*linear_swiglu)(BackendCtx *bc, void *h, float *gu, const void *x, BkWeight w, int M, int inter, int K,
                          float *scratch);
    /* h (act) [M, inter] = silu(gu[:, :inter]) * gu[:, inter:] */
    void (*swiglu)(BackendCtx *bc, void *h, const float *gu, int M, int inter);
    /* causal GQA attention of packed sequences cu_seqlens (host [S + 1]); out (act), lse [N, nh] (may be NULL). */
    void (*attention_varlen)(BackendCtx *bc, void *out, float *lse, const float *q, const float *k, const float *v,
                             const int32_t *cu_seqlens, int S, int nh, int nkv, int hd, int ldq, int ldk, int ldo,
                             float scale, float *scratch);
    /* one sequence: nq query rows at positions p0 .. p0+nq-1 over nk contiguous cached keys (cpu_attention). */
    void (*attention)(BackendCtx *bc, void *out, float *lse, const float *q, const float *k, const float *v, int nq,
                      int p0, int nk, int nh, int nkv, int hd, int ldq, int ldk, int ldo, float scale, float *scratch);
    /* the paged KV cache (cpu_decode.h layouts) of kv_dtype elements (fp32, or bf16: rounded when stored, widened
     * exactly when read): store row p of one sequence; attention of R rows. table: host. */
    void (*kv_store)(BackendCtx *bc, void *kc, void *vc, BkDtype kv_dtype, const int32_t *table, int p, const float *k,
                     const float *v, int block_tokens, int nkv, int hd);
    void (*paged_attention)(BackendCtx *bc, void *out, int ldo, const float *q, int ldq, int R, const int32_t *pos,
                            const int32_t *const *table, const void *kc, const void *vc, BkDtype kv_dtype,
                            int block_tokens, int nh, int nkv, int hd, float scale, float *scratch, long ctx_max);
    /* log-prob of target (host [M], may be NULL) and entropy of softmax(logits / T), rows independent. */
    void (*logprob_entropy)(BackendCtx *bc, const float *logits, const int32_t *target, int M, int V, float T,
                            float *logp, float *ent);
    void (*add)(BackendCtx *bc, float *y, const float *x, long n);   /* y += x */

    /* ---- backward kernels (split-invariant forms: cpu_ops.h) ---- */
    void (*logprob_entropy_backward)(BackendCtx *bc, float *logits, const int32_t *target, int M, int V, float T,
                                     const float *dlogp, const float *dent);
    void (*linear_backward_varlen)(BackendCtx *bc, float *dx, float *dw, float *db, const float *dy, const void *x,
                                   BkWeight w, const int32_t *cu_seqlens, int S, int N, int K, int accum_dx);
    void (*rmsnorm_backward_varlen)(BackendCtx *bc, float *dx, float *dw, const float *dy, const float *x,
                                    const float *w, const float *rstd, const int32_t *cu_seqlens, int S, int D,
                                    int accum_dx);
    void (*rmsnorm_heads_backward)(BackendCtx *bc, float *g, int ldg, float *dw, const float *x, int ldx,
                                   const float *w, const float *rstd, int M, int nh, int hd);
    void (*swiglu_backward)(BackendCtx *bc, float *dgu, const float *dh, const float *gu, int M, int inter);
    void (*attention_backward_varlen)(BackendCtx *bc, float *dq, float *dk, float *dv, const float *dout,
                                      const float *q, const float *k, const float *v, const void *out, const float *lse,
                                      const int32_t *cu_seqlens, int S, int nh, int nkv, int hd, int ldq, int ldk,
                                      int ldo, float scale, float *scratch);
    /* demb[tok[i], :] += dx[i, :] for i = 0 .. N-1 in order (tok host). */
    void (*embed_backward)(BackendCtx *bc, float *demb, const int32_t *tok, const float *dx, int N, int H);

    /* ---- optimizer and reductions over n floats ---- */
    /* torch.optim.AdamW (model/adamw.h): p, m, v updated in place from g; step >= 1. */
    void   (*adamw)(BackendCtx *bc, float *p, const float *g, float *m, float *v, long n, float lr, float beta1,
                    float beta2, float eps, float weight_decay, long step);
    double (*sumsq)(BackendCtx *bc, const float *x, long n);   /* sum x^2, double accumulation (host result) */
    void   (*scale)(BackendCtx *bc, float *x, float s, long n);
} Backend;

extern const Backend backend_cpu;
#ifdef USE_CUDA
extern const Backend backend_cuda;
#endif

/* The backend for trainer.device ("cpu" or "cuda"; NULL means cpu, "" and anything else are refused). "cuda" needs
 * a build with the CUDA backend (the default when nvcc is found; make CUDA=1 requires it) and a visible device;
 * otherwise NULL with err naming what is missing. Never NULL for "cpu". */
const Backend *backend_select(const char *device, char err[ERR_LEN]);

/* As backend_select without looking for a device: 0 when trainer.device names a backend this build has, else the
 * same errors. For processes that check the config but compute nothing (the coordinator: its pod has no GPU). */
int backend_known(const char *device, char err[ERR_LEN]);

#endif
