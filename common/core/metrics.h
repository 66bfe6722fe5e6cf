/* common/core/metrics.h: one step's metrics as an ordered set of (name, value) pairs with verl's names
 * ("actor/pg_loss", "critic/score/mean", "timing_s/step", ...), and the metrics JSONL writer: one JSON object per
 * step, one line each, flushed at once so a crash loses at most the line being written.
 * Not here: computing the metrics (each owner does), the dashboard's history (coordinator). */
#ifndef DAPO_METRICS_H
#define DAPO_METRICS_H

#include <stdio.h>

#include "core/err.h"

#define METRIC_NAME_MAX 96

typedef struct {
    char   name[METRIC_NAME_MAX];
    double value;
} Metric;

typedef struct {
    Metric *m;              /* xrealloc'd, in insertion order */
    int     n, cap;
} Metrics;

/* Sets name to value (replacing an earlier value of the same name). Names longer than METRIC_NAME_MAX-1 are
 * truncated. */
void metrics_set(Metrics *ms, const char *name, double value);
/* The value of name, or `dflt` when absent. */
double metrics_get(const Metrics *ms, const char *name, double dflt);
void metrics_clear(Metrics *ms);          /* keeps the allocation */
void metrics_free(Metrics *ms);

/* Appends one line {"step": step, "<name>": value, ...} to f and flushes it. Non-finite values are written as
 * null (JSON has no NaN). Returns 0 or ERR_IO. */
int metrics_write_jsonl(FILE *f, long step, const Metrics *ms);

#endif
