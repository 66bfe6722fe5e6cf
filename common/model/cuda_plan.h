/* common/model/cuda_plan.h: the device memory plan of the CUDA model (model/cuda_model.h): every buffer's byte
 * offset in ONE device slab (STYLE.md rule 4) for parameters (bf16 copy + fp32 master), gradients, Adam m / v,
 * activations, lm_head scratch and the paged KV cache, and the total to check against the free device memory.
 * Plain C11, compiled in every build and unit-tested on the CPU (tests/unit/test_cuda_host.c).
 * Not here: device code (backend/cuda), the lm_head chunk plan and KV pager it uses (backend/cuda/cuda_host.h). */
#ifndef DAPO_CUDA_PLAN_H
#define DAPO_CUDA_PLAN_H

#include <stddef.h>

#include "backend/cuda/cuda_host.h"
#include "core/err.h"
#include "model/model_config.h"

/* ---- device memory plan -------------------------------------------------------------------------------- */
/* Buffers of the CUDA model, in slab order. P = n_params (model_config_param_count; the CPU slab layout),
 * N = max_tokens, L layers; per layer (train: L sets; inference: 1 set):
 *   x_in f32[N,H] rstd1 f32[N] xn1 bf16[N,H] qkv f32[N,qkvd] att bf16[N,qd] lse f32[N,nh] x_mid f32[N,H]
 *   rstd2 f32[N] xn2 bf16[N,H] gu f32[N,2I] hm bf16[N,I]. */
enum {
    CM_W_BF16 = 0,   /* bf16 [P]     weights the kernels read (same layout as the CPU fp32 slab) */
    CM_MASTER,       /* f32  [P]     master weights */
    CM_GRAD,         /* f32  [P]     gradients (train) */
    CM_ADAM_M,       /* f32  [P]     (train) */
    CM_ADAM_V,       /* f32  [P]     (train) */
    CM_INV_FREQ,     /* f32  [hd/2] */
    CM_TOKENS,       /* i32  [N] */
    CM_TARGETS,      /* i32  [N] */
    CM_POS,          /* i32  [N] */
    CM_START,        /* i32  [N] */
    CM_END,          /* i32  [N] */
    CM_CU,           /* i32  [N+1] cu_seqlens (decode: per-row sequence index) */
    CM_LAYER_ACTS,   /* per-layer activations, (train ? L : 1) sets of the layout above */
    CM_X_FINAL,      /* f32  [N,H] */
    CM_RSTDF,        /* f32  [N] */
    CM_XNF,          /* bf16 [N,H] */
    CM_LM_STATS,     /* f32  [4,N] running max, sum exp, sum exp*z, target z */
    CM_LOGP,         /* f32  [N] */
    CM_ENT,          /* f32  [N] */
    CM_DLOGP,        /* f32  [N] */
    CM_DENT,         /* f32  [N] */
    CM_LM_SCRATCH,   /* CudaLmPlan.scratch_bytes */
    CM_DRES,         /* f32  [N,H] (train) */
    CM_DA,           /* f32  [N,max(H,qd,I)] (train) */
    CM_DQKV,         /* f32  [N,qkvd] (train) */
    CM_DBF,          /* bf16 [N,max(H,2I,qkvd)] (train) */
    CM_DSUM,         /* f32  [N,nh] attention backward D = rowsum(dout * out) (train) */
    CM_NORM,         /* f64  [1040] grad-norm partial sums [0, 1024) and result [1024] */
    CM_KV,           /* bf16 [L, 2, n_blocks, BS, kvd] paged KV cache (generation) */
    CM_LOGITS,       /* f32  [max_seqs, V] last-row logits of a cached forward (generation) */
    CM_N_BUFS
};
typedef struct {
    size_t off[CM_N_BUFS];    /* byte offsets into the slab, each 256-byte aligned */
    size_t bytes[CM_N_BUFS];  /* bytes of each buffer (0: absent) */
    size_t layer_bytes;       /* bytes of one layer's activation set */
    size_t layer_off[11];     /* offsets of the 11 per-layer buffers within a set (order above) */
    size_t total;             /* slab bytes */
    long   n_params;
    int    n_act_sets;        /* L (train) or 1 */
    CudaLmPlan lm;
    long   kv_blocks;         /* blocks in the KV cache */
    int    block_tokens;
} CudaMemPlan;
typedef struct {
    int  max_tokens;          /* N >= 1 */
    int  train;               /* 1: gradients, Adam state, per-layer activations, backward scratch */
    long lm_budget_bytes;     /* lm_head scratch budget; 0: 256 MiB */
    long kv_tokens;           /* KV-cache positions (all sequences); 0: no cache */
    int  block_tokens;        /* 0: 16 */
    int  max_seqs;            /* rows of CM_LOGITS; 0: 1 */
} CudaPlanOptions;
/* Fills p from the model config and options. Errors: ERR_INVAL (bad options), ERR_TOO_BIG (size overflow). */
int cuda_mem_plan(const ModelConfig *c, const CudaPlanOptions *o, CudaMemPlan *p, char err[ERR_LEN]);
extern const char *const cuda_mem_buf_names[CM_N_BUFS];

#endif
