/* common/dapo/val_metrics.c: per-data-source validation metrics (val_metrics.h). */
#include "dapo/val_metrics.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/err.h"

void val_agg_init(ValAgg *a, int n) { *a = (ValAgg){ .n = n }; }

void val_agg_free(ValAgg *a) {
    if (!a) return;
    for (int i = 0; i < a->n_src; i++) {
        xfree(a->src[i].data_source);
        xfree(a->src[i].n_correct);
        xfree(a->src[i].n_samples);
    }
    xfree(a->src);
    *a = (ValAgg){ 0 };
}

static ValSource *source_of(ValAgg *a, const char *ds) {
    for (int i = 0; i < a->n_src; i++)
        if (!strcmp(a->src[i].data_source, ds)) return &a->src[i];
    XGROW(a->src, a->n_src, a->cap, 4);
    a->src[a->n_src] = (ValSource){ .data_source = xstrdup(ds) };
    return &a->src[a->n_src++];
}

void val_agg_add(ValAgg *a, const char *data_source, const float *acc, const char *const *pred, int k) {
    if (k < 1) return;
    double mean = 0, best = 0;
    for (int j = 0; j < k; j++) { mean += acc[j]; best = fmax(best, acc[j]); }
    mean /= k;
    int bestj = 0, bestc = 0;       /* majority vote over predictions, ties: the earliest */
    for (int j = 0; pred && j < k; j++) {
        int cnt = 0;
        for (int q = 0; q < k; q++) cnt += strcmp(pred[j], pred[q]) == 0;
        if (cnt > bestc) { bestc = cnt; bestj = j; }
    }
    ValSource *s = source_of(a, data_source ? data_source : "");
    if (s->prompts >= s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->n_correct = xrealloc(s->n_correct, (size_t)s->cap * sizeof *s->n_correct);
        s->n_samples = xrealloc(s->n_samples, (size_t)s->cap * sizeof *s->n_samples);
    }
    int c = 0;
    for (int j = 0; j < k; j++) c += acc[j] >= 0.5f;
    s->n_correct[s->prompts] = c;
    s->n_samples[s->prompts] = k;
    s->prompts++;
    s->mean_sum += mean;
    s->best_sum += best;
    s->maj_sum += acc[bestj];
}

void val_agg_metrics(const ValAgg *a, Metrics *m) {
    char name[METRIC_NAME_MAX];
    for (int i = 0; i < a->n_src; i++) {
        const ValSource *s = &a->src[i];
        double p = (double)s->prompts;
        snprintf(name, sizeof name, "val-core/%s/acc/mean@%d", s->data_source, a->n);
        metrics_set(m, name, s->mean_sum / p);
        if (a->n < 2) continue;       /* verl: best@n and maj@n only for n > 1 */
        snprintf(name, sizeof name, "val-core/%s/acc/best@%d/mean", s->data_source, a->n);
        metrics_set(m, name, s->best_sum / p);
        snprintf(name, sizeof name, "val-core/%s/acc/maj@%d/mean", s->data_source, a->n);
        metrics_set(m, name, s->maj_sum / p);
    }
}

double val_agg_overall_mean(const ValAgg *a) {
    double sum = 0;
    long n = 0;
    for (int i = 0; i < a->n_src; i++) { sum += a->src[i].mean_sum; n += a->src[i].prompts; }
    return n ? sum / (double)n : 0;
}

double val_pass_at_k(int n, int c, int k) {
    if (k < 1 || k > n || c < 0 || c > n) return NAN;
    if (n - c < k) return 1.0;
    double miss = 1.0;                       /* C(n-c, k) / C(n, k) */
    for (int i = n - c + 1; i <= n; i++) miss *= 1.0 - (double)k / i;
    return 1.0 - miss;
}

double val_agg_pass_at(const ValAgg *a, int i, int k) {
    if (i < 0 || i >= a->n_src || a->src[i].prompts == 0) return NAN;
    const ValSource *s = &a->src[i];
    double sum = 0;
    for (long p = 0; p < s->prompts; p++) sum += val_pass_at_k(s->n_samples[p], s->n_correct[p], k);
    return sum / (double)s->prompts;
}
