/* tests/learner_fixture.h: what the learner engine's tests share (tests/unit/test_learner.c, test_learner_shard.c):
 * synthetic TrainBatch shards of the small random Qwen2 model (tests/data/model/qwen2_gqa) and their rank splits, the
 * test config, element-wise comparisons, and W ranks as threads over the CPU collective, each running one update
 * (replicated or fully sharded) and reporting its weights, gradients and moments. */
#ifndef DAPO_TESTS_LEARNER_FIXTURE_H
#define DAPO_TESTS_LEARNER_FIXTURE_H

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collective/collective.h"
#include "model/checkpoint.h"
#include "services/learner/learner.h"
#include "tests/testutil.h"
#include "tests/model_slabs.h"

static uint64_t rs_state;   /* make_batch's stream (one thread at a time) */
static inline uint32_t rnd(void) {
    rs_state ^= rs_state << 13; rs_state ^= rs_state >> 7; rs_state ^= rs_state << 17;
    return (uint32_t)(rs_state >> 11);
}
static inline float frnd(void) { return (float)(rnd() % 100000) / 100000.0f; }

/* A mini-batch shard of n sequences built from seed; global counts = this shard's own unless set later. */
static inline Dapo__TrainBatch *make_batch(uint64_t seed, int n, long step, uint32_t mini, uint32_t nmini, uint32_t epoch,
                                    int last) {
    rs_state = seed * 0x9E3779B97F4A7C15ull + 7;
    Dapo__TrainBatch *tb = calloc(1, sizeof *tb);
    dapo__train_batch__init(tb);
    tb->run_id = strdup("test");
    tb->step = step;
    tb->policy_version = step - 1;
    tb->mini_batch_index = mini;
    tb->num_mini_batches = nmini;
    tb->ppo_epoch = epoch;
    tb->last_of_step = last;
    tb->world_size = 1;
    tb->n_offsets = (size_t)n + 1;
    tb->offsets = calloc((size_t)n + 1, sizeof(uint32_t));
    tb->n_prompt_lengths = (size_t)n;
    tb->prompt_lengths = calloc((size_t)n, sizeof(uint32_t));
    tb->n_group_ids = (size_t)n;
    tb->group_ids = calloc((size_t)n, sizeof(uint64_t));
    int tot = 0, resp = 0, pl[64], rl[64];
    for (int i = 0; i < n; i++) {
        pl[i] = 2 + (int)(rnd() % 4);
        rl[i] = 1 + (int)(rnd() % 8);
        tot += pl[i] + rl[i];
        resp += rl[i];
    }
    tb->input_ids = calloc((size_t)tot, sizeof(int32_t));
    tb->n_input_ids = (size_t)tot;
    tb->response_mask = calloc((size_t)resp, sizeof(float));
    tb->advantages = calloc((size_t)resp, sizeof(float));
    tb->rollout_logprobs = calloc((size_t)resp, sizeof(float));
    tb->n_response_mask = tb->n_advantages = tb->n_rollout_logprobs = (size_t)resp;
    int t = 0, r = 0;
    long masked = 0;
    for (int i = 0; i < n; i++) {
        tb->offsets[i] = (uint32_t)t;
        tb->prompt_lengths[i] = (uint32_t)pl[i];
        tb->group_ids[i] = (uint64_t)(i / 4);
        float adv = (i % 3 == 0 ? -1.0f : 1.0f) * (0.25f + frnd());
        for (int k = 0; k < pl[i] + rl[i]; k++) tb->input_ids[t++] = (int32_t)(3 + rnd() % 90);
        for (int k = 0; k < rl[i]; k++, r++) {
            tb->response_mask[r] = (i == 1 && k == 0) ? 0.0f : 1.0f;
            masked += tb->response_mask[r] > 0.5f;
            tb->advantages[r] = adv;
            tb->rollout_logprobs[r] = -4.0f - frnd();
        }
    }
    tb->offsets[n] = (uint32_t)t;
    tb->global_response_tokens = (uint64_t)masked;
    tb->global_num_seqs = (uint32_t)n;
    return tb;
}

/* The shard of sequences [a, b) of tb, keeping tb's global counts (for rank splits). */
static inline Dapo__TrainBatch *sub_batch(const Dapo__TrainBatch *tb, int a, int b, int rank, int world) {
    Dapo__TrainBatch *s = calloc(1, sizeof *s);
    dapo__train_batch__init(s);
    *s = *tb;
    s->run_id = strdup(tb->run_id);
    int n = b - a;
    uint32_t t0 = tb->offsets[a], t1 = tb->offsets[b];
    size_t r0 = 0, r1 = 0;
    for (int i = 0; i < b; i++) {
        size_t len = tb->offsets[i + 1] - tb->offsets[i] - tb->prompt_lengths[i];
        if (i < a) r0 += len;
        r1 += len;
    }
    s->n_offsets = (size_t)n + 1;
    s->offsets = calloc((size_t)n + 1, sizeof(uint32_t));
    for (int i = 0; i <= n; i++) s->offsets[i] = tb->offsets[a + i] - t0;
    s->n_prompt_lengths = s->n_group_ids = (size_t)n;
    s->prompt_lengths = calloc((size_t)n, sizeof(uint32_t));
    memcpy(s->prompt_lengths, tb->prompt_lengths + a, (size_t)n * sizeof(uint32_t));
    s->group_ids = calloc((size_t)n, sizeof(uint64_t));
    s->n_input_ids = t1 - t0;
    s->input_ids = calloc(s->n_input_ids, sizeof(int32_t));
    memcpy(s->input_ids, tb->input_ids + t0, s->n_input_ids * sizeof(int32_t));
    size_t R = r1 - r0;
    s->n_response_mask = s->n_advantages = s->n_rollout_logprobs = R;
    s->response_mask = calloc(R ? R : 1, sizeof(float));
    s->advantages = calloc(R ? R : 1, sizeof(float));
    s->rollout_logprobs = calloc(R ? R : 1, sizeof(float));
    memcpy(s->response_mask, tb->response_mask + r0, R * sizeof(float));
    memcpy(s->advantages, tb->advantages + r0, R * sizeof(float));
    memcpy(s->rollout_logprobs, tb->rollout_logprobs + r0, R * sizeof(float));
    s->rank = (uint32_t)rank;
    s->world_size = (uint32_t)world;
    return s;
}

static inline void free_batch(Dapo__TrainBatch *tb) {
    if (!tb) return;
    free(tb->run_id); free(tb->offsets); free(tb->prompt_lengths); free(tb->group_ids); free(tb->input_ids);
    free(tb->response_mask); free(tb->advantages); free(tb->rollout_logprobs);
    free(tb);
}

/* Packed batches go to learner_submit, which frees with protobuf-c: round-trip through pack/unpack. */
static inline Dapo__TrainBatch *to_owned(Dapo__TrainBatch *tb) {
    size_t n = dapo__train_batch__get_packed_size(tb);
    uint8_t *buf = malloc(n);
    dapo__train_batch__pack(tb, buf);
    Dapo__TrainBatch *u = dapo__train_batch__unpack(NULL, n, buf);
    free(buf);
    free_batch(tb);
    return u;
}

static inline void base_config(Config *c, const char *extra[][2], int n) {
    char err[ERR_LEN], path[1024];
    config_defaults(c);
    tu_dapo_recipe(c);
    snprintf(path, sizeof path, "%s/tests/data/model/qwen2_gqa", tu_root());
    const char *kv[][2] = {
        {"actor_rollout_ref.model.path", path},
        {"actor_rollout_ref.actor.optim.lr", "1e-6"},
        {"actor_rollout_ref.actor.optim.lr_warmup_steps", "-1"},
        {"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "1"},
        {"actor_rollout_ref.actor.ppo_epochs", "1"},
        {"data.max_prompt_length", "8"},
        {"data.max_response_length", "16"},
        {"trainer.resume_mode", "disable"},
        {"actor_rollout_ref.actor.use_dynamic_bsz", "false"},
        {"actor_rollout_ref.rollout.temperature", "1.0"},
    };
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        assert_int_equal(config_set(c, kv[i][0], kv[i][1], "test", err), 0);
    for (int i = 0; i < n; i++) {
        int rc = config_set(c, extra[i][0], extra[i][1], "test", err);
        if (rc) fprintf(stderr, "%s\n", err);
        assert_int_equal(rc, 0);
    }
}

static inline Learner *open_learner(const char *extra[][2], int n, int rank, int world, Collective *coll) {
    Config c;
    base_config(&c, extra, n);
    char err[ERR_LEN];
    Learner *L = learner_open(&c, rank, world, coll, err);
    if (!L) fprintf(stderr, "learner_open: %s\n", err);
    assert_non_null(L);
    config_free(&c);
    return L;
}

static inline int close_enough(const float *a, const float *b, long n, double atol, double rtol, const char *what) {
    int bad = 0;
    for (long i = 0; i < n; i++)
        if (!(fabs((double)a[i] - b[i]) <= atol + rtol * fabs((double)b[i]))) {
            if (bad < 5) fprintf(stderr, "%s[%ld]: %.9g vs %.9g\n", what, i, a[i], b[i]);
            bad++;
        }
    return bad;
}

/* The tolerance, element by element: |a-b| <= 1e-8 + 1e-5|b|. Prints the worst |a-b| / (1e-8 + 1e-5|b|). */
static inline int grads_match(const Model *m, const float *a, const float *b, const char *what) {
    int bad = 0;
    double worst = 0;
    for (int t = 0; t < model_n_tensors(m); t++) {
        const ModelTensor *T = model_tensor(m, t);
        for (long i = 0; i < T->numel; i++) {
            double d = fabs((double)a[T->offset + i] - b[T->offset + i]), tol = 1e-8 + 1e-5 * fabs((double)b[T->offset + i]);
            worst = fmax(worst, d / tol);
            if (!(d <= tol)) {
                if (bad < 5) fprintf(stderr, "%s %s[%ld]: %.9g vs %.9g\n", what, T->name, i, a[T->offset + i], b[T->offset + i]);
                bad++;
            }
        }
    }
    fprintf(stderr, "%s: worst element-wise |a-b| / (1e-8 + 1e-5|b|) = %.2f\n", what, worst);
    return bad;
}

/* old log-probs: the current ones shifted per token, so ratios move off 1 and both clips bite somewhere */
static inline float *shifted_old(Learner *L, const Dapo__TrainBatch *tb) {
    long R = (long)tb->n_response_mask;
    float *o = malloc((size_t)R * sizeof(float));
    char err[ERR_LEN];
    assert_int_equal(learner_logprobs(L, tb, o, err), 0);
    for (long j = 0; j < R; j++) o[j] += (float)((j % 7) - 3) * 0.12f;
    return o;
}

/* ---- two ranks over the CPU collective vs one rank on the whole mini-batch ---- */
typedef struct {
    int rank, world;
    char endpoint[64];
    Dapo__TrainBatch *tb;
    const float *old;
    float *params_out, *grads_out;
    long P;
    int rc, skipped;
    int sharded;                  /* fsdp_size -1: parameters, gradients and optimizer state sharded over the ranks */
    int keep_params;              /* sharded: reshard_after_forward false */
    const char *ckdir;            /* non-NULL: each rank checkpoints there after the update */
    long shard_floats;            /* sharded: the floats of each kind this rank keeps */
    float *m_out, *v_out;         /* sharded: this rank's moments at their flat positions, zeros elsewhere */
    pthread_barrier_t *done;      /* every rank waits here before it closes its collective (a closed peer is lost) */
    char err[ERR_LEN];
} RankArg;

static inline void *rank_main(void *p) {
    RankArg *a = p;
    CollOptions o = {.rank = a->rank, .world = a->world, .endpoint = a->endpoint, .timeout_s = 20};
    Collective *c = NULL;
    if (coll_open_cpu(&o, &c, a->err)) { a->rc = -1; pthread_barrier_wait(a->done); return NULL; }
    char nl[16];
    snprintf(nl, sizeof nl, "%d", a->world);
    const char *m2[][2] = {{"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "2"},
                           {"cluster.num_learners", nl},
                           {"actor_rollout_ref.actor.fsdp_config.fsdp_size", a->sharded ? "-1" : "1"},
                           {"trainer.default_local_dir", a->ckdir ? a->ckdir : "/tmp"},
                           {"actor_rollout_ref.actor.fsdp_config.reshard_after_forward", a->keep_params ? "false" : "true"}};
    Config cfg;
    base_config(&cfg, m2, 5);
    Learner *L = learner_open(&cfg, a->rank, a->world, c, a->err);
    config_free(&cfg);
    if (!L) { a->rc = -2; pthread_barrier_wait(a->done); coll_close(c); return NULL; }
    LearnerMiniStats st;
    a->rc = learner_grads(L, a->tb, a->old, NULL, NULL, &st, a->err);
    if (!a->rc) {
        a->P = model_n_params(L->m);
        a->grads_out = calloc((size_t)a->P, sizeof(float));      /* sharded: this rank's pieces, zeros elsewhere */
        if (!L->sharded) memcpy(a->grads_out, tu_grads(L->m), (size_t)a->P * sizeof(float));
        for (int u = 0; L->sharded && u < L->shard.n_units; u++)
            memcpy(a->grads_out + L->shard.lo[u], L->shard.g + L->shard.pos[u],
                   (size_t)(L->shard.hi[u] - L->shard.lo[u]) * sizeof(float));
        a->rc = learner_apply(L, &st, a->err);
        a->skipped = st.skipped;
        a->params_out = malloc((size_t)a->P * sizeof(float));
        if (!L->sharded) memcpy(a->params_out, tu_params(L->m), (size_t)a->P * sizeof(float));
        else if (!a->rc) a->rc = shard_gather_full(&L->shard, a->params_out, a->err);   /* every rank's copy */
        if (!a->rc) a->rc = learner_gather_params(L, a->err);                         /* rank 0's, for the export */
        a->shard_floats = L->sharded ? L->shard.local : -1;
        if (L->sharded) {
            const LearnerShard *sh = &L->shard;
            a->m_out = calloc((size_t)a->P, sizeof(float));
            a->v_out = calloc((size_t)a->P, sizeof(float));
            for (int u = 0; u < sh->n_units; u++) {
                memcpy(a->m_out + sh->lo[u], sh->m + sh->pos[u], (size_t)(sh->hi[u] - sh->lo[u]) * sizeof(float));
                memcpy(a->v_out + sh->lo[u], sh->v + sh->pos[u], (size_t)(sh->hi[u] - sh->lo[u]) * sizeof(float));
            }
        }
        if (!a->rc && a->ckdir) a->rc = learner_checkpoint(L, a->err);
    }
    pthread_barrier_wait(a->done);        /* no rank closes while another may still wait on a frame */
    learner_close(L);
    coll_close(c);
    return NULL;
}

/* W ranks over the CPU collective, rank r on sequences [cut[r], cut[r + 1]) of the 12 (cut NULL: 12 / W each). */
static inline void run_ranks_cut(Dapo__TrainBatch *whole, const float *old, RankArg *a, int W, int sharded, const char *ck,
                          const int *cut, int keep_params) {
    int port = tu_free_port(), per = 12 / W;
    Dapo__TrainBatch *part[4];
    pthread_t th[4];
    pthread_barrier_t done;
    pthread_barrier_init(&done, NULL, (unsigned)W);
    size_t off = 0;
    for (int r = 0; r < W; r++) {
        part[r] = cut ? sub_batch(whole, cut[r], cut[r + 1], r, W) : sub_batch(whole, r * per, (r + 1) * per, r, W);
        memset(&a[r], 0, sizeof a[r]);
        a[r].rank = r;
        a[r].world = W;
        snprintf(a[r].endpoint, sizeof a[r].endpoint, "tcp://127.0.0.1:%d", port);
        a[r].tb = part[r];
        a[r].old = old + off;
        off += part[r]->n_response_mask;
        a[r].sharded = sharded;
        a[r].keep_params = keep_params;
        a[r].ckdir = ck;
        a[r].done = &done;
        pthread_create(&th[r], NULL, rank_main, &a[r]);
    }
    for (int r = 0; r < W; r++) pthread_join(th[r], NULL);
    pthread_barrier_destroy(&done);
    for (int r = 0; r < W; r++) {
        if (a[r].rc) fprintf(stderr, "rank %d: %s\n", r, a[r].err);
        assert_int_equal(a[r].rc, 0);
        free_batch(part[r]);
    }
}

static inline void run_ranks(Dapo__TrainBatch *whole, const float *old, RankArg *a, int W, int sharded, const char *ck) {
    run_ranks_cut(whole, old, a, W, sharded, ck, NULL, 0);
}

static inline void free_ranks(RankArg *a, int W) {
    for (int r = 0; r < W; r++) {
        free(a[r].grads_out); free(a[r].params_out); free(a[r].m_out); free(a[r].v_out);
    }
}

static inline void run_two_ranks_with(Dapo__TrainBatch *whole, const float *old, RankArg a[2], int sharded, const char *ck) {
    run_ranks(whole, old, a, 2, sharded, ck);
}

static inline void run_two_ranks(Dapo__TrainBatch *whole, const float *old, RankArg a[2]) {
    run_two_ranks_with(whole, old, a, 0, NULL);
}

#endif
