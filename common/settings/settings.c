/* common/settings/settings.c: the adapters from the config to each consumer's parameters (see settings.h). */
#include "settings/settings.h"

#include <math.h>
#include <string.h>

#include "tokenizer/chat.h"

/* The config's enums follow their allowed lists; the consumers' enums are the same lists in the same order. */
_Static_assert((int)CFG_AGG_TOKEN_MEAN == LOSS_AGG_TOKEN_MEAN && (int)CFG_AGG_SEQ_MEAN_TOKEN_MEAN ==
               LOSS_AGG_SEQ_MEAN_TOKEN_MEAN && (int)CFG_AGG_SEQ_MEAN_TOKEN_SUM == LOSS_AGG_SEQ_MEAN_TOKEN_SUM &&
               (int)CFG_AGG_SEQ_MEAN_TOKEN_SUM_NORM == LOSS_AGG_SEQ_MEAN_TOKEN_SUM_NORM, "loss_agg_mode order");
_Static_assert((int)CFG_METRIC_ACC == FILTER_METRIC_ACC && (int)CFG_METRIC_SCORE == FILTER_METRIC_SCORE &&
               (int)CFG_METRIC_SEQ_REWARD == FILTER_METRIC_SEQ_REWARD &&
               (int)CFG_METRIC_SEQ_FINAL_REWARD == FILTER_METRIC_SEQ_FINAL_REWARD, "filter_groups.metric order");
_Static_assert((int)CFG_TRUNC_ERROR == DATA_TRUNC_ERROR && (int)CFG_TRUNC_LEFT == DATA_TRUNC_LEFT &&
               (int)CFG_TRUNC_RIGHT == DATA_TRUNC_RIGHT && (int)CFG_TRUNC_MIDDLE == DATA_TRUNC_MIDDLE,
               "data.truncation order");

void settings_loss_params(const Config *c, LossParams *p) {
    loss_params_default(p);
    p->clip_ratio_low = isnan(c->clip_ratio_low) ? c->clip_ratio : c->clip_ratio_low;     /* verl: null -> clip_ratio */
    p->clip_ratio_high = isnan(c->clip_ratio_high) ? c->clip_ratio : c->clip_ratio_high;
    p->clip_ratio_c = c->clip_ratio_c;
    p->entropy_coeff = c->entropy_coeff;
    p->agg = (LossAggMode)c->loss_agg_mode;
    _Static_assert((int)CFG_LOSS_GEO_MEAN == (int)LOSS_MODE_GEO_MEAN && (int)CFG_LOSS_GSPO == (int)LOSS_MODE_GSPO,
                   "config.c's loss_mode list is dapo/loss.h's LossMode order");
    p->mode = (LossMode)c->loss_mode;
    p->loss_scale_factor = isnan(c->loss_scale_factor) ? c->max_response_length : c->loss_scale_factor;
    p->tau_pos = c->tau_pos;
    p->tau_neg = c->tau_neg;
    p->clip_cov_ratio = c->clip_cov_ratio;
    p->clip_cov_lb = c->clip_cov_lb;
    p->clip_cov_ub = c->clip_cov_ub;
    p->kl_cov_ratio = c->kl_cov_ratio;
    p->ppo_kl_coef = c->ppo_kl_coef;
    p->use_kl = c->use_kl_loss;
    p->kl_coef = c->kl_loss_coef;
    p->kl = settings_kl_penalty(c->kl_loss_type);
}

KlPenalty settings_kl_penalty(int t) {
    static const KlKind kinds[CFG_KL_PLUS] = {[CFG_KL_K1] = KL_K1, [CFG_KL_KL] = KL_K1, [CFG_KL_ABS] = KL_ABS,
                                              [CFG_KL_MSE] = KL_K2, [CFG_KL_K2] = KL_K2, [CFG_KL_LOW_VAR_KL] = KL_K3,
                                              [CFG_KL_K3] = KL_K3};
    if (t < 0 || t >= 2 * CFG_KL_PLUS) t = CFG_KL_LOW_VAR_KL;
    KlKind k = kinds[t % CFG_KL_PLUS];
    return (KlPenalty){.kind = k, .straight_through = t >= CFG_KL_PLUS && k != KL_K2};   /* k2+ is k2 */
}

AdvEstimator settings_adv_estimator(const Config *c) {
    static const AdvEstimator map[] = {
        [CFG_ADV_GRPO] = ADV_GRPO, [CFG_ADV_RLOO] = ADV_RLOO, [CFG_ADV_OPO] = ADV_OPO, [CFG_ADV_GPG] = ADV_GPG,
        [CFG_ADV_GRPO_PASSK] = ADV_GRPO_PASSK, [CFG_ADV_REINFORCE_PP] = ADV_REINFORCE_PP,
        [CFG_ADV_REINFORCE_PP_BASELINE] = ADV_REINFORCE_PP_BASELINE, [CFG_ADV_GRPO_VECTORIZED] = ADV_GRPO,
        [CFG_ADV_RLOO_VECTORIZED] = ADV_RLOO,
    };
    return (int)c->adv_estimator >= 0 && (size_t)c->adv_estimator < sizeof map / sizeof map[0] ? map[c->adv_estimator]
                                                                                                : ADV_GRPO;
}

void settings_sample_params(const Config *c, int validation, SampleParams *p) {
    memset(p, 0, sizeof *p);
    p->temperature = (float)(validation ? c->val_temperature : c->temperature);
    p->top_p = (float)(validation ? c->val_top_p : c->top_p);
    int k = validation ? c->val_top_k : c->top_k;
    p->top_k = k > 0 ? k : 0;
    p->greedy = validation && !c->val_do_sample;
}

int settings_rollout_corr(const Config *c, RolloutCorrConfig *out, char err[ERR_LEN]) {
    return rollout_corr_config_parse(c->rc_rollout_is, c->rc_is_threshold, c->rc_is_batch_normalize, c->rc_rollout_rs,
                                     c->rc_rs_threshold, c->rc_bypass_mode || c->use_rollout_log_probs,
                                     config_enum_name(c, "algorithm.rollout_correction.loss_type"), config_staleness(c), out,
                                     err);
}

uint64_t settings_rollout_seed(const Config *c) {
    return (uint64_t)(c->rollout_seed >= 0 ? c->rollout_seed : c->trainer_seed);
}

const Backend *settings_backend(const Config *c, char err[ERR_LEN]) {
    return backend_select(c->device == CFG_DEVICE_CUDA ? "cuda" : "cpu", err);
}

FilterMetric settings_filter_metric(const Config *c) { return (FilterMetric)c->filter_groups_metric; }

int settings_dataset_options(const Config *c, const Tokenizer *tok, DatasetOptions *o, char err[ERR_LEN]) {
    memset(o, 0, sizeof *o);
    o->max_prompt_length = c->max_prompt_length;
    o->filter_overlong = c->filter_overlong_prompts;
    o->truncation = (DataTruncation)c->truncation;
    o->malformed_fatal = c->on_malformed == CFG_MALFORMED_ERROR;
    switch (c->chat_template) {
    case CFG_CHAT_QWEN25: o->chat = CHAT_QWEN25; return 0;
    case CFG_CHAT_QWEN3: o->chat = CHAT_QWEN3; return 0;
    case CFG_CHAT_LLAMA3: o->chat = CHAT_LLAMA3; return 0;
    case CFG_CHAT_NONE: o->chat = CHAT_NONE; return 0;
    case CFG_CHAT_AUTO: break;
    }
    if (!tok) return err_set(err, ERR_INVAL, "data.chat_template=auto needs a tokenizer");
    return chat_family_detect(tokenizer_chat_template(tok), &o->chat, err);
}

int settings_learner_model(const Config *c, int world, ModelOptions *mo, char err[ERR_LEN]) {
    long seq_max = (long)c->max_prompt_length + c->max_response_length;
    long need = c->use_dynamic_bsz ? c->ppo_max_token_len_per_gpu : (long)c->ppo_micro_batch_size_per_gpu * seq_max;
    if (need > SETTINGS_MAX_ACT_TOKENS) need = SETTINGS_MAX_ACT_TOKENS;
    if (need < seq_max) need = seq_max;
    if (need < 16) need = 16;
    const Backend *be = settings_backend(c, err);
    if (!be) return ERR_UNSUPPORTED;
    *mo = (ModelOptions){.max_tokens = (int)need, .train = 1, .backend = be,
                         .shard_world = world > 1 && config_optim_sharded(c) ? world : 1,
                         .keep_params = !c->reshard_after_forward, .recompute = c->gradient_checkpointing};
    return 0;
}
