/* tools/dapo-verify.c: score JSONL cases with the DAPO math reward (common/reward), one line in, one out.
 *
 *   dapo-verify [--timeout S] [--data-source NAME] [--threads N] < cases.jsonl > scores.jsonl
 *
 * Input, one JSON object per line: {"id": any, "solution": str, "ground_truth": str, "strict_box": bool,
 * "data_source": str (optional, default "math_dapo")}; other fields are ignored. Strings may hold \u0000
 * (jansson JSON_ALLOW_NUL, lengths from json_string_length).
 * Output, in input order: {"id": <same>, "score": 1.0|-1.0, "acc": bool, "pred": str|null}. A line that
 * does not parse or lacks a field gives {"id": <id or null>, "line": N, "error": "...", "score": -1.0,
 * "acc": false, "pred": null} and a warning on stderr (common/core/log.h); the rest continue. A scoring timeout (--timeout,
 * default 1 s per item, as reward_model.timeout_s) gives score -1.0 with "error": "timeout".
 * Blank lines are skipped. Exit status 0 when every line was scored, 1 when any line was an error,
 * 2 on a usage or I/O error.
 * --threads N (default 1) scores blocks of lines on N threads; output order stays the input order.
 * --data-source must be one of reward.c's sources (an unknown one is refused, listing them); a line's own
 * "data_source" that is unknown is scored with the default (math_dapo), as the verifier daemon does.
 * Not here: the overlong penalty (it needs token lengths; the verifier daemon applies it). */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "reward/reward.h"

#define MAX_LINE_BYTES ((size_t)256 << 20)   /* a line longer than this is refused (error object) */
#define BLOCK_LINES 256                        /* lines per threaded block */

typedef struct {
    char  *text;       /* the raw line (owned, getline buffer) */
    size_t len;
    long   lineno;
    char  *out;        /* the output JSON line (owned, from json_dumps), NULL for a skipped blank line */
    bool   failed;
    char   msg[ERR_LEN + 64];   /* stderr message when failed */
} Line;

typedef struct {
    double timeout_s;
    const char *data_source;
} Opts;

static char *error_object(json_t *id, long lineno, const char *msg) {
    json_t *o = json_object();
    json_object_set(o, "id", id ? id : json_null());
    json_object_set_new(o, "line", json_integer(lineno));
    json_object_set_new(o, "error", json_string(msg));
    json_object_set_new(o, "score", json_real(-1.0));
    json_object_set_new(o, "acc", json_false());
    json_object_set_new(o, "pred", json_null());
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return s;
}

/* True when the line holds only JSON whitespace (skipped, no output). */
static bool is_blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n') return false;
    return true;
}

/* Scores one line into ln->out. ws: this thread's workspace. */
static void line_score(Line *ln, RewardWs *ws, const Opts *o) {
    ln->out = NULL;
    ln->failed = false;
    if (is_blank(ln->text, ln->len)) return;
    if (ln->len > MAX_LINE_BYTES) {
        snprintf(ln->msg, sizeof ln->msg, "line %ld: %zu bytes, over the %zu-byte limit", ln->lineno, ln->len,
                 MAX_LINE_BYTES);
        ln->out = error_object(NULL, ln->lineno, "line too long");
        ln->failed = true;
        return;
    }
    json_error_t jerr;
    json_t *root = json_loadb(ln->text, ln->len, JSON_ALLOW_NUL, &jerr);
    json_t *id = root ? json_object_get(root, "id") : NULL;
    const char *why = NULL;
    char whybuf[ERR_LEN + 32];
    if (!root) {
        snprintf(whybuf, sizeof whybuf, "invalid JSON: %s (column %d)", jerr.text, jerr.column);
        why = whybuf;
    } else if (!json_is_object(root)) {
        why = "not a JSON object";
    }
    json_t *sol = NULL, *gt = NULL, *sb = NULL, *ds = NULL;
    if (!why) {
        sol = json_object_get(root, "solution");
        gt = json_object_get(root, "ground_truth");
        sb = json_object_get(root, "strict_box");
        ds = json_object_get(root, "data_source");
        if (!json_is_string(sol)) why = "\"solution\" missing or not a string";
        else if (!json_is_string(gt)) why = "\"ground_truth\" missing or not a string";
        else if (sb && !json_is_boolean(sb) && !json_is_null(sb)) why = "\"strict_box\" not a boolean";
        else if (ds && !json_is_string(ds) && !json_is_null(ds)) why = "\"data_source\" not a string";
    }
    if (why) {
        snprintf(ln->msg, sizeof ln->msg, "line %ld: %s", ln->lineno, why);
        ln->out = error_object(json_is_object(root) ? id : NULL, ln->lineno, why);
        ln->failed = true;
        json_decref(root);
        return;
    }
    const char *source = json_is_string(ds) ? json_string_value(ds) : o->data_source;
    int64_t deadline = o->timeout_s > 0 ? math_dapo_now_ns() + (int64_t)(o->timeout_s * 1e9) : 0;
    RewardResult r;
    int rc = reward_score(ws, source, json_string_value(sol), json_string_length(sol), json_string_value(gt),
                          json_string_length(gt), json_is_true(sb), deadline, &r);
    json_t *out = json_object();
    json_object_set(out, "id", id ? id : json_null());
    json_object_set_new(out, "score", json_real(r.score));
    json_object_set_new(out, "acc", json_boolean(r.acc));
    /* pred is valid UTF-8 (the scorer repairs its input), so json_stringn accepts it; NULs are kept */
    json_object_set_new(out, "pred", r.has_pred ? json_stringn(r.pred, r.pred_len) : json_null());
    if (rc) {
        json_object_set_new(out, "error", json_string(r.err));
        snprintf(ln->msg, sizeof ln->msg, "line %ld: %s", ln->lineno, r.err);
        ln->failed = true;
    }
    ln->out = json_dumps(out, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(out);
    json_decref(root);
    if (!ln->out) {   /* json_stringn refused pred (cannot happen with repaired UTF-8): still answer */
        ln->out = error_object(id, ln->lineno, "could not encode the result");
        ln->failed = true;
    }
}

typedef struct {
    Line *lines;
    size_t n, next;
    pthread_mutex_t mu;
    const Opts *opts;
} Pool;

static void *worker(void *arg) {
    Pool *p = arg;
    RewardWs *ws = reward_ws_new();
    for (;;) {
        pthread_mutex_lock(&p->mu);
        size_t i = p->next++;
        pthread_mutex_unlock(&p->mu);
        if (i >= p->n) break;
        line_score(&p->lines[i], ws, p->opts);
    }
    reward_ws_free(ws);
    return NULL;
}

/* Scores lines[0..n) on `threads` threads (1: inline), then prints them in order. Returns failures. */
static long block_run(Line *lines, size_t n, int threads, RewardWs *ws, const Opts *o) {
    if (threads <= 1 || n < 2) {
        for (size_t i = 0; i < n; i++) line_score(&lines[i], ws, o);
    } else {
        Pool p = { .lines = lines, .n = n, .next = 0, .opts = o };
        pthread_mutex_init(&p.mu, NULL);
        pthread_t tid[64];
        int started = 0;
        for (int t = 0; t < threads && t < 64; t++)
            if (pthread_create(&tid[t], NULL, worker, &p) == 0) started++;
        if (started == 0) worker(&p);   /* no thread could start: score here */
        for (int t = 0; t < started; t++) pthread_join(tid[t], NULL);
        pthread_mutex_destroy(&p.mu);
    }
    long failed = 0;
    for (size_t i = 0; i < n; i++) {
        Line *ln = &lines[i];
        if (ln->failed) {
            log_warn("%s", ln->msg);
            failed++;
        }
        if (ln->out) {
            fputs(ln->out, stdout);
            fputc('\n', stdout);
            free(ln->out);   /* json_dumps memory: jansson's allocator (malloc) */
            ln->out = NULL;
        }
    }
    return failed;
}

static void usage(FILE *f) {
    fprintf(f, "usage: dapo-verify [--timeout SECONDS] [--data-source NAME] [--threads N] < in.jsonl\n"
               "  in:  {\"id\",\"solution\",\"ground_truth\",\"strict_box\"[,\"data_source\"]} per line\n"
               "  out: {\"id\",\"score\",\"acc\",\"pred\"} per line, input order\n");
}

int main(int argc, char **argv) {
    log_init("dapo-verify", LL_INFO);   /* malformed lines are warnings on stderr (DAPO_LOG_LEVEL applies) */
    Opts o = { .timeout_s = 1.0, .data_source = "math_dapo" };
    int threads = 1;
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        if (!strcmp(argv[i], "--timeout") && i + 1 < argc) {
            errno = 0;
            o.timeout_s = strtod(argv[++i], &end);
            if (errno || *end || !(o.timeout_s >= 0) || o.timeout_s > 3600) {
                fprintf(stderr, "dapo-verify: --timeout: want seconds in [0, 3600] (0: none), got %s\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--data-source") && i + 1 < argc) {
            o.data_source = argv[++i];
            if (reward_scorer_find(o.data_source)->is_default) {    /* a typo would silently score as math_dapo */
                size_t n;
                const RewardScorer *t = reward_scorers(&n);
                char known[512] = "";
                size_t len = 0;
                for (size_t k = 0; k < n && len < sizeof known; k++)
                    if (!t[k].is_default)
                        len += (size_t)snprintf(known + len, sizeof known - len, "%s%s%s", len ? ", " : "",
                                                t[k].data_source, t[k].prefix ? "*" : "");
                fprintf(stderr, "dapo-verify: --data-source: unknown data source '%s' (known: %s)\n", o.data_source,
                        known);
                return 2;
            }
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            errno = 0;
            long t = strtol(argv[++i], &end, 10);
            if (errno || *end || t < 1 || t > 64) {
                fprintf(stderr, "dapo-verify: --threads: want 1..64, got %s\n", argv[i]);
                return 2;
            }
            threads = (int)t;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }

    size_t cap = threads > 1 ? BLOCK_LINES : 1;
    Line *lines = xcalloc(cap, sizeof *lines);
    size_t bufcap[BLOCK_LINES] = { 0 };
    RewardWs *ws = reward_ws_new();
    long lineno = 0, failed = 0;
    bool eof = false;
    int rc = 0;
    while (!eof) {
        size_t n = 0;
        while (n < cap) {
            ssize_t got = getline(&lines[n].text, &bufcap[n], stdin);
            if (got < 0) {
                if (ferror(stdin)) {
                    log_error("reading stdin: %s", strerror(errno));
                    rc = 2;
                }
                eof = true;
                break;
            }
            lines[n].len = (size_t)got;
            if (got > 0 && lines[n].text[got - 1] == '\n') lines[n].len--;
            lines[n].lineno = ++lineno;
            n++;
        }
        failed += block_run(lines, n, threads, ws, &o);
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        log_error("writing stdout: %s", strerror(errno));
        rc = 2;
    }
    for (size_t i = 0; i < cap; i++) free(lines[i].text);   /* getline memory */
    xfree(lines);
    reward_ws_free(ws);
    if (rc) return rc;
    return failed ? 1 : 0;
}
