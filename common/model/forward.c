/* common/model/forward.c: forward and backward of the decoder over a packed batch (model.h).
 * Per layer (transformers Qwen2DecoderLayer / Qwen3DecoderLayer / LlamaDecoderLayer):
 *   xn1 = RMSNorm(x); q|k|v = xn1 Wqkv^T (+ b); [Qwen3: q, k = RMSNorm_hd(q), RMSNorm_hd(k)];
 *   q, k = RoPE(q, k); att = causal GQA softmax(q k^T / sqrt(hd)) v within each sequence;
 *   x' = x + att Wo^T; xn2 = RMSNorm(x'); out = x' + (silu(xn2 Wg^T) * (xn2 Wu^T)) Wd^T.
 * Then RMSNorm, lm_head, log-softmax of logits / temperature: log-prob of the target and the entropy,
 * computed in row chunks so the [N, V] logits need not exist at once. Backward retraces it in reverse
 * with the saved activations; attention probabilities are recomputed from the saved log-sum-exp.
 * The one layer loop: every kernel, copy and allocation goes through m->be (backend/backend.h), so the same code runs
 * on the CPU table and the CUDA one; bookkeeping (positions, LM-head pieces) stays on the host and the backend stages
 * what it needs.
 * Sequence invariance (model.h; the CPU table's property, CUDA's GEMMs are whole-batch): every forward product (the
 * layers' linears and the LM head) goes through the fixed-order packed kernel (model__layer_forward with lin_flags 0,
 * lm_head_rows: one FMA chain per output element over k in order, whatever
 * the rows around it); backward through cpu_linear_backward_varlen (one sequence per GEMM, weight gradients added
 * sequence by sequence), the norms' weight gradients through cpu_rmsnorm_backward_varlen, the LM head's through
 * lm_chunk's per-sequence pieces; the rest is per row or per sequence already (norms, RoPE, attention, SwiGLU,
 * log-softmax). model_forward_cached (generation) keeps whole-batch GEMMs: its batch-invariant mode is the rollout's
 * own (generate.h).
 * Not here: loss functions (the caller turns its loss into dlogp / dent), optimizer, KV cache. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model/model_internal.h"

#define BW(w) ((BkWeight){ (w), NULL, BK_F32 })

/* Row `row` of an "(act)" buffer of `width` columns (backend.h: fp32 on the CPU, bf16 on CUDA). */
static const void *act_row(const Model *m, const float *base, long row, int width) {
    size_t es = m->be->act_dtype == BK_BF16 ? 2 : sizeof(float);
    return (const char *)base + (size_t)row * width * es;
}

static int batch_check(const Model *m, const ModelBatch *b, char err[ERR_LEN]) {
    if (!b || !b->tokens || !b->cu_seqlens) return err_set(err, ERR_INVAL, "batch: tokens and cu_seqlens are required");
    if (b->n_tokens < 1 || b->n_tokens > m->max_tokens)
        return err_set(err, ERR_INVAL, "batch: n_tokens %d outside [1, max_tokens %d]", b->n_tokens, m->max_tokens);
    if (b->n_seqs < 1 || b->n_seqs > b->n_tokens)
        return err_set(err, ERR_INVAL, "batch: n_seqs %d outside [1, n_tokens]", b->n_seqs);
    if (!(b->temperature > 0) || !isfinite(b->temperature))
        return err_set(err, ERR_INVAL, "batch: temperature %g must be > 0", (double)b->temperature);
    if (b->cu_seqlens[0] != 0 || b->cu_seqlens[b->n_seqs] != b->n_tokens)
        return err_set(err, ERR_INVAL, "batch: cu_seqlens must start at 0 and end at n_tokens %d", b->n_tokens);
    for (int s = 0; s < b->n_seqs; s++)
        if (b->cu_seqlens[s + 1] <= b->cu_seqlens[s])
            return err_set(err, ERR_INVAL, "batch: cu_seqlens[%d] = %d is not above cu_seqlens[%d] = %d", s + 1,
                           b->cu_seqlens[s + 1], s, b->cu_seqlens[s]);
    int V = m->cfg.vocab;
    for (int i = 0; i < b->n_tokens; i++) {
        if (b->tokens[i] < 0 || b->tokens[i] >= V)
            return err_set(err, ERR_INVAL, "batch: tokens[%d] = %d outside the vocabulary [0, %d)", i, b->tokens[i], V);
        if (b->targets && (b->targets[i] < -1 || b->targets[i] >= V))
            return err_set(err, ERR_INVAL, "batch: targets[%d] = %d outside [-1, %d)", i, b->targets[i], V);
    }
    return 0;
}

/* The LM head runs in chunks of at most R = logits_rows rows made of whole sequence PIECES: each sequence is cut
 * into pieces of at most R rows from its own start, and consecutive pieces are grouped while they fit. A piece's
 * backward GEMMs are its own (cpu_linear_backward_varlen), so its lm_head gradient does not depend on the packing
 * (its logits never do: lm_head_rows is per row).
 * Iterator state: sequence *s, row *off within it. Fills ch_cu[0..*np] (piece bounds relative to the chunk's first
 * row, *r0) and returns the chunk's rows, 0 at the end. */
static int lm_chunk(const ModelBatch *b, long R, int *s, int *off, int *r0, int32_t *ch_cu, int *np) {
    int rows = 0;
    *np = 0;
    ch_cu[0] = 0;
    *r0 = *s < b->n_seqs ? b->cu_seqlens[*s] + *off : b->n_tokens;
    while (*s < b->n_seqs) {
        int len = b->cu_seqlens[*s + 1] - b->cu_seqlens[*s], piece = len - *off;
        if (piece > R) piece = (int)R;
        if (rows > 0 && rows + piece > R) break;
        rows += piece;
        ch_cu[++*np] = rows;
        *off += piece;
        if (*off == len) { ++*s; *off = 0; }
    }
    return rows;
}

/* logits of the chunk's rows [r0, r0 + rows) (pieces ch_cu[0..np]) of the final hidden states into a->logits */
/* logits of the chunk's rows [r0, r0 + rows) of the final hidden states into a->logits: vocabulary slices of
 * MODEL_LM_SLICE rows of lm_head packed in turn (the whole matrix would double the largest weight), each slice one
 * fixed-order product over the chunk's rows (row-invariant like fwd_linear). */
static void lm_head_rows(Model *m, ModelActs *a, int r0, int rows) {
    const ModelConfig *c = &m->cfg;
    int V = c->vocab, H = c->hidden;
    const Backend *be = m->be;
    if (a->pk_lm) {                   /* model_pack_weights' snapshot: one product over the whole vocabulary */
        be->linear(m->bc, a->logits, V, act_row(m, a->xnf, r0, H), (BkWeight){ m->w.lm_head, a->pk_lm, BK_F32 }, NULL, rows, V, H,
                   0, NULL);
        return;
    }
    for (int v0 = 0; v0 < V; v0 += MODEL_LM_SLICE) {
        int n = V - v0 < MODEL_LM_SLICE ? V - v0 : MODEL_LM_SLICE;
        be->linear(m->bc, a->logits + v0, V, act_row(m, a->xnf, r0, H), (BkWeight){ m->w.lm_head + (long)v0 * H, NULL, BK_F32 },
                   NULL, rows, n, H, 0, a->wpack);
    }
}

/* y = x W^T (+ b) as the layer mode asks: a residual product (res != NULL) accumulates onto res's copy in y, or is added
 * after the product (mode->res_add). */
static void layer_linear(const Model *m, const LayerMode *mode, float *y, const void *x, BkWeight w, const float *b,
                         const float *res, int M, int N, int K) {
    const Backend *be = m->be;
    if (res && !mode->res_add) {
        if (y != res) be->copy(m->bc, y, res, (size_t)M * N * sizeof(float));
        be->linear(m->bc, y, N, x, w, b, M, N, K, mode->lin_flags | BK_ACCUM, mode->scratch);
        return;
    }
    be->linear(m->bc, y, N, x, w, b, M, N, K, mode->lin_flags, mode->scratch);
    if (res) be->add(m->bc, y, res, (long)M * N);
}

void model__layer_forward(const Model *m, int l, const LayerIO *io, const BkWeight w[4], const LayerMode *mode,
                          const BkRope *rope) {
    const ModelConfig *c = &m->cfg;
    const Backend *be = m->be;
    BackendCtx *bc = m->bc;
    const LayerWeights *W = &m->w.layer[l];
    int N = io->n, H = c->hidden, I = c->inter, hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads;
    int qd = nh * hd, kvd = nkv * hd, qkvd = qd + 2 * kvd;
    be->rmsnorm(bc, io->xn1, io->rstd1, io->x_in, W->ln1, N, H, c->rms_eps);
    layer_linear(m, mode, io->qkv, io->xn1, w[0], W->bqkv, NULL, N, qkvd, H);
    if (c->qk_norm && io->qpre) {      /* keep the pre-norm q/k for backward */
        for (int i = 0; i < N; i++) {
            be->copy(bc, io->qpre + (long)i * qd, io->qkv + (long)i * qkvd, (size_t)qd * sizeof(float));
            be->copy(bc, io->kpre + (long)i * kvd, io->qkv + (long)i * qkvd + qd, (size_t)kvd * sizeof(float));
        }
        be->rmsnorm_heads(bc, io->qkv, qkvd, io->rstdq, io->qpre, qd, W->qn, N, nh, hd, c->rms_eps);
        be->rmsnorm_heads(bc, io->qkv + qd, qkvd, io->rstdk, io->kpre, kvd, W->kn, N, nkv, hd, c->rms_eps);
    } else if (c->qk_norm) {
        be->rmsnorm_heads(bc, io->qkv, qkvd, NULL, io->qkv, qkvd, W->qn, N, nh, hd, c->rms_eps);
        be->rmsnorm_heads(bc, io->qkv + qd, qkvd, NULL, io->qkv + qd, qkvd, W->kn, N, nkv, hd, c->rms_eps);
    }
    be->rope(bc, io->qkv, qkvd, rope, N, nh + nkv, hd, 0);     /* q and k heads are adjacent: one pass */
    mode->attend(m, l, io, mode->ud);
    layer_linear(m, mode, io->x_mid, io->att, w[1], NULL, io->x_in, N, H, qd);
    be->rmsnorm(bc, io->xn2, io->rstd2, io->x_mid, W->ln2, N, H, c->rms_eps);
    if (mode->glu_fused) {
        be->linear_swiglu(bc, io->hm, io->gu, io->xn2, w[2], N, I, H, mode->scratch);
    } else {
        layer_linear(m, mode, io->gu, io->xn2, w[2], NULL, NULL, N, 2 * I, H);
        be->swiglu(bc, io->hm, io->gu, N, I);
    }
    layer_linear(m, mode, io->x_out, io->hm, w[3], NULL, io->x_mid, N, H, I);
}

/* model_forward's attention: causal within each packed sequence, log-sum-exp kept for backward */
typedef struct { const ModelBatch *b; ModelActs *a; } PackedAttend;
static void attend_packed(const Model *m, int l, const LayerIO *io, void *ud) {
    const PackedAttend *p = ud;
    const ModelConfig *c = &m->cfg;
    int hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads, qd = nh * hd, kvd = nkv * hd, qkvd = qd + 2 * kvd;
    m->be->attention_varlen(m->bc, io->att, p->a->layer[l].lse, io->qkv, io->qkv + qd, io->qkv + qd + kvd,
                            p->b->cu_seqlens, p->b->n_seqs, nh, nkv, hd, qkvd, qkvd, qd, 1.0f / sqrtf((float)hd),
                            p->a->att_scratch);
}

/* Layer l of model_forward over the packed batch: its weights (a model_pack_weights snapshot or packed per call) and
 * buffers (x_out: where the layer's output goes). model_backward calls it again for a recomputed layer. */
static void packed_layer_forward(Model *m, const ModelBatch *b, int l, float *x_out, const BkRope *rope) {
    const ModelConfig *c = &m->cfg;
    ModelActs *a = m->priv;
    LayerActs *A = &a->layer[l];
    const LayerWeights *W = &m->w.layer[l];
    float *const *P = a->pk ? a->pk + l * 4 : NULL;    /* model_pack_weights' snapshot, or pack per call */
    BkWeight w[4] = { { W->wqkv, P ? P[0] : NULL, BK_F32 }, { W->wo, P ? P[1] : NULL, BK_F32 },
                      { W->wgu, P ? P[2] : NULL, BK_F32 }, { W->wd, P ? P[3] : NULL, BK_F32 } };
    int keep = c->qk_norm && m->train;
    LayerIO io = { .n = b->n_tokens, .x_in = A->x_in, .x_mid = A->x_mid, .x_out = x_out, .rstd1 = A->rstd1,
                   .rstd2 = A->rstd2, .xn1 = A->xn1, .xn2 = A->xn2, .qkv = A->qkv, .qpre = keep ? A->qpre : NULL,
                   .kpre = keep ? A->kpre : NULL, .rstdq = A->rstdq, .rstdk = A->rstdk, .att = A->att, .gu = A->gu,
                   .hm = A->hm };
    PackedAttend pa = { b, a };
    LayerMode mode = { .lin_flags = 0, .res_add = 0, .glu_fused = 1, .scratch = a->wpack, .attend = attend_packed,
                       .ud = &pa };
    model__layer_forward(m, l, &io, w, &mode, rope);   /* inference: x_mid and x_out alias x_in */
}

int model_forward(Model *m, const ModelBatch *b, float *logp, float *ent, char err[ERR_LEN]) {
    m->fwd_tokens = m->fwd_seqs = 0;                    /* no backward until this forward has finished */
    int rc = batch_check(m, b, err);
    if (!rc) rc = model__check_hooks(m, "model_forward", err);
    if (rc) return rc;
    const ModelConfig *c = &m->cfg;
    ModelActs *a = m->priv;
    int N = b->n_tokens, H = c->hidden, hd = c->head_dim, V = c->vocab;
    const int32_t *cu = b->cu_seqlens;
    int S = b->n_seqs;
    const Backend *be = m->be;
    BackendCtx *bc = m->bc;
    BkRope rope = { a->cs, a->sn, a->pos, m->inv_freq };

    for (int q = 0; q < S; q++)
        for (int i = cu[q]; i < cu[q + 1]; i++) a->pos[i] = i - cu[q];
    be->rope_tables(bc, a->cs, a->sn, a->pos, N, m->inv_freq, hd / 2);

    float *x0 = a->layer[0].x_in;
    if ((rc = model__unit_use(m, 0, err))) return rc;       /* FSDP units (model.h): the hooks' order */
    be->embed(bc, x0, b->tokens, BW(m->w.embed), N, H);

    for (int l = 0; l < c->n_layers; l++) {
        if ((rc = model__unit_use(m, 1 + l, err))) return rc;
        packed_layer_forward(m, b, l, l + 1 < c->n_layers ? a->layer[l + 1].x_in : a->x_final, &rope);
        if (m->progress) m->progress(m->progress_ud);       /* a daemon's heartbeat during a long chunk */
    }
    if ((rc = model__unit_use(m, c->n_layers + 1, err)) || (c->tie_embeddings && (rc = model__unit_use(m, 0, err))))
        return rc;
    be->rmsnorm(bc, a->xnf, a->rstdf, a->x_final, m->w.norm, N, H, c->rms_eps);

    long R = m->logits_rows;
    a->logits_full = R >= N;
    int s = 0, off = 0, r0, np, n;
    if (logp || ent || a->logits_full)
        while ((n = lm_chunk(b, R, &s, &off, &r0, a->lm_cu, &np)) > 0) {
            lm_head_rows(m, a, r0, n);
            be->logprob_entropy(bc, a->logits, b->targets ? b->targets + r0 : NULL, n, V, b->temperature,
                                logp ? a->logp + r0 : NULL, ent ? a->ent + r0 : NULL);
        }
    if (logp) be->to_host(bc, logp, a->logp, (size_t)N * sizeof(float));
    if (ent) be->to_host(bc, ent, a->ent, (size_t)N * sizeof(float));
    be->sync(bc);
    if (m->train) { m->fwd_tokens = N; m->fwd_seqs = b->n_seqs; }
    return 0;
}

const float *model_hidden(const Model *m) { return ((const ModelActs *)m->priv)->xnf; }

int model_backward(Model *m, const ModelBatch *b, const float *dlogp, const float *dent, char err[ERR_LEN]) {
    if (!m->train) return err_set(err, ERR_INVAL, "model_backward: model was loaded without train=1");
    int rc = batch_check(m, b, err);
    if (rc) return rc;
    if (m->fwd_tokens != b->n_tokens || m->fwd_seqs != b->n_seqs)
        return err_set(err, ERR_INVAL, "model_backward: the last forward was not a model_forward of this batch (%d tokens, "
                       "%d sequences); run it first", b->n_tokens, b->n_seqs);
    const ModelConfig *c = &m->cfg;
    ModelActs *a = m->priv;
    int N = b->n_tokens, H = c->hidden, I = c->inter, hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads;
    int qd = nh * hd, kvd = nkv * hd, qkvd = qd + 2 * kvd, V = c->vocab;
    float scale = 1.0f / sqrtf((float)hd);
    const int32_t *cu = b->cu_seqlens;
    int S = b->n_seqs;
    const Backend *be = m->be;
    BackendCtx *bc = m->bc;
    BkRope rope = { a->cs, a->sn, a->pos, m->inv_freq };
    if ((rc = model__unit_use(m, c->n_layers + 1, err)) || (c->tie_embeddings && (rc = model__unit_use(m, 0, err))))
        return rc;

    if (dlogp) be->to_device(bc, a->dlogp, dlogp, (size_t)N * sizeof(float));
    if (dent) be->to_device(bc, a->dent, dent, (size_t)N * sizeof(float));
    /* LM head + log-softmax, chunked: dA <- d xnf, lm_head grads */
    long R = m->logits_rows;
    int s = 0, off = 0, r0, np, n;
    while ((n = lm_chunk(b, R, &s, &off, &r0, a->lm_cu, &np)) > 0) {
        if (!a->logits_full) lm_head_rows(m, a, r0, n);
        be->logprob_entropy_backward(bc, a->logits, b->targets ? b->targets + r0 : NULL, n, V, b->temperature,
                                     dlogp ? a->dlogp + r0 : NULL, dent ? a->dent + r0 : NULL);
        be->linear_backward_varlen(bc, a->dA + (long)r0 * H, m->g.lm_head, NULL, a->logits, act_row(m, a->xnf, r0, H),
                                   BW(m->w.lm_head), a->lm_cu, np, V, H, 0);
    }
    a->logits_full = 0;     /* the logits buffer now holds gradients */
    be->rmsnorm_backward_varlen(bc, a->dres, m->g.norm, a->dA, a->x_final, m->w.norm, a->rstdf, cu, S, H, 0);
    if ((rc = model__unit_grads(m, c->n_layers + 1, err))) return rc;

    for (int l = c->n_layers - 1; l >= 0; l--) {
        if ((rc = model__unit_use(m, 1 + l, err))) return rc;
        LayerActs *A = &a->layer[l];
        const LayerWeights *W = &m->w.layer[l];
        LayerWeights *G = &m->g.layer[l];
        /* gradient checkpointing: the layer's activations again, from its input (the layers share one set); its
         * output goes to x_final, which the final norm's backward above has finished with */
        if (m->recompute && l < c->n_layers - 1) packed_layer_forward(m, b, l, a->x_final, &rope);   /* the last
                                                                     layer's are still there */
        /* MLP: out = x_mid + hm Wd^T */
        be->linear_backward_varlen(bc, a->dhm, G->wd, NULL, a->dres, A->hm, BW(W->wd), cu, S, H, I, 0);
        be->swiglu_backward(bc, a->dgu, a->dhm, A->gu, N, I);
        be->linear_backward_varlen(bc, a->dA, G->wgu, NULL, a->dgu, A->xn2, BW(W->wgu), cu, S, 2 * I, H, 0);
        be->rmsnorm_backward_varlen(bc, a->dres, G->ln2, a->dA, A->x_mid, W->ln2, A->rstd2, cu, S, H, 1);
        /* attention: x_mid = x_in + att Wo^T */
        be->linear_backward_varlen(bc, a->dA, G->wo, NULL, a->dres, A->att, BW(W->wo), cu, S, H, qd, 0);
        be->zero(bc, a->dqkv, (size_t)N * qkvd * sizeof(float));
        be->attention_backward_varlen(bc, a->dqkv, a->dqkv + qd, a->dqkv + qd + kvd, a->dA, A->qkv, A->qkv + qd,
                                      A->qkv + qd + kvd, A->att, A->lse, b->cu_seqlens, b->n_seqs, nh, nkv, hd, qkvd,
                                      qkvd, qd, scale, a->att_scratch);
        be->rope(bc, a->dqkv, qkvd, &rope, N, nh, hd, 1);
        be->rope(bc, a->dqkv + qd, qkvd, &rope, N, nkv, hd, 1);
        if (c->qk_norm) {
            be->rmsnorm_heads_backward(bc, a->dqkv, qkvd, G->qn, A->qpre, qd, W->qn, A->rstdq, N, nh, hd);
            be->rmsnorm_heads_backward(bc, a->dqkv + qd, qkvd, G->kn, A->kpre, kvd, W->kn, A->rstdk, N, nkv, hd);
        }
        be->linear_backward_varlen(bc, a->dA, G->wqkv, G->bqkv, a->dqkv, A->xn1, BW(W->wqkv), cu, S, qkvd, H, 0);
        be->rmsnorm_backward_varlen(bc, a->dres, G->ln1, a->dA, A->x_in, W->ln1, A->rstd1, cu, S, H, 1);
        if ((rc = model__unit_grads(m, 1 + l, err))) return rc;
        if (m->progress) m->progress(m->progress_ud);
    }
    be->embed_backward(bc, m->g.embed, b->tokens, a->dres, N, H);
    be->sync(bc);
    return model__unit_grads(m, 0, err);
}

/* model_forward_cached's attention: each sequence's new K/V rows into its contiguous cache, then its queries over it */
static void attend_cached(const Model *m, int l, const LayerIO *io, void *ud) {
    const ModelCacheBatch *b = ud;
    const ModelConfig *c = &m->cfg;
    const ModelActs *a = m->priv;
    int L = c->n_layers, hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads, qd = nh * hd, kvd = nkv * hd;
    int qkvd = qd + 2 * kvd;
    for (int s = 0; s < b->n_seqs; s++) {
        int s0 = b->cu_seqlens[s], n = b->cu_seqlens[s + 1] - s0, p0 = b->p0[s];
        float *kc = b->k_cache[(long)s * L + l], *vc = b->v_cache[(long)s * L + l];
        for (int j = 0; j < n; j++) {
            const float *row = io->qkv + (long)(s0 + j) * qkvd;
            m->be->copy(m->bc, kc + (long)(p0 + j) * kvd, row + qd, (size_t)kvd * sizeof(float));
            m->be->copy(m->bc, vc + (long)(p0 + j) * kvd, row + qd + kvd, (size_t)kvd * sizeof(float));
        }
        m->be->attention(m->bc, (float *)io->att + (long)s0 * qd, NULL, io->qkv + (long)s0 * qkvd, kc, vc, n, p0, p0 + n,
                         nh, nkv, hd, qkvd, kvd, qd, 1.0f / sqrtf((float)hd), a->att_scratch);
    }
}

int model_forward_cached(Model *m, const ModelCacheBatch *b, float *logits, char err[ERR_LEN]) {
    const ModelConfig *c = &m->cfg;
    m->fwd_tokens = m->fwd_seqs = 0;                    /* the activation slab is this call's now */
    if (!m->be->host_memory || !m->be->attention)   /* the caches are the caller's host arrays */
        return err_set(err, ERR_UNSUPPORTED, "model_forward_cached: needs a host-memory backend (model is on %s)",
                       m->be->name);
    if (!b || !b->tokens || !b->cu_seqlens || !b->p0 || !b->cap || !b->k_cache || !b->v_cache || !logits)
        return err_set(err, ERR_INVAL, "cached batch: tokens, cu_seqlens, p0, cap, caches and logits are required");
    if (b->n_seqs < 1) return err_set(err, ERR_INVAL, "cached batch: n_seqs %d < 1", b->n_seqs);
    if (b->cu_seqlens[0] != 0) return err_set(err, ERR_INVAL, "cached batch: cu_seqlens[0] must be 0");
    for (int s = 0; s < b->n_seqs; s++) {
        int n = b->cu_seqlens[s + 1] - b->cu_seqlens[s];
        if (n < 1) return err_set(err, ERR_INVAL, "cached batch: sequence %d has no new tokens", s);
        if (b->p0[s] < 0 || (long)b->p0[s] + n > b->cap[s])
            return err_set(err, ERR_INVAL, "cached batch: sequence %d: p0 %d + %d new tokens exceed cache cap %d", s,
                           b->p0[s], n, b->cap[s]);
        if ((long)b->p0[s] + n > m->max_context)
            return err_set(err, ERR_INVAL, "cached batch: sequence %d: context %ld exceeds max_context %d", s,
                           (long)b->p0[s] + n, m->max_context);
    }
    int N = b->cu_seqlens[b->n_seqs];
    if (N > m->max_tokens) return err_set(err, ERR_INVAL, "cached batch: %d tokens exceed max_tokens %d", N, m->max_tokens);
    int V = c->vocab, H = c->hidden, hd = c->head_dim, L = c->n_layers;
    for (int i = 0; i < N; i++)
        if (b->tokens[i] < 0 || b->tokens[i] >= V)
            return err_set(err, ERR_INVAL, "cached batch: tokens[%d] = %d outside the vocabulary [0, %d)", i, b->tokens[i], V);
    ModelActs *a = m->priv;
    const Backend *be = m->be;
    BackendCtx *bc = m->bc;
    BkRope rope = { a->cs, a->sn, a->pos, m->inv_freq };
    a->logits_full = 0;
    for (int s = 0; s < b->n_seqs; s++)
        for (int i = b->cu_seqlens[s]; i < b->cu_seqlens[s + 1]; i++) a->pos[i] = b->p0[s] + i - b->cu_seqlens[s];
    be->rope_tables(bc, a->cs, a->sn, a->pos, N, m->inv_freq, hd / 2);
    LayerActs *A = &a->layer[0];          /* one set of buffers for every layer: nothing is kept */
    float *x = A->x_in;
    be->embed(bc, x, b->tokens, BW(m->w.embed), N, H);
    LayerMode mode = { .lin_flags = BK_FAST, .res_add = 0, .glu_fused = 0, .attend = attend_cached, .ud = (void *)b };
    LayerIO io = { .n = N, .x_in = x, .x_mid = x, .x_out = x, .xn1 = A->xn1, .xn2 = A->xn2, .qkv = A->qkv,
                   .att = A->att, .gu = A->gu, .hm = A->hm };
    for (int l = 0; l < L; l++) {
        const LayerWeights *W = &m->w.layer[l];
        BkWeight w[4] = { BW(W->wqkv), BW(W->wo), BW(W->wgu), BW(W->wd) };
        model__layer_forward(m, l, &io, w, &mode, &rope);     /* the residual is updated in place */
    }
    for (int s = 0; s < b->n_seqs; s++)      /* last new row of each sequence */
        be->copy(bc, A->xn1 + (long)s * H, x + (long)(b->cu_seqlens[s + 1] - 1) * H, (size_t)H * sizeof(float));
    be->rmsnorm(bc, a->xnf, NULL, A->xn1, m->w.norm, b->n_seqs, H, c->rms_eps);
    be->linear(bc, logits, V, a->xnf, BW(m->w.lm_head), NULL, b->n_seqs, V, H, BK_FAST, NULL);
    return 0;
}
