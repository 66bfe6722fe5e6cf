/* tests/fuzz/fuzz_dapo_algo.c: libFuzzer target for the pure algorithm functions fed arbitrary input — the
 * sampler (common/model/sample.c), the loss (common/dapo/loss.c) with rollout-correction weights and metrics
 * (rollout_corr.c), advantages, the group filter and the layout. Byte 0 picks the function; the rest is reinterpreted as floats / ints / parameters, NaN and inf
 * included. Besides crashes/UB/leaks (ASan+UBSan) it checks invariants: a successful sample returns a token
 * in range inside the kept set with a log-prob <= 0; loss metrics lie in [0, 1]; layouts cover every
 * sequence once with equal counts; micro-batches respect the token cap.
 * Not here: expected values (tests/unit/test_dapo_*.c, test_sample.c). */
// fuzz-sources: common/model/sample.c common/dapo/loss.c common/core/rng.c common/dapo/kl.c common/dapo/advantages.c common/dapo/estimators.c common/dapo/filter.c common/dapo/layout.c common/dapo/rollout_corr.c common/core/err.c common/core/log.c
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dapo/advantages.h"
#include "dapo/filter.h"
#include "dapo/layout.h"
#include "dapo/loss.h"
#include "dapo/rollout_corr.h"
#include "model/sample.h"

static void check(int cond) {
    if (!cond) abort();
}

static void fuzz_sample(const uint8_t *d, size_t n) {
    if (n < 16) return;
    SampleParams p;
    memcpy(&p.temperature, d, 4);
    memcpy(&p.top_p, d + 4, 4);
    p.top_k = (int)(int8_t)d[8];
    p.greedy = d[9] & 1;
    uint32_t ub;
    memcpy(&ub, d + 10, 4);
    double u = (double)ub / 4294967296.0;
    if (d[14] & 1) u = (double)ub;   /* sometimes out of range */
    size_t V = (n - 16) / 4;
    if (V == 0) return;
    float *lg = malloc(V * sizeof *lg);
    memcpy(lg, d + 16, V * 4);
    int32_t tok = -1, *kept = malloc(V * sizeof *kept);
    float lp = 0;
    int nk = 0;
    char err[ERR_LEN];
    void *scratch = (d[15] & 1) ? malloc(sample_scratch_bytes((int)V)) : NULL;
    if (sample_token(lg, (int)V, &p, u, scratch, &tok, &lp, err) == 0) {
        check(tok >= 0 && (size_t)tok < V);
        check(lp <= 1e-4f);   /* also catches NaN */
        check(lg[tok] != -INFINITY || p.greedy || p.temperature <= 0.0f);
        if (sample_support(lg, (int)V, &p, scratch, kept, &nk, err) == 0) {
            check(nk >= 1 && (size_t)nk <= V);
            int found = 0;
            for (int j = 0; j < nk; j++) found |= kept[j] == tok;
            check(found || isinf(p.temperature));
        }
    }
    free(scratch);
    free(kept);
    free(lg);
}

static void fuzz_loss(const uint8_t *d, size_t n) {
    if (n < 24) return;
    LossParams p;
    loss_params_default(&p);
    p.agg = (LossAggMode)(d[0] % 5);
    p.clip_ratio_c = 1.0 + d[1] / 16.0;
    p.clip_ratio_low = d[2] / 255.0;
    p.clip_ratio_high = d[3] / 100.0;
    p.dp_size = d[4] % 4;
    p.batch_num_tokens = d[5];
    p.global_batch_size = d[6] % 8;
    p.loss_scale_factor = d[7] % 32;
    p.entropy_coeff = d[8] / 1000.0;
    p.mode = (LossMode)((d[8] >> 4) % 11);          /* 10: an unknown mode, refused */
    p.clip_cov_ratio = (d[2] % 5) / 10.0;             /* 0: refused */
    p.clip_cov_lb = d[3] / 100.0 - 1.0;
    p.clip_cov_ub = d[4] / 50.0;
    p.kl_cov_ratio = (d[6] % 5) / 10.0;
    p.ppo_kl_coef = d[7] / 100.0;
    p.use_kl = d[9] & 8;
    p.kl = (KlPenalty){.kind = (KlKind)((d[9] >> 4) % 4), .straight_through = d[9] & 64};
    p.kl_coef = d[5] / 100.0;
    int n_seq = d[9] % 6;
    d += 10;
    n -= 10;
    size_t N = n / 13;   /* per token: logp, old, adv (4 bytes each), mask (1) */
    if (N > 200) N = 200;
    int off[8];
    off[0] = 0;
    for (int s = 1; s <= n_seq; s++) off[s] = (int)(s == n_seq ? N : (N * (size_t)s) / (size_t)n_seq);
    float lp[200], ol[200], ad[200], ent[200], g[200], ge[200], lt[200];
    uint8_t mk[200];
    for (size_t t = 0; t < N; t++) {
        memcpy(&lp[t], d + 13 * t, 4);
        memcpy(&ol[t], d + 13 * t + 4, 4);
        memcpy(&ad[t], d + 13 * t + 8, 4);
        mk[t] = d[13 * t + 12] & 1;
        ent[t] = (float)(d[13 * t + 12] >> 1);
    }
    float isw[200];
    char err[ERR_LEN];
    RolloutCorrStats rs;
    int have_w = n_seq > 0 && rollout_corr_is_weights(lp, ol, mk, off, n_seq, (RolloutIsLevel)(p.dp_size & 1),
                                                       1.0 + d[0] % 4, isw, err) == 0;
    if (have_w)
        for (size_t t = 0; t < N; t++) check(!(isw[t] > 4.0f) && !(isw[t] < 0.0f));
    if (n_seq > 0 && rollout_corr_metrics(lp, ol, mk, off, n_seq, &rs, err) == 0) check(rs.n_tokens >= 1);
    LossInput in = { lp, ol, ad, mk, ent, off, n_seq, have_w && (p.agg & 1) ? isw : NULL, ol, 0, 0 };
    LossStats st;
    if (loss_compute(&p, &in, lt, g, ge, &st, err) == 0) {
        check(st.pg_clipfrac >= 0 && st.pg_clipfrac <= 1);
        check(st.pg_clipfrac_lower >= 0 && st.pg_clipfrac_lower <= 1);
        check(st.n_tokens <= (double)N);
    }
}

static void fuzz_groups(const uint8_t *d, size_t n) {
    if (n < 4) return;
    int G = d[0] % 16, world = 1 + d[1] % 4, mini = 1 + d[2] % 5, cap = 1 + d[3], norm = d[0] & 16, est = d[1] >> 5;
    d += 4;
    n -= 4;
    int sizes[16], N = 0;
    for (int g = 0; g < G; g++) { sizes[g] = (g < (int)n ? d[g] % 5 : 1); N += sizes[g]; }
    int tok[80];
    float r[80], a[80];
    double v[80];
    for (int i = 0; i < N; i++) {
        uint8_t b = (size_t)(G + i) < n ? d[G + i] : 0;
        tok[i] = b;
        r[i] = (float)((int)b - 128) / 32.0f;
        v[i] = b & 1 ? 1.0 : (b & 2 ? NAN : 0.0);
    }
    char err[ERR_LEN];
    if (adv_grpo(r, sizes, G, norm, ADV_GRPO_EPS, a, err) == 0)
        for (int i = 0; i < N; i++) check(isfinite(a[i]));
    if (adv_compute((AdvEstimator)est, r, tok, sizes, G, norm, ADV_GRPO_EPS, a, err) == 0)   /* 7: refused */
        for (int i = 0; i < N; i++) check(isfinite(a[i]));
    uint8_t keep[16];
    FilterStats fs;
    if (filter_groups(v, sizes, G, keep, &fs, err) == 0) check(fs.n_kept + fs.n_filtered == G);
    Layout l;
    if (layout_build(sizes, G, tok, NULL, mini, world, &l, err) == 0) {
        int seen[80] = { 0 };
        for (int s = 0; s < l.n_mini * l.world; s++)
            for (int i = 0; i < l.shard[s].n_seq; i++) seen[l.shard[s].seq[i]]++;
        for (int i = 0; i < N; i++) check(seen[i] == 1);
        layout_free(&l);
    }
    LayoutMicro mb;
    if (layout_micro_dynamic(tok, N, cap, &mb, err) == 0) {
        for (int j = 0; j < mb.n_micro; j++) {
            int s = 0;
            for (int i = mb.off[j]; i < mb.off[j + 1]; i++) s += tok[mb.idx[i]];
            check(s <= cap);
        }
        layout_micro_free(&mb);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    switch (data[0] % 3) {
    case 0: fuzz_sample(data + 1, size - 1); break;
    case 1: fuzz_loss(data + 1, size - 1); break;
    default: fuzz_groups(data + 1, size - 1); break;
    }
    return 0;
}
