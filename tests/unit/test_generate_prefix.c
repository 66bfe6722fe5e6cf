/* tests/unit/test_generate_prefix.c: prefix sharing in the rollout engine (model/generate.h "Prefix sharing") on
 * the small random checkpoints of tests/data/model (made by tests/reference/make_model_fixtures.py):
 *   - batch-invariant mode: sharing on and off give bitwise the same tokens and log-probs for groups of n 1, 2, 8,
 *     and the counters show exactly (n-1)(P-1) of the n P prompt positions copied (the leader computes P rows,
 *     each follower one);
 *   - the same with a tiny KV cache (preemptions; re-admitted sequences share their prompt part again), with
 *     chunked prefill (prompt longer than max_batch_tokens: followers park while the leader prefills), and with
 *     the leader's tag cancelled mid-prefill (its followers under another tag go on and finish, bitwise as alone);
 *   - random mixes of prompts with common prefixes of every length, random cache/batch/block limits and random
 *     cancellations: sharing on == off, bitwise, every block returned;
 *   - default mode: log-probs with sharing equal model_forward's (dapo-logprobs) to 1e-4. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/log.h"
#include "model/generate.h"
#include "model/model.h"

static const char *MODELS[] = { "qwen2_gqa", "qwen2_tied", "qwen3", "llama3" };
#define NMODELS 4
#define MAXSEQ 48
#define MAXTOK 64

static Model *load_model(const char *name) {
    char p[4096], err[ERR_LEN];
    const char *root = getenv("DAPO_ROOT");
    snprintf(p, sizeof p, "%s/tests/data/model/%s", root && *root ? root : ".", name);
    ModelOptions o = { .max_tokens = 128 };
    Model *m = model_load(p, &o, err);
    if (!m) fail_msg("%s: %s", p, err);
    return m;
}

static uint32_t lcg(uint32_t *x) {
    *x = *x * 1103515245u + 12345u;
    return *x >> 8;
}

/* Up to MAXSEQ requests with their prompts. */
typedef struct {
    int32_t    prompt[MAXSEQ][80];
    GenRequest r[MAXSEQ];
    int        n;
} Reqs;

/* Appends a group: n samples of one prompt of P tokens (tokens from `salt`, first token distinct per salt so
 * groups share nothing), tag and group id `g`. */
static void add_group(Reqs *q, int V, int g, int n, int P, int max_tokens, uint32_t salt) {
    uint32_t x = salt * 2654435761u + 1;
    int32_t p[80];
    for (int k = 0; k < P; k++) p[k] = (int32_t)(lcg(&x) % (uint32_t)V);
    p[0] = (int32_t)(10 + g % (V - 10));
    for (int i = 0; i < n; i++) {
        assert_true(q->n < MAXSEQ);
        memcpy(q->prompt[q->n], p, (size_t)P * sizeof(int32_t));
        q->r[q->n] = (GenRequest){ .tag = (uint64_t)g, .seed = 31, .group_id = 500 + (uint64_t)g, .sample = (uint32_t)i,
                                   .prompt = q->prompt[q->n], .n_prompt = P, .max_tokens = max_tokens,
                                   .sp = { .temperature = 1.0f, .top_p = 1.0f } };
        q->n++;
    }
}

typedef struct {
    int32_t   tok[MAXSEQ][MAXTOK];
    float     lp[MAXSEQ][MAXTOK];
    int       n[MAXSEQ];
    GenFinish fin[MAXSEQ];
    int       got[MAXSEQ];   /* 1 when a result came back */
    GenStats  st;
} Outs;

/* Takes every finished result into o (by request index = id - 1: ids count from 1 per engine). */
static void take_all(GenEngine *e, Outs *o) {
    GenResult res;
    while (gen_engine_take(e, &res)) {
        int i = (int)res.id - 1;
        assert_true(i >= 0 && i < MAXSEQ && res.n <= MAXTOK);
        assert_false(o->got[i]);
        memcpy(o->tok[i], res.tokens, (size_t)res.n * sizeof(int32_t));
        memcpy(o->lp[i], res.logprobs, (size_t)res.n * sizeof(float));
        o->n[i] = res.n;
        o->fin[i] = res.finish;
        o->got[i] = 1;
        gen_result_free(&res);
    }
}

/* Runs all requests of q to completion; cancel_tag >= 0 is cancelled after cancel_after steps. */
static void run_engine(Model *m, const GenOptions *go, const Reqs *q, int cancel_after, long cancel_tag, Outs *o) {
    char err[ERR_LEN];
    memset(o, 0, sizeof *o);
    GenEngine *e = gen_engine_new(m, go, err);
    if (!e) fail_msg("%s", err);
    for (int j = 0; j < q->n; j++) {
        uint64_t id;
        if (gen_engine_add(e, &q->r[j], &id, err)) fail_msg("%s", err);
        assert_int_equal(id, j + 1);
    }
    int rc, steps = 0;
    while ((rc = gen_engine_step(e, err)) > 0) {
        assert_true(++steps < 100000);
        take_all(e, o);
        if (steps == cancel_after && cancel_tag >= 0) gen_engine_cancel(e, (uint64_t)cancel_tag);
    }
    if (rc < 0) fail_msg("%s", err);
    take_all(e, o);
    gen_engine_stats(e, &o->st);
    assert_int_equal(o->st.free_blocks, o->st.n_blocks);   /* every block came back */
    assert_int_equal(o->st.running + o->st.waiting + o->st.finished, 0);
    gen_engine_free(e);
}

/* Every result of requests not under skip_tag is present in both and bitwise equal. */
static void assert_same(const Reqs *q, const Outs *a, const Outs *b, long skip_tag) {
    for (int i = 0; i < q->n; i++) {
        if ((long)q->r[i].tag == skip_tag) continue;
        assert_true(a->got[i] && b->got[i]);
        assert_int_equal(a->n[i], b->n[i]);
        assert_int_equal(a->fin[i], b->fin[i]);
        assert_memory_equal(a->tok[i], b->tok[i], (size_t)a->n[i] * sizeof(int32_t));
        assert_memory_equal(a->lp[i], b->lp[i], (size_t)a->n[i] * sizeof(float));   /* bitwise */
    }
}

static void test_groups_on_off_bitwise_and_counters(void **state) {
    (void)state;
    static const int NS[] = { 1, 2, 8 };
    for (int mi = 0; mi < NMODELS; mi++) {
        Model *m = load_model(MODELS[mi]);
        for (int k = 0; k < 3; k++) {
            int n = NS[k], P = 13;
            Reqs q = { .n = 0 };
            add_group(&q, model_config(m)->vocab, 0, n, P, 24, 7 + (uint32_t)k);
            GenOptions go = { .max_num_seqs = 16, .kv_cache_tokens = 4096, .max_batch_tokens = 64, .block_tokens = 4,
                              .batch_invariant = 1 };
            Outs on, off;
            run_engine(m, &go, &q, 0, -1, &on);
            go.no_prefix_sharing = 1;
            run_engine(m, &go, &q, 0, -1, &off);
            assert_same(&q, &on, &off, -1);
            /* the leader computes all P prompt positions, each follower copies P-1 and computes its last one */
            assert_int_equal(on.st.prefill_shared, (long)(n - 1) * (P - 1));
            assert_int_equal(on.st.prefix_hits, n - 1);
            assert_int_equal(on.st.prefill_rows, P + (n - 1));
            assert_int_equal(on.st.prefix_parked, 0);       /* the copy happens in the leader's own step */
            assert_int_equal(off.st.prefill_shared, 0);
            assert_int_equal(off.st.prefill_rows, (long)n * P);
            assert_int_equal(on.st.sampled, off.st.sampled);
        }
        /* three groups of 8 at once: (n-1)/n of each group's prompt positions, nothing across groups */
        Reqs q = { .n = 0 };
        add_group(&q, model_config(m)->vocab, 1, 8, 9, 20, 100);
        add_group(&q, model_config(m)->vocab, 2, 8, 21, 20, 200);
        add_group(&q, model_config(m)->vocab, 3, 8, 30, 20, 300);
        GenOptions go = { .max_num_seqs = 24, .kv_cache_tokens = 4096, .max_batch_tokens = 128, .block_tokens = 8,
                          .batch_invariant = 1 };
        Outs on, off;
        run_engine(m, &go, &q, 0, -1, &on);
        go.no_prefix_sharing = 1;
        run_engine(m, &go, &q, 0, -1, &off);
        assert_same(&q, &on, &off, -1);
        assert_int_equal(on.st.prefill_shared, 7L * (8 + 20 + 29));
        assert_int_equal(on.st.prefill_rows + on.st.prefill_shared, off.st.prefill_rows);
        print_message("%s: 3 groups x 8: prompt positions computed %ld, copied %ld (of %ld)\n", MODELS[mi],
                      on.st.prefill_rows, on.st.prefill_shared, off.st.prefill_rows);
        model_free(m);
    }
}

/* Tiny cache: preemptions of leaders and followers; re-admitted sequences (prompt + sampled tokens) copy their
 * prompt part from a running sibling. Same bitwise responses as a big cache without sharing. */
static void test_tiny_cache_preemption(void **state) {
    (void)state;
    for (int mi = 0; mi < NMODELS; mi++) {
        Model *m = load_model(MODELS[mi]);
        Reqs q = { .n = 0 };
        add_group(&q, model_config(m)->vocab, 0, 8, 11, 48, 11);
        add_group(&q, model_config(m)->vocab, 1, 8, 17, 48, 12);
        for (int i = 0; i < q.n; i++) {
            q.r[i].stop_ids = NULL;
            q.r[i].ignore_eos = 1;                     /* every response is 48 tokens: long enough to preempt */
        }
        GenOptions big = { .max_num_seqs = 16, .kv_cache_tokens = 8192, .max_batch_tokens = 16, .block_tokens = 4,
                           .batch_invariant = 1, .no_prefix_sharing = 1 };
        GenOptions tiny = { .max_num_seqs = 16, .kv_cache_tokens = 160, .max_batch_tokens = 16, .block_tokens = 4,
                            .batch_invariant = 1 };
        Outs ref, on, off;
        run_engine(m, &big, &q, 0, -1, &ref);
        run_engine(m, &tiny, &q, 0, -1, &on);
        tiny.no_prefix_sharing = 1;
        run_engine(m, &tiny, &q, 0, -1, &off);
        assert_int_equal(ref.st.preemptions, 0);
        assert_true(on.st.preemptions > 0);
        assert_true(off.st.preemptions > 0);
        assert_same(&q, &ref, &on, -1);
        assert_same(&q, &ref, &off, -1);
        /* more copies than the 14 first-admission followers: re-admitted sequences copied their prompt too */
        assert_true(on.st.prefix_hits > 14);
        assert_true(on.st.prefill_rows < off.st.prefill_rows);
        print_message("%s: tiny cache: %ld / %ld preemptions (on / off), %ld prefix copies, prefill rows %ld / %ld\n",
                      MODELS[mi], on.st.preemptions, off.st.preemptions, on.st.prefix_hits, on.st.prefill_rows,
                      off.st.prefill_rows);
        model_free(m);
    }
}

/* Prompt longer than max_batch_tokens: the leader prefills in chunks while its followers park, then they copy. */
static void test_chunked_prefill(void **state) {
    (void)state;
    for (int mi = 0; mi < NMODELS; mi++) {
        Model *m = load_model(MODELS[mi]);
        Reqs q = { .n = 0 };
        int P = 45;
        add_group(&q, model_config(m)->vocab, 0, 8, P, 16, 21);
        add_group(&q, model_config(m)->vocab, 1, 2, 37, 16, 22);
        GenOptions go = { .max_num_seqs = 10, .kv_cache_tokens = 4096, .max_batch_tokens = 10, .block_tokens = 8,
                          .batch_invariant = 1 };
        Outs on, off;
        run_engine(m, &go, &q, 0, -1, &on);
        go.no_prefix_sharing = 1;
        run_engine(m, &go, &q, 0, -1, &off);
        assert_same(&q, &on, &off, -1);
        assert_true(on.st.prefix_parked > 0);
        assert_int_equal(on.st.prefill_shared, 7L * (P - 1) + 1L * 36);
        assert_int_equal(on.st.prefix_hits, 8);
        assert_true(on.st.steps < off.st.steps);
        model_free(m);
    }
}

/* Two groups with the same prompt under different tags; the first tag (the leader's) is cancelled while the
 * leader is still prefilling and the others are parked: the second group finishes, bitwise as if alone. (A donor
 * preempted while its followers park takes the same path: nothing of the donor is kept across steps.) */
static void test_cancel_leader_mid_prefill(void **state) {
    (void)state;
    for (int mi = 0; mi < NMODELS; mi++) {
        Model *m = load_model(MODELS[mi]);
        Reqs q = { .n = 0 }, alone = { .n = 0 };
        add_group(&q, model_config(m)->vocab, 0, 2, 40, 16, 33);
        add_group(&q, model_config(m)->vocab, 0, 3, 40, 16, 33);   /* same prompt and group id ... */
        for (int i = 2; i < 5; i++) q.r[i].tag = 9;       /* ... as a second attempt under another tag */
        add_group(&alone, model_config(m)->vocab, 0, 3, 40, 16, 33);
        for (int i = 0; i < 3; i++) alone.r[i].tag = 9;
        GenOptions go = { .max_num_seqs = 8, .kv_cache_tokens = 2048, .max_batch_tokens = 8, .block_tokens = 4,
                          .batch_invariant = 1 };
        for (int cancel_after = 1; cancel_after <= 6; cancel_after++) {
            Outs on, ref;
            run_engine(m, &go, &q, cancel_after, 0, &on);
            GenOptions g1 = go;
            g1.no_prefix_sharing = 1;
            run_engine(m, &g1, &alone, 0, -1, &ref);
            for (int i = 0; i < 2; i++) assert_false(on.got[i]);
            for (int i = 0; i < 3; i++) {                 /* request 2 + i of q is request i of alone */
                assert_true(on.got[2 + i]);
                assert_int_equal(on.n[2 + i], ref.n[i]);
                assert_memory_equal(on.tok[2 + i], ref.tok[i], (size_t)ref.n[i] * sizeof(int32_t));
                assert_memory_equal(on.lp[2 + i], ref.lp[i], (size_t)ref.n[i] * sizeof(float));
            }
            assert_true(on.st.prefix_parked > 0);
            assert_true(on.st.prefix_hits >= 2);          /* tag 9's sequences still shared among themselves */
        }
        model_free(m);
    }
}

/* Random prompts over a 3-token alphabet (common prefixes of every length, identical prompts, prompts that are
 * prefixes of others), random engine limits, random cancellations: sharing on == off, bitwise. */
static void test_random_mixes(void **state) {
    (void)state;
    uint32_t x = 2024;
    for (int it = 0; it < 24; it++) {
        Model *m = load_model(MODELS[it % NMODELS]);
        Reqs q = { .n = 0 };
        int nseq = 2 + (int)(lcg(&x) % 20);
        for (int i = 0; i < nseq; i++) {
            int P = 1 + (int)(lcg(&x) % 30);
            if (i > 0 && lcg(&x) % 3 == 0) {              /* a copy of an earlier prompt, maybe cut or extended */
                int j = (int)(lcg(&x) % (uint32_t)i);
                int Pj = q.r[j].n_prompt;
                memcpy(q.prompt[i], q.prompt[j], (size_t)Pj * sizeof(int32_t));
                for (int k = Pj; k < P; k++) q.prompt[i][k] = 20 + (int32_t)(lcg(&x) % 3);
                if (lcg(&x) % 2) P = Pj;
            } else {
                for (int k = 0; k < P; k++) q.prompt[i][k] = 20 + (int32_t)(lcg(&x) % 3);
            }
            q.r[i] = (GenRequest){ .tag = lcg(&x) % 4, .seed = 5, .group_id = lcg(&x) % 3, .sample = (uint32_t)i,
                                   .prompt = q.prompt[i], .n_prompt = P, .max_tokens = 1 + (int)(lcg(&x) % 40),
                                   .sp = { .temperature = 1.0f, .top_p = 1.0f }, .ignore_eos = !(it % 2) };
            q.n++;
        }
        GenOptions go = { .max_num_seqs = 1 + (int)(lcg(&x) % 12), .kv_cache_tokens = 72 + lcg(&x) % 400,
                          .max_batch_tokens = 1 + (int)(lcg(&x) % 40), .block_tokens = 1 + (int)(lcg(&x) % 9),
                          .batch_invariant = 1 };
        int cancel_after = (int)(lcg(&x) % 12);
        long cancel_tag = lcg(&x) % 2 ? (long)(lcg(&x) % 4) : -1;
        Outs on, off;
        run_engine(m, &go, &q, cancel_after, cancel_tag, &on);
        go.no_prefix_sharing = 1;
        run_engine(m, &go, &q, 0, -1, &off);
        assert_same(&q, &on, &off, cancel_after > 0 ? cancel_tag : -1);
        model_free(m);
    }
}

/* Default mode: rollout log-probs with sharing == model_forward's on the same sequences (dapo-logprobs) to 1e-4;
 * the leaders' prefill (3 x 40 rows in one step) goes through sgemm, the followers copy it. */
static void test_default_mode_logprobs(void **state) {
    (void)state;
    for (int mi = 0; mi < NMODELS; mi++) {
        Model *m = load_model(MODELS[mi]);
        Reqs q = { .n = 0 };
        for (int g = 0; g < 3; g++) add_group(&q, model_config(m)->vocab, g, 8, 40, 24, 40 + (uint32_t)g);
        GenOptions go = { .max_num_seqs = 24, .kv_cache_tokens = 4096, .max_batch_tokens = 256 };
        Outs o;
        run_engine(m, &go, &q, 0, -1, &o);
        assert_int_equal(o.st.prefill_shared, 3L * 7 * 39);
        char err[ERR_LEN];
        double worst = 0;
        for (int i = 0; i < q.n; i++) {
            int P = q.r[i].n_prompt, n = P + o.n[i];
            int32_t tok[128], tgt[128], cu[2] = { 0, n };
            float logp[128];
            memcpy(tok, q.prompt[i], (size_t)P * sizeof(int32_t));
            memcpy(tok + P, o.tok[i], (size_t)o.n[i] * sizeof(int32_t));
            for (int k = 0; k < n; k++) tgt[k] = k + 1 < n ? tok[k + 1] : -1;
            ModelBatch b = { .n_tokens = n, .n_seqs = 1, .tokens = tok, .targets = tgt, .cu_seqlens = cu,
                             .temperature = 1.0f };
            assert_int_equal(model_forward(m, &b, logp, NULL, err), 0);
            for (int t = 0; t < o.n[i]; t++) {
                double d = fabs((double)o.lp[i][t] - logp[P - 1 + t]);
                if (d > worst) worst = d;
            }
        }
        print_message("%s: default mode with sharing: max |rollout - model_forward| log-prob = %.2e\n", MODELS[mi],
                      worst);
        assert_true(worst <= 1e-4);
        model_free(m);
    }
}

int main(void) {
    log_init("test_generate_prefix", LL_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_groups_on_off_bitwise_and_counters),
        cmocka_unit_test(test_tiny_cache_preemption),
        cmocka_unit_test(test_chunked_prefill),
        cmocka_unit_test(test_cancel_leader_mid_prefill),
        cmocka_unit_test(test_random_mixes),
        cmocka_unit_test(test_default_mode_logprobs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
