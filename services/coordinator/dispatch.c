/* services/coordinator/dispatch.c: leases and dispatch of the training engine (engine.h): dropping stale groups,
 * choosing a worker with credit, GenerateGroup / ScoreGroup sends, and the dispatch pass over the queued groups. */
#include "engine.h"
#include "settings/settings.h"

/* g (generated, scoring, kept or surplus; its results held) came from a policy too far behind: it becomes GS_STALE
 * (its responses are never trained; a verifier holding it is told to drop it) and its prompt is generated again as
 * a new group in the same round, at the same epoch position (batch alignment is unchanged). */
void eng__drop_stale(Coord *c, Group *g) {
    Engine *e = c->engine;
    if (g->state == GS_SCORING) eng__send_cancel(c, g, "stale policy version");
    if (g->state == GS_KEPT) e->kept--;
    log_info("step %ld: group %llu came from policy version %lld, more than trainer.staleness %d behind version %lld "
             "(the one its step trains from): dropped, its prompt generated again", e->step, (unsigned long long)g->id,
             (long long)g->version, config_staleness(&c->cfg), (long long)eng__train_from(c));
    int item = g->item, round = g->round;
    long order = g->order;
    g->worker = -1;
    eng__set_state(c, g, GS_STALE);
    e->n_stale++;
    Group *ng = eng__group_new(c, item, order, 0);          /* may move e->groups: g is not used after this */
    ng->round = round;
}

/* v acceptable: eng__version_ok, or with exact (a batch about to be queued behind steps in flight) exactly within
 * trainer.staleness of the version its step will train from. */
static int fresh(Coord *c, int64_t v, int exact) {
    if (!exact) return eng__version_ok(c, v);
    return v >= eng__train_from(c) - config_staleness(&c->cfg) && v <= c->policy_version;
}

/* The policy version moved on: every group of the step being generated whose results are now too stale is dropped
 * and regenerated (eng__drop_stale). A ready batch with such a group goes back to generation, its surplus groups count as
 * kept again, and eng__after_round aligns the batch anew once the replacements are settled. Returns the groups dropped. */
static int drop_stale(Coord *c, int exact) {
    Engine *e = c->engine;
    if (!e || (e->phase != PH_GENERATE && e->phase != PH_BATCH_READY)) return 0;
    int n = e->ngroups, stale = 0;
    for (int i = 0; i < n; i++) {
        GroupState st = e->groups[i].state;
        stale += (st == GS_GENERATED || st == GS_SCORING || st == GS_KEPT || st == GS_SURPLUS) &&
                 !fresh(c, e->groups[i].version, exact);
    }
    if (!stale) return 0;
    if (e->phase == PH_BATCH_READY) {
        for (int i = 0; i < n; i++)
            if (e->groups[i].state == GS_SURPLUS) eng__set_state(c, &e->groups[i], GS_KEPT);   /* e->kept counts them */
        e->phase = PH_GENERATE;
    }
    for (int i = 0; i < n; i++) {
        GroupState st = e->groups[i].state;
        if ((st == GS_GENERATED || st == GS_SCORING || st == GS_KEPT) && !fresh(c, e->groups[i].version, exact))
            eng__drop_stale(c, &e->groups[i]);
    }
    return stale;
}

int eng__drop_stale_groups(Coord *c) { return drop_stale(c, 0); }
int eng__drop_stale_queued(Coord *c) { return drop_stale(c, 1); }

/* The alive worker of `role` with the most credit that has at least `need`; -1 when none. check_version 1: its weights
 * within trainer.staleness of the version the step trains from (eng__version_ok's optimistic count: drop); 3: exactly
 * within it (fresh(exact): trainer.staleness_strategy wait, so no group it generates turns stale); 2: exactly the
 * current version (validation runs on it). */
static int pick_worker(Coord *c, Dapo__Role role, uint32_t need, int check_version) {
    int best = -1;
    for (int i = 0; i < c->nworkers; i++) {
        WorkerEntry *w = &c->workers[i];
        if (w->role != role || w->life != WORKER_ALIVE || w->credit < need || w->probe_failed) continue;
        if (check_version == 1 && !eng__version_ok(c, eng__worker_version(c, w))) continue;
        if (check_version == 3 && !fresh(c, eng__worker_version(c, w), 1)) continue;
        if (check_version == 2 && eng__worker_version(c, w) != c->policy_version) continue;
        if (best < 0 || w->credit > c->workers[best].credit) best = i;
    }
    return best;
}

static void send_generate(Coord *c, Group *g, int wi) {
    Engine *e = c->engine;
    const DatasetItem *it = eng__group_item(e, g);
    SampleParams p;                                  /* the learner's temperature comes by the same adapter */
    settings_sample_params(&c->cfg, g->validation, &p);
    Dapo__SamplingParams sp = DAPO__SAMPLING_PARAMS__INIT;
    sp.temperature = p.temperature;
    sp.top_p = p.top_p;
    sp.top_k = p.top_k;
    sp.greedy = p.greedy;
    sp.max_tokens = (uint32_t)c->cfg.max_response_length;
    sp.stop_token_ids = e->stop_ids;
    sp.n_stop_token_ids = (size_t)e->n_stop;
    Dapo__GenerateGroup m = DAPO__GENERATE_GROUP__INIT;
    m.run_id = c->run_id;
    m.step = e->step;
    m.policy_version = c->policy_version;
    m.group_id = g->id;
    m.attempt = g->attempt;
    m.prompt_token_ids = it->ids;
    m.n_prompt_token_ids = (size_t)it->n_ids;
    m.n = (uint32_t)g->n;
    m.sampling = &sp;
    m.seed = settings_rollout_seed(&c->cfg);
    m.validation = g->validation;
    WorkerEntry *w = &c->workers[wi];
    if (out_send_item(c, w, DAPO__MSG_TYPE__MSG_GENERATE_GROUP, &m.base, g->id, g->attempt)) return;   /* stays queued */
    w->credit -= (uint32_t)g->n;
    g->worker = wi;
    g->lease_ms = clock_ms();
    eng__set_state(c, g, GS_LEASED);
}

static void send_score(Coord *c, Group *g, int wi) {
    Engine *e = c->engine;
    const DatasetItem *it = eng__group_item(e, g);
    Dapo__ScoreItem items[g->n], *ptrs[g->n];
    for (int i = 0; i < g->n; i++) {
        Dapo__Response *r = g->result->responses[i];
        dapo__score_item__init(&items[i]);
        items[i].item_id = (uint64_t)i;
        items[i].attempt = g->score_attempt;
        items[i].response_text = r->text;
        items[i].response_length = (uint32_t)r->n_token_ids;
        items[i].ground_truth.data = (uint8_t *)it->ground_truth;
        items[i].ground_truth.len = strlen(it->ground_truth);
        items[i].data_source = it->data_source;
        ptrs[i] = &items[i];
    }
    Dapo__ScoreRequest m = DAPO__SCORE_REQUEST__INIT;
    m.run_id = c->run_id;
    m.step = e->step;
    m.request_id = g->id;
    m.attempt = g->score_attempt;
    m.n_items = (size_t)g->n;
    m.items = ptrs;
    m.max_response_length = (uint32_t)c->cfg.max_response_length;
    m.overlong_buffer_enable = c->cfg.overlong_buffer_enable && !g->validation;
    m.overlong_buffer_len = (uint32_t)c->cfg.overlong_buffer_len;
    m.overlong_penalty_factor = (float)c->cfg.overlong_penalty_factor;
    m.prompt_text.data = (uint8_t *)it->prompt_text;
    m.prompt_text.len = it->prompt_text ? strlen(it->prompt_text) : 0;
    WorkerEntry *w = &c->workers[wi];
    if (out_send_item(c, w, DAPO__MSG_TYPE__MSG_SCORE_REQUEST, &m.base, g->id, g->score_attempt)) return;
    w->credit -= (uint32_t)g->n;
    g->worker = wi;
    g->lease_ms = clock_ms();
    eng__set_state(c, g, GS_SCORING);
}

/* Hands queued groups to rollouts and generated ones to verifiers, in group order, while credit lasts. Groups
 * before e->first_open are settled or leased, so the scan starts there (it moves back when a lease returns). */
void eng__dispatch(Coord *c) {
    Engine *e = c->engine;
    int stuck_n = 0, roll_ok = 1, ver_ok = 1, fresh_wait = 0;
    int wait = config_staleness(&c->cfg) > 0 && config_staleness_strategy(&c->cfg) == CFG_OFF_POLICY_WAIT;
    while (e->first_open < e->ngroups && e->groups[e->first_open].state != GS_QUEUED &&
           e->groups[e->first_open].state != GS_GENERATED)
        e->first_open++;
    /* Queued / generated groups not yet passed by the scan: the run's counts of those states are never below
     * what this step holds (eng__groups_reset drops groups without counting them out), so the scan stops once neither
     * kind can still be dispatched instead of walking every leased group behind them on every call. */
    uint64_t left_q = c->group_counts[GS_QUEUED], left_g = c->group_counts[GS_GENERATED];
    if (c->paused) roll_ok = 0;
    for (int i = e->first_open; i < e->ngroups && ((roll_ok && left_q) || (ver_ok && left_g)); i++) {
        Group *g = &e->groups[i];
        if (g->state == GS_QUEUED && left_q) left_q--;
        else if (g->state == GS_GENERATED && left_g) left_g--;
        if (g->state == GS_QUEUED && !c->paused && roll_ok) {
            int wi = pick_worker(c, DAPO__ROLE__ROLE_ROLLOUT, (uint32_t)g->n, g->validation ? 2 : wait ? 3 : 1);
            if (wi >= 0) send_generate(c, g, wi);
            else {                                   /* no rollout has room: the rest waits too */
                stuck_n = g->n;
                roll_ok = 0;
                if (wait && !g->validation && pick_worker(c, DAPO__ROLE__ROLE_ROLLOUT, (uint32_t)g->n, 1) >= 0) {
                    fresh_wait = 1;                  /* a rollout had room, but weights too old for this step */
                    if (!g->waited) { g->waited = 1; e->n_waited++; c->counters.groups_waited++; }
                }
            }
        } else if (g->state == GS_GENERATED && ver_ok) {
            int wi = pick_worker(c, DAPO__ROLE__ROLE_VERIFIER, (uint32_t)g->n, 0);
            if (wi >= 0) send_score(c, g, wi);
            else ver_ok = 0;
        }
    }
    /* the status line names what the step waits for when a whole role is missing */
    int refused, live = eng__rollouts_alive(c, &refused);
    if (stuck_n && eng__status_all_refused(c, e->step)) {}
    else if (stuck_n && !live)
        eng__status(c, "step %ld: waiting for a rollout: %llu groups queued, 0 rollouts live", e->step,
                    (unsigned long long)c->group_counts[GS_QUEUED]);
    else if (fresh_wait)
        eng__status(c, "step %ld: waiting for a rollout with policy version >= %lld (trainer.staleness_strategy wait: "
                    "its batch trains from version %lld; %d of %d alive refused by the weight probe)", e->step,
                    (long long)(eng__train_from(c) - config_staleness(&c->cfg)), (long long)eng__train_from(c),
                    refused, live);
    else if (!ver_ok && !registry_count(c, DAPO__ROLE__ROLE_VERIFIER, WORKER_ALIVE))
        eng__status(c, "step %ld: waiting for a verifier: %llu groups generated, 0 verifiers live", e->step,
                    (unsigned long long)c->group_counts[GS_GENERATED]);
}
