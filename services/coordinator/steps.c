/* services/coordinator/steps.c: the training loop of the coordinator (DESIGN.md §1 "One step", issue 8).
 *
 *   IDLE -> [VALIDATE] -> GENERATE (rounds of gen_batch_size prompts: rollout -> verifier -> filter) -> TRAIN
 *   (advantages, mini-batches, shards to the learner ranks) -> WEIGHTS (every rollout loads version v+1) ->
 *   [VALIDATE every test_freq] -> next step ... -> DONE, or FAILED with the reason on the dashboard.
 *
 * Work is leased by credit: a rollout credit is one sequence (a group of n costs n), a verifier credit one
 * response. A lease lives as long as its worker heartbeats, up to cluster.max_lease_s (generation) or
 * cluster.max_score_lease_s (scoring); when the registry declares a worker lost, or a lease passes that bound,
 * its groups go back to the queue with attempt + 1. Results are matched by (group id, attempt) and policy version, so stale
 * and duplicate results are dropped and nothing is counted twice. Every group is in exactly one GroupState.
 * Synchronous on-policy mode: rollouts generate with the current version only. Async mode (trainer.staleness 1): the
 * next step generates while the learners train, with rollouts at most trainer.staleness versions behind; every
 * response carries the version that generated it (each TrainBatch row's behaviour_version), and a group whose oldest
 * response is more than trainer.staleness behind the version the learners will train it with is dropped (GS_STALE)
 * and its prompt generated again (drop_stale_groups, run whenever the version moves and before a batch goes out),
 * so no stale row is ever sent. The learners correct the rest (issue 15: services/learner/offpolicy.h).
 * Not here: coordinator checkpoints and resume (ckpt.c). */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/rng.h"
#include "batch.h"
#include "coord.h"
#include "dapo/filter.h"
#include "dapo/rollout_corr.h"
#include "dapo/val_metrics.h"
#include "io/dataset.h"
#include "tokenizer/tokenizer.h"
#include "tbwire.h"

#define MAX_ATTEMPTS 5           /* a group whose generation failed this often is cancelled */

/* The step whose batch is with the learners. In sync mode it is the step just generated; in async mode
 * (trainer.staleness 1) the next step's generation runs meanwhile, with rollouts at most one version behind. */
typedef struct {
    int            active;
    long           step;
    int            expected, results;        /* StepResults: ppo_epochs x mini-batches x ranks */
    int64_t        new_version;
    Metrics        m, learner;               /* coordinator metrics of the step; learner metric sums */
    double         t_step, t_gen, t_reward, t_sent, t_trained;
    long long      batch_tokens;
    EngineSnapshot snap;                     /* cursor etc. as of the end of the step's generation */
} TrainJob;

struct Engine {
    Tokenizer     *tok;
    Dataset        train, val;
    int32_t        stop_ids[4];
    int            n_stop;
    FilterMetric   fmetric;

    int           *order;        /* [train.n] the epoch's shuffled order */
    int            epoch;        /* 0-based */
    long           cursor;       /* next position in order */
    long           consumed;     /* prompts drawn over the run */

    Phase          phase;
    long           step;         /* global step being worked on, 1-based (verl's global_steps) */
    long           done_steps;
    uint64_t       next_group_id;
    Group         *groups;       /* the current step's (or validation's) groups, ids consecutive */
    int            ngroups, capgroups;
    int            round, round_first;       /* current round and its first group index */
    int            first_open;   /* no group before it is queued or generated (dispatch starts here) */
    int            kept;         /* kept groups in this step */
    int            val_after;    /* after this validation: 0 start a step, 1 finish (val_only / end) */
    int            val_started;  /* the validation before training has run */

    /* the step being generated: timing and metrics */
    double         t_step, t_gen, t_reward_busy;
    uint64_t       wasted_tokens, generated_tokens;
    int            solve_none, solve_all, n_scored_groups, n_filtered;
    int            n_stale;      /* groups of the step dropped as too stale and regenerated */
    long           total_steps;  /* trainer.total_training_steps, or verl's derivation from the data (engine_start) */
    Metrics        m;            /* coordinator-side metrics of the step being generated */
    int            val_pending;  /* a validation is due (test_freq) before the next step's generation */
    long           last_val_step;   /* done_steps of the latest validation (-1: none yet) */
    int            data_done;    /* the last epoch is used up: nothing more to generate */
    TrainJob       job;          /* the step whose batch is at the learners (at most one) */
    char           fail[ERR_LEN];
    EngineSnapshot snap;         /* as of the last finished step */
    uint64_t       leases_reclaimed;         /* leases taken back past cluster.max_lease_s / max_score_lease_s */
    char           last_reclaim[256];        /* the latest of them, in words (/api/status) */
};

const char *group_state_name(GroupState s) {
    static const char *names[] = {"queued", "leased", "generated", "scoring", "kept", "filtered", "surplus",
                                  "cancelled", "trained", "validated", "stale"};
    return (unsigned)s < GS_COUNT ? names[s] : "?";
}

const char *phase_name(Phase p) {
    static const char *names[] = {"idle", "validate", "generate", "batch_ready", "train", "weights", "done", "failed"};
    return (unsigned)p <= PH_FAILED ? names[p] : "?";
}

static void set_state(Coord *c, Group *g, GroupState s) {
    c->group_counts[g->state]--;
    c->group_counts[s]++;
    g->state = s;
    if ((s == GS_QUEUED || s == GS_GENERATED) && c->engine) {       /* back in the dispatch queue */
        int i = (int)(g - c->engine->groups);
        if (i < c->engine->first_open) c->engine->first_open = i;
    }
}

static void status(Coord *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void status(Coord *c, const char *fmt, ...) {
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

/* ------------------------------------------------------------------------------------------------ groups */

static void group_free(Group *g) {
    if (g->result) net_unpacked_free(&g->result->base, g->result_arena);
    if (g->pred) for (int i = 0; i < g->n; i++) xfree(g->pred[i]);
    xfree(g->pred);
    xfree(g->score);
    xfree(g->acc);
    xfree(g->penalty);
    memset(g, 0, sizeof *g);
}

static void groups_reset(Engine *e) {
    for (int i = 0; i < e->ngroups; i++) group_free(&e->groups[i]);
    e->ngroups = 0;
    e->first_open = 0;
}

static Group *group_new(Coord *c, int item, long order, int validation) {
    Engine *e = c->engine;
    if (e->ngroups == e->capgroups) {
        e->capgroups = e->capgroups ? 2 * e->capgroups : 256;
        e->groups = xrealloc(e->groups, (size_t)e->capgroups * sizeof *e->groups);
    }
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

static Group *group_by_id(Engine *e, uint64_t id) {
    if (!e->ngroups || id < e->groups[0].id) return NULL;
    uint64_t i = id - e->groups[0].id;
    return i < (uint64_t)e->ngroups ? &e->groups[i] : NULL;
}

static const DatasetItem *group_item(Engine *e, const Group *g) {
    return g->validation ? &e->val.items[g->item] : &e->train.items[g->item];
}

/* ------------------------------------------------------------------------------------------------ epochs */

/* Fisher-Yates with Philox draws keyed by (data.seed, epoch): the same order for the same seed and epoch. */
static void shuffle_epoch(Coord *c) {
    Engine *e = c->engine;
    for (size_t i = 0; i < e->train.n; i++) e->order[i] = (int)i;
    if (!c->cfg.shuffle) return;
    for (size_t i = e->train.n; i > 1; i--) {
        double u = rng_uniform((uint64_t)c->cfg.data_seed, (uint64_t)e->epoch, 0x5eed, (uint32_t)i);
        size_t j = (size_t)(u * (double)i);
        if (j >= i) j = i - 1;
        int t = e->order[i - 1];
        e->order[i - 1] = e->order[j];
        e->order[j] = t;
    }
}

/* Draws the next prompt; returns its dataset index and writes its global order position. -1 when the last
 * epoch is used up. */
static int draw_prompt(Coord *c, long *order) {
    Engine *e = c->engine;
    if (e->epoch >= c->cfg.total_epochs) return -1;
    if (e->cursor >= (long)e->train.n) {
        e->epoch++;
        e->cursor = 0;
        if (e->epoch >= c->cfg.total_epochs) return -1;
        shuffle_epoch(c);
    }
    *order = (long)e->epoch * (long)e->train.n + e->cursor;
    e->consumed++;
    return e->order[e->cursor++];
}

/* ------------------------------------------------------------------------------------------------ dispatch */

/* A policy version the learner may train on: at most trainer.staleness behind the current one (the learner holds the
 * current version when the next batch reaches it: a batch goes out only when no update is in flight). */
static int version_ok(Coord *c, int64_t v) { return v >= c->policy_version - c->cfg.staleness && v <= c->policy_version; }

static void send_cancel(Coord *c, const Group *g, const char *reason);

/* g (generated, scoring, kept or surplus; its results held) came from a policy too far behind: it becomes GS_STALE
 * (its responses are never trained; a verifier holding it is told to drop it) and its prompt is generated again as
 * a new group in the same round, at the same epoch position (batch alignment is unchanged). */
static void drop_stale(Coord *c, Group *g) {
    Engine *e = c->engine;
    if (g->state == GS_SCORING) send_cancel(c, g, "stale policy version");
    if (g->state == GS_KEPT) e->kept--;
    log_info("step %ld: group %llu came from policy version %lld, more than trainer.staleness %d behind version %lld: "
             "dropped, its prompt generated again", e->step, (unsigned long long)g->id, (long long)g->version,
             c->cfg.staleness, (long long)c->policy_version);
    int item = g->item, round = g->round;
    long order = g->order;
    g->worker = -1;
    set_state(c, g, GS_STALE);
    e->n_stale++;
    Group *ng = group_new(c, item, order, 0);          /* may move e->groups: g is not used after this */
    ng->round = round;
}

/* The policy version moved on: every group of the step being generated whose results are now too stale is dropped
 * and regenerated (drop_stale). A ready batch with such a group goes back to generation, its surplus groups count as
 * kept again, and after_round aligns the batch anew once the replacements are settled. Returns the groups dropped. */
static int drop_stale_groups(Coord *c) {
    Engine *e = c->engine;
    if (!e || (e->phase != PH_GENERATE && e->phase != PH_BATCH_READY)) return 0;
    int n = e->ngroups, stale = 0;
    for (int i = 0; i < n; i++) {
        GroupState st = e->groups[i].state;
        stale += (st == GS_GENERATED || st == GS_SCORING || st == GS_KEPT || st == GS_SURPLUS) &&
                 !version_ok(c, e->groups[i].version);
    }
    if (!stale) return 0;
    if (e->phase == PH_BATCH_READY) {
        for (int i = 0; i < n; i++)
            if (e->groups[i].state == GS_SURPLUS) set_state(c, &e->groups[i], GS_KEPT);   /* e->kept counts them */
        e->phase = PH_GENERATE;
    }
    for (int i = 0; i < n; i++) {
        GroupState st = e->groups[i].state;
        if ((st == GS_GENERATED || st == GS_SCORING || st == GS_KEPT) && !version_ok(c, e->groups[i].version))
            drop_stale(c, &e->groups[i]);
    }
    return stale;
}

/* The alive worker of `role` with the most credit that has at least `need`; -1 when none. */
static int pick_worker(Coord *c, Dapo__Role role, uint32_t need, int check_version) {
    int best = -1;
    for (int i = 0; i < c->nworkers; i++) {
        WorkerEntry *w = &c->workers[i];
        if (w->role != role || w->life != WORKER_ALIVE || w->credit < need) continue;
        if (check_version && !version_ok(c, w->policy_version)) continue;
        if (best < 0 || w->credit > c->workers[best].credit) best = i;
    }
    return best;
}

static void send_generate(Coord *c, Group *g, int wi) {
    Engine *e = c->engine;
    const DatasetItem *it = group_item(e, g);
    Dapo__SamplingParams sp = DAPO__SAMPLING_PARAMS__INIT;
    sp.temperature = (float)(g->validation ? c->cfg.val_temperature : c->cfg.temperature);
    sp.top_p = (float)(g->validation ? c->cfg.val_top_p : c->cfg.top_p);
    sp.top_k = g->validation ? c->cfg.val_top_k : c->cfg.top_k;
    sp.greedy = g->validation && !c->cfg.val_do_sample;
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
    m.seed = (uint64_t)c->cfg.trainer_seed;
    m.validation = g->validation;
    WorkerEntry *w = &c->workers[wi];
    if (coord_send(c, w, DAPO__MSG_TYPE__MSG_GENERATE_GROUP, &m.base)) return;   /* stays queued */
    w->credit -= (uint32_t)g->n;
    g->worker = wi;
    g->lease_ms = clock_ms();
    set_state(c, g, GS_LEASED);
}

static void send_score(Coord *c, Group *g, int wi) {
    Engine *e = c->engine;
    const DatasetItem *it = group_item(e, g);
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
    WorkerEntry *w = &c->workers[wi];
    if (coord_send(c, w, DAPO__MSG_TYPE__MSG_SCORE_REQUEST, &m.base)) return;
    w->credit -= (uint32_t)g->n;
    g->worker = wi;
    g->lease_ms = clock_ms();
    set_state(c, g, GS_SCORING);
}

/* Hands queued groups to rollouts and generated ones to verifiers, in group order, while credit lasts. Groups
 * before e->first_open are settled or leased, so the scan starts there (it moves back when a lease returns). */
static void dispatch(Coord *c) {
    Engine *e = c->engine;
    int stuck_n = 0, roll_ok = 1, ver_ok = 1;
    while (e->first_open < e->ngroups && e->groups[e->first_open].state != GS_QUEUED &&
           e->groups[e->first_open].state != GS_GENERATED)
        e->first_open++;
    /* Queued / generated groups not yet passed by the scan: the run's counts of those states are never below
     * what this step holds (groups_reset drops groups without counting them out), so the scan stops once neither
     * kind can still be dispatched instead of walking every leased group behind them on every call. */
    uint64_t left_q = c->group_counts[GS_QUEUED], left_g = c->group_counts[GS_GENERATED];
    if (c->paused) roll_ok = 0;
    for (int i = e->first_open; i < e->ngroups && ((roll_ok && left_q) || (ver_ok && left_g)); i++) {
        Group *g = &e->groups[i];
        if (g->state == GS_QUEUED && left_q) left_q--;
        else if (g->state == GS_GENERATED && left_g) left_g--;
        if (g->state == GS_QUEUED && !c->paused && roll_ok) {
            int wi = pick_worker(c, DAPO__ROLE__ROLE_ROLLOUT, (uint32_t)g->n, 1);
            if (wi >= 0) send_generate(c, g, wi);
            else { stuck_n = g->n; roll_ok = 0; }       /* no rollout has room: the rest waits too */
        } else if (g->state == GS_GENERATED && ver_ok) {
            int wi = pick_worker(c, DAPO__ROLE__ROLE_VERIFIER, (uint32_t)g->n, 0);
            if (wi >= 0) send_score(c, g, wi);
            else ver_ok = 0;
        }
    }
    if (stuck_n && !registry_count(c, DAPO__ROLE__ROLE_ROLLOUT, WORKER_ALIVE))
        status(c, "step %ld: waiting for a rollout worker", e->step);
}

/* ------------------------------------------------------------------------------------------------ steps */

static void start_round(Coord *c) {
    Engine *e = c->engine;
    e->round++;
    e->round_first = e->ngroups;
    for (int i = 0; i < c->cfg.gen_batch_size; i++) {
        long order;
        int item = draw_prompt(c, &order);
        if (item < 0) break;
        group_new(c, item, order, 0);
    }
    status(c, "step %ld: generation round %d (%d prompts x %d)", e->step, e->round, e->ngroups - e->round_first,
           c->cfg.rollout_n);
}

/* The data is used up while step e->step was being drawn: that step is not trained (as verl's dataloader loop ends
 * with a partial batch), its kept groups become surplus, and the step counter — ours and the one /api/status and the
 * log show — goes back to the last trained step. `why` NULL: nothing was drawn for it. */
static void data_used_up(Coord *c, const char *why) {
    Engine *e = c->engine;
    for (int i = 0; i < e->ngroups; i++)
        if (e->groups[i].state == GS_KEPT) set_state(c, &e->groups[i], GS_SURPLUS);
    long partial = e->step;
    e->step--;
    c->step = e->step;
    log_set_step(e->step);
    e->phase = PH_IDLE;               /* idle(): the last step's validation if due, then done */
    e->data_done = 1;
    if (why) log_warn("step %ld not trained: %s", partial, why);
    status(c, "training finished: the data is used up (%d epochs)", c->cfg.total_epochs);
}

static void start_step(Coord *c) {
    Engine *e = c->engine;
    groups_reset(e);
    e->step++;
    log_set_step(e->step);
    c->step = e->step;
    e->round = 0;
    e->kept = 0;
    e->t_step = clock_s();
    e->t_reward_busy = 0;
    e->wasted_tokens = e->generated_tokens = 0;
    e->solve_none = e->solve_all = e->n_scored_groups = e->n_filtered = e->n_stale = 0;
    metrics_clear(&e->m);
    e->phase = PH_GENERATE;
    start_round(c);
    if (e->ngroups == 0) data_used_up(c, NULL);
}

static void start_validation(Coord *c, int after) {
    Engine *e = c->engine;
    groups_reset(e);
    e->val_after = after;
    e->phase = PH_VALIDATE;
    e->t_step = clock_s();
    e->round = 0;
    for (size_t i = 0; i < e->val.n; i++) group_new(c, (int)i, (long)i, 1);
    status(c, "validation at step %ld: %zu prompts x %d", e->done_steps, e->val.n, c->cfg.val_n);
}

/* ------------------------------------------------------------------------------------------------ batch */

static uint64_t response_tokens(const Group *g) {
    uint64_t n = 0;
    for (int i = 0; g->result && i < g->n; i++) n += g->result->responses[i]->n_token_ids;
    return n;
}

static int cmp_order(const void *a, const void *b) {
    const Group *x = *(const Group *const *)a, *y = *(const Group *const *)b;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* Which worker holds each learner rank (-1: none registered alive): rank_worker[W]. */
static void learner_workers(const Coord *c, int *rank_worker, int W) {
    for (int r = 0; r < W; r++) rank_worker[r] = -1;
    for (int i = 0; i < c->nworkers; i++)
        if (c->workers[i].role == DAPO__ROLE__ROLE_LEARNER && c->workers[i].life == WORKER_ALIVE &&
            (int)c->workers[i].rank < W)
            rank_worker[c->workers[i].rank] = i;
}

/* Encodes shard k of the plan for epoch ep (tbwire.h: the TrainBatch's wire bytes straight from the responses, into
 * a reused buffer handed to ZeroMQ without a copy) and sends it to its learner. 0 or an ERR_* with err set. */
static int send_shard(Coord *c, const BatchPlan *p, int k, int ep, const int *rank_worker, TbwSeq *rows,
                      char err[ERR_LEN]) {
    Engine *e = c->engine;
    const LayoutShard *sh = &p->lay.shard[k];
    int W = p->world;
    if (rank_worker[sh->rank] < 0) return err_set(err, ERR_CLOSED, "learner rank %d is not registered", sh->rank);
    batch_plan_shard_rows(p, k, rows);
    TbwHead h = {.run_id = c->run_id, .step = e->step, .policy_version = c->policy_version,
                 .mini_batch_index = (uint32_t)sh->mini, .num_mini_batches = (uint32_t)p->lay.n_mini,
                 .ppo_epoch = (uint32_t)ep, .global_response_tokens = (uint64_t)sh->global_tokens,
                 .global_num_seqs = (uint32_t)sh->global_seqs, .rank = (uint32_t)sh->rank, .world_size = (uint32_t)W,
                 .last_of_step = ep == c->cfg.ppo_epochs - 1 && sh->mini == p->lay.n_mini - 1,
                 .total_training_steps = (uint64_t)(e->total_steps > 0 ? e->total_steps : 0)};
    TbwSizes tsz;
    size_t n = tbwire_size(&h, rows, sh->n_seq, &tsz);
    if (n > UINT32_MAX || p->shard_tokens[k] > UINT32_MAX)
        return err_set(err, ERR_TOO_BIG, "the shard of rank %d mini-batch %d is %zu bytes (%lld tokens): over the 4 GiB "
                       "a message can hold", sh->rank, sh->mini, n, p->shard_tokens[k]);
    ZcBuf *zb;
    uint8_t *frame = coord_zc_frame(c, NET_HEADER_BYTES + n, &zb);
    net_encode_into(DAPO__MSG_TYPE__MSG_TRAIN_BATCH, NULL, n, frame);
    tbwire_write(&h, rows, sh->n_seq, &tsz, frame + NET_HEADER_BYTES);
    const WorkerEntry *lw = &c->workers[rank_worker[sh->rank]];
    int src = coord_zc_send(c, lw, DAPO__MSG_TYPE__MSG_TRAIN_BATCH, frame, NET_HEADER_BYTES + n, zb);
    if (src == ERR_AGAIN)
        return err_set(err, src, "the send queue to learner %s (rank %d) is full: it has not read its earlier shards",
                       lw->id, sh->rank);
    if (src)
        return err_set(err, src, "learner %s (rank %d) vanished while its shards were sent: %s", lw->id, sh->rank,
                       err_str(src));
    return 0;
}

/* The batch of one step: its plan first (batch.h: advantages, layout, every row), then a loop that only sends the
 * shards, ppo_epochs x mini-batches x ranks (DESIGN.md §1 steps 4-5). A failure fails the run with the first error;
 * the other shards are still tried so every learner hears of the step. */
static int send_batch(Coord *c, Group **batch, int nb) {
    Engine *e = c->engine;
    char err[ERR_LEN], first[ERR_LEN] = "";
    const DatasetItem **items = xmalloc((size_t)(nb ? nb : 1) * sizeof *items);
    for (int b = 0; b < nb; b++) items[b] = group_item(e, batch[b]);
    BatchPlan p;
    int rc = batch_plan_build(&c->cfg, batch, items, nb, &p, err);
    xfree(items);
    if (rc) {
        engine_fail(c, "step %ld: cannot lay out the batch: %s", e->step, err);
        return rc;
    }
    int W = p.world, *rank_worker = xmalloc((size_t)W * sizeof(int));
    learner_workers(c, rank_worker, W);
    TbwSeq *rows = xmalloc((size_t)(p.nseq ? p.nseq : 1) * sizeof *rows);
    e->job.batch_tokens = p.batch_tokens;
    for (int ep = 0; ep < c->cfg.ppo_epochs; ep++)
        for (int k = 0; k < p.lay.n_mini * W; k++) {
            int src = send_shard(c, &p, k, ep, rank_worker, rows, err);
            if (src && !rc) snprintf(first, sizeof first, "%s", err);
            if (src) rc = src;
        }
    if (rc) {
        engine_fail(c, "step %ld: TrainBatch not sent: %s", e->step, first);
    } else {
        e->job.expected = c->cfg.ppo_epochs * p.lay.n_mini * W;
        metrics_set(&e->m, "critic/advantages/mean", p.adv_mean);
        metrics_set(&e->m, "critic/advantages/max", p.adv_max);
        metrics_set(&e->m, "critic/advantages/min", p.adv_min);
    }
    batch_plan_free(&p);
    xfree(rank_worker);
    xfree(rows);
    return rc;
}

/* Batch statistics of the trained groups with verl's names (ray_trainer compute_data_metrics). */
static void batch_metrics(Coord *c, Group **batch, int nb) {
    Engine *e = c->engine;
    double ssum = 0, smax = -INFINITY, smin = INFINITY, lsum = 0, lmax = 0, lmin = INFINITY, clip = 0;
    double psum = 0, pmax = 0, pmin = INFINITY, accsum = 0;
    int n = 0;
    for (int b = 0; b < nb; b++) {
        const DatasetItem *it = group_item(e, batch[b]);
        for (int i = 0; i < batch[b]->n; i++, n++) {
            double s = batch[b]->score[i], len = (double)batch[b]->result->responses[i]->n_token_ids;
            ssum += s; smax = fmax(smax, s); smin = fmin(smin, s);
            accsum += batch[b]->acc[i];
            lsum += len; lmax = fmax(lmax, len); lmin = fmin(lmin, len);
            clip += len >= c->cfg.max_response_length;
            psum += it->n_ids; pmax = fmax(pmax, it->n_ids); pmin = fmin(pmin, it->n_ids);
        }
    }
    if (!n) return;
    metrics_set(&e->m, "critic/score/mean", ssum / n);
    metrics_set(&e->m, "critic/score/max", smax);
    metrics_set(&e->m, "critic/score/min", smin);
    metrics_set(&e->m, "critic/rewards/mean", ssum / n);
    metrics_set(&e->m, "critic/acc/mean", accsum / n);
    metrics_set(&e->m, "response_length/mean", lsum / n);
    metrics_set(&e->m, "response_length/max", lmax);
    metrics_set(&e->m, "response_length/min", lmin);
    metrics_set(&e->m, "response_length/clip_ratio", clip / n);
    metrics_set(&e->m, "prompt_length/mean", psum / n);
    metrics_set(&e->m, "prompt_length/max", pmax);
    metrics_set(&e->m, "prompt_length/min", pmin);
}

/* Every group of the round is settled: assemble the batch, or draw another round, or fail (verl's rule). */
static void after_round(Coord *c) {
    Engine *e = c->engine;
    int T = c->cfg.train_batch_size;
    if (e->kept < T) {
        int limit = c->cfg.max_num_gen_batches;
        if (limit > 0 && e->round >= limit) {
            engine_fail(c, "step %ld: after %d generation rounds only %d of the %d groups the batch needs had mixed %s "
                 "(%d generated, %d filtered, %d solved by none, %d solved by all); raise "
                 "algorithm.filter_groups.max_num_gen_batches or check the data and model",
                 e->step, e->round, e->kept, T, filter_metric_name(e->fmetric), e->n_scored_groups, e->n_filtered,
                 e->solve_none, e->solve_all);
            return;
        }
        int before = e->ngroups;
        start_round(c);
        if (e->ngroups == before) {
            char why[160];
            snprintf(why, sizeof why, "the data ran out with %d of the %d groups it needs kept", e->kept, T);
            data_used_up(c, why);
        }
        return;
    }
    /* Batch alignment as verl: kept groups in epoch order, the first T trained, the rest surplus. */
    Group **kept = xmalloc((size_t)e->kept * sizeof *kept);
    int nk = 0;
    for (int i = 0; i < e->ngroups; i++)
        if (e->groups[i].state == GS_KEPT) kept[nk++] = &e->groups[i];
    qsort(kept, (size_t)nk, sizeof *kept, cmp_order);
    for (int i = T; i < nk; i++) set_state(c, kept[i], GS_SURPLUS);
    e->t_gen = clock_s() - e->t_step;
    batch_metrics(c, kept, T);
    xfree(kept);
    metrics_set(&e->m, "train/num_gen_batches", e->round);
    metrics_set(&e->m, "batch/solve_none", e->n_scored_groups ? (double)e->solve_none / e->n_scored_groups : 0);
    metrics_set(&e->m, "batch/solve_all", e->n_scored_groups ? (double)e->solve_all / e->n_scored_groups : 0);
    metrics_set(&e->m, "batch/filtered_ratio", e->n_scored_groups ? (double)e->n_filtered / e->n_scored_groups : 0);
    e->wasted_tokens = 0;            /* from scratch: a stale drop can bring the step back here (drop_stale) */
    for (int i = 0; i < e->ngroups; i++) {
        GroupState st = e->groups[i].state;
        if (st == GS_FILTERED || st == GS_CANCELLED || st == GS_SURPLUS || st == GS_STALE)
            e->wasted_tokens += response_tokens(&e->groups[i]);
    }
    metrics_set(&e->m, "batch/wasted_tokens", (double)e->wasted_tokens);
    metrics_set(&e->m, "batch/stale_regenerated", (double)e->n_stale);
    e->phase = PH_BATCH_READY;
    status(c, "step %ld: batch ready (%d rounds, %d kept)", e->step, e->round, nk);
}

/* Sends the assembled batch of the step being generated to the learners and makes it the training job. In sync
 * mode the engine then waits for the update; in async mode it goes on to generate the next step. */
static void send_ready_batch(Coord *c) {
    Engine *e = c->engine;
    if (drop_stale_groups(c)) return;              /* back to generation: no stale row reaches a learner */
    int T = c->cfg.train_batch_size, nb = 0;
    Group **batch = xmalloc((size_t)T * sizeof *batch);
    for (int i = 0; i < e->ngroups && nb < T; i++)
        if (e->groups[i].state == GS_KEPT) batch[nb++] = &e->groups[i];
    qsort(batch, (size_t)nb, sizeof *batch, cmp_order);
    TrainJob *t = &e->job;
    metrics_clear(&t->learner);
    if (send_batch(c, batch, nb) == 0) {
        for (int i = 0; i < nb; i++) set_state(c, batch[i], GS_TRAINED);   /* handed to the learners */
        Metrics swap = t->m;
        t->m = e->m;
        e->m = swap;
        metrics_clear(&e->m);
        t->active = 1;
        t->step = e->step;
        t->results = 0;
        t->new_version = 0;
        t->t_step = e->t_step;
        t->t_gen = e->t_gen;
        t->t_reward = e->t_reward_busy;
        t->t_sent = clock_s();
        t->snap = (EngineSnapshot){.step = e->step, .epoch = e->epoch, .cursor = e->cursor,
                                   .consumed = e->consumed, .next_group_id = e->next_group_id,
                                   .data_seed = c->cfg.data_seed, .n_train = (long)e->train.n};
        memcpy(t->snap.group_counts, c->group_counts, sizeof c->group_counts);
        e->phase = c->cfg.staleness > 0 ? PH_IDLE : PH_TRAIN;
        status(c, "step %ld: training on %d groups", e->step, nb);
    }
    xfree(batch);
}

/* Tells the worker holding g's lease (LEASED or SCORING) to drop it. */
static void send_cancel(Coord *c, const Group *g, const char *reason) {
    if (g->worker < 0 || c->workers[g->worker].life != WORKER_ALIVE) return;
    Dapo__ItemRef ref = DAPO__ITEM_REF__INIT, *refs[1] = {&ref};
    ref.item_id = g->id;
    ref.attempt = g->state == GS_LEASED ? g->attempt : g->score_attempt;
    Dapo__Cancel m = DAPO__CANCEL__INIT;
    m.n_items = 1;
    m.items = refs;
    m.reason = (char *)reason;
    coord_send(c, &c->workers[g->worker], DAPO__MSG_TYPE__MSG_CANCEL, &m.base);
}

/* Cancels every group still in flight (streaming mode, once the batch is full). */
static void cancel_in_flight(Coord *c) {
    Engine *e = c->engine;
    for (int i = 0; i < e->ngroups; i++) {
        Group *g = &e->groups[i];
        if (g->state != GS_QUEUED && g->state != GS_LEASED && g->state != GS_GENERATED && g->state != GS_SCORING)
            continue;
        if (g->state == GS_LEASED || g->state == GS_SCORING) send_cancel(c, g, "batch full");
        set_state(c, g, GS_CANCELLED);
    }
}

static int round_settled(Engine *e) {
    for (int i = e->round_first; i < e->ngroups; i++) {
        GroupState s = e->groups[i].state;
        if (s == GS_QUEUED || s == GS_LEASED || s == GS_GENERATED || s == GS_SCORING) return 0;
    }
    return 1;
}

/* Validation metrics as verl names them (dapo/val_metrics.h): val-core/<data_source>/acc/mean@k, best@k/mean,
 * maj@k/mean, over the validated groups in group order. */
static void finish_validation(Coord *c) {
    Engine *e = c->engine;
    ValAgg agg;
    val_agg_init(&agg, c->cfg.val_n);
    for (int i = 0; i < e->ngroups; i++) {
        const Group *g = &e->groups[i];
        if (g->state != GS_VALIDATED) continue;
        val_agg_add(&agg, group_item(e, g)->data_source, g->acc, (const char *const *)g->pred, g->n);
    }
    Metrics out = {0};
    val_agg_metrics(&agg, &out);
    val_agg_free(&agg);
    metrics_set(&out, "training/global_step", (double)e->done_steps);
    metrics_set(&out, "timing_s/testing", clock_s() - e->t_step);
    coord_record_step(c, e->done_steps, &out);
    e->last_val_step = e->done_steps;
    for (int i = 0; i < out.n; i++) log_info("validation %s = %.4f", out.m[i].name, out.m[i].value);
    metrics_free(&out);
    if (e->val_after) {
        e->phase = PH_DONE;
        status(c, c->cfg.val_only ? "finished (validation only)" : "training finished after %ld steps", e->done_steps);
    } else {
        e->phase = PH_IDLE;
    }
}

/* ------------------------------------------------------------------------------------------------ results */

/* Returns 1 when the group kept r and its arena (the caller must not free them). */
static int on_group_result(Coord *c, WorkerEntry *w, Dapo__GroupResult *r, NetArena *arena) {
    Engine *e = c->engine;
    Group *g = group_by_id(e, r->group_id);
    if (!g || g->attempt != r->attempt || g->state != GS_LEASED || strcmp(r->run_id, c->run_id) != 0) {
        log_debug("dropped a stale or duplicate result for group %llu attempt %u",
                  (unsigned long long)r->group_id, r->attempt);
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
    }
    g->worker = -1;
    if (bad) {
        log_warn("group %llu attempt %u from %s rejected: %s", (unsigned long long)g->id, g->attempt, w->id, bad);
        if (++g->attempt > MAX_ATTEMPTS) set_state(c, g, GS_CANCELLED);
        else set_state(c, g, GS_QUEUED);
        return 0;
    }
    g->result = r;
    g->result_arena = arena;
    g->version = r->policy_version;
    for (size_t i = 0; i < r->n_responses; i++) e->generated_tokens += r->responses[i]->n_token_ids;
    g->score_attempt = 1;
    set_state(c, g, GS_GENERATED);
    if (!version_ok(c, g->version)) {
        if (g->validation) {                           /* validation runs on the current weights: generate again */
            log_warn("validation group %llu from %s: policy version %lld is not current; generating it again",
                     (unsigned long long)g->id, w->id, (long long)g->version);
            g->result = NULL;
            g->result_arena = NULL;
            g->attempt++;
            set_state(c, g, GS_QUEUED);
            return 0;
        }
        drop_stale(c, g);
    }
    return 1;
}

static void settle_scored(Coord *c, Group *g) {
    Engine *e = c->engine;
    if (g->validation) { set_state(c, g, GS_VALIDATED); return; }
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
    if (keep) { set_state(c, g, GS_KEPT); e->kept++; }
    else { set_state(c, g, GS_FILTERED); e->n_filtered++; }
    /* one sample per scored group for the dashboard */
    const DatasetItem *it = group_item(e, g);
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

static void on_score_result(Coord *c, WorkerEntry *w, Dapo__ScoreResult *r) {
    Engine *e = c->engine;
    Group *g = group_by_id(e, r->request_id);
    if (!g || g->score_attempt != r->attempt || g->state != GS_SCORING) {
        log_debug("dropped a stale or duplicate score for group %llu", (unsigned long long)r->request_id);
        return;
    }
    g->worker = -1;
    if (r->n_scores != (size_t)g->n) {
        log_warn("scores for group %llu from %s: %zu scores for %d responses; re-scoring",
                 (unsigned long long)g->id, w->id, r->n_scores, g->n);
        g->score_attempt++;
        set_state(c, g, GS_GENERATED);
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
    }
    for (int i = 0; i < g->n; i++) if (!g->pred[i]) g->pred[i] = xstrdup("");
    settle_scored(c, g);
    if (e->phase == PH_GENERATE && c->cfg.filter_groups_streaming && e->kept >= c->cfg.train_batch_size)
        cancel_in_flight(c);
}

static void finish_step(Coord *c);
static void announce_version(Coord *c);

static void on_step_result(Coord *c, WorkerEntry *w, Dapo__StepResult *r) {
    Engine *e = c->engine;
    TrainJob *t = &e->job;
    if (!t->active || r->step != t->step || strcmp(r->run_id, c->run_id) != 0) {
        log_debug("dropped a step result for step %lld from %s", (long long)r->step, w->id);
        return;
    }
    if (r->error[0]) {
        engine_fail(c, "step %ld: learner %s (rank %u) failed: %s", t->step, w->id, r->rank, r->error);
        return;
    }
    for (size_t i = 0; i < r->n_metrics; i++)
        metrics_set(&t->learner, r->metrics[i]->key, metrics_get(&t->learner, r->metrics[i]->key, 0) + r->metrics[i]->value);
    t->results++;
    if (r->new_policy_version > 0) t->new_version = r->new_policy_version;
    if (t->results >= t->expected && t->new_version > c->policy_version) {
        t->t_trained = clock_s();
        c->policy_version = t->new_version;
        announce_version(c);
        drop_stale_groups(c);                       /* async: groups of the step being generated may be too old now */
        if (c->cfg.staleness > 0) {
            finish_step(c);                         /* async: rollouts catch up while they generate */
        } else {
            e->phase = PH_WEIGHTS;
            status(c, "step %ld: waiting for rollouts to load policy version %lld", t->step, (long long)c->policy_version);
        }
    }
}

void engine_on_message(Coord *c, WorkerEntry *w, NetMsg *m) {
    if (!c->engine) {
        coord_send_error(c, w->rid, w->rid_len, ERR_UNSUPPORTED, m->type, "no training run configured");
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
    case DAPO__MSG_TYPE__MSG_STEP_RESULT: on_step_result(c, w, (Dapo__StepResult *)m->msg); break;
    case DAPO__MSG_TYPE__MSG_WEIGHT_ACK:
        w->policy_version = ((Dapo__WeightAck *)m->msg)->version;
        break;
    case DAPO__MSG_TYPE__MSG_CONTROL: ckpt_on_control(c, w, (Dapo__Control *)m->msg); break;
    default:
        coord_send_error(c, w->rid, w->rid_len, ERR_UNSUPPORTED, m->type, "message not handled by the coordinator");
    }
    engine_tick(c);
}

void engine_on_worker_lost(Coord *c, int wi) {
    Engine *e = c->engine;
    if (!e) return;
    int requeued = 0;
    for (int i = 0; i < e->ngroups; i++) {
        Group *g = &e->groups[i];
        if (g->worker != wi) continue;
        if (g->state == GS_LEASED) {
            g->attempt++;
            set_state(c, g, g->attempt > MAX_ATTEMPTS ? GS_CANCELLED : GS_QUEUED);
            requeued++;
        } else if (g->state == GS_SCORING) {
            g->score_attempt++;
            set_state(c, g, GS_GENERATED);
            requeued++;
        }
        g->worker = -1;
    }
    if (requeued) log_warn("%d groups of %s returned to the queue", requeued, c->workers[wi].id);
    if (c->workers[wi].role == DAPO__ROLE__ROLE_LEARNER && e->job.active)
        engine_fail(c, "step %ld: learner rank %u (%s) was lost during the update; restart it and resume from the last "
             "checkpoint", e->step, c->workers[wi].rank, c->workers[wi].id);
}

/* A lease lives while its worker heartbeats, but not for ever: one older than cluster.max_lease_s (generation)
 * or cluster.max_score_lease_s (scoring) is taken back even from a worker that still heartbeats — one that lost a
 * result (a send dropped on a full queue, a bug) or hangs on one item while its loop runs would otherwise stall
 * the step silently (DESIGN.md §7: no input may lose data). The group goes back to the queue with attempt + 1
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
        send_cancel(c, g, "lease reclaimed: held past the coordinator's lease limit");
        if (gen) {
            g->attempt++;
            set_state(c, g, g->attempt > MAX_ATTEMPTS ? GS_CANCELLED : GS_QUEUED);
        } else {
            g->score_attempt++;
            set_state(c, g, GS_GENERATED);
        }
        g->worker = -1;
        e->leases_reclaimed++;
    }
}

/* ------------------------------------------------------------------------------------------------ tick */

static int rollouts_current(Coord *c) {
    int alive = 0;
    for (int i = 0; i < c->nworkers; i++) {
        WorkerEntry *w = &c->workers[i];
        if (w->role != DAPO__ROLE__ROLE_ROLLOUT || w->life != WORKER_ALIVE) continue;
        alive++;
        if (w->policy_version < c->policy_version) return 0;
    }
    return alive > 0;
}

/* Every learner rank 0..W-1 is registered and alive. */
static int learners_ready(Coord *c) {
    int have = 0;
    for (int r = 0; r < c->cfg.num_learners; r++)
        for (int i = 0; i < c->nworkers; i++)
            if (c->workers[i].role == DAPO__ROLE__ROLE_LEARNER && c->workers[i].life == WORKER_ALIVE &&
                (int)c->workers[i].rank == r) { have++; break; }
    return have == c->cfg.num_learners;
}

/* The training job's update is done (and in sync mode every rollout holds the new version): record the step's
 * metrics, checkpoint at save_freq, schedule validation at test_freq. */
static void finish_step(Coord *c) {
    Engine *e = c->engine;
    TrainJob *t = &e->job;
    double now = clock_s(), step_s = now - t->t_step;
    Metrics out = {0};
    for (int i = 0; i < t->m.n; i++) metrics_set(&out, t->m.m[i].name, t->m.m[i].value);
    for (int i = 0; i < t->learner.n; i++)           /* learner metrics: mean over mini-batches and ranks */
        metrics_set(&out, t->learner.m[i].name, t->learner.m[i].value / (t->results ? t->results : 1));
    metrics_set(&out, "timing_s/gen", t->t_gen);
    metrics_set(&out, "timing_s/reward", t->t_reward);
    metrics_set(&out, "timing_s/update_actor_wall", t->t_trained - t->t_sent);
    metrics_set(&out, "timing_s/update_weights", now - t->t_trained);
    metrics_set(&out, "timing_s/step", step_s);
    metrics_set(&out, "perf/throughput", (double)t->batch_tokens / step_s / c->cfg.num_learners);
    metrics_set(&out, "training/global_step", (double)t->step);
    metrics_set(&out, "training/epoch", (double)t->snap.epoch);
    metrics_set(&out, "actor/policy_version", (double)c->policy_version);
    coord_record_step(c, t->step, &out);
    log_info("step %ld done in %.1f s: score %.3f, acc %.3f, %g rounds, pg_loss %.4f", t->step, step_s,
             metrics_get(&out, "critic/score/mean", NAN), metrics_get(&out, "critic/acc/mean", NAN),
             metrics_get(&out, "train/num_gen_batches", NAN), metrics_get(&out, "actor/pg_loss", NAN));
    metrics_free(&out);
    e->done_steps = t->step;
    t->active = 0;
    if (e->phase == PH_WEIGHTS || e->phase == PH_TRAIN) e->phase = PH_IDLE;
    e->snap = t->snap;
    e->snap.policy_version = c->policy_version;
    int last = e->total_steps > 0 && e->done_steps >= e->total_steps;
    if (c->cfg.save_freq > 0 && (e->done_steps % c->cfg.save_freq == 0 || last)) {    /* as verl */
        char err[ERR_LEN];
        if (ckpt_request(c, err)) log_error("checkpoint at step %ld: %s", e->done_steps, err);
    }
    if (c->cfg.test_freq > 0 && e->val.n && (e->done_steps % c->cfg.test_freq == 0 || last)) e->val_pending = 1;
}

/* Tells every rollout at once that a new policy version is out (a Heartbeat carries the version), so they fetch
 * it now rather than at their next heartbeat. */
static void announce_version(Coord *c) {
    Dapo__Heartbeat hb = DAPO__HEARTBEAT__INIT;
    hb.policy_version = c->policy_version;
    for (int i = 0; i < c->nworkers; i++)
        if (c->workers[i].role == DAPO__ROLE__ROLE_ROLLOUT && c->workers[i].life == WORKER_ALIVE)
            coord_send(c, &c->workers[i], DAPO__MSG_TYPE__MSG_HEARTBEAT, &hb.base);
}

/* Some alive rollout holds a version within the staleness bound (async mode starts generating with it). */
static int rollouts_usable(Coord *c) {
    for (int i = 0; i < c->nworkers; i++)
        if (c->workers[i].role == DAPO__ROLE__ROLE_ROLLOUT && c->workers[i].life == WORKER_ALIVE &&
            version_ok(c, c->workers[i].policy_version))
            return 1;
    return 0;
}

/* In IDLE: validation when due, else the next step's generation, else done. */
static void idle(Coord *c) {
    Engine *e = c->engine;
    int initial_val = !e->val_started && e->done_steps == 0 && e->val.n && (c->cfg.val_before_train || c->cfg.val_only);
    if (initial_val || (e->val_pending && !e->job.active)) {
        if (!rollouts_current(c)) {
            status(c, "waiting for a rollout worker with policy version %lld", (long long)c->policy_version);
            return;
        }
        e->val_started = 1;
        e->val_pending = 0;
        start_validation(c, c->cfg.val_only);
        return;
    }
    if (c->cfg.val_only) { e->phase = PH_DONE; return; }
    int last = e->total_steps > 0 && e->step >= e->total_steps;
    if (last || e->data_done) {                      /* nothing more to generate */
        if (!e->job.active && c->cfg.test_freq > 0 && e->val.n && e->done_steps > 0 && e->last_val_step != e->done_steps) {
            /* verl validates after the last step whatever test_freq says (also when the data ran out first) */
            if (!rollouts_current(c)) {
                status(c, "waiting for a rollout worker with policy version %lld", (long long)c->policy_version);
                return;
            }
            start_validation(c, 1);
            return;
        }
        if (!e->job.active) {
            e->phase = PH_DONE;
            status(c, "training finished after %ld steps", e->done_steps);
        }
        return;
    }
    /* async: a step whose update is followed by a validation (test_freq, or the last step) is not overlapped with the
     * next step's generation — the validation needs that update's weights on every rollout and the engine's groups */
    TrainJob *t = &e->job;
    if (t->active && c->cfg.test_freq > 0 && e->val.n &&
        (t->step % c->cfg.test_freq == 0 || (e->total_steps > 0 && t->step >= e->total_steps))) {
        status(c, "step %ld: waiting for its update, then validation", t->step);
        return;
    }
    if (!learners_ready(c))
        status(c, "waiting for all %d learner ranks to register", c->cfg.num_learners);
    else if (c->cfg.staleness > 0 ? rollouts_usable(c) : rollouts_current(c))
        start_step(c);
    else
        status(c, "waiting for a rollout worker with policy version %lld", (long long)c->policy_version);
}

/* One pass of the state machine; returns 1 when the phase changed (the caller runs another pass). */
static int tick_once(Coord *c) {
    Engine *e = c->engine;
    Phase before = e->phase;
    switch (e->phase) {
    case PH_IDLE:
        idle(c);
        break;
    case PH_VALIDATE:
    case PH_GENERATE:
        dispatch(c);
        if (e->phase == PH_VALIDATE && round_settled(e)) finish_validation(c);
        else if (e->phase == PH_GENERATE && round_settled(e)) after_round(c);
        if (e->phase == PH_GENERATE) dispatch(c);
        break;
    case PH_BATCH_READY:
        if (!e->job.active && learners_ready(c)) send_ready_batch(c);
        break;
    case PH_WEIGHTS:
        if (rollouts_current(c)) finish_step(c);
        break;
    default:
        break;
    }
    return e->phase != before;
}

/* The coordinator is stopping: nothing new is generated; the step in training finishes (its results are all the
 * learner needs to send: rollouts need not load the new version), it is checkpointed on both sides, then the
 * coordinator exits. The cron bounds all of it by cluster.stop_timeout_s. */
static void stop_tick(Coord *c) {
    Engine *e = c->engine;
    if (e->phase == PH_WEIGHTS) finish_step(c);
    if (e->phase == PH_FAILED) { coord_exit(c); return; }
    if (e->job.active) {
        status(c, "stopping: waiting for the learner to finish step %ld", e->job.step);
        return;
    }
    char err[ERR_LEN];
    if (ckpt_done(c)) { coord_exit(c); return; }
    if (!ckpt_waiting(c) && ckpt_request(c, err)) {
        log_error("stopping without a checkpoint of step %ld: %s", e->done_steps, err);
        coord_exit(c);
        return;
    }
    status(c, "stopping: waiting for the learner's checkpoint of step %ld", e->done_steps);
}

void engine_tick(Coord *c) {
    if (!c->engine || c->stopping > 1) return;
    if (c->stopping) { stop_tick(c); return; }
    for (int i = 0; i < 8 && tick_once(c); i++) {}
}

/* ------------------------------------------------------------------------------------------------ setup */

static int load_files(Engine *e, Dataset *ds, const StrList *files, const DatasetOptions *o, char err[ERR_LEN]) {
    for (int i = 0; i < files->n; i++) {
        int rc = dataset_load(ds, files->v[i], e->tok, o, err);
        if (rc) return rc;
    }
    return 0;
}

int engine_start(Coord *c, char err[ERR_LEN]) {
    if (!c->cfg.train_files.n) {
        status(c, "no data.train_files configured: serving the worker registry only");
        return 0;
    }
    Engine *e = c->engine = xcalloc(1, sizeof *e);
    const char *tdir = c->cfg.tokenizer_path[0] ? c->cfg.tokenizer_path : c->cfg.model_path;
    if (!tdir[0]) return err_set(err, ERR_INVAL, "data.tokenizer (or actor_rollout_ref.model.path) is needed to read prompts");
    e->tok = tokenizer_load(tdir, err);
    if (!e->tok) return ERR_INVAL;
    const TokenizerSpecial *sp = tokenizer_special(e->tok);
    int32_t cand[] = {sp->eos, sp->im_end, sp->endoftext};
    for (int i = 0; i < 3; i++) {
        int dup = 0;
        for (int j = 0; j < e->n_stop; j++) dup |= e->stop_ids[j] == cand[i];
        if (cand[i] >= 0 && !dup) e->stop_ids[e->n_stop++] = cand[i];
    }
    DatasetOptions o;
    int rc = dataset_options_init(&o, c->cfg.max_prompt_length, c->cfg.filter_overlong_prompts, c->cfg.truncation,
                                  c->cfg.chat_template, c->cfg.on_malformed, e->tok, err);
    if (!rc) rc = load_files(e, &e->train, &c->cfg.train_files, &o, err);
    if (!rc) {
        o.max_items = c->cfg.val_max_samples;
        rc = load_files(e, &e->val, &c->cfg.val_files, &o, err);
    }
    if (!rc) rc = filter_metric_parse(c->cfg.filter_groups_metric, &e->fmetric, err);
    RolloutCorrConfig corr;
    if (!rc) rc = rollout_corr_config_from(&c->cfg, &corr, err);   /* the learners apply it; refused here at start */
    if (rc) return rc;
    if (c->cfg.staleness >= 1 && !corr.bypass && !corr.is_on && !corr.n_rs)
        log_warn("trainer.staleness %d with algorithm.rollout_correction.rollout_is and rollout_rs off: rows up to %d "
                 "policy versions old are trained as if on-policy (no importance weight corrects the behaviour policy); "
                 "remove rollout_is: null to get token-level truncated IS at 2.0", c->cfg.staleness, c->cfg.staleness);
    else if (corr.bypass)
        log_info("rollout correction: bypass mode (the rollout log-probs are the old policy; no IS weight, as verl's "
                 "ppo_clip), %d rejection criteria", corr.n_rs);
    else if (corr.is_on || corr.n_rs)
        log_info("rollout correction: %s%s IS%s%s, %d rejection criteria", corr.is_on ? "" : "no",
                 corr.is_on ? (corr.is_level == ROLLOUT_IS_TOKEN ? "token-level" : "sequence-level") : "",
                 corr.is_on ? (corr.is_lower > 0 ? " (IcePop)" : " (truncated)") : "", corr.is_auto ? " (auto: async)" : "",
                 corr.n_rs);
    if (!e->train.n) return err_set(err, ERR_INVAL, "data.train_files: no usable prompts");
    e->order = xmalloc(e->train.n * sizeof *e->order);
    shuffle_epoch(c);
    e->next_group_id = 1;
    e->last_val_step = -1;
    /* verl (ray_trainer._create_dataloader): total_training_steps = len(train_dataloader) * total_epochs, the
     * dataloader yielding whole batches of gen_batch_size prompts (drop_last); the lr schedule and "the last step"
     * (its checkpoint and validation) use it; the data may run out before it when groups are filtered */
    e->total_steps = c->cfg.total_training_steps > 0 ? c->cfg.total_training_steps
                   : (long)(e->train.n / (size_t)c->cfg.gen_batch_size) * c->cfg.total_epochs;
    if (e->total_steps <= 0)       /* verl would train nothing; we train until the data runs out (no schedule length) */
        log_warn("data.train_files: %zu usable prompts are fewer than data.gen_batch_size (%d): no step count can be "
                 "derived; training runs until the data is used up (set trainer.total_training_steps for a decaying "
                 "lr schedule)", e->train.n, c->cfg.gen_batch_size);
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
    /* Groups of the interrupted step were never trained: they are re-drawn from the restored cursor. */
    for (int g = GS_QUEUED; g <= GS_SCORING; g++) c->group_counts[g] = 0;
    c->group_counts[GS_KEPT] = 0;
    e->snap = *s;
    e->val_started = 1;               /* validation before training belongs to a fresh run */
    if (e->epoch < c->cfg.total_epochs) shuffle_epoch(c);
    log_set_step(s->step);
    return 0;
}

Phase engine_phase(const Coord *c) { return c->engine ? c->engine->phase : PH_IDLE; }

/* Group accounting (DESIGN.md §7): every group in exactly one state; the states add up to "created". */
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
        json_object_set_new(l, "reclaimed", json_integer((json_int_t)e->leases_reclaimed));
        json_object_set_new(l, "last_reclaimed", json_string(e->last_reclaim));
        json_object_set_new(status, "leases", l);
    }
}

void engine_free(Coord *c) {
    Engine *e = c->engine;
    if (!e) return;
    groups_reset(e);
    xfree(e->groups);
    xfree(e->order);
    dataset_free(&e->train);
    dataset_free(&e->val);
    tokenizer_free(e->tok);
    metrics_free(&e->m);
    metrics_free(&e->job.m);
    metrics_free(&e->job.learner);
    xfree(e);
    c->engine = NULL;
}
