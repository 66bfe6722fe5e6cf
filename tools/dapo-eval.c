/* tools/dapo-eval.c: scores a checkpoint on math benchmarks the way the DAPO repo and verl do, and writes JSON and a
 * table.
 *
 *   dapo-eval --model DIR [--tokenizer DIR] [--benchmarks aime2024,math500,gsm8k] [--data FILE ...]
 *             [--data-dir DIR] [--k N] [--aime-n N] [--temperature T] [--top-p P] [--max-tokens N]
 *             [--max-prompt-length N] [--max-problems N] [--seed S] [--threads N] [--output FILE.json]
 *             [--samples FILE.jsonl] [--chat-template auto|qwen2.5|qwen3|llama3|none]
 *
 * Benchmarks (files under --data-dir, default $DAPO_ROOT/data or ./data; prompts as in data/README.md):
 *   aime2024  data/aime-2024.jsonl (30 problems): as DAPO's eval/eval_aime24.py, each problem sampled --aime-n times
 *             (32), temperature 1.0, top_p 0.7; the headline is avg@32 = acc/mean@32 over the 30 x 32 = 960 samples
 *   math500   data/math500-test.jsonl (500), gsm8k data/gsm8k-test.jsonl (1319): --k samples each (4), same sampling
 *   --data F  any file in the same schema (its base name is the benchmark's name), --k samples each
 * For each: mean@k (the mean accuracy of all samples), pass@j for j = 1, 2, 4, ... up to k with the unbiased
 * estimator of Chen et al. 2021, and maj@k (the majority-voted answer's accuracy, ties to the earliest) — from
 * dapo/val_metrics.h, the aggregation the coordinator's validation uses, over responses scored by reward/reward.h
 * (math_dapo rules by data_source, no overlong penalty) as the verifier does. Prompts longer than
 * --max-prompt-length tokens (default 4096, above every AIME prompt) are dropped, never cut, and counted.
 * Generation: the rollout engine (model/generate.h), --max-tokens response tokens at most (default 2048; DAPO's
 * runs use 20480), prompts rendered with --chat-template (data.chat_template's values; default auto, the
 * tokenizer's own template: give the training run's value to score prompts as it saw them), RNG keys (seed, problem, sample) as dapo-generate, so a run is reproducible.
 * Output: a table on stdout; with --output, one JSON object {"model", "benchmarks": {name: {...}}}; with --samples,
 * one line per sample {"benchmark", "index", "sample", "data_source", "ground_truth", "response", "acc", "score",
 * "pred"}.
 * Exit status 0, or 1 on bad arguments or files.
 * Not here: the generation engine, the scorer, the metric aggregation (their headers). */
#include <cblas.h>
#include <errno.h>
#include <jansson.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/clock.h"
#include "core/cliarg.h"
#include "core/err.h"
#include "core/log.h"
#include "core/utf8.h"
#include "dapo/val_metrics.h"
#include "io/dataset.h"
#include "model/generate.h"
#include "reward/reward.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

#define MAX_BENCH 16

typedef struct { char name[64]; char path[1024]; int n; } Bench;

typedef struct {
    const char *model, *tokenizer, *output, *samples, *data_dir, *chat_template;
    FILE       *output_f;             /* --output, opened before any work */
    Bench bench[MAX_BENCH];
    int   n_bench, k, aime_n, max_tokens, max_prompt, max_problems, threads;
    double temperature, top_p;
    unsigned long long seed;
    FILE  *samples_f;                /* --samples: one line per sample */
} Args;

static void usage(FILE *f) {
    fprintf(f,
            "usage: dapo-eval --model DIR [--tokenizer DIR] [--benchmarks aime2024,math500,gsm8k] [--data FILE ...]\n"
            "         [--data-dir DIR] [--k N] [--aime-n N] [--temperature T] [--top-p P] [--max-tokens N]\n"
            "         [--max-prompt-length N] [--max-problems N] [--seed S] [--threads N] [--output FILE.json]\n"
            "         [--samples FILE.jsonl] [--chat-template auto|qwen2.5|qwen3|llama3|none]\n");
}

/* A numeric flag (core/cliarg.h); the message goes to stderr. */
static int num(const char *flag, const char *s, double lo, double hi, double *out) {
    char err[ERR_LEN];
    int rc = cli_number(flag, s, lo, hi, out, err);
    if (rc) fprintf(stderr, "dapo-eval: %s\n", err);
    return rc;
}

/* A whole number in [lo, hi] written as digits (no "2.7", no "1e3"). */
static int whole(const char *flag, const char *s, unsigned long long lo, unsigned long long hi, unsigned long long *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || *s == '-' || errno || v < lo || v > hi) {
        fprintf(stderr, "dapo-eval: %s: '%s' is not a whole number in [%llu, %llu]\n", flag, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

static int add_bench(Args *a, const char *name, const char *path, int n) {
    if (a->n_bench == MAX_BENCH) { fprintf(stderr, "dapo-eval: at most %d benchmarks\n", MAX_BENCH); return -1; }
    for (int i = 0; i < a->n_bench; i++)
        if (!strcmp(a->bench[i].name, name)) {
            fprintf(stderr, "dapo-eval: benchmark '%s' given twice (%s, %s)\n", name, a->bench[i].path, path);
            return -1;
        }
    Bench *b = &a->bench[a->n_bench++];
    snprintf(b->name, sizeof b->name, "%s", name);
    snprintf(b->path, sizeof b->path, "%s", path);
    b->n = n;
    return 0;
}

/* The named benchmarks of --benchmarks (comma-separated), resolved under data_dir; n 0 means --k (filled later). */
static int named_benchmarks(Args *a, const char *list) {
    static const struct { const char *name, *file; int aime; } known[] = {
        {"aime2024", "aime-2024.jsonl", 1}, {"math500", "math500-test.jsonl", 0}, {"gsm8k", "gsm8k-test.jsonl", 0},
    };
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    int before = a->n_bench;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        size_t i = 0;
        while (i < 3 && strcmp(t, known[i].name)) i++;
        if (i == 3) {
            fprintf(stderr, "dapo-eval: --benchmarks: unknown '%s' (aime2024, math500, gsm8k; --data FILE for others)\n", t);
            return -1;
        }
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", a->data_dir, known[i].file);
        if (add_bench(a, known[i].name, path, known[i].aime ? -1 : 0)) return -1;
    }
    if (a->n_bench == before) {
        fprintf(stderr, "dapo-eval: --benchmarks '%s' names no benchmark (aime2024, math500, gsm8k)\n", list);
        return -1;
    }
    return 0;
}

static int parse_args(int argc, char **argv, Args *a) {
    const char *root = getenv("DAPO_ROOT");
    static char dd[1024];
    snprintf(dd, sizeof dd, "%s/data", root && *root ? root : ".");
    *a = (Args){ .data_dir = dd, .k = 4, .aime_n = 32, .max_tokens = 2048, .max_prompt = 4096, .temperature = 1.0,
                 .top_p = 0.7, .seed = 1, .chat_template = "auto" };
    const char *list = NULL;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        double x;
        unsigned long long u;
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) { usage(stdout); exit(0); }
        if (!v || !strncmp(v, "--", 2)) {
            fprintf(stderr, "dapo-eval: %s\n", strncmp(f, "--", 2) ? "unexpected argument" : "a flag needs a value");
            fprintf(stderr, "dapo-eval: at '%s'\n", f);
            return -1;
        }
        i++;
        if (!strcmp(f, "--model")) a->model = v;
        else if (!strcmp(f, "--tokenizer")) a->tokenizer = v;
        else if (!strcmp(f, "--output")) a->output = v;
        else if (!strcmp(f, "--samples")) a->samples = v;
        else if (!strcmp(f, "--data-dir")) a->data_dir = v;
        else if (!strcmp(f, "--chat-template")) a->chat_template = v;
        else if (!strcmp(f, "--benchmarks")) list = v;
        else if (!strcmp(f, "--data")) {
            const char *base = strrchr(v, '/') ? strrchr(v, '/') + 1 : v, *dot = strrchr(base, '.');
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)(dot && dot > base ? dot - base : (long)strlen(base)), base);
            if (add_bench(a, name, v, 0)) return -1;
        }
        else if (!strcmp(f, "--k")) { if (whole(f, v, 1, 4096, &u)) return -1; a->k = (int)u; }
        else if (!strcmp(f, "--aime-n")) { if (whole(f, v, 1, 4096, &u)) return -1; a->aime_n = (int)u; }
        else if (!strcmp(f, "--temperature")) { if (num(f, v, 0, 100, &x)) return -1; a->temperature = x; }
        else if (!strcmp(f, "--top-p")) { if (num(f, v, 1e-9, 1, &x)) return -1; a->top_p = x; }
        else if (!strcmp(f, "--max-tokens")) { if (whole(f, v, 1, 10000000, &u)) return -1; a->max_tokens = (int)u; }
        else if (!strcmp(f, "--max-prompt-length")) { if (whole(f, v, 1, 10000000, &u)) return -1; a->max_prompt = (int)u; }
        else if (!strcmp(f, "--max-problems")) { if (whole(f, v, 1, 1000000000, &u)) return -1; a->max_problems = (int)u; }
        else if (!strcmp(f, "--threads")) { if (whole(f, v, 0, 1024, &u)) return -1; a->threads = (int)u; }
        else if (!strcmp(f, "--seed")) { if (whole(f, v, 0, ~0ULL, &u)) return -1; a->seed = u; }
        else { fprintf(stderr, "dapo-eval: unknown argument '%s'\n", f); return -1; }
    }
    if (!a->model) { fprintf(stderr, "dapo-eval: --model DIR is required\n"); return -1; }
    ChatFamily fam;
    char cerr[ERR_LEN];
    if (strcmp(a->chat_template, "auto") && chat_family_parse(a->chat_template, &fam, cerr)) {
        fprintf(stderr, "dapo-eval: --chat-template: %s\n", cerr);
        return -1;
    }
    if ((list || a->n_bench == 0) && named_benchmarks(a, list ? list : "aime2024,math500,gsm8k")) return -1;
    for (int i = 0; i < a->n_bench; i++) a->bench[i].n = a->bench[i].n < 0 ? a->aime_n : a->bench[i].n ? a->bench[i].n : a->k;
    return 0;
}

/* One --samples line. */
static void dump_sample(FILE *f, const char *bench, const DatasetItem *it, int j, const TokBuf *text,
                        const RewardResult *rr) {
    char *resp = xmalloc(3 * text->n + 1);                  /* invalid UTF-8 as U+FFFD */
    size_t rn = utf8_repair(text->v ? text->v : "", text->n, resp);
    json_t *o = json_pack("{s:s, s:I, s:i, s:s, s:s, s:s%, s:b, s:f}", "benchmark", bench, "index", (json_int_t)it->index,
                          "sample", j, "data_source", it->data_source, "ground_truth", it->ground_truth, "response",
                          resp, rn, "acc", rr->acc, "score", rr->score);
    xfree(resp);
    if (!o) return;
    json_object_set_new(o, "pred", rr->has_pred ? json_stringn(rr->pred, rr->pred_len) : json_null());
    char *line = json_dumps(o, JSON_COMPACT);
    if (line) fprintf(f, "%s\n", line);
    free(line);
    json_decref(o);
}

/* Scores res[n_items * k] and aggregates them (mean@k, maj@k, pass@j); with --samples, dumps each. */
static void score_all(const Args *a, const char *bench, const Tokenizer *tok, const Dataset *ds, const GenResult *res,
                      int k, ValAgg *agg) {
    RewardWs *ws = reward_ws_new();
    float *acc = xcalloc((size_t)k, sizeof *acc);
    char **pred = xcalloc((size_t)k, sizeof *pred);
    for (size_t i = 0; i < ds->n; i++) {
        const DatasetItem *it = &ds->items[i];
        for (int j = 0; j < k; j++) {
            const GenResult *r = &res[i * (size_t)k + j];
            TokBuf text = { 0 };
            if (r->tokens) tokenizer_decode(tok, r->tokens, (size_t)r->n, true, &text);
            RewardResult rr;
            reward_score(ws, it->data_source, text.v, text.n, it->ground_truth, strlen(it->ground_truth), false, 0, &rr);
            acc[j] = rr.acc ? 1.0f : 0.0f;
            if (a->samples_f) dump_sample(a->samples_f, bench, it, j, &text, &rr);
            size_t pl = rr.has_pred ? rr.pred_len : 0;
            pred[j] = xmalloc(pl + 1);
            if (pl) memcpy(pred[j], rr.pred, pl);
            pred[j][pl] = 0;
            tok_buf_free(&text);
        }
        val_agg_add(agg, "all", acc, (const char *const *)pred, k);
        for (int j = 0; j < k; j++) xfree(pred[j]);
    }
    xfree(pred);
    xfree(acc);
    reward_ws_free(ws);
}

/* One benchmark: load, generate, score; its results into out (a JSON object) and one table row. */
static int run_bench(const Args *a, Model *m, Tokenizer *tok, const Bench *b, json_t *out, char err[ERR_LEN]) {
    DatasetOptions dopt;
    Dataset ds = { 0 };
    int rc = dataset_options_init(&dopt, a->max_prompt, true, "error", a->chat_template, "skip", tok, err);
    if (!rc) dopt.max_items = a->max_problems;
    if (!rc) rc = dataset_load(&ds, b->path, tok, &dopt, err);
    if (rc) return rc;
    if (ds.n == 0) {
        rc = err_set(err, ERR_INVAL, "%s: no prompt to score (%zu dropped over --max-prompt-length %d, %zu malformed "
                     "lines)", b->path, ds.n_filtered, a->max_prompt, ds.n_malformed);
        dataset_free(&ds);
        return rc;
    }
    int max_prompt = 1;
    for (size_t i = 0; i < ds.n; i++) if (ds.items[i].n_ids > max_prompt) max_prompt = ds.items[i].n_ids;
    GenOptions go = { .max_num_seqs = 64, .kv_cache_tokens = 64L * (max_prompt + a->max_tokens), .max_batch_tokens = 512 };
    GenEngine *e = gen_engine_new(m, &go, err);
    if (!e) { dataset_free(&ds); return ERR_INVAL; }
    int32_t stops[3];
    GenRequest q = { .seed = a->seed, .max_tokens = a->max_tokens, .stop_ids = stops, .n_stop = tokenizer_stop_ids(tok, stops),
                     .sp = { .temperature = (float)a->temperature, .top_p = (float)a->top_p,
                             .greedy = a->temperature == 0 } };
    const int32_t **ids = xcalloc(ds.n ? ds.n : 1, sizeof *ids);
    int *n_ids = xcalloc(ds.n ? ds.n : 1, sizeof *n_ids);
    for (size_t i = 0; i < ds.n; i++) { ids[i] = ds.items[i].ids; n_ids[i] = ds.items[i].n_ids; }
    GenResult *res = xcalloc(ds.n * (size_t)b->n + 1, sizeof *res);
    long n_tok = 0;
    double t0 = clock_s();
    rc = gen_engine_run_all(e, ids, n_ids, ds.n, b->n, &q, res, &n_tok, err);
    double dt = clock_s() - t0;
    if (rc) fprintf(stderr, "dapo-eval: %s: %s (those samples score as wrong)\n", b->name, err);
    ValAgg agg;
    val_agg_init(&agg, b->n);
    score_all(a, b->name, tok, &ds, res, b->n, &agg);
    Metrics vm = { 0 };
    val_agg_metrics(&agg, &vm);
    char key[64];
    json_t *o = json_object();
    json_object_set_new(o, "file", json_string(b->path));
    json_object_set_new(o, "n", json_integer(b->n));
    json_object_set_new(o, "temperature", json_real(a->temperature));
    json_object_set_new(o, "top_p", json_real(a->top_p));
    json_object_set_new(o, "max_tokens", json_integer(a->max_tokens));
    json_object_set_new(o, "max_prompt_length", json_integer(a->max_prompt));
    json_object_set_new(o, "chat_template", json_string(a->chat_template));
    json_object_set_new(o, "prompts", json_integer((json_int_t)ds.n));
    json_object_set_new(o, "dropped_overlong_prompts", json_integer((json_int_t)ds.n_filtered));
    json_object_set_new(o, "malformed_lines", json_integer((json_int_t)ds.n_malformed));
    json_object_set_new(o, "samples", json_integer((json_int_t)ds.n * b->n));
    json_object_set_new(o, "response_tokens", json_integer(n_tok));
    json_object_set_new(o, "generation_s", json_real(dt));
    double mean = ds.n ? val_agg_overall_mean(&agg) : 0;
    snprintf(key, sizeof key, "mean@%d", b->n);
    json_object_set_new(o, key, json_real(mean));
    if (!strcmp(b->name, "aime2024")) {
        snprintf(key, sizeof key, "avg@%d", b->n);
        json_object_set_new(o, key, json_real(mean));
    }
    snprintf(key, sizeof key, "maj@%d", b->n);
    double maj = agg.n_src ? agg.src[0].maj_sum / (double)agg.src[0].prompts : 0;
    json_object_set_new(o, key, json_real(maj));
    json_t *pass = json_object();
    for (int j = 1;; j = j * 2 < b->n ? j * 2 : b->n) {            /* 1, 2, 4, ..., then n itself */
        snprintf(key, sizeof key, "pass@%d", j);
        json_object_set_new(pass, key, json_real(agg.n_src ? val_agg_pass_at(&agg, 0, j) : 0));
        if (j == b->n) break;
    }
    json_object_set_new(o, "pass", pass);
    json_object_set_new(out, b->name, o);
    printf("%-12s %8zu %8zu %8zu  %-8s %.4f  %-8s %.4f  pass@1 %.4f  pass@%d %.4f   (%ld tokens, %.1f s)\n", b->name,
           ds.n, ds.n_filtered, ds.n * (size_t)b->n, strcmp(b->name, "aime2024") ? "mean@k" : "avg@k", mean, "maj@k",
           maj, agg.n_src ? val_agg_pass_at(&agg, 0, 1) : 0, b->n, agg.n_src ? val_agg_pass_at(&agg, 0, b->n) : 0,
           n_tok, dt);
    if (!strcmp(b->name, "aime2024"))
        printf("             AIME 2024 avg@%d over %zu samples (%zu problems x %d)\n", b->n, ds.n * (size_t)b->n, ds.n,
               b->n);
    metrics_free(&vm);
    val_agg_free(&agg);
    for (size_t i = 0; i < ds.n * (size_t)b->n; i++) gen_result_free(&res[i]);
    xfree(res);
    xfree(ids);
    xfree(n_ids);
    gen_engine_free(e);
    dataset_free(&ds);
    return 0;
}

int main(int argc, char **argv) {
    log_init("eval", LL_WARN);
    Args a;
    if (parse_args(argc, argv, &a)) { usage(stderr); return 1; }
    int threads = a.threads > 0 ? a.threads : omp_get_num_procs();
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
    char err[ERR_LEN];
    ModelOptions mo = { .max_tokens = 1, .backend = backend_select("cpu", err) };
    Model *m = mo.backend ? model_load(a.model, &mo, err) : NULL;
    Tokenizer *tok = m ? tokenizer_load(a.tokenizer ? a.tokenizer : a.model, err) : NULL;
    if (!tok) { fprintf(stderr, "dapo-eval: %s\n", err); model_free(m); return 1; }
    printf("dapo-eval: %s, temperature %g, top_p %g, max %d response tokens, prompts <= %d tokens, seed %llu, %d threads\n",
           a.model, a.temperature, a.top_p, a.max_tokens, a.max_prompt, a.seed, threads);
    printf("%-12s %8s %8s %8s  %s\n", "benchmark", "prompts", "dropped", "samples", "metrics");
    json_t *benches = json_object();
    int rc = 0;
    if (a.samples && !(a.samples_f = fopen(a.samples, "w"))) {
        fprintf(stderr, "dapo-eval: --samples: cannot write %s: %s\n", a.samples, strerror(errno));
        rc = 1;
    }
    if (!rc && a.output && !(a.output_f = fopen(a.output, "w"))) {
        fprintf(stderr, "dapo-eval: --output: cannot write %s: %s\n", a.output, strerror(errno));
        rc = 1;
    }
    for (int i = 0; i < a.n_bench && !rc; i++)
        if (run_bench(&a, m, tok, &a.bench[i], benches, err)) {
            fprintf(stderr, "dapo-eval: %s: %s\n", a.bench[i].name, err);
            rc = 1;
        }
    json_t *doc = json_pack("{s:s, s:o}", "model", a.model, "benchmarks", benches);
    if (a.output_f) {
        int bad = rc == 0 && json_dumpf(doc, a.output_f, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
        if (fclose(a.output_f) || bad) { fprintf(stderr, "dapo-eval: writing %s failed\n", a.output); rc = 1; }
    }
    json_decref(doc);
    if (a.samples_f && fclose(a.samples_f)) { fprintf(stderr, "dapo-eval: writing %s failed\n", a.samples); rc = 1; }
    tokenizer_free(tok);
    model_free(m);
    return rc;
}
