/* common/core/config.h: the one configuration table of dapo (docs/design.md §5, docs/conventions.md rule 10).
 *
 * Keys use verl's names where verl has the knob, and defaults are verl 0.9.1's (issue 37's policy) except those listed
 * with their reasons in tests/unit/test_config_verl.c (dapo_defaults; docs/design.md §5): the configs that train DAPO
 * set DAPO's values (configs/default.yaml, gsm8k.yaml, dapo-qwen2.5-32b.yaml).
 * One table (config.c: cfg_table) serves the YAML file, `key.path=value` overrides and --print-config.
 * verl's keys without a row have a rule in config_verl.h (ignored with a reason, or accepted only at the value dapo
 * trains with); unknown keys, wrong types and out-of-range values are errors naming the key, the value and what is
 * allowed.
 * Each issue that adds a knob adds a field here and a row to cfg_table.
 * Not here: the meaning of the knobs (each consumer documents its own). */
#ifndef DAPO_CONFIG_H
#define DAPO_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/err.h"

typedef struct {
    int    n;
    char **v;              /* owned; each entry xstrdup'd */
} StrList;

/* The values of the CFG_ENUM keys, in the order of their allowed lists (config.c's table): a setting is one of these,
 * never a string to compare again (config_enum_name gives the text for messages). */
typedef enum { CFG_TRUNC_ERROR, CFG_TRUNC_LEFT, CFG_TRUNC_RIGHT, CFG_TRUNC_MIDDLE } CfgTruncation;   /* data.truncation */
typedef enum { CFG_CHAT_AUTO, CFG_CHAT_QWEN25, CFG_CHAT_QWEN3, CFG_CHAT_LLAMA3, CFG_CHAT_NONE } CfgChatTemplate;
typedef enum { CFG_MALFORMED_SKIP, CFG_MALFORMED_ERROR } CfgOnMalformed;                          /* data.on_malformed */
typedef enum { CFG_AGG_TOKEN_MEAN, CFG_AGG_SEQ_MEAN_TOKEN_MEAN, CFG_AGG_SEQ_MEAN_TOKEN_SUM,
               CFG_AGG_SEQ_MEAN_TOKEN_SUM_NORM } CfgLossAgg;                          /* actor.loss_agg_mode */
typedef enum { CFG_LOSS_VANILLA, CFG_LOSS_GSPO, CFG_LOSS_CISPO, CFG_LOSS_SAPO, CFG_LOSS_GPG, CFG_LOSS_DPPO_TV,
               CFG_LOSS_DPPO_KL, CFG_LOSS_CLIP_COV, CFG_LOSS_KL_COV, CFG_LOSS_GEO_MEAN } CfgLossMode;
                                                                          /* actor.policy_loss.loss_mode (dapo/loss.h) */
typedef enum { CFG_KL_K1, CFG_KL_KL, CFG_KL_ABS, CFG_KL_MSE, CFG_KL_K2, CFG_KL_LOW_VAR_KL, CFG_KL_K3 } CfgKlType;
                          /* actor.kl_loss_type (dapo/kl.h; each also with a trailing '+': the value + CFG_KL_PLUS) */
#define CFG_KL_PLUS 7
typedef enum { CFG_KL_CTRL_FIXED, CFG_KL_CTRL_ADAPTIVE } CfgKlCtrl;
typedef enum { CFG_V1_SYNC, CFG_V1_COLOCATE_ASYNC, CFG_V1_SEPARATE_ASYNC } CfgTrainerMode;   /* trainer.v1.trainer_mode */
typedef enum { CFG_OFF_POLICY_DROP, CFG_OFF_POLICY_WAIT } CfgOffPolicyStrategy;  /* trainer.staleness_strategy */
typedef enum { CFG_REFILL_AUTO, CFG_REFILL_ROUND, CFG_REFILL_AT_ONCE } CfgRefill;  /* algorithm.filter_groups.refill */                       /* algorithm.kl_ctrl.type */
typedef enum { CFG_WARMUP_CONSTANT, CFG_WARMUP_COSINE } CfgWarmupStyle;                 /* actor.optim.warmup_style */
typedef enum { CFG_ADV_GRPO, CFG_ADV_RLOO, CFG_ADV_OPO, CFG_ADV_GPG, CFG_ADV_GRPO_PASSK, CFG_ADV_REINFORCE_PP,
               CFG_ADV_REINFORCE_PP_BASELINE, CFG_ADV_GRPO_VECTORIZED, CFG_ADV_RLOO_VECTORIZED } CfgAdvEstimator;
                                                    /* algorithm.adv_estimator (dapo/advantages.h; the last two: aliases) */
typedef enum { CFG_METRIC_ACC, CFG_METRIC_SCORE, CFG_METRIC_SEQ_REWARD,
               CFG_METRIC_SEQ_FINAL_REWARD } CfgFilterMetric;                    /* algorithm.filter_groups.metric */
typedef enum { CFG_RC_LOSS_PPO_CLIP, CFG_RC_LOSS_REINFORCE } CfgRcLossType;  /* algorithm.rollout_correction.loss_type */
typedef enum { CFG_DEVICE_CPU, CFG_DEVICE_CUDA } CfgDevice;                              /* trainer.device */
typedef enum { CFG_REWARD_DAPO, CFG_REWARD_NAIVE } CfgRewardManager;              /* reward_model.reward_manager */
typedef enum { CFG_RESUME_AUTO, CFG_RESUME_DISABLE, CFG_RESUME_PATH } CfgResumeMode;     /* trainer.resume_mode */

enum { CFG_SRC_DEFAULT, CFG_SRC_CLI, CFG_SRC_COORDINATOR, CFG_SRC_OTHER, CFG_SRC_FILE };   /* Config.source */

typedef struct Config {
    /* data.* */
    StrList train_files, val_files;
    int     train_batch_size;         /* prompts (groups) per training step */
    int     gen_batch_size;           /* prompts drawn per generation round; 0 (null): train_batch_size */
    int     max_prompt_length;        /* tokens */
    int     max_response_length;      /* tokens, = rollout max_tokens, EOS included */
    bool    filter_overlong_prompts;
    CfgTruncation truncation;         /* error|left|right|middle */
    int     data_seed;
    bool    shuffle;
    char   *tokenizer_path;           /* dir with tokenizer.json; empty: the model dir */
    CfgChatTemplate chat_template;    /* auto|qwen2.5|qwen3|llama3|none */
    CfgOnMalformed on_malformed;      /* skip|error: a malformed dataset line */
    int     val_max_samples;          /* <=0: all */

    /* actor_rollout_ref.model.* */
    char   *model_path;
    int     max_position_embeddings;  /* verl's model.override_config.max_position_embeddings: 0, config.json's. Read
                                         by no computation: dapo's RoPE (default, llama3) does not use it, and dapo's
                                         context is data.max_prompt_length + max_response_length (vLLM's check of it
                                         against max_model_len has no counterpart) */

    bool    gradient_checkpointing;   /* verl's model.enable_gradient_checkpointing: the learner recomputes each layer's
                                         activations in backward (ModelOptions.recompute; the same gradients) */

    /* actor_rollout_ref.actor.* */
    double  clip_ratio;               /* verl's: the clip range where clip_ratio_low / _high are null */
    double  clip_ratio_low, clip_ratio_high, clip_ratio_c;   /* low / high: NAN when null (settings_loss_params) */
    CfgLossAgg loss_agg_mode;         /* token-mean|seq-mean-token-mean|seq-mean-token-sum|seq-mean-token-sum-norm */
    double  loss_scale_factor;        /* verl's actor.loss_scale_factor: seq-mean-token-sum-norm's divisor; NAN (null):
                                         data.max_response_length (verl: the padded response length) */
    CfgLossMode loss_mode;            /* verl's policy_loss.loss_mode: vanilla (DAPO's), gspo, cispo, sapo, gpg, dppo_* */
    double  tau_pos, tau_neg;         /* sapo's temperatures (verl's actor.tau_pos / tau_neg) */
    double  clip_cov_ratio, clip_cov_lb, clip_cov_ub, kl_cov_ratio, ppo_kl_coef;   /* verl's policy_loss.* (loss.h) */
    int     use_kl_loss;              /* verl's actor.use_kl_loss: a KL-to-reference term in the loss (the learner holds
                                         the reference policy, model.path's weights) */
    double  kl_loss_coef;             /* actor.kl_loss_coef */
    int     kl_loss_type;             /* actor.kl_loss_type: a CfgKlType, + CFG_KL_PLUS for the straight-through form */
    int     ppo_mini_batch_size;      /* prompts per mini-batch (x n responses) */
    int     ppo_micro_batch_size_per_gpu; /* sequences per micro-batch */
    int     ppo_epochs;
    double  grad_clip;                /* global grad-norm clip; <=0: none */
    int     fsdp_size;                /* verl's fsdp_config.fsdp_size: 1 replicates the model and optimizer state on
                                         every learner rank (dapo's default; verl's is -1); -1 or >= cluster.num_learners
                                         shards parameters, gradients and optimizer state over all of them (FSDP full
                                         shard, services/learner/shard.h); 0 and hybrid sizes between are refused */
    bool    reshard_after_forward;    /* verl's fsdp_config.reshard_after_forward (sharded only): true gathers a layer's
                                         parameters again for its backward; false keeps every layer's from forward to
                                         backward (more memory, fewer gathers: ZeRO-2-like) */
    double  entropy_coeff;
    bool    use_dynamic_bsz;
    int     ppo_max_token_len_per_gpu;/* tokens per micro-batch when use_dynamic_bsz */
    double  lr;
    int     lr_warmup_steps;          /* < 0: lr_warmup_steps_ratio x the run's total steps (verl) */
    double  lr_warmup_steps_ratio;    /* verl's; used only when lr_warmup_steps < 0 */
    double  weight_decay;
    CfgWarmupStyle warmup_style;      /* constant|cosine */
    double  min_lr_ratio;             /* cosine floor, fraction of lr */
    double  adam_beta1, adam_beta2, adam_eps;
    bool    use_rollout_log_probs;    /* ours: skip the old-log-prob recompute, use the rollout's */

    /* actor_rollout_ref.rollout.* */
    int     rollout_n;
    double  temperature, top_p;
    int     top_k;                    /* -1: off (verl), 0 also means off */
    int     rollout_seed;             /* verl's rollout.seed (its sampling seed); -1: trainer.seed (dapo's default) */
    bool    batch_invariant;          /* ours: same tokens whatever the batch composition */
    bool    partial_rollout;          /* rollout.partial_rollout (OpenRLHF's partial_rollout_enable, verl's
                                         async_training.partial_rollout): a published version is swapped in under
                                         running sequences, which continue (services/rollout/main.c weights_turn) */
    int     partial_rollout_kv;       /* rollout.partial_rollout_kv: 0 recompute the continued sequences' K/V with the
                                         new weights (default), 1 keep the old weights' K/V */
    bool    mask_offpolicy_partial;   /* rollout.mask_offpolicy_in_partial_rollout (slime's
                                         --mask-offpolicy-in-partial-rollout): a continued response's tokens sampled
                                         before its last weight swap get response_mask 0 (and leave the token-mean
                                         denominator); coordinator: services/coordinator/batch.c */
    bool    enable_prefix_caching;    /* vLLM's/verl's name: sequences copy a shared prompt prefix's K/V from a running
                                         one instead of computing it (model/generate.h "Prefix sharing") */
    int     rollout_dtype;            /* rollout.dtype (verl's key, vLLM's dtype): the storage of the rollout's weights,
                                         0 float32, 1 bfloat16 (rounded once per version; arithmetic stays fp32:
                                         model/generate.h "bf16 weights"). verl's default is bfloat16, dapo's float32 */
    int     kv_cache_dtype;           /* rollout.kv_cache_dtype (dapo's): the KV cache's storage, 0 float32, 1 bfloat16 */
    int     max_num_seqs;             /* running sequences per rollout worker */
    int     kv_cache_tokens;          /* ours: rollout KV-cache positions; 0: max_num_seqs x (prompt + response) */
    int     max_num_batched_tokens;   /* rows per rollout forward step (decode rows + prefill chunk) */
    int     val_n;
    double  val_temperature, val_top_p;
    int     val_top_k;
    bool    val_do_sample;

    /* algorithm.* */
    CfgAdvEstimator adv_estimator;    /* grpo (DAPO's), rloo, opo, gpg, grpo_passk, reinforce_plus_plus(_baseline) */
    bool    norm_adv_by_std_in_grpo;
    double  gamma;                    /* verl's algorithm.gamma: reinforce_plus_plus's discount (the only estimator of
                                         dapo's that reads it; refused elsewhere at any value but 1) */
    bool    use_kl_in_reward;         /* verl's: token rewards minus beta x kl_penalty(old, ref) (services/learner/klreward.h) */
    int     kl_penalty;               /* algorithm.kl_penalty: a CfgKlType (+ CFG_KL_PLUS), as actor.kl_loss_type */
    CfgKlCtrl kl_ctrl_type;           /* algorithm.kl_ctrl.type */
    double  kl_ctrl_coef, kl_ctrl_horizon, kl_ctrl_target;   /* kl_ctrl.kl_coef, .horizon, .target_kl */
    bool    filter_groups_enable;
    CfgFilterMetric filter_groups_metric;   /* acc|score|seq_reward|seq_final_reward */
    int     max_num_gen_batches;      /* <=0: no limit */
    bool    filter_groups_streaming;  /* ours */
    CfgRefill refill;                 /* ours: a filtered group's slot drawn again at once (read config_refill_at_once) */
    bool    overlong_filtering;       /* ours (TRL: mask_truncated_completions) */
    /* algorithm.rollout_correction.* (verl's RolloutCorrectionConfig; parsed by dapo/rollout_corr.h) */
    char   *rc_rollout_is;            /* auto|null|token|sequence ("auto": token when trainer.staleness >= 1) */
    char   *rc_is_threshold;          /* "2.0" (truncation) or "lower_upper" (IcePop) */
    bool    rc_is_batch_normalize;
    char   *rc_rollout_rs;            /* "" or comma-separated verl options (token_k1, seq_mean_k3, ...) */
    char   *rc_rs_threshold;
    bool    rc_bypass_mode;           /* = actor.use_rollout_log_probs (a conflicting pair is refused) */
    CfgRcLossType rc_loss_type;       /* ppo_clip (reinforce is refused) */

    /* reward_model.* (verl's reward.* and reward_kwargs.overlong_buffer_cfg.* spell the same keys: config.c's aliases) */
    CfgRewardManager reward_manager;  /* dapo (math_dapo + the overlong buffer) | naive (no buffer: needs it off) */
    int     max_resp_len;             /* verl's reward_kwargs.max_resp_len: 0 (unset) or data.max_response_length */
    bool    overlong_buffer_enable;
    int     overlong_buffer_len;      /* tokens */
    double  overlong_penalty_factor;
    double  reward_timeout_s;         /* ours: per-item verifier deadline */
    int     reward_num_workers;       /* Python reward worker processes per verifier (custom_reward_function) */
    double  reward_error_score;       /* ours: score of an item whose reward timed out, crashed, ran out of memory or
                                         raised (-1.0: math_dapo's "incorrect") */
    int     reward_worker_memory_mb;  /* ours: RLIMIT_AS of each Python reward worker; 0: no limit */
    char   *remote_url;               /* ours (OpenRLHF's --remote_rm_url): a reward server; empty: none */
    double  remote_timeout_s;         /* per POST */
    int     remote_max_retries;       /* retries of a timed-out / refused / 429 / 5xx POST */
    double  remote_retry_backoff_s;   /* before the first retry, doubled each time */
    int     remote_batch_size;        /* items per POST */

    /* custom_reward_function.* (verl): a Python compute_score(data_source, solution_str, ground_truth, extra_info) */
    char   *custom_reward_path;       /* empty: the built-in scorers (math_dapo) */
    char   *custom_reward_name;       /* function name in that file */
    char   *custom_reward_python;     /* ours: the interpreter, e.g. a venv's bin/python3 */

    /* trainer.* */
    StrList logger;                   /* console|tensorboard|file; verl's other trackers accepted and dropped */
    char   *project_name, *experiment_name;   /* tensorboard_log/<project_name>/<experiment_name> */
    int     total_epochs;
    int     total_training_steps;     /* <=0: from total_epochs */
    int     save_freq;                /* steps; <=0: only on request and at the end */
    int     test_freq;                /* steps; <=0: never */
    CfgDevice device;                 /* cpu|cuda (verl's trainer.device): the backend of the learner and rollout
                                         models (backend_select; cuda needs a CUDA build and a visible GPU) */
    char   *default_local_dir;
    CfgResumeMode resume_mode;        /* auto|disable|resume_path */
    char   *resume_from_path;
    bool    val_before_train, val_only;
    int     max_actor_ckpt_to_keep;   /* <=0: keep all */
    int     staleness;                /* trainer.staleness: 0 sync; k >= 1 async, rows at most k versions behind the
                                         weights that train them (read it through config_staleness) */
    CfgOffPolicyStrategy staleness_strategy;   /* trainer.staleness_strategy: drop (regenerate) or wait (lease only
                                         to rollouts fresh enough); read it through config_staleness_strategy */
    CfgTrainerMode v1_mode;           /* verl V1's trainer.v1.trainer_mode: sync, or an async mode = staleness k below */
    int     v1_max_off_policy;        /* trainer.v1.sampler.max_off_policy_threshold (verl: 8), k in the async modes */
    CfgOffPolicyStrategy v1_strategy; /* trainer.v1.sampler.max_off_policy_strategy: the strategy in the async modes */
    int     v1_parameter_sync_step;   /* trainer.v1.separate_async.parameter_sync_step: 1 only (dapo publishes every step) */
    int     trainer_seed;

    /* cluster.* (ours) */
    char   *bind;                     /* coordinator ROUTER endpoint */
    char   *coordinator;              /* where workers connect */
    char   *http;                     /* dashboard IP:PORT or [IPv6]:PORT (form checked at load) */
    char   *weights_bind;             /* learner rank 0's weight-server ROUTER endpoint */
    char   *weights;                  /* where rollouts fetch weights from */
    char   *run_id;
    char   *token_file;               /* bearer token for control endpoints (off loopback: every endpoint) */
    char   *event_log;                /* the coordinator records every event and action here (services/coordinator/
                                       * evlog.h; a replay gives the same actions); "" off */
    char   *curve_server_public_key;  /* cluster.curve.*: key files (net/curve.h); CURVE is on when this is set */
    char   *curve_server_secret_key;
    char   *curve_secret_key;
    char   *curve_authorized_keys;    /* directory of the client public keys let in */
    bool    insecure;                 /* allow binding off loopback without CURVE (a warning at start) */
    int     heartbeat_ms;
    double  lease_timeout_s;
    double  weights_probe_tolerance;  /* largest |rollout - learner| log-prob of the weight probe (model/probe.h) a
                                         rollout may report for a version it loaded (fp32 weights: 1e-4) */
    double  max_lease_s;              /* a generation lease older than this is reclaimed even while its worker
                                       * heartbeats (a lost result); 0: no bound */
    double  max_score_lease_s;        /* the same for a scoring lease (ScoreRequest); 0: no bound */
    double  stop_timeout_s;           /* a stopping coordinator waits this long for the step in training and the
                                       * learner's checkpoint of it before it exits without them */
    double  learner_rejoin_timeout_s; /* a learner rank lost mid-run is waited for this long (then the run rolls back to
                                       * the last checkpoint; past it the run fails) */
    int     max_msg_mb;               /* ZMQ_MAXMSGSIZE, MiB */
    double  lock_wait_s;              /* coordinator: how long to wait for trainer.default_local_dir's lock held by
                                       * another coordinator (a pod being replaced) before refusing; 0: refuse now */
    char   *health_file;              /* workers: a file rewritten every second from the loop with "ready" or
                                       * "connecting", for liveness and readiness probes (deploy/k8s); "": none */
    int     io_threads;               /* ZMQ_IO_THREADS of the coordinator's context; 0: 2 with CURVE, else 1. CURVE's
                                       * encryption runs on these threads (each connection on one), where with one
                                       * thread it, not the event loop, bounds the hub (bench/RESULTS.md, issue 18) */
    int     num_learners;             /* W */
    int     learner_threads, rollout_threads;
    int     verifier_threads;         /* scoring threads per verifier; 0: one per core */
    int     verifier_capacity;        /* responses a verifier holds at once (its credit) */
    char   *collective;               /* learner rank 0's CPU-collective ROUTER endpoint (others connect) */
    double  collective_timeout_s;     /* longest wait for a peer rank in one collective before failing */

    unsigned char user_set[192];      /* [table row] 1: set by a file or override (config_is_set), not a default */
    unsigned char spelling[192];      /* [table row] which spelling set it: 0 the row's key, 1 + an alias's index */
    unsigned char source[192];        /* [table row] where its value came from: CFG_SRC_* or CFG_SRC_FILE + files[k] */
    char         *files[16];          /* the config files read (paths as given; owned), for source */
    int           nfiles;
} Config;

/* Fills c with the defaults of cfg_table. c must be zeroed or freed before; strings are owned. */
void config_defaults(Config *c);
/* Frees every owned string/list; c can be config_defaults'ed again. NULL-safe. */
void config_free(Config *c);

/* Applies a YAML file (nested mappings; lists only for list keys). Errors: ERR_IO (cannot read),
 * ERR_INVAL ("file: is a directory, not a YAML config file"), ERR_DECODE (a control byte other than tab/LF/CR:
 * "file:LINE: not a text file: ..."; bytes that are not UTF-8: "file:LINE: not valid UTF-8 text: ..."; YAML
 * syntax: "file:LINE[:COL]: not valid YAML: reason", 1-based; libfyaml prints nothing),
 * ERR_INVAL ("file:line: key: reason", e.g. "data: expected a mapping, found a scalar"). An empty file (or only
 * comments) applies nothing (all defaults) with a warning. Warnings for verl-only keys go to the log. */
int config_load_file(Config *c, const char *path, char err[ERR_LEN]);

/* Sets one key from text ("0.28", "true", "[a.jsonl,b.jsonl]" or "a.jsonl,b.jsonl" for lists). Address keys are
 * checked for form (not reachability): cluster.http IP:PORT or [IPv6]:PORT; cluster.bind, .coordinator, .weights_bind,
 * .weights, .collective a ZeroMQ endpoint tcp://HOST:PORT (PORT 0..65535 or *), ipc://PATH or inproc://NAME.
 * `where` names the source for messages ("command line"). ERR_INVAL/ERR_NOTFOUND with a message. */
int config_set(Config *c, const char *key, const char *value, const char *where, char err[ERR_LEN]);

/* The text of a CFG_ENUM key's value in c ("cosine" for actor_rollout_ref.actor.optim.warmup_style), for messages and
 * for APIs that take the name (backend_select); "?" for a key that is not an enum. Static storage. */
const char *config_enum_name(const Config *c, const char *key);

/* True when key was set by a YAML file or an override (not left at its default). false for unknown keys. */
bool config_is_set(const Config *c, const char *key);

/* trainer.logger values: 1 a logger dapo writes (console, tensorboard, file), 2 one verl has and dapo drops
 * (wandb, mlflow, swanlab, vemlp_wandb, clearml, trackio: warned once by the coordinator), 0 unknown (refused). */
int config_logger_known(const char *name);
/* True when trainer.logger lists name. */
bool config_has_logger(const Config *c, const char *name);

/* Prompts per generation round: data.gen_batch_size, or data.train_batch_size where it is null (0; verl's default). */
int config_gen_batch_size(const Config *c);
/* The staleness bound k the run trains with: trainer.staleness, or, with verl V1's trainer.v1.trainer_mode
 * colocate_async / separate_async, trainer.v1.sampler.max_off_policy_threshold (config_validate refuses the two set
 * to different values). 0: synchronous. */
int config_staleness(const Config *c);
/* What happens to a row that would train more than config_staleness versions behind: trainer.staleness_strategy, or
 * trainer.v1.sampler.max_off_policy_strategy in verl V1's async modes. drop: it is generated, found too stale when the
 * version moves, dropped and its prompt generated again; wait: a group is leased only to a rollout whose weights are
 * fresh enough for the version its step will train from, so generation waits for the weights instead. */
CfgOffPolicyStrategy config_staleness_strategy(const Config *c);
/* 1 when a group that dynamic sampling filters out (or whose attempts ran out) frees its slot and a new prompt is
 * drawn into it at once (algorithm.filter_groups.refill at_once, or auto with trainer.staleness >= 1: verl V1's
 * async replay buffer); 0: another round of gen_batch_size prompts once the round is settled (verl's DAPO recipe). */
int config_refill_at_once(const Config *c);

/* 1 when the learner ranks shard the optimizer state (services/learner/shard.h): cluster.num_learners > 1 and
 * fsdp_config.fsdp_size -1 or >= num_learners. The learner and the coordinator (every rank checkpoints) read it. */
int config_optim_sharded(const Config *c);

/* Cross-key checks run after all sources are applied (e.g. overlong buffer shorter than the response). */
int config_validate(const Config *c, char err[ERR_LEN]);

/* Writes the resolved config as nested YAML (every key of the table; strings double-quoted with '"', '\\' and
 * control bytes escaped). config_print_local_yaml: only the local keys (config_key_is_local), what a worker needs of
 * its own (deploy/local/run.sh writes them for the workers: `--print-config=local`). */
void config_print_yaml(const Config *c, FILE *f);
void config_print_local_yaml(const Config *c, FILE *f);
/* As config_print_yaml (local_only: config_print_local_yaml), each value followed by a YAML comment saying where it
 * came from — "# default", "# command line", "# file PATH", "# coordinator" (a worker's taken keys), "# set" (by
 * code) — for --print-config; the text still loads as a config file. */
void config_print_annotated(const Config *c, FILE *f, bool local_only);

/* A worker's run keys come from its coordinator (docs/design.md §5): takes from yaml (Welcome.config_yaml, the
 * coordinator's config_print_yaml text, len bytes) every key that c's own file and overrides did not set, except
 * cluster.* (this worker's endpoints, threads and key files); trainer.device too where the worker left it. Keys the
 * worker set stay its own (the coordinator has refused the worker if one differs from its value). Then checks the
 * result (config_validate). *taken (may be NULL): how many keys were taken. 0, ERR_DECODE (yaml is not a config
 * mapping), or the error of a key or of the validation, naming it. */
int config_take_from(Config *c, const char *yaml, size_t len, int *taken, char err[ERR_LEN]);
/* The run's keys (docs/design.md §5): every key but the local ones (cluster.*: endpoints, threads, timeouts, key
 * files; trainer.device) — only_set: only those the file or an override set — one "key: value" line each in table
 * order, values as config_print_yaml writes them. xmalloc'd text (caller frees with xfree); *hash (may be NULL): its
 * XXH3 64-bit hash. A worker sends the keys it set in Hello; the coordinator refuses one that set a run key to
 * another value than its own (services/coordinator/registry.c). */
bool  config_key_is_local(const char *key);
char *config_run_keys(const Config *c, bool only_set, uint64_t *hash);
/* The first key of theirs whose value differs from (or is missing in) mine, both config_run_keys texts: 1 with the key
 * and both values (mine in a, theirs in b) written, truncated to the buffer sizes; 0 when every key of theirs has
 * mine's value. */
int   config_run_keys_diff(const char *mine, const char *theirs, char *key, size_t key_n, char *a, char *b,
                           size_t val_n);

/* True when argv[1..argc) holds `--help` or `-h` (not as the file name after --config). */
bool config_help_wanted(int argc, char **argv);

/* Writes the usage paragraph of the shared command line to f: "usage: <basename of prog> [--config FILE]
 * [key.path=value ...] [--print-config] <synopsis>" and one line per flag. extra: the caller's own flags, NULL or
 * "" for none: its first line is the synopsis ("[--id NAME]"), the lines after it (if any) describe them and are
 * printed among the shared flags' lines. */
void config_usage_print(FILE *f, const char *prog, const char *extra);

/* The command line every daemon and tool shares: `--config FILE` (applied first), `key.path=value`
 * overrides (applied in order; Hydra's `+key=value` and `++key=value`, as verl's scripts write them, set the key the
 * same way, and `~key` / `~key=value` put it back to its default, the latter only when the key has that value now), `--print-config` (*print_config = CONFIG_PRINT_ALL) or `--print-config=local`
 * (CONFIG_PRINT_LOCAL). Arguments it does not know are
 * left in argv (compacted; *argc updated) for the caller. Defaults are applied here. Returns 0 or
 * ERR_INVAL/ERR_IO with a message in err; on error c still holds valid (partial) values to free.
 * `--help` / `-h` is not handled here: every program checks config_help_wanted first and prints its usage. */
/* One command-line override as config_from_cli applies it (key=value, +key=value, ++key=value, ~key, ~key=value):
 * 0 applied, 1 when arg is not an override (a flag, a file name: left to the caller), or the key's error (< 0). */
int config_override(Config *c, const char *arg, char err[ERR_LEN]);

/* A key dapo implements: a row of the table or another spelling of one (verl's names; config_verl.h has the rules for
 * verl's other keys). */
bool config_key_implemented(const char *key);

enum { CONFIG_PRINT_NONE, CONFIG_PRINT_ALL, CONFIG_PRINT_LOCAL };   /* config_from_cli's *print_config */
#define CONFIG_FILE_MAX_BYTES ((size_t)256 << 10)   /* a config file larger than this is refused, unparsed */
int config_from_cli(Config *c, int *argc, char **argv, int *print_config, char err[ERR_LEN]);

#endif
