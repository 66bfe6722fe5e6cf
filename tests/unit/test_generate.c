/* tests/unit/test_generate.c: the rollout engine (model/generate.h) on the small random checkpoints of
 * tests/data/model (made by tests/reference/make_model_fixtures.py; Qwen2 GQA, Qwen2 tied, Qwen3, Llama-3):
 *   - batch-invariant mode: cached, batched, chunked-prefill decoding gives bitwise the same tokens and
 *     log-probs as uncached one-at-a-time decoding (a fresh full prefill for every token);
 *   - the same seed split over 1 or 3 engines ("workers") with different batch limits gives identical responses;
 *   - a tiny KV cache (forcing preemption + recompute) gives the same responses as a large one;
 *   - default mode: rollout log-probs equal model_forward's (what dapo-logprobs prints) to 1e-4;
 *   - stop ids / EOS / max_tokens finish reasons, cancel frees the cache, hold_new, bad requests refused;
 *   - partial rollouts (issue 42): weights swapped under running sequences (gen_engine_preempt_all): each token carries
 *     the version it was sampled with, the tokens before the swap are the old weights' (as an unbroken run's), those
 *     after it have the new weights' log-probs of the whole context (K/V recomputed) to 1e-4; keeping the old K/V
 *     instead gives a mismatch, measured and printed. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/dtype.h"
#include "core/log.h"
#include "model/generate.h"
#include "model/model.h"

static const char *MODELS[] = { "qwen2_gqa", "qwen2_tied", "qwen3", "llama3" };
#define NMODELS 4

static Model *load_model(const char *name, int max_tokens) {
    char p[4096], err[ERR_LEN];
    const char *root = getenv("DAPO_ROOT");
    snprintf(p, sizeof p, "%s/tests/data/model/%s", root && *root ? root : ".", name);
    ModelOptions o = { .max_tokens = max_tokens };
    Model *m = model_load(p, &o, err);
    if (!m) fail_msg("%s: %s", p, err);
    return m;
}

#define NREQ 9
typedef struct {
    int32_t prompt[NREQ][40];
    int     n_prompt[NREQ];
    GenRequest r[NREQ];
} Reqs;

/* 3 groups x 3 samples, prompts of 3..31 tokens, a mix of sampling settings */
static void make_reqs(Reqs *q, int V, int max_tokens) {
    uint32_t x = 12345;
    for (int i = 0; i < NREQ; i++) {
        int g = i / 3;
        q->n_prompt[i] = 3 + (g * 11 + (i % 3) * 3) % 29;
        for (int k = 0; k < q->n_prompt[i]; k++) {
            x = x * 1103515245u + 12345u;
            q->prompt[i][k] = (int32_t)((x >> 8) % (uint32_t)V);
        }
        if (i % 3) memcpy(q->prompt[i], q->prompt[i - 1], sizeof q->prompt[i]), q->n_prompt[i] = q->n_prompt[i - 1];
        SampleParams sp = { .temperature = 1.0f, .top_p = 1.0f };
        if (g == 1) sp = (SampleParams){ .temperature = 0.7f, .top_p = 0.9f, .top_k = 20 };
        if (g == 2 && i % 3 == 2) sp = (SampleParams){ .temperature = 1.0f, .top_p = 1.0f, .greedy = 1 };
        q->r[i] = (GenRequest){ .tag = (uint64_t)g, .seed = 77, .group_id = 1000 + (uint64_t)g, .sample = (uint32_t)(i % 3),
                                .prompt = q->prompt[i], .n_prompt = q->n_prompt[i], .max_tokens = max_tokens, .sp = sp };
    }
}

typedef struct {
    int32_t tok[NREQ][64];
    float   lp[NREQ][64];
    int     n[NREQ];
    GenFinish fin[NREQ];
    long    preemptions;
} Outs;

/* Runs requests idx[0..k) on an engine; results land in o by request index. */
static void run_engine(Model *m, const GenOptions *go, const Reqs *q, const int *idx, int k, Outs *o) {
    char err[ERR_LEN];
    GenEngine *e = gen_engine_new(m, go, err);
    if (!e) fail_msg("%s", err);
    uint64_t ids[NREQ];
    for (int j = 0; j < k; j++) {
        if (gen_engine_add(e, &q->r[idx[j]], &ids[j], err)) fail_msg("%s", err);
    }
    int rc, guard = 0;
    while ((rc = gen_engine_step(e, err)) > 0) assert_true(++guard < 100000);
    if (rc < 0) fail_msg("%s", err);
    GenResult res;
    int got = 0;
    while (gen_engine_take(e, &res)) {
        int j = 0;
        while (j < k && ids[j] != res.id) j++;
        assert_true(j < k);
        int i = idx[j];
        assert_true(res.n <= 64);
        memcpy(o->tok[i], res.tokens, (size_t)res.n * sizeof(int32_t));
        memcpy(o->lp[i], res.logprobs, (size_t)res.n * sizeof(float));
        o->n[i] = res.n;
        o->fin[i] = res.finish;
        gen_result_free(&res);
        got++;
    }
    assert_int_equal(got, k);
    GenStats st;
    gen_engine_stats(e, &st);
    assert_int_equal(st.free_blocks, st.n_blocks);       /* every block came back */
    o->preemptions = st.preemptions;
    gen_engine_free(e);
}

static void assert_same(const Outs *a, const Outs *b, const int *idx, int k) {
    for (int j = 0; j < k; j++) {
        int i = idx[j];
        assert_int_equal(a->n[i], b->n[i]);
        assert_int_equal(a->fin[i], b->fin[i]);
        assert_memory_equal(a->tok[i], b->tok[i], (size_t)a->n[i] * sizeof(int32_t));
        assert_memory_equal(a->lp[i], b->lp[i], (size_t)a->n[i] * sizeof(float));   /* bitwise */
    }
}

static const int ALL[NREQ] = { 0, 1, 2, 3, 4, 5, 6, 7, 8 };

static void test_cached_batched_equals_uncached(void **state) {
    (void)state;
    for (int mi = 0; mi < NMODELS; mi++) {
        Model *m = load_model(MODELS[mi], 8);
        Reqs q;
        make_reqs(&q, model_config(m)->vocab, 24);
        Outs batched = { 0 }, ref = { 0 };
        /* chunked prefill (7 rows per step), all sequences at once */
        GenOptions go = { .max_num_seqs = NREQ, .kv_cache_tokens = 4096, .max_batch_tokens = 7, .block_tokens = 4,
                          .batch_invariant = 1 };
        run_engine(m, &go, &q, ALL, NREQ, &batched);
        /* uncached: each token from a fresh engine that prefills the whole context in one step */
        char err[ERR_LEN];
        for (int i = 0; i < NREQ; i++) {
            int32_t ctx[128];
            int n = q.n_prompt[i];
            memcpy(ctx, q.prompt[i], (size_t)n * sizeof(int32_t));
            for (int t = 0; t < q.r[i].max_tokens; t++) {
                GenOptions g1 = { .max_num_seqs = 1, .kv_cache_tokens = 256, .max_batch_tokens = 128,
                                  .batch_invariant = 1 };
                GenEngine *e = gen_engine_new(m, &g1, err);
                assert_non_null(e);
                GenRequest r = q.r[i];
                r.prompt = ctx;
                r.n_prompt = n;
                r.max_tokens = 1;
                r.rng_offset = (uint32_t)t;
                assert_int_equal(gen_engine_add(e, &r, NULL, err), 0);
                assert_int_equal(gen_engine_step(e, err), 0);
                GenResult res;
                assert_int_equal(gen_engine_take(e, &res), 1);
                assert_int_equal(res.n, 1);
                ref.tok[i][t] = res.tokens[0];
                ref.lp[i][t] = res.logprobs[0];
                ref.n[i] = t + 1;
                ref.fin[i] = res.finish == GEN_FINISH_STOP ? GEN_FINISH_STOP : GEN_FINISH_LENGTH;
                ctx[n++] = res.tokens[0];
                gen_result_free(&res);
                gen_engine_free(e);
                if (ref.fin[i] == GEN_FINISH_STOP) break;
            }
        }
        assert_same(&batched, &ref, ALL, NREQ);
        model_free(m);
    }
}

static void test_one_vs_three_workers(void **state) {
    (void)state;
    for (int mi = 0; mi < NMODELS; mi++) {
        Model *m = load_model(MODELS[mi], 8);
        Reqs q;
        make_reqs(&q, model_config(m)->vocab, 40);
        Outs one = { 0 }, three = { 0 };
        GenOptions go = { .max_num_seqs = 16, .kv_cache_tokens = 8192, .max_batch_tokens = 64, .batch_invariant = 1 };
        run_engine(m, &go, &q, ALL, NREQ, &one);
        /* the coordinator hands groups to workers by credit: here worker k gets a different mix */
        const int w0[] = { 0, 4, 8 }, w1[] = { 1, 2, 5, 6 }, w2[] = { 3, 7 };
        GenOptions g0 = { .max_num_seqs = 2, .kv_cache_tokens = 512, .max_batch_tokens = 5, .batch_invariant = 1 };
        GenOptions g1 = { .max_num_seqs = 4, .kv_cache_tokens = 1024, .max_batch_tokens = 33, .block_tokens = 8,
                          .batch_invariant = 1 };
        GenOptions g2 = { .max_num_seqs = 1, .kv_cache_tokens = 128, .max_batch_tokens = 1, .batch_invariant = 1 };
        run_engine(m, &g0, &q, w0, 3, &three);
        run_engine(m, &g1, &q, w1, 4, &three);
        run_engine(m, &g2, &q, w2, 2, &three);
        assert_same(&one, &three, ALL, NREQ);
        model_free(m);
    }
}

static void test_preemption_same_as_large_cache(void **state) {
    (void)state;
    for (int mi = 0; mi < NMODELS; mi++) {
        Model *m = load_model(MODELS[mi], 8);
        Reqs q;
        make_reqs(&q, model_config(m)->vocab, 48);
        for (int i = 0; i < NREQ; i++) q.r[i].sp.greedy = 0;   /* long responses: no early stops matter */
        Outs big = { 0 }, tiny = { 0 };
        GenOptions gb = { .max_num_seqs = NREQ, .kv_cache_tokens = 8192, .max_batch_tokens = 16, .block_tokens = 4,
                          .batch_invariant = 1 };
        run_engine(m, &gb, &q, ALL, NREQ, &big);
        /* room for the longest sequence (31 + 48 = 79 positions) and little more */
        GenOptions gt = { .max_num_seqs = NREQ, .kv_cache_tokens = 100, .max_batch_tokens = 16, .block_tokens = 4,
                          .batch_invariant = 1 };
        run_engine(m, &gt, &q, ALL, NREQ, &tiny);
        assert_true(tiny.preemptions > 0);
        assert_int_equal(big.preemptions, 0);
        assert_same(&big, &tiny, ALL, NREQ);
        model_free(m);
    }
}

/* Default mode: rollout log-probs == model_forward's on the same sequences (dapo-logprobs) to 1e-4. */
static void test_logprobs_match_model_forward(void **state) {
    (void)state;
    for (int mi = 0; mi < NMODELS; mi++) {
        Model *m = load_model(MODELS[mi], 128);
        Reqs q;
        make_reqs(&q, model_config(m)->vocab, 32);
        Outs o = { 0 };
        GenOptions go = { .max_num_seqs = 4, .kv_cache_tokens = 2048, .max_batch_tokens = 9 };
        run_engine(m, &go, &q, ALL, NREQ, &o);
        char err[ERR_LEN];
        double worst = 0;
        for (int i = 0; i < NREQ; i++) {
            int n = q.n_prompt[i] + o.n[i];
            int32_t tok[128], tgt[128], cu[2] = { 0, n };
            float logp[128];
            memcpy(tok, q.prompt[i], (size_t)q.n_prompt[i] * sizeof(int32_t));
            memcpy(tok + q.n_prompt[i], o.tok[i], (size_t)o.n[i] * sizeof(int32_t));
            for (int k = 0; k < n; k++) tgt[k] = k + 1 < n ? tok[k + 1] : -1;
            const SampleParams *sp = &q.r[i].sp;
            ModelBatch b = { .n_tokens = n, .n_seqs = 1, .tokens = tok, .targets = tgt, .cu_seqlens = cu,
                             .temperature = sp->greedy || sp->temperature <= 0 ? 1.0f : sp->temperature };
            assert_int_equal(model_forward(m, &b, logp, NULL, err), 0);
            for (int t = 0; t < o.n[i]; t++) {
                double d = fabs((double)o.lp[i][t] - logp[q.n_prompt[i] - 1 + t]);
                if (d > worst) worst = d;
                assert_true(o.lp[i][t] <= 0.0f);
            }
        }
        print_message("%s: max |rollout - model_forward| log-prob = %.2e\n", MODELS[mi], worst);
        assert_true(worst <= 1e-4);
        model_free(m);
    }
}

/* The log-probs model_forward gives the response tokens of (prompt, toks[0..n)) at temperature 1. */
static void forward_logprobs(Model *m, const int32_t *prompt, int np, const int32_t *toks, int n, float *out) {
    int32_t tok[128], tgt[128], cu[2] = {0, np + n};
    float logp[128];
    char err[ERR_LEN];
    memcpy(tok, prompt, (size_t)np * sizeof(int32_t));
    memcpy(tok + np, toks, (size_t)n * sizeof(int32_t));
    for (int k = 0; k < np + n; k++) tgt[k] = k + 1 < np + n ? tok[k + 1] : -1;
    ModelBatch b = {.n_tokens = np + n, .n_seqs = 1, .tokens = tok, .targets = tgt, .cu_seqlens = cu, .temperature = 1};
    assert_int_equal(model_forward(m, &b, logp, NULL, err), 0);
    for (int t = 0; t < n; t++) out[t] = logp[np - 1 + t];
}

/* Runs the 9 requests for `before` steps on version 0, swaps in perturbed weights as version 1 (recomputing the K/V of
 * the running sequences unless keep_kv) and finishes them; returns the largest |log-prob - model_forward's| over the
 * tokens sampled after the swap, checking everything else exactly. */
static double run_partial(Model *m, const Reqs *q, int before, int keep_kv, const Outs *unbroken, int *spanning) {
    char err[ERR_LEN];
    GenOptions go = {.max_num_seqs = NREQ, .kv_cache_tokens = 4096, .max_batch_tokens = 16};
    GenEngine *e = gen_engine_new(m, &go, err);
    if (!e) fail_msg("%s", err);
    uint64_t ids[NREQ];
    for (int i = 0; i < NREQ; i++) if (gen_engine_add(e, &q->r[i], &ids[i], err)) fail_msg("%s", err);
    for (int s = 0; s < before; s++) assert_true(gen_engine_step(e, err) >= 0);
    const ModelConfig *c = model_config(m);
    const ModelWeights *w = model_views(m, MODEL_PARAMS);
    if (!keep_kv) assert_true(gen_engine_preempt_all(e) > 0);
    size_t nwd = (size_t)c->hidden * (size_t)c->inter;
    float *saved = malloc((size_t)c->n_layers * nwd * sizeof(float));
    for (int l = 0; l < c->n_layers; l++) {                 /* version 1: every down_proj scaled */
        memcpy(saved + (size_t)l * nwd, w->layer[l].wd, nwd * sizeof(float));
        for (size_t k = 0; k < nwd; k++) w->layer[l].wd[k] *= 1.5f;
    }
    gen_engine_reload_weights(e);
    gen_engine_set_version(e, 1);
    int rc, guard = 0;
    while ((rc = gen_engine_step(e, err)) > 0) assert_true(++guard < 100000);
    assert_true(rc == 0);
    double worst = 0;
    GenResult r;
    *spanning = 0;
    while (gen_engine_take(e, &r)) {
        int i = 0;
        while (ids[i] != r.id) i++;
        int k0 = 0;                                          /* tokens of version 0: a prefix of the unbroken run's */
        while (k0 < r.n && r.versions[k0] == 0) k0++;
        for (int k = k0; k < r.n; k++) assert_int_equal(r.versions[k], 1);
        assert_true(k0 <= unbroken->n[i]);
        assert_memory_equal(r.tokens, unbroken->tok[i], (size_t)k0 * sizeof(int32_t));
        assert_memory_equal(r.logprobs, unbroken->lp[i], (size_t)k0 * sizeof(float));
        *spanning += k0 > 0 && k0 < r.n;
        float lp[64];
        forward_logprobs(m, q->prompt[i], q->n_prompt[i], r.tokens, r.n, lp);   /* the new weights, whole context */
        for (int k = k0; k < r.n; k++) worst = fmax(worst, fabs((double)r.logprobs[k] - lp[k]));
        gen_result_free(&r);
    }
    for (int l = 0; l < c->n_layers; l++)                  /* back to version 0, exactly */
        memcpy(w->layer[l].wd, saved + (size_t)l * nwd, nwd * sizeof(float));
    free(saved);
    gen_engine_free(e);
    return worst;
}

static void test_partial_rollout_weight_swap(void **state) {
    (void)state;
    for (int mi = 0; mi < NMODELS; mi++) {
        Model *m = load_model(MODELS[mi], 128);
        Reqs q;
        make_reqs(&q, model_config(m)->vocab, 32);
        for (int i = 0; i < NREQ; i++) q.r[i].sp = (SampleParams){.temperature = 1.0f, .top_p = 1.0f};
        Outs unbroken = {0};
        GenOptions go = {.max_num_seqs = NREQ, .kv_cache_tokens = 4096, .max_batch_tokens = 16};
        run_engine(m, &go, &q, ALL, NREQ, &unbroken);
        int span_re = 0, span_keep = 0;
        double re = run_partial(m, &q, 12, 0, &unbroken, &span_re);
        double keep = run_partial(m, &q, 12, 1, &unbroken, &span_keep);
        print_message("%s: partial rollout, %d responses span versions 0 and 1; after the swap max |log-prob - "
                      "model_forward(new weights)| = %.2e recomputing the K/V, %.2e keeping the old K/V\n", MODELS[mi],
                      span_re, re, keep);
        assert_true(span_re > 0 && span_keep > 0);
        assert_true(re <= 1e-4);
        assert_true(keep > 1e-3);                            /* the old K/V is measurably not the new weights' */
        model_free(m);
    }
}

/* Rounds every parameter of m to bf16 in place (what rollout.dtype bfloat16 stores). */
static void round_bf16(Model *m) {
    float *p = model_host_slab(m, MODEL_PARAMS);
    for (long i = 0; i < model_n_params(m); i++) p[i] = dtype_bf16_to_f32(dtype_bf16_from_f32(p[i]));
    model_params_changed(m);
}

/* rollout.dtype bfloat16: the engine with bf16 weight storage gives bitwise the fp32 engine's tokens and log-probs on
 * the bf16-rounded weights (and leaves the model's parameters rounded). rollout.kv_cache_dtype bfloat16: responses are
 * still the same for one worker and three (batch invariance), and their log-probs stay within 2e-2 of model_forward's
 * (the rounding of K and V; measured and printed). */
static void test_bf16_weights_and_kv_cache(void **state) {
    (void)state;
    for (int mi = 0; mi < NMODELS; mi++) {
        Model *m = load_model(MODELS[mi], 128), *ref = load_model(MODELS[mi], 128);
        Reqs q;
        make_reqs(&q, model_config(m)->vocab, 24);
        Outs bf = { 0 }, want = { 0 };
        GenOptions go = { .max_num_seqs = NREQ, .kv_cache_tokens = 4096, .max_batch_tokens = 7, .block_tokens = 4,
                          .batch_invariant = 1, .weight_dtype = BK_BF16 };
        run_engine(m, &go, &q, ALL, NREQ, &bf);
        round_bf16(ref);
        assert_memory_equal(model_host_slab(m, MODEL_PARAMS), model_host_slab(ref, MODEL_PARAMS),
                            (size_t)model_n_params(m) * sizeof(float));
        go.weight_dtype = BK_F32;
        run_engine(ref, &go, &q, ALL, NREQ, &want);
        assert_same(&bf, &want, ALL, NREQ);
        /* the bf16 KV cache (16-token blocks: the AVX-512 attention kernel where the CPU has it) */
        Outs one = { 0 }, three = { 0 };
        GenOptions gk = { .max_num_seqs = 16, .kv_cache_tokens = 4096, .max_batch_tokens = 64, .batch_invariant = 1,
                          .kv_dtype = BK_BF16 };
        run_engine(ref, &gk, &q, ALL, NREQ, &one);
        const int w0[] = { 0, 4, 8 }, w1[] = { 1, 2, 5, 6 }, w2[] = { 3, 7 };
        GenOptions g0 = gk, g1 = gk, g2 = gk;
        g0.max_num_seqs = 2, g0.max_batch_tokens = 5;
        g1.max_num_seqs = 4, g1.block_tokens = 8, g1.max_batch_tokens = 33;
        g2.max_num_seqs = 1, g2.kv_cache_tokens = 128, g2.max_batch_tokens = 1;
        run_engine(ref, &g0, &q, w0, 3, &three);
        run_engine(ref, &g1, &q, w1, 4, &three);
        run_engine(ref, &g2, &q, w2, 2, &three);
        assert_same(&one, &three, ALL, NREQ);
        double worst = 0;
        for (int i = 0; i < NREQ; i++) {
            float lp[64];
            forward_logprobs(ref, q.prompt[i], q.n_prompt[i], one.tok[i], one.n[i], lp);
            SampleParams sp = q.r[i].sp;
            if (!sp.greedy && sp.temperature != 1.0f) continue;     /* forward_logprobs scores at temperature 1 */
            for (int t = 0; t < one.n[i]; t++) {
                assert_false(isnan(one.lp[i][t]));
                double d = fabs((double)one.lp[i][t] - lp[t]);
                worst = d > worst ? d : worst;
            }
        }
        print_message("%s: bf16 KV cache: max |log-prob - model_forward's| = %.2e\n", MODELS[mi], worst);
        assert_true(worst > 0 && worst <= 2e-2);
        model_free(m);
        model_free(ref);
    }
}

static void test_finish_reasons_and_stop(void **state) {
    (void)state;
    Model *m = load_model("qwen2_gqa", 8);     /* generation_config.json eos_token_id [2, 5] */
    assert_int_equal(model_config(m)->n_eos, 2);
    char err[ERR_LEN];
    int32_t prompt[] = { 7, 8, 9, 10 };
    GenOptions go = { .max_num_seqs = 4, .kv_cache_tokens = 512, .max_batch_tokens = 16 };
    GenEngine *e = gen_engine_new(m, &go, err);
    assert_non_null(e);
    GenRequest r = { .seed = 1, .group_id = 5, .prompt = prompt, .n_prompt = 4, .max_tokens = 6,
                     .sp = { .temperature = 1.0f, .top_p = 1.0f, .greedy = 1 } };
    assert_int_equal(gen_engine_add(e, &r, NULL, err), 0);
    while (gen_engine_step(e, err) > 0) {}
    GenResult a;
    assert_int_equal(gen_engine_take(e, &a), 1);
    assert_true(a.n >= 1 && a.n <= 6);
    /* every response ends either at max_tokens ("length") or at its first EOS/stop token ("stop") */
    for (int k = 0; k + 1 < a.n; k++) assert_true(a.tokens[k] != 2 && a.tokens[k] != 5);
    if (a.finish == GEN_FINISH_LENGTH) assert_int_equal(a.n, 6);
    else assert_true(a.tokens[a.n - 1] == 2 || a.tokens[a.n - 1] == 5);
    /* the greedy first token as a stop id: a 1-token response finished by "stop", stop token included */
    int32_t stop = a.tokens[0];
    r.stop_ids = &stop;
    r.n_stop = 1;
    r.max_tokens = 50;
    assert_int_equal(gen_engine_add(e, &r, NULL, err), 0);
    while (gen_engine_step(e, err) > 0) {}
    GenResult b;
    assert_int_equal(gen_engine_take(e, &b), 1);
    assert_int_equal(b.n, 1);
    assert_int_equal(b.tokens[0], stop);
    assert_int_equal(b.finish, GEN_FINISH_STOP);
    assert_string_equal(gen_finish_name(b.finish), "stop");
    assert_string_equal(gen_finish_name(GEN_FINISH_LENGTH), "length");
    assert_float_equal(b.logprobs[0], a.logprobs[0], 0);
    gen_result_free(&a);
    gen_result_free(&b);
    gen_engine_free(e);
    model_free(m);
}

static void test_cancel_and_hold(void **state) {
    (void)state;
    Model *m = load_model("qwen3", 8);
    char err[ERR_LEN];
    Reqs q;
    make_reqs(&q, model_config(m)->vocab, 40);
    GenOptions go = { .max_num_seqs = 4, .kv_cache_tokens = 400, .max_batch_tokens = 8 };
    GenEngine *e = gen_engine_new(m, &go, err);
    assert_non_null(e);
    for (int i = 0; i < NREQ; i++) assert_int_equal(gen_engine_add(e, &q.r[i], NULL, err), 0);
    for (int s = 0; s < 6; s++) assert_true(gen_engine_step(e, err) > 0);
    assert_int_equal(gen_engine_cancel(e, 1), 3);       /* group 1: 3 sequences, wherever they are */
    assert_int_equal(gen_engine_cancel(e, 1), 0);
    GenStats st;
    gen_engine_hold_new(e, 1);
    int guard = 0;
    for (;;) {                                          /* drain: only sequences already started go on */
        gen_engine_stats(e, &st);
        if (st.in_progress == 0) break;
        assert_true(gen_engine_step(e, err) >= 0);
        assert_true(++guard < 10000);
    }
    assert_true(st.waiting > 0);                        /* fresh ones held back */
    int before = st.waiting;
    assert_int_equal(gen_engine_step(e, err), before);  /* nothing admitted while held */
    gen_engine_hold_new(e, 0);
    while (gen_engine_step(e, err) > 0) {}
    GenResult r;
    int n = 0;
    while (gen_engine_take(e, &r)) {
        assert_true(r.tag != 1);
        n++;
        gen_result_free(&r);
    }
    assert_int_equal(n, 6);
    gen_engine_stats(e, &st);
    assert_int_equal(st.free_blocks, st.n_blocks);
    /* cancel of finished-but-not-taken results */
    assert_int_equal(gen_engine_add(e, &q.r[0], NULL, err), 0);
    while (gen_engine_step(e, err) > 0) {}
    assert_int_equal(gen_engine_cancel(e, 0), 1);
    assert_int_equal(gen_engine_take(e, &r), 0);
    gen_engine_free(e);
    model_free(m);
}

static void test_bad_requests(void **state) {
    (void)state;
    Model *m = load_model("llama3", 8);
    char err[ERR_LEN];
    GenOptions bad = { .max_num_seqs = 0, .kv_cache_tokens = 64 };
    assert_null(gen_engine_new(m, &bad, err));
    bad = (GenOptions){ .max_num_seqs = 2, .kv_cache_tokens = 3 };
    assert_null(gen_engine_new(m, &bad, err));
    GenOptions go = { .max_num_seqs = 2, .kv_cache_tokens = 64, .max_batch_tokens = 8 };
    GenEngine *e = gen_engine_new(m, &go, err);
    assert_non_null(e);
    int32_t p[70] = { 1, 2, -3 };
    GenRequest r = { .prompt = p, .n_prompt = 3, .max_tokens = 4, .sp = { .temperature = 1, .top_p = 1 } };
    assert_int_equal(gen_engine_add(e, &r, NULL, err), ERR_INVAL);
    p[2] = model_config(m)->vocab;
    assert_int_equal(gen_engine_add(e, &r, NULL, err), ERR_INVAL);
    p[2] = 3;
    r.max_tokens = 0;
    assert_int_equal(gen_engine_add(e, &r, NULL, err), ERR_INVAL);
    r.max_tokens = 62;                                  /* 3 + 62 > 64 positions */
    assert_int_equal(gen_engine_add(e, &r, NULL, err), ERR_TOO_BIG);
    r.max_tokens = 4;
    r.n_prompt = 0;
    assert_int_equal(gen_engine_add(e, &r, NULL, err), ERR_INVAL);
    r.n_prompt = 3;
    r.sp.top_p = 0;
    assert_int_equal(gen_engine_add(e, &r, NULL, err), ERR_INVAL);
    r.sp.top_p = 1;
    assert_int_equal(gen_engine_add(e, &r, NULL, err), 0);
    assert_int_equal(gen_engine_step(e, err), 1);
    gen_engine_free(e);                                 /* frees the unfinished sequence */
    assert_int_equal(gen_engine_step(NULL, err), ERR_INVAL);
    model_free(m);
}

int main(void) {
    log_init("test_generate", LL_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cached_batched_equals_uncached),
        cmocka_unit_test(test_one_vs_three_workers),
        cmocka_unit_test(test_preemption_same_as_large_cache),
        cmocka_unit_test(test_logprobs_match_model_forward),
        cmocka_unit_test(test_finish_reasons_and_stop),
        cmocka_unit_test(test_cancel_and_hold),
        cmocka_unit_test(test_bad_requests),
        cmocka_unit_test(test_partial_rollout_weight_swap),
        cmocka_unit_test(test_bf16_weights_and_kv_cache),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
