/* common/model/model_config.c: config.json / generation_config.json parsing and the RoPE frequencies.
 * Not here: tensor loading (model.c). */
#include "model/model_config.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int get_int(json_t *o, const char *key, int dflt, int *out, char err[ERR_LEN]) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) { *out = dflt; return 0; }
    if (!json_is_integer(v) || json_integer_value(v) < -1 || json_integer_value(v) > (1 << 30))
        return err_set(err, ERR_INVAL, "config.json: %s: expected a non-negative integer", key);
    *out = (int)json_integer_value(v);
    return 0;
}

static int get_num(json_t *o, const char *key, double dflt, double *out, char err[ERR_LEN]) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) { *out = dflt; return 0; }
    if (!json_is_number(v)) return err_set(err, ERR_INVAL, "config.json: %s: expected a number", key);
    *out = json_number_value(v);
    return 0;
}

static void add_eos(ModelConfig *c, json_t *v) {
    if (json_is_integer(v)) {
        int id = (int)json_integer_value(v);
        for (int i = 0; i < c->n_eos; i++)
            if (c->eos_ids[i] == id) return;
        if (c->n_eos < MODEL_MAX_EOS) c->eos_ids[c->n_eos++] = id;
    } else if (json_is_array(v)) {
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) add_eos(c, e);
    }
}

static int parse_obj(ModelConfig *c, json_t *j, char err[ERR_LEN]) {
    memset(c, 0, sizeof *c);
    const char *arch = NULL;
    json_t *ja = json_object_get(j, "architectures");
    if (json_is_array(ja) && json_array_size(ja) > 0 && json_is_string(json_array_get(ja, 0)))
        arch = json_string_value(json_array_get(ja, 0));
    const char *mt = json_string_value(json_object_get(j, "model_type"));
    if (!arch && mt) arch = !strcmp(mt, "qwen2") ? "Qwen2ForCausalLM" : !strcmp(mt, "qwen3") ? "Qwen3ForCausalLM"
                          : !strcmp(mt, "llama") ? "LlamaForCausalLM" : mt;
    if (!arch) return err_set(err, ERR_INVAL, "config.json: architectures: missing (and no model_type)");
    snprintf(c->arch_name, sizeof c->arch_name, "%s", arch);
    if (!strcmp(arch, "Qwen2ForCausalLM")) c->arch = ARCH_QWEN2, c->qkv_bias = 1;
    else if (!strcmp(arch, "Qwen3ForCausalLM")) c->arch = ARCH_QWEN3, c->qk_norm = 1;
    else if (!strcmp(arch, "LlamaForCausalLM")) c->arch = ARCH_LLAMA;
    else return err_set(err, ERR_UNSUPPORTED, "config.json: architectures: '%s' is not supported "
                        "(Qwen2ForCausalLM, Qwen3ForCausalLM, LlamaForCausalLM)", arch);
    int rc = 0;
    rc = rc ? rc : get_int(j, "vocab_size", 0, &c->vocab, err);
    rc = rc ? rc : get_int(j, "hidden_size", 0, &c->hidden, err);
    rc = rc ? rc : get_int(j, "num_hidden_layers", 0, &c->n_layers, err);
    rc = rc ? rc : get_int(j, "num_attention_heads", 0, &c->n_heads, err);
    rc = rc ? rc : get_int(j, "num_key_value_heads", c->n_heads, &c->n_kv_heads, err);
    rc = rc ? rc : get_int(j, "intermediate_size", 0, &c->inter, err);
    rc = rc ? rc : get_int(j, "max_position_embeddings", 32768, &c->max_pos, err);
    rc = rc ? rc : get_int(j, "bos_token_id", -1, &c->bos_id, err);
    if (rc) return rc;
    if (c->vocab <= 0) return err_set(err, ERR_INVAL, "config.json: vocab_size: missing or not positive");
    if (c->hidden <= 0) return err_set(err, ERR_INVAL, "config.json: hidden_size: missing or not positive");
    if (c->n_layers <= 0) return err_set(err, ERR_INVAL, "config.json: num_hidden_layers: missing or not positive");
    if (c->n_heads <= 0) return err_set(err, ERR_INVAL, "config.json: num_attention_heads: missing or not positive");
    if (c->inter <= 0) return err_set(err, ERR_INVAL, "config.json: intermediate_size: missing or not positive");
    if (c->n_kv_heads <= 0 || c->n_heads % c->n_kv_heads)
        return err_set(err, ERR_INVAL, "config.json: num_key_value_heads: %d does not divide num_attention_heads %d",
                       c->n_kv_heads, c->n_heads);
    int hd_default = c->hidden / c->n_heads;
    if ((rc = get_int(j, "head_dim", hd_default, &c->head_dim, err))) return rc;
    if (c->head_dim <= 0 || c->head_dim % 2)
        return err_set(err, ERR_INVAL, "config.json: head_dim: %d must be positive and even", c->head_dim);
    if (c->head_dim > 256)
        return err_set(err, ERR_UNSUPPORTED, "config.json: head_dim: %d is above the supported 256", c->head_dim);
    double eps;
    if ((rc = get_num(j, "rms_norm_eps", 1e-6, &eps, err))) return rc;
    c->rms_eps = (float)eps;
    json_t *act = json_object_get(j, "hidden_act");
    if (act && (!json_is_string(act) || strcmp(json_string_value(act), "silu")))
        return err_set(err, ERR_UNSUPPORTED, "config.json: hidden_act: only \"silu\" is supported");
    json_t *t = json_object_get(j, "tie_word_embeddings");
    c->tie_embeddings = json_is_true(t);
    if (json_is_true(json_object_get(j, "use_sliding_window")))
        return err_set(err, ERR_UNSUPPORTED, "config.json: use_sliding_window: sliding-window attention is not supported");
    if (c->arch != ARCH_QWEN2 && json_is_true(json_object_get(j, "attention_bias")))
        return err_set(err, ERR_UNSUPPORTED, "config.json: attention_bias: true is not supported for %s", arch);
    if (json_is_true(json_object_get(j, "mlp_bias")))
        return err_set(err, ERR_UNSUPPORTED, "config.json: mlp_bias: true is not supported");

    /* RoPE: transformers 5 puts everything into rope_parameters; 4.x has rope_theta + rope_scaling */
    json_t *rp = json_object_get(j, "rope_parameters");
    if (!json_is_object(rp)) rp = json_object_get(j, "rope_scaling");
    if ((rc = get_num(j, "rope_theta", 10000.0, &c->rope_theta, err))) return rc;
    if (json_is_object(rp)) {
        if (json_object_get(rp, "rope_theta") && (rc = get_num(rp, "rope_theta", 10000.0, &c->rope_theta, err)))
            return rc;
        const char *ty = json_string_value(json_object_get(rp, "rope_type"));
        if (!ty) ty = json_string_value(json_object_get(rp, "type"));
        if (ty && !strcmp(ty, "llama3")) {
            c->rope_llama3 = 1;
            rc = rc ? rc : get_num(rp, "factor", 8.0, &c->rope_factor, err);
            rc = rc ? rc : get_num(rp, "low_freq_factor", 1.0, &c->rope_low_freq, err);
            rc = rc ? rc : get_num(rp, "high_freq_factor", 4.0, &c->rope_high_freq, err);
            rc = rc ? rc : get_int(rp, "original_max_position_embeddings", 8192, &c->rope_orig_max_pos, err);
            if (rc) return rc;
            if (c->rope_factor <= 0 || c->rope_high_freq <= c->rope_low_freq || c->rope_orig_max_pos <= 0)
                return err_set(err, ERR_INVAL, "config.json: rope_parameters: bad llama3 factors");
        } else if (ty && strcmp(ty, "default"))
            return err_set(err, ERR_UNSUPPORTED, "config.json: rope_parameters.rope_type: '%s' is not supported "
                           "(default, llama3)", ty);
    }
    if (!(c->rope_theta > 0)) return err_set(err, ERR_INVAL, "config.json: rope_theta: must be positive");
    add_eos(c, json_object_get(j, "eos_token_id"));
    return 0;
}

/* "name:LINE: what" when jansson knows the line, else "name: what" (jansson's line is -1 when it has none: a file
 * it cannot open, or a document that parsed). */
static int json_error(char err[ERR_LEN], int code, const char *name, const json_error_t *je, const char *what) {
    if (je->line > 0) return err_set(err, code, "%s:%d: %s", name, je->line, what);
    return err_set(err, code, "%s: %s", name, what);
}

int model_config_parse(ModelConfig *c, const char *json_text, char err[ERR_LEN]) {
    json_error_t je;
    json_t *j = json_loads(json_text, 0, &je);
    if (!j || !json_is_object(j)) {
        json_decref(j);
        if (j) return err_set(err, ERR_DECODE, "config.json: not a JSON object");
        return json_error(err, ERR_DECODE, "config.json", &je, je.text);
    }
    int rc = parse_obj(c, j, err);
    json_decref(j);
    return rc;
}

int model_config_load(ModelConfig *c, const char *dir, char err[ERR_LEN]) {
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    if (!j) return json_error(err, je.line < 0 || je.position == 0 ? ERR_IO : ERR_DECODE, path, &je, je.text);
    if (!json_is_object(j)) { json_decref(j); return err_set(err, ERR_DECODE, "%s: not a JSON object", path); }
    int rc = parse_obj(c, j, err);
    json_decref(j);
    if (rc) return rc;
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    json_t *g = json_load_file(path, 0, &je);
    if (g) {
        add_eos(c, json_object_get(g, "eos_token_id"));
        json_decref(g);
    }
    return 0;
}

void model_config_inv_freq(const ModelConfig *c, float *inv_freq) {
    int half = c->head_dim / 2;
    for (int i = 0; i < half; i++) {
        /* fp32 like transformers: arange(0, dim, 2).float() / dim, base ** that, 1 / that */
        float e = (float)(2 * i) / (float)c->head_dim;
        float f = 1.0f / powf((float)c->rope_theta, e);
        if (c->rope_llama3) {
            double pi = 3.14159265358979323846;
            double old = c->rope_orig_max_pos, lo = old / c->rope_low_freq, hi = old / c->rope_high_freq;
            double wavelen = 2 * pi / f;
            double fl = wavelen > lo ? f / c->rope_factor : f;
            if (!(wavelen < hi) && !(wavelen > lo)) {
                double smooth = (old / wavelen - c->rope_low_freq) / (c->rope_high_freq - c->rope_low_freq);
                fl = (1 - smooth) * fl / c->rope_factor + smooth * fl;
            }
            f = (float)fl;
        }
        inv_freq[i] = f;
    }
}

long model_config_param_count(const ModelConfig *c) {
    long H = c->hidden, qd = (long)c->n_heads * c->head_dim, kvd = (long)c->n_kv_heads * c->head_dim, I = c->inter;
    long layer = 2 * H + qd * H + 2 * kvd * H + H * qd + 3 * H * I;
    if (c->qkv_bias) layer += qd + 2 * kvd;
    if (c->qk_norm) layer += 2 * c->head_dim;
    return (long)c->vocab * H * (c->tie_embeddings ? 1 : 2) + c->n_layers * layer + H;
}
