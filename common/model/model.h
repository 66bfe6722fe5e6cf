/* common/model/model.h: a Qwen2 / Qwen3 / Llama causal LM behind one handle, on the backend chosen at load
 * (ModelOptions.backend, backend/backend.h: the CPU table, fp32, or in CUDA builds the CUDA table, bf16 GEMMs with fp32
 * master weights; backend_select maps trainer.device to one): weight layout, load/save
 * (Hugging Face directory: config.json + safetensors), forward over a packed batch of variable-length
 * sequences giving per-token log-probs and entropies, backward to parameter gradients, gradient utilities.
 * Math: transformers modeling_qwen2.py / modeling_qwen3.py / modeling_llama.py (v5.24), eager attention.
 *
 * The handle is opaque (its fields are model_internal.h's): callers use the accessors at the end of this header.
 * Memory (docs/conventions.md rule 4): one slab each for parameters, gradients, Adam m, Adam v and activations, all
 * sized from the config and ModelOptions.max_tokens at load and logged. Inside a layer the q/k/v weights
 * (and biases) are stored back to back as one [qd + 2 kvd, H] matrix and gate/up as one [2I, H] matrix, so
 * each is one GEMM; the HF tensor names map onto slices of them (model_tensor_*).
 * A Model is not thread-safe: one forward/backward at a time (the activation slab is shared); parallelism is
 * inside the kernels (OpenMP threads).
 * Every slab lives in the backend's memory: code outside the model reads and writes it with model_read /
 * model_write (model_slab gives backend pointers; model_host_slab host pointers only on the CPU backend, where
 * Backend.host_memory is 1). The layer loop (forward.c) is written once against the backend table.
 * Not here: AdamW and LR schedules (adamw.h), sampling (sample.h), the rollout's paged KV cache and continuous
 * batching (generate.h, CPU backend only so far), the kernels (backend/). */
#ifndef DAPO_MODEL_H
#define DAPO_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "core/err.h"
#include "io/safetensors.h"
#include "model/model_config.h"

/* Pointers into one slab (params, grads, m or v) for one decoder layer. */
typedef struct {
    float *ln1;      /* [H]              input_layernorm.weight */
    float *wqkv;     /* [qd + 2kvd, H]   q_proj | k_proj | v_proj weights (qd = nh*hd, kvd = nkv*hd) */
    float *bqkv;     /* [qd + 2kvd]      q/k/v biases (Qwen2), else NULL */
    float *wo;       /* [H, qd]          o_proj.weight */
    float *qn, *kn;  /* [hd]             q_norm / k_norm weights (Qwen3), else NULL */
    float *ln2;      /* [H]              post_attention_layernorm.weight */
    float *wgu;      /* [2I, H]          gate_proj | up_proj weights */
    float *wd;       /* [H, I]           down_proj.weight */
} LayerWeights;
#define MODEL_LAYER_SLOTS 9
_Static_assert(sizeof(LayerWeights) == MODEL_LAYER_SLOTS * sizeof(float *), "update the slot table in model.c");

typedef struct {
    float        *embed;     /* [V, H] model.embed_tokens.weight */
    float        *norm;      /* [H]    model.norm.weight */
    float        *lm_head;   /* [V, H] lm_head.weight; == embed when tied */
    LayerWeights *layer;     /* [n_layers], owned by the Model */
} ModelWeights;

/* One Hugging Face tensor name and where it lives in the slab. */
typedef struct {
    char  name[96];
    int   ndim;
    long  shape[2];
    long  offset;            /* floats from the slab start */
    long  numel;
} ModelTensor;

typedef struct {
    int  max_tokens;         /* most tokens in one forward/backward batch (sizes the activation slab); >= 1 */
    int  train;              /* 1: allocate gradients, Adam m/v and per-layer activations for backward */
    long logits_floats;      /* bound on the stored logits (floats); 0: default 64 Mi floats. Beyond it the
                                LM head runs in row chunks and backward recomputes each chunk. */
    int  max_context;        /* longest cached context model_forward_cached attends over (p0 + n);
                                0: max_tokens. Sizes the attention scratch. */
    const Backend *backend;  /* where the slabs live and the kernels run; NULL: &backend_cpu (backend_select) */
    int  shard_world;        /* > 1 with train: FSDP full shard over that many ranks (issue 39; the caller, e.g.
                                services/learner/shard.h, holds each rank's 1/W of the parameters, gradients and AdamW
                                state): the model keeps WINDOWS instead of whole slabs — the embedding unit, one decoder
                                layer slot (or every layer's, keep_params) and the final-norm unit for parameters, the
                                same with one layer slot for gradients — and asks for each unit's parameters and hands
                                over each unit's gradients through model_set_unit_hooks ("FSDP units" below). Adam m / v
                                are not allocated; model_read / model_write / model_save / adamw_step / the grad-norm
                                helpers refuse or do not apply. CPU backend only. 0 or 1: whole slabs */
    int  keep_params;        /* with shard_world > 1: every layer has its own parameter slot, so a layer's parameters,
                                gathered for its forward, stay for its backward (verl's fsdp_config.reshard_after_forward
                                false: ZeRO-2-like); 0: one slot shared by the layers, gathered again for backward */
    int  recompute;          /* 1 with train: gradient checkpointing (verl's model.enable_gradient_checkpointing):
                                the forward keeps only each layer's input (N x H floats a layer) and model_backward
                                runs each layer's forward again, from that input, right before its backward — the
                                same kernels on the same inputs, so bitwise the same gradients, for one more forward
                                of the layers; the activation slab shrinks from ~(15 buffers x layers) to
                                (layers + 15 buffers) */
} ModelOptions;

/* A packed batch: S sequences back to back, no padding; attention is causal within each sequence.
 * Positions restart at 0 for each sequence. */
typedef struct {
    int            n_tokens;     /* N, 1..max_tokens */
    int            n_seqs;       /* S >= 1 */
    const int32_t *tokens;       /* [N] input ids in [0, V) */
    const int32_t *targets;      /* [N] id whose log-prob is wanted at each position (normally the next token
                                    of the same sequence); -1: none (logp = 0 there). NULL: all -1 */
    const int32_t *cu_seqlens;   /* [S + 1]: 0 = cu[0] < cu[1] < ... < cu[S] = N */
    float          temperature;  /* > 0; log-probs/entropies of softmax(logits / temperature) */
} ModelBatch;

/* The model handle: opaque (its fields are model_internal.h's); read it through the accessors below. */
typedef struct Model Model;

/* Loads DIR (config.json, generation_config.json, model.safetensors[.index.json]); any float dtype.
 * Every expected tensor must be present with the config's shape (else ERR_NOTFOUND / ERR_INVAL naming the
 * tensor); unexpected tensors other than a tied lm_head.weight or rotary buffers are refused (ERR_INVAL).
 * With ModelOptions.shard_world > 1 the tensors are checked but not read: the model holds windows, and each rank
 * reads its pieces (model_read_params_range, services/learner/shard.h).
 * Caller frees with model_free. NULL on error (reason in err). Logs the slab sizes. */
Model *model_load(const char *dir, const ModelOptions *opt, char err[ERR_LEN]);

/* Builds a model from config.json text with parameters zeroed (for tests and benchmarks; fill with
 * model_init_random or model_write). NULL on error. */
Model *model_create(const char *config_json, const ModelOptions *opt, char err[ERR_LEN]);

/* What a model of config.json text config_json takes under opt, without building it: its parameters, and the bytes
 * of each slab this process would hold — parameters and gradients (n_params each, train; with opt->shard_world = W > 1
 * the windows: "FSDP units" below), AdamW m and v (train: n_params each, or with W > 1 one rank's pieces, the sum over
 * units of ceil(n_u / W), as services/learner/shard.h keeps them, and shard_bytes the rank's master weights and
 * gradient accumulator of the same size) and activations (max_tokens rows, ModelOptions.recompute counted). Host
 * bookkeeping and the weights' backend copy (CUDA's bf16) are not counted. 0 or model_config_parse's errors. */
typedef struct {
    long   n_params, slab_floats;
    size_t params_bytes, grads_bytes, adam_bytes, acts_bytes;
    size_t shard_bytes;      /* shard_world > 1: the rank's fp32 master parameters and gradient accumulator (1/W each,
                                per unit: services/learner/shard.h); params_bytes / grads_bytes are then the windows */
} ModelPlan;
int model_plan(const char *config_json, const ModelOptions *opt, ModelPlan *p, char err[ERR_LEN]);

/* Fills parameters: norms = 1, q/k/v biases = 0, everything else N(0, std^2) from a seeded xorshift/Box-Muller
 * stream. */
void model_init_random(Model *m, uint64_t seed, float std);

void model_free(Model *m);   /* NULL-safe */

/* Copies parameters from an open safetensors set (names and shapes as model_load checks them). */
int model_load_weights(Model *m, const SafeTensors *st, char err[ERR_LEN]);

/* Writes DIR/config.json (the loaded text), generation_config.json (when loaded) and model.safetensors in
 * dtype ST_F32 or ST_BF16 (temp file + rename); DIR is created when missing. transformers loads it. */
int model_save(const Model *m, const char *dir, StDtype dtype, char err[ERR_LEN]);

/* Adam state for exact resume: writes path (safetensors, F32, temp file + rename) with "exp_avg.<hf name>"
 * and "exp_avg_sq.<hf name>" for every tensor and metadata "step" = adam_step (torch's optimizer
 * state_dict names). Load checks every tensor's presence and size (ERR_NOTFOUND / ERR_INVAL naming it).
 * Both need a model loaded with train = 1 (ERR_INVAL otherwise). */
int model_save_optimizer(const Model *m, const char *path, char err[ERR_LEN]);
int model_load_optimizer(Model *m, const char *path, char err[ERR_LEN]);

/* Forward over the packed batch. Writes logp[N] (log-prob of targets[i] at position i, temperature
 * applied) and ent[N] (entropy of the position's distribution) — either may be NULL. In train mode the
 * activations stay for model_backward on the same batch. Errors: ERR_INVAL naming the bad field (token out
 * of range, bad cu_seqlens, too many tokens, temperature <= 0).
 * Sequence-invariant (CPU backend; on CUDA, bf16 cuBLAS products promise nothing of the kind): every product (layers and LM head) gives each output element one fixed-order FMA chain over
 * K (cpu_linear_packed_ex of backend/cpu/cpu_decode.h, whole packed batch in one product), and everything else is
 * per row or per sequence, so a sequence's log-probs and entropies are bitwise the same whatever else is packed with
 * it and wherever it sits (same machine: AVX-512 or not). Train and inference mode run the same kernels, so an
 * inference-mode model's log-probs equal a train-mode model's bitwise. */
int model_forward(Model *m, const ModelBatch *b, float *logp, float *ent, char err[ERR_LEN]);

/* Final-norm hidden states [N, H] of the last model_forward, in backend memory (host memory on the CPU backend;
 * borrowed; valid until the next forward).
 * Logits of row i are cpu_linear(.., hidden + i*H, model_views(m, MODEL_PARAMS)->lm_head, NULL, 1, V, H). */
const float *model_hidden(const Model *m);

/* Backward of the last model_forward (train mode, same batch: none, or one of another size, is refused with
 * ERR_INVAL): given dlogp[N] = d loss / d logp and dent[N] = d loss / d entropy (either may be NULL = 0), ADDS
 * parameter gradients into the MODEL_GRADS slab (so micro-batches accumulate; call model_grads_zero between
 * optimizer steps).
 * Split-invariant: each weight's gradient gets one term per sequence (its own GEMM / row sum, beta = 1), added
 * sequence by sequence in batch order (embedding rows: token by token), so calls over sequences 0..S-1 cut into
 * consecutive batches anyhow leave bitwise the same gradients as one call over all S. Not bitwise: another sequence
 * order (fp32 rounding of the sum), and tied embeddings split into several calls (the lm_head terms of a batch and
 * its token-embedding terms interleave differently), both equal up to fp32 rounding. */
int model_backward(Model *m, const ModelBatch *b, const float *dlogp, const float *dent, char err[ERR_LEN]);

/* fn(ud) is called after each layer of model_forward and model_backward (nothing else), so that a daemon can
 * heartbeat through a chunk that takes longer than its lease timeout (a large model on CPU, a sanitizer build). It
 * must not touch the model; what it returns is nothing (a stop is noticed by the caller after the call). NULL: none.
 * The backend's work may still be queued when it runs (CUDA). */
typedef void (*ModelProgressFn)(void *ud);
void model_set_progress(Model *m, ModelProgressFn fn, void *ud);

/* Incremental (KV-cache) forward for generation: S sequences, each with n_s new tokens appended after the
 * p0_s tokens already in its cache (chunked prefill and decode in one call: n_s = 1 is a decode step).
 * The caller owns the caches: for sequence s and layer l, k_cache[s * n_layers + l] and v_cache[...] point
 * to [cap_s, kvd] fp32 rows (kvd = n_kv_heads * head_dim) holding RoPE'd keys / values of positions
 * 0 .. p0_s - 1; this call writes positions p0_s .. p0_s + n_s - 1 (p0_s + n_s <= cap_s, checked).
 * Positions (RoPE) are p0_s + j. Linear layers run on all new rows of all sequences at once; attention runs
 * per sequence over its cache. Writes logits[S, V] of each sequence's LAST new token (raw, no temperature).
 * Uses the model's activation slab (sum n_s <= max_tokens): a model_backward after it is refused (ERR_INVAL).
 * Errors: ERR_INVAL naming the field. Same math as model_forward (its log-probs agree to fp32 rounding). */
typedef struct {
    int            n_seqs;       /* S >= 1 */
    const int32_t *tokens;       /* [N] new tokens, sequences back to back */
    const int32_t *cu_seqlens;   /* [S + 1] offsets into tokens (n_s = cu[s+1] - cu[s] >= 1) */
    const int32_t *p0;           /* [S] tokens already cached per sequence */
    const int32_t *cap;          /* [S] rows available in each sequence's cache */
    float *const  *k_cache;      /* [S * n_layers] */
    float *const  *v_cache;      /* [S * n_layers] */
} ModelCacheBatch;
int model_forward_cached(Model *m, const ModelCacheBatch *b, float *logits, char err[ERR_LEN]);

/* Opt-in for an inference model (train = 0) whose weights stay fixed across many forwards (scoring a dataset,
 * benchmarks; the rollout engine keeps its own packed copy, generate.h): packs every forward weight once (one more
 * copy of the linear weights and lm_head, ~n_params floats, logged) and model_forward then reads that copy instead
 * of packing each weight per call — bitwise the same results. The copy is a SNAPSHOT: model_load_weights and
 * model_init_random drop it; a caller that writes the parameters in place (model_host_slab) must call model_pack_weights again (or
 * model_unpack_weights) before its next forward. Errors: ERR_INVAL on a train-mode model (its weights change every
 * step). */
int    model_pack_weights(Model *m, char err[ERR_LEN]);
void   model_unpack_weights(Model *m);   /* frees the snapshot; NULL-safe */

void   model_grads_zero(Model *m);
/* Global L2 norm of all gradients (double accumulation), as torch.nn.utils.clip_grad_norm_ computes it. */
double model_grad_norm(const Model *m);
/* torch clip_grad_norm_: if norm > max_norm, scale every gradient by max_norm / (norm + 1e-6).
 * Returns the norm before clipping; max_norm <= 0: no clipping. */
double model_grads_clip(Model *m, double max_norm);

/* The tensor table entry for an HF name, or NULL; its index in the table (model_tensor), or -1. */
const ModelTensor *model_tensor_find(const Model *m, const char *name);
int                model_tensor_index(const Model *m, const char *name);

/* The four parameter-shaped slabs (n_params floats each, the layout of the tensor table). */
typedef enum { MODEL_PARAMS = 0, MODEL_GRADS, MODEL_ADAM_M, MODEL_ADAM_V } ModelSlab;
/* Download (model_read: slab -> host dst[n_params]) or upload (model_write: host src -> slab) one slab through the
 * model's backend, synchronously: how code outside the model reads or sets weights, gradients and optimizer state
 * whatever device holds them (on the CPU backend a memcpy). model_write of MODEL_PARAMS drops a
 * model_pack_weights snapshot (re-pack after). ERR_INVAL when the slab is absent (grads/m/v of an inference model). */
int model_read(const Model *m, ModelSlab which, float *dst, char err[ERR_LEN]);
int model_write(Model *m, ModelSlab which, const float *src, char err[ERR_LEN]);

/* Bytes of each slab, for logs and the dashboard. */
size_t model_bytes_params(const Model *m);
size_t model_bytes_acts(const Model *m);


/* ---- accessors (the handle is opaque) ---- */
const ModelConfig *model_config(const Model *m);        /* the parsed config.json; borrowed */
const char        *model_config_text(const Model *m);   /* config.json as loaded; borrowed */
const Backend     *model_backend(const Model *m);       /* the table the model runs on */
long               model_n_params(const Model *m);      /* floats in each parameter-shaped slab */
int                model_max_tokens(const Model *m);    /* ModelOptions.max_tokens */
int                model_is_train(const Model *m);      /* ModelOptions.train */
long               model_adam_step(const Model *m);     /* optimizer steps taken (bias correction) */
void               model_set_adam_step(Model *m, long step);   /* a sharded optimizer's count (ModelOptions.shard_world) */
/* Floats allocated in the parameter slab: n_params, or with ModelOptions.shard_world > 1 the window layout's. */
long               model_slab_floats(const Model *m);
int                model_n_tensors(const Model *m);     /* HF tensors in file order (lm_head absent when tied) */
const ModelTensor *model_tensor(const Model *m, int i); /* i in [0, model_n_tensors); NULL otherwise */
/* Host view of a slab: the slab itself (n_params floats, the tensor table's layout) when the backend's memory is host
 * memory (the CPU backend), else NULL (use model_read / model_write). A caller that writes MODEL_PARAMS through it on a
 * model_pack_weights model must re-pack, as for model_write. NULL also for an absent slab. Borrowed. */
float             *model_host_slab(const Model *m, ModelSlab which);   /* (like strchr: const in, writable out) */
/* The slab itself in backend memory (device memory on CUDA): for a device-side collective (NCCL) over gradients or
 * parameters. After writing MODEL_PARAMS through it, call model_params_changed. NULL for an absent slab. Borrowed. */
float             *model_slab(const Model *m, ModelSlab which);
/* MODEL_PARAMS was written in place (model_slab / model_host_slab): re-derives the backend's weight copy (bf16 on CUDA)
 * and drops a model_pack_weights snapshot. */
void               model_params_changed(Model *m);
/* Waits for the model's queued backend work (a no-op on the CPU backend); for timing. */
void               model_sync(const Model *m);
/* Pointer views into one slab per tensor (backend pointers: dereference only when model_backend(m)->host_memory).
 * NULL for an absent slab. Borrowed. */
const ModelWeights *model_views(const Model *m, ModelSlab which);

/* ---- FSDP units (a model loaded with ModelOptions.shard_world = W > 1; issue 39) ----
 * The flat parameter vector (the tensor table's layout) is cut into units, each one contiguous range: unit 0 the token
 * embedding (also the LM head when tied), unit 1 + l decoder layer l, unit n_layers + 1 model.norm (+ lm_head when
 * untied) — torch FSDP's wrapping of a decoder (one unit per layer, the root's own parameters in the outer ones). Each
 * unit has a parameter window and a gradient window of model_unit_padded floats (its size rounded up to a multiple of W,
 * so a ring all-gather or reduce-scatter runs on it in place); the layers share one gradient window and one parameter
 * window (or one each, keep_params). The model calls the hooks, in this order:
 *   model_forward:  use(0), then use(1 + l) before each layer l, then use(L + 1) [and use(0) again when tied] before
 *                   the final norm and LM head;
 *   model_backward: use(L + 1) [use(0) when tied], LM head and final norm backward, grads_ready(L + 1); for l from
 *                   L - 1 down: use(1 + l), the layer's backward (its recomputed forward first, ModelOptions.recompute),
 *                   grads_ready(1 + l); then the embedding's backward and grads_ready(0).
 * use(u): unit u's parameters must be in its window when it returns (a hook that knows they still are does nothing).
 * grads_ready(u): this backward ADDED unit u's gradients into its gradient window; a layer's window is shared, so the
 * hook must take them (e.g. reduce-scatter) and leave it zeroed; units 0 and L + 1 may keep accumulating there until
 * the caller takes them. A hook's non-zero return stops the pass: model_forward / model_backward return it with the
 * hook's err. model_forward_idle / model_backward_idle make exactly the calls of a pass and compute nothing: a rank with
 * fewer micro-batches than its peers runs them so that every rank's collectives pair up. */
typedef struct {
    int (*use)(void *ud, int unit, char err[ERR_LEN]);
    int (*grads_ready)(void *ud, int unit, char err[ERR_LEN]);
} ModelUnitHooks;
int    model_n_units(const Model *m);                               /* n_layers + 2 */
/* unit u's range [*off, *off + *n) of the flat parameter vector; 0, or ERR_INVAL for u outside [0, n_units) */
int    model_unit(const Model *m, int u, long *off, long *n);
long   model_unit_padded(const Model *m, int u);                    /* ceil(n / W) x W; 0 for a bad u */
/* Rank `rank` of `world`'s piece [*lo, *hi) of unit u (flat offsets): [off + r s, off + (r + 1) s) with
 * s = ceil(n / world), clipped to the unit (the padding is nobody's; a piece may be empty). Any model, any world >= 1. */
void   model_unit_piece(const Model *m, int u, int rank, int world, long *lo, long *hi);
/* The window holding unit u's parameters (MODEL_PARAMS) or gradients (MODEL_GRADS): model_unit_padded floats, the
 * unit's tensors in table order from its start; NULL for an unsharded model, a bad u or another slab. Borrowed. */
float *model_unit_window(const Model *m, ModelSlab which, int u);
void   model_set_unit_hooks(Model *m, const ModelUnitHooks *h, void *ud);   /* h borrowed for the model's life */
int    model_forward_idle(Model *m, char err[ERR_LEN]);
int    model_backward_idle(Model *m, char err[ERR_LEN]);
/* Copies [lo, hi) of the flat parameter vector from an open safetensors set into dst[hi - lo] (any float dtype; each
 * tensor touched must exist with the config's shape): how a rank reads its pieces. ERR_NOTFOUND / ERR_INVAL. */
int    model_read_params_range(const Model *m, const SafeTensors *st, long lo, long hi, float *dst, char err[ERR_LEN]);
/* model_save with the parameters taken from params[n_params] (the flat layout; e.g. a sharded run's gathered copy)
 * instead of the model's slab; the only model_save of a sharded model. */
int    model_save_params(const Model *m, const float *params, const char *dir, StDtype dtype, char err[ERR_LEN]);

#endif
