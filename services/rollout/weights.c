/* services/rollout/weights.c: staging of chunked, checksummed weight versions (see weights.h). */
#include "weights.h"

#include <string.h>
#include <zmq.h>

#include "core/clock.h"
#include "core/log.h"
#include "model/probe.h"
#include "net/wchunk.h"

struct WeightFetch {
    void        *sock;
    void        *zctx;           /* borrowed: the socket is made again on it (reopen) */
    char         endpoint[256];
    NetOpts      opts;           /* its curve keys borrowed for f's life */
    int          fails;          /* requests in a row that found no connection */
    char         worker_id[128];
    const Model *m;
    size_t       max_bytes;
    int64_t      version;        /* being staged (or staged); -1 none */
    int          state;          /* 0 idle (nothing wanted / swapped in), 1 fetching, 2 complete */
    uint32_t     chunk_count;    /* 0: not known yet */
    uint8_t     *have;           /* [chunk_count] */
    uint32_t     n_have;
    long        *elems;          /* [n_tensors] elements received per tensor */
    float       *stage;          /* [n_params] */
    float        probe_stage[PROBE_TOKENS], probe[PROBE_TOKENS];   /* the weight probe of the version being staged /
                                                                     the one swapped in last (model/probe.h) */
    int          n_probe_stage, n_probe;
    int64_t      last_progress_ms;
    WfetchStats  st;
};

WeightFetch *wfetch_new(void *zctx, const char *endpoint, const char *worker_id, const Model *m,
                        int64_t max_msg_bytes, const CurveKeys *curve, char err[ERR_LEN]) {
    NetOpts o = { .max_msg_bytes = max_msg_bytes, .curve = curve };
    void *s = net_socket(zctx, ZMQ_DEALER, endpoint, &o, err);
    if (!s) return NULL;
    WeightFetch *f = xcalloc(1, sizeof *f);
    f->sock = s;
    f->zctx = zctx;
    snprintf(f->endpoint, sizeof f->endpoint, "%s", endpoint);
    f->opts = o;
    snprintf(f->worker_id, sizeof f->worker_id, "%s", worker_id ? worker_id : "");
    f->m = m;
    f->max_bytes = (size_t)(max_msg_bytes > 0 ? max_msg_bytes : 256 << 20);
    f->version = -1;
    f->elems = xcalloc((size_t)model_n_tensors(m), sizeof(long));
    return f;
}

void wfetch_free(WeightFetch *f) {
    if (!f) return;
    zmq_close(f->sock);
    xfree(f->have);
    xfree(f->elems);
    xfree(f->stage);
    xfree(f);
}

static void send_request(WeightFetch *f) {
    Dapo__WeightResend r = DAPO__WEIGHT_RESEND__INIT;
    r.version = f->version;
    r.worker_id = f->worker_id;
    uint32_t *missing = NULL;
    if (f->chunk_count && f->n_have) {
        missing = xmalloc((size_t)(f->chunk_count - f->n_have) * sizeof(uint32_t));
        for (uint32_t i = 0; i < f->chunk_count; i++)
            if (!f->have[i]) missing[r.n_chunk_indices++] = i;
        r.chunk_indices = missing;
    }
    int rc = net_send(f->sock, NULL, 0, DAPO__MSG_TYPE__MSG_WEIGHT_RESEND, &r.base, true);
    f->fails = rc ? f->fails + 1 : 0;
    if (rc && f->fails % 5 == 0) {
        /* no connection for a while: say where, and make a new one (net_socket_reopen: a key that was missing from
         * learner rank 0's authorized_keys for a while would otherwise keep this rollout out for good) */
        log_warn("weights: no connection to the weight server at %s for %d tries (cluster.weights: is learner rank 0 "
                 "up and reachable?%s)", f->endpoint, f->fails,
                 f->opts.curve && f->opts.curve->on ? " CURVE is on: is this worker's key in its authorized_keys?" : "");
        char err[ERR_LEN];
        if (net_socket_reopen(&f->sock, f->zctx, ZMQ_DEALER, f->endpoint, &f->opts, err)) log_warn("weights: %s", err);
    } else if (rc) log_warn("weights: request for version %lld not sent: %s", (long long)f->version, err_str(rc));
    else if (r.n_chunk_indices) log_info("weights: asked again for %zu missing chunks of version %lld",
                                         r.n_chunk_indices, (long long)f->version);
    f->st.resends++;
    xfree(missing);
    f->last_progress_ms = clock_ms();
}

static void reset_stage(WeightFetch *f, int64_t v) {
    f->version = v;
    f->state = 1;
    f->chunk_count = 0;
    f->n_have = 0;
    xfree(f->have);
    f->have = NULL;
    memset(f->elems, 0, (size_t)model_n_tensors(f->m) * sizeof(long));
    f->n_probe_stage = 0;
    if (!f->stage) {
        f->stage = xmalloc((size_t)model_n_params(f->m) * sizeof(float));
        log_info("weights: staging buffer %.1f MiB", (double)model_n_params(f->m) * 4 / 1048576.0);
    }
}

void wfetch_want(WeightFetch *f, int64_t v, int64_t loaded) {
    if (!f || v <= loaded || v <= f->version) return;
    log_info("weights: fetching policy version %lld (loaded %lld)", (long long)v, (long long)loaded);
    reset_stage(f, v);
    send_request(f);
}


static int is_complete(WeightFetch *f) {
    if (!f->chunk_count || f->n_have < f->chunk_count) return 0;
    for (int t = 0; t < model_n_tensors(f->m); t++)
        if (f->elems[t] != model_tensor(f->m, t)->numel) {
            log_error("weights: version %lld: every chunk arrived but tensor %s holds %ld of %ld elements; "
                      "fetching it again", (long long)f->version, model_tensor(f->m, t)->name, f->elems[t],
                      model_tensor(f->m, t)->numel);
            int64_t v = f->version;
            reset_stage(f, v);
            return 0;
        }
    return 1;
}

int wfetch_chunk(WeightFetch *f, const Dapo__WeightUpdate *u, char err[ERR_LEN]) {
    if (!f || !u) return err_set(err, ERR_INVAL, "NULL chunk");
    if (f->version < 0 || u->version < f->version || (u->version == f->version && f->state != 1)) return 1;
    if (u->version > f->version) {
        log_info("weights: version %lld arrived while staging %lld: taking the newer one", (long long)u->version,
                 (long long)f->version);
        reset_stage(f, u->version);
    }
    int rc = wchunk_check(u, f->chunk_count, err);
    if (rc) return rc;
    if (!f->chunk_count) {
        f->chunk_count = u->chunk_count;
        f->have = xcalloc(u->chunk_count, 1);
    }
    if (f->have[u->chunk_index]) return 1;
    if (!strcmp(u->tensor_name, PROBE_TENSOR)) {   /* the weight probe: one F32 chunk of at most PROBE_TOKENS values */
        if (strcmp(u->dtype, "F32") || u->n_shape != 1 || u->shape[0] < 1 || u->shape[0] > PROBE_TOKENS ||
            u->offset != 0 || u->data.len != u->shape[0] * 4)
            return err_set(err, ERR_INVAL, "chunk %u: the weight probe (%s) is not one F32 chunk of 1..%d values",
                           u->chunk_index, PROBE_TENSOR, PROBE_TOKENS);
        wchunk_decode(f->probe_stage, u->data.data, (size_t)u->shape[0], u->dtype);
        f->n_probe_stage = (int)u->shape[0];
        f->have[u->chunk_index] = 1;
        f->n_have++;
        return 0;
    }
    int ti = model_tensor_index(f->m, u->tensor_name);
    const ModelTensor *t = model_tensor(f->m, ti);   /* NULL when absent */
    if (!t && model_config(f->m)->tie_embeddings && strcmp(u->tensor_name, "lm_head.weight") == 0) {
        f->have[u->chunk_index] = 1;             /* tied: lm_head is the embedding */
        f->n_have++;
        return 0;
    }
    if (!t) return err_set(err, ERR_NOTFOUND, "chunk %u: tensor '%s' is not in the model", u->chunk_index, u->tensor_name);
    size_t es = wchunk_dtype_size(u->dtype);
    if (!es) return err_set(err, ERR_INVAL, "chunk %u (%s): dtype '%s' not F32/BF16/F16", u->chunk_index, t->name, u->dtype);
    if ((int)u->n_shape != t->ndim) return err_set(err, ERR_INVAL, "chunk %u (%s): %zu dims, model has %d", u->chunk_index, t->name, u->n_shape, t->ndim);
    for (int d = 0; d < t->ndim; d++)
        if ((long)u->shape[d] != t->shape[d])
            return err_set(err, ERR_INVAL, "chunk %u (%s): shape differs from the model's", u->chunk_index, t->name);
    if (u->offset % es || u->data.len % es || u->offset / es > (uint64_t)t->numel ||
        u->data.len / es > (uint64_t)t->numel - u->offset / es)
        return err_set(err, ERR_INVAL, "chunk %u (%s): bytes [%llu, +%zu) outside the tensor", u->chunk_index, t->name,
                       (unsigned long long)u->offset, u->data.len);
    float *dst = f->stage + t->offset + u->offset / es;
    size_t n = u->data.len / es;
    wchunk_decode(dst, u->data.data, n, u->dtype);
    f->have[u->chunk_index] = 1;
    f->n_have++;
    f->elems[ti] += (long)n;
    return 0;
}

int wfetch_poll(WeightFetch *f) {
    if (!f) return 0;
    int ok = 0;
    char err[ERR_LEN];
    for (;;) {
        NetMsg m;
        int rc = net_recv(f->sock, &m, 0, f->max_bytes, err);
        if (rc == ERR_AGAIN || rc == ERR_TIMEOUT) break;
        if (rc) { log_warn("weights: bad frame dropped: %s", err); f->st.chunks_bad++; continue; }
        if (m.type == DAPO__MSG_TYPE__MSG_WEIGHT_UPDATE) {
            rc = wfetch_chunk(f, (const Dapo__WeightUpdate *)m.msg, err);
            if (rc == 0) { ok++; f->st.chunks_ok++; f->last_progress_ms = clock_ms(); }
            else if (rc < 0) { log_warn("weights: chunk refused: %s", err); f->st.chunks_bad++; }
        } else {
            log_warn("weights: unexpected %s message on the weight channel dropped", net_type_name(m.type));
        }
        net_msg_free(&m);
    }
    if (f->state == 1) {
        if (is_complete(f)) {
            f->state = 2;
            f->st.versions++;
            log_info("weights: version %lld staged (%u chunks)", (long long)f->version, f->chunk_count);
        } else if (clock_ms() - f->last_progress_ms >= WFETCH_RETRY_MS) {
            send_request(f);
        }
    }
    return ok;
}

void wfetch_forget(WeightFetch *f) {
    if (!f) return;
    f->state = 0;
    f->version = -1;
    f->chunk_count = 0;
    f->n_have = 0;
    xfree(f->have);
    f->have = NULL;
}

int64_t wfetch_ready(const WeightFetch *f) { return f && f->state == 2 ? f->version : -1; }
int wfetch_busy(const WeightFetch *f) { return f && f->state == 1; }

int64_t wfetch_swap(WeightFetch *f, Model *m) {
    if (!f || f->state != 2 || model_n_params(m) != model_n_params(f->m)) return -1;
    char err[ERR_LEN];
    if (model_write(m, MODEL_PARAMS, f->stage, err)) {   /* through the model's backend, wherever its slab lives */
        log_error("weights: version %lld not swapped in: %s", (long long)f->version, err);
        return -1;
    }
    f->state = 0;
    f->chunk_count = 0;
    f->n_have = 0;
    f->n_probe = f->n_probe_stage;
    memcpy(f->probe, f->probe_stage, sizeof f->probe);
    return f->version;       /* stays as the staged version: older chunks are ignored from now on */
}

int wfetch_probe(const WeightFetch *f, const float **lp) {
    *lp = f ? f->probe : NULL;
    return f ? f->n_probe : 0;
}

void wfetch_stats(const WeightFetch *f, WfetchStats *s) {
    if (f) *s = f->st;
    else memset(s, 0, sizeof *s);
}
