/* tests/unit/test_checkpoint.c: model/checkpoint.h on the small random Qwen2 model: a save/load round trip is bitwise
 * (weights, AdamW moments, counters incl. 64-bit RNG values), the saved huggingface/ directory loads as a model,
 * max_keep prunes the oldest, a newer format version is refused with a hint, a full disk (RLIMIT_FSIZE: writes fail
 * with EFBIG like ENOSPC) keeps the previous checkpoint, leaves no temp directory and reports, and an incomplete
 * directory (no state.json) is never taken as the latest. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "core/fsutil.h"
#include "model/checkpoint.h"
#include "model/model_internal.h"   /* white-box: load_model sets the optimizer step counter */
#include "tests/testutil.h"
#include "tests/model_slabs.h"

static char dir[256];

static Model *load_model(void) {
    char p[512], err[ERR_LEN];
    snprintf(p, sizeof p, "%s/tests/data/model/qwen2_gqa", tu_root());
    ModelOptions o = {.max_tokens = 16, .train = 1};
    Model *m = model_load(p, &o, err);
    assert_non_null(m);
    for (long i = 0; i < model_n_params(m); i++) {
        tu_adam_m(m)[i] = (float)i * 1e-7f - 0.001f;
        tu_adam_v(m)[i] = (float)(i % 97) * 1e-9f;
    }
    m->adam_step = 42;                            /* white-box (model_internal.h): as if 42 optimizer steps had run */
    return m;
}

static int setup(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/dapo-test-ckpt-%d", (int)getpid());
    char e[ERR_LEN];
    checkpoint_remove_tree(dir, e);
    return 0;
}
static int teardown(void **state) {
    (void)state;
    char e[ERR_LEN];
    checkpoint_remove_tree(dir, e);
    return 0;
}

static void test_round_trip(void **state) {
    (void)state;
    Model *m = load_model();
    char err[ERR_LEN], path[512];
    CheckpointState st = {.step = 7, .adam_step = 42, .policy_version = 7, .rng_seed = 0xfedcba9876543210ull,
                    .rng_counter = 18446744073709551615ull, .data_epoch = 2, .data_cursor = 1234};
    assert_int_equal(checkpoint_save(dir, m, &st, -1, err), 0);
    long step;
    assert_int_equal(checkpoint_find_latest(dir, path, sizeof path, &step, err), 0);
    assert_int_equal(step, 7);
    ModelOptions o = {.max_tokens = 16, .train = 1};
    CheckpointState got;
    Model *r = checkpoint_load(path, &o, &got, err);
    assert_non_null(r);
    assert_memory_equal(tu_params(m), tu_params(r), model_bytes_params(m));
    assert_memory_equal(tu_adam_m(m), tu_adam_m(r), model_bytes_params(m));
    assert_memory_equal(tu_adam_v(m), tu_adam_v(r), model_bytes_params(m));
    assert_int_equal(model_adam_step(r), 42);
    assert_int_equal(got.step, 7);
    assert_int_equal(got.policy_version, 7);
    assert_true(got.rng_seed == st.rng_seed && got.rng_counter == st.rng_counter);
    assert_int_equal(got.data_epoch, 2);
    assert_int_equal(got.data_cursor, 1234);
    model_free(r);
    /* the huggingface/ directory is a plain HF model directory */
    snprintf(path, sizeof path, "%s/global_step_7/actor/huggingface", dir);
    ModelOptions inf = {.max_tokens = 16};
    r = model_load(path, &inf, err);
    assert_non_null(r);
    assert_memory_equal(tu_params(m), tu_params(r), model_bytes_params(m));
    model_free(r);
    /* a newer format is refused with a hint */
    snprintf(path, sizeof path, "%s/global_step_7/actor/state.json", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "{\"format\": \"dapo-learner-checkpoint\", \"version\": 99, \"step\": 7}");
    fclose(f);
    snprintf(path, sizeof path, "%s/global_step_7", dir);
    assert_null(checkpoint_load(path, &o, &got, err));
    assert_non_null(strstr(err, "version 99"));
    assert_int_equal(checkpoint_read_state(path, &got, err), ERR_VERSION);
    model_free(m);
}

static int count_steps(void) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) n += strncmp(e->d_name, "global_step_", 12) == 0;
    if (d) closedir(d);
    return n;
}

static void test_keep_and_incomplete(void **state) {
    (void)state;
    Model *m = load_model();
    char err[ERR_LEN], path[512];
    for (long s = 1; s <= 4; s++) {
        CheckpointState st = {.step = s, .adam_step = s, .policy_version = s};
        assert_int_equal(checkpoint_save(dir, m, &st, 2, err), 0);
    }
    assert_int_equal(count_steps(), 2);
    snprintf(path, sizeof path, "%s/global_step_3/actor/state.json", dir);
    assert_int_equal(access(path, F_OK), 0);
    /* a half-written newer one (no state.json) is not the latest */
    snprintf(path, sizeof path, "%s/global_step_9/actor/huggingface", dir);
    char e[ERR_LEN];
    assert_int_equal(fs_mkdir_p(path, e), 0);
    long step;
    assert_int_equal(checkpoint_find_latest(dir, path, sizeof path, &step, err), 0);
    assert_int_equal(step, 4);
    /* saving the same step again replaces it */
    tu_params(m)[0] += 1.0f;
    CheckpointState st = {.step = 4, .adam_step = 4, .policy_version = 4};
    assert_int_equal(checkpoint_save(dir, m, &st, 2, err), 0);
    ModelOptions o = {.max_tokens = 16, .train = 1};
    CheckpointState got;
    snprintf(path, sizeof path, "%s/global_step_4", dir);
    Model *r = checkpoint_load(path, &o, &got, err);
    assert_non_null(r);
    assert_true(tu_params(r)[0] == tu_params(m)[0]);
    model_free(r);
    /* a new run in the same directory (resume_mode disable) writes step 2 beside the older run's 3 and 4: the marker
     * names 2, so 2 is resumed; without a marker (a directory from before it existed) the newest is */
    CheckpointState s2 = {.step = 2, .adam_step = 2, .policy_version = 2};
    assert_int_equal(checkpoint_save(dir, m, &s2, 2, err), 0);
    assert_int_equal(checkpoint_find_latest(dir, path, sizeof path, &step, err), 0);
    assert_int_equal(step, 2);
    CheckpointState s1 = {.step = 1, .adam_step = 1, .policy_version = 1};   /* and its max_keep (2) counts only */
    assert_int_equal(checkpoint_save(dir, m, &s1, 2, err), 0);              /* its own: 3 and 4 are left alone */
    s2.adam_step = 3;
    assert_int_equal(checkpoint_save(dir, m, &s2, 2, err), 0);
    assert_int_equal(count_steps(), 5);             /* 1, 2 (this run), 3, 4 (the other), 9 (half-written) */
    CheckpointState s3 = {.step = 3, .adam_step = 3, .policy_version = 3};
    assert_int_equal(checkpoint_save(dir, m, &s3, 2, err), 0);              /* replaces the other run's 3; 1 goes */
    assert_int_equal(count_steps(), 4);
    snprintf(path, sizeof path, "%s/global_step_1", dir);
    assert_int_not_equal(access(path, F_OK), 0);
    char mark[600];
    snprintf(mark, sizeof mark, "%s/" CHECKPOINT_LATEST_FILE, dir);
    FILE *f = fopen(mark, "w");
    fputs("7\n", f);                                 /* names a step that is not there: ignored */
    fclose(f);
    assert_int_equal(checkpoint_find_latest(dir, path, sizeof path, &step, err), 0);
    assert_int_equal(step, 4);
    assert_int_equal(unlink(mark), 0);
    assert_int_equal(checkpoint_find_latest(dir, path, sizeof path, &step, err), 0);
    assert_int_equal(step, 4);
    model_free(m);
    assert_int_equal(checkpoint_find_latest("/nonexistent-dapo", path, sizeof path, &step, err), ERR_NOTFOUND);
}

static void test_full_disk_keeps_previous(void **state) {
    (void)state;
    Model *m = load_model();
    char err[ERR_LEN], path[512];
    CheckpointState st = {.step = 1, .adam_step = 1, .policy_version = 1};
    assert_int_equal(checkpoint_save(dir, m, &st, -1, err), 0);
    struct rlimit old, small = {.rlim_cur = 64 << 10};
    getrlimit(RLIMIT_FSIZE, &old);
    small.rlim_max = old.rlim_max;
    signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);   /* files over 64 KiB cannot be written */
    st.step = 2;
    int rc = checkpoint_save(dir, m, &st, 1, err);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, SIG_DFL);
    assert_int_equal(rc, ERR_IO);
    assert_non_null(strstr(err, "global_step_1 kept"));
    assert_non_null(strstr(err, "step 2 not written"));
    long step;
    assert_int_equal(checkpoint_find_latest(dir, path, sizeof path, &step, err), 0);
    assert_int_equal(step, 1);
    snprintf(path, sizeof path, "%s/global_step_2", dir);
    assert_int_not_equal(access(path, F_OK), 0);             /* nothing of the failed one is left */
    ModelOptions o = {.max_tokens = 16, .train = 1};
    CheckpointState got;
    snprintf(path, sizeof path, "%s/global_step_1", dir);
    Model *r = checkpoint_load(path, &o, &got, err);
    assert_non_null(r);
    assert_memory_equal(tu_params(m), tu_params(r), model_bytes_params(m));
    model_free(r);
    model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keep_and_incomplete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_disk_keeps_previous, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
