/* services/coordinator/persist.c: the run directory's files as the event loop writes them (issue 35). The engine
 * queues what is to be written as outbox actions (outbox.c: OUT_METRICS_ROW, OUT_METRICS_TRUNCATE, OUT_EVENT_LINE,
 * OUT_CKPT_FILE); run.c carries each out here, in order with the sends, after the event that queued it. Also the
 * loop's own files: run_seconds (the cron) and the metric history read back at a resume's start.
 *   trainer.default_local_dir/metrics.jsonl    one row a finished step or validation (metrics_write_jsonl)
 *   tensorboard event file                     the same rows (trainer.logger=tensorboard; io/tfevents.h)
 *   trainer.default_local_dir/events.jsonl     the dashboard's events, one JSON line each (history.c builds them)
 *   trainer.default_local_dir/coordinator.json the coordinator's checkpoint (ckpt.c builds it): temp file, fsync,
 *                                               rename, so a crash or a full disk keeps the previous one
 *   trainer.default_local_dir/run_seconds      the run's seconds, every 5 s
 * A metrics or events write that fails is logged and the run goes on (the dashboard keeps its copy in memory); a
 * coordinator.json that cannot be written comes back to the engine (EV_WRITE_FAILED, ckpt.c decides).
 * Not here: what goes into the files (history.c, ckpt.c), reading coordinator.json (ckpt.c). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "coord.h"
#include "io/tfevents.h"
#include "persist.h"

static void metrics_path(const Coord *c, char *buf, size_t n) {
    snprintf(buf, n, "%s/metrics.jsonl", c->cfg.default_local_dir);
}

static void write_row(Coord *c, long step, const Metrics *m) {
    if (c->metrics_file && metrics_write_jsonl(c->metrics_file, step, m))
        log_warn("metrics JSONL: write failed (disk full?); the dashboard keeps the history");
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (c->tb && tfevents_write_scalars(c->tb, step, (double)ts.tv_sec + ts.tv_nsec / 1e9, m))
        log_warn("tensorboard: write to %s failed (disk full?)", tfevents_path(c->tb));
}

/* The "step" of a metrics.jsonl line, or -1 when it has none (such a line is kept as it is). */
static long line_step(const char *line) {
    json_t *j = json_loads(line, 0, NULL);
    json_t *st = json_object_get(j, "step");
    long step = json_is_integer(st) ? (long)json_integer_value(st) : -1;
    json_decref(j);
    return step;
}

/* metrics.jsonl without the rows of steps after `step` (a run killed after its last checkpoint logged steps the
 * resume runs again: every step keeps one row); appends go on to the new file. */
static void truncate_rows(Coord *c, long step) {
    char path[1024], err[ERR_LEN];
    metrics_path(c, path, sizeof path);
    FILE *f = fopen(path, "r");
    if (!f) return;
    if (c->metrics_file) fflush(c->metrics_file);
    char *line = NULL, *kept = NULL;
    size_t cap = 0, kept_len = 0;
    FILE *out = open_memstream(&kept, &kept_len);
    int dropped = 0;
    while (getline(&line, &cap, f) > 0) {
        if (line_step(line) > step) dropped++;
        else if (out && fputs(line, out) == EOF) { fclose(out); out = NULL; }   /* out of memory: keep the file */
    }
    free(line);
    fclose(f);
    int kept_ok = out != NULL && fclose(out) == 0;
    if (dropped && !kept_ok) {
        log_error("resume: %d rows of steps after %ld stay in %s: out of memory while rewriting it", dropped, step, path);
    } else if (dropped) {
        if (fs_write_atomic(path, kept ? kept : "", kept_len, err)) {
            log_error("resume: %d rows of steps after %ld stay in %s: %s", dropped, step, path, err);
        } else {
            log_warn("resume: dropped %d rows of steps after %ld from %s (they are run again)", dropped, step, path);
            if (c->metrics_file) fclose(c->metrics_file);   /* the file was replaced: append to the new one */
            c->metrics_file = fopen(path, "a");
            if (!c->metrics_file) log_error("cannot reopen %s: %s", path, strerror(errno));
        }
    }
    free(kept);
}

static void write_event(Coord *c, const char *line) {
    if (!c->events_file) return;
    if (fprintf(c->events_file, "%s\n", line) < 0 || fflush(c->events_file))
        log_warn("events.jsonl: write failed (disk full?); the dashboard keeps the event");
}

static int write_ckpt(const Coord *c, const char *text, char err[ERR_LEN]) {
    char path[1024];
    int rc = fs_mkdir_p(c->cfg.default_local_dir, err);
    snprintf(path, sizeof path, "%s/coordinator.json", c->cfg.default_local_dir);
    if (!rc) rc = fs_write_atomic(path, text, strlen(text), err);
    return rc;
}

int persist_carry(Coord *c, const OutAction *a, char err[ERR_LEN]) {
    switch (a->kind) {
    case OUT_METRICS_ROW: write_row(c, (long)a->item, a->metrics); return 0;
    case OUT_METRICS_TRUNCATE: truncate_rows(c, (long)a->item); return 0;
    case OUT_EVENT_LINE: write_event(c, a->text); return 0;
    case OUT_CKPT_FILE: return write_ckpt(c, a->text, err);
    default: return err_set(err, ERR_INVAL, "persist: action %d is not a file", (int)a->kind);
    }
}

int persist_ckpt_now(const Coord *c, const char *text, char err[ERR_LEN]) { return write_ckpt(c, text, err); }

#define RUN_S_EVERY_MS 5000
void persist_run_seconds(Coord *c) {
    static int64_t last;
    if (!c->events_file || clock_ms() - last < RUN_S_EVERY_MS) return;
    last = clock_ms();
    char path[1024], text[64], err[ERR_LEN];
    snprintf(path, sizeof path, "%s/run_seconds", c->cfg.default_local_dir);
    int n = snprintf(text, sizeof text, "%.3f\n", coord_run_seconds(c));
    if (fs_write_atomic(path, text, (size_t)n, err)) log_warn("run_seconds: %s", err);
}

void persist_read_history(Coord *c) {
    char path[1024];
    metrics_path(c, path, sizeof path);
    FILE *f = fopen(path, "r");
    if (!f) return;
    char *line = NULL;
    size_t cap = 0;
    int n = 0;
    while (getline(&line, &cap, f) > 0) {
        json_t *j = json_loads(line, 0, NULL);
        json_t *st = json_object_get(j, "step");
        if (json_is_integer(st)) {
            Metrics m = {0};
            const char *k;
            json_t *v;
            json_object_foreach(j, k, v)
                if (strcmp(k, "step") && json_is_number(v)) metrics_set(&m, k, json_number_value(v));
            coord_history_append(c, (long)json_integer_value(st), &m);
            metrics_free(&m);
            n++;
        }
        json_decref(j);
    }
    free(line);
    fclose(f);
    log_info("resume: %d history entries from %s", n, path);
}
