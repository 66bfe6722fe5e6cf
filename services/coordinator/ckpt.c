/* services/coordinator/ckpt.c: the coordinator's checkpoint — the dataset cursor (epoch, position, prompts consumed),
 * the step and policy version, group ids and the group accounting, as of a finished step — kept in
 * trainer.default_local_dir/coordinator.json (temp file, fsync, rename: a crash or a full disk keeps the previous one).
 * ckpt.c decides what the file holds; the event loop writes it (an OUT_CKPT_FILE action, persist.c), and a write that
 * fails comes back here (ckpt_on_write_failed). The metric history is not in it: it is read back from metrics.jsonl
 * on resume.
 *
 * A checkpoint is two-sided and recorded only once both sides hold it: the coordinator writes its state of step S as
 * "pending" beside the last confirmed one ("saved"), asks learner rank 0 to save the weights of step S (Control
 * CHECKPOINT), and on its answer (Control CHECKPOINT_DONE) makes S the "saved" one. On resume the coordinator does
 * not guess: it waits for learner rank 0's Hello, which carries the policy version of the checkpoint the learner
 * loaded, and resumes whichever of "saved" and "pending" has that version — a crash between the learner writing
 * step S and the coordinator hearing of it resumes S on both sides. A learner whose version matches neither stops
 * the run with an error naming both (never a silent wait for weights that no one has).
 * Not here: the learner's own checkpoint format (services/learner, common/model/checkpoint.h). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/log.h"
#include "coord.h"

#define CKPT_FORMAT  "dapo-coordinator"
#define CKPT_VERSION 2                   /* 1: one snapshot at the top level (read as "saved") */

static void ckpt_path(const Coord *c, char *buf, size_t n) {
    snprintf(buf, n, "%s/coordinator.json", c->cfg.default_local_dir);
}

/* The fields of RunCounters and RunFaults by name (coordinator.json), in order. */
static const char *const counter_names[] = {"groups_generated", "groups_scored", "groups_solve_none",
                                            "groups_solve_all", "groups_kept", "tokens_generated", "tokens_trained",
                                            "groups_refilled", "groups_waited", "responses_continued", "reward_ok", "reward_timeout",
                                            "reward_crash", "reward_memory", "reward_error"};
static const char *const fault_names[] = {"rollbacks", "leases_reclaimed", "leases_requeued", "results_abandoned"};
_Static_assert(sizeof(RunCounters) == sizeof counter_names / sizeof counter_names[0] * sizeof(uint64_t), "names");
_Static_assert(sizeof(RunFaults) == sizeof fault_names / sizeof fault_names[0] * sizeof(uint64_t), "names");

/* n uint64_t fields as a JSON object of names[i]: v[i]. */
static json_t *u64s_to_json(const uint64_t *v, const char *const *names, size_t n) {
    json_t *o = json_object();
    for (size_t i = 0; i < n; i++) json_object_set_new(o, names[i], json_integer((json_int_t)v[i]));
    return o;
}

/* The reverse: a missing object or field reads 0 (files of older versions); a field of another type sets *bad. */
static void u64s_from_json(json_t *o, uint64_t *v, const char *const *names, size_t n, int *bad) {
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_object_get(o, names[i]);
        if (x && (!json_is_integer(x) || json_integer_value(x) < 0)) *bad = 1;
        v[i] = json_is_integer(x) ? (uint64_t)json_integer_value(x) : 0;
    }
}

static json_t *snap_to_json(const EngineSnapshot *s) {
    json_t *counts = json_object();
    for (int g = 0; g < GS_COUNT; g++)
        json_object_set_new(counts, group_state_name((GroupState)g), json_integer((json_int_t)s->group_counts[g]));
    return json_pack("{s:I, s:I, s:i, s:I, s:I, s:I, s:i, s:I, s:o, s:o}", "step", (json_int_t)s->step,
                     "policy_version", (json_int_t)s->policy_version, "epoch", s->epoch, "cursor", (json_int_t)s->cursor,
                     "consumed", (json_int_t)s->consumed, "next_group_id", (json_int_t)s->next_group_id,
                     "data_seed", s->data_seed, "n_train", (json_int_t)s->n_train, "group_counts", counts,
                     "counters", u64s_to_json((const uint64_t *)&s->counters, counter_names,
                                              sizeof counter_names / sizeof counter_names[0]));
}

static json_int_t get_int(json_t *j, const char *key, int *bad) {
    json_t *v = json_object_get(j, key);
    if (!json_is_integer(v)) { *bad = 1; return 0; }
    return json_integer_value(v);
}

/* 0, or 1 when a field is missing, has the wrong type or is out of range. */
static int snap_from_json(json_t *j, EngineSnapshot *s) {
    int bad = !json_is_object(j);
    memset(s, 0, sizeof *s);
    s->step = (long)get_int(j, "step", &bad);
    s->policy_version = get_int(j, "policy_version", &bad);
    s->epoch = (int)get_int(j, "epoch", &bad);
    s->cursor = (long)get_int(j, "cursor", &bad);
    s->consumed = (long)get_int(j, "consumed", &bad);
    s->next_group_id = (uint64_t)get_int(j, "next_group_id", &bad);
    s->data_seed = (int)get_int(j, "data_seed", &bad);
    s->n_train = (long)get_int(j, "n_train", &bad);
    json_t *counts = json_object_get(j, "group_counts");
    for (int g = 0; g < GS_COUNT; g++) {
        int missing = 0;                   /* "stale", "held" are newer than the format: absent in older files means 0 */
        s->group_counts[g] = (uint64_t)get_int(counts, group_state_name((GroupState)g),
                                               g == GS_STALE || g == GS_HELD ? &missing : &bad);
    }
    u64s_from_json(json_object_get(j, "counters"), (uint64_t *)&s->counters, counter_names,
                   sizeof counter_names / sizeof counter_names[0], &bad);
    return bad || s->step < 0 || s->cursor < 0 || s->epoch < 0 || s->policy_version < 0;
}

/* coordinator.json's text from c->ckpt (saved and pending as they are now): xmalloc'd, or NULL (encoding failed). */
char *ckpt_text(const Coord *c) {
    const CkptState *k = &c->ckpt;
    json_t *j = json_pack("{s:s, s:i, s:s, s:I, s:f}", "format", CKPT_FORMAT, "version", CKPT_VERSION, "run_id",
                          c->run_id, "incarnation", (json_int_t)c->incarnation, "run_s", coord_run_seconds(c));
    char hash[24];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)c->config_hash);   /* the run keys' (config_run_keys) */
    json_object_set_new(j, "config_hash", json_string(hash));
    if (k->has_saved) json_object_set_new(j, "saved", snap_to_json(&k->saved));
    if (k->has_pending) json_object_set_new(j, "pending", snap_to_json(&k->pending));
    json_object_set_new(j, "faults", u64s_to_json((const uint64_t *)&c->faults, fault_names,
                                                  sizeof fault_names / sizeof fault_names[0]));
    char *text = json_dumps(j, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    json_decref(j);
    char *x = text ? xstrdup(text) : NULL;
    free(text);
    return x;
}

/* coordinator.json as c->ckpt is now, queued for the loop to write (persist.c); a failure comes back as
 * EV_WRITE_FAILED (ckpt_on_write_failed). */
static void queue_file(Coord *c, CkptWrite why, long step) {
    char *text = ckpt_text(c);
    if (!text) { log_error("checkpoint: coordinator.json could not be encoded (out of memory)"); return; }
    out_text(c, OUT_CKPT_FILE, text, step, why);
}

void ckpt_faults_changed(Coord *c) {
    if (c->ckpt.has_saved || c->ckpt.has_pending) queue_file(c, CKPT_W_STATE, c->ckpt.has_saved ? c->ckpt.saved.step
                                                                                               : c->ckpt.pending.step);
}

static int learner_rank0(const Coord *c) {
    for (int i = 0; i < c->nworkers; i++)
        if (c->workers[i].role == DAPO__ROLE__ROLE_LEARNER && c->workers[i].life == WORKER_ALIVE &&
            c->workers[i].rank == 0)
            return i;
    return -1;
}

int ckpt_done(const Coord *c) {
    const CkptState *k = &c->ckpt;
    EngineSnapshot s;
    if (k->undecided || engine_snapshot(c, &s)) return 1;
    return k->has_saved ? k->saved.step == s.step : s.step == 0;
}

int ckpt_waiting(const Coord *c) {
    EngineSnapshot s;
    return c->ckpt.has_pending && c->ckpt.asked && engine_snapshot(c, &s) == 0 && c->ckpt.pending.step == s.step &&
           learner_rank0(c) >= 0;                    /* a learner gone since will not answer */
}

int ckpt_ask(Coord *c, char err[ERR_LEN]) {
    if (!engine_job_active(c) && engine_phase(c) != PH_WEIGHTS) return ckpt_request(c, err);
    EngineSnapshot s;
    if (engine_snapshot(c, &s)) return err_set(err, ERR_UNSUPPORTED, "no training run configured: nothing to checkpoint");
    if (c->ckpt.undecided)
        return err_set(err, ERR_AGAIN, "the run is resuming: waiting for learner rank 0 to say which checkpoint it loaded");
    c->ckpt.wanted = 1;
    log_info("checkpoint requested from the dashboard: asked of the learner as the step in training finishes");
    return 0;
}

CkptPhase ckpt_phase(const Coord *c) {
    if (c->ckpt.undecided || engine_phase(c) == PH_REJOIN) return CKPT_RESUMING;
    if (c->ckpt.wanted) return CKPT_REQUESTED;
    if (ckpt_done(c)) return CKPT_SAVED;
    return ckpt_waiting(c) ? CKPT_ASKED : CKPT_BEHIND;
}

const char *ckpt_phase_name(CkptPhase p) {
    static const char *const names[] = {"resuming", "asked", "saved", "behind", "requested"};
    return (unsigned)p < sizeof names / sizeof names[0] ? names[p] : "?";
}

int ckpt_request(Coord *c, char err[ERR_LEN]) {
    CkptState *k = &c->ckpt;
    EngineSnapshot s;
    if (engine_snapshot(c, &s)) return err_set(err, ERR_UNSUPPORTED, "no training run configured: nothing to checkpoint");
    if (k->undecided)
        return err_set(err, ERR_AGAIN, "the run is resuming: waiting for learner rank 0 to say which checkpoint it loaded");
    if (ckpt_done(c) || ckpt_waiting(c)) return 0;
    int wi = learner_rank0(c);
    WorkerEntry *w = wi >= 0 ? &c->workers[wi] : NULL;
    if (!w) return err_set(err, ERR_AGAIN, "learner rank 0 is not registered: it cannot save the weights of step %ld",
                           s.step);
    k->pending = s;
    k->has_pending = 1;
    k->asked = 0;
    k->n_asked = config_optim_sharded(&c->cfg) ? c->cfg.num_learners : 1;   /* sharded: every rank writes its shard */
    memset(k->confirmed, 0, sizeof k->confirmed);
    Dapo__Control m = DAPO__CONTROL__INIT;
    m.cmd = DAPO__CONTROL_CMD__CONTROL_CHECKPOINT;
    m.step = s.step;
    m.path = c->cfg.default_local_dir;
    m.reason = "coordinator checkpoint";
    char *text = ckpt_text(c);     /* the coordinator's side first (see the top comment): the loop writes the file,
                                      then sends the request; a write that fails sends nothing (ckpt_on_write_failed) */
    int rc = text ? out_ckpt_then_send(c, text, s.step, CKPT_W_ASK, w, DAPO__MSG_TYPE__MSG_CONTROL, &m.base) : ERR_NOMEM;
    if (rc) {
        k->has_pending = 0;
        return err_set(err, rc, "asking learner %s to checkpoint step %ld: %s", w->id, s.step, err_str(rc));
    }
    for (int i = 0; i < c->nworkers && k->n_asked > 1; i++) {     /* the other ranks: their optimizer shards */
        WorkerEntry *x = &c->workers[i];
        if (x->role == DAPO__ROLE__ROLE_LEARNER && x->life == WORKER_ALIVE && x->rank > 0)
            out_send(c, x, DAPO__MSG_TYPE__MSG_CONTROL, &m.base);
    }
    k->asked = 1;
    log_info("checkpoint of step %ld (policy version %lld): coordinator.json queued; learner %s is asked for the weights "
             "once it is written%s", s.step, (long long)s.policy_version, w->id,
             k->n_asked > 1 ? " (and every rank for its optimizer shard)" : "");
    return 0;
}

void ckpt_on_write_failed(Coord *c, long step, CkptWrite why, int code) {
    CkptState *k = &c->ckpt;
    char path[1024];
    ckpt_path(c, path, sizeof path);
    if (why == CKPT_W_ASK && k->has_pending && k->pending.step == step) {
        log_error("checkpoint of step %ld: %s could not be written (%s): the learner was not asked", step, path,
                  err_str(code));
        k->has_pending = k->asked = 0;
        coord_event(c, "checkpoint of step %ld not taken: coordinator.json could not be written (%s)", step,
                    err_str(code));
        if (c->stopping && !engine_job_active(c)) {
            log_error("stopping without a checkpoint of step %ld; the next start resumes step %ld", step,
                      k->has_saved ? k->saved.step : 0L);
            coord_event(c, "stopped without a checkpoint of step %ld", step);
            if (engine_phase(c) != PH_DONE) c->stop_failed = 1;   /* exit status 76: the steps since the last
                                                                     checkpoint are lost (a finished run: none) */
            out_exit(c);
        }
    } else if (why == CKPT_W_SAVED && k->has_saved && k->saved.step == step) {
        log_error("checkpoint of step %ld: the learner has it, but %s could not be written (%s): a resume still finds it "
                  "as pending", step, path, err_str(code));
        coord_event(c, "checkpoint of step %ld: coordinator.json could not be written (%s); kept as pending", step,
                    err_str(code));
        k->has_pending = 1;
        k->pending = k->saved;
    } else {
        log_error("%s could not be written (%s): it holds the state before", path, err_str(code));
    }
}

void ckpt_on_control(Coord *c, WorkerEntry *w, const Dapo__Control *m) {
    CkptState *k = &c->ckpt;
    if (m->cmd != DAPO__CONTROL_CMD__CONTROL_CHECKPOINT_DONE) {
        log_warn_limited(&k->warn_control, 10000, "worker %s sent Control %d: only CHECKPOINT_DONE goes to the "
                         "coordinator", w->id, (int)m->cmd);
        return;
    }
    if (w->rank >= (unsigned)(k->has_pending ? k->n_asked : 1)) {   /* registry.c let only learners through; rank 0 is
                                                                       asked (all ranks with a sharded optimizer) */
        c->msgs_wrong_role++;
        log_warn_limited(&k->warn_control, 10000, "learner %s (rank %u) confirmed a checkpoint it was not asked for "
                         "(ignored)", w->id, w->rank);
        return;
    }
    if (!k->has_pending || m->step != k->pending.step) {
        log_warn_limited(&k->warn_control, 10000, "learner %s confirmed a checkpoint of step %lld that was not asked "
                         "for (ignored)", w->id, (long long)m->step);
        return;
    }
    if (m->code) {
        log_error("learner %s did not checkpoint step %lld (%s): %s", w->id, (long long)m->step, err_str(m->code),
                  m->reason && m->reason[0] ? m->reason : "no reason given");
        k->has_pending = k->asked = 0;
        k->failed_step = (long)m->step;
        snprintf(k->failed_why, sizeof k->failed_why, "%s: %.200s", err_str(m->code),
                 m->reason && m->reason[0] ? m->reason : "no reason given");
        coord_event(c, "learner %.40s did not checkpoint step %lld (%s)", w->id, (long long)m->step, err_str(m->code));
        queue_file(c, CKPT_W_STATE, (long)m->step);
        return;
    }
    k->confirmed[w->rank / 8] |= (uint8_t)(1u << (w->rank % 8));
    for (int r = 0; r < k->n_asked; r++)
        if (!(k->confirmed[r / 8] & (1u << (r % 8)))) return;   /* a rank's shard still to come */
    k->saved = k->pending;
    k->has_saved = 1;
    k->has_pending = k->asked = 0;
    queue_file(c, CKPT_W_SAVED, k->saved.step);
    char path[1024];
    ckpt_path(c, path, sizeof path);
    log_info("checkpoint of step %ld complete: %s (being written) and the learner's weights under %s", k->saved.step, path,
             m->path && m->path[0] ? m->path : "(its trainer.default_local_dir)");
}

/* The history back to the steps up to `step` (a resume's start read metrics.jsonl into it: persist_read_history; a
 * rollback keeps what this process recorded), metrics.jsonl likewise (an action). 1 when the history has a
 * validation of `step` itself. */
static int trim_history(Coord *c, long step) {
    int n = 0, val_at_step = 0;
    for (int i = 0; i < c->nhistory; i++) {
        Metrics *m = &c->history[i];
        long st = (long)metrics_get(m, "step", -1);
        if (st > step) { metrics_free(m); continue; }
        for (int k = 0; k < m->n && st == step; k++)
            if (strncmp(m->m[k].name, "val-core/", 9) == 0) val_at_step = 1;
        c->history[n++] = *m;
    }
    c->nhistory = n;
    n = 0;
    for (int i = 0; i < c->nlen_hist; i++)
        if (c->len_hist[i].step <= step) c->len_hist[n++] = c->len_hist[i];
    c->nlen_hist = n;
    out_metrics_truncate(c, step);
    return val_at_step;
}

const char *ckpt_resume_file(Coord *c) {
    CkptState *k = &c->ckpt;
    if (!c->engine || c->cfg.resume_mode == CFG_RESUME_DISABLE) return NULL;
    if (c->cfg.resume_mode == CFG_RESUME_PATH)
        snprintf(k->resume_path, sizeof k->resume_path, "%s", c->cfg.resume_from_path);
    else ckpt_path(c, k->resume_path, sizeof k->resume_path);
    return k->resume_path;
}

int ckpt_resume(Coord *c, const char *text, char err[ERR_LEN]) {
    CkptState *k = &c->ckpt;
    if (!c->engine || c->cfg.resume_mode == CFG_RESUME_DISABLE) return 0;
    const char *path = k->resume_path;
    if (!text) {
        if (c->cfg.resume_mode == CFG_RESUME_PATH)
            return err_set(err, ERR_IO, "trainer.resume_from_path: %s does not exist", path);
        k->undecided = 1;                                    /* auto, nothing here: the learner must agree (step 0) */
        return 0;
    }
    json_error_t jerr;
    json_t *j = json_loads(text, 0, &jerr);
    if (!j && jerr.line > 0) return err_set(err, ERR_DECODE, "%s:%d: not a checkpoint: %s", path, jerr.line, jerr.text);
    if (!j) return err_set(err, ERR_DECODE, "%s: not a checkpoint: %s", path, jerr.text);
    const char *fmt = json_string_value(json_object_get(j, "format"));
    int bad = 0;
    json_int_t ver = get_int(j, "version", &bad);
    if (!fmt || strcmp(fmt, CKPT_FORMAT) || bad || ver < 1 || ver > CKPT_VERSION) {
        json_decref(j);
        return err_set(err, ERR_VERSION, "%s: not a dapo coordinator checkpoint of version 1 to %d (found %s version "
                       "%lld); set trainer.resume_mode=disable to start over", path, CKPT_VERSION, fmt ? fmt : "?",
                       (long long)ver);
    }
    json_t *saved = ver == 1 ? j : json_object_get(j, "saved"), *pending = json_object_get(j, "pending");
    k->has_saved = saved != NULL;
    k->has_pending = ver > 1 && pending != NULL;
    if ((k->has_saved && snap_from_json(saved, &k->saved)) || (k->has_pending && snap_from_json(pending, &k->pending))) {
        json_decref(j);
        return err_set(err, ERR_DECODE, "%s: a field is missing or has the wrong type", path);
    }
    const char *run_id = json_string_value(json_object_get(j, "run_id"));
    if (run_id && !c->cfg.run_id[0]) snprintf(c->run_id, sizeof c->run_id, "%s", run_id);
    const char *was = json_string_value(json_object_get(j, "config_hash"));   /* absent in older files */
    char now[24];
    snprintf(now, sizeof now, "%016llx", (unsigned long long)c->config_hash);
    if (was && strcmp(was, now))
        log_warn("%s: resuming a run written with another run config (hash %s, now %s): the steps from here train "
                 "with this one", path, was, now);
    /* every resume is a rollback to the checkpoint: the weights of versions after it may exist out there (rollouts
     * that ran on), so the incarnation moves on, on disk at once (a second crash must not reuse it) */
    coord_run_seconds_seen(c, json_number_value(json_object_get(j, "run_s")));   /* absent in older files: 0 */
    json_t *inc = json_object_get(j, "incarnation");
    c->incarnation = (json_is_integer(inc) ? (uint32_t)json_integer_value(inc) : 0) + 1;
    int fbad = 0;                                    /* the run's faults go on counting from the file's */
    u64s_from_json(json_object_get(j, "faults"), (uint64_t *)&c->faults, fault_names,
                   sizeof fault_names / sizeof fault_names[0], &fbad);
    if (fbad) log_warn("%s: faults: a counter is not a non-negative integer: read as 0", path);
    json_decref(j);
    k->rewrite = 1;                                  /* run.c writes the file before the loop runs */
    /* The data must be the same before anything else waits on the learner. */
    EngineSnapshot *any = k->has_saved ? &k->saved : k->has_pending ? &k->pending : NULL;
    if (any) {
        int rc = engine_check_snapshot(c, any, err);
        if (rc) return rc;
    }
    k->undecided = 1;
    engine_hold_resume(c);
    char what[96] = "";
    if (k->has_saved) snprintf(what, sizeof what, "the confirmed step %ld", k->saved.step);
    if (k->has_pending)
        snprintf(what + strlen(what), sizeof what - strlen(what), "%sthe pending step %ld", k->has_saved ? " and " : "",
                 k->pending.step);
    log_info("resume: %s holds %s; waiting for learner rank 0 to say which checkpoint it loaded", path,
             what[0] ? what : "no step");
    return 0;
}

/* The engine back to snapshot s (a resume at start, or a rollback in the run: rejoin), with the metric history of the
 * steps up to it. with_val: s already counts the validation of its step (the run's start snapshot is taken when
 * step 1 begins, after the validation before training) — counting it again would double groups.validated and
 * shift the group ids away from an undisturbed run's. */
static void restore(Coord *c, const EngineSnapshot *s, int rejoin, int with_val) {
    char err[ERR_LEN];
    if (engine_restore(c, s, err)) { engine_fail(c, "resume: %s", err); return; }
    if (rejoin) c->incarnation++;                   /* the versions after s now name other weights */
    queue_file(c, CKPT_W_STATE, s->step);
    int validated = trim_history(c, s->step);
    if (validated) {
        engine_set_last_validation(c, s->step);
        if (!with_val) engine_count_validation(c);  /* it ran after the checkpoint: its groups are not in it */
    }
    if (!validated && s->step > 0 && c->cfg.test_freq > 0 && s->step % c->cfg.test_freq == 0)
        engine_validate_next(c);                    /* the stop came before this step's validation had run */
    log_info("%s %s: step %ld, policy version %lld, epoch %d, cursor %ld", rejoin ? "rolled back to" : "resumed from",
             c->ckpt.has_saved || s->step ? c->ckpt.resume_path : "the start", s->step, (long long)s->policy_version,
             s->epoch, s->cursor);
    if (rejoin) engine_rejoin_done(c, s->step);
    else if (s->step > 0) coord_event(c, "resumed from step %ld (policy version %lld)", s->step, (long long)s->policy_version);
}

/* The resume decision, at learner rank 0's first Hello: the snapshot whose policy version is the learner's. */
static void decide(Coord *c, const WorkerEntry *w) {
    CkptState *k = &c->ckpt;
    int64_t v = w->policy_version;
    const EngineSnapshot *pick = k->has_saved && k->saved.policy_version == v     ? &k->saved
                                 : k->has_pending && k->pending.policy_version == v ? &k->pending
                                                                                    : NULL;
    int rejoin = engine_phase(c) == PH_REJOIN;
    EngineSnapshot s;
    if (!w->fresh) {                   /* it trained since it loaded its weights: its version says nothing exact */
        log_warn("resume: learner %s has trained since it started (policy version %lld in memory): asking the learners "
                 "to start again from the last checkpoint", w->id, (long long)v);
        recover_send_reload(c, -1, "the run resumes from its last checkpoint; the learner's weights are newer");
        return;                                                             /* still undecided: its next Hello decides */
    }
    if (!pick && !k->has_saved && !k->has_pending && v == 0) {             /* no checkpoint on either side */
        k->undecided = 0;
        if (!rejoin) return;                                               /* a fresh run on both sides */
        int with_val = engine_initial_snapshot(c, &s);                     /* the rollback goes back to the start */
        restore(c, &s, rejoin, with_val);
        return;
    }
    k->undecided = 0;
    if (!pick) {
        char have[128];
        const EngineSnapshot *h = k->has_saved ? &k->saved : &k->pending;
        if (k->has_saved || k->has_pending)
            snprintf(have, sizeof have, "coordinator.json holds step %ld (version %lld)%s", h->step,
                     (long long)h->policy_version, v < h->policy_version ? ": the learner's checkpoint of it is missing" : "");
        else
            snprintf(have, sizeof have, "there is no coordinator.json");
        log_info("resume: the coordinator checkpoint is %s; trainer.default_local_dir is %s", k->resume_path,
                  c->cfg.default_local_dir);
        engine_fail(c, "learner %s loaded policy version %lld but %s: both must resume the same step (same "
                    "trainer.default_local_dir; or an empty one to start over)", w->id, (long long)v, have);
        return;
    }
    s = *pick;
    if (pick == &k->pending) {
        log_info("resume: the learner confirmed step %ld before the coordinator heard of it: resuming step %ld", s.step,
                 s.step);
        k->saved = s;
        k->has_saved = 1;
    }
    k->has_pending = k->asked = 0;
    restore(c, &s, rejoin, 0);
}

void ckpt_on_learner_hello(Coord *c, const WorkerEntry *w) {
    if (!c->engine || w->role != DAPO__ROLE__ROLE_LEARNER || engine_phase(c) == PH_FAILED) return;
    int wi = (int)(w - c->workers);
    if (c->ckpt.undecided || engine_phase(c) == PH_REJOIN) {
        /* rank 0's Hello decides where to resume; any other rank must come back with a checkpoint's weights too:
         * one that trained since it started (a rank that hung past the lease timeout, or ran on while the
         * coordinator restarted) is still in the middle of the abandoned step, collective and all */
        if (w->rank == 0 && c->ckpt.undecided) decide(c, w);
        else if (!w->fresh) recover_reload_one(c, wi, "the run rolls back to its last checkpoint; this rank has trained "
                                                      "since it started");
        return;
    }
    /* it restarted from a checkpoint of another version, or while its shards of a step were out (they died with it):
     * the run goes back to that checkpoint too */
    int lost_shards = w->fresh && engine_job_active(c);
    if (w->policy_version != c->policy_version || lost_shards) {
        engine_rejoin_begin(c, w->fresh ? wi : -1, "learner %s (rank %u) came back with policy version %lld%s; the run "
                            "is at %lld", w->id, w->rank, (long long)w->policy_version,
                            lost_shards ? " while the update of a step was out" : "", (long long)c->policy_version);
        if (c->ckpt.undecided && w->fresh && w->rank == 0) decide(c, w);
    }
}
