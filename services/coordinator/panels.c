/* services/coordinator/panels.c: the data of the dashboard's RL panels (GET /api/panels, dashboard.c), derived
 * from the metric history and the length histograms (stepstats.c), so the page and any script read the same numbers.
 * One entry per training step (history entries with timing_s/step; validation entries are left out), fields:
 *   throughput        {effective, rollout, training}: perf/{effective,rollout,training}_throughput, tokens/s
 *   time_split        seconds of the step: generation (timing_s/gen - reward_wait), scoring_wait (timing_s/reward_wait),
 *                     old_log_prob, update (timing_s/update_actor_wall - old_log_prob), weight_sync
 *                     (timing_s/update_weights), idle (timing_s/idle)
 *   response_length   {p50, p90, p99, max, mean, clip_ratio} and hist {max_len, counts[LEN_BINS]} when kept in memory
 *                     (steps of this coordinator process; a restarted coordinator has them from its restart on)
 *   funnel            groups: generated, solve_none, solve_all, kept, dropped (filtered), trained, refilled (prompts
 *                     drawn at once into a filtered group's slot), waited (for fresh enough weights)
 *   staleness         [d = 0 .. trainer.staleness] trained groups d policy versions behind the weights that trained
 *                     them (batch/groups_staleness/<d>); [] in a synchronous run's steps before this was recorded
 *   logprob_mismatch  rollout vs learner log-probs of the trained tokens: rollout_corr/{kl, k3_kl,
 *                     log_ppl_abs_diff, abs_logprob_diff}
 * A metric that is absent is null. */
#include <jansson.h>
#include <math.h>

#include "view.h"

static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static double get(const Metrics *m, const char *name) { return metrics_get(m, name, NAN); }

/* Sets each name of names[n] in o from m[prefix + name]. */
static void copy_fields(json_t *o, const Metrics *m, const char *prefix, const char *const *names, int n) {
    for (int i = 0; i < n; i++) {
        char key[96];
        snprintf(key, sizeof key, "%s%s", prefix, names[i]);
        json_object_set_new(o, names[i], num(get(m, key)));
    }
}

static json_t *time_split(const Metrics *m) {
    double gen = get(m, "timing_s/gen"), wait = get(m, "timing_s/reward_wait");
    double olp = get(m, "timing_s/old_log_prob"), upd = get(m, "timing_s/update_actor_wall");
    json_t *o = json_object();
    json_object_set_new(o, "generation", num(isfinite(wait) ? gen - wait : gen));
    json_object_set_new(o, "scoring_wait", num(wait));
    json_object_set_new(o, "old_log_prob", num(olp));
    json_object_set_new(o, "update", num(isfinite(olp) && upd > olp ? upd - olp : upd));
    json_object_set_new(o, "weight_sync", num(get(m, "timing_s/update_weights")));
    json_object_set_new(o, "idle", num(get(m, "timing_s/idle")));
    return o;
}

static json_t *lengths(const CoordView *v, const Metrics *m, long step) {
    static const char *const f[] = {"p50", "p90", "p99", "max", "mean", "clip_ratio"};
    json_t *o = json_object();
    copy_fields(o, m, "response_length/", f, 6);
    for (int i = v->nlen_hist - 1; i >= 0; i--)
        if (v->len_hist[i].step == step) {
            json_t *h = json_object(), *counts = json_array();
            for (int b = 0; b < LEN_BINS; b++) json_array_append_new(counts, json_integer(v->len_hist[i].count[b]));
            json_object_set_new(h, "max_len", json_integer(v->len_hist[i].max_len));
            json_object_set_new(h, "counts", counts);
            json_object_set_new(o, "hist", h);
            break;
        }
    return o;
}

json_t *coord_panels_json(const CoordView *v, long since, long limit) {
    static const char *const tput[] = {"effective", "rollout", "training"};
    static const char *const mism[] = {"kl", "k3_kl", "log_ppl_abs_diff", "abs_logprob_diff"};
    json_t *steps = json_array();
    if (since < 0) since = 0;
    long end = since + limit < v->nhistory ? since + limit : v->nhistory;
    for (long i = since; i < end; i++) {
        const Metrics *m = &v->history[i];
        if (!isfinite(get(m, "timing_s/step"))) continue;                 /* a validation entry */
        long step = (long)get(m, "step");
        json_t *o = json_object(), *t = json_object(), *fu = json_object(), *lp = json_object();
        json_object_set_new(o, "step", json_integer(step));
        for (int k = 0; k < 3; k++) {
            char key[64];
            snprintf(key, sizeof key, "perf/%s_throughput", tput[k]);
            json_object_set_new(t, tput[k], num(get(m, key)));
        }
        json_object_set_new(o, "throughput", t);
        json_object_set_new(o, "time_split", time_split(m));
        json_object_set_new(o, "response_length", lengths(v, m, step));
        static const char *const fn[] = {"generated", "solve_none", "solve_all", "kept", "trained", "refilled", "waited"};
        copy_fields(fu, m, "batch/groups_", fn, 7);
        json_object_set_new(fu, "dropped", num(get(m, "batch/groups_filtered")));
        json_object_set_new(o, "funnel", fu);
        json_t *stale = json_array();
        for (int d = 0; d <= 64; d++) {
            char key[48];
            snprintf(key, sizeof key, "batch/groups_staleness/%d", d);
            double x = get(m, key);
            if (!isfinite(x)) break;
            json_array_append_new(stale, json_real(x));
        }
        json_object_set_new(o, "staleness", stale);
        copy_fields(lp, m, "rollout_corr/", mism, 4);
        json_object_set_new(o, "logprob_mismatch", lp);
        json_array_append_new(steps, o);
    }
    json_t *j = json_object();
    json_object_set_new(j, "next", json_integer(end));
    json_object_set_new(j, "total", json_integer(v->nhistory));
    json_object_set_new(j, "len_bins", json_integer(LEN_BINS));
    json_object_set_new(j, "steps", steps);
    return j;
}
