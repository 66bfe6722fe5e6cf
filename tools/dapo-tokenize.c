/* tools/dapo-tokenize.c: the tokenizer, chat templates and dataset reader from the command line (issue 5).
 *
 *   dapo-tokenize --tokenizer DIR                 stdin JSONL {"id", "text"}     -> {"id", "ids"}
 *   dapo-tokenize --tokenizer DIR --decode        stdin JSONL {"id", "ids"}      -> {"id", "text"}
 *                 [--skip-special]
 *   dapo-tokenize --tokenizer DIR --chat          stdin JSONL {"id", "messages"} -> {"id", "text", "ids"}
 *                 [--template auto|qwen2.5|qwen3|llama3|none] [--no-generation-prompt]
 *   dapo-tokenize --tokenizer DIR --dataset FILE  the dataset reader (data.* options below) ->
 *                 {"line", "index", "data_source", "ground_truth", "n_ids_full", "ids"}
 *                 [--max-prompt-length N] [--filter-overlong] [--truncation error|left|right|middle]
 *                 [--on-malformed skip|error] [--template ...]
 *   dapo-tokenize --tokenizer DIR --bench FILE [--reps N]
 *                 encodes the "text" of each JSONL line of FILE, N times (default 5); prints MB/s per rep and
 *                 the median ("ours_mbps=<v>"); the first rep starts with an empty piece cache.
 * A line that cannot be processed is reported on stderr as "stdin:LINE: reason" and skipped; the exit status
 * is then 1. Text from --decode is valid UTF-8 (U+FFFD replacements), so the output is always valid JSON.
 * Not here: training-data packing (dapo-sft), sampling (coordinator). */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/err.h"
#include "core/log.h"
#include "io/dataset.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

char *openblas_get_corename(void);   /* OpenBLAS is linked into every dapo binary; the bench prints its kernel */

typedef struct {
    const char *tok_dir, *mode, *template_name, *dataset, *bench, *truncation, *on_malformed;
    bool skip_special, gen_prompt, filter_overlong;
    int max_prompt_length, reps;
} Args;

static void usage(FILE *f) {
    fprintf(f, "usage: dapo-tokenize --tokenizer DIR [--decode [--skip-special] | --chat [--template T] "
               "[--no-generation-prompt] | --dataset FILE [--max-prompt-length N] [--filter-overlong] "
               "[--truncation error|left|right|middle] [--on-malformed skip|error] | --bench FILE [--reps N]]\n"
               "Reads JSONL on stdin (one JSON object per line) and writes JSONL on stdout:\n"
               "  (default)   {\"id\": any, \"text\": str}                      -> {\"id\", \"ids\": [int]}\n"
               "  --decode    {\"id\": any, \"ids\": [int]}                     -> {\"id\", \"text\"}\n"
               "  --chat      {\"id\": any, \"messages\": [{\"role\", \"content\"}]} -> {\"id\", \"text\", \"ids\"}\n"
               "  --dataset FILE  reads FILE (verl-schema JSONL: data_source, prompt messages, reward_model.ground_truth),\n"
               "              not stdin -> {\"line\", \"index\", \"data_source\", \"ground_truth\", \"n_ids_full\", \"ids\"};\n"
               "              --max-prompt-length N: tokens, 0 (the default) for no limit\n"
               "  --bench FILE    encodes the \"text\" of each JSONL line of FILE --reps N times (N >= 1, default 5)\n"
               "At most one of --decode, --chat, --dataset, --bench.\n");
}

/* A whole-string integer in [lo, hi] into *out; 0, or -1 after printing what was wrong. */
static int parse_int_flag(const char *flag, const char *v, long lo, long hi, const char *want, int *out) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "dapo-tokenize: %s: want %s, got '%s'\n", flag, want, v);
        return -1;
    }
    *out = (int)x;
    return 0;
}

static int emit(json_t *o) {
    int rc = json_dumpf(o, stdout, JSON_COMPACT);
    json_decref(o);
    if (rc < 0 || fputc('\n', stdout) == EOF) return -1;
    return 0;
}

static json_t *ids_json(const int32_t *v, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(a, json_integer(v[i]));
    return a;
}

/* Handles one stdin line for encode / decode / chat; returns 0 or negative with err set. */
static int do_line(Tokenizer *tok, const Args *a, ChatFamily fam, const char *line, size_t len, char err[ERR_LEN]) {
    json_error_t je;
    json_t *in = json_loadb(line, len, JSON_ALLOW_NUL, &je);
    if (!in) return err_set(err, ERR_DECODE, "invalid JSON: %s", je.text);
    int rc = 0;
    json_t *id = json_object_get(in, "id"), *out = json_object();
    json_object_set(out, "id", id ? id : json_null());
    TokIds ids = {0};
    TokBuf text = {0};
    ChatMessage *msgs = NULL;
    if (!strcmp(a->mode, "encode")) {
        json_t *t = json_object_get(in, "text");
        if (!json_is_string(t)) { rc = err_set(err, ERR_DECODE, "\"text\": expected a string"); goto out; }
        if ((rc = tokenizer_encode(tok, json_string_value(t), json_string_length(t), &ids, err)) < 0) goto out;
        json_object_set_new(out, "ids", ids_json(ids.v, ids.n));
    } else if (!strcmp(a->mode, "decode")) {
        json_t *arr = json_object_get(in, "ids");
        if (!json_is_array(arr)) { rc = err_set(err, ERR_DECODE, "\"ids\": expected an array"); goto out; }
        for (size_t i = 0; i < json_array_size(arr); i++) {
            json_t *v = json_array_get(arr, i);
            if (!json_is_integer(v) || json_integer_value(v) < INT32_MIN || json_integer_value(v) > INT32_MAX) {
                rc = err_set(err, ERR_DECODE, "\"ids\"[%zu]: expected a 32-bit integer", i);
                goto out;
            }
            tok_ids_push(&ids, (int32_t)json_integer_value(v));
        }
        tokenizer_decode(tok, ids.v, ids.n, a->skip_special, &text);
        json_object_set_new(out, "text", json_stringn(text.v, text.n));
    } else {
        json_t *arr = json_object_get(in, "messages");
        if (!json_is_array(arr)) { rc = err_set(err, ERR_DECODE, "\"messages\": expected an array"); goto out; }
        size_t n = json_array_size(arr);
        msgs = xcalloc(n ? n : 1, sizeof *msgs);
        for (size_t i = 0; i < n; i++) {
            json_t *m = json_array_get(arr, i), *r = json_object_get(m, "role"), *c = json_object_get(m, "content");
            if (!json_is_string(r) || !json_is_string(c)) {
                rc = err_set(err, ERR_DECODE, "\"messages\"[%zu]: expected {\"role\": string, \"content\": string}", i);
                goto out;
            }
            msgs[i] = (ChatMessage){ json_string_value(r), json_string_value(c), json_string_length(c) };
        }
        const char *bos = tokenizer_bos_text(tok);
        if ((rc = chat_render(fam, bos[0] ? bos : NULL, msgs, n, a->gen_prompt, &text, err)) < 0) goto out;
        if ((rc = tokenizer_encode(tok, text.v, text.n, &ids, err)) < 0) goto out;
        json_object_set_new(out, "text", json_stringn(text.v, text.n));
        json_object_set_new(out, "ids", ids_json(ids.v, ids.n));
    }
out:
    if (rc == 0 && emit(out) < 0) rc = err_set(err, ERR_IO, "stdout: write failed");
    else if (rc < 0) json_decref(out);
    xfree(msgs);
    tok_ids_free(&ids);
    tok_buf_free(&text);
    json_decref(in);
    return rc;
}

static int run_stream(Tokenizer *tok, const Args *a, ChatFamily fam) {
    char *line = NULL, err[ERR_LEN];
    size_t cap = 0;
    ssize_t len;
    long lineno = 0;
    int status = 0;
    while ((len = getline(&line, &cap, stdin)) >= 0) {
        lineno++;
        if (len == 0 || (len == 1 && line[0] == '\n')) continue;
        int rc = do_line(tok, a, fam, line, (size_t)len, err);
        if (rc == ERR_IO) { fprintf(stderr, "dapo-tokenize: %s\n", err); status = 1; break; }
        if (rc < 0) { fprintf(stderr, "stdin:%ld: %s\n", lineno, err); status = 1; }
    }
    free(line);
    return fflush(stdout) == 0 ? status : 1;
}

static int run_dataset(Tokenizer *tok, const Args *a) {
    char err[ERR_LEN];
    DatasetOptions o;
    if (dataset_options_init(&o, a->max_prompt_length, a->filter_overlong, a->truncation, a->template_name,
                             a->on_malformed, tok, err) < 0) {
        fprintf(stderr, "dapo-tokenize: %s\n", err);
        return 2;
    }
    Dataset ds = {0};
    int rc = dataset_load(&ds, a->dataset, tok, &o, err);
    for (size_t i = 0; i < ds.n; i++) {
        const DatasetItem *it = &ds.items[i];
        json_t *j = json_pack("{s:I, s:I, s:s, s:s, s:i}", "line", (json_int_t)it->line, "index",
                              (json_int_t)it->index, "data_source", it->data_source, "ground_truth",
                              it->ground_truth, "n_ids_full", it->n_ids_full);
        if (!j) { rc = ERR_DECODE; snprintf(err, sizeof err, "line %ld: not valid UTF-8", it->line); break; }
        json_object_set_new(j, "ids", ids_json(it->ids, (size_t)it->n_ids));
        if (emit(j) < 0) { rc = err_set(err, ERR_IO, "stdout: write failed"); break; }
    }
    fprintf(stderr, "dapo-tokenize: %zu prompts, %zu malformed, %zu filtered, %zu truncated\n", ds.n,
            ds.n_malformed, ds.n_filtered, ds.n_truncated);
    dataset_free(&ds);
    if (rc < 0) fprintf(stderr, "dapo-tokenize: %s\n", err);
    return rc < 0 || fflush(stdout) != 0 ? 1 : 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static int run_bench(Tokenizer *tok, const Args *a) {
    FILE *f = fopen(a->bench, "rb");
    if (!f) { perror(a->bench); return 2; }
    char *line = NULL, err[ERR_LEN];
    size_t cap = 0, ntext = 0, bytes = 0, tcap = 0;
    char **texts = NULL;
    size_t *lens = NULL;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) >= 0) {
        json_t *j = json_loadb(line, (size_t)len, JSON_ALLOW_NUL, NULL);
        json_t *t = json_object_get(j, "text");
        if (json_is_string(t)) {
            if (ntext == tcap) {
                tcap = tcap ? tcap * 2 : 1024;
                texts = xrealloc(texts, tcap * sizeof *texts);
                lens = xrealloc(lens, tcap * sizeof *lens);
            }
            lens[ntext] = json_string_length(t);
            texts[ntext] = xmalloc(lens[ntext] + 1);
            memcpy(texts[ntext], json_string_value(t), lens[ntext] + 1);
            bytes += lens[ntext++];
        }
        json_decref(j);
    }
    free(line);
    fclose(f);
    const char *core = openblas_get_corename();
    printf("openblas kernel: %s (OPENBLAS_CORETYPE=%s; not used by the tokenizer)\n", core ? core : "?",
           getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "unset");
    printf("ours: %zu texts, %.2f MB, %d reps, one thread, encode one text at a time\n", ntext, bytes / 1e6, a->reps);
    double *mbps = xcalloc((size_t)a->reps, sizeof *mbps);
    TokIds ids = {0};
    size_t ntok = 0;
    int status = 0;
    tokenizer_cache_clear(tok);
    for (int r = 0; r < a->reps && status == 0; r++) {
        ntok = 0;
        double t0 = now_s();
        for (size_t i = 0; i < ntext; i++) {
            ids.n = 0;
            if (tokenizer_encode(tok, texts[i], lens[i], &ids, err) < 0) { fprintf(stderr, "%s\n", err); status = 1; break; }
            ntok += ids.n;
        }
        double dt = now_s() - t0;
        mbps[r] = bytes / 1e6 / dt;
        printf("ours rep %d: %.3f s, %.2f MB/s, %zu tokens%s\n", r, dt, mbps[r], ntok, r == 0 ? " (cold cache)" : "");
    }
    qsort(mbps, (size_t)a->reps, sizeof *mbps, cmp_double);
    if (status == 0) printf("ours_mbps=%.3f tokens=%zu\n", mbps[a->reps / 2], ntok);
    for (size_t i = 0; i < ntext; i++) xfree(texts[i]);
    xfree(texts); xfree(lens); xfree(mbps);
    tok_ids_free(&ids);
    return status;
}

int main(int argc, char **argv) {
    log_init("dapo-tokenize", LL_INFO);
    Args a = { .mode = "encode", .template_name = "auto", .truncation = "error", .on_malformed = "skip",
               .gen_prompt = true, .max_prompt_length = 0, .reps = 5 };
    static const struct option opts[] = {
        { "tokenizer", required_argument, 0, 't' }, { "decode", no_argument, 0, 'd' },
        { "chat", no_argument, 0, 'c' }, { "template", required_argument, 0, 'T' },
        { "skip-special", no_argument, 0, 's' }, { "no-generation-prompt", no_argument, 0, 'G' },
        { "dataset", required_argument, 0, 'D' }, { "max-prompt-length", required_argument, 0, 'L' },
        { "filter-overlong", no_argument, 0, 'F' }, { "truncation", required_argument, 0, 'R' },
        { "on-malformed", required_argument, 0, 'M' }, { "bench", required_argument, 0, 'B' },
        { "reps", required_argument, 0, 'N' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
    };
    int c, decode = 0, chat = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 't': a.tok_dir = optarg; break;
        case 'd': a.mode = "decode"; decode = 1; break;
        case 'c': a.mode = "chat"; chat = 1; break;
        case 'T': a.template_name = optarg; break;
        case 's': a.skip_special = true; break;
        case 'G': a.gen_prompt = false; break;
        case 'D': a.dataset = optarg; break;
        case 'L':
            if (parse_int_flag("--max-prompt-length", optarg, 0, 1 << 30, "tokens >= 0 (0: no limit)",
                               &a.max_prompt_length)) return 2;
            break;
        case 'F': a.filter_overlong = true; break;
        case 'R': a.truncation = optarg; break;
        case 'M': a.on_malformed = optarg; break;
        case 'B': a.bench = optarg; break;
        case 'N':
            if (parse_int_flag("--reps", optarg, 1, 1000000, "a count >= 1", &a.reps)) return 2;
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (decode + chat + (a.dataset != NULL) + (a.bench != NULL) > 1) {
        fprintf(stderr, "dapo-tokenize: --decode, --chat, --dataset and --bench are different modes: give at most "
                        "one\n");
        return 2;
    }
    if (!a.tok_dir) { usage(stderr); fprintf(stderr, "dapo-tokenize: --tokenizer DIR is required\n"); return 2; }
    if (optind != argc) { usage(stderr); fprintf(stderr, "dapo-tokenize: unexpected argument '%s'\n", argv[optind]); return 2; }
    char err[ERR_LEN];
    Tokenizer *tok = tokenizer_load(a.tok_dir, err);
    if (!tok) { fprintf(stderr, "dapo-tokenize: %s\n", err); return 2; }
    int status;
    ChatFamily fam = CHAT_NONE;
    if (a.bench) status = run_bench(tok, &a);
    else if (a.dataset) status = run_dataset(tok, &a);
    else if (!strcmp(a.mode, "chat") && chat_family_resolve(a.template_name, tok, &fam, err) < 0) {
        fprintf(stderr, "dapo-tokenize: %s\n", err);
        status = 2;
    } else status = run_stream(tok, &a, fam);
    tokenizer_free(tok);
    return status;
}
