/* tools/dapo-logprobs.c: per-token log-probs and entropies of token sequences under a Hugging Face model
 * directory, on the CPU (model/model.h), as JSONL.
 *
 *   dapo-logprobs --model DIR [--temperature T] [--max-tokens N] < in.jsonl > out.jsonl
 *     in:  {"id": any, "input_ids": [int, ...], "start": int (default 1)}
 *     out: {"id": same, "logprobs": [...], "entropies": [...]}  for positions t = start .. len-1:
 *          logprobs[k] = log softmax(logits_{t-1} / T)[input_ids[t]] (the token given its prefix),
 *          entropies[k] = entropy of that same distribution (verl's entropy_from_logits).
 *     A bad line gets {"id": ..., "error": "..."} and the tool goes on. Lines are packed into batches of
 *     up to --max-tokens tokens (default 8192); output order = input order.
 *     Exit status (as dapo-verify): 0 when every line got results, 1 when any line was an error (all lines are
 *     still processed and the good ones written; a count goes to stderr) or the model failed, 2 on a usage error.
 *   dapo-logprobs --model DIR --save OUT [--save-dtype f32|bf16]
 *     loads DIR and writes it back to OUT (config.json, generation_config.json, model.safetensors).
 * Not here: sampling/generation (dapo-generate), tokenization (input is token ids). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "model/model.h"

typedef struct {
    json_t  *id;         /* owned ref */
    char    *error;      /* xstrdup'd, or NULL */
    int32_t *ids;
    int      n, start;
} Item;

static void usage(FILE *f) {
    fprintf(f, "usage: dapo-logprobs --model DIR [--temperature T] [--max-tokens N] [--device cpu|cuda] < in.jsonl\n"
               "       dapo-logprobs --model DIR --save OUT [--save-dtype f32|bf16]\n"
               "  in:  {\"id\": any, \"input_ids\": [int, ...], \"start\": int (default 1)} per line\n"
               "  out: {\"id\", \"logprobs\": [...], \"entropies\": [...]} per line, input order; a bad line gets\n"
               "       {\"id\", \"error\"} and the rest go on\n"
               "  exit status: 0 every line got results, 1 any line was an error (or the model failed), 2 usage\n"
               "  --help, -h   print this text and exit\n");
}

static void item_parse(Item *it, const char *line, int V, int max_tokens) {
    memset(it, 0, sizeof *it);
    json_error_t je;
    json_t *j = json_loads(line, JSON_ALLOW_NUL, &je);
    char msg[ERR_LEN];
    if (!j || !json_is_object(j)) {
        snprintf(msg, sizeof msg, "line is not a JSON object (%s)", j ? "" : je.text);
        it->error = xstrdup(msg);
        it->id = json_null();
        json_decref(j);
        return;
    }
    json_t *id = json_object_get(j, "id");
    it->id = id ? json_incref(id) : json_null();
    json_t *a = json_object_get(j, "input_ids"), *s = json_object_get(j, "start");
    if (!json_is_array(a) || json_array_size(a) < 2) {
        it->error = xstrdup("input_ids: expected an array of at least 2 token ids");
    } else if ((long)json_array_size(a) > max_tokens) {
        snprintf(msg, sizeof msg, "input_ids: %zu tokens exceed --max-tokens %d", json_array_size(a), max_tokens);
        it->error = xstrdup(msg);
    } else {
        it->n = (int)json_array_size(a);
        it->start = s ? (int)json_integer_value(s) : 1;
        if (s && !json_is_integer(s)) it->start = -1;
        if (it->start < 1 || it->start >= it->n) {
            snprintf(msg, sizeof msg, "start: must be an integer in [1, %d)", it->n);
            it->error = xstrdup(msg);
        }
        it->ids = xmalloc((size_t)it->n * sizeof(int32_t));
        for (int i = 0; i < it->n && !it->error; i++) {
            json_t *e = json_array_get(a, (size_t)i);
            json_int_t v = json_is_integer(e) ? json_integer_value(e) : -1;
            if (v < 0 || v >= V) {
                snprintf(msg, sizeof msg, "input_ids[%d]: not a token id in [0, %d)", i, V);
                it->error = xstrdup(msg);
            } else it->ids[i] = (int32_t)v;
        }
    }
    json_decref(j);
}

static void item_free(Item *it) {
    json_decref(it->id);
    xfree(it->error);
    xfree(it->ids);
}

static int emit(const Item *it, const float *lp, const float *en) {
    json_t *o = json_object();
    json_object_set(o, "id", it->id);
    if (it->error) json_object_set_new(o, "error", json_string(it->error));
    else {
        json_t *a = json_array(), *b = json_array();
        for (int t = it->start; t < it->n; t++) {
            json_array_append_new(a, json_real(lp[t - 1]));
            json_array_append_new(b, json_real(en[t - 1]));
        }
        json_object_set_new(o, "logprobs", a);
        json_object_set_new(o, "entropies", b);
    }
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
    json_decref(o);
    if (!s) return -1;
    int rc = printf("%s\n", s) < 0 ? -1 : 0;
    free(s);
    return rc;
}

/* Runs the forward for items[0..n) (all valid or errored) and prints them in order. */
static int flush(Model *m, Item *items, int n, float temperature, int32_t *tok, int32_t *tgt, int32_t *cu,
                 float *lp, float *en) {
    int N = 0, S = 0;
    cu[0] = 0;
    for (int i = 0; i < n; i++) {
        if (items[i].error) continue;
        for (int t = 0; t < items[i].n; t++) {
            tok[N + t] = items[i].ids[t];
            tgt[N + t] = t + 1 < items[i].n ? items[i].ids[t + 1] : -1;
        }
        N += items[i].n;
        cu[++S] = N;
    }
    if (S > 0) {
        char err[ERR_LEN];
        ModelBatch b = { .n_tokens = N, .n_seqs = S, .tokens = tok, .targets = tgt, .cu_seqlens = cu,
                         .temperature = temperature };
        if (model_forward(m, &b, lp, en, err)) {
            log_error("forward: %s", err);
            return -1;
        }
    }
    int off = 0;
    for (int i = 0; i < n; i++) {
        if (emit(&items[i], items[i].error ? NULL : lp + off, items[i].error ? NULL : en + off)) return -1;
        if (!items[i].error) off += items[i].n;
        item_free(&items[i]);
    }
    return fflush(stdout) == 0 ? 0 : -1;
}

int main(int argc, char **argv) {
    log_init("dapo-logprobs", LL_WARN);
    const char *dir = NULL, *save = NULL, *save_dtype = "f32", *device = "cpu";
    float temperature = 1.0f;
    int max_tokens = 8192;
    const char *bad = NULL;                 /* why the arguments are refused */
    char why[256];
    for (int i = 1; i < argc && !bad; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        int valued = !strcmp(a, "--model") || !strcmp(a, "--temperature") || !strcmp(a, "--max-tokens") ||
                     !strcmp(a, "--save") || !strcmp(a, "--save-dtype") || !strcmp(a, "--device");
        if (!valued) { snprintf(why, sizeof why, "unknown argument '%s'", a); bad = why; break; }
        if (!v) { snprintf(why, sizeof why, "%s needs a value", a); bad = why; break; }
        i++;
        if (!strcmp(a, "--model")) dir = v;
        else if (!strcmp(a, "--save")) save = v;
        else if (!strcmp(a, "--save-dtype")) save_dtype = v;
        else if (!strcmp(a, "--device")) device = v;
        else if (!strcmp(a, "--temperature")) {
            temperature = strtof(v, &end);
            if (end == v || *end || !(temperature > 0 && temperature <= 100))
                snprintf(why, sizeof why, "--temperature: '%s' is not a number in (0, 100]", v), bad = why;
        } else {
            long x = strtol(v, &end, 10);
            if (end == v || *end || x < 2 || x > (1L << 24))
                snprintf(why, sizeof why, "--max-tokens: '%s' is not an integer in [2, 16777216]", v), bad = why;
            max_tokens = (int)x;
        }
    }
    if (!bad && !dir) bad = "--model DIR is required";
    if (!bad && strcmp(save_dtype, "f32") && strcmp(save_dtype, "bf16")) bad = "--save-dtype is f32 or bf16";
    if (bad) {
        fprintf(stderr, "dapo-logprobs: %s\n", bad);
        usage(stderr);
        return 2;
    }
    char err[ERR_LEN];
    const Backend *be = backend_select(device, err);
    if (!be) { fprintf(stderr, "dapo-logprobs: --device: %s\n", err); return 2; }
    ModelOptions o = { .max_tokens = save ? 1 : max_tokens, .train = 0, .logits_floats = 0, .backend = be };
    Model *m = model_load(dir, &o, err);
    if (!m) { fprintf(stderr, "dapo-logprobs: %s: %s\n", dir, err); return 1; }
    if (save) {
        int rc = model_save(m, save, strcmp(save_dtype, "bf16") ? ST_F32 : ST_BF16, err);
        if (rc) fprintf(stderr, "dapo-logprobs: save %s: %s\n", save, err);
        model_free(m);
        return rc ? 1 : 0;
    }
    int cap_items = 4096;
    Item *items = xcalloc((size_t)cap_items, sizeof *items);
    int32_t *tok = xmalloc((size_t)max_tokens * sizeof(int32_t)), *tgt = xmalloc((size_t)max_tokens * sizeof(int32_t));
    int32_t *cu = xmalloc((size_t)(cap_items + 1) * sizeof(int32_t));
    float *lp = xmalloc((size_t)max_tokens * sizeof(float)), *en = xmalloc((size_t)max_tokens * sizeof(float));
    int n = 0, pending = 0, rc = 0;
    long nlines = 0, nbad = 0;
    char *line = NULL;
    size_t lcap = 0;
    ssize_t len;
    while (!rc && (len = getline(&line, &lcap, stdin)) >= 0) {
        if (len <= 1 && (len == 0 || line[0] == '\n')) continue;
        Item it;
        item_parse(&it, line, model_config(m)->vocab, max_tokens);
        nlines++;
        nbad += it.error != NULL;
        if (!it.error && (pending + it.n > max_tokens || n == cap_items)) {
            rc = flush(m, items, n, temperature, tok, tgt, cu, lp, en);
            n = pending = 0;
        } else if (n == cap_items) {
            rc = flush(m, items, n, temperature, tok, tgt, cu, lp, en);
            n = pending = 0;
        }
        items[n++] = it;
        if (!it.error) pending += it.n;
    }
    if (!rc && n) rc = flush(m, items, n, temperature, tok, tgt, cu, lp, en);
    free(line);
    xfree(items); xfree(tok); xfree(tgt); xfree(cu); xfree(lp); xfree(en);
    model_free(m);
    if (nbad) fprintf(stderr, "dapo-logprobs: %ld of %ld lines had an error (see their \"error\" fields)\n", nbad, nlines);
    return rc || nbad ? 1 : 0;
}
