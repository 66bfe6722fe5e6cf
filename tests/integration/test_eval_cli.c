/* tests/integration/test_eval_cli.c: dapo-eval end to end on a freshly initialised tiny model (configs/tiny-model,
 * data/tokenizers/tiny).
 *   - AIME 2024 the DAPO way: 30 problems x 32 samples; the table states avg@32 over 960 samples and the JSON has
 *     960 samples, avg@32 = mean@32 and pass@1..32;
 *   - a --data file of dapo-gen-arith problems, half of them with ground truth "[INVALID]" (math_dapo's prediction
 *     for a response without an answer, which a random model always gives, so those samples score correct): the JSON's
 *     mean@4, maj@4 and pass@1/2/4 equal the values recomputed here from the --samples dump (pass@k with exact
 *     binomials), and every dumped sample's acc follows its ground truth;
 *   - the prompt-length limit drops (never cuts) long prompts and counts them: prompts + dropped = 30;
 *   - bad arguments, a missing file, an unwritable --output (before any work) and a benchmark with no prompt left
 *     exit 1 naming what is wrong. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>

#include "tests/testutil.h"

static char g_dir[512];

static int setup(void **state) {
    (void)state;
    snprintf(g_dir, sizeof g_dir, "%s/test-logs/eval-cli", tu_build());
    char cmd[6000], bin[300], gen[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s && %s --config %s/configs/tiny-model/config.json --tokenizer "
             "%s/data/tokenizers/tiny --out %s/model > %s/init.log 2>&1 && %s --split test --n 12 > %s/arith.jsonl",
             g_dir, g_dir, tu_bin(bin, sizeof bin, "dapo-init-model"), tu_root(), tu_root(), g_dir, g_dir,
             tu_bin(gen, sizeof gen, "dapo-gen-arith"), g_dir);
    if (system(cmd)) return -1;
    /* problems 0, 2, 4, ...: ground truth "[INVALID]" */
    snprintf(cmd, sizeof cmd, "sed -i -e '1~2s/\"ground_truth\":\"[^\"]*\"/\"ground_truth\":\"[INVALID]\"/' %s/arith.jsonl",
             g_dir);
    return system(cmd) ? -1 : 0;
}

static int eval(const char *args, char *out, size_t n) {
    char bin[300], cmd[4000];
    snprintf(cmd, sizeof cmd, "%s --model %s/model --data-dir %s/data --threads 2 %s 2>&1",
             tu_bin(bin, sizeof bin, "dapo-eval"), g_dir, tu_root(), args);
    return tu_run(cmd, out, n);
}

static json_t *bench_json(const char *file, const char *name) {
    json_error_t je;
    json_t *j = json_load_file(file, 0, &je);
    if (!j) fail_msg("%s: %s", file, je.text);
    json_t *b = json_incref(json_object_get(json_object_get(j, "benchmarks"), name));
    json_decref(j);
    if (!b) fail_msg("%s: no benchmark %s", file, name);
    return b;
}

static double getn(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    if (!json_is_number(v)) fail_msg("no number '%s'", k);
    return json_number_value(v);
}

static void test_aime_960_samples(void **state) {
    (void)state;
    static char out[1 << 16];
    char args[1000], jpath[600];
    snprintf(jpath, sizeof jpath, "%s/aime.json", g_dir);
    snprintf(args, sizeof args, "--benchmarks aime2024 --max-tokens 8 --output %s", jpath);
    if (eval(args, out, sizeof out)) fail_msg("dapo-eval failed:\n%s", out);
    if (!strstr(out, "AIME 2024 avg@32 over 960 samples (30 problems x 32)")) fail_msg("output:\n%s", out);
    json_t *b = bench_json(jpath, "aime2024");
    assert_int_equal((int)getn(b, "samples"), 960);
    assert_int_equal((int)getn(b, "prompts"), 30);
    assert_int_equal((int)getn(b, "dropped_overlong_prompts"), 0);
    assert_int_equal((int)getn(b, "n"), 32);
    assert_true(getn(b, "temperature") == 1.0 && getn(b, "top_p") == 0.7);           /* DAPO's eval_aime24.py */
    assert_true(getn(b, "avg@32") == getn(b, "mean@32"));
    json_t *pass = json_object_get(b, "pass");
    const char *ks[] = {"pass@1", "pass@2", "pass@4", "pass@8", "pass@16", "pass@32"};
    for (int i = 0; i < 6; i++) assert_true(json_is_number(json_object_get(pass, ks[i])));
    assert_int_equal(json_object_size(pass), 6);
    json_decref(b);
}

/* C(n, k) as a double (small n). */
static double binom(int n, int k) {
    if (k < 0 || k > n) return 0;
    double r = 1;
    for (int i = 1; i <= k; i++) r = r * (n - k + i) / i;
    return r;
}

static void test_metrics_match_samples(void **state) {
    (void)state;
    static char out[1 << 16];
    char args[2400], jpath[600], spath[600];
    snprintf(jpath, sizeof jpath, "%s/arith.json", g_dir);
    snprintf(spath, sizeof spath, "%s/arith-samples.jsonl", g_dir);
    snprintf(args, sizeof args, "--data %s/arith.jsonl --k 4 --max-tokens 16 --output %s --samples %s", g_dir, jpath,
             spath);
    if (eval(args, out, sizeof out)) fail_msg("dapo-eval failed:\n%s", out);
    /* recompute from the dump: per problem the correct count and the majority vote (ties: the earliest) */
    int correct[12] = {0}, seen[12] = {0}, maj_ok[12] = {0};
    char preds[12][4][64];
    int accs[12][4];
    FILE *f = fopen(spath, "r");
    assert_non_null(f);
    char line[1 << 14];
    int lines = 0;
    while (fgets(line, sizeof line, f)) {
        json_t *o = json_loads(line, JSON_ALLOW_NUL, NULL);     /* a sampled response may hold a NUL */
        if (!o) fail_msg("%s: not JSON: %.200s", spath, line);
        int i = (int)json_integer_value(json_object_get(o, "index")), j = (int)json_integer_value(json_object_get(o, "sample"));
        assert_true(i >= 0 && i < 12 && j >= 0 && j < 4);
        int acc = json_is_true(json_object_get(o, "acc"));
        const char *gt = json_string_value(json_object_get(o, "ground_truth"));
        const char *pred = json_string_value(json_object_get(o, "pred"));
        if (!strcmp(gt, "[INVALID]")) assert_int_equal(acc, pred && !strcmp(pred, "[INVALID]"));
        snprintf(preds[i][j], sizeof preds[i][j], "%s", pred ? pred : "");
        accs[i][j] = acc;
        correct[i] += acc;
        seen[i]++;
        lines++;
        json_decref(o);
    }
    fclose(f);
    assert_int_equal(lines, 48);
    double mean = 0, maj = 0, pass[3] = {0};
    const int ks[3] = {1, 2, 4};
    int mixed = 0;
    for (int i = 0; i < 12; i++) {
        assert_int_equal(seen[i], 4);
        mean += correct[i] / 4.0;
        int best = 0, bestc = 0;
        for (int j = 0; j < 4; j++) {
            int c = 0;
            for (int q = 0; q < 4; q++) c += !strcmp(preds[i][j], preds[i][q]);
            if (c > bestc) { bestc = c; best = j; }
        }
        maj_ok[i] = accs[i][best];
        maj += maj_ok[i];
        for (int t = 0; t < 3; t++) pass[t] += 1 - binom(4 - correct[i], ks[t]) / binom(4, ks[t]);
        mixed += correct[i] > 0;
    }
    assert_true(mixed >= 3 && mixed < 12);          /* the "[INVALID]" half scores, the rest does not */
    json_t *b = bench_json(jpath, "arith");
    assert_true(fabs(getn(b, "mean@4") - mean / 12) < 1e-9);
    assert_true(fabs(getn(b, "maj@4") - maj / 12) < 1e-9);
    json_t *p = json_object_get(b, "pass");
    assert_true(fabs(getn(p, "pass@1") - pass[0] / 12) < 1e-9);
    assert_true(fabs(getn(p, "pass@2") - pass[1] / 12) < 1e-9);
    assert_true(fabs(getn(p, "pass@4") - pass[2] / 12) < 1e-9);
    assert_int_equal(json_object_size(p), 3);
    json_decref(b);
}

static void test_dropped_prompts_and_bad_input(void **state) {
    (void)state;
    static char out[1 << 16];
    char args[2400], jpath[600];
    snprintf(jpath, sizeof jpath, "%s/aime-short.json", g_dir);
    snprintf(args, sizeof args, "--benchmarks aime2024 --aime-n 2 --max-tokens 4 --max-prompt-length 250 --output %s",
             jpath);
    if (eval(args, out, sizeof out)) fail_msg("dapo-eval failed:\n%s", out);
    json_t *b = bench_json(jpath, "aime2024");
    int prompts = (int)getn(b, "prompts"), dropped = (int)getn(b, "dropped_overlong_prompts");
    assert_true(dropped > 0);
    assert_int_equal(prompts + dropped, 30);
    assert_int_equal((int)getn(b, "samples"), 2 * prompts);
    json_decref(b);
    assert_int_equal(eval("--benchmarks nope", out, sizeof out), 1);
    assert_non_null(strstr(out, "--benchmarks: unknown 'nope'"));
    assert_int_equal(eval("--data /nonexistent/x.jsonl", out, sizeof out), 1);
    assert_non_null(strstr(out, "/nonexistent/x.jsonl"));
    assert_int_equal(eval("--k 0", out, sizeof out), 1);
    assert_non_null(strstr(out, "--k: '0' is not a whole number in [1, 4096]"));
    assert_int_equal(eval("--k 2.7", out, sizeof out), 1);
    assert_int_equal(eval("--k", out, sizeof out), 1);
    assert_int_equal(eval("--benchmarks ,", out, sizeof out), 1);
    assert_non_null(strstr(out, "names no benchmark"));
    assert_int_equal(eval("--benchmarks gsm8k,gsm8k", out, sizeof out), 1);
    assert_non_null(strstr(out, "benchmark 'gsm8k' given twice"));
    assert_int_equal(eval("--benchmarks gsm8k --output /proc/no/such/out.json", out, sizeof out), 1);
    assert_non_null(strstr(out, "--output: cannot write /proc/no/such/out.json"));
    assert_null(strstr(out, "gsm8k   "));                                   /* refused before any benchmark ran */
    /* --chat-template: a bad name is refused before any work; a good one is recorded with the results */
    assert_int_equal(eval("--benchmarks gsm8k --chat-template qwen4", out, sizeof out), 1);
    assert_non_null(strstr(out, "--chat-template: data.chat_template: \"qwen4\" is not one of"));
    assert_null(strstr(out, "gsm8k   "));
    snprintf(jpath, sizeof jpath, "%s/arith-none.json", g_dir);
    snprintf(args, sizeof args, "--data %s/arith.jsonl --k 1 --max-tokens 2 --chat-template none --output %s", g_dir,
             jpath);
    if (eval(args, out, sizeof out)) fail_msg("dapo-eval failed:\n%s", out);
    b = bench_json(jpath, "arith");
    assert_string_equal(json_string_value(json_object_get(b, "chat_template")), "none");
    json_decref(b);
    /* every prompt over the limit: an error naming the counts, not a 0.0 score */
    assert_int_equal(eval("--benchmarks aime2024 --aime-n 1 --max-prompt-length 5", out, sizeof out), 1);
    assert_non_null(strstr(out, "no prompt to score (30 dropped over --max-prompt-length 5"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_aime_960_samples),
        cmocka_unit_test(test_metrics_match_samples),
        cmocka_unit_test(test_dropped_prompts_and_bad_input),
    };
    return cmocka_run_group_tests_name("eval_cli", tests, setup, NULL);
}
