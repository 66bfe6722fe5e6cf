/* services/coordinator/history.c: what the dashboard shows — the per-step metric history (also appended to the
 * metrics JSONL), the latest sampled responses — and the control actions behind /api/control/.... */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "coord.h"
#include "io/tfevents.h"

void coord_record_step(Coord *c, long step, const Metrics *m) {
    coord_history_append(c, step, m);
    if (c->metrics_file && metrics_write_jsonl(c->metrics_file, step, m))
        log_warn("metrics JSONL: write failed (disk full?); the dashboard keeps the history");
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (c->tb && tfevents_write_scalars(c->tb, step, (double)ts.tv_sec + ts.tv_nsec / 1e9, m))
        log_warn("tensorboard: write to %s failed (disk full?)", tfevents_path(c->tb));
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

void coord_event(Coord *c, const char *fmt, ...) {
    int k = c->nevents++ % COORD_EVENTS;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->events[k], sizeof c->events[k], fmt, ap);
    va_end(ap);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    c->event_t[k] = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void coord_history_reset(Coord *c) {
    for (int i = 0; i < c->nhistory; i++) metrics_free(&c->history[i]);
    c->nhistory = 0;
    c->nlen_hist = 0;
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
    xfree(c->config_yaml);
    xfree(c->token);
    c->config_yaml = c->token = NULL;
}

void coord_pause(Coord *c) {
    if (!c->paused) log_info("paused from the dashboard: no new groups are dispatched");
    c->paused = 1;
}

void coord_resume(Coord *c) {
    if (c->paused) log_info("resumed from the dashboard");
    c->paused = 0;
}
