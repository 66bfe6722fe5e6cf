/* tests/unit/test_model.c: the CPU model core against transformers (fixtures from
 * tests/reference/make_model_fixtures.py): log-probs, entropies, parameter gradients, AdamW, grad norm on
 * Qwen2 (GQA, tied), Qwen3 and Llama-3 (rope scaling) checkpoints; plus a finite-difference gradient
 * check, save/load round trips, chunked LM head, inference mode, and refusal of bad configs/batches.
 * Tolerance for fixture comparisons: |ours - ref| <= 1e-6 + 1e-4 |ref|. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "backend/cpu/cpu_ops.h"
#include "core/dtype.h"
#include "io/safetensors.h"
#include "model/adamw.h"
#include "model/model.h"
#include "tests/model_fixture.h"
#include "tests/model_slabs.h"

static const char *MODELS[] = { "qwen2_gqa", "qwen2_tied", "qwen3", "llama3" };
#define NMODELS 4

static Model *load_model(const char *name, int train, long logits_floats) {
    char p[4096], err[ERR_LEN];
    path_of(p, sizeof p, name);
    ModelOptions o = { .max_tokens = 64, .train = train, .logits_floats = logits_floats };
    Model *m = model_load(p, &o, err);
    if (!m) fail_msg("model_load %s: %s", p, err);
    return m;
}

/* counts elements outside 1e-6 + 1e-4|ref|, prints the first few */
static int compare(const char *what, const float *ours, const float *ref, long n) {
    int bad = 0;
    double worst = 0;
    for (long i = 0; i < n; i++) {
        double d = fabs((double)ours[i] - ref[i]), tol = 1e-6 + 1e-4 * fabs(ref[i]);
        if (!(d <= tol)) {
            if (bad < 3) fprintf(stderr, "%s[%ld]: ours %.9g ref %.9g (diff %.3g)\n", what, i, ours[i], ref[i], d);
            bad++;
        }
        if (d / (1e-6 + 1e-4 * fabs(ref[i])) > worst) worst = d / (1e-6 + 1e-4 * fabs(ref[i]));
    }
    if (bad) fprintf(stderr, "%s: %d of %ld outside tolerance\n", what, bad, n);
    if (worst > 0.3) fprintf(stderr, "%s: worst |diff| / tolerance = %.2f\n", what, worst);
    return bad;
}

static void count_layer(void *ud) { (*(int *)ud)++; }

static void run_forward_backward(const char *name, long logits_floats, int train) {
    Fixture f;
    fixture_load(&f, name);
    Model *m = load_model(name, train, logits_floats);
    int layers_seen = 0;                                  /* model_set_progress: once per layer and pass */
    model_set_progress(m, count_layer, &layers_seen);
    ModelBatch b = fixture_batch(&f);
    char err[ERR_LEN];
    float *lp = calloc(f.N, sizeof(float)), *en = calloc(f.N, sizeof(float));
    assert_int_equal(model_forward(m, &b, lp, en, err), 0);
    int bad = compare("logp", lp, f.logp, f.N) + compare("entropy", en, f.ent, f.N);
    if (train) {
        model_grads_zero(m);
        assert_int_equal(model_backward(m, &b, f.w, f.u, err), 0);
        float *ref = malloc(model_bytes_params(m));
        for (int i = 0; i < model_n_tensors(m); i++) {
            const ModelTensor *t = model_tensor(m, i);
            char key[128];
            snprintf(key, sizeof key, "grad.%s", t->name);
            if (st_read_f32(f.st, key, ref, t->numel, err)) fail_msg("%s: %s", name, err);
            bad += compare(key, tu_grads(m) + t->offset, ref, t->numel);
        }
        double gn = model_grad_norm(m), gref = strtod(st_metadata(f.st, "grad_norm"), NULL);
        assert_true(fabs(gn - gref) <= 1e-4 * gref);
        free(ref);
    }
    assert_int_equal(layers_seen, (train ? 2 : 1) * model_config(m)->n_layers);
    free(lp); free(en);
    model_free(m);
    fixture_free(&f);
    if (bad) fail_msg("%s: %d mismatches", name, bad);
}

static void test_fixtures_forward_backward(void **state) {
    (void)state;
    for (int i = 0; i < NMODELS; i++) run_forward_backward(MODELS[i], 0, 1);
}

static void test_fixtures_chunked_lm_head(void **state) {
    (void)state;
    /* logits budget of 3 rows: the LM head runs in chunks and backward recomputes them */
    run_forward_backward("qwen2_gqa", 3 * 96, 1);
    run_forward_backward("qwen3", 1, 1);
}

static void test_fixtures_inference_mode(void **state) {
    (void)state;
    for (int i = 0; i < NMODELS; i++) run_forward_backward(MODELS[i], 0, 0);
}

static void test_fixtures_adamw(void **state) {
    (void)state;
    char err[ERR_LEN];
    for (int k = 0; k < NMODELS; k++) {
        Fixture f;
        fixture_load(&f, MODELS[k]);
        Model *m = load_model(MODELS[k], 1, 0);
        AdamWConfig ac = adamw_defaults();
        ac.weight_decay = strtof(st_metadata(f.st, "weight_decay"), NULL);
        float lr = strtof(st_metadata(f.st, "lr"), NULL);
        int steps = atoi(st_metadata(f.st, "steps"));
        for (int i = 0; i < model_n_tensors(m); i++) {
            char key[128];
            const ModelTensor *t = model_tensor(m, i);
            snprintf(key, sizeof key, "grad.%s", t->name);
            assert_int_equal(st_read_f32(f.st, key, tu_grads(m) + t->offset, t->numel, err), 0);
        }
        for (int s = 0; s < steps; s++) assert_int_equal(adamw_step(m, &ac, lr, err), 0);
        float *ref = malloc(model_bytes_params(m));
        int bad = 0;
        for (int i = 0; i < model_n_tensors(m); i++) {
            const ModelTensor *t = model_tensor(m, i);
            char key[128];
            snprintf(key, sizeof key, "adamw.%s", t->name);
            assert_int_equal(st_read_f32(f.st, key, ref, t->numel, err), 0);
            bad += compare(key, tu_params(m) + t->offset, ref, t->numel);
        }
        free(ref);
        model_free(m);
        fixture_free(&f);
        if (bad) fail_msg("%s adamw: %d mismatches", MODELS[k], bad);
    }
}

/* d loss / d param by central differences (fp32 forward, loss in double), against model_backward */
static double loss_of(Model *m, const ModelBatch *b, const Fixture *f, float *lp, float *en) {
    char err[ERR_LEN];
    assert_int_equal(model_forward(m, b, lp, en, err), 0);
    double L = 0;
    for (int i = 0; i < f->N; i++) L += (double)f->w[i] * lp[i] + (double)f->u[i] * en[i];
    return L;
}

static void test_finite_difference(void **state) {
    (void)state;
    const char *names[] = { "qwen2_gqa", "qwen3", "llama3" };
    for (int k = 0; k < 3; k++) {
        Fixture f;
        fixture_load(&f, names[k]);
        Model *m = load_model(names[k], 1, 0);
        ModelBatch b = fixture_batch(&f);
        char err[ERR_LEN];
        float *lp = calloc(f.N, sizeof(float)), *en = calloc(f.N, sizeof(float));
        for (int i = 0; i < f.N; i++) f.w[i] *= 40.0f, f.u[i] *= 40.0f;   /* O(1) gradients for the differences */
        loss_of(m, &b, &f, lp, en);
        model_grads_zero(m);
        assert_int_equal(model_backward(m, &b, f.w, f.u, err), 0);
        int checked = 0, bad = 0;
        for (int i = 0; i < model_n_tensors(m); i++) {
            const ModelTensor *t = model_tensor(m, i);
            if (strstr(t->name, "layers.") && !strstr(t->name, "layers.0.")) continue;   /* one layer is enough */
            for (int r = 0; r < 2; r++) {
                long j = (long)((r * 7919 + i * 104729) % t->numel);
                float *p = tu_params(m) + t->offset + j, saved = *p, h = 1e-2f;
                *p = saved + h;
                double lpos = loss_of(m, &b, &f, lp, en);
                *p = saved - h;
                double lneg = loss_of(m, &b, &f, lp, en);
                *p = saved;
                double fd = (lpos - lneg) / (2.0 * h), an = tu_grads(m)[t->offset + j];
                checked++;
                if (fabs(fd - an) > 5e-3 + 1e-2 * fabs(an)) {
                    bad++;
                    fprintf(stderr, "%s %s[%ld]: finite diff %.6g backward %.6g\n", names[k], t->name, j, fd, an);
                }
            }
        }
        assert_true(checked > 20);
        free(lp); free(en);
        model_free(m);
        fixture_free(&f);
        if (bad) fail_msg("%s: %d finite-difference mismatches", names[k], bad);
    }
}

static void rm_dir(const char *d) {
    const char *files[] = { "config.json", "generation_config.json", "model.safetensors" };
    char p[4200];
    for (int i = 0; i < 3; i++) { snprintf(p, sizeof p, "%s/%s", d, files[i]); unlink(p); }
    rmdir(d);
}

static void test_save_load_roundtrip(void **state) {
    (void)state;
    char err[ERR_LEN], dir[] = "/tmp/dapo_model_XXXXXX";
    assert_non_null(mkdtemp(dir));
    for (int k = 0; k < NMODELS; k++) {
        Model *m = load_model(MODELS[k], 0, 0);
        char sub[4200];
        snprintf(sub, sizeof sub, "%s/%s", dir, MODELS[k]);
        assert_int_equal(model_save(m, sub, ST_F32, err), 0);
        ModelOptions o = { .max_tokens = 8 };
        Model *r = model_load(sub, &o, err);
        if (!r) fail_msg("%s", err);
        assert_int_equal(model_n_params(r), model_n_params(m));
        assert_memory_equal(tu_params(r), tu_params(m), model_bytes_params(m));
        assert_int_equal(model_config(r)->n_eos, 2);        /* eos 2 from config.json, [2, 5] from generation_config */
        model_free(r);
        assert_int_equal(model_save(m, sub, ST_BF16, err), 0);
        r = model_load(sub, &o, err);
        if (!r) fail_msg("%s", err);
        for (long i = 0; i < model_n_params(m); i++)
            assert_true(tu_params(r)[i] == dtype_bf16_to_f32(dtype_bf16_from_f32(tu_params(m)[i])));
        model_free(r);
        rm_dir(sub);
        model_free(m);
    }
    rmdir(dir);
}

/* writes DIR/config.json with `config` and a copy of qwen2_gqa's weights */
static void write_model_dir(const char *dir, const char *config, const char *weights_from) {
    char p[4200], src[4096], err[ERR_LEN];
    mkdir(dir, 0755);
    snprintf(p, sizeof p, "%s/config.json", dir);
    FILE *fp = fopen(p, "w");
    fputs(config, fp);
    fclose(fp);
    path_of(src, sizeof src, weights_from);
    Model *m = load_model(weights_from, 0, 0);
    snprintf(p, sizeof p, "%s/x", dir);
    (void)p;
    char sub[4200];
    snprintf(sub, sizeof sub, "%s", dir);
    /* save weights only (config.json is replaced again below) */
    assert_int_equal(model_save(m, sub, ST_F32, err), 0);
    model_free(m);
    snprintf(p, sizeof p, "%s/config.json", dir);
    fp = fopen(p, "w");
    fputs(config, fp);
    fclose(fp);
}

static void expect_load_error(const char *config, const char *needle) {
    char dir[] = "/tmp/dapo_badcfg_XXXXXX", err[ERR_LEN] = "";
    assert_non_null(mkdtemp(dir));
    write_model_dir(dir, config, "qwen2_gqa");
    ModelOptions o = { .max_tokens = 8 };
    Model *m = model_load(dir, &o, err);
    rm_dir(dir);
    if (m) { model_free(m); fail_msg("config accepted, expected error with '%s'", needle); }
    if (!strstr(err, needle)) fail_msg("error '%s' does not name '%s'", err, needle);
}

#define BASE_CFG "\"vocab_size\": 96, \"hidden_size\": 48, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, " \
                 "\"num_key_value_heads\": 2, \"intermediate_size\": 80, \"tie_word_embeddings\": false"

static void test_refuses_bad_configs(void **state) {
    (void)state;
    expect_load_error("{\"architectures\": [\"GPT2LMHeadModel\"], " BASE_CFG "}", "architectures");
    expect_load_error("{\"architectures\": [\"Qwen2ForCausalLM\"], " BASE_CFG ", \"hidden_act\": \"gelu\"}", "hidden_act");
    expect_load_error("{\"architectures\": [\"Qwen2ForCausalLM\"], " BASE_CFG ", \"use_sliding_window\": true}",
                      "use_sliding_window");
    expect_load_error("{\"architectures\": [\"Qwen2ForCausalLM\"], " BASE_CFG
                      ", \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4}}", "rope_type");
    /* shape disagrees: the file has intermediate 80 */
    expect_load_error("{\"architectures\": [\"Qwen2ForCausalLM\"], \"vocab_size\": 96, \"hidden_size\": 48, "
                      "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
                      "\"intermediate_size\": 81}", "mlp.gate_proj.weight");
    /* Qwen3 expects q_norm tensors the Qwen2 file lacks */
    expect_load_error("{\"architectures\": [\"Qwen3ForCausalLM\"], " BASE_CFG "}", "q_norm");
    /* a third layer is missing from the file */
    expect_load_error("{\"architectures\": [\"Qwen2ForCausalLM\"], \"vocab_size\": 96, \"hidden_size\": 48, "
                      "\"num_hidden_layers\": 3, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
                      "\"intermediate_size\": 80}", "model.layers.2");
    expect_load_error("{\"architectures\": [\"Qwen2ForCausalLM\"], " BASE_CFG ", \"num_key_value_heads\": 3}",
                      "num_key_value_heads");
}

/* Load errors name the file, with a line number only when jansson has one (never "config.json:-1:"). */
static void test_load_error_messages(void **state) {
    (void)state;
    char err[ERR_LEN] = "";
    ModelOptions mo = { .max_tokens = 8 };
    assert_null(model_load("/nonexistent-dapo-model-dir", &mo, err));
    if (!strstr(err, "/nonexistent-dapo-model-dir/config.json: ") || strstr(err, ":-1"))
        fail_msg("missing config.json: '%s'", err);
    ModelConfig c;
    assert_int_equal(model_config_parse(&c, "[1, 2]", err), ERR_DECODE);
    assert_string_equal(err, "config.json: not a JSON object");
    assert_int_equal(model_config_parse(&c, "{\n  \"vocab_size\": 96,\n  \"hidden_size\": }\n", err), ERR_DECODE);
    if (!strstr(err, "config.json:3: ")) fail_msg("syntax error: '%s'", err);
}

static void test_refuses_bad_batches(void **state) {
    (void)state;
    Model *m = load_model("qwen2_gqa", 0, 0);
    char err[ERR_LEN];
    int32_t tok[4] = { 1, 2, 3, 4 }, cu[3] = { 0, 2, 4 }, badcu[3] = { 0, 3, 2 }, big[4] = { 1, 2, 96, 4 };
    ModelBatch b = { .n_tokens = 4, .n_seqs = 2, .tokens = tok, .cu_seqlens = cu, .temperature = 1.0f };
    float lp[4];
    assert_int_equal(model_forward(m, &b, lp, NULL, err), 0);
    b.tokens = big;
    assert_int_equal(model_forward(m, &b, lp, NULL, err), ERR_INVAL);
    assert_non_null(strstr(err, "tokens[2]"));
    b.tokens = tok;
    b.cu_seqlens = badcu;
    assert_int_equal(model_forward(m, &b, lp, NULL, err), ERR_INVAL);
    b.cu_seqlens = cu;
    b.temperature = 0;
    assert_int_equal(model_forward(m, &b, lp, NULL, err), ERR_INVAL);
    b.temperature = 1;
    b.n_tokens = 65;
    assert_int_equal(model_forward(m, &b, lp, NULL, err), ERR_INVAL);
    b.n_tokens = 4;
    assert_int_equal(model_backward(m, &b, lp, NULL, err), ERR_INVAL);   /* inference model */
    model_free(m);
}

/* Issue 39: gradient checkpointing (ModelOptions.recompute) gives bitwise the gradients and log-probs of the stored
 * activations, for every fixture architecture (Qwen2 with bias, tied, Qwen3 q/k norm, Llama 3), with the
 * activation slab smaller. */
static void test_recompute_same_gradients(void **state) {
    (void)state;
    for (size_t k = 0; k < sizeof MODELS / sizeof MODELS[0]; k++) {
        Fixture f;
        fixture_load(&f, MODELS[k]);
        char p[512], err[ERR_LEN];
        path_of(p, sizeof p, MODELS[k]);
        Model *m[2];
        for (int r = 0; r < 2; r++) {
            ModelOptions o = { .max_tokens = 64, .train = 1, .recompute = r };
            m[r] = model_load(p, &o, err);
            if (!m[r]) fail_msg("model_load %s: %s", p, err);
        }
        ModelBatch b = fixture_batch(&f);
        float lp[2][64], ent[2][64], dl[64];
        for (int i = 0; i < b.n_tokens; i++) dl[i] = 0.1f * (float)((i % 5) - 2);
        for (int r = 0; r < 2; r++) {
            assert_int_equal(model_forward(m[r], &b, lp[r], ent[r], err), 0);
            assert_int_equal(model_backward(m[r], &b, dl, dl, err), 0);
        }
        long P = model_n_params(m[0]);
        assert_memory_equal(lp[0], lp[1], (size_t)b.n_tokens * sizeof(float));
        assert_memory_equal(model_host_slab(m[0], MODEL_GRADS), model_host_slab(m[1], MODEL_GRADS), (size_t)P * sizeof(float));
        assert_true(model_bytes_acts(m[1]) < model_bytes_acts(m[0]));
        for (int r = 0; r < 2; r++) {                       /* the memory report's plan is what was built */
            ModelOptions o = { .max_tokens = 64, .train = 1, .recompute = r, .shard_world = 1 + 2 * r };
            ModelPlan pl;
            assert_int_equal(model_plan(model_config_text(m[r]), &o, &pl, err), 0);
            assert_int_equal(pl.n_params, P);
            assert_int_equal(pl.acts_bytes, model_bytes_acts(m[r]));
            long pad[3] = {0}, shard = 0, off, n;          /* sharded over 3: embedding, one layer slot, final units */
            for (int u = 0; u < model_n_units(m[r]); u++) {
                assert_int_equal(model_unit(m[r], u, &off, &n), 0);
                pad[u == 0 ? 0 : u == model_n_units(m[r]) - 1 ? 2 : 1] = (n + 2) / 3 * 3;
                shard += (n + 2) / 3;
            }
            long win = pad[0] + pad[1] + pad[2];
            assert_int_equal(pl.params_bytes, (size_t)(r ? win : P) * sizeof(float));
            assert_int_equal(pl.grads_bytes, (size_t)(r ? win : P) * sizeof(float));
            assert_int_equal(pl.adam_bytes, 2 * sizeof(float) * (size_t)(r ? shard : P));
            assert_int_equal(pl.shard_bytes, 2 * sizeof(float) * (size_t)(r ? shard : 0));
        }
        model_free(m[0]);
        model_free(m[1]);
        fixture_free(&f);
    }
}

/* Hooks that serve a sharded model's windows from a whole copy and collect its gradients (one "rank" holding
 * everything), recording the calls: use(u) as u, grads_ready(u) as 1000 + u. */
typedef struct {
    Model       *m;
    const float *full;
    float       *grads;
    int          calls[512], n;
} HookRec;

static int rec_use(void *ud, int u, char err[ERR_LEN]) {
    (void)err;
    HookRec *h = ud;
    long off, n;
    if (h->n < 512) h->calls[h->n++] = u;
    model_unit(h->m, u, &off, &n);
    memcpy(model_unit_window(h->m, MODEL_PARAMS, u), h->full + off, (size_t)n * sizeof(float));
    return 0;
}

static void rec_take(HookRec *h, int u) {
    long off, n;
    model_unit(h->m, u, &off, &n);
    float *w = model_unit_window(h->m, MODEL_GRADS, u);
    for (long i = 0; i < n; i++) h->grads[off + i] += w[i];
    memset(w, 0, (size_t)model_unit_padded(h->m, u) * sizeof(float));
}

static int rec_grads(void *ud, int u, char err[ERR_LEN]) {
    (void)err;
    HookRec *h = ud;
    if (h->n < 512) h->calls[h->n++] = 1000 + u;
    if (u > 0 && u < model_n_units(h->m) - 1) rec_take(h, u);   /* a layer's window is shared: take it now */
    return 0;
}

/* Issue 39: a model holding only FSDP windows (shard_world 2), fed by its hooks, gives bitwise the log-probs and
 * gradients of the whole model, with and without recompute, for every fixture architecture (tied included); its idle
 * passes make exactly the hook calls of a real pass; without hooks its forward is refused. */
static void test_unit_windows(void **state) {
    (void)state;
    static const ModelUnitHooks hooks = {.use = rec_use, .grads_ready = rec_grads};
    for (size_t k = 0; k < sizeof MODELS / sizeof MODELS[0]; k++) {
        Fixture f;
        fixture_load(&f, MODELS[k]);
        char p[512], err[ERR_LEN];
        path_of(p, sizeof p, MODELS[k]);
        for (int r = 0; r < 4; r++) {          /* recompute, keep_params */
            ModelOptions o = {.max_tokens = 64, .train = 1, .recompute = r & 1};
            Model *whole = model_load(p, &o, err);
            o.shard_world = 2;
            o.keep_params = r >> 1;
            Model *win = model_load(p, &o, err);
            if (!whole || !win) fail_msg("model_load %s: %s", p, err);
            ModelBatch b = fixture_batch(&f);
            float lp[2][64], dl[64];
            for (int i = 0; i < b.n_tokens; i++) dl[i] = 0.1f * (float)((i % 5) - 2);
            assert_int_equal(model_forward(win, &b, lp[1], NULL, err), ERR_INVAL);     /* no hooks */
            long P = model_n_params(whole);
            HookRec h = {.m = win, .full = model_host_slab(whole, MODEL_PARAMS), .grads = calloc((size_t)P, sizeof(float))};
            model_set_unit_hooks(win, &hooks, &h);
            model_grads_zero(whole);
            model_grads_zero(win);
            assert_int_equal(model_forward(whole, &b, lp[0], NULL, err), 0);
            assert_int_equal(model_backward(whole, &b, dl, dl, err), 0);
            assert_int_equal(model_forward(win, &b, lp[1], NULL, err), 0);
            assert_int_equal(model_backward(win, &b, dl, dl, err), 0);
            rec_take(&h, 0);
            rec_take(&h, model_n_units(win) - 1);
            assert_memory_equal(lp[0], lp[1], (size_t)b.n_tokens * sizeof(float));
            assert_memory_equal(h.grads, model_host_slab(whole, MODEL_GRADS), (size_t)P * sizeof(float));
            int real[512], nr = h.n;
            memcpy(real, h.calls, sizeof real);
            h.n = 0;
            assert_int_equal(model_forward_idle(win, err), 0);
            assert_int_equal(model_backward_idle(win, err), 0);
            assert_int_equal(h.n, nr);
            assert_memory_equal(h.calls, real, (size_t)nr * sizeof(int));
            assert_null(model_unit_window(whole, MODEL_PARAMS, 0));
            assert_int_equal(model_save(win, "/tmp/never", ST_F32, err), ERR_INVAL);
            free(h.grads);
            model_free(whole);
            model_free(win);
        }
        fixture_free(&f);
    }
}

static void test_packing_is_independent(void **state) {
    (void)state;
    /* a sequence's log-probs do not depend on what else is packed in the batch */
    Fixture f;
    fixture_load(&f, "qwen3");
    Model *m = load_model("qwen3", 0, 0);
    char err[ERR_LEN];
    float all[64], one[64];
    ModelBatch b = fixture_batch(&f);
    assert_int_equal(model_forward(m, &b, all, NULL, err), 0);
    int s0 = f.cu[1], n1 = f.cu[2] - f.cu[1];
    int32_t cu1[2] = { 0, n1 };
    ModelBatch b1 = { .n_tokens = n1, .n_seqs = 1, .tokens = f.tokens + s0, .targets = f.targets + s0,
                      .cu_seqlens = cu1, .temperature = f.temperature };
    assert_int_equal(model_forward(m, &b1, one, NULL, err), 0);
    for (int i = 0; i < n1; i++) assert_true(fabsf(one[i] - all[s0 + i]) <= 1e-5f);
    model_free(m);
    fixture_free(&f);
}


/* KV-cache generation path: prefill chunks + one-token decode steps for two sequences at once give the
 * same log-probs and entropies as the packed forward (the transformers fixture). */
static void test_cached_forward_matches(void **state) {
    (void)state;
    for (int k = 0; k < NMODELS; k++) {
        Fixture f;
        fixture_load(&f, MODELS[k]);
        char p[4096], err[ERR_LEN];
        path_of(p, sizeof p, MODELS[k]);
        ModelOptions o = { .max_tokens = 16, .max_context = 32 };
        Model *m = model_load(p, &o, err);
        if (!m) fail_msg("%s", err);
        const ModelConfig *c = model_config(m);
        int L = c->n_layers, kvd = c->n_kv_heads * c->head_dim, V = c->vocab;
        enum { CAP = 20 };
        float *kc[2 * 8], *vc[2 * 8];
        assert_true(L <= 8);
        for (int i = 0; i < 2 * L; i++) { kc[i] = calloc(CAP * kvd, sizeof(float)); vc[i] = calloc(CAP * kvd, sizeof(float)); }
        /* sequences 1 (13 tokens) and 0 (7 tokens) of the fixture; prefill 5 and 3 tokens, then decode */
        int base[2] = { f.cu[1], f.cu[0] }, len[2] = { f.cu[2] - f.cu[1], f.cu[1] - f.cu[0] }, done[2] = { 5, 3 };
        float *logits = malloc(2 * V * sizeof(float));
        int bad = 0;
        int first = 1;
        while (done[0] <= len[0] || done[1] <= len[1]) {
            int32_t tok[16], cu[3] = { 0 }, p0[2], cap[2] = { CAP, CAP }, tgt[2];
            float *kk[16], *vv[16];
            int S = 0, n = 0, which[2];
            for (int s = 0; s < 2; s++) {
                if (done[s] > len[s]) continue;
                int start = first ? 0 : done[s] - 1, cnt = first ? done[s] : 1;
                for (int j = 0; j < cnt; j++) tok[n + j] = f.tokens[base[s] + start + j];
                n += cnt;
                p0[S] = start;
                cu[S + 1] = n;
                tgt[S] = f.targets[base[s] + start + cnt - 1];
                for (int l = 0; l < L; l++) { kk[S * L + l] = kc[s * L + l]; vv[S * L + l] = vc[s * L + l]; }
                which[S++] = s;
            }
            ModelCacheBatch cb = { .n_seqs = S, .tokens = tok, .cu_seqlens = cu, .p0 = p0, .cap = cap, .k_cache = kk,
                                   .v_cache = vv };
            assert_int_equal(model_forward_cached(m, &cb, logits, err), 0);
            float lp[2], en[2];
            cpu_logprob_entropy(logits, tgt, S, V, f.temperature, lp, en);
            for (int i = 0; i < S; i++) {
                int s = which[i], pos = base[s] + done[s] - 1;
                bad += compare("cached logp", &lp[i], &f.logp[pos], 1) + compare("cached entropy", &en[i], &f.ent[pos], 1);
                done[s]++;
            }
            first = 0;
        }
        /* a context beyond the cache is refused */
        int32_t tok1 = 1, cu1[2] = { 0, 1 }, p01 = CAP, cap1 = CAP;
        ModelCacheBatch over = { .n_seqs = 1, .tokens = &tok1, .cu_seqlens = cu1, .p0 = &p01, .cap = &cap1, .k_cache = kc,
                                 .v_cache = vc };
        assert_int_equal(model_forward_cached(m, &over, logits, err), ERR_INVAL);
        for (int i = 0; i < 2 * L; i++) { free(kc[i]); free(vc[i]); }
        free(logits);
        model_free(m);
        fixture_free(&f);
        if (bad) fail_msg("%s: cached path: %d mismatches", MODELS[k], bad);
    }
}


/* A checkpoint split into two shards with model.safetensors.index.json loads to the same parameters. */
static void test_sharded_checkpoint(void **state) {
    (void)state;
    char dir[] = "/tmp/dapo_shard_XXXXXX", err[ERR_LEN], path[4200];
    assert_non_null(mkdtemp(dir));
    Model *m = load_model("llama3", 0, 0);
    int half = model_n_tensors(m) / 2;
    FILE *idx;
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    assert_non_null(idx = fopen(path, "w"));
    fprintf(idx, "{\"metadata\": {\"total_size\": %ld}, \"weight_map\": {", model_n_params(m) * 4);
    for (int part = 0; part < 2; part++) {
        int i0 = part ? half : 0, i1 = part ? model_n_tensors(m) : half;
        StWriteTensor *t = calloc(i1 - i0, sizeof *t);
        char shard[64];
        snprintf(shard, sizeof shard, "model-%05d-of-00002.safetensors", part + 1);
        for (int i = i0; i < i1; i++) {
            const ModelTensor *mt = model_tensor(m, i);
            t[i - i0] = (StWriteTensor){ .name = mt->name, .ndim = mt->ndim, .shape = { mt->shape[0], mt->shape[1] },
                                         .f32 = tu_params(m) + mt->offset };
            fprintf(idx, "%s\"%s\": \"%s\"", i ? ", " : "", mt->name, shard);
        }
        snprintf(path, sizeof path, "%s/%s", dir, shard);
        /* shard 1 in bf16, shard 2 in fp32: mixed dtypes load too */
        assert_int_equal(st_write(path, t, i1 - i0, part ? ST_F32 : ST_BF16, NULL, 0, err), 0);
        free(t);
    }
    fprintf(idx, "}}\n");
    fclose(idx);
    char src[4096], cmd[8400];
    path_of(src, sizeof src, "llama3/config.json");
    snprintf(cmd, sizeof cmd, "cp '%s' '%s/config.json'", src, dir);
    assert_int_equal(system(cmd), 0);
    ModelOptions o = { .max_tokens = 8 };
    Model *r = model_load(dir, &o, err);
    if (!r) fail_msg("%s", err);
    for (int i = 0; i < model_n_tensors(m); i++) {
        const ModelTensor *mt = model_tensor(m, i);
        for (long j = 0; j < mt->numel; j++) {
            float want = tu_params(m)[mt->offset + j];
            if (i < half) want = dtype_bf16_to_f32(dtype_bf16_from_f32(want));
            assert_true(tu_params(r)[mt->offset + j] == want);
        }
    }
    model_free(r);
    /* an index naming a tensor no shard holds is refused, naming it */
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    idx = fopen(path, "w");
    fprintf(idx, "{\"weight_map\": {\"model.norm.weight\": \"model-00001-of-00002.safetensors\"}}");
    fclose(idx);
    assert_null(model_load(dir, &o, err));
    assert_non_null(strstr(err, "model.norm.weight"));
    model_free(m);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}


/* Adam state survives a save/load: two steps straight == one step, save, reload into a fresh model, one step. */
static void test_optimizer_state_roundtrip(void **state) {
    (void)state;
    char err[ERR_LEN], path[] = "/tmp/dapo_opt_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    Model *a = load_model("qwen3", 1, 0), *b = load_model("qwen3", 1, 0);
    AdamWConfig ac = adamw_defaults();
    for (long i = 0; i < model_n_params(a); i++) tu_grads(a)[i] = tu_grads(b)[i] = sinf((float)i) * 0.01f;
    assert_int_equal(adamw_step(a, &ac, 1e-3f, err), 0);
    assert_int_equal(adamw_step(a, &ac, 1e-3f, err), 0);
    assert_int_equal(adamw_step(b, &ac, 1e-3f, err), 0);
    assert_int_equal(model_save_optimizer(b, path, err), 0);
    Model *c = load_model("qwen3", 1, 0);
    memcpy(tu_params(c), tu_params(b), model_bytes_params(b));
    memcpy(tu_grads(c), tu_grads(b), model_bytes_params(b));
    assert_int_equal(model_load_optimizer(c, path, err), 0);
    assert_int_equal(model_adam_step(c), 1);
    assert_int_equal(adamw_step(c, &ac, 1e-3f, err), 0);
    assert_memory_equal(tu_params(c), tu_params(a), model_bytes_params(a));
    Model *inf = load_model("qwen3", 0, 0);
    assert_int_equal(model_load_optimizer(inf, path, err), ERR_INVAL);
    model_free(inf);
    model_free(a); model_free(b); model_free(c);
    unlink(path);
}


/* transformers 4.x keys (rope_theta + rope_scaling with "type") parse to the same RoPE as the 5.x
 * rope_parameters of the llama3 fixture; defaults and eos lists. */
static void test_config_variants(void **state) {
    (void)state;
    char p[4096], err[ERR_LEN];
    path_of(p, sizeof p, "llama3");
    ModelConfig a, b;
    assert_int_equal(model_config_load(&a, p, err), 0);
    assert_true(a.rope_llama3);
    assert_int_equal(a.n_eos, 2);
    assert_int_equal(a.eos_ids[0], 2);
    assert_int_equal(a.eos_ids[1], 5);
    const char *v4 = "{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 90, \"hidden_size\": 40, "
                     "\"num_hidden_layers\": 2, \"num_attention_heads\": 5, \"num_key_value_heads\": 1, "
                     "\"intermediate_size\": 56, \"rope_theta\": 500000.0, \"eos_token_id\": [7, 8], "
                     "\"rope_scaling\": {\"type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0, "
                     "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8}}";
    assert_int_equal(model_config_parse(&b, v4, err), 0);
    assert_int_equal(b.head_dim, 8);
    assert_int_equal(b.n_eos, 2);
    assert_false(b.tie_embeddings);
    float fa[4], fb[4];
    model_config_inv_freq(&a, fa);
    model_config_inv_freq(&b, fb);
    for (int i = 0; i < 4; i++) assert_true(fa[i] == fb[i]);
    assert_true(fb[3] < 1.0f / powf(500000.0f, 0.75f));   /* the lowest frequency is scaled down */
    assert_int_equal(model_config_parse(&b, "{\"model_type\": \"qwen2\", \"vocab_size\": 8, \"hidden_size\": 8, "
                                            "\"num_hidden_layers\": 1, \"num_attention_heads\": 2, "
                                            "\"intermediate_size\": 8}", err), 0);
    assert_int_equal(b.arch, ARCH_QWEN2);
    assert_int_equal(b.n_kv_heads, 2);
    assert_true(b.qkv_bias);
    assert_int_equal(model_config_parse(&b, "{\"model_type\": \"qwen2\"}", err), ERR_INVAL);
    assert_non_null(strstr(err, "vocab_size"));
    assert_int_equal(model_config_parse(&b, "[]", err), ERR_DECODE);
}


/* cpu_linear / cpu_linear_add / cpu_linear_backward against naive double loops, at sizes where the GEMMs
 * are split over threads (by rows when M >= N, by columns otherwise). */
static void check_linear(int M, int N, int K) {
    float *x = malloc((size_t)M * K * 4), *w = malloc((size_t)N * K * 4), *b = malloc((size_t)N * 4),
          *y = malloc((size_t)M * N * 4), *dy = malloc((size_t)M * N * 4), *dx = malloc((size_t)M * K * 4),
          *dw = calloc((size_t)N * K, 4), *db = calloc(N, 4);
    for (long i = 0; i < (long)M * K; i++) x[i] = sinf(0.37f * i);
    for (long i = 0; i < (long)N * K; i++) w[i] = cosf(0.11f * i);
    for (int i = 0; i < N; i++) b[i] = 0.01f * i;
    for (long i = 0; i < (long)M * N; i++) dy[i] = sinf(0.05f * i + 1);
    cpu_linear(y, x, w, b, M, N, K);
    cpu_linear_add(y, x, w, M, N, K);
    cpu_linear_backward(dx, dw, db, dy, x, w, M, N, K, 0);
    for (int m = 0; m < M; m += 7)
        for (int n = 0; n < N; n += 5) {
            double r = 0;
            for (int k = 0; k < K; k++) r += (double)x[(long)m * K + k] * w[(long)n * K + k];
            assert_true(fabs(y[(long)m * N + n] - (2 * r + b[n])) <= 1e-3 * (1 + fabs(r)));
        }
    for (int m = 0; m < M; m += 7)
        for (int k = 0; k < K; k += 3) {
            double r = 0;
            for (int n = 0; n < N; n++) r += (double)dy[(long)m * N + n] * w[(long)n * K + k];
            assert_true(fabs(dx[(long)m * K + k] - r) <= 1e-3 * (1 + fabs(r)));
        }
    for (int n = 0; n < N; n += 5)
        for (int k = 0; k < K; k += 3) {
            double r = 0;
            for (int m = 0; m < M; m++) r += (double)dy[(long)m * N + n] * x[(long)m * K + k];
            assert_true(fabs(dw[(long)n * K + k] - r) <= 1e-3 * (1 + fabs(r)));
        }
    free(x); free(w); free(b); free(y); free(dy); free(dx); free(dw); free(db);
}

static void test_cpu_linear_split(void **state) {
    (void)state;
    check_linear(300, 200, 64);    /* split by rows */
    check_linear(40, 700, 96);     /* split by columns */
    check_linear(5, 3, 2);         /* unsplit */
}

static void test_safetensors_formats(void **state) {
    (void)state;
    assert_true(dtype_bf16_to_f32(0x3f80) == 1.0f);
    assert_true(dtype_bf16_from_f32(1.0f) == 0x3f80);
    assert_true(dtype_bf16_from_f32(1.00390625f) == 0x3f80);        /* tie rounds to even */
    assert_true(dtype_bf16_from_f32(1.01171875f) == 0x3f82);
    assert_true(dtype_f16_to_f32(0x3c00) == 1.0f);
    assert_true(dtype_f16_to_f32(0xc000) == -2.0f);
    assert_true(dtype_f16_to_f32(0x0001) == ldexpf(1.0f, -24));    /* subnormal */
    assert_true(isinf(dtype_f16_to_f32(0x7c00)));
    /* corrupt files are refused, not crashed on */
    char p[] = "/tmp/dapo_st_XXXXXX", err[ERR_LEN];
    int fd = mkstemp(p);
    assert_true(fd >= 0);
    const char *bodies[] = {
        "{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 8]}}",
        "{\"a\": {\"dtype\": \"Q4\", \"shape\": [1], \"data_offsets\": [0, 4]}}",
        "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 400]}}",
        "[1, 2]", "{\"a\": 1}", "{not json",
    };
    for (int i = 0; i < 6; i++) {
        FILE *f = fopen(p, "wb");
        uint64_t n = strlen(bodies[i]);
        fwrite(&n, 8, 1, f);
        fwrite(bodies[i], 1, n, f);
        fwrite("\0\0\0\0\0\0\0\0", 1, 8, f);
        fclose(f);
        SafeTensors *st = st_open(p, err);
        assert_null(st);
    }
    FILE *f = fopen(p, "wb");
    uint64_t huge = 1ull << 40;
    fwrite(&huge, 8, 1, f);
    fclose(f);
    assert_null(st_open(p, err));
    close(fd);
    unlink(p);
}

static void test_lr_schedules(void **state) {
    (void)state;
    assert_true(fabs(lr_at(LR_CONSTANT, 1e-3, 0, 10, 100, 0) - 0.0) < 1e-15);
    assert_true(fabs(lr_at(LR_CONSTANT, 1e-3, 5, 10, 100, 0) - 5e-4) < 1e-15);
    assert_true(fabs(lr_at(LR_CONSTANT, 1e-3, 50, 10, 100, 0) - 1e-3) < 1e-15);
    assert_true(fabs(lr_at(LR_COSINE, 1.0, 10, 10, 110, 0) - 1.0) < 1e-12);
    assert_true(fabs(lr_at(LR_COSINE, 1.0, 60, 10, 110, 0) - 0.5) < 1e-12);
    assert_true(fabs(lr_at(LR_COSINE, 1.0, 110, 10, 110, 0.1) - 0.1) < 1e-12);
    assert_true(fabs(lr_at(LR_CONSTANT, 2.0, 0, 0, 10, 0) - 2.0) < 1e-12);
}

static void test_grad_clip(void **state) {
    (void)state;
    Model *m = load_model("qwen2_tied", 1, 0);
    for (long i = 0; i < model_n_params(m); i++) tu_grads(m)[i] = (i % 2) ? 0.01f : -0.01f;
    double n = model_grad_norm(m), expect = 0.01 * sqrt((double)model_n_params(m));
    assert_true(fabs(n - expect) < 1e-6 * expect);
    double before = model_grads_clip(m, 0.5);
    assert_true(fabs(before - n) < 1e-9);
    assert_true(fabs(model_grad_norm(m) - 0.5) < 1e-5);
    model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_safetensors_formats),
        cmocka_unit_test(test_lr_schedules),
        cmocka_unit_test(test_cpu_linear_split),
        cmocka_unit_test(test_config_variants),
        cmocka_unit_test(test_fixtures_forward_backward),
        cmocka_unit_test(test_fixtures_chunked_lm_head),
        cmocka_unit_test(test_fixtures_inference_mode),
        cmocka_unit_test(test_fixtures_adamw),
        cmocka_unit_test(test_grad_clip),
        cmocka_unit_test(test_optimizer_state_roundtrip),
        cmocka_unit_test(test_finite_difference),
        cmocka_unit_test(test_packing_is_independent),
        cmocka_unit_test(test_recompute_same_gradients),
        cmocka_unit_test(test_unit_windows),
        cmocka_unit_test(test_cached_forward_matches),
        cmocka_unit_test(test_save_load_roundtrip),
        cmocka_unit_test(test_sharded_checkpoint),
        cmocka_unit_test(test_refuses_bad_configs),
        cmocka_unit_test(test_load_error_messages),
        cmocka_unit_test(test_refuses_bad_batches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
