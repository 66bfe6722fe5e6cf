/* tests/integration/test_rollout_daemon.c: dapo-rollout against the scripted fake coordinator and a fake weight
 * server (a ROUTER thread playing learner rank 0) — registration with capacity in sequences and KV tokens,
 * GenerateGroup -> GroupResult equal to the engine run in-process (batch-invariant mode: bitwise), credit back
 * per sequence, text decoded with special tokens skipped, pause + cancel, bad groups answered with an error
 * result, garbage frames survived, a weight update to version 1 with one corrupted and one dropped chunk that
 * are asked for again, the swap, WeightAck and heartbeats with the new version, results on the new weights,
 * a pause that ends when the worker registers with a new coordinator session, and SIGTERM -> Goodbye. Model: tests/data/model/qwen2_gqa; tokenizer: data/tokenizers/tiny. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <xxhash.h>
#include <zmq.h>

#include "core/clock.h"
#include "model/generate.h"
#include "tests/support/fake_coord.h"
#include "tests/testutil.h"
#include "tokenizer/tokenizer.h"
#include "tests/model_slabs.h"

#define CHUNK_BYTES 4096
#define CORRUPT_IDX 3
#define DROP_IDX 7

typedef struct {
    char      name[96];
    uint64_t  shape[2];
    int       ndim;
    uint64_t  offset;
    uint8_t  *data;
    size_t    len;
    const char *dtype;
} Chunk;

typedef struct {
    void         *sock;
    char          endpoint[128];
    volatile int  stop;
    Chunk        *chunks;
    int           n;
    int           served_corrupt, served_drop;
    int           n_requests;
    size_t        req_n[16];          /* chunk_indices count per request */
    uint32_t      req_idx[16][8];
    int64_t       req_version[16];
    pthread_t     th;
} WServer;

typedef struct {
    void     *ctx;
    FakeCoord fc;
    pid_t     pid;
    WServer   ws;
    Model    *m0, *m1;
    Tokenizer *tok;
    /* what the pump saw */
    long      credits, errors, acks, hb_version;
    int64_t   ack_version;
    NetMsg    results[8];
    int       n_results;
} Fix;

/* --------------------------------------------------------------------------------------- fake weight server */
static void *wserver_main(void *arg) {
    WServer *s = arg;
    while (!s->stop) {
        NetMsg m;
        char err[ERR_LEN];
        int rc = net_recv(s->sock, &m, 50, 0, err);
        if (rc) continue;
        if (m.type == DAPO__MSG_TYPE__MSG_WEIGHT_RESEND) {
            const Dapo__WeightResend *r = (const Dapo__WeightResend *)m.msg;
            int k = s->n_requests < 16 ? s->n_requests : 15;
            s->req_n[k] = r->n_chunk_indices;
            s->req_version[k] = r->version;
            for (size_t i = 0; i < r->n_chunk_indices && i < 8; i++) s->req_idx[k][i] = r->chunk_indices[i];
            s->n_requests++;
            if (r->version == 1) {
                size_t cnt = r->n_chunk_indices ? r->n_chunk_indices : (size_t)s->n;
                for (size_t i = 0; i < cnt; i++) {
                    uint32_t idx = r->n_chunk_indices ? r->chunk_indices[i] : (uint32_t)i;
                    if (idx >= (uint32_t)s->n) continue;
                    if (idx == DROP_IDX && !s->served_drop) { s->served_drop = 1; continue; }
                    const Chunk *c = &s->chunks[idx];
                    Dapo__WeightUpdate u = DAPO__WEIGHT_UPDATE__INIT;
                    u.run_id = "fake-run";
                    u.version = 1;
                    u.chunk_index = idx;
                    u.chunk_count = (uint32_t)s->n;
                    u.tensor_name = (char *)c->name;
                    u.dtype = (char *)c->dtype;
                    u.shape = (uint64_t *)c->shape;
                    u.n_shape = (size_t)c->ndim;
                    u.offset = c->offset;
                    u.checksum = XXH64(c->data, c->len, 0);
                    uint8_t bad[CHUNK_BYTES];
                    u.data.data = c->data;
                    u.data.len = c->len;
                    if (idx == CORRUPT_IDX && !s->served_corrupt) {   /* one flipped byte: checksum fails */
                        s->served_corrupt = 1;
                        memcpy(bad, c->data, c->len);
                        bad[c->len / 2] ^= 0x40;
                        u.data.data = bad;
                    }
                    net_send(s->sock, m.peer, m.peer_len, DAPO__MSG_TYPE__MSG_WEIGHT_UPDATE, &u.base, false);
                }
                /* garbage on the weight channel too */
                if (s->n_requests == 1) {
                    zmq_send(s->sock, m.peer, m.peer_len, ZMQ_SNDMORE);
                    zmq_send(s->sock, "DAPOjunk", 8, 0);
                }
            }
        }
        net_msg_free(&m);
    }
    return NULL;
}

/* chunks of m1's tensors, <= CHUNK_BYTES each; the embedding is sent as BF16 (its values are bf16-exact) */
static void make_chunks(WServer *s, Model *m1) {
    s->chunks = xcalloc(4096, sizeof(Chunk));
    for (int t = 0; t < model_n_tensors(m1); t++) {
        const ModelTensor *mt = model_tensor(m1, t);
        int bf16 = strcmp(mt->name, "model.embed_tokens.weight") == 0;
        size_t es = bf16 ? 2 : 4, total = (size_t)mt->numel * es;
        uint8_t *bytes = xmalloc(total);
        const float *p = tu_params(m1) + mt->offset;
        for (long i = 0; i < mt->numel; i++) {
            if (bf16) {
                uint32_t b;
                memcpy(&b, &p[i], 4);
                bytes[2 * i] = (uint8_t)(b >> 16);
                bytes[2 * i + 1] = (uint8_t)(b >> 24);
            } else {
                memcpy(bytes + 4 * i, &p[i], 4);
            }
        }
        for (size_t off = 0; off < total; off += CHUNK_BYTES) {
            Chunk *c = &s->chunks[s->n++];
            assert_true(s->n < 4096);
            snprintf(c->name, sizeof c->name, "%s", mt->name);
            c->ndim = mt->ndim;
            for (int d = 0; d < mt->ndim; d++) c->shape[d] = (uint64_t)mt->shape[d];
            c->offset = off;
            c->len = total - off < CHUNK_BYTES ? total - off : CHUNK_BYTES;
            c->data = xmalloc(c->len);
            memcpy(c->data, bytes + off, c->len);
            c->dtype = bf16 ? "BF16" : "F32";
        }
        xfree(bytes);
    }
    assert_true(s->n > DROP_IDX);
}

/* ------------------------------------------------------------------------------------------- fixture */
static Model *load(const char *name) {
    char p[512], err[ERR_LEN];
    snprintf(p, sizeof p, "%s/tests/data/model/%s", tu_root(), name);
    ModelOptions o = { .max_tokens = 8 };
    Model *m = model_load(p, &o, err);
    if (!m) fail_msg("%s", err);
    return m;
}

static int setup(void **state) {
    Fix *f = xcalloc(1, sizeof *f);
    char err[ERR_LEN], p[512];
    f->ctx = zmq_ctx_new();
    if (fake_coord_open(&f->fc, f->ctx, "tcp://127.0.0.1:0", err)) return -1;
    f->m0 = load("qwen2_gqa");
    f->m1 = load("qwen2_gqa");
    float *p1 = tu_params(f->m1);
    for (long i = 0; i < model_n_params(f->m1); i++) p1[i] = p1[i] * 1.25f + 0.01f * sinf((float)i);
    const ModelTensor *et = model_tensor_find(f->m1, "model.embed_tokens.weight");
    for (long i = 0; i < et->numel; i++) {
        uint32_t b;
        memcpy(&b, &tu_params(f->m1)[et->offset + i], 4);
        b &= 0xffff0000u;
        memcpy(&tu_params(f->m1)[et->offset + i], &b, 4);
    }
    snprintf(p, sizeof p, "%s/data/tokenizers/tiny", tu_root());
    f->tok = tokenizer_load(p, err);
    if (!f->tok) return -1;
    make_chunks(&f->ws, f->m1);
    NetOpts o = { .bind = true };
    f->ws.sock = net_socket(f->ctx, ZMQ_ROUTER, "tcp://127.0.0.1:0", &o, err);
    if (!f->ws.sock || net_last_endpoint(f->ws.sock, f->ws.endpoint, sizeof f->ws.endpoint)) return -1;
    pthread_create(&f->ws.th, NULL, wserver_main, &f->ws);

    char bin[256], coord[256], weights[256], model[512], tokp[512], log[256];
    snprintf(coord, sizeof coord, "cluster.coordinator=%s", f->fc.endpoint);
    snprintf(weights, sizeof weights, "cluster.weights=%s", f->ws.endpoint);
    snprintf(model, sizeof model, "actor_rollout_ref.model.path=%s/tests/data/model/qwen2_gqa", tu_root());
    snprintf(tokp, sizeof tokp, "data.tokenizer=%s/data/tokenizers/tiny", tu_root());
    snprintf(log, sizeof log, "%s/test-logs/rollout-daemon.log", tu_build());
    char *argv[] = { (char *)tu_bin(bin, sizeof bin, "dapo-rollout"), TU_DAPO_RECIPE, coord, weights, model, tokp,
                     "actor_rollout_ref.rollout.max_num_seqs=8", "actor_rollout_ref.rollout.batch_invariant=true",
                     "actor_rollout_ref.rollout.max_num_batched_tokens=16", "data.max_prompt_length=64",
                     "data.max_response_length=40", "reward_model.overlong_buffer.enable=true", "reward_model.overlong_buffer.len=8", "cluster.heartbeat_ms=100", "cluster.rollout_threads=1",
                     "--id", "rollout-test", NULL };
    f->pid = tu_spawn(argv, log);
    *state = f;
    return f->pid > 0 ? 0 : -1;
}

static int teardown(void **state) {
    Fix *f = *state;
    if (f->pid > 0) { kill(f->pid, SIGKILL); tu_wait(f->pid, 2000); }
    f->ws.stop = 1;
    pthread_join(f->ws.th, NULL);
    zmq_close(f->ws.sock);
    for (int i = 0; i < f->ws.n; i++) xfree(f->ws.chunks[i].data);
    xfree(f->ws.chunks);
    for (int i = 0; i < f->n_results; i++) net_msg_free(&f->results[i]);
    fake_coord_close(&f->fc);
    zmq_ctx_term(f->ctx);
    model_free(f->m0);
    model_free(f->m1);
    tokenizer_free(f->tok);
    xfree(f);
    return 0;
}

/* Receives for up to ms, tallying credits, errors, acks, heartbeat versions, keeping GroupResults; stops early
 * once `until` returns true. */
static void pump(Fix *f, int ms, int (*until)(Fix *)) {
    int64_t end = clock_ms() + ms;
    while (clock_ms() < end && !(until && until(f))) {
        NetMsg m;
        char err[ERR_LEN];
        if (net_recv(f->fc.sock, &m, 20, 0, err)) continue;
        switch (m.type) {
        case DAPO__MSG_TYPE__MSG_CREDIT: f->credits += ((Dapo__Credit *)m.msg)->credits; break;
        case DAPO__MSG_TYPE__MSG_ERROR: f->errors++; break;
        case DAPO__MSG_TYPE__MSG_WEIGHT_ACK:
            f->acks++;
            f->ack_version = ((Dapo__WeightAck *)m.msg)->version;
            assert_string_equal(((Dapo__WeightAck *)m.msg)->worker_id, "rollout-test");
            break;
        case DAPO__MSG_TYPE__MSG_HEARTBEAT: f->hb_version = ((Dapo__Heartbeat *)m.msg)->policy_version; break;
        case DAPO__MSG_TYPE__MSG_GROUP_RESULT:
            if (f->n_results < 8) { f->results[f->n_results++] = m; continue; }
            break;
        default: break;
        }
        net_msg_free(&m);
    }
}

static int have_result(Fix *f) { return f->n_results > 0; }
static int have_ack(Fix *f) { return f->acks > 0; }

static Dapo__GroupResult *take_result(Fix *f, int ms) {
    for (int i = 0; i < f->n_results; i++) net_msg_free(&f->results[i]);
    f->n_results = 0;
    pump(f, ms, have_result);
    assert_int_equal(f->n_results, 1);
    return (Dapo__GroupResult *)f->results[0].msg;
}

static const int32_t PROMPT[] = { 1, 10, 11, 12, 13, 14, 15, 16, 2 };
static const int32_t STOPS[] = { 2 };

static void send_group(Fix *f, uint64_t id, uint32_t attempt, uint32_t n, uint32_t max_tokens, int32_t bad_token) {
    int32_t prompt[9];
    memcpy(prompt, PROMPT, sizeof prompt);
    if (bad_token) prompt[3] = bad_token;
    Dapo__SamplingParams sp = DAPO__SAMPLING_PARAMS__INIT;
    sp.temperature = 1.0f;
    sp.top_p = 1.0f;
    sp.top_k = -1;
    sp.max_tokens = max_tokens;
    sp.stop_token_ids = (int32_t *)STOPS;
    sp.n_stop_token_ids = 1;
    Dapo__GenerateGroup g = DAPO__GENERATE_GROUP__INIT;
    g.run_id = "fake-run";
    g.step = 3;
    g.policy_version = 0;
    g.group_id = id;
    g.attempt = attempt;
    g.prompt_token_ids = prompt;
    g.n_prompt_token_ids = 9;
    g.n = n;
    g.sampling = &sp;
    g.seed = 42;
    assert_int_equal(fake_coord_reply(&f->fc, DAPO__MSG_TYPE__MSG_GENERATE_GROUP, &g.base), 0);
}

/* the daemon's group equals the in-process engine on model m (batch-invariant: bitwise) */
static void check_group(Fix *f, const Dapo__GroupResult *r, Model *m, uint64_t id, uint32_t n, int64_t version) {
    char err[ERR_LEN];
    assert_string_equal(r->error, "");
    assert_string_equal(r->run_id, "fake-run");
    assert_int_equal(r->step, 3);
    assert_int_equal(r->group_id, id);
    assert_int_equal(r->policy_version, version);
    assert_int_equal(r->n_responses, n);
    GenOptions go = { .max_num_seqs = 3, .kv_cache_tokens = 1024, .max_batch_tokens = 5, .batch_invariant = 1 };
    GenEngine *e = gen_engine_new(m, &go, err);
    assert_non_null(e);
    for (uint32_t i = 0; i < n; i++) {
        GenRequest q = { .seed = 42, .group_id = id, .sample = i, .prompt = PROMPT, .n_prompt = 9, .max_tokens = 40,
                         .sp = { .temperature = 1.0f, .top_p = 1.0f }, .stop_ids = STOPS, .n_stop = 1 };
        assert_int_equal(gen_engine_add(e, &q, NULL, err), 0);
    }
    while (gen_engine_step(e, err) > 0) {}
    GenResult x;
    while (gen_engine_take(e, &x)) {
        const Dapo__Response *rs = r->responses[x.sample];
        assert_int_equal(rs->n_token_ids, x.n);
        assert_int_equal(rs->n_logprobs, x.n);
        assert_memory_equal(rs->token_ids, x.tokens, (size_t)x.n * 4);
        assert_memory_equal(rs->logprobs, x.logprobs, (size_t)x.n * 4);
        assert_string_equal(rs->finish_reason, gen_finish_name(x.finish));
        TokBuf t = { 0 };
        tokenizer_decode(f->tok, x.tokens, (size_t)x.n, true, &t);
        assert_int_equal(rs->text.len, t.n);
        if (t.n) assert_memory_equal(rs->text.data, t.v, t.n);
        tok_buf_free(&t);
        gen_result_free(&x);
    }
    gen_engine_free(e);
}

static void test_rollout_daemon(void **state) {
    Fix *f = *state;
    /* register: capacity 8 sequences, KV tokens 8 x (64 + 40) */
    NetMsg *h = fake_coord_expect(&f->fc, DAPO__MSG_TYPE__MSG_HELLO, 20000, NULL);
    assert_non_null(h);
    Dapo__Hello *hello = (Dapo__Hello *)h->msg;
    assert_int_equal(hello->role, DAPO__ROLE__ROLE_ROLLOUT);
    assert_int_equal(hello->capacity, 8);
    assert_int_equal(hello->capacity_tokens, 8 * 104);
    assert_string_equal(hello->worker_id, "rollout-test");
    assert_int_equal(fake_coord_welcome(&f->fc, 100, 5), 0);
    pump(f, 300, NULL);
    assert_int_equal(f->credits, 8);
    assert_int_equal(f->hb_version, 0);

    /* a group of 3: the result, and 3 credits back */
    f->credits = 0;
    send_group(f, 11, 1, 3, 40, 0);
    Dapo__GroupResult *r = take_result(f, 10000);
    check_group(f, r, f->m0, 11, 3, 0);
    pump(f, 200, NULL);
    assert_int_equal(f->credits, 3);

    /* pause, a group that cannot start, cancel it: 4 credits back and no result */
    f->credits = 0;
    Dapo__Control pause = DAPO__CONTROL__INIT;
    pause.cmd = DAPO__CONTROL_CMD__CONTROL_PAUSE;
    fake_coord_reply(&f->fc, DAPO__MSG_TYPE__MSG_CONTROL, &pause.base);
    send_group(f, 12, 1, 4, 40, 0);
    pump(f, 300, NULL);
    assert_int_equal(f->n_results, 1);          /* still only the old one */
    Dapo__ItemRef ref = DAPO__ITEM_REF__INIT, *refs[1] = { &ref };
    ref.item_id = 12;
    ref.attempt = 1;
    Dapo__Cancel c = DAPO__CANCEL__INIT;
    c.items = refs;
    c.n_items = 1;
    c.reason = "test";
    fake_coord_reply(&f->fc, DAPO__MSG_TYPE__MSG_CANCEL, &c.base);
    pump(f, 300, NULL);
    assert_int_equal(f->credits, 4);
    assert_int_equal(f->n_results, 1);
    pause.cmd = DAPO__CONTROL_CMD__CONTROL_RESUME;
    fake_coord_reply(&f->fc, DAPO__MSG_TYPE__MSG_CONTROL, &pause.base);

    /* bad input: garbage frames, an unsupported message, bad groups -> error results with the credit back */
    f->credits = 0;
    fake_coord_send_raw(&f->fc, "\x00\x01garbage-frame", 15);
    fake_coord_send_raw(&f->fc, "DAPO\x01\x00\x08\x00\xff\xff\xff\x7f", 12);
    Dapo__TrainBatch tb = DAPO__TRAIN_BATCH__INIT;
    fake_coord_reply(&f->fc, DAPO__MSG_TYPE__MSG_TRAIN_BATCH, &tb.base);
    send_group(f, 13, 1, 2, 0, 0);              /* max_tokens 0 */
    r = take_result(f, 5000);
    assert_int_equal(r->group_id, 13);
    assert_true(strlen(r->error) > 0);
    send_group(f, 14, 1, 2, 40, 500);            /* token 500 outside the vocabulary of 96 */
    r = take_result(f, 5000);
    assert_int_equal(r->group_id, 14);
    assert_true(strlen(r->error) > 0);
    pump(f, 200, NULL);
    assert_int_equal(f->credits, 4);
    assert_true(f->errors >= 1);

    /* the coordinator moves to version 1: fetch (one chunk corrupted, one dropped: both asked again), swap, ack */
    Dapo__Heartbeat hb = DAPO__HEARTBEAT__INIT;
    hb.policy_version = 1;
    fake_coord_reply(&f->fc, DAPO__MSG_TYPE__MSG_HEARTBEAT, &hb.base);
    pump(f, 15000, have_ack);
    assert_int_equal(f->acks, 1);
    assert_int_equal(f->ack_version, 1);
    assert_true(f->ws.n_requests >= 2);
    assert_int_equal(f->ws.req_version[0], 1);
    assert_int_equal(f->ws.req_n[0], 0);                     /* first: everything */
    assert_int_equal(f->ws.req_n[1], 2);                     /* then exactly the two missing chunks */
    assert_int_equal(f->ws.req_idx[1][0], CORRUPT_IDX);
    assert_int_equal(f->ws.req_idx[1][1], DROP_IDX);
    pump(f, 300, NULL);
    assert_int_equal(f->hb_version, 1);
    /* results now come from the new weights */
    send_group(f, 15, 2, 3, 40, 0);
    r = take_result(f, 10000);
    check_group(f, r, f->m1, 15, 3, 1);

    /* the coordinator stops (it pauses its workers) and comes back: the rollout registers again, and the pause of
     * the old session is over — the new coordinator's groups run (a restarted coordinator pod, issue 19) */
    pause.cmd = DAPO__CONTROL_CMD__CONTROL_PAUSE;
    fake_coord_reply(&f->fc, DAPO__MSG_TYPE__MSG_CONTROL, &pause.base);
    pump(f, 200, NULL);
    Dapo__ErrorReply unknown = DAPO__ERROR_REPLY__INIT;
    unknown.code = ERR_NOTFOUND;
    unknown.message = "unknown worker";
    fake_coord_reply(&f->fc, DAPO__MSG_TYPE__MSG_ERROR, &unknown.base);
    assert_non_null(fake_coord_expect(&f->fc, DAPO__MSG_TYPE__MSG_HELLO, 5000, NULL));
    assert_int_equal(fake_coord_welcome(&f->fc, 100, 5), 0);
    send_group(f, 16, 1, 2, 40, 0);
    r = take_result(f, 10000);
    assert_int_equal(r->group_id, 16);
    assert_int_equal(r->n_responses, 2);

    /* SIGTERM: goodbye and exit 0 */
    kill(f->pid, SIGTERM);
    assert_non_null(fake_coord_expect(&f->fc, DAPO__MSG_TYPE__MSG_GOODBYE, 5000, NULL));
    assert_int_equal(tu_wait(f->pid, 5000), 0);
    f->pid = 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rollout_daemon, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
