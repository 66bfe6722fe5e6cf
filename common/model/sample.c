/* common/model/sample.c: temperature / top-k / top-p / greedy sampling of one logits row (semantics in
 * sample.h). Candidates are (scaled logit, token id) pairs under a strict total order (logit descending, id
 * ascending), so the kept set and the chosen token are deterministic whatever the partition pivots.
 * Not here: the RNG (core/rng.c), batched sampling, penalties. */
#include "model/sample.h"


#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct { float x; int32_t i; } Cand;

/* Block length of the weight pass: per-block float partial sums, accumulated in double, and the same blocks
 * let the inverse-CDF scan skip whole blocks. */
#define SAMPLE_BLOCK 256

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

size_t sample_scratch_bytes(int V) {
    if (V < 1) return 0;
    /* truncation: one Cand per token; untruncated: fp32 weights + double block sums (always smaller, checked) */
    size_t cand = (size_t)V * sizeof(Cand);
    size_t wts = (((size_t)V * sizeof(float) + 7) & ~(size_t)7) + ((size_t)V / SAMPLE_BLOCK + 1) * sizeof(double);
    return cand > wts ? cand : wts;
}

/* The weight pass is the cost of a row: let GCC if-convert the selects below so the loops vectorise
 * (-fno-trapping-math changes no result here: every op is still IEEE-rounded the same way). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")
#endif

/* exp(x) for x <= 0: core/fexp.h's fexp_nonpos (the rounding that vectorises; exactly 0 below -87, so masked tokens
 * keep weight 0). glibc's expf does not vectorise and dominated the cost of a row. */
#include "core/fexp.h"

/* Weight of one scaled logit x = logits[i] / t: exp(x - m). Scalar and vector uses give the same bits. */
static inline float weight(float x, float m) { return fexp_nonpos(x - m); }

/* Pass 1 over the raw row: its max, and whether anything is NaN or +inf. Vectorised. */
static int check_row_max(const float *logits, int V, float *lmax, char err[ERR_LEN]) {
    if (!logits || V < 1) return err_set(err, ERR_INVAL, "sample: NULL logits or V = %d", V);
    float m = -INFINITY;
    int bad = 0;
#pragma omp simd reduction(max : m) reduction(| : bad)
    for (int i = 0; i < V; i++) {
        const float x = logits[i];
        bad |= (x != x) | (x == INFINITY);
        m = x > m ? x : m;
    }
    if (bad) {
        for (int i = 0; i < V; i++)
            if (isnan(logits[i]) || logits[i] == INFINITY)
                return err_set(err, ERR_INVAL, "sample: logit %d is %s", i, isnan(logits[i]) ? "NaN" : "+inf");
    }
    if (m == -INFINITY) return err_set(err, ERR_INVAL, "sample: every logit is -inf");
    *lmax = m;
    return 0;
}

static int check_params(const SampleParams *p, char err[ERR_LEN]) {
    if (!p) return err_set(err, ERR_INVAL, "sample: NULL params");
    if (isnan(p->temperature)) return err_set(err, ERR_INVAL, "sample: temperature is NaN");
    if (!(p->top_p > 0.0f)) return err_set(err, ERR_INVAL, "sample: top_p must be in (0, 1], got %g", (double)p->top_p);
    return 0;
}

static int is_greedy(const SampleParams *p) { return p->greedy || p->temperature <= 0.0f; }

/* First index holding the row max (torch.argmax's tie rule). */
static int32_t row_first(const float *logits, int V, float lmax) {
    for (int i = 0; i < V; i++) if (logits[i] == lmax) return i;
    return 0;
}

/* m = max of logits / t: rounding is monotone, so it is the rounded max of the raw row (t > 0). */
static int scaled_max(float lmax, float t, float *m, char err[ERR_LEN]) {
    *m = lmax / t;
    if (!isfinite(*m))   /* a tiny temperature can overflow logits / t to inf */
        return err_set(err, ERR_INVAL, "sample: temperature %g overflows the scaled logits", (double)t);
    return 0;
}

/* Pass 2: the sum of weights exp(logits / t - m) in double over fp32 block sums. When w is non-NULL the
 * weights go to w[V] and the block sums to blk[ceil(V / SAMPLE_BLOCK)]. */
static double row_weights(const float *logits, int V, float t, float m, float *w, double *blk) {
    double s = 0.0;
    const int unit = t == 1.0f;   /* x / 1 == x: skip the divisions in the default sampling setting */
    for (int b0 = 0, b = 0; b0 < V; b0 += SAMPLE_BLOCK, b++) {
        const int b1 = b0 + SAMPLE_BLOCK < V ? b0 + SAMPLE_BLOCK : V;
        float acc = 0.0f;
        if (w && unit) {
#pragma omp simd reduction(+ : acc)
            for (int i = b0; i < b1; i++) { float e = weight(logits[i], m); w[i] = e; acc += e; }
        } else if (w) {
#pragma omp simd reduction(+ : acc)
            for (int i = b0; i < b1; i++) { float e = weight(logits[i] / t, m); w[i] = e; acc += e; }
        } else if (unit) {
#pragma omp simd reduction(+ : acc)
            for (int i = b0; i < b1; i++) acc += weight(logits[i], m);
        } else {
#pragma omp simd reduction(+ : acc)
            for (int i = b0; i < b1; i++) acc += weight(logits[i] / t, m);
        }
        if (blk) blk[b] = acc;
        s += acc;
    }
    return s;
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

int sample_logprob(const float *logits, int V, float temperature, int32_t token, float *logprob, char err[ERR_LEN]) {
    float lmax, m;
    int rc = check_row_max(logits, V, &lmax, err);
    if (rc) return rc;
    if (!logprob || token < 0 || token >= V)
        return err_set(err, ERR_INVAL, "sample_logprob: token %d outside [0, %d) or NULL out", (int)token, V);
    if (isnan(temperature)) return err_set(err, ERR_INVAL, "sample_logprob: temperature is NaN");
    const float t = temperature > 0.0f ? temperature : 1.0f;
    if ((rc = scaled_max(lmax, t, &m, err))) return rc;
    const double s = row_weights(logits, V, t, m, NULL, NULL);
    *logprob = (float)((double)(logits[token] / t - m) - log(s));
    return 0;
}

/* Builds the sorted kept prefix into c[0..*n_kept) (descending). s: the row's weight sum (the top-p
 * reference mass when top-k is off). When nothing is truncated the whole row is sorted (sample_support). */
static int float_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* Top-k candidates without touching the whole row twice: a threshold from a fixed strided sample of 1024
 * scaled logits (about 4k / V of them above it, + 8), checked by counting; if at least k tokens reach it they
 * contain the top k (the k-th largest is >= it), else every token is a candidate. Deterministic. */
static int topk_candidates(const float *logits, int V, float t, int k, Cand *c) {
    enum { S = 1024 };
    float thr = -INFINITY;
    if (V >= 8 * S) {
        float smp[S];
        for (int j = 0; j < S; j++) smp[j] = logits[(int)(((long long)j * V) / S)] / t;
        qsort(smp, S, sizeof smp[0], float_desc);
        long long q = (long long)k * S * 4 / V + 8;
        thr = smp[q < S ? q - 1 : S - 1];
        int cnt = 0;
#pragma omp simd reduction(+ : cnt)
        for (int i = 0; i < V; i++) cnt += logits[i] / t >= thr;
        if (cnt < k) thr = -INFINITY;
    }
    int n = 0;
    for (int i = 0; i < V; i++) {
        const float x = logits[i] / t;
        if (x >= thr) { c[n].x = x; c[n].i = i; n++; }
    }
    return n;
}

static void build_support(const float *logits, int V, const SampleParams *p, Cand *c, float m, double s,
                          int *n_kept) {
    const float t = p->temperature;
    const int use_topk = p->top_k > 0 && p->top_k < V;
    int k = use_topk ? p->top_k : V;
    int n = V;
    if (!use_topk && p->top_p < 1.0f) {
        /* Pure nucleus: a token of weight w < tau can be left out when V * tau <= (1 - top_p) * s (minus a
         * margin for rounding): what is left still holds top_p of the mass, so it contains the nucleus. For a
         * peaked LLM row this leaves a few hundred candidates instead of the whole vocabulary. */
        const double tau = s * (1.0 - (double)p->top_p - 1e-5) / V;
        if (tau > 0.0) {
            /* compared in logit space, 1e-3 nats wide of the bound: a superset of {w >= tau}, still valid */
            const float lx = (float)log(tau) - 1e-3f;
            n = 0;
            for (int i = 0; i < V; i++) {
                const float x = logits[i] / t;
                if (x - m >= lx) { c[n].x = x; c[n].i = i; n++; }
            }
            k = n;
        }
    }
    if (use_topk)
        n = topk_candidates(logits, V, t, k, c);
    else if (n == V)
        for (int i = 0; i < V; i++) { c[i].x = logits[i] / t; c[i].i = i; }
    if (p->top_p >= 1.0f) {
        if (k < n) cand_select(c, n, k);
        qsort(c, (size_t)k, sizeof *c, cand_cmp);
        *n_kept = k;
        return;
    }
    double z = s;   /* mass of the top-k set (or the whole row), the top-p reference */
    if (k < n) {
        cand_select(c, n, k);
        z = 0.0;
        for (int j = 0; j < k; j++) z += weight(c[j].x, m);
    }
    const double target = (double)p->top_p * z;
    double cum = 0.0;
    int done = 0, chunk = 64;
    while (done < k) {
        const int take = chunk < k - done ? chunk : k - done;
        if (take < k - done) cand_select(c + done, k - done, take);
        qsort(c + done, (size_t)take, sizeof *c, cand_cmp);
        for (int j = done; j < done + take; j++) {
            cum += weight(c[j].x, m);
            if (cum >= target) { *n_kept = j + 1; return; }
        }
        done += take;
        chunk *= 2;
    }
    *n_kept = k;   /* rounding left the target unreached: keep every candidate */
}

int sample_support(const float *logits, int V, const SampleParams *p, void *scratch, int32_t *kept, int *n_kept,
                   char err[ERR_LEN]) {
    float lmax, m;
    int rc = check_row_max(logits, V, &lmax, err);
    if (!rc) rc = check_params(p, err);
    if (rc) return rc;
    if (!kept || !n_kept) return err_set(err, ERR_INVAL, "sample_support: NULL output");
    if (is_greedy(p)) { kept[0] = row_first(logits, V, lmax); *n_kept = 1; return 0; }
    if ((rc = scaled_max(lmax, p->temperature, &m, err))) return rc;
    const double s = row_weights(logits, V, p->temperature, m, NULL, NULL);
    Cand *c = scratch ? scratch : xmalloc(sample_scratch_bytes(V));
    build_support(logits, V, p, c, m, s, n_kept);
    for (int j = 0; j < *n_kept; j++) kept[j] = c[j].i;
    if (!scratch) xfree(c);
    return 0;
}

/* Untruncated draw: the first token whose running weight exceeds target, skipping whole blocks by their
 * sums. w, blk from row_weights. If fp rounding leaves the target unreached inside the chosen block, the
 * block's last token with weight > 0 is taken (the same rule as running off the end of the row). */
static int32_t draw_untruncated(const float *w, const double *blk, int V, double target) {
    double cum = 0.0;
    int b = 0, nb = (V + SAMPLE_BLOCK - 1) / SAMPLE_BLOCK;
    while (b < nb - 1 && cum + blk[b] <= target) cum += blk[b++];
    int32_t pick = -1;
    for (int bb = b; bb < nb && pick < 0; bb++) {   /* normally one block; later ones only if it held no weight */
        const int b0 = bb * SAMPLE_BLOCK, b1 = b0 + SAMPLE_BLOCK < V ? b0 + SAMPLE_BLOCK : V;
        for (int i = b0; i < b1; i++) {
            if (w[i] <= 0.0f) continue;
            cum += w[i];
            pick = i;
            if (cum > target) return pick;
        }
    }
    if (pick >= 0) return pick;
    for (int i = V - 1; i >= 0; i--) if (w[i] > 0.0f) return i;   /* target beyond every block: the last token */
    return 0;
}

int sample_token(const float *logits, int V, const SampleParams *p, double u, void *scratch, int32_t *token,
                 float *logprob, char err[ERR_LEN]) {
    float lmax, m;
    int rc = check_row_max(logits, V, &lmax, err);
    if (!rc) rc = check_params(p, err);
    if (rc) return rc;
    if (!token || !logprob) return err_set(err, ERR_INVAL, "sample_token: NULL output");
    if (!(u >= 0.0 && u < 1.0)) return err_set(err, ERR_INVAL, "sample_token: u = %g outside [0, 1)", u);
    if (is_greedy(p)) {
        *token = row_first(logits, V, lmax);
        return sample_logprob(logits, V, p->temperature, *token, logprob, err);
    }
    const float t = p->temperature;
    if ((rc = scaled_max(lmax, t, &m, err))) return rc;
    void *mem = scratch ? scratch : xmalloc(sample_scratch_bytes(V));
    int32_t pick = -1;
    double s;
    if (p->top_p >= 1.0f && (p->top_k <= 0 || p->top_k >= V)) {
        /* Untruncated: weights once, then an inverse-CDF scan over block sums — O(V), no sort. */
        float *w = mem;
        double *blk = (double *)((char *)mem + (((size_t)V * sizeof(float) + 7) & ~(size_t)7));
        s = row_weights(logits, V, t, m, w, blk);
        pick = draw_untruncated(w, blk, V, u * s);
    } else {
        Cand *c = mem;
        int n_kept = 0;
        s = row_weights(logits, V, t, m, NULL, NULL);
        build_support(logits, V, p, c, m, s, &n_kept);
        double z = 0.0;
        for (int j = 0; j < n_kept; j++) z += weight(c[j].x, m);
        const double target = u * z;
        double cum = 0.0;
        for (int j = 0; j < n_kept; j++) {
            const float wj = weight(c[j].x, m);
            if (wj <= 0.0f) continue;
            cum += wj;
            pick = c[j].i;
            if (cum > target) break;
        }
    }
    if (!scratch) xfree(mem);
    if (pick < 0) pick = row_first(logits, V, lmax);   /* unreachable: the max itself has weight 1 */
    *token = pick;
    *logprob = (float)((double)(logits[pick] / t - m) - log(s));
    return 0;
}
