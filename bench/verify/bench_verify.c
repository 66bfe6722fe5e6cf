/* bench/verify/bench_verify.c: single-thread throughput of the math_dapo scorer (common/reward) on the
 * verifier cases corpus, JSON parsing excluded (all cases are parsed into memory first).
 *
 *   bench_verify CASES.jsonl [--min-seconds S]
 *
 * Measures (one thread, the calling one; run.sh pins it to one core):
 *   - corpus throughput: repeated passes over all cases in file order; each pass's cases / pass time; the
 *     median over passes is the headline figure (printed as OURS_CASES_PER_S=<v>);
 *   - per-case latency over one extra timed pass (median, p99, max) and the throughput without the
 *     very_long category;
 *   - correctness of the same run: score, acc and pred against the expected fields of each case.
 * Also prints the OpenBLAS kernel (project bench convention; this benchmark does no BLAS work).
 * Not here: the Python baseline (baseline_verl.py), JSON cost (dapo-verify), threading. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "reward/reward.h"

char *openblas_get_corename(void);

typedef struct {
    const char *sol, *gt, *pred, *cat;
    size_t      sn, gn, pn;
    bool        strict, acc, has_pred, very_long;
    double      score;
} Item;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, size_t n) {
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_verify CASES.jsonl [--min-seconds S]\n");
        return 2;
    }
    double min_s = 3.0;
    if (argc >= 4 && strcmp(argv[2], "--min-seconds") == 0) min_s = atof(argv[3]);
    FILE *f = fopen(argv[1], "rb");
    if (!f) { perror(argv[1]); return 2; }
    size_t cap = 8192, n = 0;
    Item *it = calloc(cap, sizeof *it);
    json_t **keep = calloc(cap, sizeof *keep);
    char *line = NULL;
    size_t lcap = 0;
    ssize_t got;
    size_t strict = 0, vlong = 0, sol_bytes = 0;
    while ((got = getline(&line, &lcap, f)) > 0) {
        json_error_t je;
        json_t *o = json_loadb(line, (size_t)got, JSON_ALLOW_NUL, &je);
        if (!o) { fprintf(stderr, "line %zu: %s\n", n + 1, je.text); return 2; }
        if (n == cap) {
            cap *= 2;
            it = realloc(it, cap * sizeof *it);
            keep = realloc(keep, cap * sizeof *keep);
        }
        json_t *s = json_object_get(o, "solution"), *g = json_object_get(o, "ground_truth"),
               *p = json_object_get(o, "pred");
        Item *x = &it[n];
        *x = (Item){ .sol = json_string_value(s), .sn = json_string_length(s), .gt = json_string_value(g),
                     .gn = json_string_length(g), .strict = json_is_true(json_object_get(o, "strict_box")),
                     .acc = json_is_true(json_object_get(o, "acc")),
                     .score = json_number_value(json_object_get(o, "score")), .has_pred = json_is_string(p),
                     .pred = json_string_value(p), .pn = json_string_length(p),
                     .cat = json_string_value(json_object_get(o, "category")) };
        x->very_long = x->cat && strcmp(x->cat, "very_long") == 0;
        strict += x->strict, vlong += x->very_long, sol_bytes += x->sn;
        keep[n++] = o;
    }
    free(line);
    fclose(f);
    printf("cases: %zu (%zu strict_box, %zu very_long), %.1f MB of solutions\n", n, strict, vlong, sol_bytes / 1e6);
    printf("openblas kernel: %s (OPENBLAS_CORETYPE=%s; unused by this benchmark)\n", openblas_get_corename(),
           getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "unset");

    RewardWs *ws = reward_ws_new();
    RewardResult r;
    size_t match = 0;
    for (size_t i = 0; i < n; i++) {   /* correctness (and warm-up) */
        Item *x = &it[i];
        if (reward_score(ws, "math_dapo", x->sol, x->sn, x->gt, x->gn, x->strict, 0, &r) != 0) continue;
        bool ok = r.score == x->score && r.acc == x->acc && r.has_pred == x->has_pred &&
                  (!r.has_pred || (r.pred_len == x->pn && memcmp(r.pred, x->pred, x->pn) == 0));
        match += ok;
    }
    printf("check: %zu/%zu match the reference outputs\n", match, n);

    /* corpus passes: at least 5, until min_s seconds */
    double pass_s[4096];
    size_t passes = 0;
    double total = 0, sink = 0;
    struct timespec c0, c1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    while (passes < 4096 && (passes < 5 || total < min_s)) {
        int64_t t0 = math_dapo_now_ns();
        for (size_t i = 0; i < n; i++) {
            Item *x = &it[i];
            reward_score(ws, "math_dapo", x->sol, x->sn, x->gt, x->gn, x->strict, 0, &r);
            sink += r.score;
        }
        double s = (math_dapo_now_ns() - t0) / 1e9;
        pass_s[passes++] = s;
        total += s;
    }
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    double cpu = (double)(c1.tv_sec - c0.tv_sec) + (c1.tv_nsec - c0.tv_nsec) * 1e-9;
    double med = median(pass_s, passes);
    double cps = n / med;
    printf("ours: %zu passes over the corpus, median pass %.3f ms -> %.0f cases/s on one core "
           "(%.2f us/case average); by thread CPU time: %.0f cases/s\n", passes, med * 1e3, cps, med * 1e6 / n,
           n * passes / cpu);

    /* per-case latencies */
    double *lat = malloc(n * sizeof *lat);
    double nolong = 0;
    size_t nnl = 0;
    double vl_sum = 0;
    for (size_t i = 0; i < n; i++) {   /* each case's latency: median of 5 timed calls (drops preemptions) */
        Item *x = &it[i];
        double rep[5];
        for (int k = 0; k < 5; k++) {
            int64_t t0 = math_dapo_now_ns();
            reward_score(ws, "math_dapo", x->sol, x->sn, x->gt, x->gn, x->strict, 0, &r);
            rep[k] = (math_dapo_now_ns() - t0) / 1e3;
            sink += r.score;
        }
        lat[i] = median(rep, 5);
        if (!x->very_long) nolong += lat[i], nnl++;
        else vl_sum += lat[i];
    }
    double mx = 0;
    for (size_t i = 0; i < n; i++) mx = lat[i] > mx ? lat[i] : mx;
    qsort(lat, n, sizeof *lat, cmp_double);
    printf("ours per case (median of 5 calls each): median %.2f us, p99 %.2f us, max %.2f us; sum over cases "
           "without very_long -> %.0f cases/s; very_long mean %.2f us\n", lat[n / 2], lat[(size_t)(n * 0.99)], mx,
           nnl / (nolong / 1e6), vlong ? vl_sum / vlong : 0.0);
    printf("OURS_CASES_PER_S=%.0f\n", cps);
    if (sink == 12345.678) printf("%g\n", sink);   /* keep the work observable */
    free(lat);
    reward_ws_free(ws);
    for (size_t i = 0; i < n; i++) json_decref(keep[i]);
    free(keep);
    free(it);
    return match == n ? 0 : 1;
}
