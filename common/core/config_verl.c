/* common/core/config_verl.c: the rules for verl's keys that config.c's table has no row for (config_verl.h).
 * Keys are verl 0.9.1's (verl/trainer/config/_generated_ppo_trainer.yaml) and a few of older releases' recipes. */
#include "core/config_verl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define AR "actor_rollout_ref."
#define E(k, why)          { k, VERL_ENGINE, NULL, NULL, why }
#define S(k, why)          { k, VERL_SERVING, NULL, NULL, why }
#define C(k, why)          { k, VERL_CLUSTER, NULL, NULL, why }
#define OB(k, why)         { k, VERL_OBSERVE, NULL, NULL, why }
#define IDLE(k, g, why)    { k, VERL_IDLE, NULL, g, why }
#define FIX(k, ok, why)    { k, VERL_FIXED, ok, NULL, why }
#define NO(k, why)         { k, VERL_REFUSED, NULL, NULL, why }

static const char NO_LOSS_MODE[] = "read only by verl's dro loss mode, which dapo does not have";
static const char VISION[] = "read only for vision-language models; dapo's models are text-only";

static const VerlKey rules[] = {
    /* ---- actor_rollout_ref.actor */
    FIX(AR "actor.optim.optimizer", "adamw", "dapo's optimizer is torch.optim.AdamW's update"),
    FIX(AR "actor.optim.optimizer_impl", "torch.optim", "dapo's optimizer is torch.optim.AdamW's update"),
    FIX(AR "actor.optim.override_optimizer_config", "null|{}", "extra optimizer arguments are not supported; "
        "dapo has actor.optim.lr, weight_decay, betas, eps, clip_grad"),
    NO(AR "actor.optim.override_optimizer_config.", "extra optimizer arguments are not supported; dapo has "
       "actor.optim.lr, weight_decay, betas, eps, clip_grad"),
    FIX(AR "actor.optim.num_cycles", "0.5", "dapo's cosine schedule is verl's half cycle (num_cycles 0.5)"),
    FIX(AR "actor.optim.zero_indexed_step", "true", "dapo's schedule counts steps from 0, as verl's default does"),
    IDLE(AR "actor.optim.total_training_steps", "trainer.total_training_steps",
         "verl's trainer writes the run's total steps here; dapo takes them from trainer.total_training_steps"),
    E(AR "actor.optim.weight_decay_exclude", "an older verl's optimizer grouping; dapo decays every matrix, as verl"),
    IDLE(AR "actor.rollout_n", AR "rollout.n", "verl copies rollout.n here"),
    E(AR "actor.strategy", "verl's training engine (fsdp, fsdp2, megatron)"),
    E(AR "actor.ppo_micro_batch_size", "deprecated micro-batch size (gradient accumulation over the same mini-batch)"),
    IDLE(AR "actor.freeze_vision_tower", AR "model.path", VISION),
    IDLE(AR "actor.policy_loss.", AR "actor.policy_loss.loss_mode", NO_LOSS_MODE),
    OB(AR "actor.calculate_entropy", "whether verl computes the entropy when entropy_coeff is 0; dapo always logs "
       "actor/entropy"),
    OB(AR "actor.calculate_sum_pi_squared", "a diagnostic verl computes on request"),
    E(AR "actor.use_prefix_grouper", "verl's shared-prompt forward (the same log-probs, computed once per group)"),
    E(AR "actor.use_torch_compile", "torch.compile of verl's actor"),
    FIX(AR "actor.shuffle", "false", "dapo's mini-batches keep the order the coordinator packed (verl's default)"),
    IDLE(AR "actor.data_loader_seed", AR "actor.shuffle", "the seed of verl's mini-batch shuffle (actor.shuffle)"),
    E(AR "actor.use_fused_kernels", "verl's fused log-prob kernels (the same values)"),
    FIX(AR "actor.qat.enable", "false", "quantization-aware training is not implemented"),
    IDLE(AR "actor.qat.", AR "actor.qat.enable", "read only when actor.qat.enable"),
    E(AR "actor.ulysses_sequence_parallel_size", "verl's sequence parallelism (Ulysses)"),
    E(AR "actor.entropy_from_logits_with_chunking", "memory: verl's entropy in chunks (the same values)"),
    E(AR "actor.entropy_from_logits_chunk_size", "memory: verl's entropy in chunks (the same values)"),
    E(AR "actor.entropy_checkpointing", "memory: recompute of the entropy in the backward pass"),
    E(AR "actor.pad_to_length", "verl's padding of packed sequences"),
    E(AR "actor.use_remove_padding", "verl's padding-free packing (dapo packs without padding)"),
    E(AR "actor.fsdp_config.", "FSDP's sharding, offload, prefetch and wrapping"),
    FIX(AR "actor.fsdp_config.dtype", "float32|fp32", "dapo computes in float32 (the same numbers on every CPU); "
        "bfloat16 compute is not implemented yet"),
    FIX(AR "actor.fsdp_config.model_dtype", "float32|fp32", "dapo keeps float32 master weights"),
    FIX(AR "actor.fsdp_config.mixed_precision.", "float32|fp32", "dapo computes in float32 (the same numbers on every "
        "CPU); bfloat16 compute is not implemented yet"),
    FIX(AR "actor.fsdp_config.qat.enable", "false", "quantization-aware training is not implemented"),
    E(AR "actor.checkpoint.", "what verl's FSDP checkpoint holds; dapo's holds the model, the optimizer and the run's "
      "state (trainer.default_local_dir)"),
    E(AR "actor.megatron.", "Megatron's parallelism and offload"),
    E(AR "actor.router_replay.", "MoE router replay (verl's Megatron engine)"),

    /* ---- actor_rollout_ref.rollout */
    S(AR "rollout.name", "verl's rollout server (vllm, sglang); dapo's rollout is dapo-rollout"),
    S(AR "rollout.mode", "verl's rollout server mode"),
    C(AR "rollout.nnodes", "the rollout's nodes; dapo's rollouts are processes (deploy/)"),
    C(AR "rollout.n_gpus_per_node", "the rollout's GPUs"),
    S(AR "rollout.full_determinism", "vLLM's deterministic kernels (dapo's: rollout.batch_invariant)"),
    S(AR "rollout.gpu_memory_utilization", "vLLM's memory share (dapo's KV cache: rollout.kv_cache_tokens)"),
    FIX(AR "rollout.ignore_eos", "false", "dapo's responses end at the end-of-sequence token"),
    S(AR "rollout.enforce_eager", "vLLM's CUDA graphs"),
    S(AR "rollout.cudagraph_capture_sizes", "vLLM's CUDA graphs"),
    S(AR "rollout.free_cache_engine", "vLLM's KV-cache release between steps"),
    S(AR "rollout.tensor_model_parallel_size", "vLLM's tensor parallelism"),
    S(AR "rollout.data_parallel_size", "vLLM's data parallelism (dapo: more dapo-rollout processes)"),
    S(AR "rollout.expert_parallel_size", "vLLM's expert parallelism"),
    S(AR "rollout.pipeline_model_parallel_size", "vLLM's pipeline parallelism"),
    S(AR "rollout.max_model_len", "vLLM's context cap (dapo's is data.max_prompt_length + max_response_length)"),
    S(AR "rollout.enable_chunked_prefill", "vLLM's chunked prefill (dapo always chunks: max_num_batched_tokens)"),
    FIX(AR "rollout.logprobs_mode", "processed_logprobs", "dapo's rollout log-probs are those of the distribution it "
        "samples from (after temperature, top-k and top-p)"),
    S(AR "rollout.scheduling_policy", "vLLM's request scheduling"),
    S(AR "rollout.load_format", "how vLLM loads its first weights"),
    S(AR "rollout.layered_summon", "FSDP's layer-by-layer weight gathering for the rollout"),
    E(AR "rollout.log_prob_micro_batch_size", "micro-batching of the old-log-prob recompute (the same values)"),
    E(AR "rollout.log_prob_micro_batch_size_per_gpu", "micro-batching of the old-log-prob recompute (the same values)"),
    E(AR "rollout.log_prob_use_dynamic_bsz", "micro-batching of the old-log-prob recompute (the same values)"),
    E(AR "rollout.log_prob_max_token_len_per_gpu", "micro-batching of the old-log-prob recompute (the same values)"),
    OB(AR "rollout.disable_log_stats", "vLLM's statistics log"),
    FIX(AR "rollout.do_sample", "true", "greedy rollouts would make every response of a group the same (no advantage "
        "to learn from); greedy validation is rollout.val_kwargs.do_sample=false"),
    FIX(AR "rollout.over_sample_rate", "0", "verl's over-sampling (dropping the slowest responses of a step) is not "
        "implemented"),
    S(AR "rollout.multi_stage_wake_up", "vLLM's staged memory wake-up"),
    S(AR "rollout.engine_kwargs.", "arguments of vLLM / SGLang / TensorRT-LLM"),
    C(AR "rollout.router_config_path", "verl's rollout router"),
    FIX(AR "rollout.multi_turn.enable", "false", "multi-turn and tool rollouts are not implemented"),
    IDLE(AR "rollout.multi_turn.", AR "rollout.multi_turn.enable", "read only when rollout.multi_turn.enable"),
    E(AR "rollout.calculate_log_probs", "dapo's rollout always returns its log-probs"),
    S(AR "rollout.agent.num_workers", "verl's agent-loop workers"),
    FIX(AR "rollout.agent.default_agent_loop", "single_turn_agent", "dapo's rollout is verl's single-turn agent loop"),
    FIX(AR "rollout.agent.agent_loop_config_path", "null", "custom agent loops are not implemented"),
    FIX(AR "rollout.agent.custom_async_server.", "null", "a custom rollout server is not supported"),
    S(AR "rollout.checkpoint_engine.", "how verl moves weights to the rollout (dapo: the learner's weight server)"),
    OB(AR "rollout.trace.", "verl's rollout tracing"),
    S(AR "rollout.skip_tokenizer_init", "vLLM's tokenizer start-up"),
    S(AR "rollout.enable_rollout_routing_replay", "MoE router replay"),
    OB(AR "rollout.moe_load_balance_metrics_interval", "MoE load-balance metrics"),
    OB(AR "rollout.prometheus.", "vLLM's Prometheus endpoint (dapo's metrics: the coordinator's /metrics)"),
    FIX(AR "rollout.quantization", "null", "quantized rollouts are not implemented"),
    FIX(AR "rollout.quantization_config_file", "null", "quantized rollouts are not implemented"),
    S(AR "rollout.mtp", "speculative decoding with the model's multi-token-prediction head"),
    S(AR "rollout.disaggregation.", "vLLM's prefill/decode disaggregation"),
    IDLE(AR "rollout.qat", AR "actor.qat.enable", "read only when actor.qat.enable"),

    /* ---- actor_rollout_ref.model, ref, the rest */
    FIX(AR "model.hf_config_path", "null", "dapo reads config.json from model.path"),
    E(AR "model.use_shm", "copies the model to shared memory before loading"),
    E(AR "model.trust_remote_code", "Hugging Face's remote code (dapo's architectures are built in)"),
    FIX(AR "model.custom_chat_template", "null", "dapo's chat template is data.chat_template"),
    E(AR "model.external_lib", "a Python module verl imports to register a model"),
    NO(AR "model.override_config.", "dapo overrides only max_position_embeddings of a model's config.json (and "
       "takes the dropouts at 0, as it trains)"),
    FIX(AR "model.override_config.attention_dropout", "0", "dapo's models have no dropout (HF's default 0)"),
    FIX(AR "model.override_config.embd_pdrop", "0", "dapo's models have no dropout (HF's default 0)"),
    FIX(AR "model.override_config.resid_pdrop", "0", "dapo's models have no dropout (HF's default 0)"),
    E(AR "model.enable_activation_offload", "memory: activations offloaded to the host"),
    E(AR "model.use_remove_padding", "verl's padding-free packing (dapo packs without padding)"),
    FIX(AR "model.lora_rank", "0", "LoRA is not implemented (dapo trains every weight)"),
    IDLE(AR "model.lora_alpha", AR "model.lora_rank", "read only when model.lora_rank > 0"),
    IDLE(AR "model.target_modules", AR "model.lora_rank", "read only when model.lora_rank > 0"),
    IDLE(AR "model.exclude_modules", AR "model.lora_rank", "read only when model.lora_rank > 0"),
    IDLE(AR "model.lora_adapter_path", AR "model.lora_rank", "read only when model.lora_rank > 0"),
    FIX(AR "model.lora.rank", "0", "LoRA is not implemented (dapo trains every weight)"),
    IDLE(AR "model.lora.", AR "model.lora.rank", "read only when model.lora.rank > 0"),
    E(AR "model.use_liger", "Liger's fused kernels (the same values)"),
    E(AR "model.use_fused_kernels", "verl's fused log-prob kernels (the same values)"),
    E(AR "model.fused_kernel_options.", "verl's fused log-prob kernels (the same values)"),
    E(AR "model.tiled_mlp.", "memory: the MLP computed in tiles (the same values)"),
    FIX(AR "model.mtp.enable", "false", "multi-token-prediction training is not implemented"),
    IDLE(AR "model.mtp.", AR "model.mtp.enable", "read only when model.mtp.enable"),
    C(AR "hybrid_engine", "verl's colocated actor and rollout"),
    C(AR "nccl_timeout", "NCCL's timeout (dapo's: cluster.collective_timeout_s)"),
    E(AR "ref.", "verl's reference worker: dapo's reference policy is the learner's frozen copy of model.path, run "
      "with the actor's engine and micro-batching (the same values)"),
    E(AR "ref.log_prob_micro_batch_size", "micro-batching of the reference log-probs (the same values)"),
    E(AR "ref.log_prob_micro_batch_size_per_gpu", "micro-batching of the reference log-probs (the same values)"),
    E(AR "ref.log_prob_use_dynamic_bsz", "micro-batching of the reference log-probs (the same values)"),
    E(AR "ref.log_prob_max_token_len_per_gpu", "micro-batching of the reference log-probs (the same values)"),
    FIX(AR "ref.fsdp_config.dtype", "float32|fp32", "dapo's reference policy computes in float32, as the actor; "
        "bfloat16 compute is not implemented yet"),
    FIX(AR "ref.fsdp_config.model_dtype", "float32|fp32", "dapo keeps the reference weights in float32"),
    FIX(AR "ref.fsdp_config.qat.enable", "false", "a quantized reference policy is not implemented"),
    IDLE("critic.", "algorithm.adv_estimator", "verl runs the critic only for algorithm.adv_estimator=gae (dapo's is "
         "grpo)"),

    /* ---- data */
    E("data.use_shm", "copies the dataset to shared memory"),
    FIX("data.train_max_samples", "-1|null", "not implemented: trim the training file"),
    FIX("data.prompt_key", "prompt", "dapo reads the prompt from each row's \"prompt\" field"),
    FIX("data.reward_fn_key", "data_source", "dapo picks the scorer by each row's \"data_source\" field"),
    E("data.val_batch_size", "verl's validation batch size (the same validation)"),
    IDLE("data.tool_config_path", AR "rollout.multi_turn.enable", "read only by multi-turn rollouts"),
    IDLE("data.function_tool_path", AR "rollout.multi_turn.enable", "read only by multi-turn rollouts"),
    E("data.return_raw_input_ids", "what verl's dataloader hands its workers"),
    E("data.return_raw_chat", "what verl's dataloader hands its workers"),
    E("data.return_full_prompt", "what verl's dataloader hands its workers"),
    E("data.dataloader_num_workers", "verl's dataloader processes"),
    IDLE("data.image_patch_size", AR "model.path", VISION),
    FIX("data.validation_shuffle", "false", "dapo validates the samples in file order"),
    E("data.filter_overlong_prompts_workers", "processes of verl's prompt filter (the same prompts)"),
    IDLE("data.image_key", AR "model.path", VISION),
    IDLE("data.video_key", AR "model.path", VISION),
    IDLE("data.audio_key", AR "model.path", VISION),
    E("data.trust_remote_code", "Hugging Face's remote code for the tokenizer"),
    FIX("data.custom_cls.path", "null", "a custom dataset class is not supported (dapo reads JSONL and Parquet-"
        "converted rows)"),
    IDLE("data.custom_cls.name", "data.custom_cls.path", "read only with data.custom_cls.path"),
    IDLE("data.return_multi_modal_inputs", AR "model.path", VISION),
    FIX("data.apply_chat_template_kwargs", "{}|null", "chat-template arguments are not supported; data.chat_template "
        "picks the template"),
    NO("data.apply_chat_template_kwargs.", "chat-template arguments are not supported; data.chat_template picks the "
       "template"),
    IDLE("data.mm_processor_kwargs", AR "model.path", VISION),

    /* ---- rewards: the legacy reward_model.* of verl <= 0.8 and verl 0.9's reward.* */
    FIX("reward_model.enable", "false|null", "a reward model is not implemented: dapo scores with rules "
        "(reward_model.reward_manager) or custom_reward_function"),
    C("reward_model.enable_resource_pool", "the reward model's GPUs"),
    C("reward_model.n_gpus_per_node", "the reward model's GPUs"),
    C("reward_model.nnodes", "the reward model's nodes"),
    FIX("reward_model.reward_loop_source", "null|register", "custom reward loops are not supported"),
    FIX("reward_model.reward_loop_module_path", "null", "custom reward loops are not supported"),
    FIX("reward_model.reward_loop_class_name", "null", "custom reward loops are not supported"),
    IDLE("reward_model.model.", "reward_model.enable", "read only when reward_model.enable"),
    IDLE("reward_model.rollout.", "reward_model.enable", "read only when reward_model.enable"),
    NO("reward_model.reward_kwargs.", "the reward manager's arguments dapo has are overlong_buffer_cfg.{enable,len,"
       "penalty_factor,log} and max_resp_len"),
    OB("reward_model.overlong_buffer.log", "verl logs the overlong penalty's pieces; dapo logs them always"),
    OB("reward_model.reward_kwargs.overlong_buffer_cfg.log", "verl logs the overlong penalty's pieces; dapo always"),
    FIX("sandbox_fusion.url", "null", "code sandboxes are not implemented (dapo runs Python rewards in its own "
        "sandbox: custom_reward_function)"),
    IDLE("sandbox_fusion.", "sandbox_fusion.url", "read only with sandbox_fusion.url"),
    FIX("reward.reward_manager.source", "register", "dapo's reward managers are the registered dapo and naive"),
    IDLE("reward.reward_manager.module.", "reward.reward_manager.source", "read only when reward_manager.source is "
         "importlib"),
    FIX("reward.reward_model.enable", "false", "a reward model is not implemented: dapo scores with rules "
        "(reward.reward_manager.name) or custom_reward_function"),
    IDLE("reward.reward_model.", "reward.reward_model.enable", "read only when reward.reward_model.enable"),
    FIX("reward.sandbox_fusion.url", "null", "code sandboxes are not implemented"),
    IDLE("reward.sandbox_fusion.", "reward.sandbox_fusion.url", "read only with reward.sandbox_fusion.url"),
    NO("reward.reward_kwargs.", "the reward manager's arguments dapo has are overlong_buffer_cfg.{enable,len,"
       "penalty_factor,log} and max_resp_len"),
    OB("reward.reward_kwargs.overlong_buffer_cfg.log", "verl logs the overlong penalty's pieces; dapo logs them always"),
    NO("custom_reward_function.reward_kwargs.", "arguments to a custom reward function are not supported"),

    /* ---- algorithm */
    FIX("algorithm.lam", "1", "only GAE reads it, and dapo has no GAE (algorithm.adv_estimator)"),
    FIX("algorithm.use_pf_ppo", "false", "PF-PPO's reweighting is not implemented"),
    IDLE("algorithm.pf_ppo.", "algorithm.use_pf_ppo", "read only when algorithm.use_pf_ppo"),
    S("algorithm.filter_groups.max_inflight_gen_batches", "how many generation batches verl keeps in flight (dapo's "
      "coordinator schedules generation itself: algorithm.filter_groups.streaming)"),

    /* ---- trainer, and verl's other sections */
    E("trainer.balance_batch", "reorders a batch so verl's data-parallel ranks get equal token counts"),
    OB("trainer.log_val_generations", "validation generations printed to the logger (dapo's dashboard shows them)"),
    OB("trainer.rollout_data_dir", "dumps of the rollouts (dapo: the dashboard, /api/samples)"),
    OB("trainer.validation_data_dir", "dumps of the validation generations"),
    C("trainer.nnodes", "verl's nodes (dapo's processes: deploy/)"),
    C("trainer.n_gpus_per_node", "verl's GPUs per node"),
    C("trainer.esi_redundant_time", "verl's elastic-instance margin"),
    E("trainer.checkpoint_callback_class", "a hook verl calls after a checkpoint"),
    IDLE("trainer.critic_warmup", "algorithm.adv_estimator", "critic steps before the actor's (no critic)"),
    E("trainer.default_hdfs_dir", "a copy of the checkpoints on HDFS"),
    E("trainer.hdfs_dir", "a copy of the checkpoints on HDFS"),
    E("trainer.del_local_ckpt_after_load", "verl deletes the checkpoint it resumed from"),
    IDLE("trainer.max_critic_ckpt_to_keep", "algorithm.adv_estimator", "the critic's checkpoints (no critic)"),
    C("trainer.ray_wait_register_center_timeout", "Ray's start-up wait"),
    E("trainer.use_v1", "which of verl's trainer implementations runs (dapo has one)"),
    IDLE("trainer.v1.", "trainer.v1.trainer_mode", "read only by verl's asynchronous V1 modes"),
    E("trainer.v1.sync", "verl's synchronous trainer's own options (none)"),
    E("trainer.v1.colocate_async.num_warmup_batches", "batches verl's colocated async trainer generates before it "
      "trains (dapo's async generation starts with the first step)"),
    E("trainer.v1.separate_async.num_warmup_batches", "batches verl's separate async trainer generates before it "
      "trains (dapo's async generation starts with the first step)"),
    FIX("trainer.v1.separate_async.hybrid_rollout.enable_switch", "false", "switching training GPUs to rollouts is "
        "not implemented"),
    FIX("trainer.v1.sampler.sync_refill_failed_groups", "false", "dapo generates a failed group's prompt again (up to 5 "
        "attempts; then its slot is refilled: algorithm.filter_groups.refill) and never trains a partial group"),
    FIX("trainer.v1.sampler.custom_sampler.path", "null", "a custom sampler is not supported"),
    /* ---- verl's fully asynchronous recipe (verl/experimental/fully_async_policy) */
    NO("async_training.staleness_threshold", "verl's fraction of extra samples per weight sync; dapo bounds staleness "
       "in policy versions: trainer.staleness k (0 synchronous; k: rows at most k versions behind, k steps in flight)"),
    NO("async_training.trigger_parameter_sync_step", "dapo publishes the weights once a step: data.train_batch_size = "
       "trigger_parameter_sync_step x require_batches x ppo_mini_batch_size gives the same updates per publication"),
    NO("async_training.require_batches", "dapo trains whole steps: data.train_batch_size = trigger_parameter_sync_step "
       "x require_batches x ppo_mini_batch_size gives the same updates per publication"),
    NO("async_training.", "verl's fully asynchronous recipe: dapo's asynchronous training is trainer.staleness"),
    NO("rollout.total_rollout_steps", "dapo's run length is trainer.total_training_steps (or data.train_batch_size x "
       "steps prompts over trainer.total_epochs)"),
    C("rollout.nnodes", "verl's rollout nodes (dapo's processes: deploy/)"),
    C("rollout.n_gpus_per_node", "verl's rollout GPUs per node"),
    FIX("skip.rollout.enable", "false", "replaying cached rollouts is not supported"),
    FIX("skip.rollout_tq.enable", "false", "replaying cached rollouts is not supported"),
    FIX("skip.async_rollout.enable", "false", "replaying cached rollouts is not supported"),
    IDLE("skip.", "skip.rollout.enable", "read only when a skip.*.enable is true"),
    FIX("distillation.enabled", "false", "distillation is not implemented"),
    IDLE("distillation.", "distillation.enabled", "read only when distillation.enabled"),
    E("transfer_queue.", "verl's data transport between its workers"),
    OB("global_profiler.", "verl's profilers"),
    C("ray_kwargs.", "Ray's start-up arguments"),
    C("ray_init.", "Ray's start-up arguments (older verl)"),
};
#define NRULES (sizeof rules / sizeof rules[0])

static const VerlKey target_rule = E("_target_", "Hydra's dataclass for the section");
static const VerlKey profiler_rule = OB("profiler.", "verl's per-worker profiler");

const VerlKey *config_verl_key(const char *key) {
    const VerlKey *best = NULL;
    size_t best_n = 0;
    for (size_t i = 0; i < NRULES; i++) {
        size_t n = strlen(rules[i].key);
        int hit = rules[i].key[n - 1] == '.' ? strncmp(key, rules[i].key, n) == 0 : strcmp(key, rules[i].key) == 0;
        if (hit && n > best_n) best = &rules[i], best_n = n;
    }
    size_t n = strlen(key);
    if (!strcmp(key, "_target_") || (n > 9 && !strcmp(key + n - 9, "._target_"))) return &target_rule;
    if (!best && (strstr(key, ".profiler.") || !strncmp(key, "profiler.", 9))) return &profiler_rule;
    return best;
}

static bool is_null(const char *v) {
    return !v[0] || !strcmp(v, "~") || !strcasecmp(v, "null") || !strcasecmp(v, "none");
}

/* A number filling the whole of s. */
static bool number(const char *s, double *x) {
    char *end;
    *x = strtod(s, &end);
    return end != s && !*end && isfinite(*x);
}

/* A boolean's text as config.c's table reads it: 1 true, 0 false, -1 neither. */
static int boolean(const char *s) {
    static const char *t[] = {"true", "yes", "on", "1"}, *f[] = {"false", "no", "off", "0"};
    for (int i = 0; i < 4; i++) {
        if (!strcasecmp(s, t[i])) return 1;
        if (!strcasecmp(s, f[i])) return 0;
    }
    return -1;
}

bool config_verl_value_ok(const VerlKey *k, const char *value) {
    if (!k->ok) return false;
    double want, got;
    bool v_null = is_null(value), v_num = number(value, &got);
    int v_bool = boolean(value);
    for (const char *p = k->ok; *p;) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        char opt[32];
        snprintf(opt, sizeof opt, "%.*s", (int)n, p);
        if (!strcmp(opt, "null") ? v_null
            : !strcmp(opt, "true") || !strcmp(opt, "false") ? v_bool == (opt[0] == 't')
            : (v_num && number(opt, &want)) ? got == want : !strcasecmp(opt, value))
            return true;
        p += n + (bar != NULL);
    }
    return false;
}

bool config_verl_is_section(const char *key) {
    size_t n = strlen(key);
    for (size_t i = 0; i < NRULES; i++)
        if (!strncmp(rules[i].key, key, n) && rules[i].key[n] == '.') return true;
    return false;
}

const char *config_verl_kind_text(VerlKind kind) {
    switch (kind) {
    case VERL_ENGINE: return "tunes verl's training engine";
    case VERL_SERVING: return "tunes verl's rollout server";
    case VERL_CLUSTER: return "places verl's workers";
    case VERL_OBSERVE: return "only observes";
    case VERL_IDLE: return "unread here";
    case VERL_FIXED: return "fixed";
    case VERL_REFUSED: return "not implemented";
    }
    return "?";
}
