/* common/model/units.c: a sharded model's FSDP units (model.h "FSDP units"): the unit table over the flat parameter
 * vector, the windows that hold a unit's parameters and gradients while the model uses them, the hooks, the idle
 * passes (the hook calls of a pass without its work) and reading a rank's pieces of a safetensors checkpoint.
 * Not here: who holds the shards and runs the collectives (services/learner/shard.h), the passes themselves
 * (forward.c). */
#include <string.h>

#include "model/model.h"
#include "model/model_internal.h"

long model__layer_floats(const ModelConfig *c) {
    long H = c->hidden, I = c->inter, hd = c->head_dim, qd = (long)c->n_heads * hd, kvd = (long)c->n_kv_heads * hd;
    return H + (qd + 2 * kvd) * H + (c->qkv_bias ? qd + 2 * kvd : 0) + H * qd + (c->qk_norm ? 2 * hd : 0) + H +
           2 * I * H + H * I;
}

int model_n_units(const Model *m) { return m->cfg.n_layers + 2; }

int model_unit(const Model *m, int u, long *off, long *n) {
    const ModelConfig *c = &m->cfg;
    if (u < 0 || u >= model_n_units(m)) return ERR_INVAL;
    long e = (long)c->vocab * c->hidden, l = model__layer_floats(c);
    if (u == 0) { *off = 0; *n = e; }
    else if (u <= c->n_layers) { *off = e + (u - 1) * l; *n = l; }
    else { *off = e + c->n_layers * l; *n = m->n_params - *off; }
    return 0;
}

long model_unit_padded(const Model *m, int u) {
    long off, n, W = m->shard_world > 1 ? m->shard_world : 1;
    if (model_unit(m, u, &off, &n)) return 0;
    return (n + W - 1) / W * W;
}

void model_unit_piece(const Model *m, int u, int rank, int world, long *lo, long *hi) {
    long off = 0, n = 0;
    model_unit(m, u, &off, &n);
    long sz = world > 0 ? (n + world - 1) / world : n, a = sz * rank, b = sz * (rank + 1);
    *lo = off + (a < n ? a : n);
    *hi = off + (b < n ? b : n);
}

float *model_unit_window(const Model *m, ModelSlab which, int u) {
    if (m->shard_world <= 1 || u < 0 || u >= model_n_units(m)) return NULL;
    float *base = which == MODEL_PARAMS ? m->params : which == MODEL_GRADS ? m->grads : NULL;
    int slots = which == MODEL_PARAMS ? m->param_slots : 1, L = m->cfg.n_layers;
    if (!base) return NULL;
    long e = model_unit_padded(m, 0), l = model_unit_padded(m, 1);
    if (u == 0) return base;
    if (u <= L) return base + e + ((u - 1) % slots) * l;
    return base + e + slots * l;
}

void model_set_unit_hooks(Model *m, const ModelUnitHooks *h, void *ud) {
    m->hooks = h;
    m->hooks_ud = ud;
}

int model__unit_use(Model *m, int u, char err[ERR_LEN]) {
    return m->hooks ? m->hooks->use(m->hooks_ud, u, err) : 0;
}

int model__unit_grads(Model *m, int u, char err[ERR_LEN]) {
    return m->hooks ? m->hooks->grads_ready(m->hooks_ud, u, err) : 0;
}

int model__check_hooks(const Model *m, const char *what, char err[ERR_LEN]) {
    if (m->shard_world > 1 && !m->hooks)
        return err_set(err, ERR_INVAL, "%s: a sharded model (shard_world %d) needs its unit hooks (model_set_unit_hooks)",
                       what, m->shard_world);
    return 0;
}

/* The calls of model_forward's use() sequence (forward.c), nothing else. */
int model_forward_idle(Model *m, char err[ERR_LEN]) {
    int rc = model__check_hooks(m, "model_forward_idle", err), L = m->cfg.n_layers;
    for (int u = 0; u <= L + 1 && !rc; u++) rc = model__unit_use(m, u, err);
    if (!rc && m->cfg.tie_embeddings) rc = model__unit_use(m, 0, err);
    return rc;
}

/* The calls of model_backward's sequence; the gradient windows get nothing added. */
int model_backward_idle(Model *m, char err[ERR_LEN]) {
    int rc = model__check_hooks(m, "model_backward_idle", err), L = m->cfg.n_layers;
    if (!rc) rc = model__unit_use(m, L + 1, err);
    if (!rc && m->cfg.tie_embeddings) rc = model__unit_use(m, 0, err);
    if (!rc) rc = model__unit_grads(m, L + 1, err);
    for (int l = L - 1; l >= 0 && !rc; l--) {
        rc = model__unit_use(m, 1 + l, err);
        if (!rc) rc = model__unit_grads(m, 1 + l, err);
    }
    if (!rc) rc = model__unit_grads(m, 0, err);
    return rc;
}

int model_read_params_range(const Model *m, const SafeTensors *st, long lo, long hi, float *dst, char err[ERR_LEN]) {
    if (lo < 0 || hi < lo || hi > m->n_params)
        return err_set(err, ERR_INVAL, "model_read_params_range: [%ld, %ld) outside the %ld parameters", lo, hi,
                       m->n_params);
    for (int i = 0; i < m->n_tensors; i++) {
        const ModelTensor *t = &m->tensors[i];
        long a = t->offset > lo ? t->offset : lo, b = t->offset + t->numel < hi ? t->offset + t->numel : hi;
        if (a >= b) continue;
        const StTensor *s = st_find(st, t->name);
        if (!s) return err_set(err, ERR_NOTFOUND, "tensor '%s' missing from the checkpoint", t->name);
        if (s->numel != t->numel || s->ndim != t->ndim)
            return err_set(err, ERR_INVAL, "tensor '%s': %lld elements in %d dims, config.json wants %ld in %d", t->name,
                           (long long)s->numel, s->ndim, t->numel, t->ndim);
        int rc = st_read_f32_range(st, t->name, (size_t)(a - t->offset), (size_t)(b - a), dst + (a - lo), err);
        if (rc) return rc;
    }
    return 0;
}
