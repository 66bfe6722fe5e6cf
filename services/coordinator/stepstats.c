/* services/coordinator/stepstats.c: the step metrics the dashboard's panels chart (issue 20), beside verl's own
 * (steps.c batch_metrics): the response-length tail, the dynamic-sampling funnel, the split of a step's time and the
 * throughputs. Names are verl's where verl has the metric (perf/total_num_tokens, perf/time_per_step), ours otherwise.
 *   response_length/p50|p90|p99   nearest-rank percentiles of the trained responses' lengths (tokens)
 *   batch/groups_generated        groups generated and scored over the step's rounds (counts, not ratios:
 *   batch/groups_solve_none|all     batch/solve_none is verl's ratio) ... solved by none / by all of their responses
 *   batch/groups_kept|filtered    kept by (or dropped by) algorithm.filter_groups
 *   batch/groups_trained|surplus  kept and trained / kept beyond train_batch_size (not trained)
 *   batch/groups_refilled|waited  (steps.c staleness_metrics) prompts drawn at once into a filtered group's slot /
 *                                 groups that waited for fresh enough weights; batch/groups_staleness/<d> the trained
 *                                 groups d versions behind the weights that train them
 *   timing_s/reward_wait          from the step's last generated group to its batch being ready (scoring's tail)
 *   timing_s/idle                 the step's time outside generation, training and the weight sync (>= 0)
 *   perf/rollout_throughput       response tokens generated / timing_s/gen (tokens/s, every round, filtered too)
 *   perf/training_throughput      prompt + response tokens trained / timing_s/update_actor_wall (tokens/s)
 *   perf/effective_throughput     response tokens trained / timing_s/step (tokens/s: what the run keeps) */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted v[n], n >= 1. */
static double percentile(const uint32_t *v, int n, double p) {
    int k = (int)ceil(p / 100.0 * n);
    return v[k < 1 ? 0 : k > n ? n - 1 : k - 1];
}

void eng__length_metrics(Coord *c, Group **batch, int nb) {
    Engine *e = c->engine;
    int n = 0;
    for (int b = 0; b < nb; b++) n += batch[b]->n;
    if (!n) return;
    uint32_t *len = xmalloc((size_t)n * sizeof *len);
    LengthHist h = {.step = e->step, .max_len = c->cfg.max_response_length};
    n = 0;
    for (int b = 0; b < nb; b++)
        for (int i = 0; i < batch[b]->n; i++) {
            uint32_t l = (uint32_t)batch[b]->result->responses[i]->n_token_ids;
            len[n++] = l;
            long bin = h.max_len > 0 ? (long)l * LEN_BINS / h.max_len : 0;
            h.count[bin < 0 ? 0 : bin >= LEN_BINS ? LEN_BINS - 1 : bin]++;
        }
    qsort(len, (size_t)n, sizeof *len, cmp_u32);
    metrics_set(&e->m, "response_length/p50", percentile(len, n, 50));
    metrics_set(&e->m, "response_length/p90", percentile(len, n, 90));
    metrics_set(&e->m, "response_length/p99", percentile(len, n, 99));
    xfree(len);
    while (c->nlen_hist > 0 && c->len_hist[c->nlen_hist - 1].step >= h.step) c->nlen_hist--;   /* a step redone */
    XGROW(c->len_hist, c->nlen_hist, c->cap_len_hist, 64);
    c->len_hist[c->nlen_hist++] = h;
}

void eng__funnel_metrics(Engine *e, int trained) {
    metrics_set(&e->m, "batch/groups_generated", e->n_scored_groups);
    metrics_set(&e->m, "batch/groups_solve_none", e->solve_none);
    metrics_set(&e->m, "batch/groups_solve_all", e->solve_all);
    metrics_set(&e->m, "batch/groups_kept", e->kept);
    metrics_set(&e->m, "batch/groups_filtered", e->n_filtered);
    metrics_set(&e->m, "batch/groups_trained", trained);
    metrics_set(&e->m, "batch/groups_surplus", e->kept > trained ? e->kept - trained : 0);
}

void eng__split_metrics(const TrainJob *t, double now, double step_s, Metrics *out) {
    double update = t->t_trained - t->t_sent, sync = now - t->t_trained;
    double idle = step_s - t->t_gen - update - sync;
    metrics_set(out, "timing_s/reward_wait", t->t_reward_wait);
    metrics_set(out, "timing_s/idle", idle > 0 ? idle : 0);
    metrics_set(out, "perf/total_num_tokens", (double)t->batch_tokens);
    metrics_set(out, "perf/time_per_step", step_s);
    metrics_set(out, "perf/rollout_throughput", t->t_gen > 0 ? (double)t->gen_tokens / t->t_gen : 0);
    metrics_set(out, "perf/training_throughput", update > 0 ? (double)t->batch_tokens / update : 0);
    metrics_set(out, "perf/effective_throughput", step_s > 0 ? (double)t->resp_tokens / step_s : 0);
}
