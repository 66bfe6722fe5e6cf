/* services/learner/weights.c: the weight server of learner rank 0 (see weights.h). */
#include "weights.h"

#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "core/log.h"
#include "model/probe.h"
#include "net/net.h"
#include "net/monitor.h"
#include "net/zap.h"

typedef struct {
    int      tensor;        /* index into tensors */
    uint64_t offset;        /* bytes into the tensor */
    uint32_t bytes;
    uint64_t checksum;      /* wchunk_checksum(data) */
    uint64_t snap_off;      /* bytes into the snapshot */
} Chunk;

typedef struct {
    char     name[96];
    int      ndim;
    uint64_t shape[2];
} WTensor;

struct WeightServer {
    void    *sock;
    char     endpoint[256];
    char    *run_id;
    int64_t  max_msg;
    int64_t  version;
    uint8_t *snap;          /* all tensors back to back, fp32 little-endian */
    uint64_t total_bytes;
    WTensor *tensors;
    int      n_tensors;
    Chunk   *chunks;
    int      n_chunks;
    int      curve;         /* a CURVE server: requests are checked by their key's role */
    uint64_t refused;       /* requests from keys that get no weights */
    NetMonitor *monitor;    /* failed handshakes, logged (net/monitor.h) */
    LogLimit warn_bad, warn_refused, warn_send;
};

WeightServer *wsrv_open(void *zctx, const char *endpoint, const char *run_id, int64_t max_msg_bytes,
                        const CurveKeys *curve, char err[ERR_LEN]) {
    NetOpts o = {.bind = true, .max_msg_bytes = max_msg_bytes, .curve = curve, .curve_server = true};
    char e2[ERR_LEN];
    void *s = net_socket(zctx, ZMQ_ROUTER, endpoint, &o, e2);
    if (!s) {
        err_set(err, ERR_IO, "the weight server (cluster.weights_bind): %s", e2);
        return NULL;
    }
    int zero = 0;
    zmq_setsockopt(s, ZMQ_SNDHWM, &zero, sizeof zero);   /* a full version per requester may queue */
    WeightServer *ws = xcalloc(1, sizeof *ws);
    ws->sock = s;
    ws->run_id = xstrdup(run_id ? run_id : "");
    ws->max_msg = max_msg_bytes;
    ws->version = -1;
    ws->curve = curve && curve->on;
    if (!(ws->monitor = net_monitor_start(zctx, s, "weights", err))) {
        wsrv_close(ws);
        return NULL;
    }
    if (net_last_endpoint(s, ws->endpoint, sizeof ws->endpoint)) snprintf(ws->endpoint, sizeof ws->endpoint, "%s", endpoint);
    log_info("weights: serving on %s", ws->endpoint);
    return ws;
}

int wsrv_publish(WeightServer *ws, const Model *m, const float *params, const float *probe, int n_probe,
                 int64_t version, char err[ERR_LEN]) {
    if (version < ws->version)
        return err_set(err, ERR_INVAL, "weights: version %lld is older than the published %lld", (long long)version,
                       (long long)ws->version);
    int nt = model_n_tensors(m), nall = nt + (n_probe > 0);   /* the probe: one more tensor after the model's */
    uint64_t total = (uint64_t)(n_probe > 0 ? n_probe : 0) * 4;
    int nchunks = n_probe > 0 ? (int)wchunk_pieces(total) : 0;
    for (int i = 0; i < nt; i++) {
        uint64_t b = (uint64_t)model_tensor(m, i)->numel * 4;
        total += b;
        nchunks += (int)wchunk_pieces(b);
    }
    if (ws->n_tensors != nall || ws->total_bytes != total || ws->n_chunks != nchunks) {
        xfree(ws->snap); xfree(ws->tensors); xfree(ws->chunks);
        ws->snap = xmalloc(total ? total : 1);
        ws->tensors = xcalloc((size_t)nall, sizeof *ws->tensors);
        ws->chunks = xcalloc((size_t)nchunks, sizeof *ws->chunks);
    }
    ws->n_tensors = nall;
    ws->total_bytes = total;
    ws->n_chunks = nchunks;
    if (!params) params = model_host_slab(m, MODEL_PARAMS);
    float *staged = NULL;             /* a device backend's slab, read back once */
    if (!params) {
        staged = xmalloc((size_t)model_n_params(m) * sizeof(float));
        int rc = model_read(m, MODEL_PARAMS, staged, err);
        if (rc) { xfree(staged); return rc; }
        params = staged;
    }
    uint64_t off = 0;
    int c = 0;
    for (int i = 0; i < nall; i++) {
        const ModelTensor *t = i < nt ? model_tensor(m, i) : NULL;
        WTensor *w = &ws->tensors[i];
        snprintf(w->name, sizeof w->name, "%s", t ? t->name : PROBE_TENSOR);
        w->ndim = t ? t->ndim : 1;
        if (t) for (int d = 0; d < t->ndim && d < 2; d++) w->shape[d] = (uint64_t)t->shape[d];
        else w->shape[0] = (uint64_t)n_probe;
        uint64_t b = (uint64_t)(t ? t->numel : n_probe) * 4;
        memcpy(ws->snap + off, t ? params + t->offset : probe, b);
        uint64_t o = 0;
        do {
            uint32_t n = (uint32_t)(b - o < WCHUNK_BYTES ? b - o : WCHUNK_BYTES);
            ws->chunks[c] = (Chunk){.tensor = i, .offset = o, .bytes = n, .snap_off = off + o,
                                    .checksum = wchunk_checksum(ws->snap + off + o, n)};
            c++;
            o += n;
        } while (o < b);
        off += b;
    }
    xfree(staged);
    ws->version = version;
    log_info("weights: version %lld published (%d tensors, %d chunks, %.1f MB%s)", (long long)version, nt,
             ws->n_chunks, (double)total / 1e6, n_probe > 0 ? ", with the weight probe" : "");
    return 0;
}

static int send_chunk(WeightServer *ws, const uint8_t *peer, size_t peer_len, int idx) {
    const Chunk *c = &ws->chunks[idx];
    const WTensor *t = &ws->tensors[c->tensor];
    Dapo__WeightUpdate u = DAPO__WEIGHT_UPDATE__INIT;
    uint64_t shape[2] = {t->shape[0], t->shape[1]};
    u.run_id = ws->run_id;
    u.version = ws->version;
    u.chunk_index = (uint32_t)idx;
    u.chunk_count = (uint32_t)ws->n_chunks;
    u.tensor_name = (char *)t->name;
    u.dtype = "F32";
    u.shape = shape;
    u.n_shape = (size_t)t->ndim;
    u.offset = c->offset;
    u.data.data = ws->snap + c->snap_off;
    u.data.len = c->bytes;
    u.checksum = c->checksum;
    u.total_bytes = ws->total_bytes;
    return net_send(ws->sock, peer, peer_len, DAPO__MSG_TYPE__MSG_WEIGHT_UPDATE, &u.base, true);
}

int wsrv_serve(WeightServer *ws, int timeout_ms, char err[ERR_LEN]) {
    int sent = 0;
    for (int first = 1;; first = 0) {
        NetMsg m;
        char e[ERR_LEN];
        int rc = net_recv(ws->sock, &m, first ? timeout_ms : 0, (size_t)ws->max_msg, e);
        if (rc == ERR_AGAIN || rc == ERR_TIMEOUT) {   /* nothing waiting: the warnings held back, once due */
            log_limit_flush(&ws->warn_bad, "weights: bad requests dropped");
            log_limit_flush(&ws->warn_refused, "weights: requests refused");
            log_limit_flush(&ws->warn_send, "weights: failed sends");
            return sent;
        }
        if (rc == ERR_DECODE || rc == ERR_TOO_BIG || rc == ERR_VERSION) {
            log_warn_limited(&ws->warn_bad, 10000, "weights: bad request dropped: %s", e);
            net_msg_free(&m);
            continue;
        }
        if (rc) return err_set(err, rc, "weights: receive: %s", e);
        if (m.type != DAPO__MSG_TYPE__MSG_WEIGHT_RESEND) {
            log_warn_limited(&ws->warn_bad, 10000, "weights: unexpected %s message dropped", net_type_name(m.type));
            net_msg_free(&m);
            continue;
        }
        char name[128] = "";
        zap_key_name(m.peer_key, name, sizeof name);
        const char *role = zap_key_role(name);
        if (ws->curve && !(role && (!strcmp(role, "rollout") || !strcmp(role, "learner")))) {
            ws->refused++;                 /* the weights go to rollout and learner keys only (issue 38) */
            log_warn_limited(&ws->warn_refused, 10000, "weights: refused a request from %s with key %s: only rollout "
                             "and learner keys (authorized_keys/rollout.pub, rollout-NAME.pub, learner.pub, "
                             "learner-NAME.pub) get weights",
                             m.peer_address[0] ? m.peer_address : "?", m.peer_key[0] ? m.peer_key : "none");
            net_msg_free(&m);
            continue;
        }
        const Dapo__WeightResend *r = (const Dapo__WeightResend *)m.msg;
        if (ws->version < 0 || r->version > ws->version) {
            log_debug("weights: %s asked for version %lld, holding %lld", r->worker_id, (long long)r->version,
                      (long long)ws->version);
            net_msg_free(&m);
            continue;
        }
        int n = 0, bad = 0;
        if (r->n_chunk_indices == 0 || r->version < ws->version) {  /* a newer version: all of it */
            for (int i = 0; i < ws->n_chunks && !bad; i++, n++) bad = send_chunk(ws, m.peer, m.peer_len, i);
        } else {
            for (size_t i = 0; i < r->n_chunk_indices && !bad; i++)
                if (r->chunk_indices[i] < (uint32_t)ws->n_chunks) { bad = send_chunk(ws, m.peer, m.peer_len, (int)r->chunk_indices[i]); n++; }
        }
        if (bad)                           /* worker_id is the client's text: bounded, rate-limited */
            log_warn_limited(&ws->warn_send, 10000, "weights: sending version %lld to %.64s (from %s) failed: %s",
                             (long long)ws->version, r->worker_id, m.peer_address[0] ? m.peer_address : "?",
                             err_str(bad));
        else log_debug("weights: %d chunks of version %lld to %s", n, (long long)ws->version, r->worker_id);
        sent += bad ? 0 : n;
        net_msg_free(&m);
    }
}

void wsrv_security(const WeightServer *ws, unsigned long long *requests_refused, unsigned long long *handshakes_failed) {
    *requests_refused = *handshakes_failed = 0;
    if (!ws) return;
    NetMonitorStats st;
    net_monitor_stats(ws->monitor, &st);
    *requests_refused = ws->refused;
    *handshakes_failed = st.plaintext + st.protocol;
}

int64_t wsrv_version(const WeightServer *ws) { return ws ? ws->version : -1; }
int wsrv_chunk_count(const WeightServer *ws) { return ws ? ws->n_chunks : 0; }
const char *wsrv_endpoint(const WeightServer *ws) { return ws ? ws->endpoint : ""; }
void *wsrv_socket(WeightServer *ws) { return ws ? ws->sock : NULL; }

void wsrv_close(WeightServer *ws) {
    if (!ws) return;
    net_monitor_stop(ws->monitor);
    if (ws->sock) zmq_close(ws->sock);
    xfree(ws->run_id); xfree(ws->snap); xfree(ws->tensors); xfree(ws->chunks);
    xfree(ws);
}
