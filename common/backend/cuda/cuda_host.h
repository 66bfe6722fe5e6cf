/* common/backend/cuda/cuda_host.h: the host-side logic of the CUDA backend, plain C11 (compiled in every build,
 * CUDA or not, and unit-tested on the CPU by tests/unit/test_cuda_host.c):
 *   - packing: per-token position / sequence start / sequence end from cu_seqlens (what the varlen attention
 *     kernels index by), validated;
 *   - the lm_head chunk plan: how many vocabulary columns (and rows) of fp32 logits exist at once, so a
 *     [tokens, V] fp32 logits tensor never does;
 *   - the paged KV-cache block allocator (block tables per sequence, a free stack), as vLLM's BlockSpaceManager.
 * Not here: anything that touches a device (cuda_ops.h, backend_cuda.c; CUDA builds only). */
#ifndef DAPO_CUDA_HOST_H
#define DAPO_CUDA_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "backend/cuda/cuda_types.h"
#include "core/dtype.h"   /* bf16 <-> fp32 (dtype_bf16_from_f32 ...), used with these */
#include "core/err.h"

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
