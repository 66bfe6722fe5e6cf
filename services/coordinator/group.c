/* services/coordinator/group.c: the core of the training engine (engine.h) that its other files share: group and phase
 * names, a group's state changes (the run's counts follow), the status line, failing the run, the current step's groups
 * (new, by id, reset), the epoch's order, cancels and version announcements (sent through the outbox), and which
 * policy versions may be trained. Calls only the outbox and the worker table: every other engine file sits above it.
 * Not here: dispatch (dispatch.c), the step state machine (steps.c). */
#include "engine.h"

const char *group_state_name(GroupState s) {
    static const char *names[] = {"queued", "leased", "generated", "scoring", "kept", "filtered", "surplus",
                                  "cancelled", "trained", "validated", "stale", "held"};
    return (unsigned)s < GS_COUNT ? names[s] : "?";
}

const char *phase_name(Phase p) {
    static const char *names[] = {"idle", "validate", "generate", "batch_ready", "train", "weights", "rejoin", "done",
                                  "failed"};
    return (unsigned)p <= PH_FAILED ? names[p] : "?";
}

void eng__set_state(Coord *c, Group *g, GroupState s) {
    c->group_counts[g->state]--;
    c->group_counts[s]++;
    g->state = s;
    if ((s == GS_QUEUED || s == GS_GENERATED) && c->engine) {       /* back in the dispatch queue */
        int i = (int)(g - c->engine->groups);
        if (i < c->engine->first_open) c->engine->first_open = i;
    }
}

void eng__status(Coord *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char line[sizeof c->status_line];
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (strcmp(line, c->status_line) != 0) {
        snprintf(c->status_line, sizeof c->status_line, "%s", line);
        log_info("%s", line);
    }
}

void engine_fail(Coord *c, const char *fmt, ...) {
    Engine *e = c->engine;
    if (!e) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->fail, sizeof e->fail, fmt, ap);
    va_end(ap);
    e->phase = PH_FAILED;
    snprintf(c->status_line, sizeof c->status_line, "FAILED: %.240s", e->fail);
    log_error("%s", e->fail);
}

static void group_free(Group *g) {
    if (g->result) net_unpacked_free(&g->result->base, g->result_arena);
    if (g->pred) for (int i = 0; i < g->n; i++) xfree(g->pred[i]);
    xfree(g->pred);
    xfree(g->score);
    xfree(g->acc);
    xfree(g->penalty);
    memset(g, 0, sizeof *g);
}

void eng__groups_reset(Engine *e) {
    for (int i = 0; i < e->ngroups; i++) group_free(&e->groups[i]);
    e->ngroups = 0;
    e->first_open = 0;
    e->round_first = 0;          /* a validation after a step of several rounds waits for all its groups */
}

Group *eng__group_new(Coord *c, int item, long order, int validation) {
    Engine *e = c->engine;
    XGROW(e->groups, e->ngroups, e->capgroups, 256);
    Group *g = &e->groups[e->ngroups++];
    memset(g, 0, sizeof *g);
    g->id = e->next_group_id++;
    g->attempt = 1;
    g->state = GS_QUEUED;
    c->group_counts[GS_QUEUED]++;
    g->item = item;
    g->order = order;
    g->round = e->round;
    g->validation = validation;
    g->n = validation ? c->cfg.val_n : c->cfg.rollout_n;
    g->worker = -1;
    return g;
}

Group *eng__group_by_id(Engine *e, uint64_t id) {
    if (!e->ngroups || id < e->groups[0].id) return NULL;
    uint64_t i = id - e->groups[0].id;
    return i < (uint64_t)e->ngroups ? &e->groups[i] : NULL;
}

const DatasetItem *eng__group_item(Engine *e, const Group *g) {
    return g->validation ? &e->val.items[g->item] : &e->train.items[g->item];
}

/* Fisher-Yates with Philox draws keyed by (data.seed, epoch): the same order for the same seed and epoch. */
void eng__shuffle_epoch(Coord *c) {
    Engine *e = c->engine;
    if (!c->cfg.shuffle) {
        for (size_t i = 0; i < e->train.n; i++) e->order[i] = (int)i;
        return;
    }
    rng_permutation(e->order, (long)e->train.n, (uint64_t)c->cfg.data_seed, (uint64_t)e->epoch, 0x5eed);
}

uint64_t eng__response_tokens(const Group *g) {
    uint64_t n = 0;
    for (int i = 0; g->result && i < g->n; i++) n += g->result->responses[i]->n_token_ids;
    return n;
}

void eng__generate_again(Coord *c, Group *g) {
    g->worker = -1;
    g->attempt++;
    eng__set_state(c, g, g->attempt > MAX_ATTEMPTS ? GS_CANCELLED : GS_QUEUED);
}

int eng__rollouts_alive(const Coord *c, int *refused) {
    int alive = 0;
    *refused = 0;
    for (int i = 0; i < c->nworkers; i++) {
        const WorkerEntry *w = &c->workers[i];
        if (w->role != DAPO__ROLE__ROLE_ROLLOUT || w->life != WORKER_ALIVE) continue;
        alive++;
        *refused += w->probe_failed;
    }
    return alive;
}

int eng__status_all_refused(Coord *c, long step) {
    int refused, alive = eng__rollouts_alive(c, &refused);
    if (!alive || refused < alive) return 0;
    eng__status(c, "step %ld: no rollout may generate: all %d alive failed the weight probe (their weights are not the "
                "learner's; cluster.weights_probe_tolerance %g): %llu groups queued", step, alive,
                c->cfg.weights_probe_tolerance, (unsigned long long)c->group_counts[GS_QUEUED]);
    return 1;
}

/* Tells the worker holding g's lease (LEASED or SCORING) to drop it. */
void eng__send_cancel(Coord *c, const Group *g, const char *reason) {
    if (g->worker < 0 || c->workers[g->worker].life != WORKER_ALIVE) return;
    Dapo__ItemRef ref = DAPO__ITEM_REF__INIT, *refs[1] = {&ref};
    ref.item_id = g->id;
    ref.attempt = g->state == GS_LEASED ? g->attempt : g->score_attempt;
    Dapo__Cancel m = DAPO__CANCEL__INIT;
    m.n_items = 1;
    m.items = refs;
    m.reason = (char *)reason;
    out_send(c, &c->workers[g->worker], DAPO__MSG_TYPE__MSG_CANCEL, &m.base);
}

/* Cancels every group still in flight (streaming mode, once the batch is full). */
void eng__cancel_in_flight(Coord *c) {
    Engine *e = c->engine;
    for (int i = 0; i < e->ngroups; i++) {
        Group *g = &e->groups[i];
        if (g->state != GS_QUEUED && g->state != GS_LEASED && g->state != GS_GENERATED && g->state != GS_SCORING)
            continue;
        if (g->state == GS_LEASED || g->state == GS_SCORING) eng__send_cancel(c, g, "batch full");
        eng__set_state(c, g, GS_CANCELLED);
    }
}

/* Tells every rollout at once that a new policy version is out (a Heartbeat carries the version), so they fetch
 * it now rather than at their next heartbeat. */
void eng__announce_version(Coord *c) {
    Dapo__Heartbeat hb = DAPO__HEARTBEAT__INIT;
    hb.policy_version = c->policy_version;
    hb.incarnation = c->incarnation;
    for (int i = 0; i < c->nworkers; i++)
        if (c->workers[i].role == DAPO__ROLE__ROLE_ROLLOUT && c->workers[i].life == WORKER_ALIVE)
            out_send(c, &c->workers[i], DAPO__MSG_TYPE__MSG_HEARTBEAT, &hb.base);
}

int eng__inflight(const Engine *e) { return e->job.active + e->nqueue; }

int64_t eng__train_from(const Coord *c) { return c->policy_version + eng__inflight(c->engine); }

static void held_free(TrainJob *t) {
    for (int i = 0; i < t->nheld; i++) xfree(t->held[i].frame);
    t->nheld = 0;
}

void eng__queue_clear(Coord *c) {
    Engine *e = c->engine;
    for (int i = 0; i < e->nqueue; i++) {            /* handed to no learner: not trained after all */
        TrainJob *t = &e->queue[i];
        c->group_counts[GS_HELD] -= (uint64_t)t->ngroups;
        c->group_counts[GS_CANCELLED] += (uint64_t)t->ngroups;
        t->ngroups = 0;
    }
    for (int i = 0; i < e->nqueue + (e->nqueue < JOB_QUEUE_MAX); i++) {   /* and the next slot: a send that failed
                                                                            part-way left frames there */
        held_free(&e->queue[i]);
        e->queue[i].active = 0;
    }
    e->nqueue = 0;
}

/* A policy version the step being generated may use: at most trainer.staleness k behind the version it will train
 * from, counted optimistically — the step after the one in training trains from the current version + the steps queued
 * (a row one version older still may become fresh enough if that step's update lands first: with nothing or one step in
 * flight this is the current version - k, and a row found too old once the version moves, or when its batch is queued,
 * is dropped then: eng__drop_stale_groups, eng__drop_stale_queued). */
int eng__version_ok(Coord *c, int64_t v) {
    int64_t base = c->policy_version + (c->engine && c->engine->nqueue > 0 ? c->engine->nqueue : 0);
    return v >= 0 && v >= base - config_staleness(&c->cfg) && v <= c->policy_version;   /* -1: no weights of this
                                                                                          incarnation (a rollback) */
}

int64_t eng__worker_version(const Coord *c, const WorkerEntry *w) {
    return w->incarnation == c->incarnation ? w->policy_version : -1;
}
