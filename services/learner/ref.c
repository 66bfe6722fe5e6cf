/* services/learner/ref.c: the reference policy (see ref.h). */
#include "ref.h"

#include <stdio.h>

#include "core/log.h"
#include "io/safetensors.h"
#include "learner.h"

int ref_open(Learner *L, const Config *cfg, char err[ERR_LEN]) {
    if (L->sharded) {
        L->ref_params = xmalloc((size_t)(L->shard.local > 0 ? L->shard.local : 1) * sizeof(float));
        int rc = shard_read_pieces(&L->shard, cfg->model_path, L->ref_params, err);
        if (!rc) log_info("learner rank %d: reference policy %s: this rank's pieces, %.1f MiB (fp32)", L->rank,
                          cfg->model_path, (double)L->shard.local * 4 / (1 << 20));
        return rc;
    }
    long n = model_n_params(L->m);
    SafeTensors *st = st_open(cfg->model_path, err);
    if (!st) return ERR_IO;
    L->ref_params = xmalloc((size_t)n * sizeof(float));
    int rc = model_read_params_range(L->m, st, 0, n, L->ref_params, err);
    st_close(st);
    if (!rc) log_info("learner rank %d: reference policy %s: %ld parameters, %.1f MiB (fp32)", L->rank, cfg->model_path,
                      n, (double)n * 4 / (1 << 20));
    return rc;
}

int ref_swap(Learner *L, char err[ERR_LEN]) {
    if (L->sharded) {
        shard_swap_params(&L->shard, &L->ref_params);
        return 0;
    }
    long n = model_n_params(L->m);
    float *p = model_host_slab(L->m, MODEL_PARAMS), *r = L->ref_params;
    if (p) {
        for (long i = 0; i < n; i++) {
            float t = p[i];
            p[i] = r[i];
            r[i] = t;
        }
        model_params_changed(L->m);
        return 0;
    }
    float *tmp = xmalloc((size_t)n * sizeof(float));  /* a device backend: through host memory */
    int rc = model_read(L->m, MODEL_PARAMS, tmp, err);
    if (!rc) rc = model_write(L->m, MODEL_PARAMS, r, err);
    if (!rc) {
        L->ref_params = tmp;
        tmp = r;
    }
    xfree(tmp);
    return rc;
}

void ref_free(Learner *L) {
    if (!L) return;
    xfree(L->ref_params);
    L->ref_params = NULL;
}
