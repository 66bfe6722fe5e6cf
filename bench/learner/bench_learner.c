/* bench/learner/bench_learner.c: one learner rank's training step through the real engine (services/learner/learner.h):
 * the old-log-prob pass over the mini-batch, then the update (forward + DAPO loss, backward, all-reduce over the CPU
 * collective, grad clip + AdamW), on B sequences of T tokens (a quarter prompt, the rest response), random tokens.
 * Prints medians after warm-up: step time, update tokens/s (B*T / update time, the same definition as bench/train's
 * training step) and the shares of forward / backward / optimizer / communication in the update.
 *   bench_learner --model DIR --batch B --seq T [--steps K] [--warmup W] [--rank r --world W --endpoint EP] [key=value]
 * key=value: config overrides after the bench's own (e.g. actor_rollout_ref.actor.fsdp_config.fsdp_size=-1,
 * actor_rollout_ref.model.enable_gradient_checkpointing=true; the memory check of tools/dapo-memory passes the same).
 * Not here: the PyTorch baseline (bench/train/baseline_torch.py), weight publishing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collective/collective.h"
#include "core/clock.h"
#include "services/learner/learner.h"

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv) {
    const char *over[16];
    int n_over = 0;
    const char *dir = NULL, *ep = "tcp://127.0.0.1:5599";
    int B = 4, T = 512, steps = 5, warmup = 2, rank = 0, world = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *x = i + 1 < argc ? argv[i + 1] : NULL;
        if (strchr(a, '=') && a[0] != '-') { if (n_over < 16) over[n_over++] = a; continue; }
        if (!x) { fprintf(stderr, "%s needs a value\n", a); return 2; }
        if (!strcmp(a, "--model")) dir = x;
        else if (!strcmp(a, "--batch")) B = atoi(x);
        else if (!strcmp(a, "--seq")) T = atoi(x);
        else if (!strcmp(a, "--steps")) steps = atoi(x);
        else if (!strcmp(a, "--warmup")) warmup = atoi(x);
        else if (!strcmp(a, "--rank")) rank = atoi(x);
        else if (!strcmp(a, "--world")) world = atoi(x);
        else if (!strcmp(a, "--endpoint")) ep = x;
        else { fprintf(stderr, "unknown argument %s\n", a); return 2; }
        i++;
    }
    if (!dir || B < 1 || T < 4 || steps < 1 || steps > 1000) { fprintf(stderr, "usage: see the file header\n"); return 2; }
    char err[ERR_LEN], v[64];
    Config c;
    config_defaults(&c);
    int P = T / 4;
    struct { const char *k; char v[64]; } kv[] = {
        {"actor_rollout_ref.model.path", ""}, {"actor_rollout_ref.actor.use_dynamic_bsz", "false"},
        {"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", ""}, {"data.max_prompt_length", ""},
        {"data.max_response_length", ""}, {"actor_rollout_ref.actor.optim.lr_warmup_steps", "-1"},
        {"trainer.resume_mode", "disable"}, {"cluster.num_learners", ""},
    };
    snprintf(kv[2].v, sizeof kv[2].v, "%d", B);
    snprintf(kv[3].v, sizeof kv[3].v, "%d", P);
    snprintf(kv[4].v, sizeof kv[4].v, "%d", T - P);
    snprintf(kv[7].v, sizeof kv[7].v, "%d", world);
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        if (config_set(&c, kv[i].k, i == 0 ? dir : kv[i].v, "bench", err)) { fprintf(stderr, "%s\n", err); return 1; }
    (void)v;
    for (int i = 0; i < n_over; i++)
        if (config_override(&c, over[i], err)) { fprintf(stderr, "%s\n", err); return 1; }
    Collective *coll = NULL;
    if (world > 1) {
        CollOptions o = {.rank = rank, .world = world, .endpoint = ep, .timeout_s = 120};
        if (coll_open_cpu(&o, &coll, err)) { fprintf(stderr, "%s\n", err); return 1; }
    }
    Learner *L = learner_open(&c, rank, world, coll, err);
    config_free(&c);
    if (!L) { fprintf(stderr, "%s\n", err); return 1; }
    /* the shard */
    int N = B * T, R = B * (T - P);
    Dapo__TrainBatch tb = DAPO__TRAIN_BATCH__INIT;
    int32_t *ids = malloc((size_t)N * sizeof *ids);
    uint32_t *offs = malloc((size_t)(B + 1) * sizeof *offs), *plen = malloc((size_t)B * sizeof *plen);
    float *mask = malloc((size_t)R * 4), *adv = malloc((size_t)R * 4), *lps = malloc((size_t)R * 4);
    uint64_t s = 88172645463325252ull + (uint64_t)rank, V = (uint64_t)model_config(L->m)->vocab;
    for (int i = 0; i < N; i++) { s ^= s << 13; s ^= s >> 7; s ^= s << 17; ids[i] = (int32_t)(s % V); }
    for (int i = 0; i <= B; i++) offs[i] = (uint32_t)(i * T);
    for (int i = 0; i < B; i++) plen[i] = (uint32_t)P;
    for (int j = 0; j < R; j++) { mask[j] = 1; adv[j] = (j / (T - P)) % 2 ? 1.0f : -1.0f; lps[j] = -8.0f; }
    tb.step = 1; tb.num_mini_batches = 1; tb.last_of_step = 1;
    tb.input_ids = ids; tb.n_input_ids = (size_t)N;
    tb.offsets = offs; tb.n_offsets = (size_t)B + 1;
    tb.prompt_lengths = plen; tb.n_prompt_lengths = (size_t)B;
    tb.response_mask = mask; tb.n_response_mask = (size_t)R;
    tb.advantages = adv; tb.n_advantages = (size_t)R;
    tb.rollout_logprobs = lps; tb.n_rollout_logprobs = (size_t)R;
    tb.global_response_tokens = (uint64_t)R * (uint64_t)world;
    tb.global_num_seqs = (uint32_t)(B * world);
    tb.rank = (uint32_t)rank;
    tb.world_size = (uint32_t)world;
    float *old = malloc((size_t)R * 4);
    double t_step[1000], t_upd[1000], t_old[1000], f[1000], b[1000], o[1000], cm[1000];
    int k = 0;
    for (int it = 0; it < warmup + steps; it++) {
        double t0 = clock_s();
        if (learner_logprobs(L, &tb, old, err)) { fprintf(stderr, "%s\n", err); return 1; }
        double t1 = clock_s();
        LearnerMiniStats st;
        if (learner_update(L, &tb, old, NULL, NULL, &st, err)) { fprintf(stderr, "%s\n", err); return 1; }
        double t2 = clock_s();
        L->steps_done++;
        if (it < warmup) continue;
        t_old[k] = t1 - t0; t_upd[k] = t2 - t1; t_step[k] = t2 - t0;
        f[k] = st.t_fwd / (t2 - t1); b[k] = st.t_bwd / (t2 - t1); o[k] = st.t_opt / (t2 - t1); cm[k] = st.t_comm / (t2 - t1);
        k++;
    }
    double upd = median(t_upd, k);
    printf("rank %d of %d: %d x %d tokens, step %.3f s (old log-probs %.3f s, update %.3f s)\n", rank, world, B, T,
           median(t_step, k), median(t_old, k), upd);
    printf("rank %d: update shares: forward+loss %.0f%%, backward %.0f%%, optimizer %.0f%%, communication %.0f%%\n", rank,
           100 * median(f, k), 100 * median(b, k), 100 * median(o, k), 100 * median(cm, k));
    printf("OURS_UPDATE_TOK_S=%.1f\n", N / upd);
    printf("OURS_STEP_TOK_S=%.1f\n", N / median(t_step, k));
    learner_close(L);
    coll_close(coll);
    free(ids); free(offs); free(plen); free(mask); free(adv); free(lps); free(old);
    return 0;
}
