/* bench/train/bench_train.c: our side of `make bench-train`: tokens/s of a training step (forward with
 * fused log-prob + entropy, backward from d loss/d logp and d loss/d entropy, AdamW) and of a prefill
 * (forward only) over B packed sequences of T tokens, medians after warm-up.
 *   bench_train --model DIR --batch B --seq T [--steps K] [--warmup W] [--train 0]
 * --train 0 skips the training steps (prefill only: for profiling); their lines then read 0.
 * Prints OURS_TRAIN_TOK_S=, OURS_PREFILL_TOK_S= and per-phase medians; per step TRAIN_STEP_S=, PREFILL_STEP_S= (wall)
 * and PREFILL_CPU_S= (process CPU time of the prefill, all threads).
 * The prefill model's weights are packed once (model_pack_weights) unless PACK_PER_CALL=1.
 * Not here: the PyTorch baseline (baseline_torch.py), the comparison (run.sh). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cpu/cpu_ops.h"
#include "core/err.h"
#include "core/log.h"
#include "model/adamw.h"
#include "model/model.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu_now(void) {     /* process CPU time, all threads: a load-robust companion to the wall time */
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv) {
    log_init("bench-train", LL_INFO);
    const char *dir = NULL;
    int B = 4, T = 512, steps = 5, warmup = 2, do_train = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model")) dir = argv[i + 1];
        else if (!strcmp(argv[i], "--batch")) B = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seq")) T = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--warmup")) warmup = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--train")) do_train = atoi(argv[i + 1]);
    }
    if (!dir || B < 1 || T < 2 || steps < 1 || steps > 1000) {
        fprintf(stderr, "usage: bench_train --model DIR --batch B --seq T [--steps K] [--warmup W]\n");
        return 2;
    }
    int N = B * T;
    char err[ERR_LEN];
    ModelOptions o = { .max_tokens = N, .train = 1 };
    Model *m = model_load(dir, &o, err);
    if (!m) { fprintf(stderr, "%s: %s\n", dir, err); return 1; }
    int32_t *tok = malloc(N * sizeof(int32_t)), *tgt = malloc(N * sizeof(int32_t)), *cu = malloc((B + 1) * sizeof(int32_t));
    float *lp = malloc(N * sizeof(float)), *en = malloc(N * sizeof(float)), *dl = malloc(N * sizeof(float)),
          *de = malloc(N * sizeof(float));
    uint64_t s = 12345;
    for (int i = 0; i < N; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        tok[i] = (int32_t)((s >> 33) % (uint64_t)model_config(m)->vocab);
    }
    for (int b = 0; b <= B; b++) cu[b] = b * T;
    for (int i = 0; i < N; i++) {
        tgt[i] = (i % T == T - 1) ? -1 : tok[i + 1];
        dl[i] = (i % 3 ? -1.0f : 1.0f) / N;          /* a token-mean loss: w_t / N */
        de[i] = -0.01f / N;
    }
    ModelBatch batch = { .n_tokens = N, .n_seqs = B, .tokens = tok, .targets = tgt, .cu_seqlens = cu, .temperature = 1.0f };
    AdamWConfig ac = adamw_defaults();
    double *tt = calloc(steps, sizeof(double)), *tf = calloc(steps, sizeof(double)), *tb = calloc(steps, sizeof(double)),
           *to = calloc(steps, sizeof(double)), *tp = calloc(steps, sizeof(double)), *tc = calloc(steps, sizeof(double));
    for (int it = do_train ? -warmup : steps; it < steps; it++) {
        double t0 = now();
        model_grads_zero(m);
        if (model_forward(m, &batch, lp, en, err)) { fprintf(stderr, "forward: %s\n", err); return 1; }
        double t1 = now();
        if (model_backward(m, &batch, dl, de, err)) { fprintf(stderr, "backward: %s\n", err); return 1; }
        double t2 = now();
        model_grads_clip(m, 1.0);
        if (adamw_step(m, &ac, 1e-6f, err)) { fprintf(stderr, "adamw: %s\n", err); return 1; }
        double t3 = now();
        if (it >= 0) { tt[it] = t3 - t0; tf[it] = t1 - t0; tb[it] = t2 - t1; to[it] = t3 - t2; }
    }
    /* prefill: the inference-mode model (no activations kept, residual updated in place), as a rollout
     * worker or the learner's old-log-prob pass would run it; log-probs and entropies included */
    ModelOptions oi = { .max_tokens = N, .train = 0 };
    Model *mi = model_load(dir, &oi, err);
    if (!mi) { fprintf(stderr, "%s: %s\n", dir, err); return 1; }
    /* weights fixed across the prefill calls (as a scorer or the rollout engine has them): packed once, as the
     * rollout engine keeps its own packed copy; PACK_PER_CALL=1 packs every weight in every forward instead */
    const char *ppc = getenv("PACK_PER_CALL");
    int pack_once = !(ppc && *ppc == '1');
    if (pack_once && model_pack_weights(mi, err)) { fprintf(stderr, "pack: %s\n", err); return 1; }
    for (int it = -warmup; it < steps; it++) {
        double t0 = now(), c0 = cpu_now();
        if (model_forward(mi, &batch, lp, en, err)) { fprintf(stderr, "forward: %s\n", err); return 1; }
        if (it >= 0) { tp[it] = now() - t0; tc[it] = cpu_now() - c0; }
    }
    model_free(mi);
    double *ct = calloc(steps, sizeof(double)), *cp = calloc(steps, sizeof(double));
    memcpy(ct, tt, steps * sizeof(double));
    memcpy(cp, tp, steps * sizeof(double));
    double mt = median(ct, steps), mp = median(cp, steps);
    free(ct);
    free(cp);
    printf("ours: blas core %s, %d steps after %d warm-up, %d x %d tokens\n", cpu_blas_corename(), steps, warmup, B, T);
    printf("ours: train step median %.3f s (forward %.3f, backward %.3f, clip+adamw %.3f)\n", mt, median(tf, steps),
           median(tb, steps), median(to, steps));
    printf("ours: prefill median %.3f s (weights %s)\n", mp, pack_once ? "packed once: model_pack_weights" : "packed per call");
    for (int i = 0; i < steps; i++) printf("TRAIN_STEP_S=%.6f\nPREFILL_STEP_S=%.6f\nPREFILL_CPU_S=%.6f\n", tt[i], tp[i], tc[i]);
    printf("OURS_TRAIN_TOK_S=%.1f\nOURS_PREFILL_TOK_S=%.1f\n", N / mt, N / mp);
    model_free(m);
    free(tok); free(tgt); free(cu); free(lp); free(en); free(dl); free(de);
    free(tt); free(tf); free(tb); free(to); free(tp); free(tc);
    return 0;
}
