/* common/model/model.c: weight layout (one slab per lifetime, HF tensor table), load/save of Hugging Face
 * directories, activation carve, random init and gradient utilities.
 * Not here: forward/backward math (forward.c), AdamW (adamw.c). */
#include "model/model.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/log.h"
#include "model/model_internal.h"

#define QKVD(c) ((long)(c)->n_heads * (c)->head_dim + 2L * (c)->n_kv_heads * (c)->head_dim)

/* ------------------------------------------------------------------------------------ layout */
static void add_tensor(Model *m, int *cap, const char *name, long r, long c, long off) {
    XGROW(m->tensors, m->n_tensors, *cap, 64);
    ModelTensor *t = &m->tensors[m->n_tensors++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = c > 0 ? 2 : 1;
    t->shape[0] = r;
    t->shape[1] = c > 0 ? c : 0;
    t->numel = r * (c > 0 ? c : 1);
    t->offset = off;
}

/* Builds the HF tensor table and the slab size; called once per model. */
static long layout_build(Model *m) {
    const ModelConfig *c = &m->cfg;
    long H = c->hidden, V = c->vocab, I = c->inter, hd = c->head_dim;
    long qd = (long)c->n_heads * hd, kvd = (long)c->n_kv_heads * hd, off = 0;
    int cap = 0;
    char nm[96];
    add_tensor(m, &cap, "model.embed_tokens.weight", V, H, off); off += V * H;
    for (int l = 0; l < c->n_layers; l++) {
#define T(suffix, r, cc, o) do { snprintf(nm, sizeof nm, "model.layers.%d.%s", l, suffix); add_tensor(m, &cap, nm, r, cc, o); } while (0)
        T("input_layernorm.weight", H, 0, off); off += H;
        T("self_attn.q_proj.weight", qd, H, off);
        T("self_attn.k_proj.weight", kvd, H, off + qd * H);
        T("self_attn.v_proj.weight", kvd, H, off + (qd + kvd) * H);
        off += (qd + 2 * kvd) * H;
        if (c->qkv_bias) {
            T("self_attn.q_proj.bias", qd, 0, off);
            T("self_attn.k_proj.bias", kvd, 0, off + qd);
            T("self_attn.v_proj.bias", kvd, 0, off + qd + kvd);
            off += qd + 2 * kvd;
        }
        T("self_attn.o_proj.weight", H, qd, off); off += H * qd;
        if (c->qk_norm) {
            T("self_attn.q_norm.weight", hd, 0, off); off += hd;
            T("self_attn.k_norm.weight", hd, 0, off); off += hd;
        }
        T("post_attention_layernorm.weight", H, 0, off); off += H;
        T("mlp.gate_proj.weight", I, H, off);
        T("mlp.up_proj.weight", I, H, off + I * H);
        off += 2 * I * H;
        T("mlp.down_proj.weight", H, I, off); off += H * I;
#undef T
    }
    add_tensor(m, &cap, "model.norm.weight", H, 0, off); off += H;
    if (!c->tie_embeddings) { add_tensor(m, &cap, "lm_head.weight", V, H, off); off += V * H; }
    return off;
}

/* Points a ModelWeights view at a slab: the embedding at base, layer l at base + e + (l % slots) l_stride, the final
 * norm (and an untied lm_head) after the slots. layout_build's layout is e = V H, slots = n_layers, l_stride = one
 * layer's floats; a sharded model's windows (units.c) are padded and may share one slot. */
static void weights_point(const Model *m, ModelWeights *w, float *base, long e, int slots, long l_stride) {
    const ModelConfig *c = &m->cfg;
    long H = c->hidden, I = c->inter, hd = c->head_dim;
    long qd = (long)c->n_heads * hd, kvd = (long)c->n_kv_heads * hd;
    w->embed = base;
    for (int l = 0; l < c->n_layers; l++) {
        LayerWeights *L = &w->layer[l];
        float *p = base + e + (l % slots) * l_stride;
        const long n[MODEL_LAYER_SLOTS] = { H, (qd + 2 * kvd) * H, c->qkv_bias ? qd + 2 * kvd : 0, H * qd,
                                            c->qk_norm ? hd : 0, c->qk_norm ? hd : 0, H, 2 * I * H, H * I };
        float **slot[MODEL_LAYER_SLOTS] = { &L->ln1, &L->wqkv, &L->bqkv, &L->wo, &L->qn, &L->kn, &L->ln2, &L->wgu, &L->wd };
        for (int i = 0; i < MODEL_LAYER_SLOTS; i++) { *slot[i] = n[i] ? p : NULL; p += n[i]; }
    }
    w->norm = base + e + slots * l_stride;
    w->lm_head = c->tie_embeddings ? w->embed : w->norm + H;
}

/* The slab layout of a view: whole (layout_build's) or the sharded windows with `slots` layer slots. */
static void weights_place(const Model *m, ModelWeights *w, float *base, int slots) {
    if (m->shard_world > 1) {
        weights_point(m, w, base, model_unit_padded(m, 0), slots, model_unit_padded(m, 1));
        return;
    }
    weights_point(m, w, base, (long)m->cfg.vocab * m->cfg.hidden, m->cfg.n_layers, model__layer_floats(&m->cfg));
}

/* Carves the activation slab (base NULL: only counts). Returns floats used. */
static size_t acts_carve(const Model *m, ModelActs *a, float *base) {
    const ModelConfig *c = &m->cfg;
    long N = m->max_tokens, H = c->hidden, I = c->inter, hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads;
    long qd = nh * hd, kvd = nkv * hd, qkvd = qd + 2 * kvd;
    size_t off = 0;
#define CARVE(ptr, n) do { size_t n_ = (size_t)(n); if (base) (ptr) = base + off; off += (n_ + 15) & ~(size_t)15; } while (0)
    int nl = m->train ? c->n_layers : 1;
    for (int l = 0; l < nl; l++) {
        LayerActs *L = &a->layer[l];
        float *dummy = NULL;
        if (m->recompute && l > 0) {                 /* gradient checkpointing: only the layer's input is its own */
            if (base) { float *x = base + off; *L = a->layer[0]; L->x_in = x; }
            off += ((size_t)(N * H) + 15) & ~(size_t)15;
            continue;
        }
        /* inference keeps no activations: no q/k copies, and x_mid aliases x_in (residual updated in place) */
        int keep = m->train;
        const long n[MODEL_ACT_SLOTS] = { N * H, N, N * H, N * qkvd, c->qk_norm && keep ? N * qd : 0,
                                          c->qk_norm && keep ? N * kvd : 0, c->qk_norm ? N * nh : 0,
                                          c->qk_norm ? N * nkv : 0, N * qd, N * nh, keep ? N * H : 0,
                                          N, N * H, N * 2 * I, N * I };
        float **slot[MODEL_ACT_SLOTS] = { &L->x_in, &L->rstd1, &L->xn1, &L->qkv, &L->qpre, &L->kpre, &L->rstdq,
                                          &L->rstdk, &L->att, &L->lse, &L->x_mid, &L->rstd2, &L->xn2, &L->gu, &L->hm };
        for (int i = 0; i < MODEL_ACT_SLOTS; i++) {
            if (n[i]) CARVE(*slot[i], n[i]);
            else if (base) *slot[i] = dummy;
        }
    }
    if (base && !m->train) {
        a->layer[0].x_mid = a->layer[0].x_in;
        for (int l = 1; l < c->n_layers; l++) a->layer[l] = a->layer[0];
    }
    CARVE(a->cs, N * (hd / 2));
    CARVE(a->sn, N * (hd / 2));
    if (m->train) CARVE(a->x_final, N * H);
    else if (base) a->x_final = a->layer[0].x_in;
    CARVE(a->rstdf, N);
    CARVE(a->xnf, N * H);
    CARVE(a->logits, m->logits_rows * c->vocab);
    CARVE(a->logp, N);
    CARVE(a->ent, N);
    if (m->train) {
        CARVE(a->dlogp, N);
        CARVE(a->dent, N);
    }
    {   /* the forward's packed weight: the largest layer weight (gate|up in the GLU layout) or LM-head slice */
        long lm = c->vocab < MODEL_LM_SLICE ? c->vocab : MODEL_LM_SLICE;
        long dims[5][2] = { { qkvd, H }, { H, qd }, { 2 * I, H }, { H, I }, { lm, H } }, pk = 0;
        for (int i = 0; i < 5; i++)
            if (m->be->pack_floats((int)dims[i][0], (int)dims[i][1], 0) > pk)
                pk = m->be->pack_floats((int)dims[i][0], (int)dims[i][1], 0);
        if (m->be->pack_floats((int)I, (int)H, 1) > pk) pk = m->be->pack_floats((int)I, (int)H, 1);
        CARVE(a->wpack, pk);
    }
    CARVE(a->att_scratch, m->be->attention_scratch_floats(m->max_context, c->head_dim));
    if (m->train) {
        CARVE(a->dres, N * H);
        CARVE(a->dA, N * (H > qd ? H : qd));
        CARVE(a->dqkv, N * qkvd);
        CARVE(a->dgu, N * 2 * I);
        CARVE(a->dhm, N * I);
    }
#undef CARVE
    return off;
}

/* ------------------------------------------------------------------------------------ lifecycle */
/* A zeroed slab of n floats in the backend's memory; dies when the backend is out of memory (the slabs are sized
 * once, at load, and logged). */
static float *slab_alloc(const Model *m, long n) {
    float *p = m->be->alloc(m->bc, (size_t)n * sizeof(float));
    if (!p) DIE("model: %s backend could not allocate %.1f MiB", m->be->name, n * 4.0 / (1 << 20));
    return p;
}

/* The sizes of m (its config, tensor table, slab and activation sizes) from cfg and opt; no slab is allocated. */
static void size_model(Model *m, const ModelConfig *cfg, const ModelOptions *opt) {
    m->cfg = *cfg;
    m->max_tokens = opt->max_tokens;
    m->max_context = opt->max_context > opt->max_tokens ? opt->max_context : opt->max_tokens;
    m->train = opt->train ? 1 : 0;
    m->recompute = m->train && opt->recompute;
    m->n_params = layout_build(m);
    long budget = opt->logits_floats > 0 ? opt->logits_floats : 64L << 20;
    long rows = budget / cfg->vocab;
    m->logits_rows = rows < 1 ? 1 : rows > m->max_tokens ? m->max_tokens : rows;
    m->shard_world = m->train && opt->shard_world > 1 ? opt->shard_world : 1;
    m->param_slots = m->shard_world > 1 && !opt->keep_params ? 1 : cfg->n_layers;
    m->slab_floats = m->grad_floats = m->n_params;
    if (m->shard_world > 1) {                  /* the windows (units.c): embedding, layer slots, final norm (+ head) */
        long e = model_unit_padded(m, 0), l = model_unit_padded(m, 1), f = model_unit_padded(m, cfg->n_layers + 1);
        m->slab_floats = e + m->param_slots * l + f;
        m->grad_floats = e + l + f;
    }
}

int model_plan(const char *config_json, const ModelOptions *opt, ModelPlan *p, char err[ERR_LEN]) {
    ModelConfig cfg;
    if (!opt || opt->max_tokens < 1 || opt->max_tokens > (1 << 24))
        return err_set(err, ERR_INVAL, "model: max_tokens must be in [1, 16M]");
    int rc = model_config_parse(&cfg, config_json, err);
    if (rc) return rc;
    Model m = {0};
    m.be = opt->backend ? opt->backend : &backend_cpu;
    size_model(&m, &cfg, opt);
    ModelActs a = {0};
    a.layer = xcalloc((size_t)cfg.n_layers, sizeof(LayerActs));
    size_t acts = acts_carve(&m, &a, NULL);
    xfree(a.layer);
    xfree(m.tensors);
    memset(p, 0, sizeof *p);
    p->n_params = m.n_params;
    p->slab_floats = m.slab_floats;
    p->params_bytes = (size_t)m.slab_floats * sizeof(float);
    p->grads_bytes = m.train ? (size_t)m.grad_floats * sizeof(float) : 0;
    long shard = 0;                             /* one rank's share: ceil(n_u / W) floats of every unit */
    for (int u = 0; m.shard_world > 1 && u < model_n_units(&m); u++) shard += model_unit_padded(&m, u) / m.shard_world;
    p->adam_bytes = !m.train ? 0 : 2 * sizeof(float) * (size_t)(m.shard_world > 1 ? shard : m.n_params);
    p->shard_bytes = 2 * sizeof(float) * (size_t)shard;
    p->acts_bytes = acts * sizeof(float);
    return 0;
}

static Model *model_build(const ModelConfig *cfg, const char *config_json, const ModelOptions *opt, char err[ERR_LEN]) {
    if (!opt || opt->max_tokens < 1 || opt->max_tokens > (1 << 24)) {
        err_set(err, ERR_INVAL, "model: max_tokens must be in [1, 16M]");
        return NULL;
    }
    const Backend *be = opt->backend ? opt->backend : &backend_cpu;
    if (cfg->qk_norm && (!be->rmsnorm_heads || !be->rmsnorm_heads_backward)) {
        err_set(err, ERR_UNSUPPORTED, "model: %s (q/k norm) has no %s kernel yet", cfg->arch_name, be->name);
        return NULL;
    }
    Model *m = xcalloc(1, sizeof *m);
    m->be = be;
    char berr[ERR_LEN] = "";
    m->bc = m->be->ctx_new(berr);
    if (berr[0]) {
        err_set(err, ERR_UNSUPPORTED, "model: %s backend: %s", m->be->name, berr);
        xfree(m);
        return NULL;
    }
    m->config_json = xstrdup(config_json);
    size_model(m, cfg, opt);
    int L = cfg->n_layers;
    if (m->shard_world > 1 && !m->be->host_memory) {
        err_set(err, ERR_UNSUPPORTED, "model: sharded parameters (shard_world %d) need a host-memory backend, not %s",
                m->shard_world, m->be->name);
        m->be->ctx_free(m->bc);
        xfree(m->tensors); xfree(m->config_json); xfree(m);
        return NULL;
    }
    m->w.layer = xcalloc((size_t)L, sizeof(LayerWeights));
    m->params = slab_alloc(m, m->slab_floats);
    weights_place(m, &m->w, m->params, m->param_slots);
    if (m->be->params_prepare) m->be->params_prepare(m->bc, m->params, m->n_params);
    if (m->train) {
        m->g.layer = xcalloc((size_t)L, sizeof(LayerWeights));
        m->m.layer = xcalloc((size_t)L, sizeof(LayerWeights));
        m->v.layer = xcalloc((size_t)L, sizeof(LayerWeights));
        m->grads = slab_alloc(m, m->grad_floats);
        weights_place(m, &m->g, m->grads, 1);
        if (m->shard_world == 1) {                   /* sharded (W > 1): the caller keeps its shard's moments */
            m->adam_m = slab_alloc(m, m->n_params);
            m->adam_v = slab_alloc(m, m->n_params);
            weights_place(m, &m->m, m->adam_m, L);
            weights_place(m, &m->v, m->adam_v, L);
        }
    }
    m->inv_freq = xmalloc((size_t)(cfg->head_dim / 2) * sizeof(float));
    model_config_inv_freq(cfg, m->inv_freq);
    ModelActs *a = xcalloc(1, sizeof *a);
    a->layer = xcalloc((size_t)L, sizeof(LayerActs));
    m->priv = a;
    a->pos = xmalloc((size_t)m->max_tokens * sizeof(int32_t));           /* host bookkeeping (backend.h) */
    a->lm_cu = xmalloc((size_t)(m->max_tokens + 1) * sizeof(int32_t));
    m->acts_floats = acts_carve(m, a, NULL);
    m->acts = slab_alloc(m, (long)m->acts_floats);
    acts_carve(m, a, m->acts);
    double MiB = 1.0 / (1 << 20);
    log_info("model %s: %ld params (%.1f MiB each for params%s), activations %.1f MiB for %d tokens (%s), "
             "V=%d H=%d L=%d heads=%d/%d hd=%d I=%d", cfg->arch_name, m->n_params, m->n_params * 4.0 * MiB,
             !m->train ? "" : m->adam_m ? ", grads, adam m, adam v" : ", sharded: windows of params and grads", m->acts_floats * 4.0 * MiB, m->max_tokens,
             !m->train ? "inference" : m->recompute ? "train, recomputed in backward" : "train", cfg->vocab, cfg->hidden, cfg->n_layers, cfg->n_heads,
             cfg->n_kv_heads, cfg->head_dim, cfg->inter);
    return m;
}

void model_unpack_weights(Model *m) {
    ModelActs *a = m ? m->priv : NULL;
    if (!a) return;
    xfree(a->pk_all);
    xfree(a->pk);
    a->pk_all = a->pk_lm = NULL;
    a->pk = NULL;
}

int model_pack_weights(Model *m, char err[ERR_LEN]) {
    if (m->train) return err_set(err, ERR_INVAL, "model_pack_weights: a train-mode model's weights change every step");
    if (!m->be->pack_weights)
        return err_set(err, ERR_UNSUPPORTED, "model_pack_weights: the %s backend packs nothing", m->be->name);
    model_unpack_weights(m);
    const ModelConfig *c = &m->cfg;
    ModelActs *a = m->priv;
    int L = c->n_layers, H = c->hidden, I = c->inter, qd = c->n_heads * c->head_dim, qkvd = QKVD(c);
    const Backend *be = m->be;
    long per = be->pack_floats(qkvd, H, 0) + be->pack_floats(H, qd, 0) + be->pack_floats(I, H, 1) +
               be->pack_floats(H, I, 0);
    long total = per * L + be->pack_floats(c->vocab, H, 0);
    a->pk_all = xmalloc((size_t)total * sizeof(float));
    a->pk = xmalloc((size_t)L * 4 * sizeof(float *));
    float *p = a->pk_all;
    for (int l = 0; l < L; l++) {
        const LayerWeights *W = &m->w.layer[l];
        a->pk[l * 4 + 0] = p; be->pack_weights(m->bc, p, W->wqkv, qkvd, H, 0); p += be->pack_floats(qkvd, H, 0);
        a->pk[l * 4 + 1] = p; be->pack_weights(m->bc, p, W->wo, H, qd, 0); p += be->pack_floats(H, qd, 0);
        a->pk[l * 4 + 2] = p; be->pack_weights(m->bc, p, W->wgu, I, H, 1); p += be->pack_floats(I, H, 1);
        a->pk[l * 4 + 3] = p; be->pack_weights(m->bc, p, W->wd, H, I, 0); p += be->pack_floats(H, I, 0);
    }
    a->pk_lm = p;
    be->pack_weights(m->bc, p, m->w.lm_head, c->vocab, H, 0);
    log_info("model: forward weights packed once (%.1f MiB snapshot)", total * 4.0 / (1 << 20));
    return 0;
}

void model_free(Model *m) {
    if (!m) return;
    model_unpack_weights(m);
    ModelActs *a = m->priv;
    if (a) { xfree(a->layer); xfree(a->pos); xfree(a->lm_cu); xfree(a); }
    m->be->release(m->bc, m->acts);
    m->be->release(m->bc, m->params);
    m->be->release(m->bc, m->grads);
    m->be->release(m->bc, m->adam_m);
    m->be->release(m->bc, m->adam_v);
    m->be->ctx_free(m->bc);
    xfree(m->w.layer);
    xfree(m->g.layer);
    xfree(m->m.layer);
    xfree(m->v.layer);
    xfree(m->inv_freq);
    xfree(m->tensors);
    xfree(m->config_json);
    xfree(m->gen_config_json);
    xfree(m);
}

Model *model_create(const char *config_json, const ModelOptions *opt, char err[ERR_LEN]) {
    ModelConfig cfg;
    if (model_config_parse(&cfg, config_json, err)) return NULL;
    return model_build(&cfg, config_json, opt, err);
}

static char *read_text(const char *path, long max) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = xmalloc((size_t)max + 1);
    size_t n = fread(buf, 1, (size_t)max, f);
    int bad = ferror(f) || !feof(f);
    fclose(f);
    if (bad) { xfree(buf); return NULL; }
    buf[n] = 0;
    return buf;
}

static int name_is_ignorable(const char *n) {
    size_t l = strlen(n);
    return l >= 13 && !strcmp(n + l - 13, "rotary_emb.inv_freq");
}

/* ------------------------------------------------------------------------------------ host staging */
static float *slab_of(const Model *m, ModelSlab which) {
    switch (which) {
    case MODEL_PARAMS: return m->params;
    case MODEL_GRADS: return m->grads;
    case MODEL_ADAM_M: return m->adam_m;
    case MODEL_ADAM_V: return m->adam_v;
    }
    return NULL;
}
float *model__host_slab(const Model *m, ModelSlab which, int fetch) {
    float *s = slab_of(m, which);
    if (!s || m->be->host_memory) return s;
    float *h = xmalloc((size_t)m->n_params * sizeof(float));
    if (fetch) {
        m->be->to_host(m->bc, h, s, (size_t)m->n_params * sizeof(float));
        m->be->sync(m->bc);
    }
    return h;
}

void model__host_slab_done(Model *m, ModelSlab which, float *h, int dirty) {
    float *s = slab_of(m, which);
    if (!s || !h) return;
    if (h != s) {
        if (dirty) m->be->to_device(m->bc, s, h, (size_t)m->n_params * sizeof(float));
        m->be->sync(m->bc);
        xfree(h);
    }
    if (dirty && which == MODEL_PARAMS && m->be->params_refresh) m->be->params_refresh(m->bc);
}

/* Checks every tensor of the table against st (present, the config's shape) and, with params, reads it there; tensors
 * of st that are not the model's are refused. */
static int load_weights_into(Model *m, const SafeTensors *st, float *params, char err[ERR_LEN]) {
    for (int i = 0; i < m->n_tensors; i++) {
        const ModelTensor *t = &m->tensors[i];
        const StTensor *s = st_find(st, t->name);
        if (!s) return err_set(err, ERR_NOTFOUND, "tensor '%s' missing from the checkpoint", t->name);
        int ok = s->ndim == t->ndim && s->shape[0] == t->shape[0] && (t->ndim == 1 || s->shape[1] == t->shape[1]);
        if (!ok)
            return err_set(err, ERR_INVAL, "tensor '%s': shape [%lld%s%lld] disagrees with config.json (expected [%ld%s%ld])",
                           t->name, (long long)s->shape[0], s->ndim > 1 ? ", " : "", s->ndim > 1 ? (long long)s->shape[1] : 0LL,
                           t->shape[0], t->ndim > 1 ? ", " : "", t->ndim > 1 ? t->shape[1] : 0L);
        int rc = params ? st_read_f32(st, t->name, params + t->offset, (size_t)t->numel, err) : 0;
        if (rc) return rc;
    }
    for (int i = 0; i < st_count(st); i++) {
        const char *n = st_get(st, i)->name;
        if (model_tensor_find(m, n) || name_is_ignorable(n)) continue;
        if (m->cfg.tie_embeddings && !strcmp(n, "lm_head.weight")) continue;
        return err_set(err, ERR_INVAL, "tensor '%s' in the checkpoint is not part of a %s with this config", n,
                       m->cfg.arch_name);
    }
    return 0;
}

int model_load_weights(Model *m, const SafeTensors *st, char err[ERR_LEN]) {
    if (m->shard_world > 1) return err_set(err, ERR_INVAL, "model_load_weights: a sharded model holds windows, not the "
                                           "weights (its ranks read their pieces: model_read_params_range)");
    model_unpack_weights(m);          /* the packed snapshot (if any) no longer matches */
    float *h = model__host_slab(m, MODEL_PARAMS, 1);
    int rc = load_weights_into(m, st, h, err);
    model__host_slab_done(m, MODEL_PARAMS, h, 1);
    return rc;
}

Model *model_load(const char *dir, const ModelOptions *opt, char err[ERR_LEN]) {
    char path[4096];
    ModelConfig cfg;
    if (model_config_load(&cfg, dir, err)) return NULL;
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *text = read_text(path, 16 << 20);
    if (!text) { err_set(err, ERR_IO, "%s: cannot read", path); return NULL; }
    SafeTensors *st = st_open(dir, err);
    if (!st) { xfree(text); return NULL; }
    Model *m = model_build(&cfg, text, opt, err);
    xfree(text);
    if (!m) { st_close(st); return NULL; }
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    m->gen_config_json = read_text(path, 1 << 20);
    int rc = m->shard_world > 1 ? load_weights_into(m, st, NULL, err)   /* sharded: checked; the ranks read pieces */
                                : model_load_weights(m, st, err);
    st_close(st);
    if (rc) { model_free(m); return NULL; }
    return m;
}

static int write_text(const char *path, const char *text, char err[ERR_LEN]) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) return err_set(err, ERR_IO, "%s: %s", tmp, strerror(errno));
    size_t n = strlen(text);
    int bad = fwrite(text, 1, n, f) != n;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) { remove(tmp); return err_set(err, ERR_IO, "%s: write failed", path); }
    return 0;
}

int model_save(const Model *m, const char *dir, StDtype dtype, char err[ERR_LEN]) {
    if (m->shard_world > 1)
        return err_set(err, ERR_INVAL, "model_save: a sharded model holds windows (gather the parameters, model_save_params)");
    return model_save_params(m, NULL, dir, dtype, err);
}

int model_save_params(const Model *m, const float *params, const char *dir, StDtype dtype, char err[ERR_LEN]) {
    if (!params && m->shard_world > 1) return err_set(err, ERR_INVAL, "model_save_params: a sharded model needs params");
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) return err_set(err, ERR_IO, "%s: %s", dir, strerror(errno));
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    int rc = write_text(path, m->config_json, err);
    if (!rc && m->gen_config_json) {
        snprintf(path, sizeof path, "%s/generation_config.json", dir);
        rc = write_text(path, m->gen_config_json, err);
    }
    if (rc) return rc;
    StWriteTensor *t = xcalloc((size_t)m->n_tensors, sizeof *t);
    float *h = params ? (float *)params : model__host_slab(m, MODEL_PARAMS, 1);
    for (int i = 0; i < m->n_tensors; i++) {
        t[i].name = m->tensors[i].name;
        t[i].ndim = m->tensors[i].ndim;
        t[i].shape[0] = m->tensors[i].shape[0];
        t[i].shape[1] = m->tensors[i].shape[1];
        t[i].f32 = h + m->tensors[i].offset;
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    rc = st_write(path, t, m->n_tensors, dtype, NULL, 0, err);
    if (!params) model__host_slab_done((Model *)m, MODEL_PARAMS, h, 0);
    xfree(t);
    return rc;
}

int model_tensor_index(const Model *m, const char *name) {
    for (int i = 0; i < m->n_tensors; i++)
        if (!strcmp(m->tensors[i].name, name)) return i;
    return -1;
}

const ModelTensor *model_tensor_find(const Model *m, const char *name) {
    return model_tensor(m, model_tensor_index(m, name));
}

/* ------------------------------------------------------------------------------------ init / grads */
static uint64_t xorshift(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    return *s = x;
}

void model_init_random(Model *m, uint64_t seed, float std) {
    if (m->shard_world > 1) return;       /* windows only (model.h): the ranks initialize their pieces */
    model_unpack_weights(m);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    float *h = model__host_slab(m, MODEL_PARAMS, 0);
    for (long i = 0; i < m->n_params; i++) {
        double u1 = ((xorshift(&s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
        double u2 = ((xorshift(&s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
        h[i] = (float)(std * sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
    }
    const ModelConfig *c = &m->cfg;
#define HOST(p) (h + ((p) - m->params))   /* the host copy of a weight of the slab */
    for (int l = 0; l < c->n_layers; l++) {
        const LayerWeights *L = &m->w.layer[l];
        for (int d = 0; d < c->hidden; d++) HOST(L->ln1)[d] = HOST(L->ln2)[d] = 1.0f;
        if (L->qn) for (int d = 0; d < c->head_dim; d++) HOST(L->qn)[d] = HOST(L->kn)[d] = 1.0f;
        if (L->bqkv) memset(HOST(L->bqkv), 0, (size_t)QKVD(c) * sizeof(float));
    }
    for (int d = 0; d < c->hidden; d++) HOST(m->w.norm)[d] = 1.0f;
#undef HOST
    model__host_slab_done(m, MODEL_PARAMS, h, 1);
}

void model_grads_zero(Model *m) {
    if (m->grads) m->be->zero(m->bc, m->grads, (size_t)m->grad_floats * sizeof(float));
}

double model_grad_norm(const Model *m) {
    if (!m->grads) return 0.0;
    if (m->shard_world > 1) return NAN;   /* the norm is the shards' (services/learner/shard.h) */
    return sqrt(m->be->sumsq(m->bc, m->grads, m->n_params));
}

double model_grads_clip(Model *m, double max_norm) {
    double n = model_grad_norm(m);
    double coef = max_norm / (n + 1e-6);
    if (max_norm > 0 && isfinite(n) && coef < 1.0) {
        m->be->scale(m->bc, m->grads, (float)coef, m->n_params);
    }
    return n;
}


int model_read(const Model *m, ModelSlab which, float *dst, char err[ERR_LEN]) {
    const float *s = slab_of(m, which);
    if (!s || !dst) return err_set(err, ERR_INVAL, "model_read: slab %d absent (inference model?) or NULL dst", (int)which);
    if (m->shard_world > 1) return err_set(err, ERR_INVAL, "model_read: a sharded model holds windows only");
    m->be->to_host(m->bc, dst, s, (size_t)m->n_params * sizeof(float));
    m->be->sync(m->bc);
    return 0;
}

int model_write(Model *m, ModelSlab which, const float *src, char err[ERR_LEN]) {
    float *d = slab_of(m, which);
    if (!d || !src) return err_set(err, ERR_INVAL, "model_write: slab %d absent (inference model?) or NULL src", (int)which);
    if (m->shard_world > 1) return err_set(err, ERR_INVAL, "model_write: a sharded model holds windows only");
    m->be->to_device(m->bc, d, src, (size_t)m->n_params * sizeof(float));
    m->be->sync(m->bc);
    if (which == MODEL_PARAMS) model_params_changed(m);
    return 0;
}

/* ------------------------------------------------------------------------------------ accessors (model.h) */
const ModelConfig *model_config(const Model *m) { return &m->cfg; }
const char *model_config_text(const Model *m) { return m->config_json; }
const Backend *model_backend(const Model *m) { return m->be; }
long model_n_params(const Model *m) { return m->n_params; }
int model_max_tokens(const Model *m) { return m->max_tokens; }
int model_is_train(const Model *m) { return m->train; }
long model_adam_step(const Model *m) { return m->adam_step; }
void model_set_adam_step(Model *m, long step) { m->adam_step = step; }
long model_slab_floats(const Model *m) { return m->slab_floats; }
int model_n_tensors(const Model *m) { return m->n_tensors; }
const ModelTensor *model_tensor(const Model *m, int i) { return i >= 0 && i < m->n_tensors ? &m->tensors[i] : NULL; }
float *model_host_slab(const Model *m, ModelSlab which) { return m->be->host_memory ? slab_of(m, which) : NULL; }
float *model_slab(const Model *m, ModelSlab which) { return slab_of(m, which); }
void model_sync(const Model *m) { m->be->sync(m->bc); }

void model_set_progress(Model *m, ModelProgressFn fn, void *ud) {
    m->progress = fn;
    m->progress_ud = ud;
}

void model_params_changed(Model *m) {
    model_unpack_weights(m);
    if (m->be->params_refresh) m->be->params_refresh(m->bc);
}

const ModelWeights *model_views(const Model *m, ModelSlab which) {
    if (!slab_of(m, which)) return NULL;
    return which == MODEL_PARAMS ? &m->w : which == MODEL_GRADS ? &m->g : which == MODEL_ADAM_M ? &m->m : &m->v;
}

size_t model_bytes_params(const Model *m) { return (size_t)m->n_params * sizeof(float); }
size_t model_bytes_acts(const Model *m) { return m->acts_floats * sizeof(float); }

/* ------------------------------------------------------------------------------------ optimizer state */
int model_save_optimizer(const Model *m, const char *path, char err[ERR_LEN]) {
    if (!m->adam_m) return err_set(err, ERR_INVAL, "model_save_optimizer: model has no optimizer state (train=0)");
    int n = m->n_tensors;
    float *hm = model__host_slab(m, MODEL_ADAM_M, 1), *hv = model__host_slab(m, MODEL_ADAM_V, 1);
    StWriteTensor *t = xcalloc((size_t)2 * n, sizeof *t);
    char (*names)[112] = xcalloc((size_t)2 * n, sizeof *names);
    for (int i = 0; i < 2 * n; i++) {
        const ModelTensor *mt = &m->tensors[i % n];
        snprintf(names[i], sizeof names[i], "%s.%s", i < n ? "exp_avg" : "exp_avg_sq", mt->name);
        t[i] = (StWriteTensor){ .name = names[i], .ndim = mt->ndim, .shape = { mt->shape[0], mt->shape[1] },
                                .f32 = (i < n ? hm : hv) + mt->offset };
    }
    char step[32];
    snprintf(step, sizeof step, "%ld", m->adam_step);
    const char *meta[] = { "step", step };
    int rc = st_write(path, t, 2 * n, ST_F32, meta, 1, err);
    xfree(names);
    xfree(t);
    model__host_slab_done((Model *)m, MODEL_ADAM_M, hm, 0);
    model__host_slab_done((Model *)m, MODEL_ADAM_V, hv, 0);
    return rc;
}

int model_load_optimizer(Model *m, const char *path, char err[ERR_LEN]) {
    if (!m->adam_m) return err_set(err, ERR_INVAL, "model_load_optimizer: model has no optimizer state (train=0)");
    SafeTensors *st = st_open(path, err);
    if (!st) return ERR_IO;
    const char *step = st_metadata(st, "step");
    char *end = NULL;
    long s = step ? strtol(step, &end, 10) : -1;
    int rc = (!step || *end || s < 0) ? err_set(err, ERR_DECODE, "%s: metadata \"step\" missing or invalid", path) : 0;
    float *hm = model__host_slab(m, MODEL_ADAM_M, 1), *hv = model__host_slab(m, MODEL_ADAM_V, 1);
    for (int i = 0; i < 2 * m->n_tensors && !rc; i++) {
        const ModelTensor *mt = &m->tensors[i % m->n_tensors];
        char name[112];
        snprintf(name, sizeof name, "%s.%s", i < m->n_tensors ? "exp_avg" : "exp_avg_sq", mt->name);
        rc = st_read_f32(st, name, (i < m->n_tensors ? hm : hv) + mt->offset, (size_t)mt->numel, err);
    }
    model__host_slab_done(m, MODEL_ADAM_M, hm, !rc);
    model__host_slab_done(m, MODEL_ADAM_V, hv, !rc);
    if (!rc) m->adam_step = s;
    st_close(st);
    return rc;
}
