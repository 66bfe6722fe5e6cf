/* bench/verify/bench_pyreward.c: throughput of the verifier's Python reward path (services/verifier/scoring.h with a
 * custom_reward_function: a pool of long-lived python3 workers, length-prefixed JSON over pipes) on a corpus of
 * cases, for reward_model.num_workers = each of --workers.
 *
 *   bench_pyreward CASES.jsonl --reward FILE.py [--workers 1,2,4] [--limit N] [--passes P] [--python python3]
 *
 * Per worker count: the pool is started once (its start time printed: every worker imports the file), then P passes
 * each submit all cases as one ScoreRequest and wait for its result; the median pass gives items/s
 * (OURS_ITEMS_PER_S_<workers>=<v>). Also counts the outcomes of the last pass (a timeout or crash would show).
 * Not here: the baseline (baseline_loop.py, one process calling the same function in a loop). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "services/verifier/scoring.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The cases as one packed ScoreRequest (the pool takes ownership of an unpacked copy per pass). */
static uint8_t *pack_request(const char *path, int limit, size_t *len, size_t *n_items) {
    FILE *f = fopen(path, "r");
    if (!f) { fprintf(stderr, "bench_pyreward: cannot read %s\n", path); exit(1); }
    Dapo__ScoreItem *it = NULL, **ptr = NULL;
    json_t **keep = NULL;
    size_t n = 0, cap = 0;
    char *line = NULL;
    size_t lcap = 0;
    while (getline(&line, &lcap, f) > 0 && (limit <= 0 || (int)n < limit)) {
        json_t *j = json_loads(line, 0, NULL);
        if (!j) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 1024;
            it = realloc(it, cap * sizeof *it);
            keep = realloc(keep, cap * sizeof *keep);
        }
        dapo__score_item__init(&it[n]);
        it[n].item_id = n;
        it[n].attempt = 1;
        const char *s = json_string_value(json_object_get(j, "solution")), *g = json_string_value(json_object_get(j, "ground_truth"));
        it[n].response_text.data = (uint8_t *)(s ? s : "");
        it[n].response_text.len = s ? strlen(s) : 0;
        it[n].ground_truth.data = (uint8_t *)(g ? g : "");
        it[n].ground_truth.len = g ? strlen(g) : 0;
        it[n].data_source = "math_dapo";
        keep[n++] = j;
    }
    free(line);
    fclose(f);
    ptr = malloc(n * sizeof *ptr);
    for (size_t i = 0; i < n; i++) ptr[i] = &it[i];
    Dapo__ScoreRequest r = DAPO__SCORE_REQUEST__INIT;
    r.run_id = "bench";
    r.request_id = 1;
    r.attempt = 1;
    r.n_items = n;
    r.items = ptr;
    *len = dapo__score_request__get_packed_size(&r);
    uint8_t *buf = malloc(*len);
    dapo__score_request__pack(&r, buf);
    for (size_t i = 0; i < n; i++) json_decref(keep[i]);
    free(keep);
    free(it);
    free(ptr);
    *n_items = n;
    return buf;
}

int main(int argc, char **argv) {
    const char *cases = NULL, *reward = NULL, *workers = "1,2,4", *python = "python3";
    int limit = 0, passes = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reward") && i + 1 < argc) reward = argv[++i];
        else if (!strcmp(argv[i], "--workers") && i + 1 < argc) workers = argv[++i];
        else if (!strcmp(argv[i], "--python") && i + 1 < argc) python = argv[++i];
        else if (!strcmp(argv[i], "--limit") && i + 1 < argc) limit = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--passes") && i + 1 < argc) passes = atoi(argv[++i]);
        else if (argv[i][0] != '-') cases = argv[i];
        else { fprintf(stderr, "bench_pyreward: unknown argument %s\n", argv[i]); return 1; }
    }
    if (!cases || !reward || passes < 1) {
        fprintf(stderr, "usage: bench_pyreward CASES.jsonl --reward FILE.py [--workers 1,2,4] [--limit N] [--passes P]\n");
        return 1;
    }
    size_t len, n;
    uint8_t *packed = pack_request(cases, limit, &len, &n);
    char list[256];
    snprintf(list, sizeof list, "%s", workers);
    for (char *save = NULL, *w = strtok_r(list, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        int nw = atoi(w);
        char err[ERR_LEN];
        PyWorkerSpec py = {.python = python, .path = reward, .name = "compute_score", .memory_mb = 0,
                           .start_timeout_s = 120};
        ScorePoolOpts o = {.threads = nw, .timeout_s = 60, .error_score = -1, .py = &py};
        double t0 = now_s();
        ScorePool *p = score_pool_new(&o, err);
        if (!p) { fprintf(stderr, "bench_pyreward: %s\n", err); return 1; }
        double start = now_s() - t0;
        double *t = calloc((size_t)passes, sizeof *t);
        uint64_t before[5], after[5];
        for (int k = 0; k < passes; k++) {
            score_pool_outcomes(p, before);
            Dapo__ScoreRequest *req = dapo__score_request__unpack(NULL, len, packed);
            double a = now_s();
            score_pool_submit(p, req);
            Dapo__ScoreResult *r = NULL;
            uint32_t got;
            while (!score_pool_take(p, &r, &got)) usleep(200);
            t[k] = now_s() - a;
            score_result_free(r);
        }
        score_pool_outcomes(p, after);
        qsort(t, (size_t)passes, sizeof *t, cmp_double);
        double med = t[passes / 2];
        printf("python reward pool: %d workers (started in %.2f s), %zu items, %d passes, median %.3f s -> %.1f items/s; "
               "last pass outcomes ok %llu, timeout %llu, crash %llu, memory %llu, error %llu\n", nw, start, n, passes,
               med, n / med, (unsigned long long)(after[0] - before[0]), (unsigned long long)(after[1] - before[1]),
               (unsigned long long)(after[2] - before[2]), (unsigned long long)(after[3] - before[3]),
               (unsigned long long)(after[4] - before[4]));
        printf("OURS_ITEMS_PER_S_%d=%.1f\n", nw, n / med);
        free(t);
        score_pool_free(p);
    }
    free(packed);
    return 0;
}
