/* common/model/cuda_model.c: the CUDA model path (cuda_model.h), orchestration in C11: upload, the slab
 * carve from cuda_mem_plan, the layer loop of forward / backward (mirroring model/forward.c step for step),
 * the chunked lm_head, AdamW, norms, collectives, and the paged generation step. Kernels are the .cu files
 * (cuda_ops.h); GEMMs are cuBLAS. CUDA builds only: without USE_CUDA this file compiles to nothing.
 * Not here: Qwen3 q/k norm, scheduling of generation (the caller), kernels. */
#ifdef USE_CUDA
#include <math.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "model/cuda_model.h"
#include "backend/cuda/cuda_ops.h"
#include "core/log.h"

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

struct CudaModel {
    ModelConfig    cfg;
    CudaPlanOptions opt;
    CudaMemPlan    plan;
    char          *slab;            /* device */
    cudaStream_t   st;
    cublasHandle_t blas;
    long           P;
    long           adam_step;
    /* parameter offsets (floats from the slab start) copied from the CPU model */
    long           off_embed, off_norm, off_lm;
    long          (*off_layer)[MODEL_LAYER_SLOTS];   /* [L][slot] (-1: absent) */
    /* host staging (no allocation per call) */
    int32_t       *h_i32;          /* [5, N + 1] tokens, targets, pos, start, end */
    int            stats_valid;    /* the forward's lm stats are still those of the batch (one row chunk) */
    /* generation */
    void          *samp_scratch;   /* [max_seqs, 2V] floats */
    int32_t       *d_tables;       /* [max_seqs * max_blocks] */
    int32_t       *d_last;         /* [max_seqs] */
    int32_t       *d_tok;
    float         *d_logp;
    uint64_t      *d_group;
    uint32_t      *d_sample, *d_pos;
    long           tables_cap;
};

enum { LW_LN1, LW_WQKV, LW_BQKV, LW_WO, LW_QN, LW_KN, LW_LN2, LW_WGU, LW_WD };
enum { LA_X_IN, LA_RSTD1, LA_XN1, LA_QKV, LA_ATT, LA_LSE, LA_X_MID, LA_RSTD2, LA_XN2, LA_GU, LA_HM };

static void *B(CudaModel *cm, int buf) { return cm->plan.bytes[buf] ? cm->slab + cm->plan.off[buf] : NULL; }
static float *F(CudaModel *cm, int buf) { return (float *)B(cm, buf); }
static void *LA(CudaModel *cm, int l, int slot) {
    int set = cm->plan.n_act_sets > 1 ? l : 0;
    return cm->slab + cm->plan.off[CM_LAYER_ACTS] + (size_t)set * cm->plan.layer_bytes + cm->plan.layer_off[slot];
}
static const uint16_t *WB(CudaModel *cm, long off) { return (const uint16_t *)B(cm, CM_W_BF16) + off; }
static float *WM(CudaModel *cm, long off) { return off < 0 ? NULL : F(cm, CM_MASTER) + off; }
static float *WG(CudaModel *cm, long off) { return off < 0 ? NULL : F(cm, CM_GRAD) + off; }

void *cuda_model_buf(CudaModel *cm, int buf) { return buf >= 0 && buf < CM_N_BUFS ? B(cm, buf) : NULL; }
const CudaMemPlan *cuda_model_plan(const CudaModel *cm) { return &cm->plan; }
void cuda_model_sync(CudaModel *cm) { CK(cudaStreamSynchronize(cm->st)); }

CudaModel *cuda_model_new(const Model *m, const CudaPlanOptions *o, char err[ERR_LEN]) {
    if (!m || !o) { err_set(err, ERR_INVAL, "cuda_model_new: NULL model or options"); return NULL; }
    if (m->cfg.qk_norm) { err_set(err, ERR_UNSUPPORTED, "cuda model: q/k norm (Qwen3) is not implemented on CUDA yet"); return NULL; }
    if (m->cfg.head_dim > 256) { err_set(err, ERR_UNSUPPORTED, "cuda model: head_dim %d > 256", m->cfg.head_dim); return NULL; }
    CudaModel *cm = xcalloc(1, sizeof *cm);
    cm->cfg = m->cfg;
    cm->opt = *o;
    if (cuda_mem_plan(&m->cfg, o, &cm->plan, err)) { xfree(cm); return NULL; }
    cm->P = m->n_params;
    if (cm->plan.n_params != cm->P) {
        err_set(err, ERR_INVAL, "cuda model: plan has %ld parameters, model %ld", cm->plan.n_params, cm->P);
        xfree(cm);
        return NULL;
    }
    size_t freeb = 0, totalb = 0;
    CK(cudaMemGetInfo(&freeb, &totalb));
    if (cm->plan.total > freeb) {
        err_set(err, ERR_NOMEM, "cuda model: needs %.2f GiB of device memory, %.2f GiB free", cm->plan.total / 1073741824.0,
                freeb / 1073741824.0);
        xfree(cm);
        return NULL;
    }
    CK(cudaMalloc((void **)&cm->slab, cm->plan.total));
    log_info("cuda model: slab %.2f GiB (params bf16+fp32 %.2f GiB, activations %.2f GiB, lm scratch %.1f MiB, kv %.2f GiB); "
             "%.2f GiB free before", cm->plan.total / 1073741824.0,
             (cm->plan.bytes[CM_W_BF16] + cm->plan.bytes[CM_MASTER]) / 1073741824.0,
             cm->plan.bytes[CM_LAYER_ACTS] / 1073741824.0, cm->plan.bytes[CM_LM_SCRATCH] / 1048576.0,
             cm->plan.bytes[CM_KV] / 1073741824.0, freeb / 1073741824.0);
    CK(cudaStreamCreateWithFlags(&cm->st, cudaStreamNonBlocking));
    CB(cublasCreate(&cm->blas));
    CB(cublasSetStream(cm->blas, cm->st));
    /* offsets */
    const ModelWeights *w = &m->w;
    cm->off_embed = w->embed - m->params;
    cm->off_norm = w->norm - m->params;
    cm->off_lm = w->lm_head - m->params;
    int L = m->cfg.n_layers;
    cm->off_layer = xmalloc((size_t)L * sizeof *cm->off_layer);
    for (int l = 0; l < L; l++) {
        float *const *slot = (float *const *)&w->layer[l];
        for (int s = 0; s < MODEL_LAYER_SLOTS; s++) cm->off_layer[l][s] = slot[s] ? slot[s] - m->params : -1;
    }
    int N = o->max_tokens;
    cm->h_i32 = xmalloc((size_t)5 * (N + 1) * sizeof(int32_t));
    /* parameters, Adam state */
    CK(cudaMemcpyAsync(B(cm, CM_MASTER), m->params, (size_t)cm->P * 4, cudaMemcpyHostToDevice, cm->st));
    cuda_cast_f32_bf16(B(cm, CM_W_BF16), F(cm, CM_MASTER), cm->P, cm->st);
    CK(cudaMemcpyAsync(B(cm, CM_INV_FREQ), m->inv_freq, cm->plan.bytes[CM_INV_FREQ], cudaMemcpyHostToDevice, cm->st));
    if (o->train) {
        CK(cudaMemsetAsync(B(cm, CM_GRAD), 0, cm->plan.bytes[CM_GRAD], cm->st));
        if (m->adam_m && m->adam_v) {
            CK(cudaMemcpyAsync(B(cm, CM_ADAM_M), m->adam_m, (size_t)cm->P * 4, cudaMemcpyHostToDevice, cm->st));
            CK(cudaMemcpyAsync(B(cm, CM_ADAM_V), m->adam_v, (size_t)cm->P * 4, cudaMemcpyHostToDevice, cm->st));
            cm->adam_step = m->adam_step;
        } else {
            CK(cudaMemsetAsync(B(cm, CM_ADAM_M), 0, cm->plan.bytes[CM_ADAM_M], cm->st));
            CK(cudaMemsetAsync(B(cm, CM_ADAM_V), 0, cm->plan.bytes[CM_ADAM_V], cm->st));
        }
    }
    if (cm->plan.bytes[CM_KV]) CK(cudaMemsetAsync(B(cm, CM_KV), 0, cm->plan.bytes[CM_KV], cm->st));
    int S = o->max_seqs > 0 ? o->max_seqs : 1;
    CK(cudaMalloc(&cm->samp_scratch, (size_t)S * 2 * m->cfg.vocab * 4));
    CK(cudaMalloc((void **)&cm->d_last, (size_t)S * 4));
    CK(cudaMalloc((void **)&cm->d_tok, (size_t)S * 4));
    CK(cudaMalloc((void **)&cm->d_logp, (size_t)S * 4));
    CK(cudaMalloc((void **)&cm->d_group, (size_t)S * 8));
    CK(cudaMalloc((void **)&cm->d_sample, (size_t)S * 4));
    CK(cudaMalloc((void **)&cm->d_pos, (size_t)S * 4));
    CK(cudaStreamSynchronize(cm->st));
    return cm;
}

void cuda_model_free(CudaModel *cm) {
    if (!cm) return;
    if (cm->st) cudaStreamSynchronize(cm->st);
    cudaFree(cm->slab);
    cudaFree(cm->samp_scratch);
    cudaFree(cm->d_tables);
    cudaFree(cm->d_last);
    cudaFree(cm->d_tok);
    cudaFree(cm->d_logp);
    cudaFree(cm->d_group);
    cudaFree(cm->d_sample);
    cudaFree(cm->d_pos);
    if (cm->blas) cublasDestroy(cm->blas);
    if (cm->st) cudaStreamDestroy(cm->st);
    xfree(cm->off_layer);
    xfree(cm->h_i32);
    xfree(cm);
}

/* model/forward.c batch_check + the packing index, staged into h_i32 and uploaded */
static int batch_upload(CudaModel *cm, const ModelBatch *b, char err[ERR_LEN]) {
    if (!b || !b->tokens || !b->cu_seqlens) return err_set(err, ERR_INVAL, "batch: tokens and cu_seqlens are required");
    int N = b->n_tokens, V = cm->cfg.vocab;
    if (N < 1 || N > cm->opt.max_tokens)
        return err_set(err, ERR_INVAL, "batch: n_tokens %d outside [1, max_tokens %d]", N, cm->opt.max_tokens);
    if (b->n_seqs < 1 || b->n_seqs > N) return err_set(err, ERR_INVAL, "batch: n_seqs %d outside [1, n_tokens]", b->n_seqs);
    if (!(b->temperature > 0) || !isfinite(b->temperature))
        return err_set(err, ERR_INVAL, "batch: temperature %g must be > 0", (double)b->temperature);
    int32_t *tok = cm->h_i32, *tgt = tok + (N + 1), *pos = tgt + (N + 1), *st = pos + (N + 1), *en = st + (N + 1);
    int rc = cuda_pack_index(b->cu_seqlens, b->n_seqs, N, pos, st, en, NULL, err);
    if (rc) return rc;
    for (int i = 0; i < N; i++) {
        if (b->tokens[i] < 0 || b->tokens[i] >= V)
            return err_set(err, ERR_INVAL, "batch: tokens[%d] = %d outside the vocabulary [0, %d)", i, b->tokens[i], V);
        int t = b->targets ? b->targets[i] : -1;
        if (t < -1 || t >= V) return err_set(err, ERR_INVAL, "batch: targets[%d] = %d outside [-1, %d)", i, t, V);
        tok[i] = b->tokens[i];
        tgt[i] = t;
    }
    const int bufs[5] = { CM_TOKENS, CM_TARGETS, CM_POS, CM_START, CM_END };
    for (int k = 0; k < 5; k++)
        CK(cudaMemcpyAsync(B(cm, bufs[k]), cm->h_i32 + (long)k * (N + 1), (size_t)N * 4, cudaMemcpyHostToDevice, cm->st));
    return 0;
}

/* One layer's forward on N rows. x: the layer input (fp32 [N, H]); out: where x + attn + mlp goes (may be x). */
static void layer_fwd(CudaModel *cm, int l, int N, float *x, float *x_mid, float *out, int attn_paged,
                      const CudaKvPager *pg, const int32_t *d_seq) {
    const ModelConfig *c = &cm->cfg;
    int H = c->hidden, I = c->inter, hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads;
    int qd = nh * hd, kvd = nkv * hd, qkvd = qd + 2 * kvd;
    float scale = 1.0f / sqrtf((float)hd);
    const long *o = cm->off_layer[l];
    uint16_t *xn1 = LA(cm, l, LA_XN1), *att = LA(cm, l, LA_ATT), *xn2 = LA(cm, l, LA_XN2), *hm = LA(cm, l, LA_HM);
    float *qkv = LA(cm, l, LA_QKV), *gu = LA(cm, l, LA_GU);
    const int32_t *pos = B(cm, CM_POS);
    cuda_rmsnorm_fwd(xn1, LA(cm, l, LA_RSTD1), x, WM(cm, o[LW_LN1]), N, H, c->rms_eps, cm->st);
    cuda_gemm_fwd(cm->blas, qkv, xn1, WB(cm, o[LW_WQKV]), N, qkvd, H, 0.0f);
    if (o[LW_BQKV] >= 0) cuda_bias_add(qkv, WM(cm, o[LW_BQKV]), N, qkvd, cm->st);
    cuda_rope(qkv, qkvd, pos, F(cm, CM_INV_FREQ), N, nh, hd, 0, cm->st);
    cuda_rope(qkv + qd, qkvd, pos, F(cm, CM_INV_FREQ), N, nkv, hd, 0, cm->st);
    if (attn_paged) {
        uint16_t *kv = B(cm, CM_KV);
        size_t per = (size_t)cm->plan.kv_blocks * cm->plan.block_tokens * kvd;
        uint16_t *kc = kv + (size_t)l * 2 * per, *vc = kc + per;
        cuda_kv_store(kc, vc, qkv, qkvd, qd, pos, d_seq, cm->d_tables, pg->max_blocks_per_seq, N, pg->block_tokens, kvd,
                      cm->st);
        cuda_paged_attention(att, qkv, qkvd, pos, d_seq, cm->d_tables, pg->max_blocks_per_seq, kc, vc, N,
                             pg->block_tokens, nh, nkv, hd, scale, cm->st);
    } else {
        cuda_attention_fwd(att, LA(cm, l, LA_LSE), qkv, qkvd, B(cm, CM_START), N, nh, nkv, hd, scale, cm->st);
    }
    if (x_mid != x) CK(cudaMemcpyAsync(x_mid, x, (size_t)N * H * 4, cudaMemcpyDeviceToDevice, cm->st));
    cuda_gemm_fwd(cm->blas, x_mid, att, WB(cm, o[LW_WO]), N, H, qd, 1.0f);
    cuda_rmsnorm_fwd(xn2, LA(cm, l, LA_RSTD2), x_mid, WM(cm, o[LW_LN2]), N, H, c->rms_eps, cm->st);
    cuda_gemm_fwd(cm->blas, gu, xn2, WB(cm, o[LW_WGU]), N, 2 * I, H, 0.0f);
    cuda_swiglu_fwd(hm, gu, N, I, cm->st);
    if (out != x_mid) CK(cudaMemcpyAsync(out, x_mid, (size_t)N * H * 4, cudaMemcpyDeviceToDevice, cm->st));
    cuda_gemm_fwd(cm->blas, out, hm, WB(cm, o[LW_WD]), N, H, I, 1.0f);
}

/* logits of rows [r0, r0 + n) and vocabulary [v0, v0 + vc) into the lm scratch, fp32, row stride vc */
static float *lm_chunk(CudaModel *cm, int r0, int n, int v0, int vc) {
    int H = cm->cfg.hidden;
    float *lg = B(cm, CM_LM_SCRATCH);
    cuda_gemm_fwd(cm->blas, lg, (const uint16_t *)B(cm, CM_XNF) + (long)r0 * H, WB(cm, cm->off_lm + (long)v0 * H), n, vc, H,
                  0.0f);
    return lg;
}
static void lm_stats(CudaModel *cm, int r0, int n, float T) {
    const CudaLmPlan *lp = &cm->plan.lm;
    const int32_t *tgt = (const int32_t *)B(cm, CM_TARGETS) + r0;
    float *stats = F(cm, CM_LM_STATS);
    cuda_lm_stats_init(stats, n, cm->st);
    for (int v0 = 0; v0 < cm->cfg.vocab; v0 += lp->vocab_chunk) {
        int vc = cm->cfg.vocab - v0 < lp->vocab_chunk ? cm->cfg.vocab - v0 : lp->vocab_chunk;
        float *lg = lm_chunk(cm, r0, n, v0, vc);
        cuda_lm_stats_update(stats, lg, vc, tgt, n, vc, v0, T, cm->st);
    }
}

int cuda_model_forward(CudaModel *cm, const ModelBatch *b, float *logp, float *ent, char err[ERR_LEN]) {
    int rc = batch_upload(cm, b, err);
    if (rc) return rc;
    const ModelConfig *c = &cm->cfg;
    int N = b->n_tokens, H = c->hidden, L = c->n_layers;
    int train = cm->opt.train;
    float *x0 = LA(cm, 0, LA_X_IN);
    cuda_embedding_fwd(x0, B(cm, CM_TOKENS), WB(cm, cm->off_embed), N, H, cm->st);
    for (int l = 0; l < L; l++) {
        float *x = LA(cm, l, LA_X_IN);
        float *x_mid = train ? (float *)LA(cm, l, LA_X_MID) : x;
        float *out = train ? (l + 1 < L ? (float *)LA(cm, l + 1, LA_X_IN) : F(cm, CM_X_FINAL)) : x_mid;
        layer_fwd(cm, l, N, x, x_mid, out, 0, NULL, NULL);
    }
    float *xf = train ? F(cm, CM_X_FINAL) : (float *)LA(cm, 0, LA_X_IN);
    if (!train) CK(cudaMemcpyAsync(F(cm, CM_X_FINAL), xf, (size_t)N * H * 4, cudaMemcpyDeviceToDevice, cm->st));
    cuda_rmsnorm_fwd(B(cm, CM_XNF), F(cm, CM_RSTDF), F(cm, CM_X_FINAL), WM(cm, cm->off_norm), N, H, c->rms_eps, cm->st);
    const CudaLmPlan *lp = &cm->plan.lm;
    for (int r0 = 0; r0 < N; r0 += lp->row_chunk) {
        int n = N - r0 < lp->row_chunk ? N - r0 : lp->row_chunk;
        lm_stats(cm, r0, n, b->temperature);
        cuda_lm_stats_finish(F(cm, CM_LOGP) + r0, F(cm, CM_ENT) + r0, F(cm, CM_LM_STATS),
                             (const int32_t *)B(cm, CM_TARGETS) + r0, n, cm->st);
    }
    cm->stats_valid = N <= lp->row_chunk;
    if (logp) CK(cudaMemcpyAsync(logp, B(cm, CM_LOGP), (size_t)N * 4, cudaMemcpyDeviceToHost, cm->st));
    if (ent) CK(cudaMemcpyAsync(ent, B(cm, CM_ENT), (size_t)N * 4, cudaMemcpyDeviceToHost, cm->st));
    CK(cudaStreamSynchronize(cm->st));
    return 0;
}

int cuda_model_backward(CudaModel *cm, const ModelBatch *b, const float *dlogp, const float *dent, char err[ERR_LEN]) {
    if (!cm->opt.train) return err_set(err, ERR_INVAL, "cuda_model_backward: created without train=1");
    int keep = cm->stats_valid;
    int rc = batch_upload(cm, b, err);
    if (rc) return rc;
    const ModelConfig *c = &cm->cfg;
    int N = b->n_tokens, H = c->hidden, I = c->inter, hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads, L = c->n_layers;
    int qd = nh * hd, kvd = nkv * hd, qkvd = qd + 2 * kvd, V = c->vocab;
    float scale = 1.0f / sqrtf((float)hd);
    if (dlogp) CK(cudaMemcpyAsync(B(cm, CM_DLOGP), dlogp, (size_t)N * 4, cudaMemcpyHostToDevice, cm->st));
    if (dent) CK(cudaMemcpyAsync(B(cm, CM_DENT), dent, (size_t)N * 4, cudaMemcpyHostToDevice, cm->st));
    float *dA = F(cm, CM_DA), *dres = F(cm, CM_DRES), *dqkv = F(cm, CM_DQKV);
    uint16_t *dbf = B(cm, CM_DBF);
    const uint16_t *xnf = B(cm, CM_XNF);
    /* lm_head: dA[N, H] = d xnf, lm_head grads */
    const CudaLmPlan *lp = &cm->plan.lm;
    uint16_t *dl = (uint16_t *)((char *)B(cm, CM_LM_SCRATCH) + (size_t)lp->row_chunk * lp->vocab_chunk * 4);
    for (int r0 = 0; r0 < N; r0 += lp->row_chunk) {
        int n = N - r0 < lp->row_chunk ? N - r0 : lp->row_chunk;
        if (!keep) lm_stats(cm, r0, n, b->temperature);
        for (int v0 = 0; v0 < V; v0 += lp->vocab_chunk) {
            int vc = V - v0 < lp->vocab_chunk ? V - v0 : lp->vocab_chunk;
            float *lg = lm_chunk(cm, r0, n, v0, vc);
            cuda_lm_grad(dl, lg, vc, F(cm, CM_LM_STATS), (const int32_t *)B(cm, CM_TARGETS) + r0,
                         dlogp ? F(cm, CM_DLOGP) + r0 : NULL, dent ? F(cm, CM_DENT) + r0 : NULL, n, vc, v0,
                         b->temperature, cm->st);
            cuda_gemm_dx(cm->blas, dA + (long)r0 * H, dl, WB(cm, cm->off_lm + (long)v0 * H), n, vc, H, v0 ? 1.0f : 0.0f);
            cuda_gemm_dw(cm->blas, WG(cm, cm->off_lm + (long)v0 * H), dl, xnf + (long)r0 * H, n, vc, H);
        }
    }
    cm->stats_valid = 0;
    cuda_rmsnorm_bwd(dres, WG(cm, cm->off_norm), dA, F(cm, CM_X_FINAL), WM(cm, cm->off_norm), F(cm, CM_RSTDF), N, H, 0,
                     cm->st);
    for (int l = L - 1; l >= 0; l--) {
        const long *o = cm->off_layer[l];
        /* MLP: out = x_mid + hm Wd^T */
        cuda_cast_f32_bf16(dbf, dres, (long)N * H, cm->st);
        cuda_gemm_dx(cm->blas, dA, dbf, WB(cm, o[LW_WD]), N, H, I, 0.0f);
        cuda_gemm_dw(cm->blas, WG(cm, o[LW_WD]), dbf, LA(cm, l, LA_HM), N, H, I);
        cuda_swiglu_bwd(dbf, dA, LA(cm, l, LA_GU), N, I, cm->st);
        cuda_gemm_dx(cm->blas, dA, dbf, WB(cm, o[LW_WGU]), N, 2 * I, H, 0.0f);
        cuda_gemm_dw(cm->blas, WG(cm, o[LW_WGU]), dbf, LA(cm, l, LA_XN2), N, 2 * I, H);
        cuda_rmsnorm_bwd(dres, WG(cm, o[LW_LN2]), dA, LA(cm, l, LA_X_MID), WM(cm, o[LW_LN2]), LA(cm, l, LA_RSTD2), N, H, 1,
                         cm->st);
        /* attention: x_mid = x_in + att Wo^T */
        cuda_cast_f32_bf16(dbf, dres, (long)N * H, cm->st);
        cuda_gemm_dx(cm->blas, dA, dbf, WB(cm, o[LW_WO]), N, H, qd, 0.0f);
        cuda_gemm_dw(cm->blas, WG(cm, o[LW_WO]), dbf, LA(cm, l, LA_ATT), N, H, qd);
        cuda_attention_bwd(dqkv, F(cm, CM_DSUM), dA, LA(cm, l, LA_QKV), qkvd, LA(cm, l, LA_ATT), LA(cm, l, LA_LSE),
                           B(cm, CM_START), B(cm, CM_END), N, nh, nkv, hd, scale, cm->st);
        cuda_rope(dqkv, qkvd, B(cm, CM_POS), F(cm, CM_INV_FREQ), N, nh, hd, 1, cm->st);
        cuda_rope(dqkv + qd, qkvd, B(cm, CM_POS), F(cm, CM_INV_FREQ), N, nkv, hd, 1, cm->st);
        if (o[LW_BQKV] >= 0) cuda_bias_grad(WG(cm, o[LW_BQKV]), dqkv, N, qkvd, cm->st);
        cuda_cast_f32_bf16(dbf, dqkv, (long)N * qkvd, cm->st);
        cuda_gemm_dx(cm->blas, dA, dbf, WB(cm, o[LW_WQKV]), N, qkvd, H, 0.0f);
        cuda_gemm_dw(cm->blas, WG(cm, o[LW_WQKV]), dbf, LA(cm, l, LA_XN1), N, qkvd, H);
        cuda_rmsnorm_bwd(dres, WG(cm, o[LW_LN1]), dA, LA(cm, l, LA_X_IN), WM(cm, o[LW_LN1]), LA(cm, l, LA_RSTD1), N, H, 1,
                         cm->st);
    }
    cuda_embedding_bwd(WG(cm, cm->off_embed), B(cm, CM_TOKENS), dres, N, H, cm->st);
    CK(cudaStreamSynchronize(cm->st));
    return 0;
}

void cuda_model_grads_zero(CudaModel *cm) {
    if (cm->opt.train) CK(cudaMemsetAsync(B(cm, CM_GRAD), 0, cm->plan.bytes[CM_GRAD], cm->st));
}

double cuda_model_grad_norm(CudaModel *cm) {
    if (!cm->opt.train) return 0.0;
    double *nb = B(cm, CM_NORM), s = 0.0;
    cuda_sumsq(nb + 1024, nb, F(cm, CM_GRAD), cm->P, cm->st);
    CK(cudaMemcpyAsync(&s, nb + 1024, 8, cudaMemcpyDeviceToHost, cm->st));
    CK(cudaStreamSynchronize(cm->st));
    return sqrt(s);
}

double cuda_model_grads_clip(CudaModel *cm, double max_norm) {
    double n = cuda_model_grad_norm(cm);
    if (max_norm > 0 && n > max_norm) cuda_scale(F(cm, CM_GRAD), (float)(max_norm / (n + 1e-6)), cm->P, cm->st);
    return n;
}

int cuda_model_adamw_step(CudaModel *cm, const AdamWConfig *cfg, float lr, char err[ERR_LEN]) {
    if (!cm->opt.train) return err_set(err, ERR_INVAL, "cuda adamw: created without train=1");
    if (!cfg || !isfinite(lr) || lr < 0) return err_set(err, ERR_INVAL, "cuda adamw: lr %g must be finite and >= 0", (double)lr);
    cm->adam_step++;
    cuda_adamw(F(cm, CM_MASTER), B(cm, CM_W_BF16), F(cm, CM_GRAD), F(cm, CM_ADAM_M), F(cm, CM_ADAM_V), cm->P, lr,
               cfg->beta1, cfg->beta2, cfg->eps, cfg->weight_decay, cm->adam_step, 1.0f, cm->st);
    CK(cudaStreamSynchronize(cm->st));
    return 0;
}

static int slab_buf_ok(CudaModel *cm, int buf, char err[ERR_LEN]) {
    if ((buf != CM_MASTER && buf != CM_GRAD && buf != CM_ADAM_M && buf != CM_ADAM_V) || !cm->plan.bytes[buf])
        return err_set(err, ERR_INVAL, "cuda model: buffer %d is not a parameter-shaped slab here", buf);
    return 0;
}
int cuda_model_download(CudaModel *cm, int buf, float *dst, char err[ERR_LEN]) {
    int rc = slab_buf_ok(cm, buf, err);
    if (rc) return rc;
    CK(cudaMemcpyAsync(dst, B(cm, buf), (size_t)cm->P * 4, cudaMemcpyDeviceToHost, cm->st));
    CK(cudaStreamSynchronize(cm->st));
    return 0;
}
int cuda_model_upload(CudaModel *cm, int buf, const float *src, char err[ERR_LEN]) {
    int rc = slab_buf_ok(cm, buf, err);
    if (rc) return rc;
    CK(cudaMemcpyAsync(B(cm, buf), src, (size_t)cm->P * 4, cudaMemcpyHostToDevice, cm->st));
    if (buf == CM_MASTER) cuda_cast_f32_bf16(B(cm, CM_W_BF16), F(cm, CM_MASTER), cm->P, cm->st);
    CK(cudaStreamSynchronize(cm->st));
    return 0;
}

int cuda_model_allreduce_grads(CudaModel *cm, Collective *c, char err[ERR_LEN]) {
    if (!cm->opt.train) return err_set(err, ERR_INVAL, "cuda allreduce: created without train=1");
    CK(cudaStreamSynchronize(cm->st));
    return coll_allreduce_sum(c, F(cm, CM_GRAD), cm->P, err);
}
int cuda_model_broadcast_params(CudaModel *cm, Collective *c, char err[ERR_LEN]) {
    CK(cudaStreamSynchronize(cm->st));
    int rc = coll_broadcast(c, F(cm, CM_MASTER), (size_t)cm->P * 4, err);
    if (rc) return rc;
    cuda_cast_f32_bf16(B(cm, CM_W_BF16), F(cm, CM_MASTER), cm->P, cm->st);
    CK(cudaStreamSynchronize(cm->st));
    return 0;
}

int cuda_model_step(CudaModel *cm, const CudaKvPager *pg, int R, const int32_t *tokens, const int32_t *pos,
                    const int32_t *seq, int S, const int32_t *last, float *logits, char err[ERR_LEN]) {
    const ModelConfig *c = &cm->cfg;
    int H = c->hidden, V = c->vocab, L = c->n_layers, maxS = cm->opt.max_seqs > 0 ? cm->opt.max_seqs : 1;
    if (!pg || !tokens || !pos || !seq || !last) return err_set(err, ERR_INVAL, "cuda step: NULL argument");
    if (R < 1 || R > cm->opt.max_tokens) return err_set(err, ERR_INVAL, "cuda step: R %d outside [1, %d]", R, cm->opt.max_tokens);
    if (S < 1 || S > maxS || S > R) return err_set(err, ERR_INVAL, "cuda step: S %d outside [1, min(R, max_seqs %d)]", S, maxS);
    if (pg->block_tokens != cm->plan.block_tokens || pg->n_blocks > cm->plan.kv_blocks)
        return err_set(err, ERR_INVAL, "cuda step: pager geometry (%d blocks of %d) does not fit the plan (%ld of %d)",
                       pg->n_blocks, pg->block_tokens, cm->plan.kv_blocks, cm->plan.block_tokens);
    for (int r = 0; r < R; r++) {
        if (tokens[r] < 0 || tokens[r] >= V) return err_set(err, ERR_INVAL, "cuda step: tokens[%d] = %d out of range", r, tokens[r]);
        if (seq[r] < 0 || seq[r] >= pg->max_seqs || pos[r] < 0 || pos[r] >= pg->len[seq[r]])
            return err_set(err, ERR_INVAL, "cuda step: row %d (seq %d, pos %d) has no cache room", r, seq[r], pos[r]);
    }
    for (int s = 0; s < S; s++)
        if (last[s] < 0 || last[s] >= R) return err_set(err, ERR_INVAL, "cuda step: last[%d] = %d outside [0, R)", s, last[s]);
    long tn = (long)pg->max_seqs * pg->max_blocks_per_seq;
    if (tn > cm->tables_cap) {
        cudaFree(cm->d_tables);
        CK(cudaMalloc((void **)&cm->d_tables, (size_t)tn * 4));
        cm->tables_cap = tn;
    }
    cm->stats_valid = 0;
    CK(cudaMemcpyAsync(cm->d_tables, pg->table, (size_t)tn * 4, cudaMemcpyHostToDevice, cm->st));
    CK(cudaMemcpyAsync(B(cm, CM_TOKENS), tokens, (size_t)R * 4, cudaMemcpyHostToDevice, cm->st));
    CK(cudaMemcpyAsync(B(cm, CM_POS), pos, (size_t)R * 4, cudaMemcpyHostToDevice, cm->st));
    CK(cudaMemcpyAsync(B(cm, CM_CU), seq, (size_t)R * 4, cudaMemcpyHostToDevice, cm->st));
    CK(cudaMemcpyAsync(cm->d_last, last, (size_t)S * 4, cudaMemcpyHostToDevice, cm->st));
    float *x = LA(cm, 0, LA_X_IN);
    cuda_embedding_fwd(x, B(cm, CM_TOKENS), WB(cm, cm->off_embed), R, H, cm->st);
    for (int l = 0; l < L; l++) layer_fwd(cm, l, R, x, x, x, 1, pg, B(cm, CM_CU));
    cuda_rmsnorm_fwd(B(cm, CM_XNF), F(cm, CM_RSTDF), x, WM(cm, cm->off_norm), R, H, c->rms_eps, cm->st);
    uint16_t *rows = B(cm, CM_DBF) ? B(cm, CM_DBF) : LA(cm, 0, LA_XN2);   /* [S, H] bf16 scratch (S <= R rows fit) */
    cuda_gather_rows_bf16(rows, B(cm, CM_XNF), cm->d_last, S, H, cm->st);
    cuda_gemm_fwd(cm->blas, F(cm, CM_LOGITS), rows, WB(cm, cm->off_lm), S, V, H, 0.0f);
    if (logits) CK(cudaMemcpyAsync(logits, B(cm, CM_LOGITS), (size_t)S * V * 4, cudaMemcpyDeviceToHost, cm->st));
    CK(cudaStreamSynchronize(cm->st));
    return 0;
}

int cuda_model_sample(CudaModel *cm, int S, const CudaSampleParams *p, uint64_t seed, const uint64_t *group,
                      const uint32_t *sample, const uint32_t *pos, int32_t *tok, float *logp, char err[ERR_LEN]) {
    int maxS = cm->opt.max_seqs > 0 ? cm->opt.max_seqs : 1;
    if (S < 1 || S > maxS || !p || !group || !sample || !pos || !tok || !logp)
        return err_set(err, ERR_INVAL, "cuda sample: bad arguments (S %d, max %d)", S, maxS);
    if (!(p->top_p > 0) || p->top_p > 1) return err_set(err, ERR_INVAL, "cuda sample: top_p %g outside (0, 1]", (double)p->top_p);
    CK(cudaMemcpyAsync(cm->d_group, group, (size_t)S * 8, cudaMemcpyHostToDevice, cm->st));
    CK(cudaMemcpyAsync(cm->d_sample, sample, (size_t)S * 4, cudaMemcpyHostToDevice, cm->st));
    CK(cudaMemcpyAsync(cm->d_pos, pos, (size_t)S * 4, cudaMemcpyHostToDevice, cm->st));
    cuda_sample(cm->d_tok, cm->d_logp, F(cm, CM_LOGITS), cm->cfg.vocab, S, cm->cfg.vocab, *p, seed, cm->d_group,
                cm->d_sample, cm->d_pos, cm->samp_scratch, cm->st);
    CK(cudaMemcpyAsync(tok, cm->d_tok, (size_t)S * 4, cudaMemcpyDeviceToHost, cm->st));
    CK(cudaMemcpyAsync(logp, cm->d_logp, (size_t)S * 4, cudaMemcpyDeviceToHost, cm->st));
    CK(cudaStreamSynchronize(cm->st));
    for (int s = 0; s < S; s++)
        if (tok[s] < 0) return err_set(err, ERR_INVAL, "cuda sample: row %d has NaN / +inf or only -inf logits", s);
    return 0;
}
#else
typedef int cuda_model_unused_in_cpu_builds;
#endif
