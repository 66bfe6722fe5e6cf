/* tests/support/dashboard_demo.c: the dashboard tests' synthetic steps (dashboard_demo.h), recorded through the
 * coordinator's own coord_record_step / coord_record_sample from a libuv timer. */
#include "tests/support/dashboard_demo.h"
#include "services/coordinator/persist.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "net/daemon.h"

#define DEMO_MS 200   /* one synthetic step per 200 ms */

static struct {
    uv_timer_t timer;
    int        total, done;
} g_demo;

/* Synthetic step k of the test hook: smooth curves with verl's metric names, the Run health panels' metrics and a
 * length histogram (bin b: 200 exp(-b/3), + k in the last), a validation score every 5 steps,
 * `demo/nan` = NaN at step 2 only (null in JSON, NaN in /metrics), a metric whose name needs escaping everywhere
 * (`demo/odd "name"\ é` + byte 0xFF, value 7), and one sample whose response holds an invalid
 * UTF-8 byte and HTML. train/num_gen_batches = 1 + k % 3 and demo/synthetic = 1 (the tests check them). */
static void demo_step(Coord *c, int k) {
    Metrics m = {0};
    double x = k;
    double score = -1 + 1.6 * (1 - exp(-x / 8)) + 0.05 * sin(x);
    metrics_set(&m, "demo/synthetic", 1);
    metrics_set(&m, "critic/score/mean", score);
    metrics_set(&m, "critic/score/max", 1);
    metrics_set(&m, "critic/score/min", -1);
    metrics_set(&m, "critic/rewards/mean", score);
    metrics_set(&m, "critic/advantages/mean", 0);
    metrics_set(&m, "critic/advantages/max", 1.7 + 0.1 * sin(x));
    metrics_set(&m, "actor/entropy", 0.2 + 0.9 * exp(-x / 30));
    metrics_set(&m, "actor/pg_loss", 0.01 * sin(x / 2));
    metrics_set(&m, "actor/pg_clipfrac", 0.002 + 0.001 * sin(x / 3));
    metrics_set(&m, "actor/pg_clipfrac_lower", 0.0004 + 0.0002 * cos(x / 3));
    metrics_set(&m, "actor/ppo_kl", 1e-4 * x);
    metrics_set(&m, "actor/grad_norm", 0.3 + 0.1 * cos(x));
    metrics_set(&m, "actor/lr", 1e-6);
    metrics_set(&m, "response_length/mean", 800 + 20 * x);
    metrics_set(&m, "response_length/max", fmin(20480, 4000 + 300 * x));
    metrics_set(&m, "response_length/min", 30 + x);
    metrics_set(&m, "response_length/clip_ratio", 0.01 * (k % 7));
    metrics_set(&m, "prompt_length/mean", 120);
    metrics_set(&m, "train/num_gen_batches", 1 + k % 3);
    metrics_set(&m, "batch/filtered_ratio", 0.3 + 0.1 * sin(x));
    metrics_set(&m, "batch/solve_none", 0.2 - 0.1 * (1 - exp(-x / 10)));
    metrics_set(&m, "batch/solve_all", 0.1 + 0.2 * (1 - exp(-x / 10)));
    metrics_set(&m, "batch/wasted_tokens", 1e5 * (1 + sin(x)));
    metrics_set(&m, "perf/throughput", 1500 + 50 * sin(x));
    metrics_set(&m, "perf/total_num_tokens", 5e5 + 1e4 * x);
    metrics_set(&m, "timing_s/gen", 40 + 2 * sin(x));
    metrics_set(&m, "timing_s/reward", 3 + 0.2 * cos(x));
    metrics_set(&m, "timing_s/old_log_prob", 6);
    metrics_set(&m, "timing_s/update_actor", 20 + cos(x));
    metrics_set(&m, "timing_s/step", 69 + 2 * sin(x) + 0.2 * cos(x) + cos(x));
    /* the Run health panels' inputs (panels.c): reward_wait 2, update_actor_wall 26, update_weights 1.5 -> split
     * generation gen - 2, update 20, weight_sync 1.5; funnel 12 generated = 8 kept + 4 dropped */
    metrics_set(&m, "timing_s/reward_wait", 2);
    metrics_set(&m, "timing_s/update_actor_wall", 26);
    metrics_set(&m, "timing_s/update_weights", 1.5);
    metrics_set(&m, "timing_s/idle", 0.25);
    metrics_set(&m, "perf/effective_throughput", 300 + 10 * x);
    metrics_set(&m, "perf/rollout_throughput", 900 + 20 * sin(x));
    metrics_set(&m, "perf/training_throughput", 4000 + 100 * cos(x));
    metrics_set(&m, "response_length/p50", 700 + 15 * x);
    metrics_set(&m, "response_length/p90", 2000 + 100 * x);
    metrics_set(&m, "response_length/p99", fmin(20480, 3500 + 250 * x));
    metrics_set(&m, "batch/groups_generated", 12);
    metrics_set(&m, "batch/groups_solve_none", 3);
    metrics_set(&m, "batch/groups_solve_all", 1);
    metrics_set(&m, "batch/groups_kept", 8);
    metrics_set(&m, "batch/groups_filtered", 4);
    metrics_set(&m, "batch/groups_trained", 8);
    metrics_set(&m, "rollout_corr/kl", 1e-3 * (1 + 0.5 * sin(x)));
    metrics_set(&m, "rollout_corr/k3_kl", 9e-4 * (1 + 0.5 * sin(x)));
    metrics_set(&m, "rollout_corr/log_ppl_abs_diff", 2e-3 + 1e-3 * cos(x));
    metrics_set(&m, "rollout_corr/abs_logprob_diff", 0.01 + 0.002 * sin(x));
    LengthHist h = {.step = k, .max_len = 20480};
    for (int b = 0; b < LEN_BINS; b++) h.count[b] = (uint32_t)(200 * exp(-b / 3.0)) + (b == LEN_BINS - 1 ? k : 0);
    XGROW(c->len_hist, c->nlen_hist, c->cap_len_hist, 64);
    c->len_hist[c->nlen_hist++] = h;
    if (k % 5 == 0) metrics_set(&m, "val-core/math_dapo/acc/mean@4", 0.1 + 0.3 * (1 - exp(-x / 20)));
    if (k == 2) metrics_set(&m, "demo/nan", NAN);
    metrics_set(&m, "demo/odd \"name\"\\ \xc3\xa9\xff", 7);      /* quotes, backslash, UTF-8, an invalid byte */
    c->step = k;
    coord_record_step(c, k, &m);
    if (k == 3) coord_event(c, "demo: a synthetic event (restart %u)", daemon_restarts());
    metrics_free(&m);

    char prompt[160], response[256], truth[32], pred[32];
    snprintf(prompt, sizeof prompt, "Demo prompt %d: what is %d + %d? Answer in <b>bold</b> & \"quotes\".", k, k, k);
    snprintf(truth, sizeof truth, "%d", 2 * k);
    snprintf(pred, sizeof pred, "%d", k % 3 ? 2 * k : 2 * k + 1);
    snprintf(response, sizeof response, "Synthetic response for step %d. Invalid byte: \xff here. "
             "<script>document.title='pwned'</script>\nAnswer: \\boxed{%s}", k, pred);
    SampleView s = {.step = k, .data_source = "math_dapo", .prompt = prompt, .response = response,
                    .ground_truth = truth, .pred = pred, .acc = k % 3 != 0, .response_tokens = 40 + k};
    s.score = s.acc ? 1.0f : -1.0f;
    memcpy(s.finish_reason, "stop", 5);
    coord_record_sample(c, &s);
    snprintf(c->status_line, sizeof c->status_line, "demo: synthetic step %d of %d (--demo-steps)",
             k, g_demo.total);
}

static void on_demo_timer(uv_timer_t *t) {
    Coord *c = t->data;
    demo_step(c, ++g_demo.done);
    if (g_demo.done >= g_demo.total) {
        uv_timer_stop(t);
        snprintf(c->status_line, sizeof c->status_line, "demo: all %d synthetic steps recorded", g_demo.total);
    }
}

int dashboard_demo_start(Coord *c, void *ud, char err[ERR_LEN]) {
    g_demo.total = *(const int *)ud;
    g_demo.done = 0;
    if (g_demo.total <= 0) return 0;
    log_warn("--demo-steps %d: recording synthetic metrics (the dashboard tests' coordinator, not a training run)",
             g_demo.total);
    if (persist_events_open(c, err)) return ERR_IO;    /* events.jsonl in trainer.default_local_dir, as a run's */
    snprintf(c->status_line, sizeof c->status_line, "demo: waiting for the first synthetic step");
    int rc = uv_timer_init(c->loop, &g_demo.timer);
    g_demo.timer.data = c;
    if (!rc) rc = uv_timer_start(&g_demo.timer, on_demo_timer, DEMO_MS, DEMO_MS);
    if (rc) return err_set(err, ERR_IO, "dashboard demo timer: %s", uv_strerror(rc));
    return 0;
}
