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
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "net/daemon.h"
#include "coord.h"
#include "io/tfevents.h"
#include "persist.h"

static void run_seconds_path(const Coord *c, char *buf, size_t n) {
    snprintf(buf, n, "%s/run_seconds", c->cfg.default_local_dir);
}

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
    run_seconds_path(c, path, sizeof path);
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

int persist_read_file(const char *path, char **text, char err[ERR_LEN]) {
    *text = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return errno == ENOENT ? ERR_NOTFOUND : err_set(err, ERR_IO, "%s: %s", path, strerror(errno));
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    char chunk[4096];
    size_t n;
    int bad = !out;
    while (!bad && (n = fread(chunk, 1, sizeof chunk, f)) > 0) bad = fwrite(chunk, 1, n, out) != n;
    bad |= ferror(f);
    fclose(f);
    if (out && fclose(out)) bad = 1;
    if (bad) { free(buf); return err_set(err, ERR_IO, "%s: read failed", path); }
    *text = xstrdup(buf ? buf : "");
    free(buf);
    return 0;
}

void persist_set_aside_metrics(Coord *c) {
    char path[1024], old[1100];
    snprintf(path, sizeof path, "%s/metrics.jsonl", c->cfg.default_local_dir);
    FILE *f = fopen(path, "r");
    if (!f) return;
    int empty = fgetc(f) == EOF;
    fclose(f);
    if (empty) return;
    snprintf(old, sizeof old, "%s/metrics-before-%ld.jsonl", c->cfg.default_local_dir, (long)time(NULL));
    /* an earlier run trained here without a checkpoint (a coordinator crash before the first one): its rollouts may
     * still be up, holding its later versions, so this run takes an incarnation of its own (they load version 0) */
    c->incarnation = (uint32_t)time(NULL) | 1u;
    if (rename(path, old) == 0) log_warn("a new run in %s: the earlier run's metrics moved to %s", c->cfg.default_local_dir, old);
    else log_error("a new run in %s: cannot move the earlier run's %s aside: %s", c->cfg.default_local_dir, path,
                   strerror(errno));
}

int persist_lock(Coord *c, char err[ERR_LEN]) {
    char path[1024];
    int rc = fs_mkdir_p(c->cfg.default_local_dir, err);
    if (rc) return rc;
    snprintf(path, sizeof path, "%s/coordinator.lock", c->cfg.default_local_dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return err_set(err, ERR_IO, "%s: %s", path, strerror(errno));
    /* a replacement pod starts while the old coordinator still writes its stop checkpoint: wait for it */
    int64_t until = clock_ms() + (int64_t)(c->cfg.lock_wait_s * 1000), next_log = 0;
    int locked;
    while (!(locked = flock(fd, LOCK_EX | LOCK_NB) == 0) && clock_ms() < until) {
        if (clock_ms() >= next_log) {
            log_warn("trainer.default_local_dir %s is in use by another coordinator: waiting for it to exit (up to "
                     "%.0f s more, cluster.lock_wait_s)", c->cfg.default_local_dir, (until - clock_ms()) / 1000.0);
            next_log = clock_ms() + 10000;
        }
        usleep(200000);
    }
    if (!locked) {
        char pid[32] = "";
        ssize_t n = read(fd, pid, sizeof pid - 1);
        pid[n > 0 ? n : 0] = 0;
        pid[strcspn(pid, "\n")] = 0;
        close(fd);
        return err_set(err, ERR_INVAL, "trainer.default_local_dir %s is in use by another coordinator (pid %s): two "
                       "runs must not share a checkpoint directory", c->cfg.default_local_dir, pid[0] ? pid : "?");
    }
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    if (ftruncate(fd, 0) != 0 || write(fd, pid, (size_t)len) != len)
        log_warn("%s: cannot record our pid: %s", path, strerror(errno));
    c->lock_fd = fd;                                 /* held until the process exits */
    return 0;
}

/* Reads events.jsonl's lines (any length) into the ring (the last COORD_EVENTS stay); a line that is not an event
 * object is skipped. */
static void events_read_back(Coord *c, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return;
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        json_t *j = json_loads(line, 0, NULL);
        const char *text = json_string_value(json_object_get(j, "text"));
        if (text) {
            int k = c->nevents++ % COORD_EVENTS;
            snprintf(c->events[k], sizeof c->events[k], "%s", text);
            c->event_t[k] = json_number_value(json_object_get(j, "t"));
            c->event_step[k] = (long)json_integer_value(json_object_get(j, "step"));
            coord_run_seconds_seen(c, json_number_value(json_object_get(j, "run_s")));
        }
        json_decref(j);
    }
    free(line);
    fclose(f);
}

int persist_events_open(Coord *c, char err[ERR_LEN]) {
    char path[1024], old[1100], rs_path[1024];
    snprintf(path, sizeof path, "%s/events.jsonl", c->cfg.default_local_dir);
    int n_before = c->nevents < COORD_EVENTS ? c->nevents : COORD_EVENTS, restarts = daemon_restarts();
    char before[COORD_EVENTS][200];                  /* events of this process so far: written after the old ones */
    double before_t[COORD_EVENTS];
    long before_step[COORD_EVENTS];
    for (int i = 0; i < n_before; i++) {
        int k = (c->nevents - n_before + i) % COORD_EVENTS;
        memcpy(before[i], c->events[k], sizeof before[i]);
        before_t[i] = c->event_t[k];
        before_step[i] = c->event_step[k];
    }
    int resuming = c->ckpt.has_saved || c->ckpt.has_pending || restarts > 0;
    c->nevents = 0;
    run_seconds_path(c, rs_path, sizeof rs_path);
    if (resuming) {
        events_read_back(c, path);
        FILE *rf = fopen(rs_path, "r");
        double rs = 0;
        if (rf && fscanf(rf, "%lf", &rs) == 1) coord_run_seconds_seen(c, rs);
        if (rf) fclose(rf);
    } else if (access(path, F_OK) == 0) {
        snprintf(old, sizeof old, "%s/events-before-%ld-%d.jsonl", c->cfg.default_local_dir, (long)time(NULL),
                 (int)getpid());
        if (rename(path, old) == 0) log_info("a new run: the earlier run's events moved to %s", old);
        remove(rs_path);
    }
    if (fs_mkdir_p(c->cfg.default_local_dir, err)) return ERR_IO;
    c->events_file = fopen(path, "a");
    if (!c->events_file) return err_set(err, ERR_IO, "cannot open %s: %s", path, strerror(errno));
    if (!resuming) coord_event(c, "run %s started (run config hash %016llx)", c->run_id, (unsigned long long)c->config_hash);
    else if (restarts > 0) coord_event(c, "coordinator restarted by its supervisor (restart %d)", restarts);
    for (int i = 0; i < n_before; i++) {
        int k = c->nevents++ % COORD_EVENTS;
        memcpy(c->events[k], before[i], sizeof c->events[k]);
        c->event_t[k] = before_t[i];
        c->event_step[k] = before_step[i];      /* its line was queued when it happened */
    }
    return 0;
}
