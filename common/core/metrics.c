/* common/core/metrics.c: metric sets and the JSONL writer (see metrics.h). */
#include "core/metrics.h"

#include <jansson.h>
#include <math.h>
#include <string.h>

void metrics_set(Metrics *ms, const char *name, double value) {
    for (int i = 0; i < ms->n; i++)
        if (strncmp(ms->m[i].name, name, METRIC_NAME_MAX - 1) == 0) { ms->m[i].value = value; return; }
    XGROW(ms->m, ms->n, ms->cap, 32);
    snprintf(ms->m[ms->n].name, METRIC_NAME_MAX, "%s", name);
    ms->m[ms->n++].value = value;
}

double metrics_get(const Metrics *ms, const char *name, double dflt) {
    for (int i = 0; i < ms->n; i++)
        if (strncmp(ms->m[i].name, name, METRIC_NAME_MAX - 1) == 0) return ms->m[i].value;
    return dflt;
}

void metrics_clear(Metrics *ms) { ms->n = 0; }

void metrics_free(Metrics *ms) {
    xfree(ms->m);
    memset(ms, 0, sizeof *ms);
}

int metrics_write_jsonl(FILE *f, long step, const Metrics *ms) {
    json_t *o = json_object();
    json_object_set_new(o, "step", json_integer(step));
    for (int i = 0; i < ms->n; i++)
        json_object_set_new(o, ms->m[i].name, isfinite(ms->m[i].value) ? json_real(ms->m[i].value) : json_null());
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    json_decref(o);
    if (!s) return ERR_NOMEM;
    int rc = fprintf(f, "%s\n", s) < 0 || fflush(f) ? ERR_IO : 0;
    free(s);
    return rc;
}
