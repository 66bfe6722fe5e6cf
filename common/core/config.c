/* common/core/config.c: the config table, the YAML loader (libfyaml), overrides and --print-config.
 * Not here: what each knob does. */
#include "core/config.h"
#include "core/config_verl.h"
#include "core/log.h"
#include "core/yaml_doc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libfyaml.h>
#include <math.h>
#include <stddef.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <utf8proc.h>
#include <xxhash.h>

#include "core/fsutil.h"

typedef enum { CFG_INT, CFG_FLOAT, CFG_BOOL, CFG_STR, CFG_ENUM, CFG_LIST } CfgType;

enum { MIN_EXCL = 1, MAX_EXCL = 2,     /* CfgEntry.flags: exclusive bounds */
       EP_ZMQ = 4,                     /* CFG_STR: a ZeroMQ endpoint (tcp://HOST:PORT, ipc://PATH, inproc://NAME) */
       EP_HOSTPORT = 8,                /* CFG_STR: IP:PORT or [IPv6]:PORT (the dashboard's listen address) */
       NULL_DEFAULT = 16,              /* null (YAML null, "null", "~") is verl's "not set": the key keeps its
                                        * default (or another spelling's value) and counts as not set */
       NULL_NAN = 32,                  /* CFG_FLOAT: null is kept as NAN (printed null); its consumer resolves it */
       NULL_ZERO = 64 };               /* CFG_INT: null is 0 (printed null); its consumer resolves it */

typedef struct {
    const char *key;
    CfgType     type;
    double      min, max;        /* numeric bounds (inclusive unless flags say otherwise) */
    const char *dflt;            /* as text, parsed by the same code as user input */
    size_t      off;             /* offsetof(Config, field) */
    const char *allowed;         /* CFG_ENUM: "a|b|c" */
    int         flags;
} CfgEntry;

#define O(f) offsetof(Config, f)
#define AR "actor_rollout_ref."
static const CfgEntry cfg_table[] = {
    { "data.train_files",                    CFG_LIST,  0, 0,       "",        O(train_files), NULL, 0 },
    { "data.val_files",                      CFG_LIST,  0, 0,       "",        O(val_files), NULL, 0 },
    { "data.train_batch_size",               CFG_INT,   0, 1e6,     "1024",     O(train_batch_size), NULL, 0 },
    { "data.gen_batch_size",                 CFG_INT,   0, 1e7,     "null",    O(gen_batch_size), NULL, NULL_ZERO },
    { "data.max_prompt_length",              CFG_INT,   1, 1e7,     "512",    O(max_prompt_length), NULL, 0 },
    { "data.max_response_length",            CFG_INT,   1, 1e7,     "512",   O(max_response_length), NULL, 0 },
    { "data.filter_overlong_prompts",        CFG_BOOL,  0, 0,       "false",   O(filter_overlong_prompts), NULL, 0 },
    { "data.truncation",                     CFG_ENUM,  0, 0,       "error",   O(truncation), "error|left|right|middle", 0 },
    { "data.seed",                           CFG_INT,   0, 2147483647, "1",    O(data_seed), NULL, NULL_DEFAULT },
    { "data.shuffle",                        CFG_BOOL,  0, 0,       "true",    O(shuffle), NULL, 0 },
    { "data.tokenizer",                      CFG_STR,   0, 0,       "",        O(tokenizer_path), NULL, NULL_DEFAULT },
    { "data.chat_template",                  CFG_ENUM,  0, 0,       "auto",    O(chat_template), "auto|qwen2.5|qwen3|llama3|none", 0 },
    { "data.on_malformed",                   CFG_ENUM,  0, 0,       "skip",    O(on_malformed), "skip|error", 0 },
    { "data.val_max_samples",                CFG_INT,   -1, 1e9,    "-1",      O(val_max_samples), NULL, NULL_DEFAULT },

    { AR "model.path",                       CFG_STR,   0, 0,       "",        O(model_path), NULL, 0 },
    { AR "model.override_config.max_position_embeddings", CFG_INT, 0, 1e9, "0", O(max_position_embeddings), NULL, 0 },
    { AR "model.enable_gradient_checkpointing", CFG_BOOL, 0, 0,   "false",   O(gradient_checkpointing), NULL, 0 },

    { AR "actor.clip_ratio",                 CFG_FLOAT, 0, 1e9,     "0.2",     O(clip_ratio), NULL, 0 },
    { AR "actor.clip_ratio_low",             CFG_FLOAT, 0, 1e9,     "0.2",     O(clip_ratio_low), NULL, NULL_NAN },
    { AR "actor.clip_ratio_high",            CFG_FLOAT, 0, 10,      "0.2",    O(clip_ratio_high), NULL, NULL_NAN },
    { AR "actor.clip_ratio_c",               CFG_FLOAT, 1, 1e9,     "3.0",    O(clip_ratio_c), NULL, MIN_EXCL },
    { AR "actor.loss_agg_mode",              CFG_ENUM,  0, 0,       "token-mean", O(loss_agg_mode),
      "token-mean|seq-mean-token-mean|seq-mean-token-sum|seq-mean-token-sum-norm", 0 },
    { AR "actor.loss_scale_factor",          CFG_FLOAT, 0, 1e9,     "null",    O(loss_scale_factor), NULL,
      NULL_NAN | MIN_EXCL },
    { AR "actor.policy_loss.loss_mode",      CFG_ENUM,  0, 0,       "vanilla", O(loss_mode),
      "vanilla|gspo|cispo|sapo|gpg|dppo_tv|dppo_kl|clip_cov|kl_cov|geo_mean", 0 },
    { AR "actor.policy_loss.clip_cov_ratio", CFG_FLOAT, 0, 1,       "0.0002",  O(clip_cov_ratio), NULL, MIN_EXCL },
    { AR "actor.policy_loss.clip_cov_lb",    CFG_FLOAT, -1e9, 1e9,  "1.0",     O(clip_cov_lb), NULL, 0 },
    { AR "actor.policy_loss.clip_cov_ub",    CFG_FLOAT, -1e9, 1e9,  "5.0",     O(clip_cov_ub), NULL, 0 },
    { AR "actor.policy_loss.kl_cov_ratio",   CFG_FLOAT, 0, 1,       "0.0002",  O(kl_cov_ratio), NULL, MIN_EXCL },
    { AR "actor.policy_loss.ppo_kl_coef",    CFG_FLOAT, 0, 1e6,     "0.1",     O(ppo_kl_coef), NULL, 0 },
    { AR "actor.tau_pos",                    CFG_FLOAT, 0, 1e6,     "1.0",     O(tau_pos), NULL, MIN_EXCL },
    { AR "actor.tau_neg",                    CFG_FLOAT, 0, 1e6,     "1.05",    O(tau_neg), NULL, MIN_EXCL },
    { AR "actor.use_kl_loss",                CFG_BOOL,  0, 0,       "false",   O(use_kl_loss), NULL, 0 },
    { AR "actor.kl_loss_coef",               CFG_FLOAT, 0, 1e6,     "0.001",   O(kl_loss_coef), NULL, 0 },
    { AR "actor.kl_loss_type",               CFG_ENUM,  0, 0,       "low_var_kl", O(kl_loss_type),
      "k1|kl|abs|mse|k2|low_var_kl|k3|k1+|kl+|abs+|mse+|k2+|low_var_kl+|k3+", 0 },
    { AR "actor.ppo_mini_batch_size",        CFG_INT,   1, 1e6,     "256",      O(ppo_mini_batch_size), NULL, 0 },
    { AR "actor.ppo_micro_batch_size_per_gpu", CFG_INT, 1, 1e6,     "4",       O(ppo_micro_batch_size_per_gpu), NULL, NULL_DEFAULT },
    { AR "actor.ppo_epochs",                 CFG_INT,   1, 1000,    "1",       O(ppo_epochs), NULL, 0 },
    { AR "actor.grad_clip",                  CFG_FLOAT, 0, 1e9,     "1.0",     O(grad_clip), NULL, 0 },
    { AR "actor.fsdp_config.fsdp_size",      CFG_INT,   -1, 1e6,    "1",       O(fsdp_size), NULL, 0 },
    { AR "actor.fsdp_config.reshard_after_forward", CFG_BOOL, 0, 0,  "true",    O(reshard_after_forward), NULL, 0 },
    { AR "actor.entropy_coeff",              CFG_FLOAT, -1e3, 1e3,  "0",       O(entropy_coeff), NULL, 0 },
    { AR "actor.use_dynamic_bsz",            CFG_BOOL,  0, 0,       "false",    O(use_dynamic_bsz), NULL, 0 },
    { AR "actor.ppo_max_token_len_per_gpu",  CFG_INT,   1, 1e9,     "16384",   O(ppo_max_token_len_per_gpu), NULL, 0 },
    { AR "actor.optim.lr",                   CFG_FLOAT, 0, 10,      "1e-6",    O(lr), NULL, 0 },
    { AR "actor.optim.lr_warmup_steps",      CFG_INT,   -1, 1e9,    "-1",      O(lr_warmup_steps), NULL, 0 },
    { AR "actor.optim.lr_warmup_steps_ratio", CFG_FLOAT, 0, 1,      "0",       O(lr_warmup_steps_ratio), NULL, 0 },
    { AR "actor.optim.weight_decay",         CFG_FLOAT, 0, 10,      "0.01",     O(weight_decay), NULL, 0 },
    { AR "actor.optim.warmup_style",         CFG_ENUM,  0, 0,       "constant", O(warmup_style), "constant|cosine", NULL_DEFAULT },
    { AR "actor.optim.min_lr_ratio",         CFG_FLOAT, 0, 1,       "0.0",     O(min_lr_ratio), NULL, 0 },
    { AR "actor.optim.beta1",                CFG_FLOAT, 0, 1,       "0.9",     O(adam_beta1), NULL, MAX_EXCL },
    { AR "actor.optim.beta2",                CFG_FLOAT, 0, 1,       "0.999",   O(adam_beta2), NULL, MAX_EXCL },
    { AR "actor.optim.eps",                  CFG_FLOAT, 0, 1,       "1e-8",    O(adam_eps), NULL, MIN_EXCL },
    { AR "actor.use_rollout_log_probs",      CFG_BOOL,  0, 0,       "false",   O(use_rollout_log_probs), NULL, 0 },

    { AR "rollout.n",                        CFG_INT,   1, 4096,    "16",      O(rollout_n), NULL, 0 },
    { AR "rollout.temperature",              CFG_FLOAT, 1e-5, 100,  "1.0",     O(temperature), NULL, 0 },
    { AR "rollout.top_p",                    CFG_FLOAT, 0, 1,       "1.0",     O(top_p), NULL, MIN_EXCL },
    { AR "rollout.top_k",                    CFG_INT,   -1, 1e7,    "-1",      O(top_k), NULL, 0 },
    { AR "rollout.seed",                     CFG_INT,   -1, 2147483647, "42",  O(rollout_seed), NULL, 0 },
    { AR "rollout.batch_invariant",          CFG_BOOL,  0, 0,       "false",   O(batch_invariant), NULL, 0 },
    { AR "rollout.enable_prefix_caching",    CFG_BOOL,  0, 0,       "true",    O(enable_prefix_caching), NULL, 0 },
    { AR "rollout.partial_rollout",          CFG_BOOL,  0, 0,       "false",   O(partial_rollout), NULL, 0 },
    { AR "rollout.partial_rollout_kv",       CFG_ENUM,  0, 0,       "recompute", O(partial_rollout_kv), "recompute|keep", 0 },
    { AR "rollout.mask_offpolicy_in_partial_rollout", CFG_BOOL, 0, 0, "false", O(mask_offpolicy_partial), NULL, 0 },
    { AR "rollout.dtype",                    CFG_ENUM,  0, 0,       "float32", O(rollout_dtype), "float32|bfloat16", 0 },
    { AR "rollout.kv_cache_dtype",           CFG_ENUM,  0, 0,       "float32", O(kv_cache_dtype), "float32|bfloat16", 0 },
    { AR "rollout.max_num_seqs",             CFG_INT,   1, 1e6,     "256",      O(max_num_seqs), NULL, 0 },
    { AR "rollout.kv_cache_tokens",          CFG_INT,   0, 2147483647, "0",    O(kv_cache_tokens), NULL, 0 },
    { AR "rollout.max_num_batched_tokens",   CFG_INT,   1, 1e7,     "8192",     O(max_num_batched_tokens), NULL, 0 },
    { AR "rollout.val_kwargs.n",             CFG_INT,   1, 4096,    "1",       O(val_n), NULL, 0 },
    { AR "rollout.val_kwargs.temperature",   CFG_FLOAT, 0, 100,     "0",     O(val_temperature), NULL, 0 },
    { AR "rollout.val_kwargs.top_p",         CFG_FLOAT, 0, 1,       "1.0",     O(val_top_p), NULL, MIN_EXCL },
    { AR "rollout.val_kwargs.top_k",         CFG_INT,   -1, 1e7,    "-1",      O(val_top_k), NULL, 0 },
    { AR "rollout.val_kwargs.do_sample",     CFG_BOOL,  0, 0,       "false",    O(val_do_sample), NULL, 0 },

    { "algorithm.adv_estimator",             CFG_ENUM,  0, 0,       "grpo",    O(adv_estimator),
      "grpo|rloo|opo|gpg|grpo_passk|reinforce_plus_plus|reinforce_plus_plus_baseline|grpo_vectorized|rloo_vectorized", 0 },
    { "algorithm.norm_adv_by_std_in_grpo",   CFG_BOOL,  0, 0,       "true",    O(norm_adv_by_std_in_grpo), NULL, 0 },
    { "algorithm.gamma",                     CFG_FLOAT, 0, 1,       "1.0",     O(gamma), NULL, 0 },
    { "algorithm.use_kl_in_reward",          CFG_BOOL,  0, 0,       "false",   O(use_kl_in_reward), NULL, 0 },
    { "algorithm.kl_penalty",                CFG_ENUM,  0, 0,       "kl",      O(kl_penalty),
      "k1|kl|abs|mse|k2|low_var_kl|k3|k1+|kl+|abs+|mse+|k2+|low_var_kl+|k3+", 0 },
    { "algorithm.kl_ctrl.type",              CFG_ENUM,  0, 0,       "fixed",   O(kl_ctrl_type), "fixed|adaptive", 0 },
    { "algorithm.kl_ctrl.kl_coef",           CFG_FLOAT, 0, 1e6,     "0.001",   O(kl_ctrl_coef), NULL, 0 },
    { "algorithm.kl_ctrl.horizon",           CFG_FLOAT, 0, 1e12,    "10000",   O(kl_ctrl_horizon), NULL, MIN_EXCL },
    { "algorithm.kl_ctrl.target_kl",         CFG_FLOAT, 0, 1e6,     "0.1",     O(kl_ctrl_target), NULL, MIN_EXCL },
    { "algorithm.filter_groups.enable",      CFG_BOOL,  0, 0,       "false",    O(filter_groups_enable), NULL, 0 },
    { "algorithm.filter_groups.metric",      CFG_ENUM,  0, 0,       "acc",     O(filter_groups_metric),
      "acc|score|seq_reward|seq_final_reward", 0 },
    { "algorithm.filter_groups.max_num_gen_batches", CFG_INT, -1e6, 1e6, "0", O(max_num_gen_batches), NULL, 0 },
    { "algorithm.filter_groups.streaming",   CFG_BOOL,  0, 0,       "false",   O(filter_groups_streaming), NULL, 0 },
    { "algorithm.filter_groups.refill",      CFG_ENUM,  0, 0,       "auto",    O(refill), "auto|round|at_once", 0 },
    { "algorithm.overlong_filtering",        CFG_BOOL,  0, 0,       "false",   O(overlong_filtering), NULL, 0 },

    { "algorithm.rollout_correction.rollout_is", CFG_STR, 0, 0,   "auto",    O(rc_rollout_is), NULL, 0 },
    { "algorithm.rollout_correction.rollout_is_threshold", CFG_STR, 0, 0, "2.0", O(rc_is_threshold), NULL, 0 },
    { "algorithm.rollout_correction.rollout_is_batch_normalize", CFG_BOOL, 0, 0, "false", O(rc_is_batch_normalize), NULL, 0 },
    { "algorithm.rollout_correction.rollout_rs", CFG_STR, 0, 0,   "",        O(rc_rollout_rs), NULL, NULL_DEFAULT },
    { "algorithm.rollout_correction.rollout_rs_threshold", CFG_STR, 0, 0, "", O(rc_rs_threshold), NULL, NULL_DEFAULT },
    { "algorithm.rollout_correction.bypass_mode", CFG_BOOL, 0, 0,  "false",   O(rc_bypass_mode), NULL, 0 },
    { "algorithm.rollout_correction.loss_type", CFG_ENUM, 0, 0,   "ppo_clip", O(rc_loss_type), "ppo_clip|reinforce", 0 },

    { "reward_model.reward_manager",         CFG_ENUM,  0, 0,       "naive",    O(reward_manager), "dapo|naive", NULL_DEFAULT },
    { "reward_model.reward_kwargs.max_resp_len", CFG_INT, 0, 1e7,   "0",       O(max_resp_len), NULL, 0 },
    { "reward_model.overlong_buffer.enable", CFG_BOOL,  0, 0,       "false",   O(overlong_buffer_enable), NULL, 0 },
    { "reward_model.overlong_buffer.len",    CFG_INT,   1, 1e7,     "4096",    O(overlong_buffer_len), NULL, 0 },
    { "reward_model.overlong_buffer.penalty_factor", CFG_FLOAT, 0, 1e6, "1.0", O(overlong_penalty_factor), NULL, 0 },
    { "reward_model.timeout_s",              CFG_FLOAT, 0, 3600,    "1.0",     O(reward_timeout_s), NULL, MIN_EXCL },
    { "reward_model.num_workers",            CFG_INT,   1, 4096,    "4",       O(reward_num_workers), NULL, NULL_DEFAULT },
    { "reward_model.error_score",            CFG_FLOAT, -1e6, 1e6,  "-1.0",    O(reward_error_score), NULL, 0 },
    { "reward_model.worker_memory_mb",       CFG_INT,   0, 1e8,     "4096",    O(reward_worker_memory_mb), NULL, 0 },
    { "reward_model.remote.url",             CFG_STR,   0, 0,       "",        O(remote_url), NULL, 0 },
    { "reward_model.remote.timeout_s",       CFG_FLOAT, 0, 3600,    "30",      O(remote_timeout_s), NULL, MIN_EXCL },
    { "reward_model.remote.max_retries",     CFG_INT,   0, 100,     "3",       O(remote_max_retries), NULL, 0 },
    { "reward_model.remote.retry_backoff_s", CFG_FLOAT, 0, 600,     "0.5",     O(remote_retry_backoff_s), NULL, 0 },
    { "reward_model.remote.batch_size",      CFG_INT,   1, 256,     "16",      O(remote_batch_size), NULL, 0 },
    { "custom_reward_function.path",         CFG_STR,   0, 0,       "",        O(custom_reward_path), NULL, NULL_DEFAULT },
    { "custom_reward_function.name",         CFG_STR,   0, 0,       "compute_score", O(custom_reward_name), NULL, NULL_DEFAULT },
    { "custom_reward_function.python",       CFG_STR,   0, 0,       "python3", O(custom_reward_python), NULL, 0 },

    { "trainer.logger",                      CFG_LIST,  0, 0,       "console", O(logger), NULL, 0 },
    { "trainer.project_name",                CFG_STR,   0, 0,       "dapo",    O(project_name), NULL, 0 },
    { "trainer.experiment_name",             CFG_STR,   0, 0,       "default", O(experiment_name), NULL, 0 },
    { "trainer.total_epochs",                CFG_INT,   1, 1e6,     "30",       O(total_epochs), NULL, 0 },
    { "trainer.total_training_steps",        CFG_INT,   -1, 1e9,    "-1",      O(total_training_steps), NULL, NULL_DEFAULT },
    { "trainer.save_freq",                   CFG_INT,   -1, 1e9,    "-1",       O(save_freq), NULL, 0 },
    { "trainer.test_freq",                   CFG_INT,   -1, 1e9,    "-1",       O(test_freq), NULL, 0 },
    { "trainer.device",                      CFG_ENUM,  0, 0,       "cpu",     O(device), "cpu|cuda", 0 },
    { "trainer.default_local_dir",           CFG_STR,   0, 0,       "checkpoints", O(default_local_dir), NULL, 0 },
    { "trainer.resume_mode",                 CFG_ENUM,  0, 0,       "auto",    O(resume_mode), "auto|disable|resume_path", 0 },
    { "trainer.resume_from_path",            CFG_STR,   0, 0,       "",        O(resume_from_path), NULL, NULL_DEFAULT },
    { "trainer.val_before_train",            CFG_BOOL,  0, 0,       "true",    O(val_before_train), NULL, 0 },
    { "trainer.val_only",                    CFG_BOOL,  0, 0,       "false",   O(val_only), NULL, 0 },
    { "trainer.max_actor_ckpt_to_keep",      CFG_INT,   -1, 1e6,    "-1",      O(max_actor_ckpt_to_keep), NULL, NULL_DEFAULT },
    { "trainer.staleness",                   CFG_INT,   0, 64,      "0",       O(staleness), NULL, 0 },
    { "trainer.staleness_strategy",          CFG_ENUM,  0, 0,       "drop",    O(staleness_strategy), "drop|wait", 0 },
    { "trainer.v1.trainer_mode",             CFG_ENUM,  0, 0,       "sync",    O(v1_mode),
      "sync|colocate_async|separate_async", 0 },
    { "trainer.v1.sampler.max_off_policy_threshold", CFG_INT, 1, 64, "8",      O(v1_max_off_policy), NULL, 0 },
    { "trainer.v1.sampler.max_off_policy_strategy", CFG_ENUM, 0, 0, "drop",    O(v1_strategy), "drop|wait", 0 },
    { "trainer.v1.separate_async.parameter_sync_step", CFG_INT, 1, 1e6, "4",   O(v1_parameter_sync_step), NULL, 0 },
    { "trainer.seed",                        CFG_INT,   0, 2147483647, "1",    O(trainer_seed), NULL, 0 },

    { "cluster.bind",                        CFG_STR,   0, 0,       "tcp://127.0.0.1:5555", O(bind), NULL, EP_ZMQ },
    { "cluster.coordinator",                 CFG_STR,   0, 0,       "tcp://127.0.0.1:5555", O(coordinator), NULL, EP_ZMQ },
    { "cluster.http",                        CFG_STR,   0, 0,       "127.0.0.1:8080", O(http), NULL, EP_HOSTPORT },
    { "cluster.weights_bind",                CFG_STR,   0, 0,       "tcp://127.0.0.1:5556", O(weights_bind), NULL, EP_ZMQ },
    { "cluster.weights",                     CFG_STR,   0, 0,       "tcp://127.0.0.1:5556", O(weights), NULL, EP_ZMQ },
    { "cluster.run_id",                      CFG_STR,   0, 0,       "",        O(run_id), NULL, 0 },
    { "cluster.token_file",                  CFG_STR,   0, 0,       "",        O(token_file), NULL, 0 },
    { "cluster.event_log",                   CFG_STR,   0, 0,       "",        O(event_log), NULL, 0 },
    { "cluster.curve.server_public_key",     CFG_STR,   0, 0,       "",        O(curve_server_public_key), NULL, 0 },
    { "cluster.curve.server_secret_key",     CFG_STR,   0, 0,       "",        O(curve_server_secret_key), NULL, 0 },
    { "cluster.curve.secret_key",            CFG_STR,   0, 0,       "",        O(curve_secret_key), NULL, 0 },
    { "cluster.curve.authorized_keys",       CFG_STR,   0, 0,       "",        O(curve_authorized_keys), NULL, 0 },
    { "cluster.insecure",                    CFG_BOOL,  0, 0,       "false",   O(insecure), NULL, 0 },
    { "cluster.heartbeat_ms",                CFG_INT,   10, 600000, "1000",    O(heartbeat_ms), NULL, 0 },
    { "cluster.lease_timeout_s",             CFG_FLOAT, 0, 86400,   "10",      O(lease_timeout_s), NULL, MIN_EXCL },
    { "cluster.weights_probe_tolerance",     CFG_FLOAT, 1e-7, 1e6,  "1e-4",    O(weights_probe_tolerance), NULL, 0 },
    { "cluster.max_lease_s",                 CFG_FLOAT, 0, 1e7,     "3600",    O(max_lease_s), NULL, 0 },
    { "cluster.max_score_lease_s",           CFG_FLOAT, 0, 1e7,     "600",     O(max_score_lease_s), NULL, 0 },
    { "cluster.stop_timeout_s",              CFG_FLOAT, 0, 1e7,     "300",     O(stop_timeout_s), NULL, 0 },
    { "cluster.learner_rejoin_timeout_s",    CFG_FLOAT, 0, 1e7,     "300",     O(learner_rejoin_timeout_s), NULL, MIN_EXCL },
    { "cluster.lock_wait_s",                 CFG_FLOAT, 0, 86400,   "0",       O(lock_wait_s), NULL, 0 },
    { "cluster.health_file",                 CFG_STR,   0, 0,       "",        O(health_file), NULL, 0 },
    { "cluster.io_threads",                  CFG_INT,   0, 64,      "0",       O(io_threads), NULL, 0 },
    { "cluster.max_msg_mb",                  CFG_INT,   1, 4096,    "256",     O(max_msg_mb), NULL, 0 },
    { "cluster.num_learners",                CFG_INT,   1, 4096,    "1",       O(num_learners), NULL, 0 },
    { "cluster.learner_threads",             CFG_INT,   0, 1024,    "0",       O(learner_threads), NULL, 0 },
    { "cluster.rollout_threads",             CFG_INT,   0, 1024,    "0",       O(rollout_threads), NULL, 0 },
    { "cluster.verifier_threads",            CFG_INT,   0, 1024,    "0",       O(verifier_threads), NULL, 0 },
    { "cluster.verifier_capacity",           CFG_INT,   1, 1e6,     "512",     O(verifier_capacity), NULL, 0 },
    { "cluster.collective",                  CFG_STR,   0, 0,       "tcp://127.0.0.1:5557", O(collective), NULL, EP_ZMQ },
    { "cluster.collective_timeout_s",        CFG_FLOAT, 0, 86400,   "300",     O(collective_timeout_s), NULL, MIN_EXCL },
};
#define NCFG (sizeof cfg_table / sizeof cfg_table[0])
_Static_assert(NCFG <= sizeof(((Config *)0)->user_set), "Config.user_set needs a slot per cfg_table row");

/* ------------------------------------------------------------------------------------------- helpers */

static const CfgEntry *find_entry(const char *key) {
    for (size_t i = 0; i < NCFG; i++)
        if (strcmp(cfg_table[i].key, key) == 0) return &cfg_table[i];
    return NULL;
}

/* Other spellings of a table key: verl's reward namespace of today (reward.*, verl 0.9) and its DAPO recipe's
 * reward_kwargs.overlong_buffer_cfg beside the reward_model.* rows. One setting: two spellings set to different values
 * are refused (set_key). */
static const struct { const char *alias, *key; } cfg_alias[] = {
    { AR "actor.optim.lr_scheduler_type",                    AR "actor.optim.warmup_style" },   /* verl 0.9's name */
    { AR "actor.optim.clip_grad",                            AR "actor.grad_clip" },            /* verl 0.9's name */
    { AR "actor.policy_loss.tau_pos",                        AR "actor.tau_pos" },   /* verl 0.9.0's SAPO script's */
    { AR "actor.policy_loss.tau_neg",                        AR "actor.tau_neg" },
    { AR "rollout.prompt_length",                            "data.max_prompt_length" },        /* verl copies them */
    { AR "rollout.response_length",                          "data.max_response_length" },
    { AR "model.tokenizer_path",                             "data.tokenizer" },
    { "reward.num_workers",                                  "reward_model.num_workers" },
    { "async_training.partial_rollout",                      AR "rollout.partial_rollout" },   /* verl's fully async */
    { "reward.custom_reward_function.path",                  "custom_reward_function.path" },
    { "reward.custom_reward_function.name",                  "custom_reward_function.name" },
    { "reward.reward_manager.name",                          "reward_model.reward_manager" },
    { "reward_model.reward_manager.name",                    "reward_model.reward_manager" },
    { "reward.reward_kwargs.max_resp_len",                   "reward_model.reward_kwargs.max_resp_len" },
    { "reward.reward_kwargs.overlong_buffer_cfg.enable",     "reward_model.overlong_buffer.enable" },
    { "reward.reward_kwargs.overlong_buffer_cfg.len",        "reward_model.overlong_buffer.len" },
    { "reward.reward_kwargs.overlong_buffer_cfg.penalty_factor", "reward_model.overlong_buffer.penalty_factor" },
    { "reward_model.reward_kwargs.overlong_buffer_cfg.enable", "reward_model.overlong_buffer.enable" },
    { "reward_model.reward_kwargs.overlong_buffer_cfg.len",  "reward_model.overlong_buffer.len" },
    { "reward_model.reward_kwargs.overlong_buffer_cfg.penalty_factor", "reward_model.overlong_buffer.penalty_factor" },
};
#define NALIAS (sizeof cfg_alias / sizeof cfg_alias[0])

/* The table key that key spells (itself or an alias's), with *spelling = 0 for the key itself, 1 + the alias's index
 * otherwise; NULL when it is neither. */
static const CfgEntry *find_spelling(const char *key, int *spelling) {
    const CfgEntry *e = find_entry(key);
    *spelling = 0;
    for (size_t i = 0; !e && i < NALIAS; i++)
        if (!strcmp(cfg_alias[i].alias, key)) { e = find_entry(cfg_alias[i].key); *spelling = 1 + (int)i; }
    return e;
}

/* True when another spelling lives under key (reward_model.reward_manager.name under reward_model.reward_manager). */
static bool alias_under(const char *key) {
    size_t n = strlen(key);
    for (size_t i = 0; i < NALIAS; i++)
        if (!strncmp(cfg_alias[i].alias, key, n) && cfg_alias[i].alias[n] == '.') return true;
    return false;
}

static const char *spelling_name(const CfgEntry *e, int spelling) {
    return spelling ? cfg_alias[spelling - 1].alias : e->key;
}

/* Levenshtein distance, capped: only used to suggest a key for a typo. */
static size_t edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 127 || lb > 127) return 1000;
    size_t row[128];
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t prev = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t cur = row[j];
            size_t sub = prev + (a[i - 1] != b[j - 1]);
            size_t del = row[j] + 1, ins = row[j - 1] + 1;
            row[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
            prev = cur;
        }
    }
    return row[lb];
}

static const char *suggest(const char *key) {
    const char *best = NULL;
    size_t bestd = 4;    /* only close matches */
    for (size_t i = 0; i < NCFG; i++) {
        size_t d = edit_distance(key, cfg_table[i].key);
        if (d < bestd) { bestd = d; best = cfg_table[i].key; }
    }
    return best;
}

static void list_free(StrList *l) {
    for (int i = 0; i < l->n; i++) xfree(l->v[i]);
    xfree(l->v);
    l->n = 0;
    l->v = NULL;
}

static void list_add(StrList *l, const char *s, size_t len) {
    l->v = xrealloc(l->v, (size_t)(l->n + 1) * sizeof *l->v);
    char *d = xmalloc(len + 1);
    memcpy(d, s, len);
    d[len] = 0;
    l->v[l->n++] = d;
}

static int parse_bool(const char *s, bool *out) {
    static const char *t[] = {"true", "True", "TRUE", "yes", "on", "1"};
    static const char *f[] = {"false", "False", "FALSE", "no", "off", "0"};
    for (int i = 0; i < 6; i++) {
        if (strcmp(s, t[i]) == 0) { *out = true; return 0; }
        if (strcmp(s, f[i]) == 0) { *out = false; return 0; }
    }
    return -1;
}

/* The index of v in allowed ("a|b|c"), or -1. */
static int enum_index(const char *allowed, const char *v) {
    size_t n = strlen(v);
    int k = 0;
    for (const char *p = allowed; *p; k++) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, v, n) == 0) return k;
        if (!bar) break;
        p = bar + 1;
    }
    return -1;
}

/* The k-th name of allowed ("a|b|c") into buf, or "?" when there is none. */
static const char *enum_text(const char *allowed, int k, char *buf, size_t n) {
    const char *p = allowed;
    for (int i = 0; i < k && p; i++) p = strchr(p, '|') ? strchr(p, '|') + 1 : NULL;
    if (!p || k < 0) return "?";
    size_t len = strcspn(p, "|");
    snprintf(buf, n, "%.*s", (int)len, p);
    return buf;
}

static void range_text(const CfgEntry *e, char *buf, size_t n) {
    snprintf(buf, n, "%s %.10g and %s %.10g", e->flags & MIN_EXCL ? "greater than" : "at least", e->min,
             e->flags & MAX_EXCL ? "less than" : "at most", e->max);
}

/* 0 when text is a port: an integer 0..65535 (0: any free port), or "*" where star is allowed (ZeroMQ bind). */
static int port_check(const char *text, int star) {
    if (star && strcmp(text, "*") == 0) return 0;
    if (!*text || strspn(text, "0123456789") != strlen(text) || strlen(text) > 5) return -1;
    return atoi(text) <= 65535 ? 0 : -1;
}

/* Checks an address-valued key (EP_ZMQ / EP_HOSTPORT flags); ERR_INVAL naming the key and the accepted forms. Only
 * the form is checked here: whether the host resolves or the port is free is for the bind/connect to say.
 * EP_ZMQ: zmq_tcp(7) "tcp://HOST:PORT" (HOST non-empty: an address, a name, an interface or "*"; PORT 0..65535 or
 * "*"), zmq_ipc(7) "ipc://PATH", zmq_inproc(7) "inproc://NAME". EP_HOSTPORT: services/coordinator/http.c's form,
 * "IP:PORT" or "[IPv6]:PORT" with an IPv4/IPv6 literal (it does not resolve names). */
static int endpoint_check(const CfgEntry *e, const char *v, const char *where, char err[ERR_LEN]) {
    if (e->flags & EP_ZMQ) {
        static const char *want = "want tcp://HOST:PORT, ipc://PATH or inproc://NAME";
        size_t pre = strncmp(v, "ipc://", 6) == 0 ? 6 : strncmp(v, "inproc://", 9) == 0 ? 9 : 0;
        if (pre && !v[pre])
            return err_set(err, ERR_INVAL, "%s: %s: '%s' has an empty path or name (%s)", where, e->key, v, want);
        if (pre) return 0;
        if (strncmp(v, "tcp://", 6) != 0) {
            const char *sep = strstr(v, "://");
            if (sep) return err_set(err, ERR_INVAL, "%s: %s: '%s': transport '%.*s' is not supported (%s)", where,
                                    e->key, v, (int)(sep - v), v, want);
            return err_set(err, ERR_INVAL, "%s: %s: '%s' is not a ZeroMQ endpoint (%s)", where, e->key, v, want);
        }
        const char *hp = v + 6, *colon = strrchr(hp, ':');
        if (!colon || colon == hp)
            return err_set(err, ERR_INVAL, "%s: %s: '%s' is not tcp://HOST:PORT (the host or the :PORT is missing)",
                           where, e->key, v);
        if (port_check(colon + 1, 1))
            return err_set(err, ERR_INVAL, "%s: %s: '%s': port '%s' is not an integer 0..65535 or '*'", where, e->key,
                           v, colon + 1);
        return 0;
    }
    static const char *want = "want IP:PORT or [IPv6]:PORT, e.g. 127.0.0.1:8080";
    const char *colon = strrchr(v, ':');
    if (!colon || colon == v)
        return err_set(err, ERR_INVAL, "%s: %s: '%s' is not host:port (%s)", where, e->key, v, want);
    if (port_check(colon + 1, 0))
        return err_set(err, ERR_INVAL, "%s: %s: '%s': port '%s' is not an integer 0..65535", where, e->key, v,
                       colon + 1);
    char host[64];
    size_t hn = (size_t)(colon - v);
    const char *h = v;
    if (v[0] == '[') {
        if (hn < 3 || colon[-1] != ']')
            return err_set(err, ERR_INVAL, "%s: %s: '%s': an unclosed '[' (%s)", where, e->key, v, want);
        h++;
        hn -= 2;
    }
    if (hn >= sizeof host)
        return err_set(err, ERR_INVAL, "%s: %s: '%s': the host is not an IP address (%s)", where, e->key, v, want);
    memcpy(host, h, hn);
    host[hn] = 0;
    unsigned char addr[sizeof(struct in6_addr)];
    if (inet_pton(AF_INET, host, addr) != 1 && inet_pton(AF_INET6, host, addr) != 1)
        return err_set(err, ERR_INVAL, "%s: %s: '%s': host '%s' is not an IP address (%s)", where, e->key, v, host,
                       want);
    return 0;
}

/* Parses `value` for entry e and stores it into c. Lists take "a,b" or "[a, b]". */
/* True when s is UTF-8 text (a config round-trips through YAML, which must be). */
static bool valid_utf8(const char *s) {
    for (size_t i = 0, n = strlen(s); i < n;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k <= 0) return false;
        i += (size_t)k;
    }
    return true;
}

/* YAML's null (a file's null, ~ or empty value reaches set_key as "") and Hydra's ("null", "~"). */
static bool is_null_text(const char *value) {
    return !value[0] || !strcmp(value, "~") || !strcmp(value, "null");
}

static int apply(Config *c, const CfgEntry *e, const char *value, const char *where, char err[ERR_LEN]) {
    char *field = (char *)c + e->off;
    char rng[96];
    if (e->flags & NULL_NAN && is_null_text(value)) { *(double *)field = NAN; return 0; }
    if (e->flags & NULL_ZERO && is_null_text(value)) { *(int *)field = 0; return 0; }
    switch (e->type) {
    case CFG_INT: {
        char *end;
        errno = 0;
        double v = strtod(value, &end);
        if (*value && !*end && (errno == ERANGE || isinf(v))) {          /* "1e999": a number, too big */
            range_text(e, rng, sizeof rng);
            return err_set(err, ERR_INVAL, "%s: %s: %s is out of range (allowed: %s)", where, e->key, value, rng);
        }
        if (!*value || *end || errno || v != floor(v))
            return err_set(err, ERR_INVAL, "%s: %s: '%s' is not an integer", where, e->key, value);
        if (v < e->min || v > e->max || (e->flags & MIN_EXCL && v == e->min) || (e->flags & MAX_EXCL && v == e->max)) {
            range_text(e, rng, sizeof rng);
            return err_set(err, ERR_INVAL, "%s: %s: %s is out of range (allowed: %s)", where, e->key, value, rng);
        }
        *(int *)field = (int)v;
        return 0;
    }
    case CFG_FLOAT: {
        char *end;
        errno = 0;
        double v = strtod(value, &end);
        const char *yi = value + (value[0] == '+' || value[0] == '-');          /* YAML 1.2 core schema infinity */
        int yaml_inf = !strcmp(yi, ".inf") || !strcmp(yi, ".Inf") || !strcmp(yi, ".INF");
        if (yaml_inf || (*value && !*end && (errno == ERANGE || isinf(v)))) {
            /* strtod's ERANGE: beyond a double ("1e999", +-HUGE_VAL) or below its smallest normal ("1e-999");
             * "inf" parses without ERANGE. Each is a number out of range, not a non-number. */
            range_text(e, rng, sizeof rng);
            return err_set(err, ERR_INVAL, "%s: %s: %s is out of range (%s; allowed: %s)", where, e->key, value,
                           errno != ERANGE ? "infinite" : fabs(v) > 1 ? "beyond the range of a double"
                                                                      : "too small for a double", rng);
        }
        if (!*value || *end || errno || !isfinite(v))
            return err_set(err, ERR_INVAL, "%s: %s: '%s' is not a number", where, e->key, value);
        if (v < e->min || v > e->max || (e->flags & MIN_EXCL && v == e->min) || (e->flags & MAX_EXCL && v == e->max)) {
            range_text(e, rng, sizeof rng);
            return err_set(err, ERR_INVAL, "%s: %s: %s is out of range (allowed: %s)", where, e->key, value, rng);
        }
        *(double *)field = v;
        return 0;
    }
    case CFG_BOOL:
        if (parse_bool(value, (bool *)field))
            return err_set(err, ERR_INVAL, "%s: %s: '%s' is not a boolean (allowed: true|false)", where, e->key, value);
        return 0;
    case CFG_ENUM: {
        int k = enum_index(e->allowed, value);
        if (k < 0)
            return err_set(err, ERR_INVAL, "%s: %s: '%s' is not allowed (allowed: %s)", where, e->key, value, e->allowed);
        *(int *)field = k;
        return 0;
    }
    case CFG_STR:
        if (!valid_utf8(value))
            return err_set(err, ERR_INVAL, "%s: %s: the value is not valid UTF-8 text", where, e->key);
        if (e->flags & (EP_ZMQ | EP_HOSTPORT)) {
            int rc = endpoint_check(e, value, where, err);
            if (rc) return rc;
        }
        xfree(*(char **)field);
        *(char **)field = xstrdup(value);
        return 0;
    case CFG_LIST: {
        if (!valid_utf8(value))
            return err_set(err, ERR_INVAL, "%s: %s: the value is not valid UTF-8 text", where, e->key);
        StrList *l = (StrList *)field;
        list_free(l);
        const char *p = value;
        size_t n = strlen(p);
        if (n >= 2 && p[0] == '[' && p[n - 1] == ']') { p++; n -= 2; }
        const char *end = p + n;
        while (p < end) {
            const char *comma = memchr(p, ',', (size_t)(end - p));
            const char *q = comma ? comma : end;
            const char *a = p, *b = q;
            while (a < b && (*a == ' ' || *a == '\'' || *a == '"')) a++;
            while (b > a && (b[-1] == ' ' || b[-1] == '\'' || b[-1] == '"')) b--;
            if (b > a) list_add(l, a, (size_t)(b - a));
            p = comma ? comma + 1 : end;
        }
        return 0;
    }
    }
    return ERR_INVAL;
}

/* True when key names a section (a prefix "key." of some table key or verl-only subtree), e.g. "data". */
static int is_section(const char *key) {
    size_t n = strlen(key);
    for (size_t i = 0; i < NCFG; i++)
        if (strncmp(cfg_table[i].key, key, n) == 0 && cfg_table[i].key[n] == '.') return 1;
    return config_verl_is_section(key);
}

static void print_value(const CfgEntry *e, const Config *c, FILE *f);

/* Entry e's value in c as print_value writes it: xmalloc'd text (caller xfrees). */
static char *value_text(const CfgEntry *e, const Config *c) {
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) DIE("open_memstream: out of memory");
    print_value(e, c, f);
    if (fclose(f)) DIE("open_memstream: out of memory");
    char *text = xstrdup(buf);
    free(buf);
    return text;
}

/* Whether value, parsed as entry e, differs from e's value in c (compared as printed): 1 differs, 0 the same, or
 * apply's error for a value e cannot take (err set). *now (may be NULL): c's value as text (xmalloc'd). */
static int differs(const Config *c, const CfgEntry *e, const char *value, const char *where, char **now,
                   char err[ERR_LEN]) {
    Config t;
    config_defaults(&t);
    int rc = apply(&t, e, value, where, err);
    char *mine = value_text(e, c), *theirs = rc ? NULL : value_text(e, &t);
    if (!rc) rc = strcmp(mine, theirs) != 0;
    config_free(&t);
    xfree(theirs);
    if (now) *now = mine;
    else xfree(mine);
    return rc;
}


static int set_key(Config *c, const char *key, const char *value, const char *where, char err[ERR_LEN]);

/* The rule for a verl key (config_verl_key), except that the rules every section has (_target_, profiler.*) count only
 * under a section dapo or verl has: bogus._target_ and data.seed._target_ stay unknown keys. */
static const VerlKey *verl_rule(const char *key) {
    const VerlKey *vk = config_verl_key(key);
    int target = vk && !strcmp(vk->key, "_target_"), profiler = vk && !strcmp(vk->key, "profiler.");
    if (!target && !profiler) return vk;
    const char *cut = target ? strrchr(key, '.') : strstr(key, ".profiler.");
    char parent[256];
    if (!cut || (size_t)(cut - key) >= sizeof parent) return NULL;
    snprintf(parent, sizeof parent, "%.*s", (int)(cut - key), key);
    return is_section(parent) ? vk : NULL;
}

/* verl's actor.optim.betas, [beta1, beta2] (torch.optim.AdamW's betas): the two rows beta1 and beta2. */
static int set_betas(Config *c, const char *value, const char *where, char err[ERR_LEN]) {
    char buf[160], *part[3] = {NULL, NULL, NULL};
    size_t n = strlen(value);
    while (n && value[n - 1] == ' ') n--;
    const char *p = value + strspn(value, " ");
    if (n && value[n - 1] == ']' && *p == '[') { p++; n--; }
    int k = 0, bad = (size_t)(value + n - p) >= sizeof buf;
    if (!bad) {
        snprintf(buf, sizeof buf, "%.*s", (int)(value + n - p), p);
        for (char *save = NULL, *t = strtok_r(buf, ",", &save); t && k < 3; t = strtok_r(NULL, ",", &save)) {
            t += strspn(t, " ");
            for (char *e = t + strlen(t); e > t && e[-1] == ' ';) *--e = 0;
            part[k++] = t;
        }
    }
    if (bad || k != 2)
        return err_set(err, ERR_INVAL, "%s: " AR "actor.optim.betas: '%s' is not a pair [beta1, beta2]", where, value);
    int rc = set_key(c, AR "actor.optim.beta1", part[0], where, err);
    return rc ? rc : set_key(c, AR "actor.optim.beta2", part[1], where, err);
}

/* Config.source for a value set from `where`: "command line", "the coordinator's config:LINE", "PATH:LINE" (a file:
 * remembered in c->files, at most 16, then CFG_SRC_OTHER), anything else (a caller's own name) CFG_SRC_OTHER. */
static int source_of(Config *c, const char *where) {
    if (!strcmp(where, "command line")) return CFG_SRC_CLI;
    if (!strncmp(where, "the coordinator's config", 24)) return CFG_SRC_COORDINATOR;
    const char *colon = strrchr(where, ':');
    if (!colon || !colon[1] || strspn(colon + 1, "0123456789") != strlen(colon + 1)) return CFG_SRC_OTHER;
    size_t n = (size_t)(colon - where);
    for (int k = 0; k < c->nfiles; k++)
        if (strlen(c->files[k]) == n && !strncmp(c->files[k], where, n)) return CFG_SRC_FILE + k;
    if (c->nfiles >= (int)(sizeof c->files / sizeof c->files[0])) return CFG_SRC_OTHER;
    c->files[c->nfiles] = xmalloc(n + 1);
    memcpy(c->files[c->nfiles], where, n);
    c->files[c->nfiles][n] = 0;
    return CFG_SRC_FILE + c->nfiles++;
}

/* Row row was set from `where` in spelling `spelling` (set_key, walk's lists). */
/* Row e back to its default, not set (Hydra's ~key; verl's null for a NULL_DEFAULT row). */
static void restore_default(Config *c, const CfgEntry *e) {
    char derr[ERR_LEN];
    if (apply(c, e, e->dflt, "defaults", derr)) DIE("config table default is invalid: %s", derr);
    c->user_set[e - cfg_table] = 0;
    c->spelling[e - cfg_table] = 0;
    c->source[e - cfg_table] = CFG_SRC_DEFAULT;
}

static void mark_set(Config *c, size_t row, int spelling, const char *where) {
    c->user_set[row] = 1;
    c->spelling[row] = (unsigned char)spelling;
    c->source[row] = (unsigned char)source_of(c, where);
}

/* A verl key with a rule and no table row (config_verl.h): a fixed algorithm key is accepted silently at a value dapo
 * trains with and refused at any other, naming why; a refused one always; the others are ignored with a warning. */
static int verl_key(const VerlKey *vk, const char *key, const char *value, const char *where, char err[ERR_LEN]) {
    if (vk->kind == VERL_REFUSED)
        return err_set(err, ERR_UNSUPPORTED, "%s: %s=%s: not implemented: %s", where, key, value, vk->why);
    if (vk->kind == VERL_FIXED) {
        if (config_verl_value_ok(vk, value)) return 0;      /* the value dapo trains with: nothing to warn about */
        return err_set(err, ERR_UNSUPPORTED, "%s: %s: %s is not supported (dapo accepts %s): %s", where, key,
                       value[0] ? value : "null", vk->ok, vk->why);
    }
    log_warn("%s: %s: verl key not used by dapo, ignored (value '%s'; %s: %s)", where, key, value,
             config_verl_kind_text(vk->kind), vk->why);
    return 0;
}

/* err names the table key; where the user wrote another spelling, it names that one too ("alias (key)"). */
static void name_spelling(char err[ERR_LEN], const CfgEntry *e, int spelling) {
    char *at = spelling ? strstr(err, e->key) : NULL;
    if (!at) return;
    char tail[ERR_LEN];
    snprintf(tail, sizeof tail, "%s", at + strlen(e->key));
    snprintf(at, ERR_LEN - (size_t)(at - err), "%s (%s)%s", spelling_name(e, spelling), e->key, tail);
}

/* A dotted key: non-empty parts, no leading, trailing or doubled dot. */
static bool key_form_ok(const char *key) {
    return key[0] && key[0] != '.' && key[strlen(key) - 1] != '.' && !strstr(key, "..");
}

static int set_key(Config *c, const char *key, const char *value, const char *where, char err[ERR_LEN]) {
    if (!key_form_ok(key)) return err_set(err, ERR_INVAL, "%s: '%s' is not a key (dotted names, e.g. data.seed)", where,
                                          key);
    if (!strcmp(key, AR "actor.optim.betas")) return set_betas(c, value, where, err);
    int spelling;
    const CfgEntry *e = find_spelling(key, &spelling);
    if (e && strstr(value, "${"))                                  /* Hydra's interpolations are not resolved here */
        return err_set(err, ERR_UNSUPPORTED, "%s: %s=%s: interpolations (${...}) are not supported: write the value",
                       where, key, value);
    if (e) {
        size_t row = (size_t)(e - cfg_table);
        if (e->flags & NULL_DEFAULT && is_null_text(value)) {      /* verl's null: not set (the other spelling's
                                                                       value, if one set it, stands) */
            if (!(c->user_set[row] && c->spelling[row] != spelling)) restore_default(c, e);
            return 0;
        }
        /* one setting, two spellings: in one layer (a file, or the command line) they must agree; a later layer
         * overrides an earlier one whichever spelling each uses */
        if (c->user_set[row] && c->spelling[row] != spelling && c->source[row] == source_of(c, where)) {
            char *now = NULL;
            int d = differs(c, e, value, where, &now, err);
            if (d == 1)
                d = err_set(err, ERR_INVAL, "%s: %s=%s and %s=%s are one setting (verl's two spellings) set to different "
                            "values: keep one", where, key, value, spelling_name(e, c->spelling[row]), now);
            xfree(now);
            if (d) return d;
        }
        int rc = apply(c, e, value, where, err);
        if (rc) name_spelling(err, e, spelling);
        else mark_set(c, row, spelling, where);
        return rc;
    }
    if (!strcmp(value, "{}") && (is_section(key) || verl_rule(key)))
        return 0;                                                  /* Hydra's empty mapping: nothing to set */
    if (is_section(key) && strcmp(where, "command line") == 0)
        return err_set(err, ERR_INVAL, "%s: '%s' is a section, not a key: set %s.KEY=VALUE", where, key, key);
    if (is_section(key))
        return err_set(err, ERR_INVAL, "%s: %s: expected a mapping, found a scalar ('%s')", where, key, value);
    const VerlKey *vk = verl_rule(key);
    if (vk) return verl_key(vk, key, value, where, err);
    const char *s = suggest(key);
    return err_set(err, ERR_NOTFOUND, "%s: unknown key '%s'%s%s%s", where, key,
                   s ? " (did you mean '" : "", s ? s : "", s ? "'?)" : "");
}

/* Hydra's ~key[=value]: the key back to its default (and not "set"); with a value, only when the key has it now
 * (Hydra deletes only a matching value). A verl key dapo does not use: nothing to undo. */
static int unset_key(Config *c, const char *key, const char *value, char err[ERR_LEN]) {
    int spelling;
    const CfgEntry *e = find_spelling(key, &spelling);
    if (!e && verl_rule(key)) return 0;
    if (!e) {
        const char *s = suggest(key);
        return err_set(err, ERR_NOTFOUND, "command line: ~%s: unknown key%s%s%s", key, s ? " (did you mean '" : "",
                       s ? s : "", s ? "'?)" : "");
    }
    if (value) {
        char *now = NULL, terr[ERR_LEN];
        int rc = differs(c, e, value, "command line", &now, terr) ? err_set(err, ERR_INVAL, "command line: ~%s=%s: the "
                 "key is %s, not that value (Hydra deletes only a matching value; ~%s alone restores the default)", key,
                 value, now, key) : 0;                /* a value the key cannot take is not its value either */
        xfree(now);
        if (rc) return rc;
    }
    restore_default(c, e);
    (void)spelling;
    return 0;
}

/* ------------------------------------------------------------------------------------------- public */

void config_defaults(Config *c) {
    memset(c, 0, sizeof *c);
    char err[ERR_LEN];
    for (size_t i = 0; i < NCFG; i++)
        if (apply(c, &cfg_table[i], cfg_table[i].dflt, "defaults", err))
            DIE("config table default is invalid: %s", err);
}

void config_free(Config *c) {
    if (!c) return;
    for (int k = 0; k < c->nfiles; k++) xfree(c->files[k]);
    c->nfiles = 0;
    for (size_t i = 0; i < NCFG; i++) {
        char *field = (char *)c + cfg_table[i].off;
        if (cfg_table[i].type == CFG_STR) {
            xfree(*(char **)field);
            *(char **)field = NULL;
        } else if (cfg_table[i].type == CFG_LIST) {
            list_free((StrList *)field);
        }
    }
}

int config_set(Config *c, const char *key, const char *value, const char *where, char err[ERR_LEN]) {
    return set_key(c, key, value, where ? where : "command line", err);
}

static int node_line(struct fy_node *n) {
    struct fy_token *t = n ? fy_node_get_scalar_token(n) : NULL;
    const struct fy_mark *m = t ? fy_token_start_mark(t) : NULL;
    return m ? m->line + 1 : 0;
}

/* Walks a mapping, joining keys with '.', and applies every scalar / list leaf. */
static int walk(Config *c, struct fy_node *map, const char *prefix, const char *path, char err[ERR_LEN]) {
    void *it = NULL;
    struct fy_node_pair *pair;
    while ((pair = fy_node_mapping_iterate(map, &it))) {
        struct fy_node *k = fy_node_pair_key(pair), *v = fy_node_pair_value(pair);
        size_t klen;
        const char *ks = k ? fy_node_get_scalar(k, &klen) : NULL;
        char where[ERR_LEN / 2];
        snprintf(where, sizeof where, "%s:%d", path, node_line(k));
        if (!ks) return err_set(err, ERR_INVAL, "%s: mapping keys must be plain scalars", where);
        char key[256];
        if ((size_t)snprintf(key, sizeof key, "%s%.*s", prefix, (int)klen, ks) >= sizeof key)
            return err_set(err, ERR_INVAL, "%s: key too long", where);
        if (!prefix[0] && strcmp(key, "defaults") == 0) continue;     /* the bases: config_load_file read them */
        if (!v || fy_node_is_mapping(v)) {
            if (!v) continue;
            if (find_entry(key) && !alias_under(key))
                return err_set(err, ERR_INVAL, "%s: %s: expected a value, found a mapping", where, key);
            char sub[260];
            snprintf(sub, sizeof sub, "%s.", key);
            int rc = walk(c, v, sub, path, err);
            if (rc) return rc;
        } else if (fy_node_is_sequence(v) && !strcmp(key, AR "actor.optim.betas")) {   /* [beta1, beta2] */
            char pair[160] = "";
            void *sit = NULL;
            struct fy_node *item;
            for (int k = 0; (item = fy_node_sequence_iterate(v, &sit)); k++) {
                size_t n;
                const char *s = fy_node_is_scalar(item) ? fy_node_get_scalar(item, &n) : NULL;
                size_t used = strlen(pair);
                if (!s || n > 60 || used + n + 2 >= sizeof pair)
                    return err_set(err, ERR_INVAL, "%s: %s: a pair of numbers [beta1, beta2]", where, key);
                snprintf(pair + used, sizeof pair - used, "%s%.*s", k ? "," : "", (int)n, s);
            }
            int rc = set_key(c, key, pair, where, err);
            if (rc) return rc;
        } else if (fy_node_is_sequence(v)) {
            int spelling;
            const CfgEntry *e = find_spelling(key, &spelling);
            const VerlKey *vk = e ? NULL : verl_rule(key);
            if (vk && (vk->kind == VERL_FIXED || vk->kind == VERL_REFUSED))
                return err_set(err, ERR_UNSUPPORTED, "%s: %s: a list is not supported: %s", where, key, vk->why);
            if (vk) { log_warn("%s: %s: verl key not used by dapo, ignored (%s: %s)", where, key,
                               config_verl_kind_text(vk->kind), vk->why); continue; }
            if (!e) return set_key(c, key, "", where, err);
            if (e->type != CFG_LIST) return err_set(err, ERR_INVAL, "%s: %s: a list is not allowed here", where, key);
            if (spelling) return err_set(err, ERR_INVAL, "%s: %s: write the list under %s", where, key, e->key);
            StrList *l = (StrList *)((char *)c + e->off);
            list_free(l);
            void *sit = NULL;
            struct fy_node *item;
            while ((item = fy_node_sequence_iterate(v, &sit))) {
                size_t n;
                const char *s = fy_node_is_scalar(item) ? fy_node_get_scalar(item, &n) : NULL;
                if (!s) return err_set(err, ERR_INVAL, "%s: %s: list items must be strings", where, key);
                list_add(l, s, n);
            }
            mark_set(c, (size_t)(e - cfg_table), 0, where);   /* set by this file, like any scalar key */
        } else {
            size_t n;
            const char *s = fy_node_get_scalar(v, &n);
            char *val = xmalloc(n + 1);
            memcpy(val, s ? s : "", n);
            val[n] = 0;
            /* YAML null ("~", "null" or empty) for a string key means empty; for a section, no keys. */
            int null = !val[0] || strcmp(val, "~") == 0 || strcmp(val, "null") == 0;
            if (null && !find_entry(key) && is_section(key)) { xfree(val); continue; }
            int rc = set_key(c, key, null ? "" : val, where, err);
            xfree(val);
            if (rc) return rc;
        }
    }
    return 0;
}

static void diag_discard(struct fy_diag *diag, void *user, const char *buf, size_t len) {
    (void)diag; (void)user; (void)buf; (void)len;
}

/* The 1-based number of the last line of path holding anything but blanks (0: none). */
static int last_content_line(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    int line = 1, last = 0, ch;
    while ((ch = getc(f)) != EOF) {
        if (ch == '\n') line++;
        else if (ch != ' ' && ch != '\t' && ch != '\r') last = line;
    }
    fclose(f);
    return last;
}

/* libfyaml's first collected error as "path:LINE:COL: not valid YAML: msg". libfyaml reports an error found at
 * the end of input (an unclosed bracket or quote) on the line after the last one; that becomes the last line
 * that has content, without a column. */
static int yaml_error(struct fy_diag *diag, const char *path, char err[ERR_LEN]) {
    void *it = NULL;
    struct fy_diag_error *e = fy_diag_errors_iterate(diag, &it);
    if (!e) return err_set(err, ERR_DECODE, "%s: not valid YAML", path);
    int last = last_content_line(path);
    if (e->line > last && last > 0)
        return err_set(err, ERR_DECODE, "%s:%d: not valid YAML: %s (at the end of the file)", path, last, e->msg);
    return err_set(err, ERR_DECODE, "%s:%d:%d: not valid YAML: %s", path, e->line, e->column, e->msg);
}

/* Refuses what cannot be a YAML config before libfyaml sees it (libfyaml reads a directory, or bytes after a NUL,
 * as an empty stream: "all defaults"): a directory, a NUL or other control byte (not text), bytes that are not
 * UTF-8 (YAML 1.2 §5.2 allows UTF-16/32 only with NULs in them, refused as not text). Tab, LF and CR are text. */
static int config_file_check(const char *path, char err[ERR_LEN]) {
    struct stat sb;
    if (stat(path, &sb) != 0) return err_set(err, ERR_IO, "%s: cannot open config: %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode)) return err_set(err, ERR_INVAL, "%s: is a directory, not a YAML config file", path);
    if (!S_ISREG(sb.st_mode))              /* a FIFO or a device would block or never end */
        return err_set(err, ERR_INVAL, "%s: not a regular file (a YAML config file is one)", path);
    char ferr[ERR_LEN];
    size_t len;
    /* 256 KiB: verl's whole config is ~40 KB; libfyaml's duplicate-key check is quadratic in a mapping's keys (a
     * 229 KB file of 20,000 keys took 17 s), so a bigger file is refused before it is parsed (issue 38) */
    char *buf = fs_read_all(path, CONFIG_FILE_MAX_BYTES, &len, ferr);
    if (!buf) return err_set(err, ERR_IO, "%s: cannot read config: %s", path, ferr);
    int rc = 0, line = 1;
    for (size_t i = 0; i < len && !rc;) {
        unsigned char ch = (unsigned char)buf[i];
        if (ch < 0x80) {
            if (ch < 0x20 && ch != '\t' && ch != '\n' && ch != '\r')
                rc = err_set(err, ERR_DECODE, "%s:%d: not a text file: control byte 0x%02x at byte offset %zu (a YAML "
                             "config is UTF-8 text)", path, line, ch, i);
            line += ch == '\n';
            i++;
            continue;
        }
        utf8proc_int32_t cp;
        utf8proc_ssize_t n = utf8proc_iterate((const utf8proc_uint8_t *)buf + i, (utf8proc_ssize_t)(len - i), &cp);
        if (n <= 0)
            rc = err_set(err, ERR_DECODE, "%s:%d: not valid UTF-8 text: byte 0x%02x at byte offset %zu (a YAML config "
                         "is UTF-8 text)", path, line, ch, i);
        else i += (size_t)n;
    }
    xfree(buf);
    return rc;
}

/* True when the file at path has a line that is not blank, a comment or a document marker ("---", "..."). */
static int has_yaml_content(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char ln[4096];
    int found = 0;
    while (!found && fgets(ln, sizeof ln, f)) {
        const char *p = ln + strspn(ln, " \t\r\n");
        found = *p && *p != '#' && strncmp(p, "---", 3) != 0 && strncmp(p, "...", 3) != 0;
    }
    fclose(f);
    return found;
}

#define CFG_DEFAULTS_DEPTH 8

static int load_file(Config *c, const char *path, const char *chain, int depth, char err[ERR_LEN]);

/* 1 when file is one of the " -> "-separated entries of chain. */
static int in_chain(const char *chain, const char *file) {
    size_t n = strlen(file);
    for (const char *p = chain; (p = strstr(p, file)); p += n)
        if ((p == chain || (p - chain >= 4 && !strncmp(p - 4, " -> ", 4))) && (!p[n] || !strncmp(p + n, " -> ", 4)))
            return 1;
    return 0;
}

/* The bases a config names (`defaults: [a.yaml, ...]` or `defaults: a.yaml`), each loaded before the file's own
 * keys, in order: paths relative to the naming file's directory unless absolute. chain: the files that led here
 * ("a.yaml -> b.yaml"), for the cycle and depth errors. */
static int load_defaults(Config *c, struct fy_node *root, const char *path, const char *chain, int depth,
                         char err[ERR_LEN]) {
    struct fy_node *d = fy_node_mapping_lookup_by_string(root, "defaults", -1);
    if (!d) return 0;
    if (!fy_node_is_sequence(d) && !fy_node_is_scalar(d))
        return err_set(err, ERR_INVAL, "%s:%d: defaults: a list of config files (or one file) to start from", path,
                       node_line(d));
    void *it = NULL;
    struct fy_node *item = fy_node_is_scalar(d) ? d : fy_node_sequence_iterate(d, &it);
    for (; item; item = fy_node_is_scalar(d) ? NULL : fy_node_sequence_iterate(d, &it)) {
        size_t n;
        const char *s = fy_node_is_scalar(item) ? fy_node_get_scalar(item, &n) : NULL;
        if (!s || n == 0 || n >= 1024)
            return err_set(err, ERR_INVAL, "%s:%d: defaults: each entry is the path of a config file", path,
                           node_line(item));
        char base[2048], dir[1024];
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (s[0] == '/' || !slash) snprintf(base, sizeof base, "%.*s", (int)n, s);
        else { slash[1] = 0; snprintf(base, sizeof base, "%s%.*s", dir, (int)n, s); }
        char real_base[PATH_MAX];
        if (realpath(base, real_base) && in_chain(chain, real_base))
            return err_set(err, ERR_INVAL, "%s:%d: defaults: %s is already being read (%s -> %s): a cycle", path,
                           node_line(item), base, chain, base);
        if (depth >= CFG_DEFAULTS_DEPTH)
            return err_set(err, ERR_INVAL, "%s:%d: defaults: more than %d levels of bases (%s)", path, node_line(item),
                           CFG_DEFAULTS_DEPTH, chain);
        int rc = load_file(c, base, chain, depth + 1, err);
        if (rc) return rc;
    }
    return 0;
}

int config_load_file(Config *c, const char *path, char err[ERR_LEN]) { return load_file(c, path, "", 0, err); }

static int load_file(Config *c, const char *path, const char *chain, int depth, char err[ERR_LEN]) {
    int crc = config_file_check(path, err);
    if (crc) return crc;
    /* libfyaml's own diagnostics are collected (never printed); errors are reported through err. */
    struct fy_diag_cfg dcfg;
    fy_diag_cfg_default(&dcfg);
    dcfg.fp = NULL;
    dcfg.output_fn = diag_discard;
    dcfg.level = FYET_ERROR;
    struct fy_diag *diag = fy_diag_create(&dcfg);
    if (!diag) return err_set(err, ERR_NOMEM, "%s: cannot create the YAML diagnostics object", path);
    fy_diag_set_collect_errors(diag, true);
    int rc = 0;
    struct fy_document *doc = yaml_doc_build(path, NULL, 0, diag, &rc, err);   /* anchors and aliases, bounded */
    if (!doc) {
        void *it = NULL;
        if (rc) ;                                     /* aliases expanding too far: err says */
        else if (fy_diag_errors_iterate(diag, &it)) rc = yaml_error(diag, path, err);
        else if (has_yaml_content(path)) rc = err_set(err, ERR_DECODE, "%s: not valid YAML (no document read)", path);
        else log_warn("%s: the config file has no settings: all defaults", path);  /* empty or only comments */
        fy_diag_destroy(diag);
        return rc;
    }
    fy_diag_destroy(diag);
    struct fy_node *root = fy_document_root(doc);
    size_t n = 0;
    const char *rs = root && fy_node_is_scalar(root) ? fy_node_get_scalar(root, &n) : NULL;
    if (rs && (n == 0 || (n == 1 && rs[0] == '~') || (n == 4 && memcmp(rs, "null", 4) == 0)))
        root = NULL;                                  /* "---" alone: a document with nothing in it */
    if (!root)
        log_warn("%s: the config file has no settings: all defaults", path);
    else if (!fy_node_is_mapping(root))
        rc = err_set(err, ERR_INVAL, "%s: the top level must be a mapping of sections", path);
    else {
        char real[PATH_MAX], next[8192];
        int len = snprintf(next, sizeof next, "%s%s%s", chain, chain[0] ? " -> " : "", realpath(path, real) ? real : path);
        rc = len < 0 || (size_t)len >= sizeof next ? err_set(err, ERR_INVAL, "%s: defaults: the chain of bases is too long", path)
                                                   : load_defaults(c, root, path, next, depth, err);
        if (!rc) rc = walk(c, root, "", path, err);
    }
    fy_document_destroy(doc);
    return rc;
}

const char *config_enum_name(const Config *c, const char *key) {
    static _Thread_local char buf[64];
    const CfgEntry *e = find_entry(key);
    if (!e || e->type != CFG_ENUM) return "?";
    return enum_text(e->allowed, *(const int *)((const char *)c + e->off), buf, sizeof buf);
}

bool config_is_set(const Config *c, const char *key) {
    const CfgEntry *e = find_entry(key);
    return e && c->user_set[e - cfg_table];
}

int config_logger_known(const char *name) {
    static const char *known[] = {"console", "tensorboard", "file", "wandb", "mlflow", "swanlab", "vemlp_wandb",
                                  "clearml", "trackio"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(name, known[i])) return i < 3 ? 1 : 2;
    return 0;
}

bool config_has_logger(const Config *c, const char *name) {
    for (int i = 0; i < c->logger.n; i++)
        if (!strcmp(c->logger.v[i], name)) return true;
    return false;
}


int config_optim_sharded(const Config *c) {
    return c->num_learners > 1 && (c->fsdp_size == -1 || c->fsdp_size >= c->num_learners);
}

int config_staleness(const Config *c) {
    return c->v1_mode == CFG_V1_SYNC ? c->staleness : c->v1_max_off_policy;
}

CfgOffPolicyStrategy config_staleness_strategy(const Config *c) {
    return c->v1_mode == CFG_V1_SYNC ? c->staleness_strategy : c->v1_strategy;
}

int config_refill_at_once(const Config *c) {
    return c->refill == CFG_REFILL_AT_ONCE || (c->refill == CFG_REFILL_AUTO && config_staleness(c) > 0);
}

/* verl V1's async trainer modes name dapo's staleness settings (validate_v1 refuses the two spellings set apart): the
 * dapo keys take the values in effect, so the printed config (and what workers take from it) says what runs. */
static void resolve_v1(Config *c) {
    if (c->v1_mode == CFG_V1_SYNC) return;
    c->staleness = c->v1_max_off_policy;
    c->staleness_strategy = c->v1_strategy;
    static const char *const pair[2][2] = {{"trainer.staleness", "trainer.v1.sampler.max_off_policy_threshold"},
                                           {"trainer.staleness_strategy", "trainer.v1.sampler.max_off_policy_strategy"}};
    for (int i = 0; i < 2; i++)                      /* --print-config names where the value came from */
        c->source[find_entry(pair[i][0]) - cfg_table] = c->source[find_entry(pair[i][1]) - cfg_table];
}


int config_gen_batch_size(const Config *c) {
    return c->gen_batch_size ? c->gen_batch_size : c->train_batch_size;
}



/* s as a YAML double-quoted scalar: '"' and '\\' escaped, control bytes as \\xNN (YAML 1.2 §5.7). */
static void print_quoted(const char *s, FILE *f) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f) fprintf(f, "\\x%02x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

/* One entry's value as config_print_yaml writes it (strings quoted, lists in brackets). */
static void print_value(const CfgEntry *e, const Config *c, FILE *f) {
    const char *field = (const char *)c + e->off;
    switch (e->type) {
    case CFG_INT:
        if (e->flags & NULL_ZERO && !*(const int *)field) fputs("null", f);
        else fprintf(f, "%d", *(const int *)field);
        break;
    case CFG_FLOAT: {                      /* the shortest text that reads back to the same double */
        double v = *(const double *)field;
        char buf[40] = "null";                                 /* NULL_NAN's null */
        for (int prec = 10; prec <= 17 && !isnan(v); prec++) {
            snprintf(buf, sizeof buf, "%.*g", prec, v);
            if (strtod(buf, NULL) == v) break;
        }
        fputs(buf, f);
        break;
    }
    case CFG_BOOL: fprintf(f, "%s", *(const bool *)field ? "true" : "false"); break;
    case CFG_STR: print_quoted(*(char *const *)field, f); break;
    case CFG_ENUM: {
        char buf[64];
        print_quoted(enum_text(e->allowed, *(const int *)field, buf, sizeof buf), f);
        break;
    }
    case CFG_LIST: {
        const StrList *l = (const StrList *)field;
        fprintf(f, "[");
        for (int k = 0; k < l->n; k++) {
            if (k) fprintf(f, ", ");
            print_quoted(l->v[k], f);
        }
        fprintf(f, "]");
        break;
    }
    }
}

/* Prints keys grouped by their common prefixes as nested YAML (every key, or only the local ones). Table order keeps
 * sections together. */
static void print_yaml(const Config *c, FILE *f, bool local_only, bool annotate) {
    const char *prev = "";
    for (size_t i = 0; i < NCFG; i++) {
        const CfgEntry *e = &cfg_table[i];
        if (local_only && !config_key_is_local(e->key)) continue;
        /* Find the shared prefix (in whole components) with the previous key. */
        size_t common = 0;
        for (size_t j = 0; e->key[j] && e->key[j] == prev[j]; j++)
            if (e->key[j] == '.') common = j + 1;
        int depth = 0;
        for (size_t j = 0; j < common; j++) depth += e->key[j] == '.';
        const char *p = e->key + common;
        for (const char *dot; (dot = strchr(p, '.')); p = dot + 1, depth++)
            fprintf(f, "%*s%.*s:\n", depth * 2, "", (int)(dot - p), p);
        fprintf(f, "%*s%s: ", depth * 2, "", p);
        print_value(e, c, f);
        int src = c->source[i];
        if (annotate && src >= CFG_SRC_FILE && src - CFG_SRC_FILE < c->nfiles)
            fprintf(f, "  # file %s", c->files[src - CFG_SRC_FILE]);
        else if (annotate)
            fprintf(f, "  # %s", src == CFG_SRC_CLI ? "command line" : src == CFG_SRC_COORDINATOR ? "coordinator"
                                 : src == CFG_SRC_DEFAULT ? "default" : "set");
        fputc('\n', f);
        prev = e->key;
    }
}

void config_print_yaml(const Config *c, FILE *f) { print_yaml(c, f, false, false); }
void config_print_local_yaml(const Config *c, FILE *f) { print_yaml(c, f, true, false); }
void config_print_annotated(const Config *c, FILE *f, bool local_only) { print_yaml(c, f, local_only, true); }

/* Copies entry e's value from src to dst (strings and lists duplicated). */
static void copy_value(Config *dst, const Config *src, const CfgEntry *e) {
    char *d = (char *)dst + e->off;
    const char *s = (const char *)src + e->off;
    switch (e->type) {
    case CFG_INT: case CFG_ENUM: *(int *)d = *(const int *)s; break;
    case CFG_FLOAT: *(double *)d = *(const double *)s; break;
    case CFG_BOOL: *(bool *)d = *(const bool *)s; break;
    case CFG_STR:
        xfree(*(char **)d);
        *(char **)d = xstrdup(*(char *const *)s ? *(char *const *)s : "");
        break;
    case CFG_LIST: {
        const StrList *l = (const StrList *)s;
        list_free((StrList *)d);
        for (int k = 0; k < l->n; k++) list_add((StrList *)d, l->v[k], strlen(l->v[k]));
        break;
    }
    }
}

int config_take_from(Config *c, const char *yaml, size_t len, int *taken, char err[ERR_LEN]) {
    static const char *src = "the coordinator's config";
    if (taken) *taken = 0;
    int brc = 0;
    struct fy_document *doc = len ? yaml_doc_build(src, yaml, len, NULL, &brc, err) : NULL;
    if (brc) return brc;
    struct fy_node *root = doc ? fy_document_root(doc) : NULL;
    if (!root || !fy_node_is_mapping(root)) {
        fy_document_destroy(doc);
        return err_set(err, ERR_DECODE, "%s: not a YAML mapping of sections (%zu bytes)", src, len);
    }
    Config t;
    config_defaults(&t);
    int rc = walk(&t, root, "", src, err);
    fy_document_destroy(doc);
    for (size_t i = 0; i < NCFG && !rc; i++) {
        if (c->user_set[i] || !strncmp(cfg_table[i].key, "cluster.", 8)) continue;   /* its own, or its endpoints */
        copy_value(c, &t, &cfg_table[i]);
        c->source[i] = CFG_SRC_COORDINATOR;
        if (taken) (*taken)++;
    }
    config_free(&t);
    if (!rc) resolve_v1(c);
    return rc ? rc : config_validate(c, err);
}

bool config_key_is_local(const char *key) {
    return strncmp(key, "cluster.", 8) == 0 || strcmp(key, "trainer.device") == 0;
}

char *config_run_keys(const Config *c, bool only_set, uint64_t *hash) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) DIE("open_memstream: out of memory");
    for (size_t i = 0; i < NCFG; i++) {
        if (config_key_is_local(cfg_table[i].key) || (only_set && !c->user_set[i])) continue;
        fprintf(f, "%s: ", cfg_table[i].key);
        print_value(&cfg_table[i], c, f);
        fputc('\n', f);
    }
    if (fclose(f)) DIE("open_memstream: out of memory");
    char *text = xstrdup(buf);
    free(buf);
    if (hash) *hash = XXH3_64bits(text, strlen(text));
    return text;
}

/* The line starting at p (without its newline) split at ": " into key and value. */
static void split_line(const char *p, size_t n, const char **k, size_t *kn, const char **v, size_t *vn) {
    const char *colon = memchr(p, ':', n);
    *k = p;
    *kn = colon ? (size_t)(colon - p) : n;
    *v = colon && colon + 2 <= p + n ? colon + 2 : p + n;
    *vn = (size_t)(p + n - *v);
}

int config_run_keys_diff(const char *mine, const char *theirs, char *key, size_t key_n, char *a, char *b,
                         size_t val_n) {
    for (const char *q = theirs; *q;) {
        size_t lq = strcspn(q, "\n");
        const char *k2, *v2, *v1 = NULL;
        size_t k2n, v2n, v1n = 0;
        split_line(q, lq, &k2, &k2n, &v2, &v2n);
        for (const char *p = mine; *p && !v1;) {             /* the same key in mine */
            size_t lp = strcspn(p, "\n");
            const char *k1;
            size_t k1n;
            split_line(p, lp, &k1, &k1n, &v1, &v1n);
            if (k1n != k2n || memcmp(k1, k2, k1n) != 0) v1 = NULL;
            p += lp + (p[lp] == '\n');
        }
        if (!v1 || v1n != v2n || memcmp(v1, v2, v1n) != 0) {
            snprintf(key, key_n, "%.*s", (int)k2n, k2);
            if (v1) snprintf(a, val_n, "%.*s", (int)v1n, v1);
            else snprintf(a, val_n, "(not a key of its: another dapo build?)");
            snprintf(b, val_n, "%.*s", (int)v2n, v2);
            return 1;
        }
        q += lq + (q[lq] == '\n');
    }
    return 0;
}

bool config_help_wanted(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0) { i++; continue; }      /* a file named "-h" is a file */
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return true;
    }
    return false;
}

void config_usage_print(FILE *f, const char *prog, const char *extra) {
    const char *base = prog ? strrchr(prog, '/') : NULL;
    base = base ? base + 1 : prog ? prog : "dapo";
    if (!extra) extra = "";
    const char *nl = strchr(extra, '\n');
    int syn = nl ? (int)(nl - extra) : (int)strlen(extra);
    fprintf(f,
            "usage: %s [--config FILE] [key.path=value ...] [--print-config]%s%.*s\n"
            "  --config FILE     a YAML file of verl-style sections (data, actor_rollout_ref, algorithm, reward_model,\n"
            "                    trainer, cluster); applied first. An empty file means all defaults.\n"
            "  key.path=value    set one key, e.g. actor_rollout_ref.actor.clip_ratio_high=0.28 or\n"
            "                    data.train_files=[a.jsonl,b.jsonl]; applied in order after the file (overrides win);\n"
            "                    Hydra's +key=value and ++key=value set it too, ~key restores its default\n"
            "  --print-config    print the resolved config (every key, as YAML, each with a comment saying where its\n"
            "                    value came from: default, file, command line) and exit; --print-config=local: only\n"
            "                    the local keys (cluster.*, trainer.device), what a worker is given\n"
            "%s%s"
            "  --help, -h        print this text and exit\n",
            base, syn ? " " : "", syn, extra, nl ? nl + 1 : "", nl ? "\n" : "");
}

bool config_key_implemented(const char *key) {
    int spelling;
    return find_spelling(key, &spelling) != NULL || !strcmp(key, AR "actor.optim.betas");   /* betas: set_betas */
}

int config_override(Config *c, const char *arg, char err[ERR_LEN]) {
    /* Hydra's override grammar, as verl's scripts write it: key=value, +key=value (add), ++key=value (add or
     * override): all three set the key here; ~key or ~key=value (delete): back to its default */
    int del = arg[0] == '~';
    const char *k = arg + (del ? 1 : arg[0] == '+' ? (arg[1] == '+' ? 2 : 1) : 0);
    const char *eq = strchr(k, '=');
    if (k[0] == '-' || k[0] == '+' || k[0] == '~' || !((eq && eq > k) || (del && !eq && k[0]))) return 1;
    char key[256];
    size_t kn = eq ? (size_t)(eq - k) : strlen(k);
    if (kn >= sizeof key) return err_set(err, ERR_INVAL, "command line: key too long: %s", arg);
    memcpy(key, k, kn);
    key[kn] = 0;
    if (del) return unset_key(c, key, eq ? eq + 1 : NULL, err);
    const char *v = eq + 1;
    size_t vn = strlen(v);
    if (vn >= 2 && (v[0] == '\'' || v[0] == '"') && v[vn - 1] == v[0]) {   /* Hydra's quoted value: the text inside */
        char *inner = xmalloc(vn - 1);
        memcpy(inner, v + 1, vn - 2);
        inner[vn - 2] = 0;
        int rc = set_key(c, key, inner, "command line", err);
        xfree(inner);
        return rc;
    }
    const CfgEntry *ent = find_entry(key);
    if ((!strcmp(v, "null") || !strcmp(v, "~")) && ent && ent->type == CFG_STR)
        v = "";                                           /* Hydra's (and YAML's) null, as the YAML reader takes it:
                                                           a string key gets "" on both routes ('null' quoted: the
                                                           text), so the run keys hash alike everywhere */
    return set_key(c, key, v, "command line", err);
}

int config_from_cli(Config *c, int *argc, char **argv, int *print_config, char err[ERR_LEN]) {
    config_defaults(c);
    if (print_config) *print_config = CONFIG_PRINT_NONE;
    int out = 1, rc = 0;
    /* --config first, wherever it is, so overrides always win. */
    for (int i = 1; i < *argc && !rc; i++) {
        if (strcmp(argv[i], "--config") == 0) {
            if (i + 1 >= *argc) return err_set(err, ERR_INVAL, "--config needs a file name");
            rc = config_load_file(c, argv[i + 1], err);
        } else if (strncmp(argv[i], "--config=", 9) == 0) {
            rc = config_load_file(c, argv[i] + 9, err);
        }
    }
    if (rc) return rc;
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--config") == 0) { i++; continue; }
        if (strncmp(a, "--config=", 9) == 0) continue;
        if (strcmp(a, "--print-config") == 0 || strcmp(a, "--print-config=local") == 0) {
            if (print_config) *print_config = a[14] ? CONFIG_PRINT_LOCAL : CONFIG_PRINT_ALL;
            continue;
        }
        rc = config_override(c, a, err);
        if (rc < 0) return rc;
        if (rc == 0) continue;
        argv[out++] = argv[i];
    }
    argv[out] = NULL;
    *argc = out;
    int vrc = config_validate(c, err);   /* first: it compares the two spellings as the user set them */
    if (!vrc) resolve_v1(c);
    return vrc;
}
