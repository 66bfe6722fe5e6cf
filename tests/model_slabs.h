/* tests/model_slabs.h: short names for the host views of a CPU-backend model's slabs (model.h model_host_slab), which
 * the model tests read and write directly. Header-only. */
#ifndef DAPO_TESTS_MODEL_SLABS_H
#define DAPO_TESTS_MODEL_SLABS_H

#include "model/model.h"

static inline float *tu_params(const Model *m) { return model_host_slab(m, MODEL_PARAMS); }
static inline float *tu_grads(const Model *m) { return model_host_slab(m, MODEL_GRADS); }
static inline float *tu_adam_m(const Model *m) { return model_host_slab(m, MODEL_ADAM_M); }
static inline float *tu_adam_v(const Model *m) { return model_host_slab(m, MODEL_ADAM_V); }

#endif
