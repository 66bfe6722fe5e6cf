/* tests/integration/test_model_logprobs_cli.c: the dapo-logprobs tool end to end: JSONL in, JSONL out,
 * values equal to the transformers fixture (tests/data/model/qwen2_gqa.fixture.safetensors), bad lines
 * answered with an error line while later lines still get results, output order = input order; exit status 1
 * when any line was an error, 0 when none; --help on stdout with exit 0, a wrong flag exit 2.
 * Runs $DAPO_BUILD/bin/dapo-logprobs (built by make test-build). */
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "backend/backend.h"
#include "io/safetensors.h"
#include "tests/testutil.h"

static void test_cli_matches_fixture(void **state) {
    (void)state;
    const char *root = getenv("DAPO_ROOT"), *build = getenv("DAPO_BUILD");
    if (!root || !*root) root = ".";
    if (!build || !*build) build = "build";
    char fx[4096], model[4096], bin[4096], in[] = "/tmp/dapo_lp_XXXXXX", cmd[12400], err[ERR_LEN];
    snprintf(fx, sizeof fx, "%s/tests/data/model/qwen2_gqa.fixture.safetensors", root);
    snprintf(model, sizeof model, "%s/tests/data/model/qwen2_gqa", root);
    snprintf(bin, sizeof bin, "%s/%s/bin/dapo-logprobs", build[0] == '/' ? "" : root, build);
    if (access(bin, X_OK) != 0) fail_msg("%s not built", bin);
    SafeTensors *st = st_open(fx, err);
    if (!st) fail_msg("%s", err);
    int32_t tok[64], cu[4];
    float logp[64], ent[64];
    int N = (int)st_find(st, "tokens")->numel;
    assert_int_equal(st_read_i32(st, "tokens", tok, N, err), 0);
    assert_int_equal(st_read_i32(st, "cu_seqlens", cu, 4, err), 0);
    assert_int_equal(st_read_f32(st, "logp", logp, N, err), 0);
    assert_int_equal(st_read_f32(st, "entropy", ent, N, err), 0);
    const char *temp = st_metadata(st, "temperature");
    int fd = mkstemp(in);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    for (int s = 0; s < 3; s++) {
        if (s == 1) fprintf(f, "{\"id\": \"bad\", \"input_ids\": [1, 100000]}\n");
        fprintf(f, "{\"id\": %d, \"input_ids\": [", s);
        for (int i = cu[s]; i < cu[s + 1]; i++) fprintf(f, "%s%d", i > cu[s] ? ", " : "", tok[i]);
        fprintf(f, "], \"start\": %d}\n", s == 2 ? 2 : 1);
    }
    fclose(f);
    snprintf(cmd, sizeof cmd, "'%s' --model '%s' --temperature %s < '%s'", bin, model, temp, in);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char line[1 << 16];
    int nline = 0, seq = 0;
    while (fgets(line, sizeof line, p)) {
        json_error_t je;
        json_t *j = json_loads(line, 0, &je);
        assert_non_null(j);
        if (nline == 1) {
            assert_string_equal(json_string_value(json_object_get(j, "id")), "bad");
            assert_non_null(strstr(json_string_value(json_object_get(j, "error")), "input_ids[1]"));
        } else {
            assert_int_equal(json_integer_value(json_object_get(j, "id")), seq);
            int start = seq == 2 ? 2 : 1, n = cu[seq + 1] - cu[seq];
            json_t *lp = json_object_get(j, "logprobs"), *en = json_object_get(j, "entropies");
            assert_int_equal(json_array_size(lp), n - start);
            for (int t = start; t < n; t++) {
                double a = json_real_value(json_array_get(lp, t - start)), r = logp[cu[seq] + t - 1];
                double b = json_real_value(json_array_get(en, t - start)), q = ent[cu[seq] + t - 1];
                assert_true(fabs(a - r) <= 1e-6 + 1e-4 * fabs(r));
                assert_true(fabs(b - q) <= 1e-6 + 1e-4 * fabs(q));
            }
            seq++;
        }
        json_decref(j);
        nline++;
    }
    int st_exit = pclose(p);          /* one line was an error: exit 1 (as dapo-verify), the rest still written */
    assert_true(WIFEXITED(st_exit));
    assert_int_equal(WEXITSTATUS(st_exit), 1);
    assert_int_equal(nline, 4);
    unlink(in);
    st_close(st);
}

static void bin_path(char *bin, size_t n, const char *name) {
    const char *root = getenv("DAPO_ROOT"), *build = getenv("DAPO_BUILD");
    if (!root || !*root) root = ".";
    if (!build || !*build) build = "build";
    snprintf(bin, n, "%s%s%s/bin/%s", build[0] == '/' ? "" : root, build[0] == '/' ? "" : "/", build, name);
    if (access(bin, X_OK) != 0) fail_msg("%s not built", bin);
}

/* Exit status: 0 when every line got results, 1 when every line (or any line) was an error. */
static void test_cli_exit_status(void **state) {
    (void)state;
    const char *root = getenv("DAPO_ROOT");
    if (!root || !*root) root = ".";
    char bin[4096], model[4096], cmd[12400], out[8192];
    bin_path(bin, sizeof bin, "dapo-logprobs");
    snprintf(model, sizeof model, "%s/tests/data/model/qwen2_gqa", root);
    snprintf(cmd, sizeof cmd, "printf '{\"id\": 1, \"input_ids\": [1, 2, 3]}\\n' | '%s' --model '%s' 2>/dev/null", bin,
             model);
    assert_int_equal(tu_run(cmd, out, sizeof out), 0);
    assert_non_null(strstr(out, "\"logprobs\""));
    snprintf(cmd, sizeof cmd, "printf 'not json\\n{\"id\": 2, \"input_ids\": [1]}\\n' | '%s' --model '%s' 2>&1", bin,
             model);
    assert_int_equal(tu_run(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "line is not a JSON object"));
    assert_non_null(strstr(out, "{\"id\":2,\"error\":\"input_ids: expected an array of at least 2 token ids\"}"));
    assert_non_null(strstr(out, "dapo-logprobs: 2 of 2 lines had an error"));
}

/* --help / -h: the usage on stdout, exit 0; a wrong flag: the usage on stderr, exit 2. */
static void test_cli_help(void **state) {
    (void)state;
    char bin[4096], cmd[8400], out[8192];
    bin_path(bin, sizeof bin, "dapo-logprobs");
    const char *help[] = { "--help", "-h", "--model x --help" };
    for (size_t i = 0; i < sizeof help / sizeof help[0]; i++) {
        snprintf(cmd, sizeof cmd, "'%s' %s 2>/dev/null", bin, help[i]);
        assert_int_equal(tu_run(cmd, out, sizeof out), 0);
        assert_non_null(strstr(out, "usage: dapo-logprobs --model DIR"));
        assert_non_null(strstr(out, "1 any line was an error"));
    }
    snprintf(cmd, sizeof cmd, "'%s' --bogus 2>&1 >/dev/null", bin);
    assert_int_equal(tu_run(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "usage: dapo-logprobs --model DIR"));
    snprintf(cmd, sizeof cmd, "'%s' --bogus 2>/dev/null", bin);
    assert_int_equal(tu_run(cmd, out, sizeof out), 2);
    assert_string_equal(out, "");
}

/* trainer.device=cuda on a machine or build without CUDA: every program that loads a model refuses at start
 * (non-zero exit, nothing started) naming what is missing: the build flag in a CPU-only build, the device
 * otherwise. The coordinator computes nothing: it refuses only a build without the CUDA backend (on Kubernetes its
 * pod has no GPU; backend_known). Skipped where CUDA is usable (a GPU machine runs the CUDA path instead). */
static void test_device_cuda_refused(void **state) {
    (void)state;
    char err[ERR_LEN];
    if (backend_select("cuda", err)) skip();
    const char *root = getenv("DAPO_ROOT");
    if (!root || !*root) root = ".";
    char model[4096];
    snprintf(model, sizeof model, "%s/tests/data/model/qwen2_gqa", root);
    const char *prog[][2] = {
        { "dapo-logprobs", "--device cuda --model '%s' < /dev/null" },
        { "dapo-generate", "--device cuda --model '%s' --input /dev/null" },
        { "dapo-learner", "trainer.device=cuda actor_rollout_ref.model.path='%s'" },
        { "dapo-rollout", "trainer.device=cuda actor_rollout_ref.model.path='%s'" },
        { "dapo-sft", "trainer.device=cuda --model '%s' --data /dev/null --out /tmp/dapo-sft-cuda-refused" },
    };
    for (size_t i = 0; i < sizeof prog / sizeof prog[0]; i++) {
        char bin[4096], args[4600], cmd[9000], out[8192];
        bin_path(bin, sizeof bin, prog[i][0]);
        snprintf(args, sizeof args, prog[i][1], model);
        snprintf(cmd, sizeof cmd, "timeout 30 '%s' %s 2>&1", bin, args);
        int rc = tu_run(cmd, out, sizeof out);
        if (rc == 0 || !strstr(out, "trainer.device=cuda") ||
            !(strstr(out, "make CUDA=1") || strstr(out, "no CUDA device")))
            fail_msg("%s: exit %d, output:\n%s", prog[i][0], rc, out);
    }
    char bin[4096], cmd[9000], out[8192];
    bin_path(bin, sizeof bin, "dapo-coordinator");
    snprintf(cmd, sizeof cmd, "timeout 30 '%s' trainer.device=cuda --print-config 2>&1", bin);
    int rc = tu_run(cmd, out, sizeof out);
    if (backend_known("cuda", err) == 0) assert_int_equal(rc, 0);                   /* a CUDA build, no GPU here */
    else if (rc == 0 || !strstr(out, "make CUDA=1")) fail_msg("dapo-coordinator: exit %d, output:\n%s", rc, out);
}

int main(void) {
    const struct CMUnitTest tests[] = { cmocka_unit_test(test_cli_matches_fixture),
                                        cmocka_unit_test(test_cli_exit_status), cmocka_unit_test(test_cli_help),
                                        cmocka_unit_test(test_device_cuda_refused) };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
