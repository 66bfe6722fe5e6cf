/* services/coordinator/setup.c: the training engine's setup and state (engine.h): engine_start (datasets, tokenizer,
 * total steps as verl derives them), snapshots for checkpoints and restore, the /api/status fields, engine_free. */
#include "engine.h"
#include "model/model_config.h"
#include "settings/settings.h"
#include "net/daemon.h"

/* ------------------------------------------------------------------------------------------------ setup */

static int load_files(Engine *e, Dataset *ds, const StrList *files, const DatasetOptions *o, char err[ERR_LEN]) {
    for (int i = 0; i < files->n; i++) {
        int rc = dataset_load(ds, files->v[i], e->tok, o, err);
        if (rc) return rc;
    }
    return 0;
}

int engine_start(Coord *c, char err[ERR_LEN]) {
    c->ckpt.failed_step = -1;
    if (!c->cfg.train_files.n) {
        eng__status(c, "no data.train_files configured: serving the worker registry only");
        return 0;
    }
    Engine *e = c->engine = xcalloc(1, sizeof *e);
    e->final_ckpt_step = -1;
    const char *tdir = c->cfg.tokenizer_path[0] ? c->cfg.tokenizer_path : c->cfg.model_path;
    if (!tdir[0]) return err_set(err, ERR_INVAL, "data.tokenizer (or actor_rollout_ref.model.path) is needed to read prompts");
    e->tok = tokenizer_load(tdir, err);
    if (!e->tok) return ERR_INVAL;
    e->n_stop = tokenizer_stop_ids(e->tok, e->stop_ids);
    DatasetOptions o;
    int rc = settings_dataset_options(&c->cfg, e->tok, &o, err);
    if (!rc) rc = load_files(e, &e->train, &c->cfg.train_files, &o, err);
    if (!rc) {
        o.max_items = c->cfg.val_max_samples;
        rc = load_files(e, &e->val, &c->cfg.val_files, &o, err);
    }
    e->fmetric = settings_filter_metric(&c->cfg);
    ModelConfig mc;                                   /* the vocabulary a response's token ids must lie in */
    char merr[ERR_LEN];
    if (c->cfg.model_path[0] && model_config_load(&mc, c->cfg.model_path, merr) == 0) e->vocab = mc.vocab;
    else log_info("token ids of responses are not checked against the model's vocabulary: %s",
                  c->cfg.model_path[0] ? merr : "no actor_rollout_ref.model.path");
    const RolloutCorrConfig corr = c->corr;          /* the learners apply it; parsed at start (run.c) */
    if (rc) return rc;
    if (config_staleness(&c->cfg) >= 1 && !corr.bypass && !corr.is_on && !corr.n_rs)
        log_warn("trainer.staleness %d with algorithm.rollout_correction.rollout_is and rollout_rs off: rows up to %d "
                 "policy versions old are trained as if on-policy (no importance weight corrects the behaviour policy); "
                 "remove rollout_is: null to get token-level truncated IS at 2.0", config_staleness(&c->cfg), config_staleness(&c->cfg));
    else if (corr.bypass)
        log_info("rollout correction: bypass mode (the rollout log-probs are the old policy; no IS weight, as verl's "
                 "ppo_clip), %d rejection criteria", corr.n_rs);
    else if (corr.is_on || corr.n_rs)
        log_info("rollout correction: %s%s IS%s%s, %d rejection criteria", corr.is_on ? "" : "no",
                 corr.is_on ? (corr.is_level == ROLLOUT_IS_TOKEN ? "token-level" : "sequence-level") : "",
                 corr.is_on ? (corr.is_lower > 0 ? " (IcePop)" : " (truncated)") : "", corr.is_auto ? " (auto: async)" : "",
                 corr.n_rs);
    log_info("advantages: %s (norm_adv_by_std_in_grpo %s)", adv_estimator_name(settings_adv_estimator(&c->cfg)),
             c->cfg.norm_adv_by_std_in_grpo ? "true" : "false");
    if (!e->train.n) return err_set(err, ERR_INVAL, "data.train_files: no usable prompts");
    e->order = xmalloc(e->train.n * sizeof *e->order);
    eng__shuffle_epoch(c);
    e->next_group_id = 1;
    e->last_val_step = -1;
    /* verl (ray_trainer._create_dataloader): total_training_steps = len(train_dataloader) * total_epochs, the
     * dataloader yielding whole batches of gen_batch_size prompts (drop_last); the lr schedule and "the last step"
     * (its checkpoint and validation) use it; the data may run out before it when groups are filtered */
    e->total_steps = c->cfg.total_training_steps > 0 ? c->cfg.total_training_steps
                   : (long)(e->train.n / (size_t)config_gen_batch_size(&c->cfg)) * c->cfg.total_epochs;
    if (e->total_steps <= 0)       /* verl would train nothing; we train until the data runs out (no schedule length) */
        log_warn("data.train_files: %zu usable prompts are fewer than data.gen_batch_size (%d): no step count can be "
                 "derived; training runs until the data is used up (set trainer.total_training_steps for a decaying "
                 "lr schedule)", e->train.n, config_gen_batch_size(&c->cfg));
    e->snap = (EngineSnapshot){.next_group_id = 1, .data_seed = c->cfg.data_seed, .n_train = (long)e->train.n};
    log_info("data: %zu train prompts (%zu malformed, %zu filtered as overlong), %zu validation prompts; "
             "stop ids %d", e->train.n, e->train.n_malformed, e->train.n_filtered, e->val.n, e->n_stop);
    return 0;
}

int engine_snapshot(const Coord *c, EngineSnapshot *out) {
    if (!c->engine) return ERR_NOTFOUND;
    *out = c->engine->snap;
    return 0;
}

int engine_check_snapshot(const Coord *c, const EngineSnapshot *s, char err[ERR_LEN]) {
    const Engine *e = c->engine;
    if (!e) return err_set(err, ERR_NOTFOUND, "no training data configured");
    if (s->n_train != (long)e->train.n || s->data_seed != c->cfg.data_seed)
        return err_set(err, ERR_INVAL, "the checkpoint was taken with %ld training prompts and data.seed %d; now there "
                       "are %zu and data.seed is %d: resume with the same data, or set trainer.resume_mode=disable",
                       s->n_train, s->data_seed, e->train.n, c->cfg.data_seed);
    return 0;
}

void engine_set_last_validation(Coord *c, long step) {
    if (c->engine) c->engine->last_val_step = step;
}

void engine_validate_next(Coord *c) {
    if (c->engine && c->engine->val.n) c->engine->val_pending = 1;
}

void engine_hold_resume(Coord *c) {
    if (c->engine) c->engine->val_started = 1;          /* validation before training belongs to a fresh run */
}

int engine_restore(Coord *c, const EngineSnapshot *s, char err[ERR_LEN]) {
    Engine *e = c->engine;
    int rc = engine_check_snapshot(c, s, err);
    if (rc) return rc;
    e->done_steps = e->step = s->step;
    c->step = s->step;
    c->policy_version = s->policy_version;
    e->epoch = s->epoch;
    e->cursor = s->cursor;
    e->consumed = s->consumed;
    e->next_group_id = s->next_group_id;
    memcpy(c->group_counts, s->group_counts, sizeof c->group_counts);
    c->counters = s->counters;        /* the run's accounting as of the checkpoint, like the group counts */
    /* Groups of the interrupted step were never trained: they are re-drawn from the restored cursor. */
    for (int g = GS_QUEUED; g <= GS_SCORING; g++) c->group_counts[g] = 0;
    c->group_counts[GS_KEPT] = 0;
    e->snap = *s;
    e->val_started = 1;               /* validation before training belongs to a fresh run */
    if (e->epoch < c->cfg.total_epochs) eng__shuffle_epoch(c);
    log_set_step(s->step);
    return 0;
}

int engine_initial_snapshot(const Coord *c, EngineSnapshot *out) {
    const Engine *e = c->engine;
    *out = e->have_initial ? e->initial : e->snap;
    return e->have_initial;
}

void engine_count_validation(Coord *c) {
    if (!c->engine) return;
    c->group_counts[GS_VALIDATED] += c->engine->val.n;
    c->engine->next_group_id += c->engine->val.n;   /* its groups took these ids: the next step's are the same again */
}

Phase engine_phase(const Coord *c) { return c->engine ? c->engine->phase : PH_IDLE; }
int engine_job_active(const Coord *c) { return c->engine && c->engine->job.active; }
int engine_steps_at_learners(const Coord *c) { return c->engine ? eng__inflight(c->engine) : 0; }

/* Group accounting (docs/design.md §7): every group in exactly one state; the states add up to "created". */
void engine_status_fill(Coord *c, json_t *status) {
    json_t *groups = json_object();
    json_int_t created = 0;
    for (int s = 0; s < GS_COUNT; s++) {
        json_object_set_new(groups, group_state_name((GroupState)s), json_integer((json_int_t)c->group_counts[s]));
        created += (json_int_t)c->group_counts[s];
    }
    json_object_set_new(groups, "created", json_integer(created));
    json_object_set_new(status, "groups", groups);
    json_object_set_new(status, "phase", json_string(phase_name(engine_phase(c))));
    if (c->engine) {
        Engine *e = c->engine;
        json_object_set_new(status, "done_steps", c->ckpt.undecided ? json_null() : json_integer(e->done_steps));
        json_object_set_new(status, "epoch", json_integer(e->epoch));
        json_object_set_new(status, "prompts_consumed", json_integer(e->consumed));
        /* leases held now, the oldest (a stall shows here as an age that keeps growing), and those taken back */
        int64_t now = clock_ms(), oldest_ms = -1;
        const Group *old = NULL;
        int held = 0;
        for (int i = 0; i < e->ngroups; i++) {
            const Group *g = &e->groups[i];
            if (g->state != GS_LEASED && g->state != GS_SCORING) continue;
            held++;
            if (now - g->lease_ms > oldest_ms) { oldest_ms = now - g->lease_ms; old = g; }
        }
        json_t *l = json_object();
        json_object_set_new(l, "held", json_integer(held));
        json_object_set_new(l, "oldest_s", json_real(old ? oldest_ms / 1000.0 : 0.0));
        json_object_set_new(l, "oldest_group", old ? json_integer((json_int_t)old->id) : json_null());
        json_object_set_new(l, "oldest_kind", old ? json_string(old->state == GS_LEASED ? "generation" : "scoring")
                                                  : json_null());
        json_object_set_new(l, "oldest_worker", old && old->worker >= 0 ? json_string(c->workers[old->worker].id)
                                                                        : json_null());
        json_object_set_new(l, "max_lease_s", json_real(c->cfg.max_lease_s));
        json_object_set_new(l, "max_score_lease_s", json_real(c->cfg.max_score_lease_s));
        json_object_set_new(l, "reclaimed", json_integer((json_int_t)c->faults.leases_reclaimed));
        json_object_set_new(l, "requeued_from_lost", json_integer((json_int_t)c->faults.leases_requeued));  /* issue 18 */
        json_object_set_new(l, "last_reclaimed", json_string(e->last_reclaim));
        json_object_set_new(status, "leases", l);
        json_t *r = json_object();                  /* issue 17: rollbacks to a checkpoint (recover.c) */
        json_object_set_new(r, "incarnation", json_integer((json_int_t)c->incarnation));
        json_object_set_new(r, "rollbacks", json_integer((json_int_t)c->faults.rollbacks));
        json_object_set_new(r, "results_abandoned", json_integer((json_int_t)c->faults.results_abandoned));
        json_object_set_new(r, "waiting_s", json_real(e->phase == PH_REJOIN ? clock_s() - e->rejoin_t0 : 0.0));
        json_object_set_new(r, "rejoin_timeout_s", json_real(c->cfg.learner_rejoin_timeout_s));
        json_object_set_new(r, "coordinator_restarts", json_integer(daemon_restarts()));   /* by its supervisor */
        json_object_set_new(status, "recovery", r);
        const RunCounters *k = &c->counters;        /* issue 38: the run's accounting, as /metrics has it */
        json_t *al = json_object(), *qs = json_array();   /* issue 41: the steps at the learners */
        for (int i = 0; i < e->nqueue; i++) json_array_append_new(qs, json_integer(e->queue[i].step));
        json_object_set_new(al, "training", e->job.active ? json_integer(e->job.step) : json_null());
        json_object_set_new(al, "queued", qs);
        json_object_set_new(al, "trains_next_from_version", json_integer((json_int_t)eng__train_from(c)));
        json_object_set_new(al, "staleness", json_integer(config_staleness(&c->cfg)));
        json_object_set_new(al, "staleness_strategy", json_string(config_enum_name(&c->cfg, "trainer.staleness_strategy")));
        json_object_set_new(al, "refill", json_string(config_refill_at_once(&c->cfg) ? "at_once" : "round"));
        json_object_set_new(status, "at_learners", al);
        json_object_set_new(status, "counters", json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
                            "groups_generated", (json_int_t)k->groups_generated, "groups_scored",
                            (json_int_t)k->groups_scored, "groups_solve_none", (json_int_t)k->groups_solve_none,
                            "groups_solve_all", (json_int_t)k->groups_solve_all, "groups_kept",
                            (json_int_t)k->groups_kept, "tokens_generated", (json_int_t)k->tokens_generated,
                            "tokens_trained", (json_int_t)k->tokens_trained, "groups_refilled",
                            (json_int_t)k->groups_refilled, "groups_waited", (json_int_t)k->groups_waited,
                            "responses_continued", (json_int_t)k->responses_continued));
    }
}

void engine_free(Coord *c) {
    Engine *e = c->engine;
    if (!e) return;
    eng__groups_reset(e);
    xfree(e->groups);
    xfree(e->order);
    dataset_free(&e->train);
    dataset_free(&e->val);
    tokenizer_free(e->tok);
    metrics_free(&e->m);
    for (int i = 0; i < e->n_reward_extra; i++) xfree(e->reward_extra_name[i]);
    metrics_free(&e->job.m);
    metrics_free(&e->job.learner);
    eng__queue_clear(c);
    for (int i = 0; i < JOB_QUEUE_MAX; i++) {
        metrics_free(&e->queue[i].m);
        metrics_free(&e->queue[i].learner);
        xfree(e->queue[i].held);
    }
    xfree(e->job.held);
    xfree(e);
    c->engine = NULL;
}
