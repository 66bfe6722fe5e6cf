/* common/dapo/kl.c: verl's KL estimators (formulas and source in kl.h). */
#include "dapo/kl.h"

#include <math.h>
#include <string.h>

int kl_penalty_parse(const char *name, KlPenalty *out, char err[ERR_LEN]) {
    static const struct { const char *name; KlKind kind; } k[] = {
        {"kl", KL_K1}, {"k1", KL_K1}, {"abs", KL_ABS}, {"mse", KL_K2}, {"k2", KL_K2}, {"low_var_kl", KL_K3}, {"k3", KL_K3},
    };
    size_t n = name ? strlen(name) : 0;
    bool plus = n > 1 && name[n - 1] == '+';
    for (size_t i = 0; name && i < sizeof k / sizeof k[0]; i++)
        if (strlen(k[i].name) == n - plus && !strncmp(name, k[i].name, n - plus)) {
            out->kind = k[i].kind;
            out->straight_through = plus && k[i].kind != KL_K2;   /* k2+ is k2 */
            return 0;
        }
    return err_set(err, ERR_INVAL, "KL penalty '%s': expected kl, k1, abs, mse, k2, low_var_kl or k3, each optionally "
                   "with '+' (k2's gradient); 'full' needs every vocabulary entry's log-prob (verl raises for it too)",
                   name ? name : "(null)");
}

float kl_penalty_eval(KlPenalty k, float logp, float ref, float *dlogp) {
    float x = logp - ref, v, g;
    switch (k.kind) {
    case KL_K1: v = x; g = 1.0f; break;
    case KL_ABS: v = fabsf(x); g = x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : 0.0f; break;
    case KL_K2: v = 0.5f * (x * x); g = x; break;
    default: {
        float kl = ref - logp;
        int in1 = kl > -20.0f && kl < 20.0f;
        float kc = kl < -20.0f ? -20.0f : kl > 20.0f ? 20.0f : kl, r = expf(kc);
        float kld = (r - kc) - 1.0f;
        int in2 = kld > -10.0f && kld < 10.0f;
        v = kld < -10.0f ? -10.0f : kld > 10.0f ? 10.0f : kld;
        g = in1 && in2 ? (r - 1.0f) * -1.0f : (isnan(kl) ? NAN : 0.0f);
    }
    }
    if (k.straight_through) g = x;
    if (dlogp) *dlogp = g;
    return v;
}
