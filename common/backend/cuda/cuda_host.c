/* common/backend/cuda/cuda_host.c: host-side logic of the CUDA backend (cuda_host.h): bf16 conversion, packing
 * index, lm_head chunk plan, paged KV block allocator (bf16 conversion: core/dtype.h). Plain C11, no CUDA headers.
 * Not here: device code (the .cu files beside it). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backend/cuda/cuda_host.h"

int cuda_pack_index(const int32_t *cu, int S, int N, int32_t *pos, int32_t *start, int32_t *end, int *max_len,
                    char err[ERR_LEN]) {
    if (!cu || S < 1 || N < 1) return err_set(err, ERR_INVAL, "pack: need cu_seqlens, S >= 1, N >= 1 (S %d, N %d)", S, N);
    if (cu[0] != 0 || cu[S] != N)
        return err_set(err, ERR_INVAL, "pack: cu_seqlens must start at 0 and end at N = %d (got %d .. %d)", N, cu[0], cu[S]);
    int ml = 0;
    for (int s = 0; s < S; s++) {
        if (cu[s + 1] <= cu[s])
            return err_set(err, ERR_INVAL, "pack: cu_seqlens[%d] = %d is not above cu_seqlens[%d] = %d", s + 1, cu[s + 1],
                           s, cu[s]);
        if (cu[s + 1] - cu[s] > ml) ml = cu[s + 1] - cu[s];
    }
    for (int s = 0; s < S; s++)
        for (int i = cu[s]; i < cu[s + 1]; i++) {
            if (pos) pos[i] = i - cu[s];
            if (start) start[i] = cu[s];
            if (end) end[i] = cu[s + 1];
        }
    if (max_len) *max_len = ml;
    return 0;
}

int cuda_lm_plan(int N, int V, long budget, CudaLmPlan *p, char err[ERR_LEN]) {
    memset(p, 0, sizeof *p);
    if (N < 1 || V < 1) return err_set(err, ERR_INVAL, "lm plan: N %d and V %d must be >= 1", N, V);
    const long per = 6;   /* bytes per logit: fp32 value + bf16 gradient */
    int vmin = V < 64 ? V : 64;
    if (budget < per * vmin) return err_set(err, ERR_INVAL, "lm plan: budget %ld bytes is below one row of %d columns", budget, vmin);
    int rows = N;
    if ((long)rows * vmin * per > budget) rows = (int)(budget / (vmin * per));
    long cols = budget / ((long)rows * per);
    int vc;
    if (cols >= V) vc = V;
    else {
        vc = (int)(cols / 64 * 64);
        if (vc < vmin) vc = vmin;
    }
    p->row_chunk = rows;
    p->vocab_chunk = vc;
    p->n_row_chunks = (N + rows - 1) / rows;
    p->n_vocab_chunks = (V + vc - 1) / vc;
    p->scratch_bytes = (long)rows * vc * per;
    return 0;
}

int cuda_kv_init(CudaKvPager *k, int n_blocks, int block_tokens, int max_seqs, int max_blocks_per_seq,
                 char err[ERR_LEN]) {
    memset(k, 0, sizeof *k);
    if (n_blocks < 1 || block_tokens < 1 || max_seqs < 1 || max_blocks_per_seq < 1)
        return err_set(err, ERR_INVAL, "kv pager: every size must be >= 1");
    k->n_blocks = n_blocks;
    k->block_tokens = block_tokens;
    k->max_seqs = max_seqs;
    k->max_blocks_per_seq = max_blocks_per_seq;
    k->table = xmalloc((size_t)max_seqs * max_blocks_per_seq * sizeof(int32_t));
    k->len = xmalloc((size_t)max_seqs * sizeof(int32_t));
    k->free_stack = xmalloc((size_t)n_blocks * sizeof(int32_t));
    for (long i = 0; i < (long)max_seqs * max_blocks_per_seq; i++) k->table[i] = -1;
    for (int s = 0; s < max_seqs; s++) k->len[s] = -1;
    for (int i = 0; i < n_blocks; i++) k->free_stack[i] = n_blocks - 1 - i;   /* pop gives 0, 1, 2, ... */
    k->n_free = n_blocks;
    return 0;
}

void cuda_kv_free(CudaKvPager *k) {
    if (!k) return;
    xfree(k->table);
    xfree(k->len);
    xfree(k->free_stack);
    memset(k, 0, sizeof *k);
}

int cuda_kv_seq_new(CudaKvPager *k, char err[ERR_LEN]) {
    for (int s = 0; s < k->max_seqs; s++)
        if (k->len[s] < 0) { k->len[s] = 0; return s; }
    return err_set(err, ERR_FULL, "kv pager: all %d sequence slots in use", k->max_seqs);
}

int cuda_kv_seq_grow(CudaKvPager *k, int s, int n, char err[ERR_LEN]) {
    if (s < 0 || s >= k->max_seqs || k->len[s] < 0 || n < 0)
        return err_set(err, ERR_INVAL, "kv pager: slot %d not in use or n %d < 0", s, n);
    long have = ((long)k->len[s] + k->block_tokens - 1) / k->block_tokens;
    long need = ((long)k->len[s] + n + k->block_tokens - 1) / k->block_tokens;
    if (need > k->max_blocks_per_seq)
        return err_set(err, ERR_TOO_BIG, "kv pager: sequence %d would need %ld blocks (max %d)", s, need, k->max_blocks_per_seq);
    if (need - have > k->n_free)
        return err_set(err, ERR_FULL, "kv pager: sequence %d needs %ld more blocks, %d free", s, need - have, k->n_free);
    int32_t *row = k->table + (long)s * k->max_blocks_per_seq;
    for (long b = have; b < need; b++) row[b] = k->free_stack[--k->n_free];
    k->len[s] += n;
    return 0;
}

void cuda_kv_seq_release(CudaKvPager *k, int s) {
    if (s < 0 || s >= k->max_seqs || k->len[s] < 0) return;
    int32_t *row = k->table + (long)s * k->max_blocks_per_seq;
    for (int b = k->max_blocks_per_seq - 1; b >= 0; b--)   /* pushed in reverse: the next grow reuses in order */
        if (row[b] >= 0) { k->free_stack[k->n_free++] = row[b]; row[b] = -1; }
    k->len[s] = -1;
}
