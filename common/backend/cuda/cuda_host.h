/* common/backend/cuda/cuda_host.h: the host-side logic of the CUDA backend, plain C11 (compiled in every build,
 * CUDA or not, and unit-tested on the CPU by tests/unit/test_cuda_host.c):
 *   - bf16 <-> fp32 conversion (round to nearest even, NaN kept quiet; torch's Tensor.to(torch.bfloat16));
 *   - packing: per-token position / sequence start / sequence end from cu_seqlens (what the varlen attention
 *     kernels index by), validated;
 *   - the lm_head chunk plan: how many vocabulary columns (and rows) of fp32 logits exist at once, so a
 *     [tokens, V] fp32 logits tensor never does;
 *   - the device memory plan of the CUDA model: every buffer's byte offset in ONE device slab (STYLE.md rule 4)
 *     for parameters (bf16 copy + fp32 master), gradients, Adam m / v, activations, lm_head scratch and the
 *     paged KV cache, and the total to check against the free device memory;
 *   - the paged KV-cache block allocator (block tables per sequence, a free stack), as vLLM's BlockSpaceManager.
 * Not here: anything that touches a device (cuda_model.h, cuda_ops.h; CUDA builds only). */
#ifndef DAPO_CUDA_HOST_H
#define DAPO_CUDA_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "backend/cuda/cuda_types.h"
#include "core/err.h"
#include "model/model_config.h"

/* ---- bf16 ---------------------------------------------------------------------------------------------- */
/* fp32 -> bf16 bits: round to nearest, ties to even (torch / __float2bfloat16_rn); NaN -> a quiet NaN with the
 * sign kept (0x7fc0 | sign); +-inf and values that round past the largest bf16 -> +-inf. */
uint16_t cuda_bf16_from_f32(float x);
/* bf16 bits -> fp32 (exact). */
float    cuda_bf16_to_f32(uint16_t h);
/* Arrays of n elements (dst, src may not overlap). */
void     cuda_bf16_from_f32_n(uint16_t *dst, const float *src, long n);
void     cuda_bf16_to_f32_n(float *dst, const uint16_t *src, long n);

/* ---- packing ------------------------------------------------------------------------------------------- */
/* From cu_seqlens[S + 1] (0 = cu[0] < cu[1] < ... < cu[S] = N; every sequence >= 1 token) writes, for each
 * packed token i in [0, N): pos[i] = i - cu[s] (RoPE position), start[i] = cu[s], end[i] = cu[s + 1] (the
 * causal attention window of a query row is keys [start, i], of a key row queries [i, end)). Any output may be
 * NULL. *max_len (may be NULL) gets the longest sequence. Errors: ERR_INVAL naming the bad entry. */
int cuda_pack_index(const int32_t *cu_seqlens, int S, int N, int32_t *pos, int32_t *start, int32_t *end,
                    int *max_len, char err[ERR_LEN]);

/* ---- lm_head chunk plan -------------------------------------------------------------------------------- */
typedef struct {
    int  row_chunk;      /* rows of logits per chunk (<= N) */
    int  vocab_chunk;    /* vocabulary columns per chunk (multiple of 64 unless it is all of V) */
    int  n_row_chunks, n_vocab_chunks;
    long scratch_bytes;  /* row_chunk * vocab_chunk * (4 fp32 logits + 2 bf16 gradient) */
} CudaLmPlan;
/* Chooses chunks for N rows x V vocabulary so that the scratch (fp32 logits + their bf16 gradient) fits
 * budget_bytes: all rows at once with the widest vocabulary chunk that fits (>= 64 columns), else fewer rows.
 * Formula use: the forward keeps per-row online softmax statistics across vocabulary chunks (max, sum exp,
 * sum exp * z, target z: Milakov & Gimelshein 2018 online softmax); backward recomputes each chunk.
 * Errors: ERR_INVAL for N, V < 1, or a budget below one 64-column row chunk of 1 row. */
int cuda_lm_plan(int N, int V, long budget_bytes, CudaLmPlan *p, char err[ERR_LEN]);

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

/* ---- paged KV-cache block allocator -------------------------------------------------------------------- */
typedef struct {
    int      n_blocks, block_tokens, max_seqs, max_blocks_per_seq;
    int32_t *table;       /* [max_seqs, max_blocks_per_seq] block ids (-1 unused); uploaded as is */
    int32_t *len;         /* [max_seqs] tokens held per sequence; -1: slot free */
    int32_t *free_stack;  /* [n_blocks] */
    int      n_free;
} CudaKvPager;
/* Owns its arrays (xmalloc); free with cuda_kv_free. Blocks are handed out lowest id first. */
int  cuda_kv_init(CudaKvPager *k, int n_blocks, int block_tokens, int max_seqs, int max_blocks_per_seq,
                  char err[ERR_LEN]);
void cuda_kv_free(CudaKvPager *k);
/* A free sequence slot (len 0, no blocks), or ERR_FULL. */
int  cuda_kv_seq_new(CudaKvPager *k, char err[ERR_LEN]);
/* Grows sequence s by n tokens, taking blocks as needed; all-or-nothing: ERR_FULL (no free blocks, nothing
 * changed), ERR_TOO_BIG (past max_blocks_per_seq), ERR_INVAL (bad slot). */
int  cuda_kv_seq_grow(CudaKvPager *k, int s, int n, char err[ERR_LEN]);
/* Returns the sequence's blocks to the free stack and frees its slot (no-op for a free slot). */
void cuda_kv_seq_release(CudaKvPager *k, int s);
/* Block id and row within it of position p of sequence s (p < len), via the table. */
static inline int32_t cuda_kv_block_of(const CudaKvPager *k, int s, int p) {
    return k->table[(long)s * k->max_blocks_per_seq + p / k->block_tokens];
}

#endif
