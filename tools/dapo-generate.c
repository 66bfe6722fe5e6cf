/* tools/dapo-generate.c: offline generation with the rollout engine (model/generate.h) — prompts in the verl /
 * DAPO-Math-17k JSONL schema in, responses JSONL out, optionally scored with the verifier's rules.
 *
 *   dapo-generate --model DIR [--tokenizer DIR] [--input FILE (default stdin)] [--output FILE (default stdout)]
 *                 [--n N] [--temperature T] [--top-p P] [--top-k K] [--greedy] [--max-tokens N] [--seed S]
 *                 [--max-prompt-length N] [--chat-template auto|qwen2.5|qwen3|llama3|none]
 *                 [--max-num-seqs N] [--kv-cache-tokens N] [--batch-tokens N] [--batch-invariant]
 *                 [--no-prefix-caching] [--threads N] [--verify] [--device cpu|cuda]
 *
 * Prompts are rendered and tokenized by the dataset reader (io/dataset.h; overlong prompts are left-truncated to
 * --max-prompt-length, default 2048, as data.truncation=left). Response j of prompt line i is sampled with the
 * RNG key (seed, group id i, sample j, position), so a run is reproducible and --n 8 extends --n 4. Stop ids: the
 * tokenizer's eos / <|im_end|> / <|endoftext|> plus the model's EOS ids. Each output line:
 *   {"index": i, "data_source": ..., "prompt": rendered prompt, "ground_truth": ..., "responses": [
 *      {"text": decoded with special tokens skipped, "token_ids": [...], "logprobs": [...],
 *       "finish_reason": "stop"|"length", ("score", "acc", "pred" with --verify)}, ...]}
 * --verify scores each response with reward/reward.h (math_dapo rules by data_source, no overlong penalty) and
 * prints per data_source mean@n, best@n/mean and maj@n/mean with verl's val-core names to stderr, aggregated as the
 * coordinator's validation does (dapo/val_metrics.h). Exit status: 0, 1 on bad arguments or files.
 * Not here: the daemon (services/rollout), maj@k. */
#include <cblas.h>
#include <jansson.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/cliarg.h"
#include "core/err.h"
#include "core/log.h"
#include "core/metrics.h"
#include "dapo/val_metrics.h"
#include "io/dataset.h"
#include "model/generate.h"
#include "reward/reward.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    const char *model, *tokenizer, *input, *output, *chat, *device;
    int   n, top_k, greedy, max_tokens, max_prompt, max_seqs, batch_tokens, invariant, no_share, threads, verify;
    long  kv_tokens;
    float temperature, top_p;
    unsigned long long seed;
} Args;

static void usage(FILE *f) {
    fprintf(f,
            "usage: dapo-generate --model DIR [--tokenizer DIR] [--input FILE] [--output FILE] [--n N]\n"
            "         [--temperature T] [--top-p P] [--top-k K] [--greedy] [--max-tokens N] [--seed S]\n"
            "         [--max-prompt-length N] [--chat-template NAME] [--max-num-seqs N] [--kv-cache-tokens N]\n"
            "         [--batch-tokens N] [--batch-invariant] [--no-prefix-caching] [--threads N] [--verify]\n"
            "         [--device cpu|cuda]   (cuda: a build with the CUDA backend and a visible GPU)\n");
}

/* A numeric flag (core/cliarg.h); the message goes to stderr. */
static int parse_num(const char *flag, const char *s, double lo, double hi, double *out) {
    char err[ERR_LEN];
    int rc = cli_number(flag, s, lo, hi, out, err);
    if (rc) fprintf(stderr, "dapo-generate: %s\n", err);
    return rc;
}

static int parse_args(int argc, char **argv, Args *a) {
    *a = (Args){ .chat = "auto", .n = 1, .top_k = 0, .max_tokens = 1024, .max_prompt = 2048, .max_seqs = 64,
                 .batch_tokens = 512, .temperature = 1.0f, .top_p = 1.0f, .seed = 1 };
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        double x;
        if (!strcmp(f, "--greedy")) { a->greedy = 1; continue; }
        if (!strcmp(f, "--batch-invariant")) { a->invariant = 1; continue; }
        if (!strcmp(f, "--no-prefix-caching")) { a->no_share = 1; continue; }
        if (!strcmp(f, "--verify")) { a->verify = 1; continue; }
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) { usage(stdout); exit(0); }
        /* a flag with a value: matches f and takes the next argument, which must not be a flag itself */
        int no_value = !v || !strncmp(v, "--", 2), missing = 0;
#define VALUE_FLAG(name) (!strcmp(f, name) && (no_value ? (missing = 1, 0) : (i++, 1)))
        if (VALUE_FLAG("--model")) a->model = v;
        else if (VALUE_FLAG("--tokenizer")) a->tokenizer = v;
        else if (VALUE_FLAG("--input")) a->input = v;
        else if (VALUE_FLAG("--output")) a->output = v;
        else if (VALUE_FLAG("--chat-template")) a->chat = v;
        else if (VALUE_FLAG("--device")) a->device = v;
        else if (VALUE_FLAG("--n")) { if (parse_num(f, v, 1, 65536, &x)) return -1; a->n = (int)x; }
        else if (VALUE_FLAG("--temperature")) { if (parse_num(f, v, 0, 100, &x)) return -1; a->temperature = (float)x; }
        else if (VALUE_FLAG("--top-p")) { if (parse_num(f, v, 1e-9, 1, &x)) return -1; a->top_p = (float)x; }
        else if (VALUE_FLAG("--top-k")) { if (parse_num(f, v, -1, 1e9, &x)) return -1; a->top_k = (int)x; }
        else if (VALUE_FLAG("--max-tokens")) { if (parse_num(f, v, 1, 1e7, &x)) return -1; a->max_tokens = (int)x; }
        else if (VALUE_FLAG("--max-prompt-length")) { if (parse_num(f, v, 1, 1e7, &x)) return -1; a->max_prompt = (int)x; }
        else if (VALUE_FLAG("--max-num-seqs")) { if (parse_num(f, v, 1, 1e6, &x)) return -1; a->max_seqs = (int)x; }
        else if (VALUE_FLAG("--kv-cache-tokens")) { if (parse_num(f, v, 16, 2147483647.0, &x)) return -1; a->kv_tokens = (long)x; }
        else if (VALUE_FLAG("--batch-tokens")) { if (parse_num(f, v, 1, 1e7, &x)) return -1; a->batch_tokens = (int)x; }
        else if (VALUE_FLAG("--threads")) { if (parse_num(f, v, 0, 1024, &x)) return -1; a->threads = (int)x; }
        else if (VALUE_FLAG("--seed")) { if (parse_num(f, v, 0, 1.8e19, &x)) return -1; a->seed = strtoull(v, NULL, 10); }
        else {
            if (missing) fprintf(stderr, "dapo-generate: %s needs a value\n", f);
            else fprintf(stderr, "dapo-generate: unknown argument '%s'\n", f);
            return -1;
        }
#undef VALUE_FLAG
    }
    if (!a->model) { fprintf(stderr, "dapo-generate: --model DIR is required\n"); return -1; }
    return 0;
}

static json_t *bytes_json(const char *s, size_t n) {
    json_t *j = json_stringn_nocheck(s, n);
    return j ? j : json_string("");
}

/* One output line: prompt `it` with its a->n responses res[0..n) (and with --verify their scores, and its prompt
 * added to agg). */
static void write_prompt(FILE *out, const Args *a, const Tokenizer *tok, const DatasetItem *it, GenResult *res,
                         RewardWs *ws, ValAgg *agg) {
    json_t *o = json_object(), *arr = json_array();
    float *acc = xcalloc((size_t)a->n, sizeof *acc);
    char **pred = xcalloc((size_t)a->n, sizeof *pred);
    json_object_set_new(o, "index", json_integer((json_int_t)it->index));
    json_object_set_new(o, "data_source", json_string(it->data_source));
    json_object_set_new(o, "prompt", bytes_json(it->prompt_text, strlen(it->prompt_text)));
    json_object_set_new(o, "ground_truth", json_string(it->ground_truth));
    for (int j = 0; j < a->n; j++) {
        GenResult *r = &res[j];
        TokBuf text = { 0 };
        tokenizer_decode(tok, r->tokens, (size_t)r->n, true, &text);
        json_t *ro = json_object(), *ids = json_array(), *lps = json_array();
        for (int k = 0; k < r->n; k++) {
            json_array_append_new(ids, json_integer(r->tokens[k]));
            json_array_append_new(lps, json_real(r->logprobs[k]));
        }
        json_object_set_new(ro, "text", bytes_json(text.v ? text.v : "", text.n));
        json_object_set_new(ro, "token_ids", ids);
        json_object_set_new(ro, "logprobs", lps);
        json_object_set_new(ro, "finish_reason", json_string(gen_finish_name(r->finish)));
        if (a->verify) {
            RewardResult rr;
            reward_score(ws, it->data_source, text.v, text.n, it->ground_truth, strlen(it->ground_truth), false, 0, &rr);
            json_object_set_new(ro, "score", json_real(rr.score));
            json_object_set_new(ro, "acc", json_boolean(rr.acc));
            json_object_set_new(ro, "pred", rr.has_pred ? bytes_json(rr.pred, rr.pred_len) : json_null());
            acc[j] = rr.acc ? 1.0f : 0.0f;
            size_t pl = rr.has_pred ? rr.pred_len : 0;
            pred[j] = xmalloc(pl + 1);
            if (pl) memcpy(pred[j], rr.pred, pl);
            pred[j][pl] = 0;
        }
        json_array_append_new(arr, ro);
        tok_buf_free(&text);
    }
    if (a->verify) val_agg_add(agg, it->data_source, acc, (const char *const *)pred, a->n);
    for (int j = 0; j < a->n; j++) xfree(pred[j]);
    xfree(pred);
    xfree(acc);
    json_object_set_new(o, "responses", arr);
    char *line = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
    fprintf(out, "%s\n", line);
    free(line);
    json_decref(o);
}

int main(int argc, char **argv) {
    log_init("generate", LL_WARN);
    Args a;
    if (parse_args(argc, argv, &a)) { usage(stderr); return 1; }
    int threads = a.threads > 0 ? a.threads : omp_get_num_procs();
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
    char err[ERR_LEN];
    int rc = 1;
    Model *m = NULL;
    Tokenizer *tok = NULL;
    GenEngine *e = NULL;
    Dataset ds = { 0 };
    FILE *out = stdout;
    GenResult *res = NULL;
    ValAgg agg;                       /* --verify: mean@n / best@n / maj@n per data source (dapo/val_metrics.h) */
    val_agg_init(&agg, a.n);
    RewardWs *ws = NULL;

    const Backend *be = backend_select(a.device, err);
    if (!be || gen_engine_supports(be, err)) { fprintf(stderr, "dapo-generate: --device: %s\n", err); goto done; }
    ModelOptions mo = { .max_tokens = 1, .backend = be };
    if (!(m = model_load(a.model, &mo, err))) { fprintf(stderr, "dapo-generate: %s\n", err); goto done; }
    const char *tdir = a.tokenizer ? a.tokenizer : a.model;
    if (!(tok = tokenizer_load(tdir, err))) { fprintf(stderr, "dapo-generate: %s\n", err); goto done; }
    DatasetOptions dopt;
    if (dataset_options_init(&dopt, a.max_prompt, false, "left", a.chat, "skip", tok, err)) {
        fprintf(stderr, "dapo-generate: %s\n", err);
        goto done;
    }
    if (dataset_load(&ds, a.input ? a.input : "/dev/stdin", tok, &dopt, err)) {
        fprintf(stderr, "dapo-generate: %s\n", err);
        goto done;
    }
    if (a.output && !(out = fopen(a.output, "w"))) { fprintf(stderr, "dapo-generate: cannot write %s\n", a.output); goto done; }
    int max_prompt = 1;
    for (size_t i = 0; i < ds.n; i++) if (ds.items[i].n_ids > max_prompt) max_prompt = ds.items[i].n_ids;
    long kv = a.kv_tokens ? a.kv_tokens : (long)a.max_seqs * (max_prompt + a.max_tokens);
    if (kv < max_prompt + a.max_tokens) kv = max_prompt + a.max_tokens;
    if (kv > (1L << 22) && !a.kv_tokens) kv = (1L << 22) > max_prompt + a.max_tokens ? 1L << 22 : max_prompt + a.max_tokens;
    GenOptions go = { .max_num_seqs = a.max_seqs, .kv_cache_tokens = kv, .max_batch_tokens = a.batch_tokens,
                      .batch_invariant = a.invariant, .no_prefix_sharing = a.no_share };
    if (!(e = gen_engine_new(m, &go, err))) { fprintf(stderr, "dapo-generate: %s\n", err); goto done; }
    int32_t stops[3];
    int n_stop = tokenizer_stop_ids(tok, stops);
    /* every prompt x n sequences go in at once; the engine's continuous batching takes them max_seqs at a time */
    size_t total = ds.n * (size_t)a.n;
    res = xcalloc(total ? total : 1, sizeof(GenResult));
    const int32_t **ids = xcalloc(ds.n ? ds.n : 1, sizeof *ids);
    int *n_ids = xcalloc(ds.n ? ds.n : 1, sizeof *n_ids);
    for (size_t i = 0; i < ds.n; i++) { ids[i] = ds.items[i].ids; n_ids[i] = ds.items[i].n_ids; }
    GenRequest q = { .seed = a.seed, .max_tokens = a.max_tokens,
                     .sp = { .temperature = a.temperature, .top_p = a.top_p, .top_k = a.top_k, .greedy = a.greedy },
                     .stop_ids = stops, .n_stop = n_stop };
    double t0 = clock_s();
    long n_tok = 0;
    int grc = gen_engine_run_all(e, ids, n_ids, ds.n, a.n, &q, res, &n_tok, err);
    xfree(ids);
    xfree(n_ids);
    if (grc) fprintf(stderr, "dapo-generate: %s\n", err);
    if (grc == ERR_INVAL && n_tok == 0) goto done;
    double dt = clock_s() - t0;
    if (a.verify) ws = reward_ws_new();
    for (size_t i = 0; i < ds.n; i++)
        write_prompt(out, &a, tok, &ds.items[i], res + i * (size_t)a.n, ws, &agg);
    fprintf(stderr, "dapo-generate: %zu prompts x %d: %ld response tokens in %.2f s (%.1f tok/s, %d threads, %s)\n",
            ds.n, a.n, n_tok, dt, dt > 0 ? n_tok / dt : 0.0, threads, openblas_get_corename());
    Metrics vm = { 0 };
    val_agg_metrics(&agg, &vm);
    for (int i = 0; i < vm.n; i++) fprintf(stderr, "%s = %.4f\n", vm.m[i].name, vm.m[i].value);
    for (int i = 0; i < agg.n_src; i++)
        fprintf(stderr, "val-core/%s: (%ld prompts)\n", agg.src[i].data_source, agg.src[i].prompts);
    metrics_free(&vm);
    rc = 0;
done:
    if (out && out != stdout && fclose(out)) { fprintf(stderr, "dapo-generate: writing %s failed\n", a.output); rc = 1; }
    for (size_t i = 0; res && i < ds.n * (size_t)a.n; i++) gen_result_free(&res[i]);
    xfree(res);
    val_agg_free(&agg);
    reward_ws_free(ws);
    gen_engine_free(e);
    dataset_free(&ds);
    tokenizer_free(tok);
    model_free(m);
    return rc;
}
