/* common/dapo/val_metrics.h: validation metrics per data source, verl's way (ray_trainer._validate ->
 * process_validation_metrics): for each prompt's n responses, mean@n (mean accuracy), best@n (any correct) and maj@n
 * (the accuracy of the majority-voted prediction; ties: the earliest), averaged over the data source's prompts and
 * named val-core/<data_source>/acc/mean@n, .../best@n/mean, .../maj@n/mean (the last two only for n > 1, as verl).
 * best and maj are exact over the n responses (verl estimates them by bootstrap resampling; equal in expectation
 * for best@n over all n, not bit for bit). One aggregation for the coordinator's
 * validation runs, `dapo-generate --verify` and `dapo-sft`'s held-out accuracy.
 * Also pass@k with the unbiased estimator (val_agg_pass_at; dapo-eval reports it, the coordinator does not).
 * Not here: scoring a response (reward/reward.h), the metrics table (core/metrics.h). */
#ifndef DAPO_VAL_METRICS_H
#define DAPO_VAL_METRICS_H

#include "core/metrics.h"

typedef struct {
    char  *data_source;                /* owned */
    long   prompts;
    double mean_sum, best_sum, maj_sum;   /* sums over prompts, in the order they were added */
    int   *n_correct, *n_samples;      /* [prompts] per prompt: responses correct (acc >= 0.5) / scored, for pass@k */
    long   cap;
} ValSource;

typedef struct {
    int        n;          /* responses per prompt (the @n of the names) */
    ValSource *src;        /* [n_src], first-seen order */
    int        n_src, cap;
} ValAgg;

void val_agg_init(ValAgg *a, int n);
void val_agg_free(ValAgg *a);   /* NULL-safe */
/* One prompt of data_source: acc[k] (1 correct, 0 not) of its k >= 1 responses and their predictions pred[k] (the
 * extracted answers, voted on for maj@n; NULL when there are none: maj@n then takes the first response's acc). */
void val_agg_add(ValAgg *a, const char *data_source, const float *acc, const char *const *pred, int k);
/* Writes the metrics of every data source into m (source by source, in first-seen order). */
void val_agg_metrics(const ValAgg *a, Metrics *m);
/* The unbiased pass@k estimator of Chen et al. 2021 ("Evaluating Large Language Models Trained on Code", eq. 1) for
 * one problem with n samples of which c are correct: 1 - C(n-c, k) / C(n, k), computed as the product
 * 1 - prod_{i=n-c+1..n} (1 - k / i) (no large binomials). 1 <= k <= n; NAN otherwise. */
double val_pass_at_k(int n, int c, int k);
/* pass@k of source i: val_pass_at_k averaged over its prompts (NAN when a prompt has fewer than k samples). */
double val_agg_pass_at(const ValAgg *a, int i, int k);

/* mean@n over all prompts of all sources (sum of the sources' sums / prompts); 0 when empty. */
double val_agg_overall_mean(const ValAgg *a);

#endif
