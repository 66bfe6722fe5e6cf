/* services/coordinator/steps.c: the training loop of the coordinator (docs/design.md §1 "One step", issue 8).
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
 * and its prompt generated again (eng__drop_stale_groups in dispatch.c, run whenever the version moves and before a batch goes out),
 * so no stale row is ever sent. The learners correct the rest (issue 15: services/learner/offpolicy.h).
 * This file: epochs, the step state machine and the tick; the engine's other files are listed in engine.h
 * (group.c, dispatch.c, results.c, setup.c; the batch plan is batch.h).
 * Not here: coordinator checkpoints and resume (ckpt.c). */
#include "engine.h"

/* ------------------------------------------------------------------------------------------------ epochs */

/* Draws the next prompt; returns its dataset index and writes its global order position. -1 when the last
 * epoch is used up. */
static int draw_prompt(Coord *c, long *order) {
    Engine *e = c->engine;
    if (e->epoch >= c->cfg.total_epochs) return -1;
    if (e->cursor >= (long)e->train.n) {
        e->epoch++;
        e->cursor = 0;
        if (e->epoch >= c->cfg.total_epochs) return -1;
        eng__shuffle_epoch(c);
    }
    *order = (long)e->epoch * (long)e->train.n + e->cursor;
    e->consumed++;
    return e->order[e->cursor++];
}

/* ------------------------------------------------------------------------------------------------ steps */

static void start_round(Coord *c) {
    Engine *e = c->engine;
    e->round++;
    e->round_first = e->ngroups;
    for (int i = 0; i < config_gen_batch_size(&c->cfg); i++) {
        long order;
        int item = draw_prompt(c, &order);
        if (item < 0) break;
        eng__group_new(c, item, order, 0);
        e->n_drawn++;
    }
    eng__status(c, "step %ld: generation round %d (%d prompts x %d)", e->step, e->round, e->ngroups - e->round_first,
           c->cfg.rollout_n);
}

/* algorithm.filter_groups.refill at_once (config_refill_at_once): while the step has fewer than train_batch_size groups
 * kept, every slot of its gen_batch_size that a group left (filtered by dynamic sampling, or cancelled after
 * MAX_ATTEMPTS) gets a new prompt at once, drawn in epoch order, within max_num_gen_batches x gen_batch_size prompts
 * per step (verl V1's replay buffer: evict k, refill k). A group dropped as stale or whose worker died already takes its
 * slot again (eng__drop_stale, lease reclaim). The batch is still the first train_batch_size kept groups in epoch order,
 * so which prompts are trained does not depend on timing; how many prompts a step draws does. */
static void refill(Coord *c) {
    Engine *e = c->engine;
    int T = c->cfg.train_batch_size, G = config_gen_batch_size(&c->cfg), limit = c->cfg.max_num_gen_batches;
    if (!config_refill_at_once(&c->cfg) || e->kept >= T || e->data_done) return;
    int held = 0;                                    /* slots taken: groups live or kept */
    for (int i = e->round_first; i < e->ngroups; i++) {
        GroupState st = e->groups[i].state;
        held += st == GS_QUEUED || st == GS_LEASED || st == GS_GENERATED || st == GS_SCORING;
    }
    held += e->kept;
    for (; held < G && (limit <= 0 || e->n_drawn < (long)limit * G); held++) {
        long order;
        int item = draw_prompt(c, &order);
        if (item < 0) break;                         /* the round settles; eng__after_round sees the data used up */
        eng__group_new(c, item, order, 0);
        e->n_drawn++;
        e->n_refilled++;
        c->counters.groups_refilled++;
    }
}

/* The data is used up while step e->step was being drawn: that step is not trained (as verl's dataloader loop ends
 * with a partial batch), its kept groups become surplus, and the step counter — ours and the one /api/status and the
 * log show — goes back to the last trained step. `why` NULL: nothing was drawn for it. */
static void data_used_up(Coord *c, const char *why) {
    Engine *e = c->engine;
    for (int i = 0; i < e->ngroups; i++)
        if (e->groups[i].state == GS_KEPT) eng__set_state(c, &e->groups[i], GS_SURPLUS);
    long partial = e->step;
    e->step--;
    c->step = e->step;
    log_set_step(e->step);
    e->phase = PH_IDLE;               /* idle(): the last step's validation if due, then done */
    e->data_done = 1;
    if (why) log_warn("step %ld not trained: %s", partial, why);
    if (eng__inflight(e))
        eng__status(c, "the data is used up (%d epochs): the %d steps at the learners finish the run",
                    c->cfg.total_epochs, eng__inflight(e));
    else
        eng__status(c, "training finished: the data is used up (%d epochs)", c->cfg.total_epochs);
}

/* The step's reward outcomes (counts of scored responses, every round) and a Python reward's extra values. */
static void reward_metrics(Engine *e) {
    static const char *name[5] = {NULL, "reward/timeouts", "reward/crashes", "reward/memory_errors", "reward/errors"};
    for (int o = 1; o < 5; o++) metrics_set(&e->m, name[o], (double)e->reward_outcomes[o]);
    for (int i = 0; i < e->n_reward_extra; i++) {
        char key[96];
        snprintf(key, sizeof key, "reward_extra/%s/mean", e->reward_extra_name[i]);
        metrics_set(&e->m, key, e->reward_extra_n[i] ? e->reward_extra_sum[i] / (double)e->reward_extra_n[i] : 0);
    }
}

static void start_step(Coord *c) {
    Engine *e = c->engine;
    eng__groups_reset(e);
    if (!e->have_initial && e->step == 0) {         /* where a rollback before the first checkpoint goes */
        e->initial = e->snap;
        memcpy(e->initial.group_counts, c->group_counts, sizeof c->group_counts);
        e->initial.next_group_id = e->next_group_id;   /* after the validation's groups, as its counts are */
        e->have_initial = 1;
    }
    e->step++;
    log_set_step(e->step);
    c->step = e->step;
    e->round = 0;
    e->kept = 0;
    e->t_step = clock_s();
    e->t_reward_busy = 0;
    e->t_last_generated = 0;
    e->wasted_tokens = e->generated_tokens = 0;
    e->solve_none = e->solve_all = e->n_scored_groups = e->n_filtered = e->n_stale = 0;
    e->n_drawn = e->n_refilled = e->n_waited = e->n_continued = 0;
    e->continued_tokens = 0;
    memset(e->reward_outcomes, 0, sizeof e->reward_outcomes);
    for (int i = 0; i < e->n_reward_extra; i++) xfree(e->reward_extra_name[i]);
    e->n_reward_extra = 0;
    metrics_clear(&e->m);
    e->phase = PH_GENERATE;
    start_round(c);
    if (e->ngroups == 0) data_used_up(c, NULL);
}

static void start_validation(Coord *c, int after) {
    Engine *e = c->engine;
    eng__groups_reset(e);
    e->val_after = after;
    e->phase = PH_VALIDATE;
    e->t_step = clock_s();
    e->round = 0;
    for (size_t i = 0; i < e->val.n; i++) eng__group_new(c, (int)i, (long)i, 1);
    eng__status(c, "validation at step %ld: %zu prompts x %d", e->done_steps, e->val.n, c->cfg.val_n);
}

/* ------------------------------------------------------------------------------------------------ batch */

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
 * a reused buffer handed to ZeroMQ without a copy) and queues it for its learner. 0, or ERR_CLOSED (its rank is not
 * registered) / ERR_TOO_BIG with err set. */
static int send_shard(Coord *c, const BatchPlan *p, int k, int ep, const int *rank_worker, TbwSeq *rows,
                      int64_t from, TrainJob *hold, char err[ERR_LEN]) {
    Engine *e = c->engine;
    const LayoutShard *sh = &p->lay.shard[k];
    int W = p->world;
    if (rank_worker[sh->rank] < 0) return err_set(err, ERR_CLOSED, "learner rank %d is not registered", sh->rank);
    batch_plan_shard_rows(p, k, rows);
    TbwHead h = {.run_id = c->run_id, .step = e->step, .policy_version = from,
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
    ZcBuf *zb = NULL;
    uint8_t *frame = hold ? xmalloc(NET_HEADER_BYTES + n) : out_zc_frame(c, NET_HEADER_BYTES + n, &zb);
    net_encode_into(DAPO__MSG_TYPE__MSG_TRAIN_BATCH, NULL, n, frame);
    tbwire_write(&h, rows, sh->n_seq, &tsz, frame + NET_HEADER_BYTES);
    if (hold) {                                      /* queued behind the step in training: sent when it is done */
        XGROW(hold->held, hold->nheld, hold->capheld, 16);
        hold->held[hold->nheld++] = (struct HeldShard){.rank = (uint32_t)sh->rank, .frame = frame,
                                                       .len = NET_HEADER_BYTES + n};
        return 0;
    }
    out_zc_send(c, &c->workers[rank_worker[sh->rank]], DAPO__MSG_TYPE__MSG_TRAIN_BATCH, frame, NET_HEADER_BYTES + n, zb,
                (uint64_t)e->step, (uint32_t)sh->rank);   /* a failed send comes back: engine_on_send_failed */
    return 0;
}

/* The batch of one step: its plan first (batch.h: advantages, layout, every row), then a loop that only sends the
 * shards, ppo_epochs x mini-batches x ranks (docs/design.md §1 steps 4-5). A failure fails the run with the first error;
 * the other shards are still tried so every learner hears of the step. */
static int send_batch(Coord *c, TrainJob *t, Group **batch, int nb) {
    Engine *e = c->engine;
    TrainJob *hold = t == &e->job ? NULL : t;
    int64_t from = eng__train_from(c);
    char err[ERR_LEN], first[ERR_LEN] = "";
    const DatasetItem **items = xmalloc((size_t)(nb ? nb : 1) * sizeof *items);
    for (int b = 0; b < nb; b++) items[b] = eng__group_item(e, batch[b]);
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
    t->batch_tokens = p.batch_tokens;
    for (int ep = 0; ep < c->cfg.ppo_epochs; ep++)
        for (int k = 0; k < p.lay.n_mini * W; k++) {
            int src = send_shard(c, &p, k, ep, rank_worker, rows, from, hold, err);
            if (src && !rc) snprintf(first, sizeof first, "%s", err);
            if (src) rc = src;
        }
    if (rc == ERR_TOO_BIG) {
        engine_fail(c, "step %ld: TrainBatch not sent: %s", e->step, first);
    } else if (rc) {                                 /* a learner went away: wait for it and roll back (recover.c) */
        engine_rejoin_begin(c, -1, "step %ld: TrainBatch not sent: %s", e->step, first);
    } else {
        t->expected = c->cfg.ppo_epochs * p.lay.n_mini * W;
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
        const DatasetItem *it = eng__group_item(e, batch[b]);
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
void eng__after_round(Coord *c) {
    Engine *e = c->engine;
    int T = c->cfg.train_batch_size;
    if (e->kept < T) {
        int limit = c->cfg.max_num_gen_batches, G = config_gen_batch_size(&c->cfg);
        if (limit > 0 && (config_refill_at_once(&c->cfg) ? e->n_drawn >= (long)limit * G : e->round >= limit)) {
            engine_fail(c, "step %ld: after %d prompts (%d generation rounds, %d refilled) only %d of the %d groups the "
                 "batch needs had mixed %s (%d generated, %d filtered, %d solved by none, %d solved by all); raise "
                 "algorithm.filter_groups.max_num_gen_batches or check the data and model",
                 e->step, e->n_drawn, e->round, e->n_refilled, e->kept, T, filter_metric_name(e->fmetric),
                 e->n_scored_groups, e->n_filtered, e->solve_none, e->solve_all);
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
    for (int i = T; i < nk; i++) eng__set_state(c, kept[i], GS_SURPLUS);
    e->t_gen = clock_s() - e->t_step;
    batch_metrics(c, kept, T);
    eng__length_metrics(c, kept, T);
    eng__funnel_metrics(e, T);
    xfree(kept);
    metrics_set(&e->m, "train/num_gen_batches", e->round);
    metrics_set(&e->m, "batch/solve_none", e->n_scored_groups ? (double)e->solve_none / e->n_scored_groups : 0);
    metrics_set(&e->m, "batch/solve_all", e->n_scored_groups ? (double)e->solve_all / e->n_scored_groups : 0);
    metrics_set(&e->m, "batch/filtered_ratio", e->n_scored_groups ? (double)e->n_filtered / e->n_scored_groups : 0);
    reward_metrics(e);
    e->wasted_tokens = 0;            /* from scratch: a stale drop can bring the step back here (eng__drop_stale) */
    for (int i = 0; i < e->ngroups; i++) {
        GroupState st = e->groups[i].state;
        if (st == GS_FILTERED || st == GS_CANCELLED || st == GS_SURPLUS || st == GS_STALE)
            e->wasted_tokens += eng__response_tokens(&e->groups[i]);
    }
    metrics_set(&e->m, "batch/wasted_tokens", (double)e->wasted_tokens);
    metrics_set(&e->m, "batch/stale_regenerated", (double)e->n_stale);
    e->phase = PH_BATCH_READY;
    eng__status(c, "step %ld: batch ready (%d rounds, %d kept)", e->step, e->round, nk);
}

/* The trained groups by staleness, counted exactly against the version they train from (eng__train_from): histogram
 * batch/groups_staleness/<d> for d = 0 .. trainer.staleness (a group's d: from its oldest response's version); and
 * the step's generation counts: refills and waits (the funnel: batch/groups_refilled, batch/groups_waited), prompts
 * drawn, responses continued across a weight swap (rollout/continued_*). */
static void staleness_metrics(Coord *c, Group **batch, int nb) {
    Engine *e = c->engine;
    int k = config_staleness(&c->cfg);
    int64_t from = eng__train_from(c);
    int hist[65] = {0}, top = k;
    for (int b = 0; b < nb; b++) {                   /* never above k (eng__drop_stale_* ran just before): a bin past
                                                        k would show a broken bound, not hide it */
        int64_t d = from - batch[b]->version;
        d = d < 0 ? 0 : d > 64 ? 64 : d;
        hist[d]++;
        if (d > top) top = (int)d;
    }
    for (int d = 0; d <= top; d++) {
        char key[48];
        snprintf(key, sizeof key, "batch/groups_staleness/%d", d);
        metrics_set(&e->m, key, hist[d]);
    }
    metrics_set(&e->m, "batch/groups_refilled", e->n_refilled);
    metrics_set(&e->m, "batch/groups_waited", e->n_waited);
    metrics_set(&e->m, "batch/prompts_drawn", e->n_drawn);
    metrics_set(&e->m, "rollout/continued_responses", e->n_continued);     /* partial rollouts, every group generated */
    metrics_set(&e->m, "rollout/continued_tokens", (double)e->continued_tokens);
}

/* Sends the assembled batch of the step being generated to the learners and makes it the training job. In sync
 * mode the engine then waits for the update; in async mode it goes on to generate the next step. */
static void send_ready_batch(Coord *c) {
    Engine *e = c->engine;
    int queued = e->job.active;                      /* behind the step in training (trainer.staleness k >= 2) */
    if (queued ? eng__drop_stale_queued(c) : eng__drop_stale_groups(c)) return;   /* back to generation: no stale
                                                                                    row reaches a learner */
    int T = c->cfg.train_batch_size, nb = 0;
    Group **batch = xmalloc((size_t)T * sizeof *batch);
    for (int i = 0; i < e->ngroups && nb < T; i++)
        if (e->groups[i].state == GS_KEPT) batch[nb++] = &e->groups[i];
    qsort(batch, (size_t)nb, sizeof *batch, cmp_order);
    TrainJob *t = queued ? &e->queue[e->nqueue] : &e->job;
    metrics_clear(&t->learner);
    staleness_metrics(c, batch, nb);
    if (send_batch(c, t, batch, nb) == 0) {
        for (int i = 0; i < nb; i++)                 /* handed to the learners, or held until the step before is done */
            eng__set_state(c, batch[i], queued ? GS_HELD : GS_TRAINED);
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
        double ready = e->t_step + e->t_gen;
        t->t_reward_wait = e->t_last_generated > 0 && ready > e->t_last_generated ? ready - e->t_last_generated : 0;
        t->gen_tokens = e->generated_tokens;
        t->ngroups = nb;
        t->t_queued = queued ? t->t_sent : 0;
        t->resp_tokens = 0;
        for (int i = 0; i < nb; i++) t->resp_tokens += eng__response_tokens(batch[i]);
        if (!queued) c->counters.tokens_trained += (uint64_t)t->batch_tokens;   /* a held one's: when sent */
        t->snap = (EngineSnapshot){.step = e->step, .epoch = e->epoch, .cursor = e->cursor,
                                   .consumed = e->consumed, .next_group_id = e->next_group_id,
                                   .data_seed = c->cfg.data_seed, .n_train = (long)e->train.n};
        memcpy(t->snap.group_counts, c->group_counts, sizeof c->group_counts);
        t->snap.counters = c->counters;
        e->phase = config_staleness(&c->cfg) > 0 ? PH_IDLE : PH_TRAIN;
        if (queued) e->nqueue++;
        eng__status(c, queued ? "step %ld: %d groups queued behind step %ld" : "step %ld: training on %d groups", e->step,
                    nb, e->job.step);
    }
    xfree(batch);
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
        val_agg_add(&agg, eng__group_item(e, g)->data_source, g->acc, (const char *const *)g->pred, g->n);
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
    if (e->val_after && c->cfg.val_only) {
        e->phase = PH_DONE;
        eng__status(c, "finished (validation only)");
    } else {
        e->phase = PH_IDLE;                          /* after the last step: idle finishes the run (finish_run) */
    }
}

/* ------------------------------------------------------------------------------------------------ tick */

/* Every alive rollout the run waits for holds the current policy version — or, cluster.lease_timeout_s after it was
 * published, at least one does. A rollout that has not loaded it by then (hung, or a client that never acknowledges:
 * issue 38) is marked behind: the run waits for it no more, for this version or the next, until it reports the
 * current one, and it gets no groups meanwhile (dispatch checks its version). A rollout that registers without the
 * current weights starts behind. */
static int rollouts_current(Coord *c) {
    int alive = 0, current = 0;
    for (int i = 0; i < c->nworkers; i++) {
        WorkerEntry *w = &c->workers[i];
        if (w->role != DAPO__ROLE__ROLE_ROLLOUT || w->life != WORKER_ALIVE || w->probe_failed) continue;
        int cur = eng__worker_version(c, w) >= c->policy_version;
        if (cur) w->behind = 0;
        if (w->behind) continue;
        alive++;
        current += cur;
    }
    if (alive > 0 && current == alive) return 1;
    Engine *e = c->engine;
    double t = e->job.t_trained;
    if (!current || t <= 0 || clock_s() - t < c->cfg.lease_timeout_s) return 0;
    for (int i = 0; i < c->nworkers; i++) {
        WorkerEntry *w = &c->workers[i];
        if (w->role == DAPO__ROLE__ROLE_ROLLOUT && w->life == WORKER_ALIVE &&
            eng__worker_version(c, w) < c->policy_version)
            w->behind = 1;
    }
    log_warn("policy version %lld: %d of %d rollouts have not loaded it within cluster.lease_timeout_s (%.0f s): the "
             "run goes on with the %d that have, and waits for the others no more until they report it",
             (long long)c->policy_version, alive - current, alive, c->cfg.lease_timeout_s, current);
    return 1;
}

/* The status line while a step waits for its version on the rollouts: how many hold it, and how many the weight probe
 * refused (issue 42). */
static void waiting_for_weights(Coord *c) {
    if (eng__status_all_refused(c, c->engine->job.step)) return;
    int refused, alive = eng__rollouts_alive(c, &refused);
    eng__status(c, "step %ld: waiting for a rollout with policy version %lld (%d alive, %d refused by the weight "
                "probe)", c->engine->job.step, (long long)c->policy_version, alive, refused);
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

/* A validation follows step `step` (trainer.test_freq, or the last step, as verl validates after it). */
static int validates_after(const Coord *c, long step) {
    const Engine *e = c->engine;
    return c->cfg.test_freq > 0 && e->val.n &&
           (step % c->cfg.test_freq == 0 || (e->total_steps > 0 && step >= e->total_steps));
}

/* The step queued first behind the one just done becomes the one in training: its held frames go out now, after
 * whatever the step just done asked of the learners (its checkpoint), so a learner sees one step at a time. */
static void promote_queued(Coord *c) {
    Engine *e = c->engine;
    if (!e->nqueue) return;
    TrainJob done = e->job;
    e->job = e->queue[0];
    memmove(e->queue, e->queue + 1, (size_t)(e->nqueue - 1) * sizeof *e->queue);
    e->nqueue--;
    e->queue[e->nqueue] = done;                      /* its buffers are reused by a later queued step */
    e->queue[e->nqueue].active = 0;
    TrainJob *t = &e->job;
    int W = c->cfg.num_learners, missing = -1, *rw = xmalloc((size_t)W * sizeof(int));
    learner_workers(c, rw, W);
    for (int i = 0; i < t->nheld; i++) {
        struct HeldShard *h = &t->held[i];
        if ((int)h->rank >= W || rw[h->rank] < 0) { missing = (int)h->rank; xfree(h->frame); continue; }
        out_zc_send(c, &c->workers[rw[h->rank]], DAPO__MSG_TYPE__MSG_TRAIN_BATCH, h->frame, h->len, NULL,
                    (uint64_t)t->step, h->rank);    /* the outbox owns the frame from here */
    }
    t->nheld = 0;
    t->t_sent = clock_s();
    /* its groups are trained from now on, and its tokens; so its snapshot (taken when it was queued, with itself and the
     * steps queued before it held) says, as every step before it is done when it is */
    c->group_counts[GS_HELD] -= (uint64_t)t->ngroups;
    c->group_counts[GS_TRAINED] += (uint64_t)t->ngroups;
    c->counters.tokens_trained += (uint64_t)t->batch_tokens;
    t->snap.group_counts[GS_TRAINED] += t->snap.group_counts[GS_HELD];
    t->snap.group_counts[GS_HELD] = 0;
    t->snap.counters.tokens_trained = c->counters.tokens_trained;
    xfree(rw);
    log_info("step %ld: its batch (queued) goes to the learners, trained from policy version %lld", t->step,
             (long long)c->policy_version);
    if (missing >= 0)
        engine_rejoin_begin(c, -1, "step %ld: TrainBatch not sent: learner rank %d is not registered", t->step, missing);
}

/* The training job's update is done (and in sync mode every rollout holds the new version): record the step's
 * metrics, checkpoint at save_freq, schedule validation at test_freq; the step queued behind it goes out. */
void eng__finish_step(Coord *c) {
    Engine *e = c->engine;
    TrainJob *t = &e->job;
    /* the wall time the step added to the run: from its generation's start, or (async: it overlapped the step
     * before) from that step's end; its time queued behind that step is timing_s/queue */
    double now = clock_s(), step_s = now - fmax(t->t_step, e->t_last_finish);
    Metrics out = {0};
    for (int i = 0; i < t->m.n; i++) metrics_set(&out, t->m.m[i].name, t->m.m[i].value);
    for (int i = 0; i < t->learner.n; i++)           /* learner metrics: mean over mini-batches and ranks */
        metrics_set(&out, t->learner.m[i].name, t->learner.m[i].value / (t->results ? t->results : 1));
    metrics_set(&out, "timing_s/gen", t->t_gen);
    metrics_set(&out, "timing_s/reward", t->t_reward);
    metrics_set(&out, "timing_s/update_actor_wall", t->t_trained - t->t_sent);
    metrics_set(&out, "timing_s/update_weights", now - t->t_trained);
    metrics_set(&out, "timing_s/step", step_s);
    metrics_set(&out, "timing_s/queue", t->t_queued > 0 ? t->t_sent - t->t_queued : 0);
    metrics_set(&out, "perf/throughput", (double)t->batch_tokens / step_s / c->cfg.num_learners);
    eng__split_metrics(t, now, step_s, &out);
    metrics_set(&out, "training/global_step", (double)t->step);
    metrics_set(&out, "training/epoch", (double)t->snap.epoch);
    metrics_set(&out, "actor/policy_version", (double)c->policy_version);
    coord_record_step(c, t->step, &out);
    log_info("step %ld done in %.1f s: score %.3f, acc %.3f, %g rounds, pg_loss %.4f", t->step, step_s,
             metrics_get(&out, "critic/score/mean", NAN), metrics_get(&out, "critic/acc/mean", NAN),
             metrics_get(&out, "train/num_gen_batches", NAN), metrics_get(&out, "actor/pg_loss", NAN));
    metrics_free(&out);
    e->done_steps = t->step;
    e->t_last_finish = now;
    t->active = 0;
    if (e->phase == PH_WEIGHTS || e->phase == PH_TRAIN) e->phase = PH_IDLE;
    e->snap = t->snap;
    e->snap.policy_version = c->policy_version;
    int last = e->total_steps > 0 && e->done_steps >= e->total_steps;
    if ((c->cfg.save_freq > 0 && (e->done_steps % c->cfg.save_freq == 0 || last)) || c->ckpt.wanted) {  /* as verl;
                                                                              or the dashboard asked during the step */
        char err[ERR_LEN];
        c->ckpt.wanted = 0;
        if (ckpt_request(c, err)) log_error("checkpoint at step %ld: %s", e->done_steps, err);
    }
    if (validates_after(c, e->done_steps)) e->val_pending = 1;
    promote_queued(c);
}

/* Some alive rollout holds a version within the staleness bound (async mode starts generating with it). */
static int rollouts_usable(Coord *c) {
    for (int i = 0; i < c->nworkers; i++)
        if (c->workers[i].role == DAPO__ROLE__ROLE_ROLLOUT && c->workers[i].life == WORKER_ALIVE &&
            !c->workers[i].probe_failed && eng__version_ok(c, eng__worker_version(c, &c->workers[i])))
            return 1;
    return 0;
}

/* The newest step at the learners (queued last, or the one in training), NULL when none. */
static const TrainJob *newest_inflight(const Engine *e) {
    return e->nqueue ? &e->queue[e->nqueue - 1] : e->job.active ? &e->job : NULL;
}

/* The ready batch may go to the learners: none is training, or (trainer.staleness k >= 2) fewer than k steps are
 * in flight and the newest is not followed by a validation (it needs that step's weights and the engine's groups). */
static int can_send(Coord *c) {
    Engine *e = c->engine;
    if (!learners_ready(c)) return 0;
    if (!e->job.active) return 1;
    const TrainJob *t = newest_inflight(e);
    int k = config_staleness(&c->cfg);
    if (k < 2 || eng__inflight(e) >= k || e->nqueue >= JOB_QUEUE_MAX) return 0;
    return !validates_after(c, t->step);
}

/* The last step is trained (and validated). The run is done once that step's checkpoint is held by both sides, when
 * one is due (trainer.save_freq > 0): until then a learner lost (killed while it writes the checkpoint) rolls the
 * run back and trains the tail again (recover.c), where a run already done would end without its final checkpoint.
 * A checkpoint the learner answers it cannot write (asked once more first), or that cannot be asked for
 * (coordinator.json not written), fails the run naming why: the steps since the last one live only in memory. */
static void finish_run(Coord *c) {
    Engine *e = c->engine;
    if (c->cfg.save_freq > 0 && !ckpt_done(c)) {
        if (ckpt_waiting(c)) {
            eng__status(c, "training finished after %ld steps: waiting for the learner's checkpoint of step %ld",
                        e->done_steps, e->done_steps);
            return;
        }
        char err[ERR_LEN] = "";
        if (e->final_ckpt_step != e->done_steps) {  /* not asked (or a rollback since): ask once more */
            e->final_ckpt_step = e->done_steps;
            if (!ckpt_request(c, err)) return;
        }
        /* asked and answered without it, or not askable: the trained weights of the steps since the last checkpoint
         * live only in the learner's memory — not a finished run */
        const CkptState *k = &c->ckpt;
        engine_fail(c, "training finished after %ld steps, but its checkpoint was not written (%s); the last "
                    "checkpoint both sides hold is step %ld: fix the cause, then run the same command again (it "
                    "resumes there)", e->done_steps,
                    err[0] ? err : k->failed_step == e->done_steps ? k->failed_why : "the learner did not answer",
                    k->has_saved ? k->saved.step : 0L);
        return;
    }
    e->phase = PH_DONE;
    eng__status(c, "training finished after %ld steps", e->done_steps);
}

/* In IDLE: validation when due, else the next step's generation, else done. */
static void idle(Coord *c) {
    Engine *e = c->engine;
    if (c->ckpt.undecided) {                         /* nothing starts before the resume decision (ckpt.c) */
        eng__status(c, "waiting for learner rank 0 to say which checkpoint it loaded");
        return;
    }
    int initial_val = !e->val_started && e->done_steps == 0 && e->val.n && (c->cfg.val_before_train || c->cfg.val_only);
    if (initial_val || (e->val_pending && !e->job.active)) {
        if (!rollouts_current(c)) {
            eng__status(c, "waiting for a rollout worker with policy version %lld", (long long)c->policy_version);
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
                eng__status(c, "waiting for a rollout worker with policy version %lld", (long long)c->policy_version);
                return;
            }
            start_validation(c, 1);
            return;
        }
        if (!e->job.active) finish_run(c);
        return;
    }
    /* async: a step whose update is followed by a validation (test_freq, or the last step) is not overlapped with the
     * next step's generation — the validation needs that update's weights on every rollout and the engine's groups */
    const TrainJob *t = newest_inflight(e);
    if (t && validates_after(c, t->step)) {
        eng__status(c, "step %ld: waiting for its update, then validation", t->step);
        return;
    }
    if (!learners_ready(c))
        eng__status(c, "waiting for all %d learner ranks to register", c->cfg.num_learners);
    else if (config_staleness(&c->cfg) > 0 ? rollouts_usable(c) : rollouts_current(c))
        start_step(c);
    else
        eng__status(c, "waiting for a rollout worker with policy version %lld", (long long)c->policy_version);
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
        if (e->phase == PH_GENERATE) refill(c);
        eng__dispatch(c);
        if (e->phase == PH_VALIDATE && round_settled(e)) finish_validation(c);
        else if (e->phase == PH_GENERATE && round_settled(e)) eng__after_round(c);
        if (e->phase == PH_GENERATE) eng__dispatch(c);
        break;
    case PH_BATCH_READY:
        if (can_send(c)) send_ready_batch(c);
        else if (e->job.active)                      /* the status line says what it waits for */
            eng__status(c, "step %ld: batch ready, waiting for the learners (step %ld training, %d queued behind it)",
                        e->step, e->job.step, e->nqueue);
        break;
    case PH_WEIGHTS:
        if (rollouts_current(c)) eng__finish_step(c);
        else waiting_for_weights(c);
        break;
    case PH_REJOIN:
        engine_rejoin_tick(c);
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
    if (e->phase == PH_WEIGHTS) eng__finish_step(c);
    if (e->phase == PH_FAILED) { out_exit(c); return; }
    if (e->job.active) {
        eng__status(c, "stopping: waiting for the learner to finish step %ld", e->job.step);
        return;
    }
    char err[ERR_LEN];
    if (ckpt_done(c)) { out_exit(c); return; }
    EngineSnapshot s;
    if (!ckpt_waiting(c) && engine_snapshot(c, &s) == 0 && c->ckpt.failed_step == s.step) {
        /* the learner answered it cannot write this step's checkpoint: asking again would only fail again */
        log_error("stopping without a checkpoint of step %ld: the learner could not write it (%s)", s.step,
                  c->ckpt.failed_why);
        coord_event(c, "stopped without a checkpoint of step %ld", s.step);
        c->stop_failed = 1;
        out_exit(c);
        return;
    }
    if (!ckpt_waiting(c) && ckpt_request(c, err)) {
        log_error("stopping without a checkpoint of step %ld: %s", e->done_steps, err);
        coord_event(c, "stopped without a checkpoint of step %ld", e->done_steps);
        if (e->phase != PH_DONE) c->stop_failed = 1;   /* exit status 76: the steps since the last checkpoint are lost
                                                          (a finished run has nothing left to resume) */
        out_exit(c);
        return;
    }
    eng__status(c, "stopping: waiting for the learner's checkpoint of step %ld", e->done_steps);
}

void engine_tick(Coord *c) {
    if (!c->engine || c->stopping > 1) return;
    if (c->stopping) { stop_tick(c); return; }
    for (int i = 0; i < 8 && tick_once(c); i++) {}
}
