/* tests/integration/longtest_memory.c (make check-long; issue 39): the Qwen2.5-0.5B shape (configs/shapes/qwen2.5-0.5b,
 * random weights written by dapo-init-model) trained one step by W = 1, 2 and 4 learner ranks — processes on this
 * machine over the CPU ring (loopback), fsdp_size -1 when W > 1, gradient checkpointing, sequences of 256 tokens one
 * per micro-batch, 4 sequences a step split over the ranks. Each rank reports its peak RSS (VmHWM) over what the process
 * held before learner_open; the test prints them beside the memory report's plan (tools/dapo-memory's "peak per rank"
 * line for the same keys) and asserts: every rank within 15% of its plan, and the state (fp32 parameters, gradients, AdamW moments) shrinking as
 * 1/W; the windows a unit is gathered into (the embedding, one layer, the final norm: 1.1 GiB for this shape) come on
 * top, the same at every W. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/config.h"
#include "core/threads_env.h"
#include "services/learner/learner.h"
#include "settings/settings.h"
#include "tests/testutil.h"

#define SEQS 4
#define PROMPT 128
#define RESP 128

static char g_model[512];

static long status_kib(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, n)) v = atol(line + n + 1);
    if (f) fclose(f);
    return v;
}

static void config_for(Config *c, int W) {
    char err[ERR_LEN], nl[16];
    snprintf(nl, sizeof nl, "%d", W);
    config_defaults(c);
    tu_dapo_recipe(c);
    const char *kv[][2] = {
        {"actor_rollout_ref.model.path", g_model},
        {"actor_rollout_ref.actor.optim.lr", "1e-6"},
        {"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "1"},
        {"actor_rollout_ref.actor.ppo_epochs", "1"},
        {"actor_rollout_ref.actor.use_dynamic_bsz", "false"},
        {"actor_rollout_ref.model.enable_gradient_checkpointing", "true"},
        {"actor_rollout_ref.actor.fsdp_config.fsdp_size", W > 1 ? "-1" : "1"},
        {"data.max_prompt_length", "128"},
        {"data.max_response_length", "128"},
        {"trainer.resume_mode", "disable"},
        {"cluster.num_learners", nl},
    };
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        if (config_set(c, kv[i][0], kv[i][1], "test", err)) fail_msg("%s", err);
}

/* Rank r's shard of the step: sequences [r S / W, (r + 1) S / W) of a fixed batch. */
static Dapo__TrainBatch *batch_for(int r, int W) {
    int a = r * SEQS / W, b = (r + 1) * SEQS / W, n = b - a, T = PROMPT + RESP;
    Dapo__TrainBatch *tb = calloc(1, sizeof *tb);
    dapo__train_batch__init(tb);
    tb->run_id = strdup("memory");
    tb->step = 1;
    tb->num_mini_batches = 1;
    tb->last_of_step = 1;
    tb->world_size = (uint32_t)W;
    tb->rank = (uint32_t)r;
    tb->n_offsets = (size_t)n + 1;
    tb->offsets = calloc((size_t)n + 1, sizeof(uint32_t));
    tb->n_prompt_lengths = tb->n_group_ids = (size_t)n;
    tb->prompt_lengths = calloc((size_t)n, sizeof(uint32_t));
    tb->group_ids = calloc((size_t)n, sizeof(uint64_t));
    tb->n_input_ids = (size_t)n * T;
    tb->input_ids = calloc(tb->n_input_ids, sizeof(int32_t));
    tb->n_response_mask = tb->n_advantages = tb->n_rollout_logprobs = (size_t)n * RESP;
    tb->response_mask = calloc((size_t)n * RESP, sizeof(float));
    tb->advantages = calloc((size_t)n * RESP, sizeof(float));
    tb->rollout_logprobs = calloc((size_t)n * RESP, sizeof(float));
    for (int i = 0; i < n; i++) {
        tb->offsets[i + 1] = (uint32_t)((i + 1) * T);
        tb->prompt_lengths[i] = PROMPT;
        for (int k = 0; k < T; k++) tb->input_ids[i * T + k] = (int32_t)(1000 + ((a + i) * 7919 + k * 104729) % 150000);
        for (int k = 0; k < RESP; k++) {
            tb->response_mask[i * RESP + k] = 1.0f;
            tb->advantages[i * RESP + k] = (a + i) % 2 ? 1.0f : -1.0f;
            tb->rollout_logprobs[i * RESP + k] = -12.0f;
        }
    }
    tb->global_response_tokens = (uint64_t)SEQS * RESP;
    tb->global_num_seqs = SEQS;
    return tb;
}

/* One rank (a child process): open, one step, report "base hwm" KiB on fd. Exit status 0 or 1. */
static int rank_run(int r, int W, int port, int fd) {
    omp_set_num_threads(1);
    long base = status_kib("VmRSS:");
    char err[ERR_LEN], ep[64];
    Collective *coll = NULL;
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    CollOptions o = {.rank = r, .world = W, .endpoint = ep, .timeout_s = 600};
    if (W > 1 && coll_open_cpu(&o, &coll, err)) { fprintf(stderr, "rank %d: %s\n", r, err); return 1; }
    Config c;
    config_for(&c, W);
    Learner *L = learner_open(&c, r, W, coll, err);
    config_free(&c);
    if (!L) { fprintf(stderr, "rank %d: %s\n", r, err); return 1; }
    Dapo__TrainBatch *tb = batch_for(r, W);
    LearnerResult res;
    int rc = learner_submit(L, tb) || !learner_next(L, &res) || res.failed;
    if (rc) fprintf(stderr, "rank %d: step failed: %s\n", r, res.error);
    else fprintf(stderr, "rank %d of %d: loss %.4f, grad norm %.4f\n", r, W, res.st.loss, res.st.grad_norm);
    learner_result_free(&res);
    char line[128];
    int len = snprintf(line, sizeof line, "%d %ld %ld\n", r, base, status_kib("VmHWM:"));
    if (write(fd, line, (size_t)len) != len) rc = 1;
    if (coll) coll_barrier(coll, err);
    learner_close(L);
    coll_close(coll);
    return rc;
}

/* The plan of one rank, bytes: tools/dapo-memory's "peak per rank" (rank 0 without the weight server: none here).
 * *state: the parameter, gradient and AdamW state (sharded: the rank's 1/W of them, without the windows), from
 * model_plan. */
static double planned(int W, int r, double *state) {
    char cmd[2048], out[8192], bin[512];
    snprintf(cmd, sizeof cmd, "%s actor_rollout_ref.model.path=%s cluster.num_learners=%d "
             "actor_rollout_ref.actor.fsdp_config.fsdp_size=%d actor_rollout_ref.model.enable_gradient_checkpointing=true "
             "data.max_prompt_length=%d data.max_response_length=%d actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1 "
             "actor_rollout_ref.actor.use_dynamic_bsz=false 2>&1", tu_bin(bin, sizeof bin, "dapo-memory"), g_model, W,
             W > 1 ? -1 : 1, PROMPT, RESP);
    if (tu_run(cmd, out, sizeof out)) fail_msg("%s:\n%s", cmd, out);
    if (W == 1 && r == 0) printf("%s", out);
    const char *l = strstr(out, "peak per rank: rank 0 ");
    double r0, r0_no_ws, other;
    if (!l || sscanf(l, "peak per rank: rank 0 %lf GiB (%lf GiB without the weight server), other ranks %lf GiB", &r0,
                     &r0_no_ws, &other) != 3)
        fail_msg("dapo-memory printed no peak line:\n%s", out);
    Config c;
    config_for(&c, W);
    ModelOptions mo;
    ModelPlan p;
    char err[ERR_LEN], path[600];
    snprintf(path, sizeof path, "%s/config.json", g_model);
    FILE *f = fopen(path, "rb");
    static char json[1 << 16];
    size_t n = f ? fread(json, 1, sizeof json - 1, f) : 0;
    if (f) fclose(f);
    json[n] = 0;
    if (settings_learner_model(&c, W, &mo, err) || model_plan(json, &mo, &p, err)) fail_msg("%s", err);
    config_free(&c);
    *state = (double)(W > 1 ? p.adam_bytes + p.shard_bytes : p.params_bytes + p.grads_bytes + p.adam_bytes);
    return (r == 0 ? r0_no_ws : other) * 1073741824.0;
}

static void test_rss_per_rank(void **state) {
    (void)state;
    double state_1 = 0;
    const char *only = getenv("DAPO_MEMTEST_W");    /* one W only (state_1 is then W = 1's plan, not measured) */
    for (int W = 1; W <= 4; W *= 2) {
        if (only && atoi(only) != W) {
            if (W == 1) planned(1, 0, &state_1);
            continue;
        }
        int port = tu_free_port(), fds[2];
        assert_int_equal(pipe(fds), 0);
        pid_t pid[4];
        for (int r = 0; r < W; r++) {
            pid[r] = fork();
            if (pid[r] == 0) { close(fds[0]); _exit(rank_run(r, W, port, fds[1])); }
        }
        close(fds[1]);
        for (int r = 0; r < W; r++) {
            int st = 0;
            waitpid(pid[r], &st, 0);
            assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        }
        char buf[1024] = "";
        ssize_t got = read(fds[0], buf, sizeof buf - 1);
        close(fds[0]);
        buf[got > 0 ? got : 0] = 0;
        const char *s = buf;
        for (int k = 0; k < W; k++) {
            int r, used;
            long base, hwm;
            assert_int_equal(sscanf(s, "%d %ld %ld%n", &r, &base, &hwm, &used), 3);
            s += used;
            double st, plan = planned(W, r, &st), meas = (double)(hwm - base) * 1024.0;
            if (W == 1) state_1 = st;
            printf("W=%d rank %d: peak RSS %.2f GiB over the process's %.2f GiB; plan %.2f GiB (state %.2f GiB = %.2f of "
                   "W=1's); measured/plan %.3f\n", W, r, meas / 1073741824.0, base / 1048576.0, plan / 1073741824.0,
                   st / 1073741824.0, st / state_1, meas / plan);
            assert_true(meas > 0.85 * plan && meas < 1.15 * plan);
            if (W > 1) assert_true(st < state_1 / W * 1.01);  /* 1/W (each unit padded to a multiple of W) */
        }
    }
}

int main(int argc, char **argv) {
    if (!getenv("DAPO_MEMTEST_CHILD")) {          /* one thread per rank: the libraries read these when they load */
        setenv("DAPO_MEMTEST_CHILD", "1", 1);
        setenv("OMP_NUM_THREADS", "1", 1);
        setenv("OPENBLAS_NUM_THREADS", "1", 1);
        execv("/proc/self/exe", argv);
    }
    threads_env_ensure(argv);
    (void)argc;
    char cmd[2048], out[4096], bin[512];
    snprintf(g_model, sizeof g_model, "/tmp/dapo-memtest-%d", (int)getpid());
    snprintf(cmd, sizeof cmd, "%s --config %s/configs/shapes/qwen2.5-0.5b/config.json --tokenizer %s/data/tokenizers/qwen3 "
             "--out %s 2>&1", tu_bin(bin, sizeof bin, "dapo-init-model"), tu_root(), tu_root(), g_model);
    if (tu_run(cmd, out, sizeof out)) { fprintf(stderr, "%s\n%s\n", cmd, out); return 1; }
    const struct CMUnitTest t[] = {cmocka_unit_test(test_rss_per_rank)};
    int rc = cmocka_run_group_tests(t, NULL, NULL);
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_model);
    if (system(cmd)) rc = 1;
    return rc;
}
