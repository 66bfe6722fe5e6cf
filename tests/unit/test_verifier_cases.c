/* tests/unit/test_verifier_cases.c: every case of tests/data/verifier/cases.jsonl.zst (4,283 inputs with the
 * outputs of DAPO's eval/math_dapo.py under CPython 3.11.7) through the library (reward_score) and through
 * the dapo-verify binary (spawned with the cases on stdin, once single-threaded and once with --threads 2);
 * all three fields (score, acc, exact pred or null) must match for every case, in input order. The same for
 * the 8,000 randomized cases of random_cases.jsonl.zst (outputs of verl 0.8.0's math_dapo, written by
 * tests/reference/make_verifier_random.py). Asserts that no single case takes 50 ms or more in the library
 * (the very_long ones reach 1 MB), and checks dapo-verify's handling of malformed lines.
 * Not here: the rule-by-rule unit tests (test_verifier_rules.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <jansson.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#include "reward/reward.h"
#include "tests/testutil.h"

extern char **environ;

#define N_CASES 4283

#define N_RANDOM 8000

typedef struct {
    json_t **obj;   /* one case object each (owned) */
    size_t   n;
} CaseSet;

static CaseSet g_cases;    /* cases.jsonl.zst: the given corpus */
static CaseSet g_random;   /* random_cases.jsonl.zst: tests/reference/make_verifier_random.py */

static const char *root_dir(void) {
    const char *r = getenv("DAPO_ROOT");
    return r && *r ? r : ".";
}

/* Reads the whole file; xmalloc'd, *n bytes. NULL when it cannot be read. */
static char *file_read(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) != 0) { fclose(f); return NULL; }
    long sz = ftell(f);
    if (sz < 0 || fseek(f, 0, SEEK_SET) != 0) { fclose(f); return NULL; }
    char *buf = xmalloc((size_t)sz + 1);
    size_t got = fread(buf, 1, (size_t)sz, f);
    fclose(f);
    if (got != (size_t)sz) { xfree(buf); return NULL; }
    buf[got] = '\0';
    *n = got;
    return buf;
}

/* Loads tests/data/verifier/<name> (one zstd frame of JSONL) into *set. 0 or -1. */
static int set_load(CaseSet *set, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/data/verifier/%s", root_dir(), name);
    size_t zn = 0;
    char *z = file_read(path, &zn);
    if (!z) { fprintf(stderr, "cannot read %s\n", path); return -1; }
    /* streaming decompression: frames written from a pipe do not record their size */
    size_t rcap = 4 * zn + 65536, got = 0;
    char *raw = xmalloc(rcap + 1);
    ZSTD_DStream *ds = ZSTD_createDStream();
    ZSTD_inBuffer in = { z, zn, 0 };
    size_t zr = 1;
    while (ds && zr != 0) {
        if (got == rcap) raw = xrealloc(raw, (rcap *= 2) + 1);
        ZSTD_outBuffer out = { raw, rcap, got };
        zr = ZSTD_decompressStream(ds, &out, &in);
        got = out.pos;
        if (ZSTD_isError(zr) || (zr != 0 && in.pos == in.size && out.pos < out.size)) break;
    }
    ZSTD_freeDStream(ds);
    xfree(z);
    if (!ds || zr != 0) {
        fprintf(stderr, "%s: zstd: %s\n", path, ds && ZSTD_isError(zr) ? ZSTD_getErrorName(zr) : "truncated");
        xfree(raw);
        return -1;
    }
    size_t cap = 1024;
    set->obj = xmalloc(cap * sizeof *set->obj);
    set->n = 0;
    for (char *p = raw, *end = raw + got; p < end;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) nl = end;
        if (nl > p) {
            json_error_t je;
            json_t *o = json_loadb(p, (size_t)(nl - p), JSON_ALLOW_NUL, &je);
            if (!o) { fprintf(stderr, "%s line %zu: %s\n", name, set->n + 1, je.text); xfree(raw); return -1; }
            if (set->n == cap) set->obj = xrealloc(set->obj, (cap *= 2) * sizeof *set->obj);
            set->obj[set->n++] = o;
        }
        p = nl + 1;
    }
    xfree(raw);
    return 0;
}

static void set_free(CaseSet *set) {
    for (size_t i = 0; i < set->n; i++) json_decref(set->obj[i]);
    xfree(set->obj);
    set->obj = NULL;
    set->n = 0;
}

static int cases_load(void **state) {
    (void)state;
    return set_load(&g_cases, "cases.jsonl.zst") || set_load(&g_random, "random_cases.jsonl.zst") ? -1 : 0;
}

static int cases_free(void **state) {
    (void)state;
    set_free(&g_cases);
    set_free(&g_random);
    return 0;
}

static const char *str_of(json_t *o, const char *k, size_t *n) {
    json_t *v = json_object_get(o, k);
    *n = json_string_length(v);
    return json_string_value(v);
}

/* Compares one result with the case; prints the first mismatches. Returns 1 when it matches. */
static int result_check(json_t *c, double score, bool acc, bool has_pred, const char *pred, size_t pred_len,
                        const char *how, int *printed) {
    json_t *ep = json_object_get(c, "pred");
    double es = json_number_value(json_object_get(c, "score"));
    bool ea = json_is_true(json_object_get(c, "acc"));
    bool ok = es == score && ea == acc;
    if (json_is_null(ep)) ok = ok && !has_pred;
    else ok = ok && has_pred && json_string_length(ep) == pred_len && memcmp(json_string_value(ep), pred, pred_len) == 0;
    if (!ok && (*printed)++ < 20)
        fprintf(stderr, "%s mismatch %s (%s): want score %g acc %d pred %s; got score %g acc %d pred %.*s\n", how,
                json_string_value(json_object_get(c, "id")), json_string_value(json_object_get(c, "category")), es,
                ea, json_is_null(ep) ? "null" : json_string_value(ep), score, acc, has_pred ? (int)pred_len : 4,
                has_pred ? pred : "null");
    return ok;
}

/* Every case of set through reward_score: returns the number that match; asserts no case takes 50 ms. */
static int library_check(const CaseSet *set, const char *what, int *strict) {
    RewardWs *ws = reward_ws_new();
    int matched = 0, printed = 0;
    int64_t worst = 0;
    const char *worst_id = "";
    *strict = 0;
    for (size_t i = 0; i < set->n; i++) {
        json_t *c = set->obj[i];
        size_t sn, gn;
        const char *sol = str_of(c, "solution", &sn), *gt = str_of(c, "ground_truth", &gn);
        bool sb = json_is_true(json_object_get(c, "strict_box"));
        *strict += sb;
        RewardResult r;
        int64_t t0 = math_dapo_now_ns();
        int rc = reward_score(ws, "math_dapo", sol, sn, gt, gn, sb, t0 + (int64_t)1000000000, &r);
        int64_t dt = math_dapo_now_ns() - t0;
        if (dt > worst) worst = dt, worst_id = json_string_value(json_object_get(c, "id"));
        assert_int_equal(rc, 0);
        matched += result_check(c, r.score, r.acc, r.has_pred, r.pred, r.pred_len, what, &printed);
    }
    reward_ws_free(ws);
    fprintf(stderr, "%s: %d/%zu match (%d strict_box); slowest case %s: %.3f ms\n", what, matched, set->n, *strict,
            worst_id, worst / 1e6);
    assert_true(worst < 50 * 1000000LL);
    return matched;
}

static void test_cases_all_match_library(void **state) {
    (void)state;
    int strict;
    assert_int_equal(g_cases.n, N_CASES);
    assert_int_equal(library_check(&g_cases, "library", &strict), N_CASES);
    assert_int_equal(strict, 671);
}

/* 8,000 randomized cases whose expected outputs come from verl 0.8.0's math_dapo (DAPO semantics). */
static void test_random_cases_match_library(void **state) {
    (void)state;
    int strict;
    assert_int_equal(g_random.n, N_RANDOM);
    assert_int_equal(library_check(&g_random, "library (random cases)", &strict), N_RANDOM);
    assert_true(strict > 1000);
}

/* Runs dapo-verify with stdin from in_path and stdout to out_path; returns its exit status or -1. */
static int verify_run(const char *in_path, const char *out_path, const char *threads, const char *err_path,
                      const char *timeout) {
    const char *b = getenv("DAPO_BUILD");
    char bin[4096];
    if (!b || !*b) b = "build";
    if (b[0] == '/') snprintf(bin, sizeof bin, "%s/bin/dapo-verify", b);
    else snprintf(bin, sizeof bin, "%s/%s/bin/dapo-verify", root_dir(), b);
    if (access(bin, X_OK) != 0) { fprintf(stderr, "no executable %s\n", bin); return -1; }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, in_path, O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (err_path) posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    char *argv[] = { bin, "--threads", (char *)threads, timeout ? "--timeout" : NULL, (char *)timeout, NULL };
    pid_t pid;
    int rc = posix_spawn(&pid, bin, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) { fprintf(stderr, "posix_spawn %s: %s\n", bin, strerror(rc)); return -1; }
    int st;
    if (waitpid(pid, &st, 0) != pid) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void binary_check(const CaseSet *set, const char *threads) {
    char dir[] = "/tmp/dapo-verify-test.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char in_path[256], out_path[256];
    snprintf(in_path, sizeof in_path, "%s/in.jsonl", dir);
    snprintf(out_path, sizeof out_path, "%s/out.jsonl", dir);
    FILE *f = fopen(in_path, "wb");
    assert_non_null(f);
    for (size_t i = 0; i < set->n; i++) {   /* only the input fields, as the README's checker sends them */
        json_t *c = set->obj[i], *o = json_object();
        const char *keys[] = { "id", "solution", "ground_truth", "strict_box" };
        for (int k = 0; k < 4; k++) json_object_set(o, keys[k], json_object_get(c, keys[k]));
        assert_int_equal(json_dumpf(o, f, JSON_COMPACT | JSON_PRESERVE_ORDER), 0);
        fputc('\n', f);
        json_decref(o);
    }
    assert_int_equal(fclose(f), 0);
    assert_int_equal(verify_run(in_path, out_path, threads, NULL, NULL), 0);

    size_t n = 0;
    char *out = file_read(out_path, &n);
    assert_non_null(out);
    size_t i = 0;
    int matched = 0, printed = 0;
    for (char *p = out, *end = out + n; p < end && i < set->n; i++) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) nl = end;
        json_error_t je;
        json_t *o = json_loadb(p, (size_t)(nl - p), JSON_ALLOW_NUL, &je);
        assert_non_null(o);
        json_t *c = set->obj[i], *pr = json_object_get(o, "pred");
        assert_string_equal(json_string_value(json_object_get(o, "id")), json_string_value(json_object_get(c, "id")));
        assert_true(json_is_real(json_object_get(o, "score")) && json_is_boolean(json_object_get(o, "acc")));
        assert_true(json_is_null(pr) || json_is_string(pr));
        matched += result_check(c, json_number_value(json_object_get(o, "score")), json_is_true(json_object_get(o, "acc")),
                                json_is_string(pr), json_string_value(pr), json_string_length(pr), "dapo-verify",
                                &printed);
        json_decref(o);
        p = nl + 1;
    }
    xfree(out);
    unlink(in_path);
    unlink(out_path);
    rmdir(dir);
    fprintf(stderr, "dapo-verify --threads %s: %d/%zu match\n", threads, matched, set->n);
    assert_int_equal(i, set->n);
    assert_int_equal(matched, (int)set->n);
}

static void test_cases_all_match_binary(void **state) {
    (void)state;
    assert_int_equal(g_cases.n, N_CASES);
    binary_check(&g_cases, "1");
}

static void test_cases_all_match_binary_threaded(void **state) {
    (void)state;
    assert_int_equal(g_cases.n, N_CASES);
    binary_check(&g_cases, "2");
}

static void test_random_cases_match_binary(void **state) {
    (void)state;
    assert_int_equal(g_random.n, N_RANDOM);
    binary_check(&g_random, "2");
}

/* --data-source names a known source or is refused (exit 2) with the list of known ones. */
static void test_binary_unknown_data_source(void **state) {
    (void)state;
    const char *b = getenv("DAPO_BUILD");
    char cmd[4600], out[2048];
    if (!b || !*b) b = "build";
    snprintf(cmd, sizeof cmd, "%s%s%s/bin/dapo-verify --data-source nosuch </dev/null 2>&1", b[0] == '/' ? "" : root_dir(),
             b[0] == '/' ? "" : "/", b);
    assert_int_equal(tu_run(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "unknown data source 'nosuch'"));
    assert_non_null(strstr(out, "known: math_dapo, math500"));
    assert_non_null(strstr(out, "openai/gsm8k"));
    assert_non_null(strstr(out, "aime*"));
    snprintf(cmd, sizeof cmd, "%s%s%s/bin/dapo-verify --data-source aime-2024 </dev/null 2>&1", b[0] == '/' ? "" : root_dir(),
             b[0] == '/' ? "" : "/", b);
    assert_int_equal(tu_run(cmd, out, sizeof out), 0);          /* a prefix source is known */
    /* --help / -h: the usage on stdout, exit 0; a wrong flag: the usage on stderr, exit 2. */
    const char *flags[] = { "--help", "-h", "--bogus" };
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd, "%s%s%s/bin/dapo-verify %s </dev/null 2>/dev/null", b[0] == '/' ? "" : root_dir(),
                 b[0] == '/' ? "" : "/", b, flags[i]);
        assert_int_equal(tu_run(cmd, out, sizeof out), i < 2 ? 0 : 2);
        if (i < 2) assert_non_null(strstr(out, "usage: dapo-verify"));
        else assert_string_equal(out, "");
    }
}

/* Malformed lines get an error object (their id, or null, and the line number) in order, a message on
 * stderr, exit status 1; the other lines are scored; \u0000 survives both ways; blank lines are skipped. */
static void test_binary_malformed_lines(void **state) {
    (void)state;
    static const char input[] =
        "{\"id\":\"a\",\"solution\":\"Answer: 5\",\"ground_truth\":\"5\",\"strict_box\":false}\n"
        "not json\n"
        "{\"id\":\"c\",\"ground_truth\":\"5\"}\n"
        "\n"
        "{\"id\":\"d\",\"solution\":\"Answer: 4\\u00002\",\"ground_truth\":\"4\\u00002\",\"strict_box\":false}\n"
        "{\"id\":7,\"solution\":\"\\\\boxed{1}\",\"ground_truth\":\"1\",\"strict_box\":\"yes\"}\n"
        "[1,2]\n"
        "{\"id\":\"e\",\"solution\":\"x\",\"ground_truth\":\"1\",\"strict_box\":true}\n"
        "{\"id\":\"f\",\"solution\":\"Answer: 5\",\"ground_truth\":\"5\",\"data_source\":\"openai/gsm8k\"}";
    char dir[] = "/tmp/dapo-verify-bad.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char in_path[256], out_path[256], err_path[256];
    snprintf(in_path, sizeof in_path, "%s/in.jsonl", dir);
    snprintf(out_path, sizeof out_path, "%s/out.jsonl", dir);
    snprintf(err_path, sizeof err_path, "%s/err.txt", dir);
    FILE *f = fopen(in_path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(input, 1, sizeof input - 1, f), sizeof input - 1);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(verify_run(in_path, out_path, "1", err_path, NULL), 1);

    size_t n = 0, en = 0;
    char *out = file_read(out_path, &n), *errs = file_read(err_path, &en);
    assert_non_null(out);
    assert_non_null(errs);
    json_error_t je;
    json_t *all = json_loadb("[]", 2, 0, &je);
    for (char *p = out, *end = out + n; p < end;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) nl = end;
        json_t *o = json_loadb(p, (size_t)(nl - p), JSON_ALLOW_NUL, &je);
        assert_non_null(o);
        json_array_append_new(all, o);
        p = nl + 1;
    }
    assert_int_equal(json_array_size(all), 8);
#define ROW(i) json_array_get(all, i)
#define FIELD(i, k) json_object_get(ROW(i), k)
    assert_string_equal(json_string_value(FIELD(0, "id")), "a");
    assert_true(json_is_true(FIELD(0, "acc")) && json_number_value(FIELD(0, "score")) == 1.0);
    assert_null(FIELD(0, "error"));
    assert_true(json_is_null(FIELD(1, "id")));                 /* not JSON: no id, the line number */
    assert_int_equal(json_integer_value(FIELD(1, "line")), 2);
    assert_non_null(strstr(json_string_value(FIELD(1, "error")), "invalid JSON"));
    assert_true(json_is_false(FIELD(1, "acc")) && json_number_value(FIELD(1, "score")) == -1.0);
    assert_true(json_is_null(FIELD(1, "pred")));
    assert_string_equal(json_string_value(FIELD(2, "id")), "c");   /* missing solution: its id */
    assert_int_equal(json_integer_value(FIELD(2, "line")), 3);
    assert_non_null(strstr(json_string_value(FIELD(2, "error")), "solution"));
    assert_string_equal(json_string_value(FIELD(3, "id")), "d");   /* blank line 4 skipped; NUL kept */
    assert_true(json_is_true(FIELD(3, "acc")));
    assert_int_equal(json_string_length(FIELD(3, "pred")), 3);
    assert_memory_equal(json_string_value(FIELD(3, "pred")), "4\0" "2", 3);
    assert_int_equal(json_integer_value(FIELD(4, "id")), 7);      /* a numeric id is echoed as is */
    assert_non_null(strstr(json_string_value(FIELD(4, "error")), "strict_box"));
    assert_int_equal(json_integer_value(FIELD(4, "line")), 6);
    assert_non_null(strstr(json_string_value(FIELD(5, "error")), "not a JSON object"));
    assert_string_equal(json_string_value(FIELD(6, "id")), "e");   /* strict, no box: pred null */
    assert_true(json_is_null(FIELD(6, "pred")) && json_is_false(FIELD(6, "acc")));
    assert_null(FIELD(6, "error"));
    assert_string_equal(json_string_value(FIELD(7, "id")), "f");   /* no trailing LF, strict_box absent */
    assert_true(json_is_true(FIELD(7, "acc")));
#undef FIELD
#undef ROW
    assert_non_null(strstr(errs, "line 2: invalid JSON"));
    assert_non_null(strstr(errs, "line 3:"));
    assert_non_null(strstr(errs, "line 6:"));
    assert_non_null(strstr(errs, "line 7:"));
    json_decref(all);
    xfree(out);
    xfree(errs);

    /* --timeout 1e-9: every scored line comes back as score -1 with "error": "timeout", exit status 1 */
    assert_int_equal(verify_run(in_path, out_path, "2", err_path, "1e-9"), 1);
    out = file_read(out_path, &n);
    assert_non_null(out);
    json_t *first = json_loadb(out, (size_t)((char *)memchr(out, '\n', n) - out), JSON_ALLOW_NUL, &je);
    assert_non_null(first);
    assert_string_equal(json_string_value(json_object_get(first, "id")), "a");
    assert_string_equal(json_string_value(json_object_get(first, "error")), "timeout");
    assert_true(json_number_value(json_object_get(first, "score")) == -1.0);
    assert_true(json_is_false(json_object_get(first, "acc")) && json_is_null(json_object_get(first, "pred")));
    json_decref(first);
    xfree(out);
    unlink(in_path), unlink(out_path), unlink(err_path);
    rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases_all_match_library),
        cmocka_unit_test(test_cases_all_match_binary),
        cmocka_unit_test(test_cases_all_match_binary_threaded),
        cmocka_unit_test(test_random_cases_match_library),
        cmocka_unit_test(test_random_cases_match_binary),
        cmocka_unit_test(test_binary_malformed_lines),
        cmocka_unit_test(test_binary_unknown_data_source),
    };
    return cmocka_run_group_tests(tests, cases_load, cases_free);
}
