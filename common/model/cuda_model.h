/* common/model/cuda_model.h: the model core on one NVIDIA GPU — the same packed-batch forward (per-token
 * log-probs and entropies with temperature), backward (into fp32 gradients), gradient norm / clipping and AdamW
 * as model.h / adamw.h, plus the generation path (prefill / decode over a paged KV cache, on-device sampling).
 * Numerics (issue 10): bf16 weights and GEMM inputs (cuBLAS, fp32 accumulate), fp32 master weights, Adam state,
 * gradients, residual stream, softmax / RMSNorm statistics and log-prob / entropy reductions. The lm_head runs
 * in vocabulary chunks (cuda_lm_plan): no [tokens, V] fp32 logits tensor ever exists in training.
 * Memory: one device slab carved by cuda_mem_plan (cuda_host.h), logged at creation; parameters, gradients and
 * Adam state keep the CPU Model's slab layout, so they can be compared / copied float for float.
 * Errors: input problems return ERR_* (never crash); CUDA / cuBLAS failures die with file:line (STYLE.md rule 3).
 * CUDA builds only (USE_CUDA): in CPU builds nothing here is compiled or linked; callers guard with #ifdef
 * USE_CUDA and check cuda_device_count() > 0 at run time.
 * Not here: Qwen3's q/k norm (refused: ERR_UNSUPPORTED), the continuous-batching scheduler (the caller drives
 * steps with a CudaKvPager), multi-GPU sharding. */
#ifndef DAPO_CUDA_MODEL_H
#define DAPO_CUDA_MODEL_H

#include <stdint.h>

#include "backend/cuda/cuda_host.h"
#include "model/cuda_plan.h"
#include "collective/collective.h"
#include "core/err.h"
#include "model/adamw.h"
#include "model/model.h"

typedef struct CudaModel CudaModel;

/* Uploads m's parameters (fp32 master + bf16 copy) to the current device and carves the slab for o
 * (o->max_tokens <= m->max_tokens is not required; o->train needs nothing from m beyond its parameters; the
 * CPU Adam state is uploaded when m has it, so a GPU step continues a CPU run). NULL + err on bad options,
 * unsupported configs (qk_norm) or too little device memory (ERR_NOMEM, naming the bytes). Borrows nothing. */
CudaModel *cuda_model_new(const Model *m, const CudaPlanOptions *o, char err[ERR_LEN]);
void       cuda_model_free(CudaModel *cm);   /* NULL-safe */
const CudaMemPlan *cuda_model_plan(const CudaModel *cm);

/* model_forward on the GPU: host batch in, host logp[N] / ent[N] out (either NULL). Same ERR_INVAL checks. */
int cuda_model_forward(CudaModel *cm, const ModelBatch *b, float *logp, float *ent, char err[ERR_LEN]);
/* model_backward: ADDS gradients for host dlogp[N], dent[N] (NULL = 0) of the last forward (train mode). */
int cuda_model_backward(CudaModel *cm, const ModelBatch *b, const float *dlogp, const float *dent, char err[ERR_LEN]);
void   cuda_model_grads_zero(CudaModel *cm);
double cuda_model_grad_norm(CudaModel *cm);                    /* global L2, fp64 accumulation */
double cuda_model_grads_clip(CudaModel *cm, double max_norm);  /* torch clip_grad_norm_; returns the norm */
/* adamw_step on the device (fp32 master / m / v, bf16 copy refreshed); increments the step. ERR_INVAL as adamw_step. */
int cuda_model_adamw_step(CudaModel *cm, const AdamWConfig *cfg, float lr, char err[ERR_LEN]);

/* Copies a P-float slab (CM_MASTER, CM_GRAD, CM_ADAM_M, CM_ADAM_V) to host dst, or uploads src into it
 * (uploading CM_MASTER refreshes the bf16 copy). ERR_INVAL for another buffer or one absent in this mode. */
int cuda_model_download(CudaModel *cm, int buf, float *dst, char err[ERR_LEN]);
int cuda_model_upload(CudaModel *cm, int buf, const float *src, char err[ERR_LEN]);

/* Learner collectives on device buffers (collective.h, the nccl backend; the cpu backend works too through host
 * staging inside the collective): sum all-reduce of the gradient slab; broadcast of rank 0's master weights
 * (then the bf16 copy is refreshed). Errors as coll_allreduce_sum. */
int cuda_model_allreduce_grads(CudaModel *cm, Collective *c, char err[ERR_LEN]);
int cuda_model_broadcast_params(CudaModel *cm, Collective *c, char err[ERR_LEN]);

/* One generation step over R packed rows (prefill chunks and decode rows of many sequences): row r is token
 * tokens[r] of sequence seq[r] (a CudaKvPager slot) at position pos[r]; the pager must already hold room for
 * every pos[r] (cuda_kv_seq_grow) and the sequence's earlier positions must be cached. Writes k / v of every
 * row into the paged cache, and the raw logits (no temperature) of rows last[s], s < S, into the device logits
 * buffer [S, V] (copied to host logits when not NULL). R <= max_tokens, S <= max_seqs, the pager's geometry
 * must match the plan (block_tokens, blocks). ERR_INVAL naming the field otherwise. Uses the activation buffers:
 * a pending cuda_model_backward is invalidated (run the next forward first). */
int cuda_model_step(CudaModel *cm, const CudaKvPager *pager, int R, const int32_t *tokens, const int32_t *pos,
                    const int32_t *seq, int S, const int32_t *last, float *logits, char err[ERR_LEN]);
/* Samples one token per row of the last step's logits (cuda_sample: model/sample.h semantics, Philox draw
 * u = rng_uniform(seed, group[s], sample[s], pos[s])); host arrays in, host tok[S] / logp[S] out. */
int cuda_model_sample(CudaModel *cm, int S, const CudaSampleParams *p, uint64_t seed, const uint64_t *group,
                      const uint32_t *sample, const uint32_t *pos, int32_t *tok, float *logp, char err[ERR_LEN]);

/* Device pointer of a plan buffer (for tests and benchmarks), and a full device synchronisation. */
void *cuda_model_buf(CudaModel *cm, int buf);
void  cuda_model_sync(CudaModel *cm);

#endif
