/* services/learner/learner.c: the learner's training engine (see learner.h). Formula sources: verl
 * dp_actor.update_policy / compute_log_prob (micro-batches, global token counts, grad-norm skip of non-finite norms,
 * clip_grad_norm_), core_algos via dapo/loss.h; AdamW and schedules via model/adamw.h; chunking, packing and the
 * response gather / scatter via model/seqpack.h (shared with dapo-sft).
 * Not here: sockets and weights publishing (main.c, weights.c). */
#include "learner.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "dapo/layout.h"
#include "model/checkpoint.h"
#include "settings/settings.h"


static int keepalive(Learner *L) { return L->keepalive ? L->keepalive(L->keepalive_ud) : 0; }

/* Between layers (model_set_progress): heartbeats and weight requests through a long chunk; a stop it sees is
 * acted on at the chunk's end (chunk_tramp). */
static void layer_progress(void *ud) { (void)keepalive(ud); }

static float *falloc(long n) { return xmalloc((size_t)(n > 0 ? n : 1) * sizeof(float)); }

/* Sums the gradient slab over the ranks (collective.h). poison: this rank saw a non-finite gradient; every rank must
 * then skip the step, so the shared sum is made NaN. A device backend's slab is staged through host memory (the CPU
 * collective reads host memory; NCCL on device pointers is the GPU issue's). */
static int grads_allreduce(Learner *L, int poison, char err[ERR_LEN]) {
    Model *m = L->m;
    if (!poison && !L->coll) return 0;
    long n = model_n_params(m);
    float *g = model_host_slab(m, MODEL_GRADS), *copy = NULL;   /* a device backend's gradients go through a copy */
    if (!g) g = copy = xmalloc((size_t)n * sizeof(float));
    int rc = copy ? model_read(m, MODEL_GRADS, g, err) : 0;
    if (!rc && poison)
        for (long i = 0; i < n; i++) g[i] = NAN;
    if (!rc && L->coll && coll_allreduce_sum(L->coll, g, n, err)) rc = ERR_COLLECTIVE;   /* the ranks must re-form */
    if (copy) {
        if (!rc) rc = model_write(m, MODEL_GRADS, g, err);
        xfree(copy);
    }
    return rc;
}

/* A sharded rank's state (shard.h): its pieces of the weights (the checkpoint's fp32 export, or model.path) and of the
 * moments (any W's checkpoint: re-sharded), then every unit gathered once — rank 0 keeps the copy it publishes. */
static int shard_open(Learner *L, const Config *cfg, const char *src, char err[ERR_LEN]) {
    char dir[4200];
    if (src) checkpoint_model_dir(src, dir, sizeof dir);
    else snprintf(dir, sizeof dir, "%s", cfg->model_path);
    LearnerShard *s = &L->shard;
    int rc = shard_init(s, L->m, L->coll, L->rank, L->world, dir, err);
    if (!rc && src) rc = checkpoint_load_optim_shard(src, L->m, L->rank, L->world, s->m, s->v, err);
    if (!rc && L->rank == 0) L->full = xmalloc((size_t)s->n * sizeof(float));
    if (!rc) rc = shard_gather_full(s, L->full, err);
    if (!rc) log_info("learner rank %d: parameters, gradients and optimizer state sharded over %d ranks (fsdp_size %d, "
                      "reshard_after_forward %s): %ld of %ld parameters here", L->rank, L->world, cfg->fsdp_size,
                      cfg->reshard_after_forward ? "true" : "false", s->local, s->n);
    return rc;
}

int learner_gather_params(Learner *L, char err[ERR_LEN]) {
    return L->sharded ? shard_gather_full(&L->shard, L->full, err) : 0;
}

const float *learner_params(const Learner *L) { return L->sharded ? L->full : model_host_slab(L->m, MODEL_PARAMS); }

Learner *learner_open(const Config *cfg, int rank, int world, Collective *coll, char err[ERR_LEN]) {
    if (world < 1 || rank < 0 || rank >= world) { err_set(err, ERR_INVAL, "learner: rank %d of %d", rank, world); return NULL; }
    Learner *L = xcalloc(1, sizeof *L);
    L->rank = rank;
    L->world = world;
    L->coll = coll;
    L->failed_step = -1;
    L->cur_step = -1;
    settings_loss_params(cfg, &L->lp);
    klreward_init(&L->klr, cfg);
    L->lp.dp_size = 1;                                  /* gradients are summed over ranks (collective) */
    L->opt = adamw_defaults();
    L->opt.beta1 = (float)cfg->adam_beta1;
    L->opt.beta2 = (float)cfg->adam_beta2;
    L->opt.eps = (float)cfg->adam_eps;
    L->opt.weight_decay = (float)cfg->weight_decay;
    L->sched = cfg->warmup_style == CFG_WARMUP_COSINE ? LR_COSINE : LR_CONSTANT;
    L->lr = cfg->lr;
    L->min_lr_ratio = cfg->min_lr_ratio;
    L->warmup = cfg->lr_warmup_steps;
    L->warmup_ratio = cfg->lr_warmup_steps_ratio;
    L->total_steps = cfg->total_training_steps > 0 ? cfg->total_training_steps : 0;   /* 0: the coordinator's (TrainBatch) */
    L->grad_clip = cfg->grad_clip;
    SampleParams sp;                                    /* the rollouts' temperature (> 0: the table checks it) */
    settings_sample_params(cfg, 0, &sp);
    L->temperature = sp.temperature;
    L->micro_bsz = cfg->ppo_micro_batch_size_per_gpu;        /* >= 1 and every range below: the table's check */
    L->dynamic_bsz = cfg->use_dynamic_bsz;
    L->max_tok_micro = cfg->ppo_max_token_len_per_gpu;
    L->ppo_epochs = cfg->ppo_epochs;
    L->staleness = config_staleness(cfg);
    int rc = settings_rollout_corr(cfg, &L->rc, err);
    L->rng_seed = (uint64_t)cfg->trainer_seed;
    L->ckpt_root = xstrdup(cfg->default_local_dir);
    L->max_keep = cfg->max_actor_ckpt_to_keep;
    if (rc) { learner_close(L); return NULL; }
    ModelOptions mo;
    if (settings_learner_model(cfg, world, &mo, err)) { learner_close(L); return NULL; }
    L->sharded = mo.shard_world > 1;
    char path[4096];
    long step = -1;
    CheckpointState st = {0};
    const char *src = NULL;
    if (cfg->resume_mode == CFG_RESUME_PATH) src = cfg->resume_from_path;
    else if (cfg->resume_mode == CFG_RESUME_AUTO && checkpoint_find_latest(cfg->default_local_dir, path, sizeof path, &step, err) == 0)
        src = path;
    if (src) {
        L->m = checkpoint_load(src, &mo, &st, err);
        if (L->m) {
            L->steps_done = st.step;
            L->version = st.policy_version;
            L->rng_seed = st.rng_seed;
            L->rng_counter = st.rng_counter;
            klreward_restore(&L->klr, st.kl_ctrl_value);
            log_info("learner rank %d: resumed from %s (step %ld, policy version %lld, %ld optimizer steps)", rank, src,
                     st.step, (long long)st.policy_version, st.adam_step);
        }
    } else {
        L->m = model_load(cfg->model_path, &mo, err);
        if (L->m) log_info("learner rank %d: model %s (%ld parameters)", rank, cfg->model_path, model_n_params(L->m));
    }
    if (!L->m) { learner_close(L); return NULL; }
    log_info("learner rank %d: policy loss %s, loss_agg_mode %s, clip_ratio %g / %g, clip_ratio_c %g, KL loss %s", rank,
             loss_mode_name(L->lp.mode), loss_agg_mode_name(L->lp.agg), L->lp.clip_ratio_low, L->lp.clip_ratio_high,
             L->lp.clip_ratio_c, L->lp.use_kl ? config_enum_name(cfg, "actor_rollout_ref.actor.kl_loss_type") : "off");
    if (L->sharded && shard_open(L, cfg, src, err)) { learner_close(L); return NULL; }
    if ((L->lp.use_kl || L->klr.use_kl) && ref_open(L, cfg, err)) { learner_close(L); return NULL; }
    if (L->klr.on)
        log_info("learner rank %d: the learner computes the advantages (%s%s): KL in the reward %s, kl_ctrl %s, beta %g",
                 rank, adv_estimator_name(L->klr.est), L->klr.gamma != 1.0 ? ", per-token returns with gamma" : "",
                 L->klr.use_kl ? config_enum_name(cfg, "algorithm.kl_penalty") : "off",
                 L->klr.adaptive ? "adaptive" : "fixed", L->klr.use_kl ? L->klr.value : 0.0);
    long T = model_max_tokens(L->m);
    model_set_progress(L->m, layer_progress, L);
    L->pack = seqpack_new(L->m);
    L->r_old = falloc(T); L->r_adv = falloc(T); L->r_isw = falloc(T); L->r_ref = falloc(T);
    L->r_mask = xmalloc((size_t)T);
    if (learner_probe(L, err)) { learner_close(L); return NULL; }
    return L;
}

int learner_probe(Learner *L, char err[ERR_LEN]) {
    int n = probe_len(model_max_tokens(L->m));
    int32_t ids[PROBE_TOKENS];
    uint32_t offs[2] = {0, (uint32_t)n}, plen[1] = {1};
    float zero[PROBE_TOKENS] = {0}, one[PROBE_TOKENS];
    for (int i = 0; i < n; i++) one[i] = 1.0f;
    probe_tokens(model_config(L->m)->vocab, n, ids);
    Dapo__TrainBatch tb = DAPO__TRAIN_BATCH__INIT;  /* one sequence: the first id as its prompt, the rest scored */
    tb.input_ids = ids; tb.n_input_ids = (size_t)n;
    tb.offsets = offs; tb.n_offsets = 2;
    tb.prompt_lengths = plen; tb.n_prompt_lengths = 1;
    tb.response_mask = one; tb.n_response_mask = (size_t)n - 1;
    tb.advantages = zero; tb.n_advantages = (size_t)n - 1;
    tb.rollout_logprobs = zero; tb.n_rollout_logprobs = (size_t)n - 1;
    tb.rank = (uint32_t)L->rank; tb.world_size = (uint32_t)L->world;
    tb.num_mini_batches = 1;
    tb.policy_version = L->version;
    L->n_probe = 0;
    int rc = learner_logprobs(L, &tb, L->probe_lp, err);
    if (!rc) L->n_probe = n - 1;
    return rc;
}

static void step_reset(Learner *L) {
    for (int i = 0; i < L->n_pending; i++) dapo__train_batch__free_unpacked(L->pending[i], NULL);
    L->n_pending = 0;
    for (int i = 0; i < L->n_mini; i++) {
        xfree(L->old_lp ? L->old_lp[i] : NULL);
        xfree(L->ref_lp ? L->ref_lp[i] : NULL);
    }
    xfree(L->old_lp);
    xfree(L->ref_lp);
    L->ref_lp = NULL;
    xfree(L->old_n);
    L->old_n = NULL;
    offpolicy_free(L);
    L->old_lp = NULL;
    L->n_mini = 0;
    L->n_trained = 0;
    L->old_done = 0;
    L->t_old = L->t_ref = 0;
    klreward_free_step(&L->klr);
}

void learner_close(Learner *L) {
    if (!L) return;
    step_reset(L);
    xfree(L->pending);
    shard_free(&L->shard);
    xfree(L->full);
    model_free(L->m);
    xfree(L->ckpt_root);
    seqpack_free(L->pack);
    ref_free(L);
    void *bufs[] = {L->r_old, L->r_adv, L->r_isw, L->r_ref, L->r_mask};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) xfree(bufs[i]);
    xfree(L);
}

static long resp_count(const Dapo__TrainBatch *tb) {
    return (long)tb->n_response_mask;
}

int learner_check_batch(const Learner *L, const Dapo__TrainBatch *tb, char err[ERR_LEN]) {
    if (!tb) return err_set(err, ERR_INVAL, "train batch: NULL");
    if (tb->n_offsets < 2 || tb->n_prompt_lengths != tb->n_offsets - 1)
        return err_set(err, ERR_INVAL, "train batch: %zu offsets for %zu prompt lengths (need num_seqs + 1 >= 2)",
                       tb->n_offsets, tb->n_prompt_lengths);
    if (tb->world_size != (uint32_t)L->world || tb->rank != (uint32_t)L->rank)
        return err_set(err, ERR_INVAL, "train batch for rank %u of %u sent to rank %d of %d", tb->rank, tb->world_size,
                       L->rank, L->world);
    if (tb->num_mini_batches < 1 || tb->mini_batch_index >= tb->num_mini_batches)
        return err_set(err, ERR_INVAL, "train batch: mini-batch %u of %u", tb->mini_batch_index, tb->num_mini_batches);
    size_t S = tb->n_offsets - 1, resp = 0;
    if (tb->offsets[0] != 0 || tb->offsets[S] != tb->n_input_ids)
        return err_set(err, ERR_INVAL, "train batch: offsets run %u..%u over %zu input ids", tb->offsets[0], tb->offsets[S],
                       tb->n_input_ids);
    for (size_t i = 0; i < S; i++) {
        if (tb->offsets[i + 1] < tb->offsets[i]) return err_set(err, ERR_INVAL, "train batch: offsets decrease at %zu", i);
        uint32_t len = tb->offsets[i + 1] - tb->offsets[i];
        if (tb->prompt_lengths[i] > len || (tb->prompt_lengths[i] == 0 && len > 0))
            return err_set(err, ERR_INVAL, "train batch: sequence %zu has prompt length %u of %u tokens (need 1..len)", i,
                           tb->prompt_lengths[i], len);
        if ((long)len > model_max_tokens(L->m))
            return err_set(err, ERR_TOO_BIG, "train batch: sequence %zu has %u tokens, more than the learner's %d "
                           "(data.max_prompt_length + data.max_response_length)", i, len, model_max_tokens(L->m));
        resp += len - tb->prompt_lengths[i];
    }
    if (resp != tb->n_response_mask || resp != tb->n_advantages || resp != tb->n_rollout_logprobs)
        return err_set(err, ERR_INVAL, "train batch: %zu response tokens but %zu mask, %zu advantage, %zu log-prob values",
                       resp, tb->n_response_mask, tb->n_advantages, tb->n_rollout_logprobs);
    if (tb->n_token_versions && tb->n_token_versions != resp)         /* partial rollouts: one per response token */
        return err_set(err, ERR_INVAL, "train batch: %zu response tokens but %zu token versions", resp,
                       tb->n_token_versions);
    for (size_t i = 0, t = 0; tb->n_token_versions && i + 1 < tb->n_offsets; i++) {
        int64_t first = i < tb->n_behaviour_versions ? tb->behaviour_versions[i] : tb->policy_version;
        for (uint32_t k = tb->offsets[i] + tb->prompt_lengths[i]; k < tb->offsets[i + 1]; k++, t++)
            if (tb->token_versions[t] < first || tb->token_versions[t] > tb->policy_version)
                return err_set(err, ERR_INVAL, "train batch: sequence %zu has a token of policy version %lld, outside "
                               "[%lld (its behaviour version), %lld (the version it trains from)]", i,
                               (long long)tb->token_versions[t], (long long)first, (long long)tb->policy_version);
    }
    for (size_t i = 0; i < tb->n_input_ids; i++)
        if (tb->input_ids[i] < 0 || tb->input_ids[i] >= model_config(L->m)->vocab)
            return err_set(err, ERR_INVAL, "train batch: input id %d at %zu is outside the vocabulary [0, %d)",
                           tb->input_ids[i], i, model_config(L->m)->vocab);
    return 0;
}

/* Response-token index where sequence i's responses start (prefix sum). */
static void resp_starts(const Dapo__TrainBatch *tb, long *rs) {
    size_t S = tb->n_offsets - 1;
    rs[0] = 0;
    for (size_t i = 0; i < S; i++) rs[i + 1] = rs[i] + (tb->offsets[i + 1] - tb->offsets[i] - tb->prompt_lengths[i]);
}

/* Micro-batches of the shard: fixed size or dynamic by tokens. */
static int micro_layout(const Learner *L, const Dapo__TrainBatch *tb, LayoutMicro *mb, char err[ERR_LEN]) {
    int S = (int)tb->n_offsets - 1;
    if (!L->dynamic_bsz) return layout_micro_fixed(S, L->micro_bsz, mb, err);
    int *tok = xmalloc((size_t)S * sizeof(int));
    for (int i = 0; i < S; i++) tok[i] = (int)(tb->offsets[i + 1] - tb->offsets[i]);
    int rc = layout_micro_dynamic(tok, S, L->max_tok_micro, mb, err);
    xfree(tok);
    return rc;
}

/* The shard as the model's sequence set (seqpack.h). */
static SeqSet seqs_of(const Dapo__TrainBatch *tb) {
    return (SeqSet){.input_ids = tb->input_ids, .offsets = tb->offsets, .prompt_lengths = tb->prompt_lengths,
                    .n_seqs = (int)tb->n_offsets - 1};
}

/* The chunks of one micro-batch (sequences seq[0..n)): fn per chunk, then the coordinator keep-alive. */
typedef struct {
    Learner                *L;
    const Dapo__TrainBatch *tb;
    const long             *rs;       /* [S + 1] response start of each sequence in the shard's response order */
    int (*fn)(Learner *L, const Dapo__TrainBatch *tb, SeqChunk *c, const long *rs, void *ud, char err[ERR_LEN]);
    void                   *ud;
} ChunkRun;

static int chunk_tramp(SeqPack *p, SeqChunk *c, void *ud, char err[ERR_LEN]) {
    (void)p;
    ChunkRun *r = ud;
    int any, rc = r->L->sharded ? shard_vote(&r->L->shard, 1, &any, err) : 0;   /* one more pass (idle_passes) */
    if (!rc) rc = r->fn(r->L, r->tb, c, r->rs, r->ud, err);
    if (!rc && (rc = keepalive(r->L)) < 0) rc = err_set(err, rc, "shard aborted: %s", err_str(rc));
    return rc;
}

/* A sharded rank that has run all its chunks: idle passes (the hook calls of a forward, and of a backward when
 * backward) while any other rank still has a chunk, so that every rank's gathers and reduce-scatters pair up. */
static int idle_passes(Learner *L, int backward, char err[ERR_LEN]) {
    int any = 1, rc = 0;
    while (L->sharded && !rc && !(rc = shard_vote(&L->shard, 0, &any, err)) && any) {
        rc = model_forward_idle(L->m, err);
        if (!rc && backward) rc = model_backward_idle(L->m, err);
        if (!rc && (rc = keepalive(L)) < 0) rc = err_set(err, rc, "shard aborted: %s", err_str(rc));
    }
    return rc;
}

static int for_chunks(ChunkRun *r, const int *seq, int n, int *chunks, char err[ERR_LEN]) {
    SeqSet s = seqs_of(r->tb);
    return seqpack_for_chunks(r->L->pack, &s, seq, n, r->L->temperature, chunk_tramp, r, chunks, err);
}

static int chunk_logprobs(Learner *L, const Dapo__TrainBatch *tb, SeqChunk *c, const long *rs, void *ud,
                          char err[ERR_LEN]) {
    (void)tb;
    float *out = ud;
    int rc = seqpack_forward(L->pack, c, 0, err);
    if (rc) return rc;
    for (int k = 0; k < c->n; k++)
        for (int j = c->r_off[k]; j < c->r_off[k + 1]; j++) out[rs[c->seq[k]] + (j - c->r_off[k])] = c->logp[j];
    return 0;
}

int learner_logprobs(Learner *L, const Dapo__TrainBatch *tb, float *out, char err[ERR_LEN]) {
    int rc = learner_check_batch(L, tb, err);
    if (rc) return rc;
    LayoutMicro mb = {0};
    if ((rc = micro_layout(L, tb, &mb, err))) return rc;
    long *rs = xmalloc(tb->n_offsets * sizeof(long));
    resp_starts(tb, rs);
    ChunkRun run = {.L = L, .tb = tb, .rs = rs, .fn = chunk_logprobs, .ud = out};
    for (int j = 0; j < mb.n_micro && !rc; j++) rc = for_chunks(&run, mb.idx + mb.off[j], mb.off[j + 1] - mb.off[j], NULL, err);
    if (!rc) rc = idle_passes(L, 0, err);
    xfree(rs);
    layout_micro_free(&mb);
    return rc;
}

typedef struct {
    const float      *old_lp;
    const float      *ref_lp;           /* use_kl: the reference log-probs */
    const OffpolicyMini *corr;       /* IS weights / rejection mask of the mini-batch, or NULL */
    LossStats         acc;
    LearnerMiniStats *st;
    int               nonfinite;
} GradCtx;

static int chunk_grads(Learner *L, const Dapo__TrainBatch *tb, SeqChunk *c, const long *rs, void *ud,
                       char err[ERR_LEN]) {
    GradCtx *g = ud;
    double t0 = clock_s();
    int rc = seqpack_forward(L->pack, c, 1, err);
    if (rc) return rc;
    for (int k = 0; k < c->n; k++) {
        int i = c->seq[k];
        for (int j = c->r_off[k]; j < c->r_off[k + 1]; j++) {
            long src = rs[i] + (j - c->r_off[k]);
            L->r_old[j] = g->old_lp[src];
            if (g->ref_lp) L->r_ref[j] = g->ref_lp[src];
            L->r_adv[j] = tb->advantages[src];
            L->r_mask[j] = tb->response_mask[src] > 0.5f && (!g->corr || !g->corr->keep || g->corr->keep[src]);
            L->r_isw[j] = g->corr && g->corr->isw ? g->corr->isw[src] : 1.0f;
        }
    }
    if (L->rc.bypass)        /* verl's bypass loss: rejection from the current log-probs vs the rollout's, per chunk */
        offpolicy_reject_chunk(L, c->logp, L->r_old, L->r_mask, c->r_off, c->n, &L->bypass_rej, &L->bypass_cnt);
    LossInput in = {.logp = c->logp, .old_logp = L->r_old, .adv = L->r_adv, .mask = L->r_mask, .entropy = c->ent,
                    .seq_off = c->r_off, .n_seq = c->n, .is_weight = g->corr && g->corr->isw ? L->r_isw : NULL,
                    .ref_logp = g->ref_lp ? L->r_ref : NULL, .draw_seed = L->rng_seed,
                    /* clip_cov's draw: keyed by where the chunk is, so a rerun or a resume draws the same tokens */
                    .draw_stream = ((uint64_t)tb->step << 40) ^ ((uint64_t)tb->ppo_epoch << 32) ^
                                   ((uint64_t)tb->mini_batch_index << 20) ^ ((uint64_t)L->rank << 16) ^
                                   (uint64_t)(c->n > 0 ? c->seq[0] : 0)};
    LossStats s;
    int want_dent = L->lp.entropy_coeff != 0;
    rc = loss_compute(&L->lp, &in, NULL, c->dlogp, want_dent ? c->dent : NULL, &s, err);
    if (rc) return rc;
    if (!isfinite(s.loss)) g->nonfinite = 1;
    loss_stats_merge(&g->acc, &s);
    double t1 = clock_s();
    /* model_backward adds each sequence's weight-gradient terms into the one fp32 slab, sequence by sequence in
       order, with products that see only that sequence (model.h): chunks run in shard order, so the gradient is
       bitwise the same however the shard is cut into micro-batches (use_dynamic_bsz reorders sequences: equal to
       fp32 rounding of the sum) */
    rc = seqpack_backward(L->pack, c, c->dlogp, want_dent ? c->dent : NULL, err);
    g->st->t_fwd += t1 - t0;
    g->st->t_bwd += clock_s() - t1;
    return rc;
}

int learner_grads(Learner *L, const Dapo__TrainBatch *tb, const float *old_lp, const float *ref_lp,
                  const OffpolicyMini *corr, LearnerMiniStats *st, char err[ERR_LEN]) {
    memset(st, 0, sizeof *st);
    int rc = learner_check_batch(L, tb, err);
    if (rc) return rc;
    if (L->lp.use_kl && !ref_lp)
        return err_set(err, ERR_INVAL, "actor.use_kl_loss: the mini-batch's reference log-probs are missing");
    /* verl counts the token-mean denominator after rejection (the response_mask it modified) */
    L->lp.batch_num_tokens = (double)tb->global_response_tokens - (corr ? corr->rejected : 0);
    L->bypass_rej = L->bypass_cnt = 0;
    L->lp.global_batch_size = (double)tb->global_num_seqs;
    LayoutMicro mb = {0};
    if ((rc = micro_layout(L, tb, &mb, err))) return rc;
    long *rs = xmalloc(tb->n_offsets * sizeof(long));
    resp_starts(tb, rs);
    GradCtx g = {.old_lp = old_lp, .ref_lp = L->lp.use_kl ? ref_lp : NULL, .corr = corr, .st = st};
    if (L->sharded) shard_grads_zero(&L->shard);
    else model_grads_zero(L->m);
    L->shard.t_comm = 0;
    ChunkRun run = {.L = L, .tb = tb, .rs = rs, .fn = chunk_grads, .ud = &g};
    for (int j = 0; j < mb.n_micro && !rc; j++)
        rc = for_chunks(&run, mb.idx + mb.off[j], mb.off[j + 1] - mb.off[j], &st->n_micro, err);
    if (!rc) rc = idle_passes(L, 1, err);
    xfree(rs);
    layout_micro_free(&mb);
    if (rc) return rc;
    /* sums over ranks: gradients, then the loss statistics (so every rank reports and decides the same) */
    float *v = L->stats;
    v[0] = (float)g.acc.pg_loss; v[1] = (float)g.acc.loss; v[2] = (float)g.acc.entropy_sum;
    v[3] = (float)g.acc.clipfrac_sum; v[4] = (float)g.acc.clipfrac_lower_sum; v[5] = (float)g.acc.kl_sum;
    v[6] = (float)g.acc.n_tokens; v[7] = (float)g.nonfinite; v[8] = (float)g.acc.kl_loss;
    double t0 = clock_s();   /* sharded: each layer's gradients were reduce-scattered in backward (shard.h); a rank's
                                non-finite loss reaches every rank through v[7] */
    rc = L->sharded ? shard_finish_grads(&L->shard, err) : grads_allreduce(L, g.nonfinite, err);
    if (!rc && L->coll && coll_allreduce_sum(L->coll, v, 9, err)) rc = ERR_COLLECTIVE;
    st->t_comm = clock_s() - t0 + L->shard.t_comm;
    if (rc) return rc;
    double nt = v[6];
    st->pg_loss = v[0];
    st->loss = v[1];
    st->entropy = v[2] / (nt + 1e-8);
    st->pg_clipfrac = v[3] / (nt + 1e-8);
    st->pg_clipfrac_lower = v[4] / (nt + 1e-8);
    st->ppo_kl = v[5] / (nt + 1e-8);
    st->n_tokens = nt;
    st->kl_loss = v[8];
    st->skipped = v[7] > 0 || !isfinite(st->loss);
    return 0;
}

int learner_apply(Learner *L, LearnerMiniStats *st, char err[ERR_LEN]) {
    double t0 = clock_s(), norm = 0;
    if (!L->sharded) norm = model_grad_norm(L->m);
    else if (shard_grad_norm(&L->shard, &norm, err)) return ERR_COLLECTIVE;   /* the ranks re-form */
    st->grad_norm = norm;
    if (st->skipped || !isfinite(norm)) {          /* verl: "grad_norm is not finite", no optimizer step */
        st->skipped = 1;
        st->lr = 0;
        L->skipped_updates++;
        log_warn("learner rank %d: non-finite loss or grad norm (%g): update skipped (%ld so far)", L->rank, norm,
                 L->skipped_updates);
        if (L->sharded) shard_grads_zero(&L->shard);
        else model_grads_zero(L->m);
        st->t_opt = clock_s() - t0;
        return 0;
    }
    if (L->grad_clip > 0 && !L->sharded) model_grads_clip(L->m, L->grad_clip);
    long total = L->total_steps > 0 ? L->total_steps : 1000000000L;
    /* verl (fsdp_workers: lr_warmup_steps < 0): int(lr_warmup_steps_ratio x total steps); none while the total is
     * unknown */
    long warmup = L->warmup >= 0 ? L->warmup : L->total_steps > 0 ? (long)(L->warmup_ratio * (double)L->total_steps) : 0;
    st->lr = lr_at(L->sched, L->lr, L->steps_done, warmup, total, L->min_lr_ratio);
    int rc = !L->sharded ? adamw_step(L->m, &L->opt, (float)st->lr, err)
                         : shard_adamw(&L->shard, &L->opt, (float)st->lr, norm, L->grad_clip, err);
    st->t_opt = clock_s() - t0;
    return rc;
}

int learner_update(Learner *L, const Dapo__TrainBatch *tb, const float *old_lp, const float *ref_lp,
                   const OffpolicyMini *corr, LearnerMiniStats *st, char err[ERR_LEN]) {
    int rc = learner_grads(L, tb, old_lp, ref_lp, corr, st, err);
    return rc ? rc : learner_apply(L, st, err);
}

/* ------------------------------------------------------------------------------------------ step bookkeeping */

int learner_submit(Learner *L, Dapo__TrainBatch *tb) {
    /* the rest of a failed step is dropped; the coordinator's shards come in (epoch, mini-batch) order, so a first
       shard (epoch 0, mini-batch 0) of that step again is a new attempt */
    if (tb->step == L->failed_step && tb->ppo_epoch == 0 && tb->mini_batch_index == 0) L->failed_step = -1;
    if (tb->step == L->failed_step || (L->cur_step >= 0 && tb->step < L->cur_step)) {
        log_warn("learner rank %d: dropped a shard of step %lld (current %ld, done %ld)", L->rank, (long long)tb->step,
                 L->cur_step, L->steps_done);
        dapo__train_batch__free_unpacked(tb, NULL);
        return 0;
    }
    if (tb->step != L->cur_step) {
        if (tb->step != L->steps_done + 1)        /* the coordinator is authoritative (e.g. it resumed elsewhere) */
            log_warn("learner rank %d: step %lld arrives after step %ld", L->rank, (long long)tb->step, L->steps_done);
        if (L->n_pending) log_warn("learner rank %d: step %ld abandoned with %d shards pending (step %lld started)",
                                   L->rank, L->cur_step, L->n_pending, (long long)tb->step);
        step_reset(L);
        L->cur_step = tb->step;
    }
    XGROW(L->pending, L->n_pending, L->cap_pending, 16);
    L->pending[L->n_pending++] = tb;
    return 0;
}

/* The reference policy's log-probs of every mini-batch of the step (ref.h): its weights swapped in, the same forward
 * as the old log-probs, swapped back whatever happened (every rank reaches both swaps). */
static int ref_pass(Learner *L, Dapo__TrainBatch **mb, int nm, char err[ERR_LEN]) {
    double t0 = clock_s();
    int rc = ref_swap(L, err);
    if (rc) return rc;
    L->ref_lp = xcalloc((size_t)nm, sizeof *L->ref_lp);
    for (int k = 0; k < nm && !rc; k++) {
        L->ref_lp[k] = falloc(L->old_n[k]);
        rc = learner_logprobs(L, mb[k], L->ref_lp[k], err);
    }
    char e2[ERR_LEN];
    int src = ref_swap(L, rc ? e2 : err);
    L->t_ref = clock_s() - t0;
    return rc ? rc : src;
}

/* Old log-probs for every mini-batch of epoch 0, once all of them are here, then the step's off-policy correction
 * (offpolicy.h: behaviour versions, diagnostics, IS weights, rejection; one all-reduce over ranks, reached by every
 * rank even after a local error so none waits for another). 1 done, 0 not ready, < 0 error. */
static int old_pass(Learner *L, char err[ERR_LEN]) {
    if (L->old_done) return 1;
    const Dapo__TrainBatch *first = L->pending[0];
    if (first->policy_version != L->version)         /* versions only move forward: never train from other weights */
        return err_set(err, ERR_STALE, "step %lld trains from policy version %lld, but this learner holds version %lld "
                       "(it resumed from another checkpoint than the coordinator?): refused; the coordinator has the "
                       "learners start again from the last checkpoint", (long long)first->step,
                       (long long)first->policy_version, (long long)L->version);
    int nm = (int)L->pending[0]->num_mini_batches;
    Dapo__TrainBatch **mb = xcalloc((size_t)nm, sizeof *mb);
    int have = 0, rc = 0;
    for (int i = 0; i < L->n_pending; i++) {
        Dapo__TrainBatch *t = L->pending[i];
        if (t->ppo_epoch == 0 && t->mini_batch_index < (uint32_t)nm && !mb[t->mini_batch_index]) {
            mb[t->mini_batch_index] = t;
            have++;
        }
    }
    if (have < nm) { xfree(mb); return 0; }
    double t0 = clock_s();
    L->n_mini = nm;
    L->old_lp = xcalloc((size_t)nm, sizeof *L->old_lp);
    L->old_n = xcalloc((size_t)nm, sizeof *L->old_n);
    L->corr = xcalloc((size_t)nm, sizeof *L->corr);
    for (int k = 0; k < nm && !rc; k++) {
        rc = learner_check_batch(L, mb[k], err);
        if (rc) break;
        long R = resp_count(mb[k]);
        L->old_lp[k] = falloc(R);
        L->old_n[k] = R;
        if (L->rc.bypass) memcpy(L->old_lp[k], mb[k]->rollout_logprobs, (size_t)R * sizeof(float));
        else rc = learner_logprobs(L, mb[k], L->old_lp[k], err);
        if (!rc) rc = offpolicy_mini(L, k, mb[k], err);
        if (!rc && mb[k]->total_training_steps > 0 && L->total_steps <= 0)     /* the coordinator's, from the data */
            L->total_steps = (long)mb[k]->total_training_steps;
    }
    if (!rc && (L->lp.use_kl || L->klr.use_kl)) rc = ref_pass(L, mb, nm, err);
    char e2[ERR_LEN];
    int rrc = offpolicy_reduce(L, rc, rc ? e2 : err);
    if (!rc) rc = rrc;
    if (!rc && L->klr.on) rc = klreward_step(L, mb, nm, err);   /* every rank agrees on rc here (offpolicy_reduce) */
    xfree(mb);
    L->t_old = clock_s() - t0;
    if (rc) return rc;
    L->old_done = 1;
    return 1;
}

static void fill_metrics(Learner *L, LearnerResult *r) {
    Metrics *ms = &r->metrics;
    const LearnerMiniStats *st = &r->st;
    int per_rank = L->n_mini * L->ppo_epochs;             /* results this rank sends for the step */
    metrics_set(ms, "actor/pg_loss", st->pg_loss);
    metrics_set(ms, "actor/pg_clipfrac", st->pg_clipfrac);
    metrics_set(ms, "actor/pg_clipfrac_lower", st->pg_clipfrac_lower);
    metrics_set(ms, "actor/ppo_kl", st->ppo_kl);
    metrics_set(ms, "actor/entropy", st->entropy);
    if (L->lp.use_kl) {                                   /* verl's names (workers/utils/losses.py) */
        metrics_set(ms, "actor/kl_loss", st->kl_loss);
        metrics_set(ms, "actor/kl_coef", L->lp.kl_coef);
        metrics_set(ms, "timing_s/ref", L->t_ref);
    }
    metrics_set(ms, "actor/grad_norm", st->grad_norm);
    metrics_set(ms, "actor/lr", st->lr);
    metrics_set(ms, "actor/update_skipped", st->skipped);
    metrics_set(ms, "actor/skipped_updates_total", (double)L->skipped_updates);   /* since this process started */
    offpolicy_metrics(L, (int)r->tb->mini_batch_index, ms);
    klreward_metrics(&L->klr, ms);
    /* the coordinator averages over every result of the step: report step totals so the mean is one rank's total */
    metrics_set(ms, "timing_s/old_log_prob", L->t_old);
    metrics_set(ms, "timing_s/update_actor", (st->t_fwd + st->t_bwd + st->t_opt + st->t_comm) * per_rank);
    metrics_set(ms, "timing_s/learner_forward", st->t_fwd * per_rank);
    metrics_set(ms, "timing_s/learner_backward", st->t_bwd * per_rank);
    metrics_set(ms, "timing_s/learner_optimizer", st->t_opt * per_rank);
    metrics_set(ms, "timing_s/learner_allreduce", st->t_comm * per_rank);
}

/* The pending shard to train next: the one of (epoch, mini-batch) = (n_trained / n_mini, n_trained % n_mini) — the
 * update order verl uses, whatever order the shards arrived in — or one that fits no slot of the step (its update
 * fails the step with the reason). -1: the next one has not arrived yet. */
static int next_shard(const Learner *L) {
    if (L->n_mini <= 0) return 0;                   /* old_pass failed: the first shard carries the error */
    uint32_t ep = (uint32_t)(L->n_trained / L->n_mini), k = (uint32_t)(L->n_trained % L->n_mini);
    for (int i = 0; i < L->n_pending; i++) {
        const Dapo__TrainBatch *t = L->pending[i];
        if (t->num_mini_batches != (uint32_t)L->n_mini || t->mini_batch_index >= (uint32_t)L->n_mini ||
            (t->ppo_epoch == ep && t->mini_batch_index == k))
            return i;
    }
    return -1;
}

int learner_next(Learner *L, LearnerResult *r) {
    memset(r, 0, sizeof *r);
    if (!L->n_pending) return 0;
    int rc = old_pass(L, r->error);
    if (rc == 0) return 0;
    int i = rc > 0 ? next_shard(L) : 0;
    if (i < 0) return 0;
    Dapo__TrainBatch *tb = L->pending[i];
    memmove(L->pending + i, L->pending + i + 1, (size_t)(L->n_pending - i - 1) * sizeof *L->pending);
    L->n_pending--;
    L->n_trained++;
    r->tb = tb;
    if (rc > 0) {
        uint32_t k = tb->mini_batch_index;
        if (k >= (uint32_t)L->n_mini || tb->num_mini_batches != (uint32_t)L->n_mini ||
            resp_count(tb) != L->old_n[k])
            rc = err_set(r->error, ERR_INVAL, "step %lld epoch %u: mini-batch %u (%ld response tokens) does not match "
                         "the step's %d mini-batches of epoch 0", (long long)tb->step, tb->ppo_epoch, k, resp_count(tb),
                         L->n_mini);
        else {
            if (L->klr.adv)              /* the step's advantages as the learner computed them (klreward.h) */
                memcpy(tb->advantages, L->klr.adv[k], (size_t)L->old_n[k] * sizeof(float));
            rc = learner_update(L, tb, L->old_lp[k], L->ref_lp ? L->ref_lp[k] : NULL, &L->corr[k], &r->st, r->error);
        }
    }
    if (rc < 0) {
        r->failed = 1;
        r->code = rc;
        log_error("learner rank %d: step %lld mini-batch %u failed: %s", L->rank, (long long)tb->step,
                  tb->mini_batch_index, r->error);
        L->failed_step = L->cur_step;
        step_reset(L);
        L->cur_step = -1;
        return 1;
    }
    if (tb->last_of_step && L->sharded) {         /* the step's weights, gathered once for rank 0 to publish */
        double t0 = clock_s();
        int grc = learner_gather_params(L, r->error);
        r->st.t_comm += clock_s() - t0;
        if (grc) {
            r->failed = 1;
            r->code = grc;
            log_error("learner rank %d: step %lld: gathering the weights failed: %s", L->rank, (long long)tb->step,
                      r->error);
            L->failed_step = L->cur_step;
            step_reset(L);
            L->cur_step = -1;
            return 1;
        }
    }
    fill_metrics(L, r);
    if (tb->last_of_step) {
        L->steps_done = tb->step;
        L->version = tb->policy_version + 1;
        char perr[ERR_LEN];                          /* every rank: the probe pass is collective when sharded */
        if (learner_probe(L, perr))
            log_warn("learner rank %d: the weight probe of version %lld failed (published without it): %s", L->rank,
                     (long long)L->version, perr);
        step_reset(L);
        L->cur_step = -1;
    }
    return 1;
}

void learner_result_free(LearnerResult *r) {
    if (!r) return;
    if (r->tb) dapo__train_batch__free_unpacked(r->tb, NULL);
    metrics_free(&r->metrics);
    memset(r, 0, sizeof *r);
}

int learner_checkpoint(Learner *L, char err[ERR_LEN]) {
    CheckpointState st = {.step = L->steps_done, .adam_step = model_adam_step(L->m), .policy_version = L->version,
                    .rng_seed = L->rng_seed, .rng_counter = L->rng_counter, .optim_shards = L->sharded ? L->world : 0,
                    .kl_ctrl_value = L->klr.use_kl ? L->klr.value : 0};
    double t0 = clock_s();
    const LearnerShard *s = &L->shard;
    int rc = !L->sharded ? 0 : checkpoint_save_optim_shard(L->ckpt_root, L->steps_done, L->m, L->rank, L->world, s->m,
                                                           s->v, err);
    if (L->sharded && L->rank > 0) {                 /* rank 0 writes the model and state.json */
        if (!rc) log_info("learner rank %d: optimizer shard of global_step_%ld written in %.2f s", L->rank,
                          L->steps_done, clock_s() - t0);
        return rc;
    }
    if (!rc) rc = checkpoint_save_params(L->ckpt_root, L->m, L->sharded ? L->full : NULL, &st, L->max_keep, err);
    if (!rc) log_info("learner: checkpoint global_step_%ld written to %s in %.2f s", L->steps_done, L->ckpt_root,
                      clock_s() - t0);
    return rc;
}
