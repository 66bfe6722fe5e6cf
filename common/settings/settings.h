/* common/settings/settings.h: each consumer's parameters from the resolved config, one adapter per consumer
 * (docs/design.md §5). The config table (core/config.h) checks every key's type and range once, when it is read;
 * these functions only carry typed values over into the structs of the modules that use them, so common/dapo,
 * common/model and common/io never read a Config. A layer of its own because core may not include the consumers'
 * headers (tests/check_layers.sh): settings sits above core, dapo, model, io, tokenizer and backend, below the
 * services.
 * Not here: what the parameters mean (each consumer's header). */
#ifndef DAPO_SETTINGS_H
#define DAPO_SETTINGS_H

#include "backend/backend.h"
#include "core/config.h"
#include "core/err.h"
#include "dapo/advantages.h"
#include "dapo/filter.h"
#include "dapo/loss.h"
#include "dapo/rollout_corr.h"
#include "io/dataset.h"
#include "model/model.h"
#include "model/sample.h"
#include "tokenizer/tokenizer.h"

/* The loss (dapo/loss.h) from actor_rollout_ref.actor.clip_ratio_low|clip_ratio_high|clip_ratio_c|loss_agg_mode|
 * entropy_coeff|policy_loss.loss_mode|tau_pos|tau_neg|loss_scale_factor (null: data.max_response_length, Dr. GRPO's
 * constant — verl's padded response length); the global-batch fields stay "not given" (0) and dp_size 1: the learner sets them per mini-batch
 * from its shard (dapo/layout.h). Never fails: every value was checked by the table. */
void settings_loss_params(const Config *c, LossParams *p);
/* A kl_loss_type / algorithm.kl_penalty value (config.h CfgKlType, + CFG_KL_PLUS for the '+' form) as dapo/kl.h's. */
KlPenalty settings_kl_penalty(int cfg_kl_type);

/* algorithm.adv_estimator as dapo/advantages.h's estimator (verl's _vectorized spellings are grpo's and rloo's). */
AdvEstimator settings_adv_estimator(const Config *c);

/* Sampling (model/sample.h): actor_rollout_ref.rollout.temperature|top_p|top_k for training rollouts, or
 * rollout.val_kwargs.temperature|top_p|top_k|do_sample (do_sample false: greedy) when validation is nonzero; verl's
 * top_k -1 (off) becomes 0. The coordinator sends these with each GenerateGroup (the rollouts sample with them), the
 * learner divides its logits by the same temperature. */
void settings_sample_params(const Config *c, int validation, SampleParams *p);

/* The seed of the rollouts' sampling RNG (GenerateGroup.seed; model/sample.h's counter-based draws): verl's
 * actor_rollout_ref.rollout.seed, or trainer.seed when that is -1 (the default, so runs keep their numbers). */
uint64_t settings_rollout_seed(const Config *c);

/* Off-policy correction (dapo/rollout_corr.h) from algorithm.rollout_correction.*, actor.use_rollout_log_probs and
 * trainer.staleness: rollout_corr_config_parse's errors (ERR_INVAL naming the key). */
int settings_rollout_corr(const Config *c, RolloutCorrConfig *out, char err[ERR_LEN]);

/* The model backend of trainer.device (backend_select: cuda needs a CUDA build and a visible GPU). NULL with err
 * naming what is missing. */
const Backend *settings_backend(const Config *c, char err[ERR_LEN]);

/* The model options a learner rank of `world` loads its model with: activation rows (one micro-batch: micro-batch
 * size x (max_prompt_length + max_response_length), or ppo_max_token_len_per_gpu with use_dynamic_bsz; at most
 * SETTINGS_MAX_ACT_TOKENS, bigger micro-batches are split to fit; at least one whole sequence), train mode, the backend
 * (settings_backend), the optimizer's sharding (config_optim_sharded) and gradient checkpointing. For the learner and
 * the memory report (tools/dapo-memory). 0 or ERR_UNSUPPORTED (the backend; err says why). */
#define SETTINGS_MAX_ACT_TOKENS 8192
int settings_learner_model(const Config *c, int world, ModelOptions *mo, char err[ERR_LEN]);

/* Dynamic sampling's metric (dapo/filter.h) from algorithm.filter_groups.metric. */
FilterMetric settings_filter_metric(const Config *c);

/* The prompt reader (io/dataset.h) from data.max_prompt_length|filter_overlong_prompts|truncation|chat_template|
 * on_malformed; chat_template auto is detected from tok's tokenizer_config.json (tok may be NULL otherwise). 0, or
 * chat_family_detect's ERR_UNSUPPORTED / ERR_INVAL naming data.chat_template. */
int settings_dataset_options(const Config *c, const Tokenizer *tok, DatasetOptions *o, char err[ERR_LEN]);

#endif
