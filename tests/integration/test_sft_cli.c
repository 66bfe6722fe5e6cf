/* tests/integration/test_sft_cli.c: dapo-sft end to end on the tiny default model config (random init) and the tiny
 * tokenizer: {"prompt","response"} and verl-schema (extra_info.solution) lines, malformed lines skipped; the loss
 * falls; the output directory is a loadable model with the tokenizer files; and resume is exact: 6 steps + checkpoint
 * + resume to 12 steps gives the same model.safetensors bytes as 12 steps straight. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/fsutil.h"
#include "model/checkpoint.h"
#include "model/model.h"
#include "tests/testutil.h"

static char dir[256];

static int setup(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/dapo-test-sft-%d", (int)getpid());
    char e[ERR_LEN], p[512];
    checkpoint_remove_tree(dir, e);
    fs_mkdir_p(dir, e);
    snprintf(p, sizeof p, "%s/train.jsonl", dir);
    FILE *f = fopen(p, "w");
    for (int i = 0; i < 40; i++) {
        int a = (i * 7) % 10, b = (i * 3) % 10;
        if (i % 2)
            fprintf(f, "{\"prompt\": \"Add %d and %d.\", \"response\": \"%d+%d=%d. Answer: %d\"}\n", a, b, a, b, a + b, a + b);
        else
            fprintf(f, "{\"data_source\": \"math_dapo\", \"prompt\": [{\"role\": \"user\", \"content\": \"Add %d and %d.\"}], "
                       "\"reward_model\": {\"ground_truth\": \"%d\", \"style\": \"rule\"}, "
                       "\"extra_info\": {\"solution\": \"%d+%d=%d. Answer: %d\"}}\n", a, b, a + b, a, b, a + b, a + b);
    }
    fprintf(f, "not json\n{\"prompt\": 5}\n\n");
    fclose(f);
    snprintf(p, sizeof p, "%s/val.jsonl", dir);
    f = fopen(p, "w");
    fprintf(f, "{\"data_source\": \"math_dapo\", \"prompt\": [{\"role\": \"user\", \"content\": \"Add 2 and 3.\"}], "
               "\"reward_model\": {\"ground_truth\": \"5\", \"style\": \"rule\"}, \"extra_info\": {\"solution\": \"2+3=5. Answer: 5\"}}\n");
    fclose(f);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    char e[ERR_LEN];
    checkpoint_remove_tree(dir, e);
    return 0;
}

static int sft(const char *out, const char *extra, char *buf, size_t n) {
    char cmd[2048], bin[256];
    snprintf(cmd, sizeof cmd,
             "%s actor_rollout_ref.model.path=%s/configs/tiny-model data.tokenizer=%s/data/tokenizers/tiny "
             "data.chat_template=none data.max_prompt_length=32 data.max_response_length=32 "
             "reward_model.reward_manager=dapo reward_model.overlong_buffer.enable=true reward_model.overlong_buffer.len=8 "
             "--data %s/train.jsonl --val %s/val.jsonl --out %s/%s "
             "--batch 16 --lr 3e-3 --warmup 2 --log-every 1 --eval-max 1 %s 2>&1",
             tu_bin(bin, sizeof bin, "dapo-sft"), tu_root(), tu_root(), dir, dir, dir, out, extra);
    return tu_run(cmd, buf, n);
}

static double loss_at(const char *out, long step) {
    char key[64];
    snprintf(key, sizeof key, "{\"step\": %ld, \"epoch\"", step);
    const char *p = strstr(out, key);
    if (!p) return -1;
    p = strstr(p, "\"loss\": ");
    return p ? atof(p + 8) : -1;
}

static void test_sft_runs_and_resumes(void **state) {
    (void)state;
    static char out[1 << 16];
    int rc = sft("straight", "--steps 12", out, sizeof out);
    if (rc) fprintf(stderr, "%s\n", out);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "40 training examples (2 malformed"));
    double l1 = loss_at(out, 1), l12 = loss_at(out, 12);
    assert_true(l1 > 0 && l12 > 0);
    assert_true(l12 < 0.8 * l1);                                   /* it learns */
    assert_non_null(strstr(out, "\"val/greedy_acc\""));
    char p[600], e[ERR_LEN];
    snprintf(p, sizeof p, "%s/straight/tokenizer.json", dir);
    assert_int_equal(access(p, F_OK), 0);
    snprintf(p, sizeof p, "%s/straight", dir);
    ModelOptions mo = {.max_tokens = 64};
    Model *m = model_load(p, &mo, e);
    assert_non_null(m);
    model_free(m);
    /* 6 steps with a checkpoint, then resume to 12 */
    rc = sft("resumed", "--steps 6 --save-every 6", out, sizeof out);
    assert_int_equal(rc, 0);
    rc = sft("resumed", "--steps 12 --save-every 6 --resume", out, sizeof out);
    if (rc) fprintf(stderr, "%s\n", out);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "resumed"));
    assert_null(strstr(out, "{\"step\": 6, \"epoch\""));          /* steps 1-6 were not run again */
    size_t na, nb;
    char pa[600], pb[600];
    snprintf(pa, sizeof pa, "%s/straight/model.safetensors", dir);
    snprintf(pb, sizeof pb, "%s/resumed/model.safetensors", dir);
    char *a = fs_read_all(pa, 64 << 20, &na, e), *b = fs_read_all(pb, 64 << 20, &nb, e);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na);
    xfree(a);
    xfree(b);
    /* --max-time: the first step past the budget is the last; the model is written and evaluated at that step */
    rc = sft("timed", "--steps 500 --max-time 0.001", out, sizeof out);
    if (rc) fprintf(stderr, "%s\n", out);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "stopping at step 1: --max-time 0.001 s reached"));
    assert_null(strstr(out, "{\"step\": 2, \"epoch\""));
    assert_non_null(strstr(out, "{\"step\": 1, \"val/nll\""));
    snprintf(p, sizeof p, "%s/timed/model.safetensors", dir);
    assert_int_equal(access(p, F_OK), 0);
    /* bad arguments: usage, exit 2, naming the missing flag */
    char bin[256], cmd[2048];
    snprintf(cmd, sizeof cmd, "%s --steps 3 2>&1", tu_bin(bin, sizeof bin, "dapo-sft"));
    assert_int_equal(tu_run(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "--data FILE is required"));
    snprintf(cmd, sizeof cmd, "%s --data %s/train.jsonl --steps 3 2>&1", bin, dir);
    assert_int_equal(tu_run(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "--out DIR is required"));
    snprintf(cmd, sizeof cmd, "%s --data %s/train.jsonl --out %s/nomodel --steps 3 2>&1", bin, dir, dir);
    assert_int_equal(tu_run(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "--model DIR is required"));
    assert_null(strstr(out, "tokenizer.json"));
    snprintf(cmd, sizeof cmd, "%s --data %s/train.jsonl --out %s/nomodel --model %s/nosuch 2>&1", bin, dir, dir, dir);
    assert_int_equal(tu_run(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "--model: '"));
    assert_non_null(strstr(out, "/nosuch' is not a directory"));
    /* --help: the usage on stdout, exit 0 */
    snprintf(cmd, sizeof cmd, "%s --help 2>/dev/null", bin);
    assert_int_equal(tu_run(cmd, out, sizeof out), 0);
    assert_non_null(strstr(out, "usage: "));
    assert_non_null(strstr(out, "--model DIR"));
}

int main(void) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 0);      /* for the spawned tools (deploy/local/env.sh, docs/performance.md) */
    setenv("OPENBLAS_THREAD_TIMEOUT", "4", 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sft_runs_and_resumes, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
