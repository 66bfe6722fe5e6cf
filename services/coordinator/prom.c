/* services/coordinator/prom.c: the coordinator's /metrics text (Prometheus text exposition format 0.0.4), built from
 * the state when the event loop publishes the dashboard's view (view.c): the latest value of every step metric
 * (prom_step_name: dapo_<sanitized name>, units as base-unit suffixes), coordinator and per-worker gauges, and the
 * run's accounting as counters (prom_counters).
 * Not here: serving it (dashboard.c), what the metrics mean (their producers). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "coord.h"
#include "engine.h"
#include "net/daemon.h"
#include "reward/math_dapo.h"

/* A map from strings to ints (open addressing, FNV-1a; strmap_* below). */
typedef struct { char *key; int val; } StrSlot;
typedef struct { StrSlot *slot; size_t cap, n; } StrMap;

/* The latest value of one step metric, under its Prometheus name (for /metrics). */
typedef struct {
    char   name[METRIC_NAME_MAX];       /* the verl name of the newest entry that set it */
    char   prom[METRIC_NAME_MAX + 16];  /* prom_step_name */
    double value;
    long   step;
} LatestMetric;

/* prom.c's own state: one coordinator per process. The latest-value table is brought up to date from
 * the (append-only) history on each /metrics request, so a scrape costs the new entries, not the whole run;
 * it lives as long as the process (reachable, so not a leak). */
static struct {
    LatestMetric *latest;
    int           nlatest, cap_latest, latest_upto;   /* history entries [0, latest_upto) are in it */
    StrMap        latest_index;                        /* prom name -> index into latest */
} g_prom;

/* A growable text buffer (xmalloc'd), for /metrics. */
typedef struct { char *s; size_t n, cap; } Buf;

static void buf_add(Buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n + 1) cap *= 2;
        b->s = xrealloc(b->s, cap);
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

static void buf_printf(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_printf(Buf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) { buf_add(b, tmp, (size_t)n); return; }
    char *big = xmalloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    buf_add(b, big, (size_t)n);
    xfree(big);
}

/* ------------------------------------------------------------------------------------------ /metrics */

/* StrMap (strings -> ints; see the typedef at the top): names already written, and the latest-value table. */

static uint64_t str_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The value of key, or -1. */
static int strmap_get(const StrMap *t, const char *key) {
    if (!t->cap) return -1;
    for (size_t k = str_hash(key) & (t->cap - 1); t->slot[k].key; k = (k + 1) & (t->cap - 1))
        if (strcmp(t->slot[k].key, key) == 0) return t->slot[k].val;
    return -1;
}

/* Inserts key -> val (key copied); returns 1 when key was new, 0 when already there (its value kept). */
static int strmap_put(StrMap *t, const char *key, int val) {
    if (2 * (t->n + 1) > t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 64;
        StrMap g = {xcalloc(cap, sizeof(StrSlot)), cap, 0};
        for (size_t i = 0; i < t->cap; i++)
            if (t->slot[i].key) {
                size_t k = str_hash(t->slot[i].key) & (cap - 1);
                while (g.slot[k].key) k = (k + 1) & (cap - 1);
                g.slot[k] = t->slot[i];
                g.n++;
            }
        xfree(t->slot);
        *t = g;
    }
    size_t k = str_hash(key) & (t->cap - 1);
    for (; t->slot[k].key; k = (k + 1) & (t->cap - 1))
        if (strcmp(t->slot[k].key, key) == 0) return 0;
    t->slot[k].key = xstrdup(key);
    t->slot[k].val = val;
    t->n++;
    return 1;
}

static int strset_add(StrMap *t, const char *key) { return strmap_put(t, key, 0); }

static void strmap_free(StrMap *t) {
    for (size_t i = 0; i < t->cap; i++) xfree(t->slot[i].key);
    xfree(t->slot);
    memset(t, 0, sizeof *t);
}

/* "dapo_" + name with every character outside [a-zA-Z0-9_:] replaced by '_' (Prometheus metric names). */
static void prom_name(const char *name, char *out, size_t n) {
    size_t k = (size_t)snprintf(out, n, "dapo_");
    for (const char *p = name; *p && k + 1 < n; p++) {
        char ch = *p;
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == ':';
        out[k++] = ok ? ch : '_';
    }
    out[k] = 0;
}

/* The Prometheus name of a step metric, with Prometheus's naming rules (promtool check metrics): units spelled out
 * as a suffix in base units ("timing_s/step" -> dapo_timing_step_seconds; "timing_per_token_ms/x" ->
 * dapo_timing_per_token_x_seconds with *scale 1e-3), and no "_total" on a gauge ("actor/skipped_updates_total" ->
 * dapo_actor_skipped_updates). The HELP line keeps the verl name. */
static void prom_step_name(const char *name, char *out, size_t n, double *scale) {
    static const struct { const char *prefix, *base; double scale; } unit[] = {
        {"timing_s/", "timing/", 1.0}, {"timing_per_token_ms/", "timing_per_token/", 1e-3},
    };
    *scale = 1.0;
    char tmp[METRIC_NAME_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s", name);
    const char *suffix = "";
    for (size_t i = 0; i < sizeof unit / sizeof unit[0]; i++) {
        size_t k = strlen(unit[i].prefix);
        if (strncmp(name, unit[i].prefix, k) == 0 && name[k]) {
            snprintf(tmp, sizeof tmp, "%s%s", unit[i].base, name + k);
            suffix = "_seconds";
            *scale = unit[i].scale;
        }
    }
    size_t len = strlen(tmp);
    if (len > 6 && !strcmp(tmp + len - 6, "_total")) tmp[len - 6] = 0;
    prom_name(tmp, out, n);
    len = strlen(out);
    snprintf(out + len, n - len, "%s", suffix);
}

/* Text for HELP lines (\\ and \n escaped) or label values (also \"), from bytes made valid UTF-8. */
static void prom_escape(Buf *b, const char *s, int label) {
    size_t n = strlen(s);
    char *u = xmalloc(3 * n + 1);
    size_t m = math_dapo_utf8_repair(s, n, u);
    for (size_t i = 0; i < m; i++) {
        char ch = u[i];
        if (ch == '\\') buf_add(b, "\\\\", 2);
        else if (ch == '\n') buf_add(b, "\\n", 2);
        else if (ch == '"' && label) buf_add(b, "\\\"", 2);
        else buf_add(b, &ch, 1);
    }
    xfree(u);
}

static void prom_value(Buf *b, double v) {
    if (isnan(v)) buf_add(b, "NaN", 3);
    else if (isinf(v)) buf_printf(b, "%cInf", v > 0 ? '+' : '-');
    else buf_printf(b, "%.17g", v);
}

static void prom_family(Buf *b, const char *name, const char *type, const char *help) {
    buf_printf(b, "# HELP %s ", name);
    prom_escape(b, help, 0);
    buf_printf(b, "\n# TYPE %s %s\n", name, type);
}

static void prom_simple(Buf *b, StrMap *seen, const char *name, const char *type, const char *help, double v) {
    if (!strset_add(seen, name)) return;
    prom_family(b, name, type, help);
    buf_printf(b, "%s ", name);
    prom_value(b, v);
    buf_add(b, "\n", 1);
}

/* The entry shown for worker i: among entries with the same (id, role), the alive one, else the latest seen. */
static int worker_shown(const Coord *c, int i) {
    const WorkerEntry *w = &c->workers[i];
    for (int j = 0; j < c->nworkers; j++) {
        const WorkerEntry *o = &c->workers[j];
        if (j == i || o->role != w->role || strcmp(o->id, w->id) != 0) continue;
        int wa = w->life == WORKER_ALIVE, oa = o->life == WORKER_ALIVE;
        if (oa != wa) { if (oa) return 0; continue; }
        if (o->last_seen_ms > w->last_seen_ms || (o->last_seen_ms == w->last_seen_ms && j > i)) return 0;
    }
    return 1;
}

typedef enum { WG_UP, WG_LOAD, WG_CREDIT, WG_BUSY, WG_CAPACITY, WG_VERSION, WG_HEARTBEAT, WG_COUNT } WorkerGauge;

static void prom_workers(const Coord *c, Buf *b, StrMap *seen) {
    static const struct { const char *name, *help; } g[WG_COUNT] = {
        {"dapo_worker_up", "1 while the worker is registered and heartbeating, 0 once lost or gone."},
        {"dapo_worker_load", "The worker's load from its last heartbeat."},
        {"dapo_worker_credit", "Items the coordinator may still send the worker."},
        {"dapo_worker_busy", "Items the worker holds (last heartbeat)."},
        {"dapo_worker_capacity", "Items the worker can hold at once (from its hello)."},
        {"dapo_worker_policy_version", "The policy version the worker holds."},
        {"dapo_worker_last_heartbeat_seconds", "Seconds since the worker was last heard from."},
    };
    int64_t now = clock_ms();
    for (int k = 0; k < WG_COUNT; k++) {
        if (!strset_add(seen, g[k].name)) continue;
        prom_family(b, g[k].name, "gauge", g[k].help);
        for (int i = 0; i < c->nworkers; i++) {
            if (!worker_shown(c, i)) continue;
            const WorkerEntry *w = &c->workers[i];
            double v = k == WG_UP ? (w->life == WORKER_ALIVE) : k == WG_LOAD ? w->load : k == WG_CREDIT ? w->credit
                     : k == WG_BUSY ? w->busy : k == WG_CAPACITY ? w->capacity
                     : k == WG_VERSION ? (double)w->policy_version : (now - w->last_seen_ms) / 1000.0;
            buf_printf(b, "%s{id=\"", g[k].name);
            prom_escape(b, w->id, 1);
            buf_printf(b, "\",role=\"%s\"} ", role_name(w->role));
            prom_value(b, v);
            buf_add(b, "\n", 1);
        }
    }
}

/* One labelled sample: name{label="value"} v. */
static void prom_labelled(Buf *b, const char *name, const char *label, const char *value, double v) {
    buf_printf(b, "%s{%s=\"", name, label);
    prom_escape(b, value, 1);
    buf_add(b, "\"} ", 3);
    prom_value(b, v);
    buf_add(b, "\n", 1);
}

/* The run's accounting as counters and the groups in flight as gauges: the dynamic-sampling funnel, reward outcomes,
 * leases, restarts, tokens (issue 38). Every counter is run-level — the accounting restored with the checkpoint (a
 * rollback or a resume takes it back to the checkpoint's values, as the group counts), the faults kept in
 * coordinator.json (never taken back), the restarts counted by the supervisors — except
 * dapo_coordinator_messages_*_total (main), which count this coordinator process's own traffic since it started. */
static void prom_counters(const Coord *c, Buf *b, StrMap *seen) {
    const Engine *e = c->engine;
    /* resuming: until learner rank 0 says which checkpoint it holds, the run's accounting is not restored yet; its
     * counters are left out (a scrape then sees no sample, not a reset to 0) and this gauge says why (issue 38) */
    prom_simple(b, seen, "dapo_coordinator_resuming", "gauge", "1 while a resumed run waits for learner rank 0 to say "
                "which checkpoint it holds; the run's counters are left out meanwhile.", c->ckpt.undecided ? 1 : 0);
    if (c->ckpt.undecided) return;
    static const struct { const char *name, *help; } fun[] = {
        {"dapo_groups_generated_total", "Training groups generated (every round, filtered ones too)."},
        {"dapo_groups_scored_total", "Training groups scored."},
        {"dapo_groups_solve_none_total", "Scored groups none of whose responses is correct."},
        {"dapo_groups_solve_all_total", "Scored groups all of whose responses are correct."},
        {"dapo_groups_kept_total", "Scored groups kept by dynamic sampling (algorithm.filter_groups): every keep, "
                                   "also of groups later dropped as stale (batch/groups_kept counts those a step holds)."},
        {"dapo_tokens_generated_total", "Response tokens generated for training groups."},
        {"dapo_tokens_trained_total", "Prompt and response tokens sent to the learners."},
        {"dapo_groups_refilled_total", "Prompts drawn at once into the slot of a filtered or cancelled group "
                                       "(algorithm.filter_groups.refill)."},
        {"dapo_groups_waited_total", "Groups that waited for a rollout with fresh enough weights "
                                     "(trainer.staleness_strategy wait)."},
        {"dapo_responses_continued_total", "Responses generated across a weight swap, their tokens from two or more "
                                           "policy versions (actor_rollout_ref.rollout.partial_rollout)."},
    };
    const RunCounters *k = &c->counters;
    const uint64_t fv[] = {k->groups_generated, k->groups_scored, k->groups_solve_none, k->groups_solve_all,
                           k->groups_kept, k->tokens_generated, k->tokens_trained, k->groups_refilled,
                           k->groups_waited, k->responses_continued};
    for (size_t i = 0; i < sizeof fv / sizeof fv[0]; i++) prom_simple(b, seen, fun[i].name, "counter", fun[i].help, (double)fv[i]);
    if (strset_add(seen, "dapo_groups_finished_total")) {
        prom_family(b, "dapo_groups_finished_total", "counter",
                    "Groups by final state over the run (from the checkpointed accounting).");
        static const GroupState fin[] = {GS_FILTERED, GS_SURPLUS, GS_CANCELLED, GS_TRAINED, GS_VALIDATED, GS_STALE};
        for (size_t i = 0; i < sizeof fin / sizeof fin[0]; i++)
            prom_labelled(b, "dapo_groups_finished_total", "state", group_state_name(fin[i]),
                          (double)c->group_counts[fin[i]]);
    }
    if (strset_add(seen, "dapo_groups_in_flight")) {
        prom_family(b, "dapo_groups_in_flight", "gauge", "Groups not finished yet, by state.");
        static const GroupState fly[] = {GS_QUEUED, GS_LEASED, GS_GENERATED, GS_SCORING, GS_KEPT, GS_HELD};
        for (size_t i = 0; i < sizeof fly / sizeof fly[0]; i++)
            prom_labelled(b, "dapo_groups_in_flight", "state", group_state_name(fly[i]), (double)c->group_counts[fly[i]]);
    }
    if (e && strset_add(seen, "dapo_reward_responses_total")) {
        prom_family(b, "dapo_reward_responses_total", "counter",
                    "Scored responses by reward outcome (timeout, crash, memory, error: scored reward_model.error_score).");
        static const char *on[5] = {"ok", "timeout", "crash", "memory", "error"};
        for (int o = 0; o < 5; o++) prom_labelled(b, "dapo_reward_responses_total", "outcome", on[o],
                                                  (double)k->reward_outcomes[o]);
    }
    if (e) {
        prom_simple(b, seen, "dapo_steps_at_learners", "gauge", "Training steps handed to the learners and not done: "
                    "the one training plus those queued behind it (trainer.staleness >= 2).",
                    (double)engine_steps_at_learners(c));
        prom_simple(b, seen, "dapo_leases_reclaimed_total", "counter",
                    "Leases taken back past cluster.max_lease_s / max_score_lease_s.", (double)c->faults.leases_reclaimed);
        prom_simple(b, seen, "dapo_leases_requeued_total", "counter",
                    "Leases of lost or re-registered workers put back in the queue.", (double)c->faults.leases_requeued);
        prom_simple(b, seen, "dapo_rollbacks_total", "counter", "Rollbacks to a checkpoint after a lost learner rank.",
                    (double)c->faults.rollbacks);
    }
    prom_simple(b, seen, "dapo_results_abandoned_total", "counter",
                "Group results dropped: generated with the weights of an abandoned run incarnation.",
                (double)c->faults.results_abandoned);
    prom_simple(b, seen, "dapo_coordinator_restarts_total", "counter", "Times the coordinator's supervisor restarted it.",
                (double)daemon_restarts());
    if (strset_add(seen, "dapo_worker_restarts_total")) {
        prom_family(b, "dapo_worker_restarts_total", "counter", "Times a worker's supervisor restarted it (its hello).");
        for (int i = 0; i < c->nworkers; i++) {
            if (!worker_shown(c, i)) continue;
            const WorkerEntry *w = &c->workers[i];
            buf_printf(b, "dapo_worker_restarts_total{id=\"");
            prom_escape(b, w->id, 1);
            buf_printf(b, "\",role=\"%s\"} %u\n", role_name(w->role), w->restarts);
        }
    }
}

/* Brings the latest-value table up to date with the history (rebuilt if the history shrank). */
static void latest_update(const Coord *c) {
    if (c->nhistory < g_prom.latest_upto) {
        strmap_free(&g_prom.latest_index);
        g_prom.nlatest = g_prom.latest_upto = 0;
    }
    for (int i = g_prom.latest_upto; i < c->nhistory; i++) {
        const Metrics *m = &c->history[i];
        long step = (long)metrics_get(m, "step", i);
        for (int k = 0; k < m->n; k++) {
            char prom[METRIC_NAME_MAX + 16];
            double scale;
            prom_step_name(m->m[k].name, prom, sizeof prom, &scale);
            int idx = strmap_get(&g_prom.latest_index, prom);
            if (idx < 0) {
                XGROW(g_prom.latest, g_prom.nlatest, g_prom.cap_latest, 64);
                idx = g_prom.nlatest++;
                strmap_put(&g_prom.latest_index, prom, idx);
                snprintf(g_prom.latest[idx].prom, sizeof g_prom.latest[idx].prom, "%s", prom);
            }
            LatestMetric *l = &g_prom.latest[idx];
            snprintf(l->name, sizeof l->name, "%s", m->m[k].name);
            l->value = m->m[k].value * scale;
            l->step = step;
        }
    }
    g_prom.latest_upto = c->nhistory;
}

char *prom_text(const Coord *c, size_t *len) {
    Buf b = {0};
    StrMap seen = {0};
    int64_t now = clock_ms();
    if (!c->ckpt.undecided) {                        /* resuming: not restored yet (no sample rather than a false 0) */
        prom_simple(&b, &seen, "dapo_coordinator_step", "gauge", "The coordinator's current training step.", (double)c->step);
        prom_simple(&b, &seen, "dapo_coordinator_policy_version", "gauge", "The current policy version.",
                    (double)c->policy_version);
    }
    prom_simple(&b, &seen, "dapo_coordinator_paused", "gauge", "1 while dispatch is paused from the dashboard.", c->paused);
    prom_simple(&b, &seen, "dapo_coordinator_uptime_seconds", "gauge", "Seconds since the coordinator started.",
                (now - c->started_ms) / 1000.0);
    prom_simple(&b, &seen, "dapo_coordinator_heap_bytes", "gauge", "Live bytes of the counted heap (xmalloc).",
                (double)xmalloc_used());
    prom_simple(&b, &seen, "dapo_coordinator_messages_in_total", "counter",
                "Worker messages received and decoded by this coordinator process (since it started).",
                (double)c->msgs_in);
    prom_simple(&b, &seen, "dapo_coordinator_messages_bad_total", "counter",
                "Worker messages dropped as malformed by this coordinator process (since it started).",
                (double)c->msgs_bad);
    prom_simple(&b, &seen, "dapo_coordinator_history_entries", "gauge", "Entries in the metric history.",
                (double)c->nhistory);
    if (strset_add(&seen, "dapo_workers_alive")) {
        prom_family(&b, "dapo_workers_alive", "gauge", "Workers alive, by role.");
        static const Dapo__Role roles[] = {DAPO__ROLE__ROLE_ROLLOUT, DAPO__ROLE__ROLE_VERIFIER, DAPO__ROLE__ROLE_LEARNER};
        for (int i = 0; i < 3; i++)
            buf_printf(&b, "dapo_workers_alive{role=\"%s\"} %d\n", role_name(roles[i]),
                       registry_count(c, roles[i], WORKER_ALIVE));
    }
    prom_workers(c, &b, &seen);
    prom_counters(c, &b, &seen);
    /* Step metrics: the latest value of each name (names first seen first). */
    latest_update(c);
    for (int i = 0; i < g_prom.nlatest; i++) {
        const LatestMetric *l = &g_prom.latest[i];
        char help[METRIC_NAME_MAX + 64];
        if (!strset_add(&seen, l->prom)) continue;       /* a coordinator or worker gauge has that name */
        snprintf(help, sizeof help, "Step metric %s (latest value, step %ld).", l->name, l->step);
        prom_family(&b, l->prom, "gauge", help);
        buf_printf(&b, "%s ", l->prom);
        prom_value(&b, l->value);
        buf_add(&b, "\n", 1);
    }
    strmap_free(&seen);
    if (!b.s) buf_add(&b, "", 0);
    *len = b.n;
    return b.s;
}
