/* bench/generate/bench_generate.c: end-to-end generation tokens/s of the rollout engine (model/generate.h):
 * B sequences with random P-token prompts, exactly T sampled tokens each (EOS disabled so every run does the
 * same work), temperature 1, no truncation, prefill included. Prints the median over --steps runs after
 * --warmup runs as OURS_GEN_TOK_S=<generated tokens / wall seconds>.
 * --group N: B / N prompts with N samples each (a DAPO/GRPO group: identical prompts, so the engine's prefix
 * sharing applies); --no-share turns prefix sharing off (GenOptions.no_prefix_sharing). Also prints the prefill
 * positions computed and shared per run.
 * Also the machine's memory bandwidth, measured here (a STREAM-style triad a = b + s c over 3 x 128 MiB, all threads,
 * best of 5), and decode's fraction of the bound it sets: each decoded token streams every matmul weight once
 * (fp32; the embedding table counts only when it is tied to the LM head), so batch-B decode cannot pass
 * B x bandwidth / weight bytes tokens/s (printed as MEM_BW_GBS=, DECODE_BOUND_FRACTION=).
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

/* GB/s of the best of 5 triads a[i] = b[i] + 3 c[i] over n floats each (3 streams: 2 reads, 1 write). */
static double triad_gbs(void) {
    const long n = 32L << 20;
    float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b), *c = malloc((size_t)n * sizeof *c);
    if (!a || !b || !c) { free(a); free(b); free(c); return 0; }
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) { a[i] = 0; b[i] = 1; c[i] = 2; }
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = clock_s();
#pragma omp parallel for schedule(static)
        for (long i = 0; i < n; i++) a[i] = b[i] + 3.0f * c[i];
        double dt = clock_s() - t0, gbs = 3.0 * (double)n * sizeof(float) / dt / 1e9;
        if (gbs > best) best = gbs;
    }
    volatile float sink = a[n / 2];
    (void)sink;
    free(a); free(b); free(c);
    return best;
}

/* Bytes of fp32 weights one decode step reads: every layer's projections and MLP, the LM head. */
static double weight_bytes(const ModelConfig *c) {
    double hd = c->head_dim, H = c->hidden;
    double layer = H * (c->n_heads * hd + 2.0 * c->n_kv_heads * hd) + c->n_heads * hd * H + 3.0 * H * c->inter + 2 * H;
    return 4.0 * (c->n_layers * layer + (double)c->vocab * H + H);
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
    double bw = triad_gbs(), wb = weight_bytes(model_config(m)), bound = bw * 1e9 / wb * B;
    printf("ours: memory bandwidth %.1f GB/s (triad, %d threads); %.2f MB of weights per decode step -> batch %d bound "
           "%.0f tok/s; measured %.1f = %.3f of it (prefill included)\n", bw, omp_get_max_threads(), wb / 1e6, B, bound,
           tps[steps / 2], tps[steps / 2] / bound);
    printf("MEM_BW_GBS=%.2f\nDECODE_BOUND_FRACTION=%.4f\n", bw, tps[steps / 2] / bound);
    free(prompt);
    gen_engine_free(e);
    model_free(m);
    return 0;
}
