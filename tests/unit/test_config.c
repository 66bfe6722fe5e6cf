/* tests/unit/test_config.c: the config table — defaults of verl's DAPO recipe, YAML files, overrides, and the
 * error message of each bad-config case (with its 1-based line), empty files, files that are not text (a directory,
 * binary, not UTF-8), and --help. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/config.h"

/* verl 0.9.1's defaults (issue 37's policy; tests/unit/test_config_verl.c checks every key against verl's file): the
 * DAPO configs set DAPO's values (configs/default.yaml, gsm8k.yaml, dapo-qwen2.5-32b.yaml). */
static void test_defaults_are_verls(void **state) {
    (void)state;
    Config c;
    config_defaults(&c);
    assert_true(c.clip_ratio_low == 0.2 && c.clip_ratio_high == 0.2 && c.clip_ratio_c == 3.0);
    assert_int_equal(c.loss_agg_mode, CFG_AGG_TOKEN_MEAN);
    assert_int_equal(c.train_batch_size, 1024);
    assert_int_equal(c.gen_batch_size, 0);                               /* verl's null: train_batch_size */
    assert_int_equal(config_gen_batch_size(&c), 1024);
    assert_int_equal(c.rollout_n, 16);                                   /* dapo's: verl's 1 is not a group */
    assert_int_equal(c.ppo_mini_batch_size, 256);
    assert_true(c.lr == 1e-6 && c.lr_warmup_steps == -1 && c.weight_decay == 0.01 && c.grad_clip == 1.0);
    assert_int_equal(c.warmup_style, CFG_WARMUP_CONSTANT);
    assert_int_equal(c.max_prompt_length, 512);
    assert_int_equal(c.max_response_length, 512);
    assert_true(!c.overlong_buffer_enable && c.overlong_buffer_len == 4096 && c.overlong_penalty_factor == 1.0);
    assert_int_equal(c.reward_manager, CFG_REWARD_NAIVE);
    assert_true(!c.filter_groups_enable && c.max_num_gen_batches == 0);
    assert_true(c.val_temperature == 0 && !c.val_do_sample && c.val_top_p == 1.0 && c.rollout_seed == 42);
    assert_int_equal(c.filter_groups_metric, CFG_METRIC_ACC);        /* dapo's: verl's 'reward' names no value */
    assert_true(c.temperature == 1.0 && c.top_p == 1.0);
    assert_string_equal(c.bind, "tcp://127.0.0.1:5555");
    assert_string_equal(c.http, "127.0.0.1:8080");
    char err[ERR_LEN];
    assert_int_equal(config_validate(&c, err), 0);
    config_free(&c);
}

static int run_cli(Config *c, const char **args, int n, int *print, char err[ERR_LEN]) {
    char *argv[32];
    argv[0] = "dapo-test";
    for (int i = 0; i < n; i++) argv[i + 1] = (char *)args[i];
    argv[n + 1] = NULL;
    int argc = n + 1;
    return config_from_cli(c, &argc, argv, print, err);
}

static void test_overrides_and_leftover_args(void **state) {
    (void)state;
    Config c;
    char err[ERR_LEN];
    int print;
    char *argv[] = {"x", "actor_rollout_ref.actor.clip_ratio_high=0.3", "--rank", "2",
                    "data.train_files=[a.jsonl, b.jsonl]", "--print-config", "actor_rollout_ref.rollout.name=vllm", NULL};
    int argc = 7;
    assert_int_equal(config_from_cli(&c, &argc, argv, &print, err), 0);
    assert_int_equal(print, CONFIG_PRINT_ALL);
    assert_true(c.clip_ratio_high == 0.3);
    assert_int_equal(c.train_files.n, 2);
    assert_string_equal(c.train_files.v[0], "a.jsonl");
    assert_string_equal(c.train_files.v[1], "b.jsonl");
    assert_int_equal(argc, 3);                       /* "x", "--rank", "2" left for the daemon */
    assert_string_equal(argv[1], "--rank");
    assert_string_equal(argv[2], "2");
    config_free(&c);
    /* null on the command line is YAML's null (a string key: ""), so a worker's run keys hash as the coordinator's;
     * quoted, it is the text */
    const char *nul[] = {"algorithm.rollout_correction.rollout_is=null"}, *txt[] = {"trainer.project_name='null'"};
    assert_int_equal(run_cli(&c, nul, 1, NULL, err), 0);
    assert_string_equal(c.rc_rollout_is, "");
    config_free(&c);
    assert_int_equal(run_cli(&c, txt, 1, NULL, err), 0);
    assert_string_equal(c.project_name, "null");
    config_free(&c);
}

static void test_yaml_file(void **state) {
    (void)state;
    char path[] = "/tmp/dapo-cfg-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *yaml =
        "data:\n  train_batch_size: 16\n  gen_batch_size: 24\n  train_files:\n    - x.jsonl\n    - y.jsonl\n"
        "actor_rollout_ref:\n  actor:\n    ppo_mini_batch_size: 8\n    optim:\n      lr: 5e-5\n"
        "  rollout:\n    n: 8\n    name: vllm\n"
        "algorithm:\n  filter_groups:\n    enable: true\n    max_num_gen_batches: 3\n";
    assert_int_equal(write(fd, yaml, strlen(yaml)), (ssize_t)strlen(yaml));
    close(fd);
    Config c;
    char err[ERR_LEN];
    const char *args[] = {"--config", path, "data.train_batch_size=32"};
    assert_int_equal(run_cli(&c, args, 3, NULL, err), 0);
    assert_int_equal(c.train_batch_size, 32);        /* override wins over the file */
    assert_int_equal(c.gen_batch_size, 24);
    assert_int_equal(c.train_files.n, 2);
    assert_string_equal(c.train_files.v[1], "y.jsonl");
    assert_true(c.lr == 5e-5);
    assert_int_equal(c.rollout_n, 8);
    assert_int_equal(c.max_num_gen_batches, 3);
    /* --print-config output parses back to the same values. */
    char out[] = "/tmp/dapo-cfg-out-XXXXXX";
    int ofd = mkstemp(out);
    FILE *f = fdopen(ofd, "w");
    config_print_yaml(&c, f);
    fclose(f);
    Config d;
    config_defaults(&d);
    assert_int_equal(config_load_file(&d, out, err), 0);
    assert_int_equal(d.train_batch_size, 32);
    assert_true(d.lr == 5e-5);
    assert_int_equal(d.train_files.n, 2);
    assert_string_equal(d.bind, c.bind);
    config_free(&d);
    config_free(&c);
    unlink(path);
    unlink(out);
}

/* Each bad config: the error names the key, the value and what is allowed. */
static const struct { const char *arg, *yaml, *want1, *want2; } bad[] = {
    {"actor_rollout_ref.actor.clip_ratio_hgh=0.3", NULL, "clip_ratio_hgh", "did you mean 'actor_rollout_ref.actor.clip_ratio_high'"},
    {"actor_rollout_ref.actor.clip_ratio_high=abc", NULL, "'abc'", "not a number"},
    /* the KL loss's estimators are verl's; "full" (every vocabulary entry) is refused, as verl refuses it */
    {"actor_rollout_ref.actor.kl_loss_type=full", NULL, "kl_loss_type", "low_var_kl"},
    /* the KL penalty in the reward: the final reward is the learners', so dynamic sampling cannot filter on it */
    {NULL, "algorithm:\n  use_kl_in_reward: true\n  filter_groups:\n    enable: true\n    metric: seq_final_reward\n",
     "use_kl_in_reward with algorithm.filter_groups.metric", "filter on acc, score or seq_reward"},
    {"algorithm.gamma=0.99", NULL, "algorithm.gamma 0.99", "only reinforce_plus_plus reads it"},
    /* the adaptive KL controller's multiplier stays positive; clip_cov's band selects something */
    {NULL, "algorithm:\n  use_kl_in_reward: true\n  kl_ctrl: {type: adaptive, horizon: 1}\n",
     "algorithm.kl_ctrl.horizon 1", "horizon must exceed"},
    {NULL, "actor_rollout_ref:\n  actor:\n    policy_loss: {loss_mode: clip_cov, clip_cov_lb: 10, clip_cov_ub: 5}\n",
     "clip_cov_lb 10 is not below clip_cov_ub 5", "select no token"},
    {"actor_rollout_ref.actor.policy_loss.ppo_kl_coef=-1", NULL, "ppo_kl_coef", "out of range"},
    /* verl's algorithm keys on the warning list: only the value dapo trains with (issue 37) */
    {"actor_rollout_ref.rollout.do_sample=False", NULL, "do_sample: False is not supported", "greedy rollouts"},
    {"actor_rollout_ref.actor.shuffle=true", NULL, "shuffle: true is not supported", "order the coordinator packed"},
    {"actor_rollout_ref.actor.policy_loss.loss_mode=dro", NULL, "dro", "vanilla|gspo|cispo|sapo|gpg|dppo_tv|dppo_kl|clip_cov|kl_cov|geo_mean"},
    {"actor_rollout_ref.actor.loss_scale_factor=0", NULL, "loss_scale_factor: 0 is out of range", "greater than 0"},
    {"algorithm.lam=0.95", NULL, "lam: 0.95 is not supported", "only GAE reads it"},
    {"actor_rollout_ref.actor.optim.lr_warmup_steps_ratio=1.5", NULL, "lr_warmup_steps_ratio: 1.5 is out of range",
     "at most 1"},
    {"actor_rollout_ref.actor.clip_ratio_high=nan", NULL, "'nan'", "not a number"},
    /* trainer.logger: a value verl does not know is refused (verl's other trackers are accepted, see below) */
    {"trainer.logger=[console,tensorbord]", NULL, "trainer.logger: 'tensorbord'", "not a logger verl knows"},
    {NULL, "custom_reward_function:\n  path: r.py\n  name: 'compute score'\n", "custom_reward_function.name",
     "not a Python function name"},
    {"reward_model.remote.url=ftp://host/rm", NULL, "reward_model.remote.url: 'ftp://host/rm'", "not an http://"},
    {NULL, "custom_reward_function:\n  path: r.py\nreward_model:\n  remote:\n    url: http://h:5000/\n",
     "both set", "one of them"},
    /* numbers strtod cannot hold (ERANGE) or infinite: out of range, with the allowed range */
    {"actor_rollout_ref.actor.clip_ratio_high=1e999", NULL,
     "clip_ratio_high: 1e999 is out of range (beyond the range of a double; allowed: at least 0 and at most 10)", ""},
    {"actor_rollout_ref.actor.optim.lr=-1e999", NULL, "optim.lr: -1e999 is out of range (beyond the range", ""},
    {"actor_rollout_ref.actor.optim.lr=1e-999", NULL, "optim.lr: 1e-999 is out of range (too small for a double", ""},
    {NULL, "actor_rollout_ref:\n  actor:\n    grad_clip: .inf\n",
     ":3: actor_rollout_ref.actor.grad_clip: .inf is out of range (infinite; allowed: at least 0 and at most 1000000000)", ""},
    {"actor_rollout_ref.actor.grad_clip=-inf", NULL, "grad_clip: -inf is out of range (infinite; allowed", ""},
    {"data.seed=1e999", NULL, "data.seed: 1e999 is out of range (allowed: at least 0 and at most 2147483647)", ""},
    {"actor_rollout_ref.actor.clip_ratio_c=1", NULL, "clip_ratio_c: 1 is out of range", "greater than 1"},
    {"actor_rollout_ref.actor.clip_ratio_c=0.5", NULL, "clip_ratio_c", "greater than 1"},
    {"actor_rollout_ref.rollout.n=0", NULL, "rollout.n: 0 is out of range", "at least 1"},
    {"actor_rollout_ref.rollout.n=2.5", NULL, "rollout.n: '2.5'", "not an integer"},
    {"actor_rollout_ref.actor.loss_agg_mode=mean", NULL, "'mean' is not allowed", "token-mean|seq-mean-token-mean"},
    {"algorithm.filter_groups.enable=maybe", NULL, "'maybe' is not a boolean", "true|false"},
    {"data.truncation=both", NULL, "data.truncation: 'both'", "error|left|right|middle"},
    {"actor_rollout_ref.rollout.top_p=1.5", NULL, "top_p: 1.5 is out of range", "at most 1"},
    {"totally.unknown.key=1", NULL, "unknown key 'totally.unknown.key'", "command line"},
    {NULL, "data:\n  max_response_length: 20480\nreward_model:\n  reward_manager: dapo\n  overlong_buffer: {enable: true, len: 30000}\n",
     "overlong_buffer.len: 30000",
     "less than data.max_response_length"},
    {"data.max_response_length=-5", NULL, "max_response_length: -5 is out of range", "at least 1"},
    {"actor_rollout_ref.actor.ppo_mini_batch_size=1000", NULL, "ppo_mini_batch_size: 1000", "train_batch_size"},
    {NULL, "data:\n  train_batch_size: [1, 2]\n", "train_batch_size", "a list is not allowed"},
    {NULL, "data:\n  train_batch_sise: 4\n", ":2: unknown key 'data.train_batch_sise'", "did you mean"},
    {NULL, "data: [unclosed\n", "not valid YAML", ""},
    {NULL, "- just\n- a list\n", "top level must be a mapping", ""},
    {NULL, "trainer:\n  resume_mode: resume_path\n", "resume_from_path", "resume_path"},
    /* a scalar where a section is expected; a section given a value on the command line; a mapping for a value */
    {NULL, "data: 5\n", ":1: data: expected a mapping, found a scalar ('5')", ""},
    {"data=5", NULL, "'data' is a section, not a key", "data.KEY=VALUE"},
    {NULL, "trainer:\n  seed:\n    x: 1\n", ":2: trainer.seed: expected a value, found a mapping", ""},
    /* address keys: the dashboard's IP:PORT, the ZeroMQ endpoints' transport and form */
    {"cluster.http=notaport", NULL, "cluster.http: 'notaport' is not host:port", "127.0.0.1:8080"},
    {"cluster.http=:8080", NULL, "cluster.http: ':8080' is not host:port", ""},
    {"cluster.http=127.0.0.1:65536", NULL, "cluster.http: '127.0.0.1:65536': port '65536'", "0..65535"},
    {"cluster.http=127.0.0.1:80x", NULL, "cluster.http: '127.0.0.1:80x': port '80x'", "not an integer"},
    {"cluster.http=localhost:8080", NULL, "cluster.http: 'localhost:8080': host 'localhost' is not an IP address", ""},
    {"cluster.http=[::1:8080", NULL, "cluster.http: '[::1:8080': an unclosed '['", ""},
    {"cluster.bind=127.0.0.1:5555", NULL, "cluster.bind: '127.0.0.1:5555' is not a ZeroMQ endpoint", "ipc://PATH"},
    {"cluster.coordinator=udp://h:1", NULL, "cluster.coordinator: 'udp://h:1': transport 'udp' is not supported", ""},
    {"cluster.weights=tcp://h", NULL, "cluster.weights: 'tcp://h' is not tcp://HOST:PORT", ""},
    {"cluster.weights_bind=tcp://:5556", NULL, "cluster.weights_bind: 'tcp://:5556' is not tcp://HOST:PORT", ""},
    {"cluster.collective=tcp://h:99999", NULL, "cluster.collective: 'tcp://h:99999': port '99999'", "0..65535 or '*'"},
    {"cluster.bind=ipc://", NULL, "cluster.bind: 'ipc://' has an empty path or name", ""},
    {NULL, "cluster:\n  coordinator: ~\n", ":2: cluster.coordinator: '' is not a ZeroMQ endpoint", ""},
    /* a syntax error at the end of the file is reported on the (1-based) line that has it, not the next one */
    {NULL, "data:\n  train_batch_size: 4\ntrainer: [unclosed\n", ":3: not valid YAML: flow sequence without a closing bracket", ""},
    {NULL, "data:\n  tokenizer: \"x\n\ntrainer: {}\n", ":2:", "not valid YAML"},
};

/* verl's trainer.logger values: dapo's three kept, verl's other trackers accepted (the coordinator drops them with a
 * warning); the reward keys' defaults. */
static void test_logger_and_reward_keys(void **state) {
    (void)state;
    Config c;
    char err[ERR_LEN] = "";
    const char *args[] = {"trainer.logger=['console','wandb','tensorboard']", "custom_reward_function.path=r.py"};
    assert_int_equal(run_cli(&c, args, 2, NULL, err), 0);
    assert_int_equal(c.logger.n, 3);
    assert_true(config_has_logger(&c, "tensorboard") && config_has_logger(&c, "wandb") && !config_has_logger(&c, "file"));
    assert_int_equal(config_logger_known("console"), 1);
    assert_int_equal(config_logger_known("file"), 1);
    assert_int_equal(config_logger_known("swanlab"), 2);
    assert_int_equal(config_logger_known("tensorbord"), 0);
    assert_string_equal(c.custom_reward_name, "compute_score");
    assert_string_equal(c.custom_reward_python, "python3");
    assert_true(c.reward_error_score == -1.0 && c.reward_num_workers == 4 && c.reward_worker_memory_mb == 4096);
    assert_string_equal(c.project_name, "dapo");
    config_free(&c);
}

/* Issue 41: verl V1's trainer modes as dapo's staleness bound (config_staleness): sync is trainer.staleness; the async
 * modes take max_off_policy_threshold (verl's default 8); the two set apart, strategy wait and a parameter_sync_step
 * other than 1 are refused naming what dapo does. */
static void test_v1_trainer_modes(void **state) {
    (void)state;
    Config c;
    char err[ERR_LEN] = "";
    const char *sync[] = {"trainer.staleness=3"};
    assert_int_equal(run_cli(&c, sync, 1, NULL, err), 0);
    assert_int_equal(config_staleness(&c), 3);
    config_free(&c);
    const char *colo[] = {"trainer.v1.trainer_mode=colocate_async"};
    assert_int_equal(run_cli(&c, colo, 1, NULL, err), 0);
    assert_int_equal(config_staleness(&c), 8);
    config_free(&c);
    /* the async modes' strategy is trainer.staleness_strategy; the dapo keys print the values in effect */
    const char *wait[] = {"trainer.v1.trainer_mode=colocate_async", "trainer.v1.sampler.max_off_policy_strategy=wait",
                          "trainer.v1.sampler.max_off_policy_threshold=3"};
    assert_int_equal(run_cli(&c, wait, 3, NULL, err), 0);
    assert_int_equal(config_staleness(&c), 3);
    assert_int_equal(config_staleness_strategy(&c), CFG_OFF_POLICY_WAIT);
    assert_int_equal(config_refill_at_once(&c), 1);                     /* refill auto: at once when async */
    char *yaml = NULL;
    size_t ylen = 0;
    FILE *f = open_memstream(&yaml, &ylen);
    config_print_yaml(&c, f);
    fclose(f);
    assert_non_null(strstr(yaml, "  staleness: 3\n  staleness_strategy: \"wait\"\n"));
    free(yaml);
    config_free(&c);
    const char *sync_wait[] = {"trainer.staleness=2", "trainer.staleness_strategy=wait"};
    assert_int_equal(run_cli(&c, sync_wait, 2, NULL, err), 0);
    assert_int_equal(config_staleness_strategy(&c), CFG_OFF_POLICY_WAIT);
    config_free(&c);
    const char *round[] = {"trainer.staleness=2", "algorithm.filter_groups.refill=round"};
    assert_int_equal(run_cli(&c, round, 2, NULL, err), 0);
    assert_int_equal(config_refill_at_once(&c), 0);
    config_free(&c);
    assert_int_equal(run_cli(&c, NULL, 0, NULL, err), 0);
    assert_int_equal(config_refill_at_once(&c), 0);                     /* sync: verl's rounds */
    config_free(&c);
    const char *sep[] = {"trainer.v1.trainer_mode=separate_async", "trainer.v1.sampler.max_off_policy_threshold=4",
                         "trainer.v1.separate_async.parameter_sync_step=1", "trainer.staleness=4"};
    assert_int_equal(run_cli(&c, sep, 4, NULL, err), 0);
    assert_int_equal(config_staleness(&c), 4);
    config_free(&c);
    static const struct { const char *a[2]; const char *want; } bad[] = {
        {{"trainer.v1.trainer_mode=colocate_async", "trainer.staleness=2"}, "threshold 8 (its default)"},
        {{"trainer.v1.trainer_mode=sync", "trainer.staleness=4"}, "trainer.v1.trainer_mode sync is synchronous"},
        {{"trainer.v1.trainer_mode=colocate_async", "trainer.staleness_strategy=wait"},
         "trainer.staleness_strategy wait and trainer.v1.sampler.max_off_policy_strategy drop are the same setting"},
        {{"trainer.v1.trainer_mode=separate_async", "trainer.v1.sampler.max_off_policy_threshold=2"},
         "parameter_sync_step 4: dapo publishes the weights after every step"},
        {{"trainer.staleness=65", NULL}, "out of range"},
        {{"data.train_batch_size=0", NULL}, "data.train_batch_size 0"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *args[2] = {bad[i].a[0], bad[i].a[1]};
        int rc = run_cli(&c, args, bad[i].a[1] ? 2 : 1, NULL, err);
        if (rc == 0 || !strstr(err, bad[i].want)) fail_msg("case %zu: rc %d, \"%s\" lacks \"%s\"", i, rc, err, bad[i].want);
        config_free(&c);
    }
}

static void test_bad_configs(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        Config c;
        char err[ERR_LEN] = "";
        int rc;
        char path[] = "/tmp/dapo-bad-XXXXXX";
        if (bad[i].arg) {
            const char *args[] = {bad[i].arg};
            rc = run_cli(&c, args, 1, NULL, err);
        } else {
            int fd = mkstemp(path);
            assert_true(write(fd, bad[i].yaml, strlen(bad[i].yaml)) > 0);
            close(fd);
            const char *args[] = {"--config", path};
            rc = run_cli(&c, args, 2, NULL, err);
            unlink(path);
        }
        if (rc == 0 || !strstr(err, bad[i].want1) || !strstr(err, bad[i].want2))
            fail_msg("case %zu (%s): rc %d, message \"%s\" lacks \"%s\" / \"%s\"", i,
                     bad[i].arg ? bad[i].arg : bad[i].yaml, rc, err, bad[i].want1, bad[i].want2);
        config_free(&c);
    }
}

/* Runs load_file on yaml with fd 2 captured into cap (n bytes); returns load_file's code. */
static int load_captured(Config *c, const char *yaml, char err[ERR_LEN], char *cap, size_t n) {
    char path[] = "/tmp/dapo-cfgq-XXXXXX", capp[] = "/tmp/dapo-cfgq-err-XXXXXX";
    int fd = mkstemp(path), cfd = mkstemp(capp);
    assert_true(fd >= 0 && cfd >= 0);
    assert_int_equal(write(fd, yaml, strlen(yaml)), (ssize_t)strlen(yaml));
    close(fd);
    fflush(stderr);
    int saved = dup(2);
    dup2(cfd, 2);
    int rc = config_load_file(c, path, err);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ssize_t got = pread(cfd, cap, n - 1, 0);
    cap[got > 0 ? got : 0] = 0;
    close(cfd);
    unlink(path);
    unlink(capp);
    return rc;
}

/* An empty file (or only comments, or an empty section) is all defaults; libfyaml never prints its own lines. */
static void test_empty_and_quiet(void **state) {
    (void)state;
    const char *empties[] = {"", "# nothing here\n", "data:\n", "---\n"};
    char err[ERR_LEN] = "", cap[4096];
    for (size_t i = 0; i < sizeof empties / sizeof empties[0]; i++) {
        Config c;
        config_defaults(&c);
        if (load_captured(&c, empties[i], err, cap, sizeof cap) != 0) fail_msg("'%s': %s", empties[i], err);
        assert_int_equal(c.train_batch_size, 1024);
        assert_null(strstr(cap, "[ERR]"));
        config_free(&c);
    }
    Config c;
    config_defaults(&c);
    assert_int_equal(load_captured(&c, "a: 1\nb: [x\n", err, cap, sizeof cap), ERR_DECODE);
    assert_non_null(strstr(err, ":2: not valid YAML"));
    assert_null(strstr(cap, "[ERR]"));
    assert_null(strstr(cap, "error:"));
    config_free(&c);
}

/* The address forms that are accepted (the refused ones are in bad[]). */
static void test_endpoint_forms(void **state) {
    (void)state;
    const char *ok[] = {"cluster.http=[::1]:8080", "cluster.http=0.0.0.0:0", "cluster.http=10.1.2.3:65535",
                        "cluster.bind=tcp://*:*", "cluster.bind=tcp://0.0.0.0:5555", "cluster.weights_bind=ipc:///tmp/w",
                        "cluster.coordinator=tcp://node-1.example:5555", "cluster.weights=tcp://[::1]:5556",
                        "cluster.collective=inproc://coll"};
    Config c;
    char err[ERR_LEN] = "";
    if (run_cli(&c, ok, (int)(sizeof ok / sizeof ok[0]), NULL, err)) fail_msg("%s", err);
    assert_string_equal(c.http, "10.1.2.3:65535");
    assert_string_equal(c.bind, "tcp://0.0.0.0:5555");
    assert_string_equal(c.weights_bind, "ipc:///tmp/w");
    assert_string_equal(c.coordinator, "tcp://node-1.example:5555");
    assert_string_equal(c.weights, "tcp://[::1]:5556");
    assert_string_equal(c.collective, "inproc://coll");
    config_free(&c);
}

/* What is not a YAML config at all is refused, naming the file: a directory, a binary file (a NUL or other control
 * byte), bytes that are not UTF-8. A truly empty file stays all defaults. */
static void test_not_a_config_file(void **state) {
    (void)state;
#define B(lit) lit, sizeof lit - 1
    static const struct { const char *bytes; size_t n; const char *want; } cases[] = {
        {B("\x00\x01\x02" "binary\xff"), ":1: not a text file: control byte 0x00 at byte offset 0"},
        {B("\x7f" "ELF\x02\x01\x01"), ":1: not a text file: control byte 0x02 at byte offset 4"},
        {B("data:\n  seed: 3\n  tokenizer: \xc3\x28\n"), ":3: not valid UTF-8 text: byte 0xc3 at byte offset 29"},
        {B("data:\n  tokenizer: caf\xc3\xa9\n"), NULL},       /* UTF-8 text is fine */
        {B(""), NULL},                                          /* empty: all defaults */
    };
#undef B
    char err[ERR_LEN];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[] = "/tmp/dapo-cfgbin-XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, cases[i].bytes, cases[i].n), (ssize_t)cases[i].n);
        close(fd);
        Config c;
        const char *args[] = {"--config", path};
        err[0] = 0;
        int rc = run_cli(&c, args, 2, NULL, err);
        if (cases[i].want ? rc != ERR_DECODE || !strstr(err, path) || !strstr(err, cases[i].want) : rc != 0)
            fail_msg("case %zu: rc %d, message \"%s\" lacks \"%s\"", i, rc, err, cases[i].want ? cases[i].want : "");
        if (i == 3) assert_string_equal(c.tokenizer_path, "caf\xc3\xa9");
        config_free(&c);
        unlink(path);
    }
    char dir[] = "/tmp/dapo-cfgdir-XXXXXX", want[64];
    assert_non_null(mkdtemp(dir));
    Config c;
    const char *args[] = {"--config", dir};
    assert_int_equal(run_cli(&c, args, 2, NULL, err), ERR_INVAL);
    snprintf(want, sizeof want, "%s: is a directory", dir);
    assert_non_null(strstr(err, want));
    config_free(&c);
    rmdir(dir);
}

/* --help / -h: found anywhere but after --config; the usage names the program and the shared flags (each daemon's
 * main prints it and exits 0: tests/integration/test_verifier_daemon.c runs all four). */
static void test_help(void **state) {
    (void)state;
    char *a1[] = {"x", "data.seed=3", "--help", NULL}, *a2[] = {"x", "-h", NULL}, *a3[] = {"x", "--config", "-h", NULL},
         *a4[] = {"x", "--print-config", NULL};
    assert_true(config_help_wanted(3, a1));
    assert_true(config_help_wanted(2, a2));
    assert_false(config_help_wanted(3, a3));       /* a config file named "-h" */
    assert_false(config_help_wanted(2, a4));
    char buf[2048];
    FILE *f = fmemopen(buf, sizeof buf, "w");
    config_usage_print(f, "/some/dir/dapo-x", "[--id NAME]\n  --id NAME         a name");
    fclose(f);
    assert_non_null(strstr(buf, "usage: dapo-x [--config FILE] [key.path=value ...] [--print-config] [--id NAME]\n"));
    assert_non_null(strstr(buf, "  --id NAME         a name\n  --help, -h"));
}

/* algorithm.rollout_correction (issue 15): YAML null turns IS off ("" after loading); actor.use_rollout_log_probs and
 * bypass_mode mean the same and may each be set alone, but set both to different values is refused naming both;
 * loss_type reinforce is refused. */
static void test_rollout_correction_keys(void **state) {
    (void)state;
    char path[] = "/tmp/dapo-cfg-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *yaml = "algorithm:\n  rollout_correction:\n    rollout_is: null\n    rollout_rs: token_k1,seq_mean_k3\n"
                       "    rollout_rs_threshold: \"0.5_2.0,0.01\"\n";
    assert_int_equal(write(fd, yaml, strlen(yaml)), (ssize_t)strlen(yaml));
    close(fd);
    Config c;
    char err[ERR_LEN];
    const char *a1[] = {"--config", path};
    assert_int_equal(run_cli(&c, a1, 2, NULL, err), 0);
    assert_string_equal(c.rc_rollout_is, "");
    assert_string_equal(c.rc_rollout_rs, "token_k1,seq_mean_k3");
    assert_true(config_is_set(&c, "algorithm.rollout_correction.rollout_is"));
    assert_false(config_is_set(&c, "algorithm.rollout_correction.bypass_mode"));
    assert_int_equal(config_validate(&c, err), 0);
    config_free(&c);
    unlink(path);
    const char *a2[] = {"actor_rollout_ref.actor.use_rollout_log_probs=true"};
    assert_int_equal(run_cli(&c, a2, 1, NULL, err), 0);
    assert_int_equal(config_validate(&c, err), 0);
    config_free(&c);
    const char *a3[] = {"actor_rollout_ref.actor.use_rollout_log_probs=true", "algorithm.rollout_correction.bypass_mode=false"};
    assert_int_equal(run_cli(&c, a3, 2, NULL, err), ERR_INVAL);        /* config_from_cli validates */
    assert_non_null(strstr(err, "actor_rollout_ref.actor.use_rollout_log_probs (true)"));
    assert_non_null(strstr(err, "algorithm.rollout_correction.bypass_mode (false)"));
    config_free(&c);
    const char *a4[] = {"actor_rollout_ref.actor.use_rollout_log_probs=true", "algorithm.rollout_correction.bypass_mode=true"};
    assert_int_equal(run_cli(&c, a4, 2, NULL, err), 0);
    assert_int_equal(config_validate(&c, err), 0);
    config_free(&c);
    const char *a5[] = {"algorithm.rollout_correction.loss_type=reinforce"};
    assert_int_equal(run_cli(&c, a5, 1, NULL, err), ERR_UNSUPPORTED);
    assert_non_null(strstr(err, "reinforce"));
    config_free(&c);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Loads the YAML text as a config file into c (defaults first); config_load_file's result. */
static int load_yaml(Config *c, const char *yaml, char err[ERR_LEN]) {
    char path[] = "/tmp/dapo-cfg-yaml-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    write_text(path, yaml);
    config_defaults(c);
    int rc = config_load_file(c, path, err);
    unlink(path);
    return rc;
}

/* Issue 38: a "billion laughs" file (22 levels, each alias listed twice: 2^22 nodes, 3.4 GB once resolved) is refused
 * before it is resolved, quickly and naming why; anchors and aliases of a real size still work, and the
 * coordinator's config text (config_take_from) is bounded the same way. */
static void test_alias_bomb_refused(void **state) {
    (void)state;
    char yaml[8192], err[ERR_LEN];
    int k = snprintf(yaml, sizeof yaml, "x0: &a0 [\"lol\", \"lol\"]\n");
    for (int i = 1; i <= 22; i++) k += snprintf(yaml + k, sizeof yaml - (size_t)k, "x%d: &a%d [*a%d, *a%d]\n", i, i, i - 1, i - 1);
    Config c;
    int64_t t0 = clock_ms();
    assert_int_equal(load_yaml(&c, yaml, err), ERR_INVAL);
    assert_true(clock_ms() - t0 < 5000);
    assert_non_null(strstr(err, "expand to more than"));
    config_free(&c);
    config_defaults(&c);
    int taken = 0;
    assert_int_equal(config_take_from(&c, yaml, strlen(yaml), &taken, err), ERR_INVAL);
    config_free(&c);
    if (load_yaml(&c, "data:\n  max_prompt_length: &n 77\n  max_response_length: *n\n", err)) fail_msg("%s", err);
    assert_int_equal(c.max_prompt_length, 77);
    assert_int_equal(c.max_response_length, 77);
    config_free(&c);
    assert_int_equal(load_yaml(&c, "data:\n  max_prompt_length: *nowhere\n", err), ERR_DECODE);   /* libfyaml's words */
    config_free(&c);
    size_t big = CONFIG_FILE_MAX_BYTES + 64, at = 0;       /* past the size cap: refused before libfyaml parses it */
    char *text = malloc(big + 1);
    at += (size_t)snprintf(text, big, "data:\n");
    for (int i = 0; at + 32 < big; i++) at += (size_t)snprintf(text + at, big - at, "  k%d: %d\n", i, i);
    assert_int_equal(load_yaml(&c, text, err), ERR_IO);
    assert_non_null(strstr(err, "is larger than 262144 bytes"));
    free(text);
    config_free(&c);
}

/* Issue 39: fsdp_config.fsdp_size: 1 replicates, -1 or >= cluster.num_learners shards (verl's DAPO scripts pass 2 to a
 * single learner: it loads); 0 and hybrid sizes are refused naming what works. */
static void test_fsdp_size(void **state) {
    (void)state;
    Config c;
    char err[ERR_LEN];
    const char *ok1[] = {"actor_rollout_ref.actor.fsdp_config.fsdp_size=2"};
    assert_int_equal(run_cli(&c, ok1, 1, NULL, err), 0);
    assert_false(config_optim_sharded(&c));                /* one learner: nothing to shard */
    config_free(&c);
    const char *ok2[] = {"actor_rollout_ref.actor.fsdp_config.fsdp_size=-1", "cluster.num_learners=2",
                         "actor_rollout_ref.actor.fsdp_config.reshard_after_forward=true"};
    assert_int_equal(run_cli(&c, ok2, 3, NULL, err), 0);
    assert_true(config_optim_sharded(&c));
    config_free(&c);
    const char *bad[] = {"actor_rollout_ref.actor.fsdp_config.fsdp_size=2", "cluster.num_learners=4"};
    assert_int_equal(run_cli(&c, bad, 2, NULL, err), ERR_INVAL);
    assert_non_null(strstr(err, "fsdp_size: 2 is not implemented"));
    assert_non_null(strstr(err, "at least cluster.num_learners, 4"));
    config_free(&c);
    const char *zero[] = {"actor_rollout_ref.actor.fsdp_config.fsdp_size=0"};
    assert_int_equal(run_cli(&c, zero, 1, NULL, err), ERR_INVAL);
    config_free(&c);
}

/* `defaults:` (docs/design.md §5): bases load first, in order, paths relative to the naming file; the file's own keys
 * win over its bases and a later base over an earlier one; a cycle, a missing base and a bad entry are refused with
 * the file and line. */
static void test_defaults_bases(void **state) {
    (void)state;
    char dir[] = "/tmp/dapo-defaults-XXXXXX", p[4][128], err[ERR_LEN];
    assert_non_null(mkdtemp(dir));
    const char *names[4] = {"base.yaml", "mid.yaml", "top.yaml", "loop.yaml"};
    for (int i = 0; i < 4; i++) snprintf(p[i], sizeof p[i], "%s/%s", dir, names[i]);
    char sub[160];
    snprintf(sub, sizeof sub, "mkdir -p %s/sub", dir);
    assert_int_equal(system(sub), 0);
    write_text(p[0], "data:\n  train_batch_size: 16\n  gen_batch_size: 24\nactor_rollout_ref:\n  rollout:\n    n: 4\n");
    write_text(p[1], "defaults: base.yaml\ndata:\n  gen_batch_size: 32\n");
    char top[256], nested[160];
    snprintf(nested, sizeof nested, "%s/sub/leaf.yaml", dir);
    write_text(nested, "defaults: [../mid.yaml]\nactor_rollout_ref:\n  rollout:\n    n: 6\n");
    snprintf(top, sizeof top, "defaults: [sub/leaf.yaml, %s]\ndata:\n  train_batch_size: 8\n", p[0]);
    write_text(p[2], top);
    Config c;
    config_defaults(&c);
    assert_int_equal(config_load_file(&c, p[2], err), 0);
    assert_int_equal(c.train_batch_size, 8);             /* the file's own key */
    assert_int_equal(c.gen_batch_size, 24);              /* base.yaml, named after sub/leaf.yaml, wins over mid's 32 */
    assert_int_equal(c.rollout_n, 4);                    /* ... and over leaf's 6 */
    config_free(&c);
    config_defaults(&c);
    assert_int_equal(config_load_file(&c, nested, err), 0);
    assert_int_equal(c.gen_batch_size, 32);              /* mid over base */
    assert_int_equal(c.rollout_n, 6);                    /* leaf over both */
    config_free(&c);

    write_text(p[3], "defaults: [loop.yaml]\ndata:\n  train_batch_size: 8\n");   /* itself */
    config_defaults(&c);
    assert_int_equal(config_load_file(&c, p[3], err), ERR_INVAL);
    assert_non_null(strstr(err, "a cycle"));
    assert_non_null(strstr(err, "loop.yaml:1"));
    config_free(&c);
    write_text(p[3], "defaults: [nowhere.yaml]\n");
    config_defaults(&c);
    assert_int_equal(config_load_file(&c, p[3], err), ERR_IO);
    assert_non_null(strstr(err, "nowhere.yaml"));
    config_free(&c);
    write_text(p[3], "defaults:\n  x: 1\n");
    config_defaults(&c);
    assert_int_equal(config_load_file(&c, p[3], err), ERR_INVAL);
    assert_non_null(strstr(err, "defaults: a list of config files"));
    config_free(&c);
    char rm[160];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    assert_int_equal(system(rm), 0);
}

/* The run keys a worker sends in Hello: only those set, never cluster.* or trainer.device; the first differing key
 * of the worker's is named with both values. */
static void test_run_keys(void **state) {
    (void)state;
    Config co, w;
    char err[ERR_LEN];
    config_defaults(&co);
    config_defaults(&w);
    assert_int_equal(config_set(&co, "actor_rollout_ref.rollout.temperature", "0.9", "test", err), 0);
    assert_int_equal(config_set(&w, "actor_rollout_ref.rollout.temperature", "0.7", "test", err), 0);
    assert_int_equal(config_set(&w, "cluster.heartbeat_ms", "100", "test", err), 0);
    assert_int_equal(config_set(&w, "trainer.device", "cuda", "test", err), 0);
    uint64_t h1, h2;
    char *mine = config_run_keys(&co, false, &h1), *theirs = config_run_keys(&w, true, &h2);
    assert_string_equal(theirs, "actor_rollout_ref.rollout.temperature: 0.7\n");   /* set, and not local */
    assert_null(strstr(mine, "cluster."));
    assert_null(strstr(mine, "trainer.device"));
    assert_non_null(strstr(mine, "actor_rollout_ref.rollout.temperature: 0.9\n"));
    assert_true(h1 != h2);
    char key[128], a[64], b[64];
    assert_int_equal(config_run_keys_diff(mine, theirs, key, sizeof key, a, b, sizeof a), 1);
    assert_string_equal(key, "actor_rollout_ref.rollout.temperature");
    assert_string_equal(a, "0.9");
    assert_string_equal(b, "0.7");
    assert_int_equal(config_run_keys_diff(mine, "", key, sizeof key, a, b, sizeof a), 0);   /* none set: agrees */
    xfree(theirs);
    assert_int_equal(config_set(&w, "actor_rollout_ref.rollout.temperature", "0.9", "test", err), 0);
    theirs = config_run_keys(&w, true, NULL);
    assert_int_equal(config_run_keys_diff(mine, theirs, key, sizeof key, a, b, sizeof a), 0);
    assert_int_equal(config_run_keys_diff(mine, "no.such.key: 1\n", key, sizeof key, a, b, sizeof a), 1);
    assert_string_equal(key, "no.such.key");
    xfree(mine);
    xfree(theirs);
    config_free(&co);
    config_free(&w);
}

/* A worker takes from the coordinator's config every key it did not set, except cluster.* (docs/design.md §5): its
 * own keys stay, the taken ones are not "set" (its Hello still sends only its own), strings with quotes, backslashes
 * and control bytes and lists travel exactly; a text that is not a config is refused. And --print-config=local. */
static void test_take_from(void **state) {
    (void)state;
    Config co, w;
    char err[ERR_LEN];
    config_defaults(&co);
    const char *set[][2] = {{"actor_rollout_ref.rollout.temperature", "0.9"}, {"trainer.device", "cuda"},
                            {"actor_rollout_ref.model.path", "/m/a \"b\" c\\d\te"}, {"cluster.heartbeat_ms", "250"},
                            {"data.train_files", "[x.jsonl, y y.jsonl]"}, {"actor_rollout_ref.rollout.top_p", "0.5"},
                            {"actor_rollout_ref.actor.optim.lr", "1.23456789012345e-5"}};
    for (size_t i = 0; i < sizeof set / sizeof set[0]; i++)
        assert_int_equal(config_set(&co, set[i][0], set[i][1], "test", err), 0);
    char *yaml = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&yaml, &len);
    config_print_yaml(&co, f);
    fclose(f);
    config_defaults(&w);
    assert_int_equal(config_set(&w, "actor_rollout_ref.rollout.top_p", "0.5", "test", err), 0);   /* its own */
    assert_int_equal(config_set(&w, "cluster.num_learners", "1", "test", err), 0);
    int taken = -1;
    assert_int_equal(config_take_from(&w, yaml, len, &taken, err), 0);
    assert_true(taken > 50);
    assert_true(w.temperature == 0.9);
    assert_true(w.lr == 1.23456789012345e-5);                       /* floats travel exactly, not to 10 digits */
    assert_int_equal(w.device, CFG_DEVICE_CUDA);                        /* unset here: the coordinator's */
    assert_string_equal(w.model_path, "/m/a \"b\" c\\d\te");
    assert_int_equal(w.train_files.n, 2);
    assert_string_equal(w.train_files.v[1], "y y.jsonl");
    assert_int_equal(w.heartbeat_ms, 1000);                         /* cluster.*: never taken */
    assert_false(config_is_set(&w, "actor_rollout_ref.rollout.temperature"));
    char *mine = config_run_keys(&w, true, NULL);
    assert_string_equal(mine, "actor_rollout_ref.rollout.top_p: 0.5\n");
    xfree(mine);
    char *a = config_run_keys(&co, false, NULL), *b = config_run_keys(&w, false, NULL);
    assert_string_equal(a, b);                                      /* the same run */
    xfree(a);
    xfree(b);
    assert_int_equal(config_take_from(&w, "just text", 9, NULL, err), ERR_DECODE);
    assert_non_null(strstr(err, "the coordinator's config"));
    assert_int_equal(config_take_from(&w, "data: {max_prompt_length: -3}", 30, NULL, err), ERR_INVAL);
    assert_non_null(strstr(err, "data.max_prompt_length"));
    free(yaml);
    yaml = NULL;
    f = open_memstream(&yaml, &len);
    config_print_local_yaml(&co, f);
    fclose(f);
    assert_non_null(strstr(yaml, "heartbeat_ms: 250"));
    assert_non_null(strstr(yaml, "device: \"cuda\""));
    assert_null(strstr(yaml, "temperature"));
    free(yaml);
    config_free(&co);
    config_free(&w);
}

/* Hydra's override grammar (verl's scripts): +k=v and ++k=v set, ~k restores the default, ~k=v only when k is v. */
static void test_hydra_overrides(void **state) {
    (void)state;
    Config c;
    char err[ERR_LEN];
    const char *a[] = {"+actor_rollout_ref.actor.clip_ratio_high=0.3", "++data.train_batch_size=8",
                       "data.gen_batch_size=8", "~data.gen_batch_size", "+actor_rollout_ref.rollout.name=vllm",
                       "~actor_rollout_ref.rollout.name", "actor_rollout_ref.rollout.top_p=0.9",
                       "~actor_rollout_ref.rollout.top_p=0.9", "actor_rollout_ref.actor.ppo_mini_batch_size=8"};
    assert_int_equal(run_cli(&c, a, 9, NULL, err), 0);
    assert_true(c.clip_ratio_high == 0.3);
    assert_int_equal(c.train_batch_size, 8);
    assert_int_equal(c.gen_batch_size, 0);                         /* deleted: the default (null) again, not "set" */
    assert_false(config_is_set(&c, "data.gen_batch_size"));
    assert_true(c.top_p == 1.0);
    config_free(&c);
    const char *b[] = {"~actor_rollout_ref.rollout.top_p=0.5"};
    assert_int_equal(run_cli(&c, b, 1, NULL, err), ERR_INVAL);
    assert_non_null(strstr(err, "the key is 1, not that value"));
    config_free(&c);
    const char *d[] = {"~data.train_batch_sise"};
    assert_int_equal(run_cli(&c, d, 1, NULL, err), ERR_NOTFOUND);
    assert_non_null(strstr(err, "did you mean 'data.train_batch_size'"));
    config_free(&c);
    const char *e[] = {"+++data.train_batch_size=8"};          /* not an override: left for the program */
    char *argv[] = {"x", (char *)e[0], NULL};
    int argc = 2;
    assert_int_equal(config_from_cli(&c, &argc, argv, NULL, err), 0);
    assert_int_equal(argc, 2);
    config_free(&c);
}

/* verl's reward namespace (reward.*, verl 0.9) and its DAPO recipe's reward_kwargs.overlong_buffer_cfg.* spell the
 * reward_model.* rows: one setting, so two spellings set differently are refused; max_resp_len must be
 * data.max_response_length; the naive reward manager needs the overlong buffer off. */
static void test_reward_namespace(void **state) {
    (void)state;
    Config c;
    char err[ERR_LEN];
    const char *a[] = {"+reward.reward_kwargs.overlong_buffer_cfg.len=512", "+reward.reward_kwargs.overlong_buffer_cfg."
                       "penalty_factor=0.5", "reward.reward_manager.name=dapo", "data.max_response_length=2048",
                       "+reward.reward_kwargs.max_resp_len=2048", "reward_model.overlong_buffer.len=512",
                       "+reward_model.reward_kwargs.overlong_buffer_cfg.enable=True",
                       "+reward.reward_kwargs.overlong_buffer_cfg.log=False"};
    assert_int_equal(run_cli(&c, a, 8, NULL, err), 0);
    assert_int_equal(c.overlong_buffer_len, 512);
    assert_true(c.overlong_penalty_factor == 0.5 && c.overlong_buffer_enable);
    assert_int_equal(c.reward_manager, CFG_REWARD_DAPO);
    assert_int_equal(c.max_resp_len, 2048);
    assert_true(config_is_set(&c, "reward_model.overlong_buffer.len"));
    config_free(&c);
    const char *b[] = {"reward.reward_kwargs.overlong_buffer_cfg.len=512", "reward_model.overlong_buffer.len=256"};
    assert_int_equal(run_cli(&c, b, 2, NULL, err), ERR_INVAL);
    assert_non_null(strstr(err, "reward_model.overlong_buffer.len=256 and reward.reward_kwargs.overlong_buffer_cfg.len=512"
                            " are one setting"));
    config_free(&c);
    const char *d[] = {"+reward.reward_kwargs.max_resp_len=4096"};
    assert_int_equal(run_cli(&c, d, 1, NULL, err), ERR_INVAL);
    assert_non_null(strstr(err, "data.max_response_length is 512"));
    config_free(&c);
    const char *e[] = {"reward.reward_manager.name=naive", "reward_model.overlong_buffer.enable=true"};
    assert_int_equal(run_cli(&c, e, 2, NULL, err), ERR_INVAL);
    assert_non_null(strstr(err, "naive applies no overlong penalty"));
    config_free(&c);
    const char *f[] = {"reward.reward_manager.name=naive", "reward_model.overlong_buffer.enable=false"};
    assert_int_equal(run_cli(&c, f, 2, NULL, err), 0);
    config_free(&c);
    const char *g[] = {"reward.reward_manager.name=prime"};
    assert_int_equal(run_cli(&c, g, 1, NULL, err), ERR_INVAL);
    assert_non_null(strstr(err, "allowed: dapo|naive"));
    config_free(&c);
    /* the YAML form of the new namespace */
    assert_int_equal(load_yaml(&c, "reward:\n  reward_manager: {name: dapo}\n  reward_kwargs:\n    overlong_buffer_cfg: "
                               "{enable: true, len: 300, penalty_factor: 2.0, log: false}\n", err), 0);
    assert_true(c.overlong_buffer_len == 300 && c.overlong_penalty_factor == 2.0);
    config_free(&c);
}

/* verl 0.9's optimizer names: lr_scheduler_type (warmup_style), clip_grad (grad_clip), betas [beta1, beta2] on the
 * command line and in YAML; ray_kwargs.* tune Ray only (ignored). */
static void test_verl_optim_names(void **state) {
    (void)state;
    Config c;
    char err[ERR_LEN];
    const char *a[] = {"actor_rollout_ref.actor.optim.lr_scheduler_type=cosine", "actor_rollout_ref.actor.optim.clip_grad=0.5",
                       "actor_rollout_ref.actor.optim.betas=[0.9, 0.95]", "+ray_kwargs.ray_init.num_cpus=8",
                       "actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes=4096"};
    assert_int_equal(run_cli(&c, a, 5, NULL, err), 0);
    assert_int_equal(c.warmup_style, CFG_WARMUP_COSINE);
    assert_true(c.grad_clip == 0.5 && c.adam_beta1 == 0.9 && c.adam_beta2 == 0.95);
    config_free(&c);
    const char *b[] = {"actor_rollout_ref.actor.optim.betas=[0.9]"};
    assert_int_equal(run_cli(&c, b, 1, NULL, err), ERR_INVAL);
    assert_non_null(strstr(err, "is not a pair [beta1, beta2]"));
    config_free(&c);
    const char *d[] = {"actor_rollout_ref.actor.grad_clip=1.0", "actor_rollout_ref.actor.optim.clip_grad=2.0"};
    assert_int_equal(run_cli(&c, d, 2, NULL, err), ERR_INVAL);      /* one setting, two spellings */
    config_free(&c);
    assert_int_equal(load_yaml(&c, "actor_rollout_ref:\n  actor:\n    optim: {betas: [0.8, 0.99], lr_scheduler_type: "
                               "constant}\n", err), 0);
    assert_true(c.adam_beta1 == 0.8 && c.adam_beta2 == 0.99);
    config_free(&c);
}

/* --print-config's provenance comments: default, file (the base for a key its base set), command line, coordinator;
 * the annotated text loads back as the same config. */
static void test_print_provenance(void **state) {
    (void)state;
    char dir[] = "/tmp/dapo-prov-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char base[128], top[128], out[128];
    snprintf(base, sizeof base, "%s/base.yaml", dir);
    snprintf(top, sizeof top, "%s/top.yaml", dir);
    snprintf(out, sizeof out, "%s/printed.yaml", dir);
    write_text(base, "data: {train_batch_size: 8, gen_batch_size: 8, train_files: [a.jsonl]}\n"
                     "actor_rollout_ref: {actor: {ppo_mini_batch_size: 8}}\n");
    write_text(top, "defaults: [base.yaml]\ndata: {max_prompt_length: 64}\n");
    Config c, back;
    char err[ERR_LEN];
    const char *a[] = {"--config", top, "actor_rollout_ref.rollout.n=4"};
    assert_int_equal(run_cli(&c, a, 3, NULL, err), 0);
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    config_print_annotated(&c, m, false);
    fclose(m);
    char want[300];
    snprintf(want, sizeof want, "  train_batch_size: 8  # file %s\n", base);
    assert_non_null(strstr(text, want));
    snprintf(want, sizeof want, "  max_prompt_length: 64  # file %s\n", top);
    assert_non_null(strstr(text, want));
    assert_non_null(strstr(text, "    n: 4  # command line\n"));
    assert_true(config_is_set(&c, "data.train_files"));            /* a YAML list is "set" like a scalar */
    snprintf(want, sizeof want, "  train_files: [\"a.jsonl\"]  # file %s\n", base);
    assert_non_null(strstr(text, want));
    assert_non_null(strstr(text, "    clip_ratio_high: 0.2  # default\n"));
    write_text(out, text);
    config_defaults(&back);
    assert_int_equal(config_load_file(&back, out, err), 0);
    char *x = config_run_keys(&c, false, NULL), *y = config_run_keys(&back, false, NULL);
    assert_string_equal(x, y);                                       /* loads back as the same config */
    xfree(x);
    xfree(y);
    free(text);
    text = NULL;
    m = open_memstream(&text, &len);
    config_print_yaml(&c, m);                                        /* the plain text: no comments */
    fclose(m);
    assert_null(strchr(text, '#'));
    free(text);
    config_free(&c);
    config_free(&back);
    char rm[200];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    assert_int_equal(system(rm), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_print_provenance),
        cmocka_unit_test(test_verl_optim_names),
        cmocka_unit_test(test_reward_namespace),
        cmocka_unit_test(test_hydra_overrides),
        cmocka_unit_test(test_take_from),
        cmocka_unit_test(test_empty_and_quiet),
        cmocka_unit_test(test_help),
        cmocka_unit_test(test_defaults_are_verls),
        cmocka_unit_test(test_overrides_and_leftover_args),
        cmocka_unit_test(test_yaml_file),
        cmocka_unit_test(test_v1_trainer_modes),
        cmocka_unit_test(test_bad_configs),
        cmocka_unit_test(test_logger_and_reward_keys),
        cmocka_unit_test(test_not_a_config_file),
        cmocka_unit_test(test_endpoint_forms),
        cmocka_unit_test(test_rollout_correction_keys),
        cmocka_unit_test(test_defaults_bases),
        cmocka_unit_test(test_run_keys),
        cmocka_unit_test(test_alias_bomb_refused),
        cmocka_unit_test(test_fsdp_size),
    };
    return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
