/* common/model/adamw.c: AdamW update and learning-rate schedules (formulas in adamw.h).
 * Not here: gradient clipping (model.c). */
#include "model/adamw.h"
#include "model/model_internal.h"

#include <math.h>

AdamWConfig adamw_defaults(void) { return (AdamWConfig){ 0.9f, 0.999f, 1e-8f, 0.01f }; }

void adamw_update(float *p, const float *g, float *mom, float *var, long n, const AdamWConfig *c, float lr,
                  long step) {
    backend_cpu.adamw(NULL, p, g, mom, var, n, lr, c->beta1, c->beta2, c->eps, c->weight_decay, step);
}

int adamw_step(Model *m, const AdamWConfig *cfg, float lr, char err[ERR_LEN]) {
    if (!m->grads || !m->adam_m || !m->adam_v) return err_set(err, ERR_INVAL, "adamw_step: model has no optimizer state (load with train=1)");
    if (!isfinite(lr) || lr < 0) return err_set(err, ERR_INVAL, "adamw_step: lr %g must be finite and >= 0", (double)lr);
    m->adam_step++;
    m->be->adamw(m->bc, m->params, m->grads, m->adam_m, m->adam_v, m->n_params, lr, cfg->beta1, cfg->beta2, cfg->eps,
                 cfg->weight_decay, m->adam_step);
    return 0;
}

double lr_at(LrSchedule kind, double base, long step, long warmup, long total, double min_ratio) {
    if (warmup > 0 && step < warmup) return base * (double)step / (double)(warmup > 1 ? warmup : 1);
    if (kind == LR_CONSTANT) return base;
    long w = warmup > 0 ? warmup : 0, span = total - w > 1 ? total - w : 1;
    double progress = (double)(step - w) / (double)span;
    double x = 0.5 * (1.0 + cos(M_PI * progress));
    double f = min_ratio + (1.0 - min_ratio) * x;
    return base * (f > 0 ? f : 0);
}
