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

int probe_logprobs(Model *m, float temperature, float *out, char err[ERR_LEN]) {
    int n = probe_len(model_max_tokens(m));
    int32_t ids[PROBE_TOKENS], tgt[PROBE_TOKENS], cu[2] = {0, n};
    float lp[PROBE_TOKENS];
    probe_tokens(model_config(m)->vocab, n, ids);
    for (int i = 0; i < n; i++) tgt[i] = i + 1 < n ? ids[i + 1] : -1;
    ModelBatch b = {.n_tokens = n, .n_seqs = 1, .tokens = ids, .targets = tgt, .cu_seqlens = cu,
                    .temperature = temperature};
    int rc = model_forward(m, &b, lp, NULL, err);
    if (rc) return rc;
    for (int i = 0; i + 1 < n; i++) out[i] = lp[i];
    return n - 1;
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
