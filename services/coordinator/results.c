/* services/coordinator/results.c: the training engine's result handlers (engine.h): GroupResult (a group generated),
 * ScoreResult (scored, then filtered or kept), StepResult (a learner shard trained), lost workers and lease reclaim. */
#include "engine.h"

/* ------------------------------------------------------------------------------------------------ results */

/* Returns 1 when the group kept r and its arena (the caller must not free them). */
static int on_group_result(Coord *c, WorkerEntry *w, Dapo__GroupResult *r, NetArena *arena) {
    Engine *e = c->engine;
    if (w->incarnation != c->incarnation) {      /* made with the weights of a line abandoned at a rollback */
        c->faults.results_abandoned++;
        c->faults_dirty = 1;
        log_info("dropped group %llu attempt %u from %s: generated with weights of run incarnation %u (now %u)",
                 (unsigned long long)r->group_id, r->attempt, w->id, w->incarnation, c->incarnation);
        Group *g = eng__group_by_id(e, r->group_id);
        if (g && g->state == GS_LEASED && g->worker == (int)(w - c->workers) && g->attempt == r->attempt) {
            g->worker = -1;                          /* leased to it since the rollback: generated again at once, */
            g->attempt++;                            /* not when the lease runs out (cluster.max_lease_s) */
            eng__set_state(c, g, GS_QUEUED);
        }
        return 0;
    }
    Group *g = eng__group_by_id(e, r->group_id);
    if (!g || g->attempt != r->attempt || g->state != GS_LEASED || g->worker != (int)(w - c->workers) ||
        strcmp(r->run_id, c->run_id) != 0) {                /* issue 38: only the lease holder's result counts */
        log_debug("dropped a stale or duplicate result for group %llu attempt %u",
                  (unsigned long long)r->group_id, r->attempt);
        return 0;
    }
    if (w->probe_failed) {                       /* issue 42: its weights are not the learner's: nothing it generates
                                                    after the failed probe (its WeightAck came first) is trained */
        log_warn_limited(&c->warn_reject, 10000, "group %llu attempt %u from %s dropped: its weight probe of version "
                         "%lld failed; the group is generated again elsewhere", (unsigned long long)g->id, g->attempt,
                         w->id, (long long)w->probe_version);
        eng__generate_again(c, g);
        return 0;
    }
    const char *bad = r->error[0] ? r->error : NULL;
    if (!bad && r->policy_version > c->policy_version) bad = "policy version newer than the coordinator's";
    if (!bad && r->n_responses != (size_t)g->n) bad = "wrong number of responses";
    for (size_t i = 0; !bad && i < r->n_responses; i++) {
        Dapo__Response *x = r->responses[i];
        if (x->policy_version > c->policy_version) bad = "a response's policy version is newer than the coordinator's";
        else if (x->n_token_ids > (size_t)c->cfg.max_response_length) bad = "response longer than max_response_length";
        else if (x->n_logprobs != x->n_token_ids) bad = "logprobs and token ids differ in length";
        else if (strcmp(x->finish_reason, "stop") && strcmp(x->finish_reason, "length")) bad = "bad finish reason";
        else if (x->n_token_ids == 0) bad = "an empty response (a response ends with its stop token or at the length)";
        else if (x->n_token_versions && x->n_token_versions != x->n_token_ids) bad = "token versions and token ids differ in length";
        /* issue 38: what the learner would refuse, or what would poison the rollout-correction weights, refused here:
         * a sampled token's log-prob below -1e4 has probability e^-10000 */
        for (size_t k = 0; !bad && k < x->n_token_ids; k++)
            if (e->vocab > 0 && (x->token_ids[k] < 0 || x->token_ids[k] >= e->vocab)) bad = "a token id outside the vocabulary";
            else if (!(x->logprobs[k] >= -1e4f && x->logprobs[k] <= 1e-3f)) bad = "a log-prob outside [-1e4, 0]";
        for (size_t k = 0; !bad && k < x->n_token_versions; k++)   /* partial rollouts: the oldest is the response's */
            if (x->token_versions[k] < x->policy_version || x->token_versions[k] > c->policy_version)
                bad = "a token's policy version below its response's or newer than the coordinator's";
            else if (k > 0 && x->token_versions[k] < x->token_versions[k - 1])
                bad = "token versions go down along a response (a swap only moves forward)";
    }
    if (bad) {
        log_warn_limited(&c->warn_reject, 10000, "group %llu attempt %u from %s rejected: %s", (unsigned long long)g->id,
                         g->attempt, w->id, bad);
        eng__generate_again(c, g);
        return 0;
    }
    g->worker = -1;
    g->result = r;
    g->result_arena = arena;
    g->version = r->policy_version;
    for (size_t i = 0; i < r->n_responses; i++) e->generated_tokens += r->responses[i]->n_token_ids;
    if (!g->validation) {
        e->t_last_generated = clock_s();
        c->counters.groups_generated++;
        for (size_t i = 0; i < r->n_responses; i++) {
            const Dapo__Response *x = r->responses[i];
            c->counters.tokens_generated += x->n_token_ids;
            uint64_t later = 0;                      /* tokens sampled after a swap (partial rollouts) */
            for (size_t k = 0; k < x->n_token_versions; k++) later += x->token_versions[k] != x->policy_version;
            if (later) { e->n_continued++; e->continued_tokens += later; c->counters.responses_continued++; }
        }
    }
    g->score_attempt = 1;
    eng__set_state(c, g, GS_GENERATED);
    if (!eng__version_ok(c, g->version)) {
        if (g->validation) {                           /* validation runs on the current weights: generate again */
            log_warn("validation group %llu from %s: policy version %lld is not current; generating it again",
                     (unsigned long long)g->id, w->id, (long long)g->version);
            g->result = NULL;
            g->result_arena = NULL;
            g->attempt++;
            eng__set_state(c, g, GS_QUEUED);
            return 0;
        }
        eng__drop_stale(c, g);
    }
    return 1;
}

static void settle_scored(Coord *c, Group *g) {
    Engine *e = c->engine;
    if (g->validation) { eng__set_state(c, g, GS_VALIDATED); return; }
    double val[g->n], acc[g->n];
    for (int i = 0; i < g->n; i++) {
        val[i] = filter_metric_value(e->fmetric, g->score[i] - g->penalty[i], g->acc[i], g->penalty[i]);
        acc[i] = g->acc[i];
    }
    uint8_t keep = 1;
    char err[ERR_LEN];
    int size = g->n, none = 0, all = 0;
    if (c->cfg.filter_groups_enable) filter_groups(val, &size, 1, &keep, NULL, err);
    filter_solve_counts(acc, &size, 1, &none, &all, err);
    e->solve_none += none;
    e->solve_all += all;
    e->n_scored_groups++;
    c->counters.groups_scored++;
    c->counters.groups_solve_none += (uint64_t)none;
    c->counters.groups_solve_all += (uint64_t)all;
    c->counters.groups_kept += keep;
    if (keep) { eng__set_state(c, g, GS_KEPT); e->kept++; }
    else { eng__set_state(c, g, GS_FILTERED); e->n_filtered++; }
    /* one sample per scored group for the dashboard */
    const DatasetItem *it = eng__group_item(e, g);
    Dapo__Response *r0 = g->result->responses[0];
    char *text = xmalloc(r0->text.len + 1);
    memcpy(text, r0->text.data, r0->text.len);
    text[r0->text.len] = 0;
    SampleView sv = {.step = e->step, .data_source = it->data_source, .prompt = it->prompt_text, .response = text,
                      .ground_truth = it->ground_truth, .pred = g->pred[0], .score = g->score[0],
                      .acc = g->acc[0] > 0, .response_tokens = (int)r0->n_token_ids};
    snprintf(sv.finish_reason, sizeof sv.finish_reason, "%s", r0->finish_reason);
    coord_record_sample(c, &sv);
    xfree(text);
}

/* Counts a score's outcome and adds its extra values (a Python reward's dict entries) to the step's sums. */
static void account_score(Coord *c, const Group *g, const Dapo__Score *s) {
    Engine *e = c->engine;
    unsigned o = (unsigned)s->outcome < 5 ? (unsigned)s->outcome : DAPO__REWARD_OUTCOME__REWARD_ERROR;
    c->counters.reward_outcomes[o]++;
    if (g->validation) return;
    e->reward_outcomes[o]++;
    for (size_t i = 0; i < s->n_extra_keys && i < s->n_extra_values; i++) {
        if (!isfinite(s->extra_values[i])) continue;
        int k = 0;
        while (k < e->n_reward_extra && strcmp(e->reward_extra_name[k], s->extra_keys[i])) k++;
        if (k == e->n_reward_extra) {
            if (k == 16 || strlen(s->extra_keys[i]) > 64) continue;     /* bounded: a function cannot flood metrics */
            e->reward_extra_name[k] = xstrdup(s->extra_keys[i]);
            e->reward_extra_sum[k] = 0;
            e->reward_extra_n[k] = 0;
            e->n_reward_extra++;
        }
        e->reward_extra_sum[k] += s->extra_values[i];
        e->reward_extra_n[k]++;
    }
}

static void on_score_result(Coord *c, WorkerEntry *w, Dapo__ScoreResult *r) {
    Engine *e = c->engine;
    Group *g = eng__group_by_id(e, r->request_id);
    if (!g || g->score_attempt != r->attempt || g->state != GS_SCORING || g->worker != (int)(w - c->workers)) {
        log_debug("dropped a stale or duplicate score for group %llu", (unsigned long long)r->request_id);
        return;
    }
    g->worker = -1;
    if (r->n_scores != (size_t)g->n) {
        log_warn("scores for group %llu from %s: %zu scores for %d responses; re-scoring",
                 (unsigned long long)g->id, w->id, r->n_scores, g->n);
        g->score_attempt++;
        eng__set_state(c, g, GS_GENERATED);
        return;
    }
    e->t_reward_busy += (clock_ms() - g->lease_ms) / 1000.0;
    g->score = xcalloc((size_t)g->n, sizeof(float));
    g->acc = xcalloc((size_t)g->n, sizeof(float));
    g->penalty = xcalloc((size_t)g->n, sizeof(float));
    g->pred = xcalloc((size_t)g->n, sizeof(char *));
    for (size_t i = 0; i < r->n_scores; i++) {
        Dapo__Score *s = r->scores[i];
        size_t k = s->item_id < (uint64_t)g->n ? (size_t)s->item_id : i;
        g->score[k] = isfinite(s->score) ? s->score : -1.0f;
        g->acc[k] = s->acc ? 1.0f : 0.0f;
        g->penalty[k] = isfinite(s->overlong_penalty) ? s->overlong_penalty : 0.0f;
        xfree(g->pred[k]);
        g->pred[k] = xmalloc(s->pred.len + 1);
        if (s->pred.len) memcpy(g->pred[k], s->pred.data, s->pred.len);     /* an empty pred may have data NULL */
        g->pred[k][s->pred.len] = 0;
        account_score(c, g, s);
    }
    for (int i = 0; i < g->n; i++) if (!g->pred[i]) g->pred[i] = xstrdup("");
    settle_scored(c, g);
    if (e->phase == PH_GENERATE && c->cfg.filter_groups_streaming && e->kept >= c->cfg.train_batch_size)
        eng__cancel_in_flight(c);
}


/* The leases of rollout wi, whose weight probe just failed: each group is taken back (attempt + 1; the rollout is told
 * to drop it, and its late result would be dropped anyway) and generated again by a rollout that passes. */
static void requeue_from_refused(Coord *c, int wi) {
    Engine *e = c->engine;
    int n = 0;
    for (int i = 0; e && i < e->ngroups; i++) {
        Group *g = &e->groups[i];
        if (g->worker != wi || g->state != GS_LEASED) continue;
        eng__send_cancel(c, g, "weight probe failed");
        eng__generate_again(c, g);
        n++;
    }
    if (n) log_warn("%d groups leased to %s taken back: its weight probe failed", n, c->workers[wi].id);
}

/* Issue 42: the rollout scored the weight probe after loading a version (model/probe.h). Beyond
 * cluster.weights_probe_tolerance (or not finite) it does not serve the learner's weights: it gets no groups (dispatch)
 * and the run does not wait for it (steps.c rollouts_current) until a later version's probe passes; the dashboard's
 * worker table and event list say why. */
static void on_probe(Coord *c, WorkerEntry *w, const Dapo__WeightAck *a) {
    if (!a->probe_values) return;
    double d = a->probe_max_abs_diff;
    int bad = !(d <= c->cfg.weights_probe_tolerance);
    w->probe_diff = d;
    w->probe_version = a->version;
    if (bad && !w->probe_failed) {
        requeue_from_refused(c, (int)(w - c->workers));
        log_error("rollout %s: policy version %lld's weight probe differs from the learner's by %.3g (> "
                  "cluster.weights_probe_tolerance %.3g over %u log-probs): its weights are not the learner's; it gets "
                  "no groups until a version it loads passes", w->id, (long long)a->version, d,
                  c->cfg.weights_probe_tolerance, a->probe_values);
        coord_event(c, "rollout %s failed the weight probe of version %lld (diff %.3g): no groups for it", w->id,
                    (long long)a->version, d);
    } else if (!bad && w->probe_failed) {
        log_info("rollout %s: policy version %lld's weight probe passes (diff %.3g): it gets groups again", w->id,
                 (long long)a->version, d);
        coord_event(c, "rollout %s passed the weight probe of version %lld again", w->id, (long long)a->version);
    }
    w->probe_failed = bad;
}

static void on_step_result(Coord *c, WorkerEntry *w, Dapo__StepResult *r) {
    Engine *e = c->engine;
    TrainJob *t = &e->job;
    if (!t->active || r->step != t->step || strcmp(r->run_id, c->run_id) != 0) {
        log_debug("dropped a step result for step %lld from %s", (long long)r->step, w->id);
        return;
    }
    /* issue 38: a rank reports as itself, and a new version is the next one (the learner publishes TrainBatch's
     * policy_version + 1, the coordinator's); anything else is dropped, counted with the wrong-role messages */
    if (r->rank != w->rank || (r->new_policy_version && r->new_policy_version != c->policy_version + 1)) {
        c->msgs_wrong_role++;
        log_warn_limited(&c->warn_role, 10000, "dropped a step result from %s (rank %u): it names rank %u and policy "
                         "version %lld (expected its own rank and 0 or %lld)", w->id, w->rank, r->rank,
                         (long long)r->new_policy_version, (long long)c->policy_version + 1);
        return;
    }
    if (r->code || r->error[0]) {
        /* ERR_COLLECTIVE: a collective broke because another rank died and came back: every rank reloads (recover.c),
           at most three times for the same step, so that a real fault still fails the run. The text is for people. */
        int tries = e->rejoin_fail_step == t->step ? e->rejoin_step_tries + 1 : 1;
        /* ERR_STALE: the learner holds other weights than the step trains from (it refuses: versions only move
           forward): every rank starts again from the last checkpoint, as after a collective that broke */
        if (((c->cfg.num_learners > 1 && r->code == ERR_COLLECTIVE) || r->code == ERR_STALE) && tries <= 3) {
            e->rejoin_step_tries = tries;
            e->rejoin_fail_step = t->step;
            engine_rejoin_begin(c, -1, "step %ld: learner %s (rank %u): %.120s", t->step, w->id, r->rank, r->error);
            return;
        }
        engine_fail(c, "step %ld: learner %s (rank %u) failed (%s): %s", t->step, w->id, r->rank,
                    r->code ? err_str(r->code) : "no error code", r->error[0] ? r->error : "no reason given");
        return;
    }
    for (size_t i = 0; i < r->n_metrics; i++)
        metrics_set(&t->learner, r->metrics[i]->key, metrics_get(&t->learner, r->metrics[i]->key, 0) + r->metrics[i]->value);
    t->results++;
    if (r->new_policy_version > 0) t->new_version = r->new_policy_version;
    if (t->results >= t->expected && t->new_version > c->policy_version) {
        t->t_trained = clock_s();
        c->policy_version = t->new_version;
        eng__announce_version(c);
        if (config_staleness(&c->cfg) > 0) {
            eng__finish_step(c);                         /* async: rollouts catch up while they generate; a queued step
                                                            becomes the one in training */
            eng__drop_stale_groups(c);                   /* groups of the step being generated may be too old now */
        } else {
            e->phase = PH_WEIGHTS;
            eng__status(c, "step %ld: waiting for rollouts to load policy version %lld", t->step, (long long)c->policy_version);
        }
    }
}

void engine_on_message(Coord *c, WorkerEntry *w, NetMsg *m) {
    if (!c->engine) {
        out_send_error(c, w->rid, w->rid_len, ERR_UNSUPPORTED, m->type, "no training run configured");
        return;
    }
    switch (m->type) {
    case DAPO__MSG_TYPE__MSG_GROUP_RESULT:
        if (on_group_result(c, w, (Dapo__GroupResult *)m->msg, m->arena)) {   /* kept by the group */
            m->msg = NULL;
            m->arena = NULL;
        }
        break;
    case DAPO__MSG_TYPE__MSG_SCORE_RESULT: on_score_result(c, w, (Dapo__ScoreResult *)m->msg); break;
    case DAPO__MSG_TYPE__MSG_STEP_RESULT:          /* a failed run stays failed (a late result must not revive it) */
        if (c->engine->phase != PH_FAILED) on_step_result(c, w, (Dapo__StepResult *)m->msg);
        break;
    case DAPO__MSG_TYPE__MSG_WEIGHT_ACK:
        w->policy_version = ((Dapo__WeightAck *)m->msg)->version;
        w->incarnation = ((Dapo__WeightAck *)m->msg)->incarnation;
        on_probe(c, w, (Dapo__WeightAck *)m->msg);
        break;
    case DAPO__MSG_TYPE__MSG_CONTROL: ckpt_on_control(c, w, (Dapo__Control *)m->msg); break;
    default:
        out_send_error(c, w->rid, w->rid_len, ERR_UNSUPPORTED, m->type, "message not handled by the coordinator");
    }
    engine_tick(c);
}

void engine_on_send_failed(Coord *c, int wi, Dapo__MsgType type, uint64_t item, uint32_t attempt, int code) {
    Engine *e = c->engine;
    WorkerEntry *w = &c->workers[wi];
    if (!e) return;
    if (type == DAPO__MSG_TYPE__MSG_GENERATE_GROUP || type == DAPO__MSG_TYPE__MSG_SCORE_REQUEST) {
        int gen = type == DAPO__MSG_TYPE__MSG_GENERATE_GROUP;
        Group *g = eng__group_by_id(e, item);
        if (!g || g->worker != wi || g->state != (gen ? GS_LEASED : GS_SCORING) ||
            (gen ? g->attempt : g->score_attempt) != attempt)
            return;
        uint64_t credit = (uint64_t)w->credit + (uint64_t)g->n;     /* as if never sent: it stays queued */
        w->credit = credit > w->capacity ? w->capacity : (uint32_t)credit;
        g->worker = -1;
        eng__set_state(c, g, gen ? GS_QUEUED : GS_GENERATED);
        log_debug("group %llu: %s to %s not sent (%s): back in the queue", (unsigned long long)item,
                  net_type_name(type), w->id, err_str(code));
        return;
    }
    if (type != DAPO__MSG_TYPE__MSG_TRAIN_BATCH || !e->job.active || (long)item != e->job.step || e->phase == PH_FAILED)
        return;
    if (code == ERR_AGAIN)
        engine_fail(c, "step %ld: TrainBatch not sent: the send queue to learner %s (rank %u) is full: it has not read "
                    "its earlier shards", e->job.step, w->id, attempt);
    else                                             /* a learner went away: wait for it and roll back (recover.c) */
        engine_rejoin_begin(c, -1, "step %ld: TrainBatch not sent: learner %s (rank %u) vanished while its shards "
                            "were sent: %s", e->job.step, w->id, attempt, err_str(code));
}

void engine_requeue_worker(Coord *c, int wi) {
    Engine *e = c->engine;
    if (!e) return;
    int requeued = 0;
    for (int i = 0; i < e->ngroups; i++) {
        Group *g = &e->groups[i];
        if (g->worker != wi) continue;
        if (g->state == GS_LEASED) {
            eng__generate_again(c, g);
            requeued++;
        } else if (g->state == GS_SCORING) {
            g->score_attempt++;
            eng__set_state(c, g, GS_GENERATED);
            requeued++;
        }
        g->worker = -1;
    }
    c->faults.leases_requeued += (uint64_t)requeued;
    if (requeued) c->faults_dirty = 1;
    if (requeued) log_warn("%d groups of %s returned to the queue", requeued, c->workers[wi].id);
}

void engine_on_worker_lost(Coord *c, int wi) {
    Engine *e = c->engine;
    if (!e) return;
    engine_requeue_worker(c, wi);
    if (c->workers[wi].role == DAPO__ROLE__ROLE_LEARNER)    /* its weights are gone with it: roll back (recover.c) */
        engine_rejoin_begin(c, -1, "step %ld: learner rank %u (%s) was lost%s", coord_event_step(c) + 1,
                            c->workers[wi].rank, c->workers[wi].id, e->job.active ? " during the update"
                                                                    : c->ckpt.undecided ? " before the run resumed" : "");
}

/* A lease lives while its worker heartbeats, but not for ever: one older than cluster.max_lease_s (generation)
 * or cluster.max_score_lease_s (scoring) is taken back even from a worker that still heartbeats — one that lost a
 * result (a send dropped on a full queue, a bug) or hangs on one item while its loop runs would otherwise stall
 * the step silently (docs/design.md §7: no input may lose data). The group goes back to the queue with attempt + 1
 * (a group past MAX_ATTEMPTS is cancelled), the worker is told to drop it (Cancel), a late result of the old
 * attempt is dropped as stale, and /api/status counts it ("leases"). */
void engine_reclaim_leases(Coord *c) {
    Engine *e = c->engine;
    if (!e) return;
    int64_t now = clock_ms();
    int64_t lim_gen = (int64_t)(c->cfg.max_lease_s * 1000), lim_score = (int64_t)(c->cfg.max_score_lease_s * 1000);
    /* the update is bounded the same way: learners that heartbeat but never send all their results stop the run
     * with the counts instead of a silent wait */
    TrainJob *t = &e->job;
    if (t->active && e->phase != PH_FAILED && lim_gen > 0 && (clock_s() - t->t_sent) * 1000 > lim_gen) {
        engine_fail(c, "step %ld: the learners sent %d of the %d step results in %.0f s (cluster.max_lease_s): a learner "
             "stopped answering while it heartbeats; see the learner logs", t->step, t->results, t->expected,
             clock_s() - t->t_sent);
        return;
    }
    for (int i = 0; i < e->ngroups; i++) {
        Group *g = &e->groups[i];
        int64_t lim = g->state == GS_LEASED ? lim_gen : g->state == GS_SCORING ? lim_score : 0;
        if (lim <= 0 || now - g->lease_ms <= lim) continue;
        const char *wid = g->worker >= 0 ? c->workers[g->worker].id : "?";
        int gen = g->state == GS_LEASED;
        snprintf(e->last_reclaim, sizeof e->last_reclaim, "step %ld: group %llu (%s attempt %u) held by %s for %.1f s, "
                 "over cluster.%s %g s: back to the queue", e->step, (unsigned long long)g->id,
                 gen ? "generation" : "scoring", gen ? g->attempt : g->score_attempt, wid, (now - g->lease_ms) / 1000.0,
                 gen ? "max_lease_s" : "max_score_lease_s", gen ? c->cfg.max_lease_s : c->cfg.max_score_lease_s);
        log_warn("%s", e->last_reclaim);
        eng__send_cancel(c, g, "lease reclaimed: held past the coordinator's lease limit");
        if (gen) {
            eng__generate_again(c, g);
        } else {
            g->score_attempt++;
            eng__set_state(c, g, GS_GENERATED);
        }
        g->worker = -1;
        c->faults.leases_reclaimed++;
        c->faults_dirty = 1;
    }
}
