/* services/learner/shard.c: the learner's sharded optimizer (see shard.h). */
#include "shard.h"

#include <math.h>
#include <string.h>

int shard_init(LearnerShard *s, const Model *m, int rank, int world, char err[ERR_LEN]) {
    memset(s, 0, sizeof *s);
    long n = model_n_params(m), slab = model_slab_floats(m);
    if (world < 2 || rank < 0 || rank >= world || slab % world || slab < n || slab - n >= world)
        return err_set(err, ERR_INVAL, "learner: the model's slabs (%ld floats for %ld parameters) are not laid out for "
                       "sharding over %d ranks (ModelOptions.shard_world)", slab, n, world);
    if (!model_host_slab(m, MODEL_GRADS))
        return err_set(err, ERR_INVAL, "learner: fsdp_config.fsdp_size shards the optimizer on the CPU backend only "
                       "(the %s backend's memory is not the host's)", model_backend(m)->name);
    s->rank = rank;
    s->world = world;
    s->n = n;
    s->shard = slab / world;
    s->lo = s->shard * rank < n ? s->shard * rank : n;
    s->hi = s->shard * (rank + 1) < n ? s->shard * (rank + 1) : n;
    long k = s->hi - s->lo;
    s->m = xcalloc((size_t)(k > 0 ? k : 1), sizeof(float));
    s->v = xcalloc((size_t)(k > 0 ? k : 1), sizeof(float));
    return 0;
}

void shard_free(LearnerShard *s) {
    if (!s) return;
    xfree(s->m);
    xfree(s->v);
    memset(s, 0, sizeof *s);
}

int shard_reduce_grads(const LearnerShard *s, Model *m, Collective *coll, int poison, char err[ERR_LEN]) {
    float *g = model_host_slab(m, MODEL_GRADS);
    if (poison)
        for (long i = 0; i < s->n; i++) g[i] = NAN;
    return coll_reduce_scatter_sum(coll, g, s->shard, err) ? ERR_COLLECTIVE : 0;
}

int shard_grad_norm(const LearnerShard *s, const Model *m, Collective *coll, double *norm, char err[ERR_LEN]) {
    const float *g = model_host_slab(m, MODEL_GRADS);
    double mine = model_backend(m)->sumsq(NULL, g + s->lo, s->hi - s->lo);
    /* every rank's double, exactly: as a float pair (hi + lo carries 48 of its bits) in its own slots, the others 0
     * (adding zeros is exact), then summed in rank order on every rank */
    float *x = xcalloc((size_t)2 * s->world, sizeof(float));
    x[2 * s->rank] = (float)mine;
    x[2 * s->rank + 1] = (float)(mine - (double)(float)mine);
    int rc = coll_allreduce_sum(coll, x, 2L * s->world, err) ? ERR_COLLECTIVE : 0;
    double sum = 0;
    for (int r = 0; r < s->world; r++) sum += (double)x[2 * r] + (double)x[2 * r + 1];
    xfree(x);
    *norm = sqrt(sum);
    return rc;
}

int shard_adamw(LearnerShard *s, Model *m, const AdamWConfig *cfg, float lr, double norm, double max_norm,
                char err[ERR_LEN]) {
    if (!isfinite(lr) || lr < 0) return err_set(err, ERR_INVAL, "adamw: lr %g must be finite and >= 0", (double)lr);
    float *p = model_host_slab(m, MODEL_PARAMS), *g = model_host_slab(m, MODEL_GRADS);
    long k = s->hi - s->lo;
    double coef = max_norm / (norm + 1e-6);           /* torch clip_grad_norm_, as model_grads_clip */
    if (max_norm > 0 && isfinite(norm) && coef < 1.0)
        for (long i = 0; i < k; i++) g[s->lo + i] *= (float)coef;
    long step = model_adam_step(m) + 1;
    model_set_adam_step(m, step);
    if (k > 0) adamw_update(p + s->lo, g + s->lo, s->m, s->v, k, cfg, lr, step);
    return 0;
}

int shard_gather_params(const LearnerShard *s, Model *m, Collective *coll, char err[ERR_LEN]) {
    int rc = coll_allgather(coll, model_host_slab(m, MODEL_PARAMS), s->shard, err) ? ERR_COLLECTIVE : 0;
    model_params_changed(m);
    return rc;
}
