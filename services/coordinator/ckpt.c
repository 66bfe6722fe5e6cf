/* services/coordinator/ckpt.c: the coordinator's checkpoint — the dataset cursor (epoch, position, prompts consumed),
 * the step and policy version, group ids and the group accounting, as of the last finished step — written as JSON
 * to trainer.default_local_dir/coordinator.json (temp file, fsync, rename: a crash or a full disk keeps the previous
 * one). The metric history is not in it: it is read back from metrics.jsonl on resume.
 * With each save the learner ranks are asked (Control CHECKPOINT) to save the weights of that step, so both sides
 * resume from the same step. Not here: the learner's own checkpoint format (services/learner). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/fsutil.h"
#include "core/log.h"
#include "coord.h"

#define CKPT_FORMAT  "dapo-coordinator"
#define CKPT_VERSION 1

static void ckpt_path(const Coord *c, char *buf, size_t n) {
    snprintf(buf, n, "%s/coordinator.json", c->cfg.default_local_dir);
}

/* Asks every learner rank to save the weights of `step` (they skip it when they already have it). */
static void ask_learners(Coord *c, long step) {
    Dapo__Control m = DAPO__CONTROL__INIT;
    m.cmd = DAPO__CONTROL_CMD__CONTROL_CHECKPOINT;
    m.step = step;
    m.path = c->cfg.default_local_dir;
    m.reason = "coordinator checkpoint";
    for (int i = 0; i < c->nworkers; i++)
        if (c->workers[i].role == DAPO__ROLE__ROLE_LEARNER && c->workers[i].life == WORKER_ALIVE)
            coord_send(c, &c->workers[i], DAPO__MSG_TYPE__MSG_CONTROL, &m.base);
}

int ckpt_save(Coord *c, char err[ERR_LEN]) {
    EngineSnapshot s;
    if (engine_snapshot(c, &s)) return err_set(err, ERR_NOTFOUND, "no training run to checkpoint");
    json_t *counts = json_object();
    for (int g = 0; g < GS_COUNT; g++)
        json_object_set_new(counts, group_state_name((GroupState)g), json_integer((json_int_t)s.group_counts[g]));
    json_t *j = json_pack("{s:s, s:i, s:s, s:I, s:I, s:i, s:I, s:I, s:I, s:i, s:I, s:o}", "format", CKPT_FORMAT,
                          "version", CKPT_VERSION, "run_id", c->run_id, "step", (json_int_t)s.step,
                          "policy_version", (json_int_t)s.policy_version, "epoch", s.epoch,
                          "cursor", (json_int_t)s.cursor, "consumed", (json_int_t)s.consumed,
                          "next_group_id", (json_int_t)s.next_group_id, "data_seed", s.data_seed,
                          "n_train", (json_int_t)s.n_train, "group_counts", counts);
    char *text = json_dumps(j, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    json_decref(j);
    if (!text) return err_set(err, ERR_NOMEM, "checkpoint JSON encoding failed");
    char path[1024];
    int rc = fs_mkdir_p(c->cfg.default_local_dir, err);
    ckpt_path(c, path, sizeof path);
    if (!rc) rc = fs_write_atomic(path, text, strlen(text), err);
    free(text);
    if (rc) return rc;
    ask_learners(c, s.step);
    log_info("checkpoint: %s (step %ld, policy version %lld, epoch %d, cursor %ld)", path, s.step,
             (long long)s.policy_version, s.epoch, s.cursor);
    return 0;
}

static json_int_t get_int(json_t *j, const char *key, int *bad) {
    json_t *v = json_object_get(j, key);
    if (!json_is_integer(v)) { *bad = 1; return 0; }
    return json_integer_value(v);
}

/* Re-reads the metric history of steps <= step from metrics.jsonl, so the dashboard keeps its curves. */
static void reload_history(Coord *c, long step) {
    char path[1024];
    snprintf(path, sizeof path, "%s/metrics.jsonl", c->cfg.default_local_dir);
    FILE *f = fopen(path, "r");
    if (!f) return;
    char *line = NULL;
    size_t cap = 0;
    int n = 0;
    while (getline(&line, &cap, f) > 0) {
        json_t *j = json_loads(line, 0, NULL);
        json_t *st = json_object_get(j, "step");
        if (json_is_integer(st) && json_integer_value(st) <= step) {
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

int ckpt_resume(Coord *c, char err[ERR_LEN]) {
    if (!c->engine || strcmp(c->cfg.resume_mode, "disable") == 0) return 0;
    char path[1024];
    if (strcmp(c->cfg.resume_mode, "resume_path") == 0) snprintf(path, sizeof path, "%s", c->cfg.resume_from_path);
    else ckpt_path(c, path, sizeof path);
    if (access(path, F_OK) != 0) {
        if (strcmp(c->cfg.resume_mode, "resume_path") == 0)
            return err_set(err, ERR_IO, "trainer.resume_from_path: %s does not exist", path);
        return 0;                                            /* auto: nothing to resume */
    }
    json_error_t jerr;
    json_t *j = json_load_file(path, 0, &jerr);
    if (!j) return err_set(err, ERR_DECODE, "%s:%d: not a checkpoint: %s", path, jerr.line, jerr.text);
    const char *fmt = json_string_value(json_object_get(j, "format"));
    int bad = 0;
    json_int_t ver = get_int(j, "version", &bad);
    if (!fmt || strcmp(fmt, CKPT_FORMAT) || bad || ver != CKPT_VERSION) {
        json_decref(j);
        return err_set(err, ERR_VERSION, "%s: not a dapo coordinator checkpoint of version %d (found %s version %lld); "
                       "set trainer.resume_mode=disable to start over", path, CKPT_VERSION, fmt ? fmt : "?",
                       (long long)ver);
    }
    EngineSnapshot s = {0};
    s.step = (long)get_int(j, "step", &bad);
    s.policy_version = get_int(j, "policy_version", &bad);
    s.epoch = (int)get_int(j, "epoch", &bad);
    s.cursor = (long)get_int(j, "cursor", &bad);
    s.consumed = (long)get_int(j, "consumed", &bad);
    s.next_group_id = (uint64_t)get_int(j, "next_group_id", &bad);
    s.data_seed = (int)get_int(j, "data_seed", &bad);
    s.n_train = (long)get_int(j, "n_train", &bad);
    json_t *counts = json_object_get(j, "group_counts");
    for (int g = 0; g < GS_COUNT; g++) s.group_counts[g] = (uint64_t)get_int(counts, group_state_name((GroupState)g), &bad);
    const char *run_id = json_string_value(json_object_get(j, "run_id"));
    if (bad || s.step < 0 || s.cursor < 0 || s.epoch < 0) {
        json_decref(j);
        return err_set(err, ERR_DECODE, "%s: a field is missing or has the wrong type", path);
    }
    if (run_id && !c->cfg.run_id[0]) snprintf(c->run_id, sizeof c->run_id, "%s", run_id);
    json_decref(j);
    int rc = engine_restore(c, &s, err);
    if (rc) return rc;
    reload_history(c, s.step);
    log_info("resumed from %s: step %ld, policy version %lld, epoch %d, cursor %ld", path, s.step,
             (long long)s.policy_version, s.epoch, s.cursor);
    return 0;
}
