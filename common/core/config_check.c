/* common/core/config_check.c: config_validate, the checks across keys that no single key's range can make (config.h),
 * and the warnings about keys that nothing reads under the settings given. Not here: each key's own type and range
 * (config.c's table), verl's keys without a table row (config_verl.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/log.h"

#define AR "actor_rollout_ref."

/* A Python identifier in ASCII: [A-Za-z_][A-Za-z0-9_]*. */
static int valid_identifier(const char *s) {
    if (!s || !(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z'))) return 0;
    for (; *s; s++)
        if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9')))
            return 0;
    return 1;
}

/* verl V1's trainer modes as dapo's settings (config_staleness): sync is trainer.staleness (0 unless set), the async
 * modes are staleness max_off_policy_threshold with dapo's one publication per step. */
static int validate_v1(const Config *c, char err[ERR_LEN]) {
    if (c->v1_mode == CFG_V1_SYNC) {
        if (config_is_set(c, "trainer.v1.trainer_mode") && c->staleness > 0)   /* said twice, meaning two things */
            return err_set(err, ERR_INVAL, "trainer.v1.trainer_mode sync is synchronous, trainer.staleness %d is "
                           "asynchronous: set trainer.staleness 0, or trainer.v1.trainer_mode colocate_async with "
                           "trainer.v1.sampler.max_off_policy_threshold %d", c->staleness, c->staleness);
        return 0;
    }
    if (config_is_set(c, "trainer.staleness") && c->staleness != c->v1_max_off_policy)
        return err_set(err, ERR_INVAL, "trainer.staleness %d and trainer.v1.sampler.max_off_policy_threshold %d%s (trainer."
                       "v1.trainer_mode %s) are the same setting in dapo: set one of them", c->staleness,
                       c->v1_max_off_policy, config_is_set(c, "trainer.v1.sampler.max_off_policy_threshold") ? "" :
                       " (its default)", config_enum_name(c, "trainer.v1.trainer_mode"));
    if (config_is_set(c, "trainer.staleness_strategy") && c->staleness_strategy != c->v1_strategy)
        return err_set(err, ERR_INVAL, "trainer.staleness_strategy %s and trainer.v1.sampler.max_off_policy_strategy %s "
                       "are the same setting in dapo: set one of them",
                       c->staleness_strategy == CFG_OFF_POLICY_WAIT ? "wait" : "drop",
                       c->v1_strategy == CFG_OFF_POLICY_WAIT ? "wait" : "drop");
    if (c->v1_mode == CFG_V1_SEPARATE_ASYNC && c->v1_parameter_sync_step != 1)
        return err_set(err, ERR_UNSUPPORTED, "trainer.v1.separate_async.parameter_sync_step %d: dapo publishes the weights "
                       "after every step; for %d updates between publications set data.train_batch_size to %d x "
                       "ppo_mini_batch_size (mini-batches are the updates) and parameter_sync_step 1",
                       c->v1_parameter_sync_step, c->v1_parameter_sync_step, c->v1_parameter_sync_step);
    return 0;
}

/* Keys that change nothing under the settings given (verl ignores them there too): a warning naming the switch. */
static void warn_unread(const Config *c) {
    static const struct { const char *key, *sw; int mode; } rows[] = {
        {AR "actor.kl_loss_coef", AR "actor.use_kl_loss", -1}, {AR "actor.kl_loss_type", AR "actor.use_kl_loss", -1},
        {"algorithm.kl_penalty", "algorithm.use_kl_in_reward", -1},
        {"algorithm.kl_ctrl.type", "algorithm.use_kl_in_reward", -1},
        {"algorithm.kl_ctrl.kl_coef", "algorithm.use_kl_in_reward", -1},
        {"algorithm.kl_ctrl.horizon", "algorithm.use_kl_in_reward", -1},
        {"algorithm.kl_ctrl.target_kl", "algorithm.use_kl_in_reward", -1},
        {AR "actor.tau_pos", NULL, CFG_LOSS_SAPO}, {AR "actor.tau_neg", NULL, CFG_LOSS_SAPO},
        {AR "actor.policy_loss.clip_cov_ratio", NULL, CFG_LOSS_CLIP_COV},
        {AR "actor.policy_loss.clip_cov_lb", NULL, CFG_LOSS_CLIP_COV},
        {AR "actor.policy_loss.clip_cov_ub", NULL, CFG_LOSS_CLIP_COV},
        {AR "actor.policy_loss.kl_cov_ratio", NULL, CFG_LOSS_KL_COV},
        {AR "actor.policy_loss.ppo_kl_coef", NULL, CFG_LOSS_KL_COV},
        {"trainer.v1.sampler.max_off_policy_threshold", "v1", -1},
        {"trainer.v1.sampler.max_off_policy_strategy", "v1", -1},
        {"trainer.v1.separate_async.parameter_sync_step", "v1sep", -1},
        {"trainer.staleness_strategy", "async", -1},
        {AR "rollout.partial_rollout", "async", -1},
        {AR "rollout.partial_rollout_kv", "partial", -1},
        {AR "rollout.mask_offpolicy_in_partial_rollout", "partial", -1},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        if (!config_is_set(c, rows[i].key)) continue;
        if (!strcmp(rows[i].key, AR "rollout.partial_rollout") && !c->partial_rollout) continue;   /* off: nothing to read */
        const char *sw = rows[i].sw, *why;
        int on;
        if (!sw) { on = (int)c->loss_mode == rows[i].mode; why = "actor_rollout_ref.actor.policy_loss.loss_mode is another one"; }
        else if (!strcmp(sw, "v1")) { on = c->v1_mode != CFG_V1_SYNC; why = "trainer.v1.trainer_mode is sync"; }
        else if (!strcmp(sw, "async")) { on = config_staleness(c) > 0; why = "trainer.staleness is 0 (synchronous)"; }
        else if (!strcmp(sw, "partial")) { on = c->partial_rollout; why = "actor_rollout_ref.rollout.partial_rollout is false"; }
        else if (!strcmp(sw, "v1sep")) { on = c->v1_mode == CFG_V1_SEPARATE_ASYNC; why = "trainer.v1.trainer_mode is not separate_async"; }
        else if (!strcmp(sw, AR "actor.use_kl_loss")) { on = c->use_kl_loss; why = "actor_rollout_ref.actor.use_kl_loss is false"; }
        else { on = c->use_kl_in_reward; why = "algorithm.use_kl_in_reward is false"; }
        if (!on) log_warn("%s is set but nothing reads it: %s", rows[i].key, why);
    }
}

int config_validate(const Config *c, char err[ERR_LEN]) {
    if (config_is_set(c, AR "actor.use_rollout_log_probs") && config_is_set(c, "algorithm.rollout_correction.bypass_mode") &&
        c->use_rollout_log_probs != c->rc_bypass_mode)
        return err_set(err, ERR_INVAL, "actor_rollout_ref.actor.use_rollout_log_probs (%s) and "
                       "algorithm.rollout_correction.bypass_mode (%s) conflict: both mean 'the rollout log-probs are the "
                       "old policy'; set one of them", c->use_rollout_log_probs ? "true" : "false",
                       c->rc_bypass_mode ? "true" : "false");
    if (c->adv_estimator == CFG_ADV_GRPO_PASSK && c->rollout_n < 2)
        return err_set(err, ERR_INVAL, "algorithm.adv_estimator grpo_passk needs actor_rollout_ref.rollout.n >= 2 (the "
                       "best response's advantage is its reward minus the second best's); n is %d", c->rollout_n);
    char gtxt[32];                                   /* the shortest text that reads back as the value */
    snprintf(gtxt, sizeof gtxt, "%.15g", c->gamma);
    if (strtod(gtxt, NULL) != c->gamma) snprintf(gtxt, sizeof gtxt, "%.17g", c->gamma);
    if (c->gamma != 1.0 && c->adv_estimator != CFG_ADV_REINFORCE_PP)
        return err_set(err, ERR_UNSUPPORTED, "algorithm.gamma %s: of dapo's estimators only reinforce_plus_plus reads it "
                       "(and GAE, which dapo does not have); algorithm.adv_estimator is %s: leave gamma at 1", gtxt,
                       config_enum_name(c, "algorithm.adv_estimator"));
    if (c->use_kl_in_reward && c->filter_groups_enable && c->filter_groups_metric == CFG_METRIC_SEQ_FINAL_REWARD)
        return err_set(err, ERR_UNSUPPORTED, "algorithm.use_kl_in_reward with algorithm.filter_groups.metric "
                       "seq_final_reward: dapo filters groups before the learners compute the KL penalty, so the final "
                       "reward is not known there; filter on acc, score or seq_reward");
    double n_resp = (double)c->train_batch_size * c->rollout_n;
    if (c->use_kl_in_reward && c->kl_ctrl_type == CFG_KL_CTRL_ADAPTIVE && !(c->kl_ctrl_horizon > 0.2 * n_resp))
        return err_set(err, ERR_INVAL, "algorithm.kl_ctrl.horizon %g: horizon must exceed %g, 0.2 x the %.0f responses "
                       "of a step (train_batch_size x rollout.n), or the adaptive coefficient's multiplier 1 + "
                       "clip(kl / target_kl - 1, -0.2, 0.2) x responses / horizon turns negative",
                       c->kl_ctrl_horizon, 0.2 * n_resp, n_resp);
    if (c->loss_mode == CFG_LOSS_CLIP_COV && !(c->clip_cov_lb < c->clip_cov_ub))
        return err_set(err, ERR_INVAL, "actor_rollout_ref.actor.policy_loss.clip_cov_lb %g is not below clip_cov_ub %g: "
                       "clip_cov would select no token (plain clipping)", c->clip_cov_lb, c->clip_cov_ub);
    if (c->train_batch_size < 1)
        return err_set(err, ERR_UNSUPPORTED, "data.train_batch_size 0 (verl's fully asynchronous streaming of "
                       "mini-batches) is not implemented: set the prompts per step (each step publishes the weights "
                       "once; trainer.staleness bounds how far generation runs ahead)");
    int rc = validate_v1(c, err);
    if (rc) return rc;
    warn_unread(c);
    if (c->rc_loss_type == CFG_RC_LOSS_REINFORCE)
        return err_set(err, ERR_UNSUPPORTED, "algorithm.rollout_correction.loss_type: reinforce is not implemented in "
                       "dapo; use ppo_clip");
    if (c->max_resp_len && c->max_resp_len != c->max_response_length)
        return err_set(err, ERR_INVAL, "reward_model.reward_kwargs.max_resp_len (reward.reward_kwargs.max_resp_len): %d, "
                       "but data.max_response_length is %d: dapo's overlong penalty counts from data.max_response_length "
                       "(verl's DAPO scripts pass the same value to both)", c->max_resp_len, c->max_response_length);
    if (c->reward_manager == CFG_REWARD_NAIVE && c->overlong_buffer_enable)
        return err_set(err, ERR_INVAL, "reward_model.reward_manager (reward.reward_manager.name): naive applies no "
                       "overlong penalty, but reward_model.overlong_buffer.enable is true: use dapo, or disable the "
                       "buffer");
    if (c->val_temperature > 0 && c->val_temperature < 1e-5)
        return err_set(err, ERR_INVAL, "actor_rollout_ref.rollout.val_kwargs.temperature: %g is 0 or at least 1e-05 (a "
                       "sampling temperature below that is greedy in vLLM, and 0 in the fp32 the rollouts sample with)",
                       c->val_temperature);
    if (c->val_temperature == 0 && c->val_do_sample)
        return err_set(err, ERR_INVAL, "actor_rollout_ref.rollout.val_kwargs.temperature: 0 samples nothing; set "
                       "val_kwargs.do_sample=false for greedy validation, or a temperature above 0");
    if (c->overlong_buffer_enable && c->overlong_buffer_len >= c->max_response_length)
        return err_set(err, ERR_INVAL,
                       "reward_model.overlong_buffer.len: %d must be less than data.max_response_length (%d)",
                       c->overlong_buffer_len, c->max_response_length);
    if (config_gen_batch_size(c) < c->train_batch_size && !c->filter_groups_enable)
        return err_set(err, ERR_INVAL, "data.gen_batch_size: %d is less than data.train_batch_size (%d)",
                       c->gen_batch_size, c->train_batch_size);
    if (c->ppo_mini_batch_size > c->train_batch_size)
        return err_set(err, ERR_INVAL,
                       "actor_rollout_ref.actor.ppo_mini_batch_size: %d is more than data.train_batch_size (%d)",
                       c->ppo_mini_batch_size, c->train_batch_size);
    if (c->train_batch_size % c->ppo_mini_batch_size)
        return err_set(err, ERR_INVAL,
                       "actor_rollout_ref.actor.ppo_mini_batch_size: %d does not divide data.train_batch_size (%d)",
                       c->ppo_mini_batch_size, c->train_batch_size);
    if (c->fsdp_size == 0 || (c->fsdp_size > 1 && c->fsdp_size < c->num_learners))
        return err_set(err, ERR_INVAL, "actor_rollout_ref.actor.fsdp_config.fsdp_size: %d is not implemented: 1 "
                       "replicates the model and optimizer state, -1 (or any size of at least cluster.num_learners, %d) "
                       "shards them over every learner rank; sharding in groups (hybrid) is not built", c->fsdp_size,
                       c->num_learners);
    if ((long)c->ppo_mini_batch_size * c->rollout_n % c->num_learners)
        return err_set(err, ERR_INVAL,
                       "cluster.num_learners: %d does not divide a mini-batch of %d sequences (ppo_mini_batch_size x n)",
                       c->num_learners, c->ppo_mini_batch_size * c->rollout_n);
    if (c->custom_reward_path[0] && !valid_identifier(c->custom_reward_name))
        return err_set(err, ERR_INVAL, "custom_reward_function.name: '%s' is not a Python function name",
                       c->custom_reward_name);
    if (c->custom_reward_path[0] && c->remote_url[0])
        return err_set(err, ERR_INVAL, "custom_reward_function.path and reward_model.remote.url are both set: a "
                       "verifier scores with one of them");
    if (c->remote_url[0] && strncmp(c->remote_url, "http://", 7) && strncmp(c->remote_url, "https://", 8))
        return err_set(err, ERR_INVAL, "reward_model.remote.url: '%s' is not an http:// or https:// URL",
                       c->remote_url);
    if (c->custom_reward_path[0] && !c->custom_reward_python[0])
        return err_set(err, ERR_INVAL, "custom_reward_function.python: empty (an interpreter, e.g. python3)");
    for (int i = 0; i < c->logger.n; i++)
        if (!config_logger_known(c->logger.v[i]))
            return err_set(err, ERR_INVAL, "trainer.logger: '%s' is not a logger verl knows (dapo writes console, "
                           "tensorboard and file; wandb, mlflow, swanlab, vemlp_wandb, clearml and trackio are "
                           "accepted and dropped with a warning)", c->logger.v[i]);
    if (c->resume_mode == CFG_RESUME_PATH && !c->resume_from_path[0])
        return err_set(err, ERR_INVAL, "trainer.resume_from_path: empty, but trainer.resume_mode is resume_path");
    return 0;
}
