/* services/coordinator/history.c: what the dashboard shows — the per-step metric history (also appended to the
 * metrics JSONL), the latest sampled responses, the event list (also appended to events.jsonl, read back on a
 * restart, with the run's seconds). The rows and lines to write are outbox actions (persist.c writes them). */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/log.h"
#include "coord.h"

void coord_record_step(Coord *c, long step, const Metrics *m) {
    coord_history_append(c, step, m);
    out_metrics_row(c, step, m);
}

void coord_history_append(Coord *c, long step, const Metrics *m) {
    XGROW(c->history, c->nhistory, c->cap_history, 64);
    Metrics *h = &c->history[c->nhistory++];
    memset(h, 0, sizeof *h);
    metrics_set(h, "step", (double)step);
    for (int i = 0; i < m->n; i++) metrics_set(h, m->m[i].name, m->m[i].value);
}

static char *dup_or_empty(const char *s) { return xstrdup(s ? s : ""); }

static void sample_clear(SampleView *s) {
    xfree(s->data_source); xfree(s->prompt); xfree(s->response); xfree(s->ground_truth); xfree(s->pred);
    memset(s, 0, sizeof *s);
}

void coord_record_sample(Coord *c, const SampleView *s) {
    SampleView *d = &c->samples[c->sample_next];
    sample_clear(d);
    *d = *s;
    d->data_source = dup_or_empty(s->data_source);
    d->prompt = dup_or_empty(s->prompt);
    d->response = dup_or_empty(s->response);
    d->ground_truth = dup_or_empty(s->ground_truth);
    d->pred = dup_or_empty(s->pred);
    c->sample_next = (c->sample_next + 1) % COORD_SAMPLES;
    if (c->nsamples < COORD_SAMPLES) c->nsamples++;
}

double coord_run_seconds(const Coord *c) { return c->run_s_base + (double)(clock_ms() - c->started_ms) / 1000.0; }

long coord_event_step(const Coord *c) {
    const CkptState *k = &c->ckpt;
    if (k->undecided && (k->has_saved || k->has_pending)) return k->has_saved ? k->saved.step : k->pending.step;
    EngineSnapshot s;                                /* the finished steps */
    return engine_snapshot(c, &s) == 0 ? s.step : (long)c->step;
}

/* Queues event k's line for events.jsonl (persist.c writes it where the file is open). */
static void event_write(Coord *c, int k) {
    json_t *j = json_pack("{s:f, s:I, s:f, s:s}", "t", c->event_t[k], "step", (json_int_t)c->event_step[k], "run_s",
                          coord_run_seconds(c), "text", c->events[k]);
    char *line = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(15)) : NULL;
    if (line) out_text(c, OUT_EVENT_LINE, xstrdup(line), c->event_step[k], 0);
    else log_warn("events.jsonl: an event could not be encoded; the dashboard keeps it");
    free(line);
    json_decref(j);
}

void coord_event(Coord *c, const char *fmt, ...) {
    int k = c->nevents++ % COORD_EVENTS;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->events[k], sizeof c->events[k], fmt, ap);
    va_end(ap);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    c->event_t[k] = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
    c->event_step[k] = coord_event_step(c);
    event_write(c, k);
}

/* A run_s read back (events.jsonl, run_seconds, coordinator.json) raises run_s_base: finite, 0 .. 1e9 s only. */
void coord_run_seconds_seen(Coord *c, double run_s) {
    if (isfinite(run_s) && run_s > c->run_s_base && run_s < 1e9) c->run_s_base = run_s;
}

void coord_history_free(Coord *c) {
    for (int i = 0; i < c->nhistory; i++) metrics_free(&c->history[i]);
    xfree(c->history);
    c->history = NULL;
    c->nhistory = c->cap_history = 0;
    xfree(c->len_hist);
    c->len_hist = NULL;
    c->nlen_hist = c->cap_len_hist = 0;
    for (int i = 0; i < COORD_SAMPLES; i++) sample_clear(&c->samples[i]);
    if (c->events_file) fclose(c->events_file);
    c->events_file = NULL;
    xfree(c->config_yaml);
    xfree(c->run_config);
    c->run_config = NULL;
    xfree(c->token);
    c->config_yaml = c->token = NULL;
}


