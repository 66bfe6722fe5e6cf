/* common/backend/cuda/cuda_host.c: host-side logic of the CUDA backend (cuda_host.h): bf16 conversion, packing
 * index, lm_head chunk plan, device memory plan, paged KV block allocator. Plain C11, no CUDA headers.
 * Not here: device code (the .cu files beside it). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backend/cuda/cuda_host.h"

uint16_t cuda_bf16_from_f32(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(((u >> 16) & 0x8000u) | 0x7fc0u);   /* NaN */
    uint32_t lsb = (u >> 16) & 1u;
    u += 0x7fffu + lsb;        /* round to nearest even; overflows into inf correctly */
    return (uint16_t)(u >> 16);
}

float cuda_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}

void cuda_bf16_from_f32_n(uint16_t *dst, const float *src, long n) {
    for (long i = 0; i < n; i++) dst[i] = cuda_bf16_from_f32(src[i]);
}

void cuda_bf16_to_f32_n(float *dst, const uint16_t *src, long n) {
    for (long i = 0; i < n; i++) dst[i] = cuda_bf16_to_f32(src[i]);
}

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

const char *const cuda_mem_buf_names[CM_N_BUFS] = {
    "w_bf16", "master", "grad", "adam_m", "adam_v", "inv_freq", "tokens", "targets", "pos", "start", "end", "cu",
    "layer_acts", "x_final", "rstdf", "xnf", "lm_stats", "logp", "ent", "dlogp", "dent", "lm_scratch", "dres", "dA",
    "dqkv", "dbf", "dsum", "norm", "kv", "logits",
};

#define ALIGN_UP(x) (((x) + 255u) & ~(size_t)255u)

/* a * b with overflow check (both >= 0) */
static int mul_ok(size_t a, size_t b, size_t *out) {
    if (a && b > SIZE_MAX / a) return 0;
    *out = a * b;
    return 1;
}

int cuda_mem_plan(const ModelConfig *c, const CudaPlanOptions *o, CudaMemPlan *p, char err[ERR_LEN]) {
    memset(p, 0, sizeof *p);
    if (!c || !o || o->max_tokens < 1 || c->hidden < 1 || c->n_layers < 1 || c->head_dim < 2 || c->vocab < 1)
        return err_set(err, ERR_INVAL, "mem plan: bad config or max_tokens");
    if (o->kv_tokens < 0 || o->block_tokens < 0 || o->max_seqs < 0)
        return err_set(err, ERR_INVAL, "mem plan: negative kv_tokens / block_tokens / max_seqs");
    size_t N = (size_t)o->max_tokens, H = (size_t)c->hidden, I = (size_t)c->inter, nh = (size_t)c->n_heads;
    size_t qd = nh * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim, qkvd = qd + 2 * kvd;
    size_t V = (size_t)c->vocab, L = (size_t)c->n_layers, P = (size_t)model_config_param_count(c);
    int tr = o->train != 0;
    p->n_params = (long)P;
    p->n_act_sets = tr ? (int)L : 1;
    int rc = cuda_lm_plan(o->max_tokens, c->vocab, o->lm_budget_bytes > 0 ? o->lm_budget_bytes : 256L << 20, &p->lm, err);
    if (rc) return rc;
    /* one layer's activation set */
    size_t lb[11] = { N * H * 4, N * 4, N * H * 2, N * qkvd * 4, N * qd * 2, N * nh * 4, N * H * 4, N * 4, N * H * 2,
                      N * 2 * I * 4, N * I * 2 };
    size_t lo = 0;
    for (int i = 0; i < 11; i++) { p->layer_off[i] = lo; lo = ALIGN_UP(lo + lb[i]); }
    p->layer_bytes = lo;
    size_t maxA = H > qd ? H : qd;
    if (I > maxA) maxA = I;
    size_t maxB = H > 2 * I ? H : 2 * I;
    if (qkvd > maxB) maxB = qkvd;
    p->block_tokens = o->block_tokens ? o->block_tokens : 16;
    p->kv_blocks = (o->kv_tokens + p->block_tokens - 1) / p->block_tokens;
    size_t kvb = 0, acts = 0;
    if (!mul_ok((size_t)p->kv_blocks * p->block_tokens, kvd * 2 * 2 * L, &kvb) || !mul_ok(p->layer_bytes, p->n_act_sets, &acts))
        return err_set(err, ERR_TOO_BIG, "mem plan: size overflow");
    size_t b[CM_N_BUFS] = { 0 };
    b[CM_W_BF16] = P * 2;
    b[CM_MASTER] = P * 4;
    b[CM_GRAD] = tr ? P * 4 : 0;
    b[CM_ADAM_M] = tr ? P * 4 : 0;
    b[CM_ADAM_V] = tr ? P * 4 : 0;
    b[CM_INV_FREQ] = (size_t)c->head_dim / 2 * 4;
    b[CM_TOKENS] = b[CM_TARGETS] = b[CM_POS] = b[CM_START] = b[CM_END] = N * 4;
    b[CM_CU] = (N + 1) * 4;
    b[CM_LAYER_ACTS] = acts;
    b[CM_X_FINAL] = N * H * 4;
    b[CM_RSTDF] = N * 4;
    b[CM_XNF] = N * H * 2;
    b[CM_LM_STATS] = 4 * N * 4;
    b[CM_LOGP] = b[CM_ENT] = b[CM_DLOGP] = b[CM_DENT] = N * 4;
    b[CM_LM_SCRATCH] = (size_t)p->lm.scratch_bytes;
    b[CM_DRES] = tr ? N * H * 4 : 0;
    b[CM_DA] = tr ? N * maxA * 4 : 0;
    b[CM_DQKV] = tr ? N * qkvd * 4 : 0;
    b[CM_DBF] = tr ? N * maxB * 2 : 0;
    b[CM_DSUM] = tr ? N * nh * 4 : 0;
    b[CM_NORM] = 1040 * 8;
    b[CM_KV] = kvb;
    b[CM_LOGITS] = (size_t)(o->max_seqs > 0 ? o->max_seqs : 1) * V * 4;
    size_t off = 0;
    for (int i = 0; i < CM_N_BUFS; i++) {
        p->off[i] = off;
        p->bytes[i] = b[i];
        if (b[i] > SIZE_MAX / 2 - off) return err_set(err, ERR_TOO_BIG, "mem plan: %s overflows", cuda_mem_buf_names[i]);
        off = ALIGN_UP(off + b[i]);
    }
    p->total = off;
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
