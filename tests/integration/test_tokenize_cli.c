/* tests/integration/test_tokenize_cli.c: the dapo-tokenize binary ($DAPO_BUILD/bin/dapo-tokenize) end to end:
 * encode (ids equal the reference examples), decode (text back, skip-special), chat (Qwen3 render and ids),
 * dataset (one JSON line per prompt), a bad input line (reported with its line number, exit status 1),
 * a missing tokenizer directory (exit status 2), and refused flag values / mode combinations (exit status 2). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../unit/tok_fixture.h"

static char g_dir[64];

static const char *bin(void) {
    static char b[4096];
    const char *build = getenv("DAPO_BUILD");
    snprintf(b, sizeof b, "%s/%s/bin/dapo-tokenize", tf_root(), build && *build ? build : "build");
    return b;
}

static const char *tmp(const char *name) {
    static char p[4][256];
    static int k;
    k = (k + 1) & 3;
    snprintf(p[k], sizeof p[k], "%s/%s", g_dir, name);
    return p[k];
}

static void write_file(const char *path, const char *s) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(s, f);
    assert_int_equal(fclose(f), 0);
}

/* Runs dapo-tokenize ARGS < in > out 2> err; returns the exit status. */
static int run(const char *args, const char *in) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' --tokenizer '%s' %s < '%s' > '%s' 2> '%s'", bin(), tf_path("data/tokenizers/qwen3"),
             args, in, tmp("out"), tmp("err"));
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int setup(void **state) {
    (void)state;
    strcpy(g_dir, "/tmp/dapo-tokcli-XXXXXX");
    if (!mkdtemp(g_dir)) return -1;
    if (access(bin(), X_OK) != 0) { fprintf(stderr, "missing %s\n", bin()); return -1; }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static json_t *out_line(int k) {
    size_t len;
    char *buf = tf_read(tmp("out"), &len);
    assert_non_null(buf);
    char *p = buf;
    for (int i = 0; i < k && p; i++) {
        p = strchr(p, '\n');
        if (p) p++;
    }
    assert_non_null(p);
    json_t *o = json_loads(p, JSON_DISABLE_EOF_CHECK, NULL);
    xfree(buf);
    assert_non_null(o);
    return o;
}

static void test_encode_decode_roundtrip(void **state) {
    (void)state;
    write_file(tmp("in"), "{\"id\": \"a\", \"text\": \"Hello, my dog is cute\"}\n"
                          "{\"id\": 7, \"text\": \"<|im_start|>user\\nhi<|im_end|>\\n<|im_start|>assistant\\n\"}\n");
    assert_int_equal(run("", tmp("in")), 0);
    json_t *o = out_line(0);
    assert_string_equal(json_string_value(json_object_get(o, "id")), "a");
    static const int want[] = { 9707, 11, 847, 5562, 374, 18838 };
    json_t *ids = json_object_get(o, "ids");
    assert_int_equal(json_array_size(ids), 6);
    for (int i = 0; i < 6; i++) assert_int_equal(json_integer_value(json_array_get(ids, (size_t)i)), want[i]);
    json_decref(o);
    o = out_line(1);
    assert_int_equal(json_integer_value(json_object_get(o, "id")), 7);
    assert_int_equal(json_array_size(json_object_get(o, "ids")), 9);
    json_decref(o);
    /* decode what we wrote */
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", tmp("out"), tmp("ids"));
    assert_int_equal(system(cmd), 0);
    assert_int_equal(run("--decode", tmp("ids")), 0);
    o = out_line(1);
    assert_string_equal(json_string_value(json_object_get(o, "text")), "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    json_decref(o);
    assert_int_equal(run("--decode --skip-special", tmp("ids")), 0);
    o = out_line(1);
    assert_string_equal(json_string_value(json_object_get(o, "text")), "user\nhi\nassistant\n");
    json_decref(o);
}

static void test_chat_and_bad_lines(void **state) {
    (void)state;
    write_file(tmp("chat"), "{\"id\": 1, \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n"
                            "{\"id\": 2, \"messages\": 5}\n"
                            "not json\n");
    assert_int_equal(run("--chat", tmp("chat")), 1);
    json_t *o = out_line(0);
    assert_string_equal(json_string_value(json_object_get(o, "text")), "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    assert_int_equal(json_array_size(json_object_get(o, "ids")), 9);
    json_decref(o);
    size_t len;
    char *err = tf_read(tmp("err"), &len);
    assert_non_null(err);
    assert_non_null(strstr(err, "stdin:2:"));
    assert_non_null(strstr(err, "stdin:3:"));
    xfree(err);
    assert_int_equal(run("--chat --template qwen2.5 --no-generation-prompt", tmp("chat")), 1);
    o = out_line(0);
    assert_string_equal(json_string_value(json_object_get(o, "text")),
                        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
                        "<|im_start|>user\nhi<|im_end|>\n");
    json_decref(o);
}

static void test_dataset_mode(void **state) {
    (void)state;
    char args[4200];
    snprintf(args, sizeof args, "--dataset '%s' --max-prompt-length 120 --filter-overlong", tf_path("data/aime-2024.jsonl"));
    assert_int_equal(run(args, "/dev/null"), 0);
    size_t len;
    char *out = tf_read(tmp("out"), &len);
    assert_non_null(out);
    long lines = 0;
    for (size_t i = 0; i < len; i++) lines += out[i] == '\n';
    xfree(out);
    char *err = tf_read(tmp("err"), &len);
    long n = -1, filtered = -1;
    const char *p = strstr(err, "dapo-tokenize: ");
    assert_non_null(p);
    assert_int_equal(sscanf(p, "dapo-tokenize: %ld prompts, %*d malformed, %ld filtered", &n, &filtered), 2);
    xfree(err);
    assert_int_equal(lines, n);
    assert_int_equal(n + filtered, 30);
    assert_true(filtered > 0);
    json_t *o = out_line(0);
    assert_string_equal(json_string_value(json_object_get(o, "data_source")), "math_dapo");
    assert_true(json_array_size(json_object_get(o, "ids")) <= 120);
    json_decref(o);
}

static void test_missing_tokenizer(void **state) {
    (void)state;
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' --tokenizer /nonexistent-dir < /dev/null > /dev/null 2> '%s'", bin(), tmp("err"));
    int st = system(cmd);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 2);
    size_t len;
    char *err = tf_read(tmp("err"), &len);
    assert_non_null(strstr(err, "/nonexistent-dir/tokenizer.json"));
    xfree(err);
}

/* Bad flag values and conflicting modes are refused (exit 2) with a message naming them; --help says the input is
 * JSONL and which fields each mode reads. */
static void test_bad_flags(void **state) {
    (void)state;
    static const struct { const char *args, *want; } bad[] = {
        {"--dataset /dev/null --max-prompt-length -1", "--max-prompt-length: want tokens >= 0 (0: no limit), got '-1'"},
        {"--dataset /dev/null --max-prompt-length 12x", "--max-prompt-length: want tokens >= 0"},
        {"--bench /dev/null --reps 0", "--reps: want a count >= 1, got '0'"},
        {"--decode --chat", "--decode, --chat, --dataset and --bench are different modes: give at most one"},
        {"--chat --dataset /dev/null", "give at most one"},
        {"extra-arg", "unexpected argument 'extra-arg'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = run(bad[i].args, "/dev/null");
        size_t len;
        char *err = tf_read(tmp("err"), &len);
        assert_non_null(err);
        if (rc != 2 || !strstr(err, bad[i].want))
            fail_msg("'%s': exit %d, stderr \"%s\" lacks \"%s\"", bad[i].args, rc, err, bad[i].want);
        xfree(err);
    }
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' -h 2>/dev/null > '%s'", bin(), tmp("out"));    /* -h as --help: stdout, 0 */
    int st = system(cmd);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    size_t hlen;
    char *hout = tf_read(tmp("out"), &hlen);
    assert_non_null(hout);
    assert_non_null(strstr(hout, "usage: dapo-tokenize"));
    xfree(hout);
    snprintf(cmd, sizeof cmd, "'%s' --help > '%s' 2>&1", bin(), tmp("out"));
    st = system(cmd);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    size_t len;
    char *out = tf_read(tmp("out"), &len);
    assert_non_null(out);
    assert_non_null(strstr(out, "Reads JSONL on stdin"));
    assert_non_null(strstr(out, "{\"id\": any, \"text\": str}"));
    assert_non_null(strstr(out, "\"messages\""));
    xfree(out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_flags),
        cmocka_unit_test(test_encode_decode_roundtrip),
        cmocka_unit_test(test_chat_and_bad_lines),
        cmocka_unit_test(test_dataset_mode),
        cmocka_unit_test(test_missing_tokenizer),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
