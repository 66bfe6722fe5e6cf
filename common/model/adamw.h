/* common/model/adamw.h: AdamW with decoupled weight decay and bias correction, and the learning-rate
 * schedules verl uses (constant with linear warm-up; cosine with warm-up and a floor).
 * AdamW follows torch.optim.AdamW (single-tensor path, PyTorch 2.x `_single_tensor_adamw`):
 *   p *= 1 - lr*wd;  m = lerp(m, g, 1 - b1);  v = b2 v + (1 - b2) g^2;
 *   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
 * Schedules: transformers get_constant_schedule_with_warmup / get_cosine_schedule_with_warmup (verl
 * verl/utils/torch_functional.py), step counted from 0.
 * Not here: gradient clipping (model_grads_clip in model.h), distributed reduction. */
#ifndef DAPO_ADAMW_H
#define DAPO_ADAMW_H

#include "model/model.h"

typedef struct {
    float beta1, beta2, eps;   /* 0.9, 0.999, 1e-8 by default */
    float weight_decay;        /* applied to every parameter (verl's actor optimizer does the same) */
} AdamWConfig;

/* Defaults of torch.optim.AdamW except weight_decay = 0.01 (verl actor default). */
AdamWConfig adamw_defaults(void);

/* One optimizer step on a model loaded with train=1, using its gradients as they are (clip first if wanted).
 * Increments the step count (model_adam_step), then applies the update with that step for bias correction.
 * Errors: ERR_INVAL when the model has no optimizer state or lr is not finite/negative. */
int adamw_step(Model *m, const AdamWConfig *cfg, float lr, char err[ERR_LEN]);

/* The same update on plain arrays (n floats each; step >= 1). For tests and other backends. */
void adamw_update(float *p, const float *g, float *mom, float *var, long n, const AdamWConfig *cfg, float lr,
                  long step);

typedef enum { LR_CONSTANT = 0, LR_COSINE = 1 } LrSchedule;

/* Learning rate at optimizer step `step` (0-based):
 *   warm-up (step < warmup): base * step / max(1, warmup)
 *   constant: base;  cosine: base * max(0, min_ratio + (1 - min_ratio) * 0.5 (1 + cos(pi * progress))),
 *   progress = (step - warmup) / max(1, total - warmup).  warmup <= 0: no warm-up. */
double lr_at(LrSchedule kind, double base, long step, long warmup, long total, double min_ratio);

#endif
