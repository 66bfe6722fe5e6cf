/* common/model/sample.c: temperature / top-k / top-p / greedy sampling of one logits row (semantics in
 * sample.h). Candidates are (scaled logit, token id) pairs under a strict total order (logit descending, id
 * ascending), so the kept set and the chosen token are deterministic whatever the partition pivots.
 * Not here: the RNG (core/rng.c), batched sampling, penalties. */
#include "model/sample.h"

#include "core/config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct { float x; int32_t i; } Cand;

static int cand_before(const Cand *a, const Cand *b) {
    return a->x > b->x || (a->x == b->x && a->i < b->i);
}

static int cand_cmp(const void *a, const void *b) {
    const Cand *x = a, *y = b;
    return cand_before(x, y) ? -1 : (cand_before(y, x) ? 1 : 0);
}

/* Reorders c[0..n) so c[0..k) are its k first elements in cand order (unsorted). 1 <= k <= n. */
static void cand_select(Cand *c, int n, int k) {
    int lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        Cand a = c[lo], b = c[mid], d = c[hi], piv;
        if (cand_before(&a, &b)) piv = cand_before(&b, &d) ? b : (cand_before(&a, &d) ? d : a);
        else                     piv = cand_before(&a, &d) ? a : (cand_before(&b, &d) ? d : b);
        int i = lo, j = hi;
        while (i <= j) {
            while (cand_before(&c[i], &piv)) i++;
            while (cand_before(&piv, &c[j])) j--;
            if (i <= j) { Cand t = c[i]; c[i] = c[j]; c[j] = t; i++; j--; }
        }
        if (want <= j) hi = j;
        else if (want >= i) lo = i;
        else break;
    }
}

int sample_params_from_config(const Config *c, int validation, SampleParams *p, char err[ERR_LEN]) {
    memset(p, 0, sizeof *p);
    if (!c) return err_set(err, ERR_INVAL, "sample_params_from_config: NULL config");
    p->temperature = (float)(validation ? c->val_temperature : c->temperature);
    p->top_p = (float)(validation ? c->val_top_p : c->top_p);
    int k = validation ? c->val_top_k : c->top_k;
    p->top_k = k > 0 ? k : 0;
    p->greedy = validation && !c->val_do_sample;
    return 0;
}

size_t sample_scratch_bytes(int V) {
    return V > 0 ? (size_t)V * sizeof(Cand) : 0;
}

static int check_row(const float *logits, int V, char err[ERR_LEN]) {
    if (!logits || V < 1) return err_set(err, ERR_INVAL, "sample: NULL logits or V = %d", V);
    int finite = 0;
    for (int i = 0; i < V; i++) {
        if (isnan(logits[i]) || logits[i] == INFINITY)
            return err_set(err, ERR_INVAL, "sample: logit %d is %s", i, isnan(logits[i]) ? "NaN" : "+inf");
        finite |= logits[i] != -INFINITY;
    }
    if (!finite) return err_set(err, ERR_INVAL, "sample: every logit is -inf");
    return 0;
}

static int check_params(const SampleParams *p, char err[ERR_LEN]) {
    if (!p) return err_set(err, ERR_INVAL, "sample: NULL params");
    if (isnan(p->temperature)) return err_set(err, ERR_INVAL, "sample: temperature is NaN");
    if (!(p->top_p > 0.0f)) return err_set(err, ERR_INVAL, "sample: top_p must be in (0, 1], got %g", (double)p->top_p);
    return 0;
}

static int is_greedy(const SampleParams *p) { return p->greedy || p->temperature <= 0.0f; }

static int32_t row_argmax(const float *logits, int V) {
    int32_t best = 0;
    for (int i = 1; i < V; i++) if (logits[i] > logits[best]) best = i;
    return best;
}

/* Weight of one scaled logit: expf(x - m) in fp32 (exact 1 at the max, 0 for -inf). Every loop below uses
 * this one function in the same order, so the untruncated scan's running sum ends exactly at the total. */
static inline float weight(float x, float m) { return expf(x - m); }

/* max of logits / t (t > 0, scaled in fp32 as torch's div) and the double sum of the weights. */
static int row_stats(const float *logits, int V, float t, float *mx, double *sum, char err[ERR_LEN]) {
    float m = -INFINITY;
    for (int i = 0; i < V; i++) { float x = logits[i] / t; if (x > m) m = x; }
    if (!isfinite(m))   /* a tiny temperature can overflow logits / t to inf */
        return err_set(err, ERR_INVAL, "sample: temperature %g overflows the scaled logits", (double)t);
    double s = 0.0;
    for (int i = 0; i < V; i++) s += weight(logits[i] / t, m);
    *mx = m;
    *sum = s;
    return 0;
}

int sample_logprob(const float *logits, int V, float temperature, int32_t token, float *logprob, char err[ERR_LEN]) {
    int rc = check_row(logits, V, err);
    if (rc) return rc;
    if (!logprob || token < 0 || token >= V)
        return err_set(err, ERR_INVAL, "sample_logprob: token %d outside [0, %d) or NULL out", (int)token, V);
    if (isnan(temperature)) return err_set(err, ERR_INVAL, "sample_logprob: temperature is NaN");
    float t = temperature > 0.0f ? temperature : 1.0f, m;
    double sum;
    if ((rc = row_stats(logits, V, t, &m, &sum, err))) return rc;
    *logprob = (float)((double)(logits[token] / t - m) - log(sum));
    return 0;
}

/* Builds the sorted kept prefix into c[0..*n_kept) (descending). Needs truncation active or not; when
 * nothing is truncated the whole vocabulary is sorted (only sample_support does that). */
static void build_support(const float *logits, int V, const SampleParams *p, Cand *c, float m, int *n_kept) {
    float t = p->temperature;
    for (int i = 0; i < V; i++) { c[i].x = logits[i] / t; c[i].i = i; }
    int k = (p->top_k > 0 && p->top_k < V) ? p->top_k : V;
    if (p->top_p >= 1.0f) {
        if (k < V) cand_select(c, V, k);
        qsort(c, (size_t)k, sizeof *c, cand_cmp);
        *n_kept = k;
        return;
    }
    double z = 0.0;   /* mass of the top-k set (or the whole row), the top-p reference */
    if (k < V) {
        cand_select(c, V, k);
        for (int j = 0; j < k; j++) z += weight(c[j].x, m);
    } else {
        for (int j = 0; j < V; j++) z += weight(c[j].x, m);
    }
    const double target = (double)p->top_p * z;
    double cum = 0.0;
    int done = 0, chunk = 64;
    while (done < k) {
        int take = chunk < k - done ? chunk : k - done;
        if (take < k - done) cand_select(c + done, k - done, take);
        qsort(c + done, (size_t)take, sizeof *c, cand_cmp);
        for (int j = done; j < done + take; j++) {
            cum += weight(c[j].x, m);
            if (cum >= target) { *n_kept = j + 1; return; }
        }
        done += take;
        chunk *= 2;
    }
    *n_kept = k;   /* rounding left the target unreached: keep everything top-k kept */
}

int sample_support(const float *logits, int V, const SampleParams *p, void *scratch, int32_t *kept, int *n_kept,
                   char err[ERR_LEN]) {
    int rc = check_row(logits, V, err);
    if (!rc) rc = check_params(p, err);
    if (rc) return rc;
    if (!kept || !n_kept) return err_set(err, ERR_INVAL, "sample_support: NULL output");
    if (is_greedy(p)) { kept[0] = row_argmax(logits, V); *n_kept = 1; return 0; }
    float m;
    double sum;
    if ((rc = row_stats(logits, V, p->temperature, &m, &sum, err))) return rc;
    Cand *c = scratch ? scratch : xmalloc(sample_scratch_bytes(V));
    build_support(logits, V, p, c, m, n_kept);
    for (int j = 0; j < *n_kept; j++) kept[j] = c[j].i;
    if (!scratch) xfree(c);
    return 0;
}

int sample_token(const float *logits, int V, const SampleParams *p, double u, void *scratch, int32_t *token,
                 float *logprob, char err[ERR_LEN]) {
    int rc = check_row(logits, V, err);
    if (!rc) rc = check_params(p, err);
    if (rc) return rc;
    if (!token || !logprob) return err_set(err, ERR_INVAL, "sample_token: NULL output");
    if (!(u >= 0.0 && u < 1.0)) return err_set(err, ERR_INVAL, "sample_token: u = %g outside [0, 1)", u);
    if (is_greedy(p)) {
        *token = row_argmax(logits, V);
        return sample_logprob(logits, V, p->temperature, *token, logprob, err);
    }
    const float t = p->temperature;
    float m;
    double s;
    if ((rc = row_stats(logits, V, t, &m, &s, err))) return rc;
    int32_t pick = -1;
    if (p->top_p >= 1.0f && (p->top_k <= 0 || p->top_k >= V)) {
        /* Untruncated: one O(V) inverse-CDF scan, no sort. */
        const double target = u * s;
        double cum = 0.0;
        for (int i = 0; i < V; i++) {
            float w = weight(logits[i] / t, m);
            if (w <= 0.0f) continue;
            cum += w;
            pick = i;
            if (cum > target) break;
        }
    } else {
        Cand *c = scratch ? scratch : xmalloc(sample_scratch_bytes(V));
        int n_kept = 0;
        build_support(logits, V, p, c, m, &n_kept);
        double z = 0.0;
        for (int j = 0; j < n_kept; j++) z += weight(c[j].x, m);
        const double target = u * z;
        double cum = 0.0;
        for (int j = 0; j < n_kept; j++) {
            float w = weight(c[j].x, m);
            if (w <= 0.0f) continue;
            cum += w;
            pick = c[j].i;
            if (cum > target) break;
        }
        if (!scratch) xfree(c);
    }
    if (pick < 0) pick = row_argmax(logits, V);   /* unreachable: the max itself has weight 1 */
    *token = pick;
    *logprob = (float)((double)(logits[pick] / t - m) - log(s));
    return 0;
}
