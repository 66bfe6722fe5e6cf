/* common/model/model_config.h: the Hugging Face model configuration dapo can run (docs/design.md §3), parsed
 * from config.json (+ generation_config.json) with jansson, and the RoPE inverse frequencies it implies.
 * Supported: Qwen2ForCausalLM (q/k/v bias), Qwen3ForCausalLM (q/k RMSNorm), LlamaForCausalLM (rope_type
 * default or llama3), tied or untied lm_head, GQA, explicit head_dim. Both the transformers 4.x keys
 * (rope_theta, rope_scaling) and the 5.x key (rope_parameters) are read.
 * Refused, naming the field: other architectures, hidden_act != silu, sliding-window attention,
 * attention_bias/mlp_bias on Llama/Qwen3, other rope types, inconsistent head counts.
 * Not here: tensors (model.h), tokenizer ids beyond bos/eos. */
#ifndef DAPO_MODEL_CONFIG_H
#define DAPO_MODEL_CONFIG_H

#include "core/err.h"

typedef enum { ARCH_QWEN2 = 0, ARCH_QWEN3, ARCH_LLAMA } ModelArch;

#define MODEL_MAX_EOS 16

typedef struct {
    ModelArch arch;
    char   arch_name[64];        /* "Qwen2ForCausalLM", ... */
    int    vocab;                /* vocab_size */
    int    hidden;               /* hidden_size H */
    int    n_layers;             /* num_hidden_layers */
    int    n_heads;              /* num_attention_heads */
    int    n_kv_heads;           /* num_key_value_heads (GQA); = n_heads when absent */
    int    head_dim;             /* head_dim, default H / n_heads */
    int    inter;                /* intermediate_size I */
    int    max_pos;              /* max_position_embeddings */
    float  rms_eps;              /* rms_norm_eps */
    double rope_theta;           /* default 10000 */
    int    rope_llama3;          /* 1: rope_type llama3 */
    double rope_factor, rope_low_freq, rope_high_freq;   /* llama3 parameters */
    int    rope_orig_max_pos;    /* original_max_position_embeddings (llama3) */
    int    tie_embeddings;       /* tie_word_embeddings (default false; Qwen2 small models set true) */
    int    qkv_bias;             /* Qwen2: q/k/v projections have bias */
    int    qk_norm;              /* Qwen3: RMSNorm over head_dim on q and k before RoPE */
    int    bos_id;               /* -1 when absent */
    int    eos_ids[MODEL_MAX_EOS];   /* union of config.json and generation_config.json eos_token_id */
    int    n_eos;
} ModelConfig;

/* Reads DIR/config.json and, when present, DIR/generation_config.json. Errors: ERR_IO/ERR_DECODE for the
 * files, ERR_UNSUPPORTED naming the field for configs dapo cannot run, ERR_INVAL for impossible values. */
int model_config_load(ModelConfig *c, const char *dir, char err[ERR_LEN]);

/* Parses a config.json text (already read) into c; same errors as model_config_load. */
int model_config_parse(ModelConfig *c, const char *json_text, char err[ERR_LEN]);

/* Writes the rotary inverse frequencies inv_freq[head_dim/2] (fp32):
 *   inv_freq[i] = 1 / theta^(2i / head_dim)   (transformers _compute_default_rope_parameters)
 * then, for llama3, the wavelength-dependent scaling of transformers _compute_llama3_parameters. */
void model_config_inv_freq(const ModelConfig *c, float *inv_freq);

/* Parameter count implied by the config (embeddings, every layer, final norm, lm_head when untied). */
long model_config_param_count(const ModelConfig *c);

#endif
