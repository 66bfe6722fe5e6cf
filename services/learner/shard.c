/* services/learner/shard.c: the learner's fully sharded state (see shard.h). */
#include "shard.h"

#include <math.h>
#include <string.h>

#include "core/clock.h"
#include "io/safetensors.h"

static int is_layer(const LearnerShard *s, int u) { return u >= 1 && u <= s->n_units - 2; }

/* floats of each rank's region of unit u's window */
static long region(const LearnerShard *s, int u) { return model_unit_padded(s->model, u) / s->world; }

static int hook_use(void *ud, int u, char err[ERR_LEN]) {
    LearnerShard *s = ud;
    if (s->fresh[u]) return 0;
    float *w = model_unit_window(s->model, MODEL_PARAMS, u);
    long r = region(s, u), k = s->hi[u] - s->lo[u];
    for (int v = 1; is_layer(s, u) && is_layer(s, v); v++)      /* a shared slot: its other layers are gone now */
        if (model_unit_window(s->model, MODEL_PARAMS, v) == w) s->fresh[v] = 0;
    memcpy(w + s->rank * r, s->p + s->pos[u], (size_t)k * sizeof(float));
    memset(w + s->rank * r + k, 0, (size_t)(r - k) * sizeof(float));
    double t0 = clock_s();
    int rc = coll_allgather(s->coll, w, r, err) ? ERR_COLLECTIVE : 0;
    s->t_comm += clock_s() - t0;
    if (!rc) s->fresh[u] = 1;
    return rc;
}

/* unit u's gradient window reduce-scattered; this rank's part added to its accumulator; the window zeroed */
static int take_grads(LearnerShard *s, int u, char err[ERR_LEN]) {
    float *w = model_unit_window(s->model, MODEL_GRADS, u);
    long r = region(s, u), k = s->hi[u] - s->lo[u];
    double t0 = clock_s();
    int rc = coll_reduce_scatter_sum(s->coll, w, r, err) ? ERR_COLLECTIVE : 0;
    s->t_comm += clock_s() - t0;
    if (rc) return rc;
    float *g = s->g + s->pos[u];
    const float *mine = w + s->rank * r;
    for (long i = 0; i < k; i++) g[i] += mine[i];
    memset(w, 0, (size_t)model_unit_padded(s->model, u) * sizeof(float));
    return 0;
}

static int hook_grads(void *ud, int u, char err[ERR_LEN]) {
    LearnerShard *s = ud;
    return is_layer(s, u) ? take_grads(s, u, err) : 0;
}

int shard_read_pieces(const LearnerShard *s, const char *dir, float *dst, char err[ERR_LEN]) {
    SafeTensors *st = st_open(dir, err);
    if (!st) return ERR_IO;
    int rc = 0;
    for (int u = 0; u < s->n_units && !rc; u++)
        rc = model_read_params_range(s->model, st, s->lo[u], s->hi[u], dst + s->pos[u], err);
    st_close(st);
    return rc;
}

void shard_swap_params(LearnerShard *s, float **other) {
    float *p = s->p;
    s->p = *other;
    *other = p;
    memset(s->fresh, 0, (size_t)s->n_units);
}

int shard_init(LearnerShard *s, Model *m, Collective *coll, int rank, int world, const char *dir, char err[ERR_LEN]) {
    memset(s, 0, sizeof *s);
    if (world < 2 || rank < 0 || rank >= world || !model_unit_window(m, MODEL_GRADS, 0) ||
        model_unit_padded(m, 0) % world)
        return err_set(err, ERR_INVAL, "learner: the model is not laid out for sharding over %d ranks "
                       "(ModelOptions.shard_world, train mode)", world);
    s->rank = rank;
    s->world = world;
    s->n = model_n_params(m);
    s->n_units = model_n_units(m);
    s->model = m;
    s->coll = coll;
    s->lo = xcalloc((size_t)s->n_units, sizeof(long));
    s->hi = xcalloc((size_t)s->n_units, sizeof(long));
    s->pos = xcalloc((size_t)s->n_units + 1, sizeof(long));
    s->fresh = xcalloc((size_t)s->n_units, 1);
    for (int u = 0; u < s->n_units; u++) {
        model_unit_piece(m, u, rank, world, &s->lo[u], &s->hi[u]);
        s->pos[u + 1] = s->pos[u] + s->hi[u] - s->lo[u];
    }
    s->local = s->pos[s->n_units];
    size_t k = (size_t)(s->local > 0 ? s->local : 1);
    s->p = xmalloc(k * sizeof(float));
    /* the weights first, the rest after: the file's mapped pages (~1/W of it) are gone before the gradient and moment
     * arrays are touched, so loading never holds both (the memory report's peak is training's) */
    int rc = shard_read_pieces(s, dir, s->p, err);
    if (rc) return rc;
    s->g = xcalloc(k, sizeof(float));
    s->m = xcalloc(k, sizeof(float));
    s->v = xcalloc(k, sizeof(float));
    s->hooks = (ModelUnitHooks){.use = hook_use, .grads_ready = hook_grads};
    model_set_unit_hooks(m, &s->hooks, s);
    return 0;
}

void shard_free(LearnerShard *s) {
    if (!s) return;
    void *a[] = {s->lo, s->hi, s->pos, s->fresh, s->p, s->g, s->m, s->v};
    for (size_t i = 0; i < sizeof a / sizeof a[0]; i++) xfree(a[i]);
    memset(s, 0, sizeof *s);
}

void shard_grads_zero(LearnerShard *s) {
    memset(s->g, 0, (size_t)s->local * sizeof(float));
    model_grads_zero(s->model);
}

int shard_vote(LearnerShard *s, int mine, int *any, char err[ERR_LEN]) {
    float x[64] = {0}, *v = s->world <= 64 ? x : xcalloc((size_t)s->world, sizeof(float));
    v[s->rank] = mine ? 1.0f : 0.0f;          /* one slot per rank: a sum of zeros and ones, exact */
    double t0 = clock_s();
    int rc = coll_allreduce_sum(s->coll, v, s->world, err) ? ERR_COLLECTIVE : 0;
    s->t_comm += clock_s() - t0;
    *any = 0;
    for (int r = 0; r < s->world; r++) *any |= v[r] > 0;
    if (v != x) xfree(v);
    return rc;
}

int shard_finish_grads(LearnerShard *s, char err[ERR_LEN]) {
    int rc = take_grads(s, 0, err);
    return rc ? rc : take_grads(s, s->n_units - 1, err);
}

int shard_grad_norm(LearnerShard *s, double *norm, char err[ERR_LEN]) {
    double mine = model_backend(s->model)->sumsq(NULL, s->g, s->local);
    /* every rank's double, exactly: as a float pair (hi + lo carries 48 of its bits) in its own slots, the others 0
     * (adding zeros is exact), then summed in rank order on every rank */
    float *x = xcalloc((size_t)2 * s->world, sizeof(float));
    x[2 * s->rank] = (float)mine;
    x[2 * s->rank + 1] = (float)(mine - (double)(float)mine);
    double t0 = clock_s();
    int rc = coll_allreduce_sum(s->coll, x, 2L * s->world, err) ? ERR_COLLECTIVE : 0;
    s->t_comm += clock_s() - t0;
    double sum = 0;
    for (int r = 0; r < s->world; r++) sum += (double)x[2 * r] + (double)x[2 * r + 1];
    xfree(x);
    *norm = sqrt(sum);
    return rc;
}

int shard_adamw(LearnerShard *s, const AdamWConfig *cfg, float lr, double norm, double max_norm, char err[ERR_LEN]) {
    if (!isfinite(lr) || lr < 0) return err_set(err, ERR_INVAL, "adamw: lr %g must be finite and >= 0", (double)lr);
    double coef = max_norm / (norm + 1e-6);           /* torch clip_grad_norm_, as model_grads_clip */
    if (max_norm > 0 && isfinite(norm) && coef < 1.0)
        for (long i = 0; i < s->local; i++) s->g[i] *= (float)coef;
    long step = model_adam_step(s->model) + 1;
    model_set_adam_step(s->model, step);
    if (s->local > 0) adamw_update(s->p, s->g, s->m, s->v, s->local, cfg, lr, step);
    memset(s->fresh, 0, (size_t)s->n_units);
    return 0;
}

int shard_gather_full(LearnerShard *s, float *full, char err[ERR_LEN]) {
    for (int u = 0; u < s->n_units; u++) {
        int rc = hook_use(s, u, err);
        if (rc) return rc;
        long off, n;
        model_unit(s->model, u, &off, &n);
        if (full) memcpy(full + off, model_unit_window(s->model, MODEL_PARAMS, u), (size_t)n * sizeof(float));
    }
    return 0;
}
