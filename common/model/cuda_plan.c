/* common/model/cuda_plan.c: the CUDA model's device memory plan (cuda_plan.h). */
#include "model/cuda_plan.h"

#include <string.h>

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

