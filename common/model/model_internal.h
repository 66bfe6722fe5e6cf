/* common/model/model_internal.h: the model handle's fields and the activation carve shared by the files of common/model
 * (not public: outside this folder the handle is opaque, tests/check_layers.sh enforces it).
 * Not here: anything callers use (model.h). */
#ifndef DAPO_MODEL_INTERNAL_H
#define DAPO_MODEL_INTERNAL_H

#include "model/model.h"

/* The handle (model.h keeps it opaque). */
struct Model {
    const Backend *be;             /* the kernels and memory of this model (ModelOptions.backend) */
    BackendCtx  *bc;               /* its per-model state; owned */
    ModelConfig  cfg;
    char        *config_json;      /* config.json text as loaded (written back by model_save); owned */
    char        *gen_config_json;  /* generation_config.json text or NULL; owned */
    long         n_params;         /* floats in each of params/grads/m/v */
    long         slab_floats;      /* allocated in params: n_params, or (sharded) the window layout's floats */
    long         grad_floats;      /* allocated in grads: n_params, or (sharded) the window layout's with one layer slot */
    /* FSDP units (ModelOptions.shard_world = W > 1 with train; model.h "FSDP units"): the slabs hold windows, the
     * caller (services/learner/shard.h) the parameters through hooks */
    int          shard_world;      /* W, or 1: whole slabs */
    int          param_slots;      /* the parameter windows' layer slots: 1, or n_layers (ModelOptions.keep_params) */
    const ModelUnitHooks *hooks;   /* model_set_unit_hooks; NULL: none (a sharded model's forward is refused) */
    void        *hooks_ud;
    int          n_tensors;
    ModelTensor *tensors;          /* [n_tensors] HF names in file order (lm_head absent when tied) */
    float       *params, *grads, *adam_m, *adam_v;   /* slabs; grads/m/v NULL unless train */
    ModelWeights w, g, m, v;       /* pointer views into the four slabs */
    float       *inv_freq;         /* [hd/2] RoPE inverse frequencies */
    long         adam_step;        /* optimizer steps taken (for bias correction) */
    ModelProgressFn progress;      /* model_set_progress: called between layers of model_forward / model_backward */
    void        *progress_ud;
    int          fwd_tokens, fwd_seqs;   /* the batch of the last finished train-mode model_forward (model_backward's
                                            check); 0 after any other use of the activation slab */
    /* activations (opaque to callers; see model.c for the carve) */
    int          max_tokens, train, max_context;
    int          recompute;        /* ModelOptions.recompute (train only): layers share one set of activations */
    long         logits_rows;      /* rows of logits kept at once */
    float       *acts;             /* one slab */
    size_t       acts_floats;
    void        *priv;             /* carve table (model.c) */
};

/* Rows of lm_head (vocabulary entries) packed at once for the LM head (forward.c lm_head_rows). */
#define MODEL_LM_SLICE 1024

/* Per-layer saved activations, N = max_tokens rows. In inference mode every layer shares one set. */
typedef struct {
    float *x_in;     /* [N, H]   residual stream into the layer */
    float *rstd1;    /* [N]      input_layernorm 1/rms */
    float *xn1;      /* [N, H]   normed input to q/k/v */
    float *qkv;      /* [N, qd+2kvd] q|k|v after bias, q/k norm and RoPE (what attention reads) */
    float *qpre;     /* [N, qd]  q before q_norm (Qwen3 only) */
    float *kpre;     /* [N, kvd] k before k_norm (Qwen3 only) */
    float *rstdq;    /* [N, nh]  q_norm 1/rms (Qwen3 only) */
    float *rstdk;    /* [N, nkv] */
    float *att;      /* [N, qd]  attention output (input to o_proj) */
    float *lse;      /* [N, nh]  attention log-sum-exp per row/head */
    float *x_mid;    /* [N, H]   residual after attention */
    float *rstd2;    /* [N] */
    float *xn2;      /* [N, H]   normed input to gate/up */
    float *gu;       /* [N, 2I]  gate | up */
    float *hm;       /* [N, I]   silu(gate) * up (input to down_proj) */
} LayerActs;
#define MODEL_ACT_SLOTS 15
_Static_assert(sizeof(LayerActs) == MODEL_ACT_SLOTS * sizeof(float *), "update the carve in model.c");

typedef struct {
    LayerActs *layer;        /* [n_layers] */
    int32_t   *pos;          /* [N] position of each token within its sequence (host memory, own allocation) */
    float     *cs, *sn;      /* [N, hd/2] RoPE tables */
    float     *x_final;      /* [N, H] residual out of the last layer */
    float     *rstdf;        /* [N] */
    float     *xnf;          /* [N, H] after model.norm */
    float     *logits;       /* [logits_rows, V] */
    float     *att_scratch;  /* cpu_attention_scratch_floats(N) */
    int32_t   *lm_cu;        /* [N + 1] piece bounds of one LM-head chunk (forward.c lm_chunk; host, own allocation) */
    float     *logp, *ent;   /* [N] the forward's outputs in backend memory (copied to the caller's host arrays) */
    float     *dlogp, *dent; /* [N] backward's inputs in backend memory (train) */
    float     *wpack;        /* cpu_pack_floats of the largest layer weight or LM-head slice (forward.c fwd_linear) */
    /* model_pack_weights' snapshot (inference models that opted in; NULL otherwise): every forward weight packed once,
     * own allocation. pk[l * 4 + 0..3] = q|k|v, o, gate|up (GLU layout), down of layer l; pk_lm = lm_head. */
    float     *pk_all;
    float    **pk;
    float     *pk_lm;
    /* backward only (train) */
    float     *dres;         /* [N, H] gradient of the residual stream */
    float     *dA;           /* [N, max(H, qd)] */
    float     *dqkv;         /* [N, qd+2kvd] */
    float     *dgu;          /* [N, 2I] */
    float     *dhm;          /* [N, I] */
    int        logits_full;  /* the last forward kept all N rows of logits */
} ModelActs;

/* ---- the one decoder layer (forward.c), shared by model_forward, model_forward_cached and the rollout engine ---- */

/* One layer's buffers over N rows (backend memory; "(act)" as backend.h). */
typedef struct {
    int    n;                             /* rows */
    float *x_in, *x_mid, *x_out;          /* residual stream into the layer, after attention, out of it (may alias) */
    float *rstd1, *rstd2;                 /* [N] RMSNorm 1/rms saved for backward, or NULL */
    void  *xn1, *xn2;                     /* (act) [N, H] normed inputs (may be one buffer) */
    float *qkv;                           /* [N, qd + 2 kvd] q | k | v after bias, q/k norm and RoPE */
    float *qpre, *kpre, *rstdq, *rstdk;   /* Qwen3 in train mode: pre-norm q / k and their 1/rms; NULL: normed in place */
    void  *att;                           /* (act) [N, qd] attention output */
    float *gu;                            /* [N, 2I] gate | up */
    void  *hm;                            /* (act) [N, I] silu(gate) * up */
} LayerIO;

/* How the caller runs the layer; everything else is the same for all of them. */
typedef struct {
    int    lin_flags;     /* BK_FAST or 0 (batch-invariant), for every linear of the layer */
    int    res_add;       /* 0: each residual product accumulates onto a copy of the residual (BK_ACCUM: one chain per
                             element starting from it); 1: product first, then y += residual (the rollout engine's
                             order, kept so its numbers stay what they were) */
    int    glu_fused;     /* 1: gate|up and SwiGLU in one product (linear_swiglu, the packed GLU layout) */
    float *scratch;       /* linear pack scratch (Backend.pack_floats of the largest weight), or NULL */
    /* writes io->att from io->qkv (q, k with RoPE applied) for layer l: packed sequences, a contiguous cache, or the
     * paged cache (storing this step's K/V first) */
    void (*attend)(const Model *m, int l, const LayerIO *io, void *ud);
    void  *ud;
} LayerMode;

/* Layer l over io->n rows: RMSNorm, q|k|v (+ bias), [q/k norm], RoPE (rope: the rows' angles), attention (mode->attend),
 * o_proj + residual, RMSNorm, gate|up, SwiGLU, down_proj + residual (transformers Qwen2/Qwen3/LlamaDecoderLayer).
 * w[4]: q|k|v, o, gate|up, down as BkWeight (the caller's prepared copies). */
void model__layer_forward(const Model *m, int l, const LayerIO *io, const BkWeight w[4], const LayerMode *mode,
                          const BkRope *rope);

/* ---- FSDP units (units.c) ---- */
long model__layer_floats(const ModelConfig *c);          /* one decoder layer's parameters */
int  model__unit_use(Model *m, int u, char err[ERR_LEN]);     /* the hooks' use / grads_ready; 0 without hooks */
int  model__unit_grads(Model *m, int u, char err[ERR_LEN]);
int  model__check_hooks(const Model *m, const char *what, char err[ERR_LEN]);   /* ERR_INVAL: sharded, no hooks */

/* Host view of one parameter-shaped slab for the load / save paths (model.c, checkpoint.c): the slab itself when the
 * backend's memory is host memory, else a host copy (downloaded first when fetch). model__host_slab_done uploads it
 * when dirty (and re-derives the backend's weight copy for MODEL_PARAMS), then frees a copy. NULL for an absent slab. */
float *model__host_slab(const Model *m, ModelSlab which, int fetch);
void   model__host_slab_done(Model *m, ModelSlab which, float *h, int dirty);

#endif
