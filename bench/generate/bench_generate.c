/* bench/generate/bench_generate.c: end-to-end generation tokens/s of the rollout engine (model/generate.h):
 * B sequences with random P-token prompts, exactly T sampled tokens each (EOS disabled so every run does the
 * same work), temperature 1, no truncation, prefill included. Prints the median over --steps runs after
 * --warmup runs as OURS_GEN_TOK_S=<generated tokens / wall seconds>.
 * --group N: B / N prompts with N samples each (a DAPO/GRPO group: identical prompts, so the engine's prefix
 * sharing applies); --no-share turns prefix sharing off (GenOptions.no_prefix_sharing). Also prints the prefill
 * positions computed and shared per run.
 *   bench_generate --model DIR --batch B [--prompt P] [--new T] [--steps K] [--warmup W] [--invariant]
 *                  [--group N] [--no-share] */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "model/generate.h"

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    const char *dir = NULL;
    int B = 16, P = 32, T = 128, steps = 3, warmup = 1, inv = 0, group = 1, no_share = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--invariant")) { inv = 1; continue; }
        if (!strcmp(argv[i], "--no-share")) { no_share = 1; continue; }
        if (i + 1 >= argc) { fprintf(stderr, "%s needs a value\n", argv[i]); return 1; }
        const char *v = argv[++i];
        if (!strcmp(argv[i - 1], "--model")) dir = v;
        else if (!strcmp(argv[i - 1], "--batch")) B = atoi(v);
        else if (!strcmp(argv[i - 1], "--prompt")) P = atoi(v);
        else if (!strcmp(argv[i - 1], "--new")) T = atoi(v);
        else if (!strcmp(argv[i - 1], "--steps")) steps = atoi(v);
        else if (!strcmp(argv[i - 1], "--warmup")) warmup = atoi(v);
        else if (!strcmp(argv[i - 1], "--group")) group = atoi(v);
        else { fprintf(stderr, "unknown argument %s\n", argv[i - 1]); return 1; }
    }
    if (!dir || B < 1 || P < 1 || T < 1 || steps < 1 || steps > 100 || group < 1 || B % group) {
        fprintf(stderr, "usage: see the source\n");
        return 1;
    }
    log_init("bench", LL_WARN);
    char err[ERR_LEN];
    ModelOptions mo = { .max_tokens = 1 };
    Model *m = model_load(dir, &mo, err);
    if (!m) { fprintf(stderr, "%s\n", err); return 1; }
    GenOptions go = { .max_num_seqs = B, .kv_cache_tokens = (long)B * (P + T), .max_batch_tokens = 512,
                      .batch_invariant = inv, .no_prefix_sharing = no_share };
    GenEngine *e = gen_engine_new(m, &go, err);
    if (!e) { fprintf(stderr, "%s\n", err); return 1; }
    int32_t *prompt = malloc((size_t)B * P * sizeof(int32_t));
    uint32_t x = 1, V = (uint32_t)model_config(m)->vocab;
    for (int i = 0; i < B * P; i++) { x = x * 1664525u + 1013904223u; prompt[i] = (int32_t)((x >> 8) % (uint32_t)V); }
    double tps[100];
    long total = 0;
    for (int it = 0; it < warmup + steps; it++) {
        double t0 = clock_s();
        for (int b = 0; b < B; b++) {
            GenRequest q = { .seed = (uint64_t)it, .group_id = (uint64_t)(b / group), .sample = (uint32_t)(b % group),
                             .prompt = prompt + (long)(b / group) * P, .n_prompt = P, .max_tokens = T,
                             .sp = { .temperature = 1.0f, .top_p = 1.0f }, .ignore_eos = 1 /* fixed-length */ };
            if (gen_engine_add(e, &q, NULL, err)) { fprintf(stderr, "%s\n", err); return 1; }
        }
        int rc;
        while ((rc = gen_engine_step(e, err)) > 0) {}
        if (rc < 0) { fprintf(stderr, "%s\n", err); return 1; }
        double dt = clock_s() - t0;
        long n = 0;
        GenResult r;
        while (gen_engine_take(e, &r)) { n += r.n; gen_result_free(&r); }
        if (it >= warmup) tps[it - warmup] = n / dt;
        total = n;
    }
    qsort(tps, (size_t)steps, sizeof(double), cmp_d);
    GenStats st;
    gen_engine_stats(e, &st);
    int runs = warmup + steps;
    printf("ours: batch %d (%d prompts x %d), prompt %d, %ld new tokens per run, median %.1f tok/s (min %.1f, max %.1f)%s, "
           "prefix sharing %s (per run: %ld prefill positions computed, %ld shared), %d threads, OpenBLAS %s\n", B,
           B / group, group, P, total, tps[steps / 2], tps[0], tps[steps - 1], inv ? " [batch-invariant]" : "",
           no_share ? "off" : "on", st.prefill_rows / runs, st.prefill_shared / runs, omp_get_max_threads(),
           openblas_get_corename());
    printf("OURS_GEN_TOK_S=%.1f\n", tps[steps / 2]);
    free(prompt);
    gen_engine_free(e);
    model_free(m);
    return 0;
}
