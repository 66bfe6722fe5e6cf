/* common/model/generate.c: the rollout engine (see generate.h): paged KV cache, continuous batching with
 * chunked prefill, preemption + recompute, batched forward over packed rows, per-row sampling.
 * Every layer runs model/forward.c's one layer loop (model__layer_forward) through the model's backend table, with the
 * paged-cache attention of attend_paged. The cache and step buffers are host memory: CPU backend only (the GPU
 * issue brings them to device memory). Not here: the wire protocol and weight loading (services/rollout). */
#include "model/generate.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/dtype.h"
#include "core/log.h"
#include "core/rng.h"
#include "model/model_internal.h"

enum { SEQ_WAITING = 0, SEQ_RUNNING, SEQ_DONE };
#define GEN_PACKED_MAX_ROWS 64   /* default mode: more rows than this in a step go to sgemm */

typedef struct {
    uint64_t     id, tag, seed, group_id;
    uint32_t     sample, rng_offset;
    SampleParams sp;
    int          max_tokens;
    int32_t     *stop;          /* [n_stop] */
    int          n_stop;
    int          ignore_eos;    /* GenRequest.ignore_eos */
    int32_t     *tok;           /* [n_prompt + max_tokens]: prompt then sampled tokens */
    int          n_tok, n_prompt;
    float       *lp;            /* [max_tokens] log-probs of the sampled tokens */
    int64_t     *ver;           /* [max_tokens] the weights version (gen_engine_set_version) each was sampled with */
    int          n_cached;      /* positions whose K/V are in the cache */
    int32_t     *blocks;        /* [max_blocks] block table */
    int          n_blocks, max_blocks;
    int          state;
    GenFinish    finish;
    long         admit_order;
    int          preemptions;
} Seq;

struct GenEngine {
    Model     *m;
    GenOptions o;
    int        BS, max_rows, kvd, qkvd, nthr;
    long       n_blocks, n_free, ctx_max;
    int32_t   *free_list;       /* [n_blocks] stack of free block ids */
    char      *kc, *vc;         /* [L][n_blocks * BS * kvd] elements of o.kv_dtype (kv_esz bytes each) */
    size_t     kv_esz;
    void      *packed;          /* every linear weight re-laid by pack_weights (one slab; o.weight_dtype elements) */
    void     **pk;              /* [4 L + 1]: layer l's wqkv, wo, wgu, wd at 4l .. 4l+3, lm_head last */
    Seq      **run, **wait, **done;
    int        n_run, n_wait, n_done, cap_wait, cap_done;
    uint64_t   next_id;
    long       admit_counter;
    int        hold_new;
    int64_t    version;         /* gen_engine_set_version: stamped on every token sampled from now on */
    /* step buffers (max_rows rows; sampling rows <= max_num_seqs) */
    int32_t   *row_tok, *row_pos;
    const int32_t **row_tab;
    float     *x, *xn, *qkv, *att, *mid, *gu, *hm, *cs, *sn, *att_scratch;
    Seq      **samp_seq;
    int       *samp_row, *samp_rc, *nchunk;   /* nchunk: [max_num_seqs] rows of each running sequence this step */
    /* prefix sharing, per step ([max_num_seqs] each): donor run index of run[i] (-1: none) and the positions
     * [0, share[i]) it takes from there; the copies forward_rows makes after each layer's K/V stores */
    int       *fol, *share, *cp_len, n_cp;
    Seq      **cp_src, **cp_dst;
    float     *xs, *logits, *samp_lp;
    int32_t   *samp_tok;
    char      *samp_scratch;
    size_t     samp_scratch_bytes;
    GenStats   st;
};

const char *gen_finish_name(GenFinish f) {
    return f == GEN_FINISH_STOP ? "stop" : f == GEN_FINISH_LENGTH ? "length" : "";
}

static long blocks_for(const GenEngine *e, long positions) { return (positions + e->BS - 1) / e->BS; }

/* (N, K) of packed weight i (see GenEngine.pk) */
static void pk_shape(const ModelConfig *c, int i, int *N, int *K) {
    int qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    if (i == 4 * c->n_layers) { *N = c->vocab; *K = c->hidden; return; }
    switch (i % 4) {
    case 0: *N = qd + 2 * kvd; *K = c->hidden; break;
    case 1: *N = c->hidden; *K = qd; break;
    case 2: *N = 2 * c->inter; *K = c->hidden; break;
    default: *N = c->hidden; *K = c->inter; break;
    }
}

static const float *pk_source(const Model *m, int i) {
    if (i == 4 * m->cfg.n_layers) return m->w.lm_head;
    const LayerWeights *W = &m->w.layer[i / 4];
    return i % 4 == 0 ? W->wqkv : i % 4 == 1 ? W->wo : i % 4 == 2 ? W->wgu : W->wd;
}

/* Rounds every parameter of m to bf16 in place (host memory: the engine runs on the CPU backend only). */
static void round_params_bf16(Model *m) {
    float *p = model_host_slab(m, MODEL_PARAMS);
    long n = model_n_params(m);
    for (long i = 0; i < n; i++) p[i] = dtype_bf16_to_f32(dtype_bf16_from_f32(p[i]));
    model_params_changed(m);
}

void gen_engine_reload_weights(GenEngine *e) {
    if (!e) return;
    int bf = e->o.weight_dtype == BK_BF16;
    if (bf) round_params_bf16(e->m);
    for (int i = 0; i <= 4 * e->m->cfg.n_layers; i++) {
        int N, K;
        pk_shape(&e->m->cfg, i, &N, &K);
        if (bf) e->m->be->pack_weights_bf16(e->m->bc, e->pk[i], pk_source(e->m, i), N, K);
        else e->m->be->pack_weights(e->m->bc, e->pk[i], pk_source(e->m, i), N, K, 0);
    }
}

/* The BkWeight of packed weight i */
static BkWeight pk_weight(const GenEngine *e, int i) {
    return (BkWeight){ pk_source(e->m, i), e->pk[i], e->o.weight_dtype };
}

int gen_engine_supports(const Backend *be, char err[ERR_LEN]) {
    if (be == &backend_cpu) return 0;   /* its KV cache and step buffers are host memory (xmalloc) */
    return err_set(err, ERR_UNSUPPORTED, "the rollout engine runs on the cpu backend only so far (asked for %s)",
                   be ? be->name : "none");
}

GenEngine *gen_engine_new(Model *m, const GenOptions *o, char err[ERR_LEN]) {
    if (!m || !o) { err_set(err, ERR_INVAL, "gen_engine_new: NULL model or options"); return NULL; }
    const ModelConfig *c = &m->cfg;
    if (gen_engine_supports(m->be, err)) return NULL;
    int BS = o->block_tokens > 0 ? o->block_tokens : 16;
    if (o->max_num_seqs < 1 || o->max_num_seqs > 1 << 20) {
        err_set(err, ERR_INVAL, "max_num_seqs %d outside [1, 2^20]", o->max_num_seqs);
        return NULL;
    }
    if (o->kv_cache_tokens < BS || o->kv_cache_tokens > (1L << 31)) {
        err_set(err, ERR_INVAL, "kv_cache_tokens %ld outside [%d, 2^31]", o->kv_cache_tokens, BS);
        return NULL;
    }
    if (BS > 4096) { err_set(err, ERR_INVAL, "block_tokens %d above 4096", BS); return NULL; }
    if (c->head_dim > 512) { err_set(err, ERR_UNSUPPORTED, "head_dim %d above 512", c->head_dim); return NULL; }
    if ((o->weight_dtype != BK_F32 && o->weight_dtype != BK_BF16) || (o->kv_dtype != BK_F32 && o->kv_dtype != BK_BF16)) {
        err_set(err, ERR_INVAL, "weight_dtype %d / kv_dtype %d: each is float32 (0) or bfloat16 (1)",
                (int)o->weight_dtype, (int)o->kv_dtype);
        return NULL;
    }
    if (o->weight_dtype == BK_BF16 && !m->be->pack_weights_bf16) {
        err_set(err, ERR_UNSUPPORTED, "the %s backend has no bf16 weight storage", m->be->name);
        return NULL;
    }
    GenEngine *e = xcalloc(1, sizeof *e);
    e->m = m;
    e->o = *o;
    e->BS = BS;
    e->max_rows = o->max_batch_tokens > o->max_num_seqs ? o->max_batch_tokens : o->max_num_seqs;
    e->kvd = c->n_kv_heads * c->head_dim;
    e->qkvd = c->n_heads * c->head_dim + 2 * e->kvd;
    e->n_blocks = (o->kv_cache_tokens + BS - 1) / BS;
    e->ctx_max = e->n_blocks * BS;
    e->nthr = omp_get_max_threads();
    size_t layer_floats = (size_t)e->n_blocks * BS * e->kvd;
    e->kv_esz = o->kv_dtype == BK_BF16 ? sizeof(uint16_t) : sizeof(float);
    e->kc = xcalloc(layer_floats * c->n_layers, e->kv_esz);   /* zeroed: unwritten slots stay finite */
    e->vc = xcalloc(layer_floats * c->n_layers, e->kv_esz);
    e->free_list = xmalloc((size_t)e->n_blocks * sizeof(int32_t));
    for (long b = 0; b < e->n_blocks; b++) e->free_list[b] = (int32_t)(e->n_blocks - 1 - b);
    e->n_free = e->n_blocks;
    e->run = xcalloc((size_t)o->max_num_seqs, sizeof(Seq *));
    int npk = 4 * c->n_layers + 1;
    long pk_total = 0;
    for (int i = 0; i < npk; i++) {
        int N, K;
        pk_shape(c, i, &N, &K);
        pk_total += m->be->pack_floats(N, K, 0);
    }
    size_t esz = o->weight_dtype == BK_BF16 ? sizeof(uint16_t) : sizeof(float);
    e->packed = xmalloc((size_t)pk_total * esz);
    e->pk = xmalloc((size_t)npk * sizeof(void *));
    for (long i = 0, off = 0; i < npk; i++) {
        int N, K;
        pk_shape(c, (int)i, &N, &K);
        e->pk[i] = (char *)e->packed + off * esz;
        off += m->be->pack_floats(N, K, 0);
    }
    gen_engine_reload_weights(e);
    int R = e->max_rows, S = o->max_num_seqs, H = c->hidden, I = c->inter, V = c->vocab;
    int qd = c->n_heads * c->head_dim;
    e->row_tok = xmalloc((size_t)R * sizeof(int32_t));
    e->row_pos = xmalloc((size_t)R * sizeof(int32_t));
    e->row_tab = xmalloc((size_t)R * sizeof(int32_t *));
    e->x = xmalloc((size_t)R * H * sizeof(float));
    e->xn = xmalloc((size_t)R * H * sizeof(float));
    e->mid = xmalloc((size_t)R * H * sizeof(float));
    e->qkv = xmalloc((size_t)R * e->qkvd * sizeof(float));
    e->att = xmalloc((size_t)R * qd * sizeof(float));
    e->gu = xmalloc((size_t)R * 2 * I * sizeof(float));
    e->hm = xmalloc((size_t)R * I * sizeof(float));
    e->cs = xmalloc((size_t)R * (c->head_dim / 2 + 1) * sizeof(float));
    e->sn = xmalloc((size_t)R * (c->head_dim / 2 + 1) * sizeof(float));
    e->att_scratch = xmalloc((size_t)m->be->paged_scratch_floats(c->n_heads / c->n_kv_heads, e->ctx_max) * sizeof(float));
    e->samp_seq = xmalloc((size_t)S * sizeof(Seq *));
    e->samp_row = xmalloc((size_t)S * sizeof(int));
    e->samp_rc = xmalloc((size_t)S * sizeof(int));
    e->nchunk = xmalloc((size_t)S * sizeof(int));
    e->fol = xmalloc((size_t)S * sizeof(int));
    e->share = xmalloc((size_t)S * sizeof(int));
    e->cp_len = xmalloc((size_t)S * sizeof(int));
    e->cp_src = xmalloc((size_t)S * sizeof(Seq *));
    e->cp_dst = xmalloc((size_t)S * sizeof(Seq *));
    e->samp_tok = xmalloc((size_t)S * sizeof(int32_t));
    e->samp_lp = xmalloc((size_t)S * sizeof(float));
    e->xs = xmalloc((size_t)S * H * sizeof(float));
    e->logits = xmalloc((size_t)S * V * sizeof(float));
    e->samp_scratch_bytes = (sample_scratch_bytes(V) + 63) & ~(size_t)63;
    e->samp_scratch = xmalloc(e->samp_scratch_bytes * S);
    double cache_mb = 2.0 * layer_floats * c->n_layers * e->kv_esz / 1048576.0;
    double pack_mb = (double)pk_total * esz / 1048576.0;
    double step_mb = ((double)R * (3 * H + e->qkvd + qd + 3 * I) + (double)S * (H + V) +
                      (double)e->nthr * (c->n_heads / c->n_kv_heads) * e->ctx_max) * sizeof(float) / 1048576.0 +
                     (double)e->samp_scratch_bytes * S / 1048576.0;
    log_info("rollout engine: KV cache %ld blocks x %d positions = %ld tokens (%.1f MiB, %s), %d seqs, %d rows per "
             "step (%.1f MiB buffers), packed weights %.1f MiB (%s), %s mode, prefix sharing %s, %d threads", e->n_blocks,
             BS, e->ctx_max, cache_mb, e->kv_esz == 2 ? "bfloat16" : "float32", S, R, step_mb, pack_mb, esz == 2 ? "bfloat16" : "float32", o->batch_invariant ? "batch-invariant" : "default",
             o->no_prefix_sharing ? "off" : "on", e->nthr);
    return e;
}

static void seq_free(Seq *s) {
    if (!s) return;
    xfree(s->stop);
    xfree(s->tok);
    xfree(s->lp);
    xfree(s->ver);
    xfree(s->blocks);
    xfree(s);
}

void gen_engine_free(GenEngine *e) {
    if (!e) return;
    for (int i = 0; i < e->n_run; i++) seq_free(e->run[i]);
    for (int i = 0; i < e->n_wait; i++) seq_free(e->wait[i]);
    for (int i = 0; i < e->n_done; i++) seq_free(e->done[i]);
    xfree(e->run); xfree(e->wait); xfree(e->done);
    xfree(e->kc); xfree(e->vc); xfree(e->free_list); xfree(e->packed); xfree(e->pk);
    xfree(e->row_tok); xfree(e->row_pos); xfree(e->row_tab);
    xfree(e->x); xfree(e->xn); xfree(e->mid); xfree(e->qkv); xfree(e->att); xfree(e->gu); xfree(e->hm);
    xfree(e->cs); xfree(e->sn); xfree(e->att_scratch);
    xfree(e->samp_seq); xfree(e->samp_row); xfree(e->samp_rc); xfree(e->nchunk); xfree(e->samp_tok); xfree(e->samp_lp);
    xfree(e->fol); xfree(e->share); xfree(e->cp_len); xfree(e->cp_src); xfree(e->cp_dst);
    xfree(e->xs); xfree(e->logits); xfree(e->samp_scratch);
    xfree(e);
}

static void push_wait(GenEngine *e, Seq *s, int front) {
    XGROW(e->wait, e->n_wait, e->cap_wait, 64);
    if (front) {
        memmove(e->wait + 1, e->wait, (size_t)e->n_wait * sizeof(Seq *));
        e->wait[0] = s;
    } else {
        e->wait[e->n_wait] = s;
    }
    e->n_wait++;
    s->state = SEQ_WAITING;
}

static void push_done(GenEngine *e, Seq *s) {
    XGROW(e->done, e->n_done, e->cap_done, 64);
    e->done[e->n_done++] = s;
    s->state = SEQ_DONE;
}

int gen_engine_add(GenEngine *e, const GenRequest *r, uint64_t *id, char err[ERR_LEN]) {
    if (!e || !r) return err_set(err, ERR_INVAL, "gen_engine_add: NULL argument");
    int V = e->m->cfg.vocab;
    if (r->n_prompt < 1 || !r->prompt) return err_set(err, ERR_INVAL, "empty prompt");
    if (r->max_tokens < 1) return err_set(err, ERR_INVAL, "max_tokens %d must be >= 1", r->max_tokens);
    if (r->n_stop < 0 || (r->n_stop > 0 && !r->stop_ids)) return err_set(err, ERR_INVAL, "bad stop ids");
    for (int i = 0; i < r->n_prompt; i++)
        if (r->prompt[i] < 0 || r->prompt[i] >= V)
            return err_set(err, ERR_INVAL, "prompt token %d = %d outside the vocabulary [0, %d)", i, r->prompt[i], V);
    if (!r->sp.greedy && r->sp.temperature > 0 && !(r->sp.top_p > 0 && r->sp.top_p <= 1))
        return err_set(err, ERR_INVAL, "top_p %g outside (0, 1]", (double)r->sp.top_p);
    if (!isfinite(r->sp.temperature)) return err_set(err, ERR_INVAL, "temperature is not finite");
    long ctx = (long)r->n_prompt + r->max_tokens;
    if (ctx > e->ctx_max)
        return err_set(err, ERR_TOO_BIG, "prompt %d + max_tokens %d = %ld positions exceed the whole KV cache (%ld)",
                       r->n_prompt, r->max_tokens, ctx, e->ctx_max);
    Seq *s = xcalloc(1, sizeof *s);
    s->id = ++e->next_id;
    s->tag = r->tag;
    s->seed = r->seed;
    s->group_id = r->group_id;
    s->sample = r->sample;
    s->rng_offset = r->rng_offset;
    s->sp = r->sp;
    s->max_tokens = r->max_tokens;
    s->n_stop = r->n_stop;
    s->ignore_eos = r->ignore_eos;
    if (r->n_stop) {
        s->stop = xmalloc((size_t)r->n_stop * sizeof(int32_t));
        memcpy(s->stop, r->stop_ids, (size_t)r->n_stop * sizeof(int32_t));
    }
    s->tok = xmalloc((size_t)ctx * sizeof(int32_t));
    memcpy(s->tok, r->prompt, (size_t)r->n_prompt * sizeof(int32_t));
    s->n_tok = s->n_prompt = r->n_prompt;
    s->lp = xmalloc((size_t)r->max_tokens * sizeof(float));
    s->ver = xmalloc((size_t)r->max_tokens * sizeof(int64_t));
    s->max_blocks = (int)blocks_for(e, ctx);
    s->blocks = xmalloc((size_t)s->max_blocks * sizeof(int32_t));
    push_wait(e, s, 0);
    if (id) *id = s->id;
    return 0;
}

static void seq_release_blocks(GenEngine *e, Seq *s) {
    for (int i = 0; i < s->n_blocks; i++) e->free_list[e->n_free++] = s->blocks[i];
    s->n_blocks = 0;
    s->n_cached = 0;
}

static void run_remove(GenEngine *e, int i) {
    memmove(e->run + i, e->run + i + 1, (size_t)(e->n_run - i - 1) * sizeof(Seq *));
    e->n_run--;
}

/* Preempts the most recently admitted running sequence (the last of run[]); returns it. */
static Seq *preempt_last(GenEngine *e) {
    Seq *v = e->run[e->n_run - 1];
    e->n_run--;
    seq_release_blocks(e, v);
    v->preemptions++;
    e->st.preemptions++;
    push_wait(e, v, 1);
    log_debug("preempted sequence %llu (%d tokens) for cache", (unsigned long long)v->id, v->n_tok);
    return v;
}

static void admit(GenEngine *e) {
    for (int i = 0; i < e->n_wait && e->n_run < e->o.max_num_seqs;) {
        Seq *s = e->wait[i];
        if (e->hold_new && s->n_tok == s->n_prompt) { i++; continue; }
        long need = blocks_for(e, s->n_tok);
        if (need > e->n_free) break;                  /* FIFO: nobody overtakes the head */
        for (long b = 0; b < need; b++) s->blocks[s->n_blocks++] = e->free_list[--e->n_free];
        s->n_cached = 0;
        s->admit_order = ++e->admit_counter;
        s->state = SEQ_RUNNING;
        e->run[e->n_run++] = s;
        memmove(e->wait + i, e->wait + i + 1, (size_t)(e->n_wait - i - 1) * sizeof(Seq *));
        e->n_wait--;
    }
}

/* Every running sequence gets the blocks its whole context needs, preempting the newest when none are free. */
static void ensure_blocks(GenEngine *e) {
    for (int i = 0; i < e->n_run; i++) {
        Seq *s = e->run[i];
        long need = blocks_for(e, s->n_tok);
        while (s->n_blocks < need) {
            if (e->n_free > 0) { s->blocks[s->n_blocks++] = e->free_list[--e->n_free]; continue; }
            Seq *v = preempt_last(e);
            if (v == s) break;
        }
        if (i >= e->n_run) break;
    }
}

static int is_stop(const GenEngine *e, const Seq *s, int32_t t) {
    for (int i = 0; i < s->n_stop; i++) if (s->stop[i] == t) return 1;
    const ModelConfig *c = &e->m->cfg;
    for (int i = 0; i < c->n_eos && !s->ignore_eos; i++) if (c->eos_ids[i] == t) return 1;
    return 0;
}

/* The linear flags of an M-row step: the packed fixed-order kernel for decode-sized batches and always in
 * batch-invariant mode; sgemm (BK_FAST) for big prefill chunks in the default mode. */
static int lin_flags(const GenEngine *e, int M) {
    return !e->o.batch_invariant && M > GEN_PACKED_MAX_ROWS ? BK_FAST : 0;
}

/* Linear layer i of GenEngine.pk over M rows (lin_flags). */
static void linear(const GenEngine *e, int i, float *y, const float *x, const float *b, int M) {
    int N, K;
    pk_shape(&e->m->cfg, i, &N, &K);
    e->m->be->linear(e->m->bc, y, N, x, pk_weight(e, i), b, M, N, K, lin_flags(e, M), NULL);
}

/* Copies the K/V of positions [0, n) of src into dst's blocks in one layer's cache (kc, vc): whole blocks, then the
 * first n % BS slots of the last one (only those: dst may have stored its own rows after them this step). */
static void copy_prefix(const GenEngine *e, char *kc, char *vc, const Seq *src, const Seq *dst, int n) {
    int BS = e->BS, kvd = e->kvd, full = n / BS, rem = n % BS;
    size_t z = e->kv_esz, blk = (size_t)BS * kvd * z;        /* bytes */
    for (int b = 0; b < full; b++) {
        memcpy(kc + dst->blocks[b] * blk, kc + src->blocks[b] * blk, blk);
        memcpy(vc + dst->blocks[b] * blk, vc + src->blocks[b] * blk, blk);
    }
    if (rem == 0) return;
    const char *ks = kc + src->blocks[full] * blk;          /* K block: [kvd, BS] */
    char *kd = kc + dst->blocks[full] * blk;
    for (int i = 0; i < kvd; i++) memcpy(kd + (size_t)i * BS * z, ks + (size_t)i * BS * z, (size_t)rem * z);
    /* V block: [BS, kvd], the first rem rows */
    memcpy(vc + dst->blocks[full] * blk, vc + src->blocks[full] * blk, (size_t)rem * kvd * z);
}

/* The engine's attention for layer l: this step's K/V rows into the paged cache, the prefix copies the step makes
 * (after the donor's rows of this layer are stored), then every row's query over its sequence's cache. */
static void attend_paged(const Model *m, int l, const LayerIO *io, void *ud) {
    const GenEngine *e = ud;
    const ModelConfig *c = &m->cfg;
    int hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads, qd = nh * hd, kvd = e->kvd, qkvd = e->qkvd, BS = e->BS;
    size_t layer_floats = (size_t)e->n_blocks * BS * kvd;
    char *kc = e->kc + l * layer_floats * e->kv_esz, *vc = e->vc + l * layer_floats * e->kv_esz;
    for (int r = 0; r < io->n; r++) {
        const float *kr = io->qkv + (long)r * qkvd + qd;
        m->be->kv_store(m->bc, kc, vc, e->o.kv_dtype, e->row_tab[r], e->row_pos[r], kr, kr + kvd, BS, nkv, hd);
    }
    for (int k = 0; k < e->n_cp; k++) copy_prefix(e, kc, vc, e->cp_src[k], e->cp_dst[k], e->cp_len[k]);
    m->be->paged_attention(m->bc, io->att, qd, io->qkv, qkvd, io->n, e->row_pos, e->row_tab, kc, vc, e->o.kv_dtype, BS, nh, nkv, hd,
                           1.0f / sqrtf((float)hd), e->att_scratch, e->ctx_max);
}

/* The decoder over R packed rows (row_tok/row_pos/row_tab set): model/forward.c's one layer loop with the paged
 * attention above, the packed kernel for decode-sized batches (always in batch-invariant mode) and sgemm for big
 * prefill chunks; writes K/V of every row into the cache and leaves the last-layer residual stream in e->x. */
static void forward_rows(GenEngine *e, int R) {
    const Model *m = e->m;
    const ModelConfig *c = &m->cfg;
    int H = c->hidden;
    BkRope rope = { e->cs, e->sn, e->row_pos, m->inv_freq };
    m->be->embed(m->bc, e->x, e->row_tok, (BkWeight){ m->w.embed, NULL, BK_F32 }, R, H);
    m->be->rope_tables(m->bc, e->cs, e->sn, e->row_pos, R, m->inv_freq, c->head_dim / 2);
    LayerMode mode = { .lin_flags = lin_flags(e, R), .res_add = 1, .glu_fused = 0, .attend = attend_paged,
                       .ud = e };
    LayerIO io = { .n = R, .x_in = e->x, .x_mid = e->mid, .x_out = e->x, .xn1 = e->xn, .xn2 = e->xn, .qkv = e->qkv,
                   .att = e->att, .gu = e->gu, .hm = e->hm };
    for (int l = 0; l < c->n_layers; l++) {
        BkWeight w[4];
        for (int k = 0; k < 4; k++) w[k] = pk_weight(e, 4 * l + k);
        model__layer_forward(m, l, &io, w, &mode, &rope);
    }
}

/* Longest common prefix of a[0, n) and b[0, n). */
static int common_prefix(const int32_t *a, const int32_t *b, int n) {
    int k = 0;
    while (k < n && a[k] == b[k]) k++;
    return k;
}

/* Prefix sharing (see generate.h): for each running sequence that has nothing cached (just admitted, or parked
 * last step), in run order, the donor whose context shares the longest prefix with its own (all but its last
 * token, which it computes itself for its logits); the first such in run order on ties. Donors: sequences
 * before it in run[] (already decided this step: they prefill, copy or are parked themselves) and sequences
 * after it that have something cached (never followers), so following is acyclic and always ends at a sequence
 * that computes. Sets e->fol / e->share; the row passes of gen_engine_step make the copy once the donor has
 * (or computes in this step) those positions, else park the follower for this step. */
static void plan_sharing(GenEngine *e) {
    for (int i = 0; i < e->n_run; i++) {
        Seq *s = e->run[i];
        e->fol[i] = -1;
        e->share[i] = 0;
        if (e->o.no_prefix_sharing || s->n_cached != 0 || s->n_tok < 2) continue;
        for (int j = 0; j < e->n_run; j++) {
            const Seq *d = e->run[j];
            if (j == i || (j > i && d->n_cached == 0)) continue;
            int lim = s->n_tok - 1 < d->n_tok ? s->n_tok - 1 : d->n_tok;
            if (lim <= e->share[i]) continue;
            int n = common_prefix(s->tok, d->tok, lim);
            if (n > e->share[i]) { e->share[i] = n; e->fol[i] = j; }
        }
    }
}

static void finish_seq(GenEngine *e, int run_index, GenFinish f) {
    Seq *s = e->run[run_index];
    s->finish = f;
    seq_release_blocks(e, s);
    run_remove(e, run_index);
    push_done(e, s);
}

int gen_engine_step(GenEngine *e, char err[ERR_LEN]) {
    if (!e) return err_set(err, ERR_INVAL, "gen_engine_step: NULL engine");
    if (e->n_run == 0 && e->n_wait == 0) return 0;
    admit(e);
    ensure_blocks(e);
    if (e->n_run == 0) return e->n_wait;       /* only held sequences wait */
    const ModelConfig *c = &e->m->cfg;
    int R = 0, S = 0, *nchunk = e->nchunk;
    plan_sharing(e);
    /* decode rows first, then prefill chunks in admission order, then the sequences that take a prefix from
     * another one (after their donor's chunk, whose K/V they may copy in this very step) */
    for (int pass = 0; pass < 3; pass++)
        for (int i = 0; i < e->n_run; i++) {
            Seq *s = e->run[i];
            int unc = s->n_tok - s->n_cached;
            if (pass == 0) nchunk[i] = 0;
            if (pass < 2 && ((pass == 0) != (unc == 1) || e->fol[i] >= 0)) continue;
            if (pass == 2) {
                if (e->fol[i] < 0) continue;
                Seq *d = e->run[e->fol[i]];
                if (d->n_cached + nchunk[e->fol[i]] < e->share[i]) { e->st.prefix_parked++; continue; }
                e->cp_src[e->n_cp] = d;
                e->cp_dst[e->n_cp] = s;
                e->cp_len[e->n_cp++] = e->share[i];
                s->n_cached = e->share[i];           /* true once forward_rows made the copies */
                unc = s->n_tok - s->n_cached;
                e->st.prefill_shared += e->share[i];
                e->st.prefix_hits++;
            }
            int n = unc < e->max_rows - R ? unc : e->max_rows - R;
            if (n <= 0) continue;
            for (int k = 0; k < n; k++) {
                int p = s->n_cached + k;
                e->row_tok[R + k] = s->tok[p];
                e->row_pos[R + k] = p;
                e->row_tab[R + k] = s->blocks;
            }
            R += n;
            nchunk[i] = n;
            /* a decode row feeds the last sampled token; every other row (prompt, recompute) is prefill */
            int dec = s->n_cached + n == s->n_tok && s->n_tok > s->n_prompt;
            e->st.decode_rows += dec;
            e->st.prefill_rows += n - dec;
            if (s->n_cached + n == s->n_tok) {
                e->samp_seq[S] = s;
                e->samp_row[S++] = R - 1;
            }
        }
    forward_rows(e, R);
    e->n_cp = 0;
    for (int i = 0; i < e->n_run; i++) e->run[i]->n_cached += nchunk[i];
    e->st.steps++;
    e->st.rows += R;
    if (S == 0) return e->n_run + e->n_wait;

    int H = c->hidden, V = c->vocab;
    for (int k = 0; k < S; k++)
        memcpy(e->xs + (long)k * H, e->x + (long)e->samp_row[k] * H, (size_t)H * sizeof(float));
    e->m->be->rmsnorm(e->m->bc, e->xs, NULL, e->xs, e->m->w.norm, S, H, c->rms_eps);
    linear(e, 4 * c->n_layers, e->logits, e->xs, NULL, S);
#pragma omp parallel for schedule(dynamic, 1) if ((long)S * V >= 262144)
    for (int k = 0; k < S; k++) {
        Seq *s = e->samp_seq[k];
        char perr[ERR_LEN];
        double u = rng_uniform(s->seed, s->group_id, s->sample, s->rng_offset + (uint32_t)(s->n_tok - s->n_prompt));
        e->samp_rc[k] = sample_token(e->logits + (long)k * V, V, &s->sp, u, e->samp_scratch + e->samp_scratch_bytes * k,
                                     &e->samp_tok[k], &e->samp_lp[k], perr);
    }
    int rc = 0;
    for (int k = 0; k < S; k++) {
        Seq *s = e->samp_seq[k];
        int i = 0;
        while (e->run[i] != s) i++;
        if (e->samp_rc[k]) {
            rc = err_set(err, e->samp_rc[k], "sequence %llu: sampling failed (non-finite logits?); finished with "
                         "%d tokens", (unsigned long long)s->id, s->n_tok - s->n_prompt);
            finish_seq(e, i, GEN_FINISH_LENGTH);
            continue;
        }
        int g = s->n_tok - s->n_prompt;
        s->tok[s->n_tok++] = e->samp_tok[k];
        s->lp[g] = e->samp_lp[k];
        s->ver[g] = e->version;
        e->st.sampled++;
        if (is_stop(e, s, e->samp_tok[k])) finish_seq(e, i, GEN_FINISH_STOP);
        else if (g + 1 >= s->max_tokens) finish_seq(e, i, GEN_FINISH_LENGTH);
    }
    if (rc) return rc;
    return e->n_run + e->n_wait;
}

int gen_engine_take(GenEngine *e, GenResult *out) {
    if (!e || !out || e->n_done == 0) return 0;
    Seq *s = e->done[0];
    memmove(e->done, e->done + 1, (size_t)(e->n_done - 1) * sizeof(Seq *));
    e->n_done--;
    int n = s->n_tok - s->n_prompt;
    *out = (GenResult){ .id = s->id, .tag = s->tag, .group_id = s->group_id, .sample = s->sample, .n = n,
                        .finish = s->finish, .preemptions = s->preemptions };
    out->tokens = xmalloc((size_t)(n > 0 ? n : 1) * sizeof(int32_t));
    memcpy(out->tokens, s->tok + s->n_prompt, (size_t)n * sizeof(int32_t));
    out->logprobs = s->lp;
    out->versions = s->ver;
    s->lp = NULL;
    s->ver = NULL;
    seq_free(s);
    return 1;
}

int gen_engine_run_all(GenEngine *e, const int32_t *const *prompts, const int *n_prompt, size_t n, int k,
                       const GenRequest *tmpl, GenResult *res, long *n_tokens, char err[ERR_LEN]) {
    *n_tokens = 0;
    for (size_t i = 0; i < n; i++)
        for (int j = 0; j < k; j++) {
            GenRequest q = *tmpl;
            q.tag = q.group_id = i;
            q.sample = (uint32_t)j;
            q.prompt = prompts[i];
            q.n_prompt = n_prompt[i];
            char why[ERR_LEN];
            if (gen_engine_add(e, &q, NULL, why)) return err_set(err, ERR_INVAL, "prompt %zu: %s", i, why);
        }
    int left, rc = 0;
    GenResult x;
    char why[ERR_LEN];
    do {                  /* a failed step (NaN logits) drops the sequences it hit; the others go on */
        left = gen_engine_step(e, why);
        if (left < 0 && !rc) rc = err_set(err, left, "%s", why);
        while (gen_engine_take(e, &x)) {
            if (x.tag < n && x.sample < (uint32_t)k) {
                res[x.tag * (size_t)k + x.sample] = x;
                *n_tokens += x.n;
            } else {
                gen_result_free(&x);
            }
        }
    } while (left != 0);
    return rc;
}

void gen_result_free(GenResult *r) {
    if (!r) return;
    xfree(r->tokens);
    xfree(r->logprobs);
    xfree(r->versions);
    r->tokens = NULL;
    r->logprobs = NULL;
    r->versions = NULL;
}

int gen_engine_cancel(GenEngine *e, uint64_t tag) {
    if (!e) return 0;
    int n = 0;
    for (int i = 0; i < e->n_run;)
        if (e->run[i]->tag == tag) {
            Seq *s = e->run[i];
            seq_release_blocks(e, s);
            run_remove(e, i);
            seq_free(s);
            n++;
        } else {
            i++;
        }
    Seq ***lists[2] = { &e->wait, &e->done };
    int *counts[2] = { &e->n_wait, &e->n_done };
    for (int q = 0; q < 2; q++) {
        Seq **a = *lists[q];
        int k = 0;
        for (int i = 0; i < *counts[q]; i++)
            if (a[i]->tag == tag) { seq_free(a[i]); n++; }
            else a[k++] = a[i];
        *counts[q] = k;
    }
    return n;
}

void gen_engine_hold_new(GenEngine *e, int hold) {
    if (e) e->hold_new = hold != 0;
}

void gen_engine_set_version(GenEngine *e, int64_t version) {
    if (e) e->version = version;
}

int gen_engine_preempt_all(GenEngine *e) {
    if (!e) return 0;
    int n = 0;
    while (e->n_run > 0) {                           /* newest first: each goes to the front, so the oldest leads */
        preempt_last(e);
        n++;
    }
    return n;
}

void gen_engine_stats(const GenEngine *e, GenStats *s) {
    *s = e->st;
    s->running = e->n_run;
    s->waiting = e->n_wait;
    s->finished = e->n_done;
    s->in_progress = e->n_run;
    for (int i = 0; i < e->n_wait; i++) s->in_progress += e->wait[i]->n_tok > e->wait[i]->n_prompt;
    s->free_blocks = e->n_free;
    s->n_blocks = e->n_blocks;
}

long gen_engine_capacity_tokens(const GenEngine *e) { return e ? e->ctx_max : 0; }
