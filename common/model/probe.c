/* common/model/probe.c: the weight probe's sequence and log-probs (probe.h). */
#include "model/probe.h"

#include <math.h>

void probe_tokens(int vocab, int n, int32_t *ids) {
    uint64_t x = 0x9e3779b97f4a7c15ull;             /* a fixed stream: the same ids on every machine and run */
    for (int i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((x >> 33) % (uint64_t)(vocab > 0 ? vocab : 1));
    }
}

int probe_len(int max_tokens) { return max_tokens < 2 ? 2 : max_tokens < PROBE_TOKENS ? max_tokens : PROBE_TOKENS; }

int probe_logprobs(Model *m, float temperature, int n, float *out, char err[ERR_LEN]) {
    const ModelConfig *c = model_config(m);
    if (n < 2 || n > PROBE_TOKENS || !(temperature > 0))
        return err_set(err, ERR_INVAL, "weight probe: %d ids (2..%d), temperature %g", n, PROBE_TOKENS, (double)temperature);
    int32_t ids[PROBE_TOKENS];
    probe_tokens(c->vocab, n, ids);
    int L = c->n_layers, kvd = c->n_kv_heads * c->head_dim, V = c->vocab;
    float *kv = xcalloc((size_t)2 * L * n * kvd, sizeof(float)), *logits = xmalloc((size_t)V * sizeof(float));
    float **kc = xmalloc((size_t)L * sizeof *kc), **vc = xmalloc((size_t)L * sizeof *vc);
    for (int l = 0; l < L; l++) {
        kc[l] = kv + (size_t)l * n * kvd;
        vc[l] = kv + (size_t)(L + l) * n * kvd;
    }
    int rc = 0;
    for (int i = 0; i + 1 < n && !rc; i++) {
        int32_t cu[2] = {0, 1}, p0 = i, cap = n;
        ModelCacheBatch b = {.n_seqs = 1, .tokens = &ids[i], .cu_seqlens = cu, .p0 = &p0, .cap = &cap,
                             .k_cache = kc, .v_cache = vc};
        rc = model_forward_cached(m, &b, logits, err);
        if (rc) break;
        double mx = -INFINITY, sum = 0;              /* log softmax(logits / t) at the next id */
        for (int v = 0; v < V; v++) mx = fmax(mx, (double)logits[v] / temperature);
        for (int v = 0; v < V; v++) sum += exp((double)logits[v] / temperature - mx);
        out[i] = (float)((double)logits[ids[i + 1]] / temperature - mx - log(sum));
    }
    xfree(kv); xfree(logits); xfree(kc); xfree(vc);
    return rc ? rc : n - 1;
}

double probe_diff(const float *a, const float *b, int n) {
    double worst = 0;
    for (int i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!isfinite(d)) return INFINITY;
        if (d > worst) worst = d;
    }
    return worst;
}
