/* tests/unit/test_net.c: framing of every message, bad frames, and the worker state machine against the scripted
 * fake coordinator (common/net/fake_coord.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "core/clock.h"
#include "tests/support/fake_coord.h"
#include "net/net.h"
#include "net/worker.h"

/* Encodes m, decodes it, and checks that re-encoding gives identical bytes. */
static void roundtrip(Dapo__MsgType type, const ProtobufCMessage *m) {
    size_t len, len2;
    uint8_t *buf = net_encode(type, m, &len);
    assert_non_null(buf);
    Dapo__MsgType t;
    uint16_t ver;
    ProtobufCMessage *out;
    char err[ERR_LEN];
    assert_int_equal(net_decode(buf, len, 0, &t, &ver, &out, err), 0);
    assert_int_equal(t, type);
    assert_int_equal(ver, DAPO_PROTOCOL_VERSION);
    assert_ptr_equal(out->descriptor, m->descriptor);
    uint8_t *buf2 = net_encode(type, out, &len2);
    assert_int_equal(len, len2);
    assert_memory_equal(buf, buf2, len);
    protobuf_c_message_free_unpacked(out, NULL);
    xfree(buf);
    xfree(buf2);
}

static void test_roundtrip_every_message(void **state) {
    (void)state;
    Dapo__Hello h = DAPO__HELLO__INIT;
    h.protocol_version = 1; h.role = DAPO__ROLE__ROLE_ROLLOUT; h.worker_id = "rollout-0"; h.capacity = 64;
    h.capacity_tokens = 1 << 20; h.policy_version = 7; h.build_info = "gcc"; h.run_id = "r";
    roundtrip(DAPO__MSG_TYPE__MSG_HELLO, &h.base);
    Dapo__Welcome w = DAPO__WELCOME__INIT;
    uint8_t yaml[] = "a: 1";
    w.accepted = true; w.reason = "ok"; w.run_id = "r"; w.heartbeat_ms = 100; w.lease_timeout_s = 2.5;
    w.config_yaml.data = yaml; w.config_yaml.len = 4;
    roundtrip(DAPO__MSG_TYPE__MSG_WELCOME, &w.base);
    Dapo__Heartbeat hb = DAPO__HEARTBEAT__INIT;
    hb.seq = 9; hb.busy = 3; hb.load = 0.5;
    roundtrip(DAPO__MSG_TYPE__MSG_HEARTBEAT, &hb.base);
    Dapo__Credit cr = DAPO__CREDIT__INIT;
    cr.credits = 16;
    roundtrip(DAPO__MSG_TYPE__MSG_CREDIT, &cr.base);
    Dapo__ItemRef r1 = DAPO__ITEM_REF__INIT, *refs[1] = {&r1};
    r1.item_id = 42; r1.attempt = 2;
    Dapo__LeaseRenew lr = DAPO__LEASE_RENEW__INIT;
    lr.n_items = 1; lr.items = refs;
    roundtrip(DAPO__MSG_TYPE__MSG_LEASE_RENEW, &lr.base);
    Dapo__Cancel ca = DAPO__CANCEL__INIT;
    ca.n_items = 1; ca.items = refs; ca.reason = "batch full";
    roundtrip(DAPO__MSG_TYPE__MSG_CANCEL, &ca.base);
    Dapo__Goodbye gb = DAPO__GOODBYE__INIT;
    gb.reason = "bye";
    roundtrip(DAPO__MSG_TYPE__MSG_GOODBYE, &gb.base);
    int32_t ids[] = {1, 2, 151643};
    Dapo__SamplingParams sp = DAPO__SAMPLING_PARAMS__INIT;
    sp.temperature = 1; sp.top_p = 0.7f; sp.top_k = -1; sp.max_tokens = 128;
    Dapo__GenerateGroup gg = DAPO__GENERATE_GROUP__INIT;
    gg.run_id = "r"; gg.step = 3; gg.group_id = 77; gg.attempt = 1; gg.prompt_token_ids = ids;
    gg.n_prompt_token_ids = 3; gg.n = 8; gg.sampling = &sp; gg.seed = 1234;
    roundtrip(DAPO__MSG_TYPE__MSG_GENERATE_GROUP, &gg.base);
    float lps[] = {-0.5f, -1.25f, -0.01f};
    uint8_t text[] = {'a', 0, 0xff, 'b'};      /* NUL and invalid UTF-8 survive: bytes, not string */
    Dapo__Response resp = DAPO__RESPONSE__INIT, *resps[1] = {&resp};
    resp.token_ids = ids; resp.n_token_ids = 3; resp.logprobs = lps; resp.n_logprobs = 3;
    resp.finish_reason = "length"; resp.text.data = text; resp.text.len = 4;
    Dapo__GroupResult gr = DAPO__GROUP_RESULT__INIT;
    gr.group_id = 77; gr.attempt = 1; gr.n_responses = 1; gr.responses = resps; gr.gen_seconds = 0.25;
    roundtrip(DAPO__MSG_TYPE__MSG_GROUP_RESULT, &gr.base);
    Dapo__ScoreItem si = DAPO__SCORE_ITEM__INIT, *sis[1] = {&si};
    si.item_id = 5; si.response_text.data = text; si.response_text.len = 4; si.response_length = 3;
    si.ground_truth.data = (uint8_t *)"42"; si.ground_truth.len = 2; si.data_source = "math_dapo";
    Dapo__ScoreRequest sr = DAPO__SCORE_REQUEST__INIT;
    sr.n_items = 1; sr.items = sis; sr.max_response_length = 20480; sr.overlong_buffer_enable = true;
    sr.overlong_buffer_len = 4096; sr.overlong_penalty_factor = 1;
    roundtrip(DAPO__MSG_TYPE__MSG_SCORE_REQUEST, &sr.base);
    Dapo__Score sc = DAPO__SCORE__INIT, *scs[1] = {&sc};
    sc.item_id = 5; sc.score = -1.5f; sc.pred.data = text; sc.pred.len = 4; sc.has_pred = true;
    sc.overlong_penalty = -0.5f; sc.error = "";
    Dapo__ScoreResult sres = DAPO__SCORE_RESULT__INIT;
    sres.n_scores = 1; sres.scores = scs;
    roundtrip(DAPO__MSG_TYPE__MSG_SCORE_RESULT, &sres.base);
    uint32_t offs[] = {0, 3}, plen[] = {1};
    float mask[] = {1, 1}, adv[] = {0.5f, 0.5f};
    uint64_t gids[] = {77};
    Dapo__TrainBatch tb = DAPO__TRAIN_BATCH__INIT;
    tb.input_ids = ids; tb.n_input_ids = 3; tb.offsets = offs; tb.n_offsets = 2; tb.prompt_lengths = plen;
    tb.n_prompt_lengths = 1; tb.response_mask = mask; tb.n_response_mask = 2; tb.advantages = adv;
    tb.n_advantages = 2; tb.rollout_logprobs = lps; tb.n_rollout_logprobs = 2; tb.group_ids = gids;
    tb.n_group_ids = 1; tb.global_response_tokens = 2; tb.global_num_seqs = 1; tb.world_size = 1;
    roundtrip(DAPO__MSG_TYPE__MSG_TRAIN_BATCH, &tb.base);
    Dapo__StepResult__MetricsEntry me = DAPO__STEP_RESULT__METRICS_ENTRY__INIT, *mes[1] = {&me};
    me.key = "actor/pg_loss"; me.value = 0.125;
    Dapo__StepResult st = DAPO__STEP_RESULT__INIT;
    st.step = 3; st.n_metrics = 1; st.metrics = mes; st.new_policy_version = 4;
    roundtrip(DAPO__MSG_TYPE__MSG_STEP_RESULT, &st.base);
    uint64_t shape[] = {2, 3};
    uint8_t blob[24] = {1, 2, 3};
    Dapo__WeightUpdate wu = DAPO__WEIGHT_UPDATE__INIT;
    wu.version = 4; wu.chunk_index = 0; wu.chunk_count = 1; wu.tensor_name = "lm_head.weight"; wu.dtype = "F32";
    wu.shape = shape; wu.n_shape = 2; wu.data.data = blob; wu.data.len = sizeof blob; wu.checksum = 99;
    roundtrip(DAPO__MSG_TYPE__MSG_WEIGHT_UPDATE, &wu.base);
    uint32_t chunks[] = {3, 5};
    Dapo__WeightResend rs = DAPO__WEIGHT_RESEND__INIT;
    rs.version = 4; rs.chunk_indices = chunks; rs.n_chunk_indices = 2; rs.worker_id = "rollout-0";
    roundtrip(DAPO__MSG_TYPE__MSG_WEIGHT_RESEND, &rs.base);
    Dapo__WeightAck ack = DAPO__WEIGHT_ACK__INIT;
    ack.version = 4; ack.worker_id = "rollout-0";
    roundtrip(DAPO__MSG_TYPE__MSG_WEIGHT_ACK, &ack.base);
    Dapo__Control ctl = DAPO__CONTROL__INIT;
    ctl.cmd = DAPO__CONTROL_CMD__CONTROL_CHECKPOINT; ctl.path = "/tmp/x";
    roundtrip(DAPO__MSG_TYPE__MSG_CONTROL, &ctl.base);
    Dapo__ErrorReply er = DAPO__ERROR_REPLY__INIT;
    er.code = ERR_DECODE; er.message = "bad"; er.in_reply_to = DAPO__MSG_TYPE__MSG_HELLO;
    roundtrip(DAPO__MSG_TYPE__MSG_ERROR, &er.base);
}

static void test_decode_rejects_bad_frames(void **state) {
    (void)state;
    Dapo__Credit cr = DAPO__CREDIT__INIT;
    cr.credits = 3;
    size_t len;
    uint8_t *buf = net_encode(DAPO__MSG_TYPE__MSG_CREDIT, &cr.base, &len);
    Dapo__MsgType t;
    uint16_t v;
    ProtobufCMessage *m;
    char err[ERR_LEN];
    assert_int_equal(net_decode(buf, 5, 0, &t, &v, &m, err), ERR_DECODE);             /* truncated header */
    assert_non_null(strstr(err, "truncated"));
    assert_int_equal(net_decode(buf, len - 1, 0, &t, &v, &m, err), ERR_DECODE);       /* truncated payload */
    assert_non_null(strstr(err, "length mismatch"));
    assert_int_equal(net_decode(buf, len, 8, &t, &v, &m, err), ERR_TOO_BIG);          /* over the cap */
    uint8_t garbage[32];
    memset(garbage, 0xAB, sizeof garbage);
    assert_int_equal(net_decode(garbage, sizeof garbage, 0, &t, &v, &m, err), ERR_DECODE);
    assert_non_null(strstr(err, "magic"));
    buf[6] = 200;                                                                      /* unknown type */
    assert_int_equal(net_decode(buf, len, 0, &t, &v, &m, err), ERR_DECODE);
    assert_non_null(strstr(err, "unknown message type"));
    buf[6] = DAPO__MSG_TYPE__MSG_CREDIT;
    buf[12] = 0xFF;                                                                    /* bad protobuf */
    assert_int_equal(net_decode(buf, len, 0, &t, &v, &m, err), ERR_DECODE);
    assert_null(m);
    buf[4] = 9;                                                                        /* other version */
    assert_int_equal(net_decode(buf, len, 0, &t, &v, &m, err), ERR_VERSION);
    char want[64];
    snprintf(want, sizeof want, "peer speaks 9, this build speaks %d", DAPO_PROTOCOL_VERSION);
    assert_non_null(strstr(err, want));
    xfree(buf);
}

/* Garbage, truncated and oversized frames over a real socket pair: each is rejected and the next good message
 * still arrives. */
/* A ROUTER bound on a free loopback port (options bo, .bind set here) and a DEALER connected to it (options co;
 * NULL: defaults), both on ctx. */
static void open_pair(void *ctx, NetOpts bo, const NetOpts *co, void **router, void **dealer) {
    char err[ERR_LEN], ep[128];
    bo.bind = true;
    *router = net_socket(ctx, ZMQ_ROUTER, "tcp://127.0.0.1:0", &bo, err);
    assert_non_null(*router);
    assert_int_equal(net_last_endpoint(*router, ep, sizeof ep), 0);
    *dealer = net_socket(ctx, ZMQ_DEALER, ep, co, err);
    assert_non_null(*dealer);
}

static void test_receiver_survives_bad_frames(void **state) {
    (void)state;
    void *ctx = zmq_ctx_new();
    char err[ERR_LEN];
    void *router, *dealer;
    open_pair(ctx, (NetOpts){.max_msg_bytes = 1 << 16}, NULL, &router, &dealer);
    assert_int_equal(zmq_send(dealer, "garbage!!!!!!!!!", 16, 0), 16);
    assert_int_equal(zmq_send(dealer, "DAP", 3, 0), 3);
    Dapo__Credit cr = DAPO__CREDIT__INIT;
    cr.credits = 11;
    assert_int_equal(net_send(dealer, NULL, 0, DAPO__MSG_TYPE__MSG_CREDIT, &cr.base, false), 0);
    NetMsg m;
    assert_int_equal(net_recv(router, &m, 2000, 0, err), ERR_DECODE);
    assert_int_equal(net_recv(router, &m, 2000, 0, err), ERR_DECODE);
    assert_int_equal(net_recv(router, &m, 2000, 0, err), 0);
    assert_int_equal(m.type, DAPO__MSG_TYPE__MSG_CREDIT);
    assert_int_equal(((Dapo__Credit *)m.msg)->credits, 11);
    assert_int_equal(m.peer_len > 0, 1);
    net_msg_free(&m);
    /* Over ZMQ_MAXMSGSIZE: ZeroMQ drops the connection; the dealer reconnects and the next message arrives. */
    static uint8_t big[1 << 17];
    assert_int_equal(zmq_send(dealer, big, sizeof big, 0), (int)sizeof big);
    cr.credits = 12;
    int got = 0;
    for (int i = 0; i < 20 && !got; i++) {
        net_send(dealer, NULL, 0, DAPO__MSG_TYPE__MSG_CREDIT, &cr.base, false);
        if (net_recv(router, &m, 200, 0, err) == 0) { got = ((Dapo__Credit *)m.msg)->credits == 12; net_msg_free(&m); }
    }
    assert_true(got);
    zmq_close(dealer);
    zmq_close(router);
    zmq_ctx_term(ctx);
}

/* Frames on the wire of one message from dealer to router (after the routing id): their count; every frame but
 * the last must be NET_FRAME_BYTES long; *total their bytes. */
static size_t wire_frames(void *router, size_t *total) {
    zmq_msg_t f;
    zmq_msg_init(&f);
    assert_true(zmq_msg_recv(&f, router, 0) >= 0);               /* routing id */
    size_t frames = 0;
    *total = 0;
    do {
        assert_true(zmq_msg_recv(&f, router, 0) >= 0);
        frames++;
        *total += zmq_msg_size(&f);
        if (zmq_msg_more(&f)) assert_int_equal(zmq_msg_size(&f), NET_FRAME_BYTES);
    } while (zmq_msg_more(&f));
    zmq_msg_close(&f);
    return frames;
}

/* Over CURVE, a message over NET_FRAME_BYTES travels as frames of NET_FRAME_BYTES and arrives whole (net_recv and
 * net_recv_arena); in plaintext it is one frame. Over the receiver's cap it is refused naming its type, the rest of
 * its frames dropped, and the next message still arrives. */
static void test_multiframe(void **state) {
    (void)state;
    void *ctx = zmq_ctx_new();
    char err[ERR_LEN];
    CurveKeys ks = {.on = true}, kc = {.on = true};
    assert_int_equal(zmq_curve_keypair(ks.server_public, ks.server_secret), 0);
    assert_int_equal(zmq_curve_keypair(kc.client_public, kc.client_secret), 0);
    memcpy(kc.server_public, ks.server_public, sizeof kc.server_public);
    NetOpts co = {.curve = &kc};
    void *router, *dealer, *prouter, *pdealer;                  /* a CURVE pair and a plaintext one */
    open_pair(ctx, (NetOpts){.curve = &ks, .curve_server = true}, &co, &router, &dealer);
    open_pair(ctx, (NetOpts){0}, NULL, &prouter, &pdealer);
    size_t n = 600000;                                           /* 600k token ids + log-probs: ~4 MB packed */
    int32_t *ids = xmalloc(n * sizeof *ids);
    float *lps = xmalloc(n * sizeof *lps);
    for (size_t i = 0; i < n; i++) { ids[i] = (int32_t)(i * 7919 % 151000); lps[i] = -(float)i / (float)n; }
    Dapo__Response r = DAPO__RESPONSE__INIT, *rp = &r;
    r.token_ids = ids; r.n_token_ids = n; r.logprobs = lps; r.n_logprobs = n;
    Dapo__GroupResult g = DAPO__GROUP_RESULT__INIT;
    g.group_id = 77; g.responses = &rp; g.n_responses = 1;
    size_t len = NET_HEADER_BYTES + protobuf_c_message_get_packed_size(&g.base);
    assert_true(len > 3 * NET_FRAME_BYTES);
    /* on the wire over CURVE: ceil(len / NET_FRAME_BYTES) frames, all but the last NET_FRAME_BYTES; in plaintext one */
    size_t total;
    assert_int_equal(net_send(dealer, NULL, 0, DAPO__MSG_TYPE__MSG_GROUP_RESULT, &g.base, false), 0);
    assert_int_equal(wire_frames(router, &total), (len + NET_FRAME_BYTES - 1) / NET_FRAME_BYTES);
    assert_int_equal(total, len);
    assert_int_equal(net_send(pdealer, NULL, 0, DAPO__MSG_TYPE__MSG_GROUP_RESULT, &g.base, false), 0);
    assert_int_equal(wire_frames(prouter, &total), 1);
    assert_int_equal(total, len);
    for (int arena = 0; arena < 2; arena++) {
        assert_int_equal(net_send(dealer, NULL, 0, DAPO__MSG_TYPE__MSG_GROUP_RESULT, &g.base, false), 0);
        NetMsg m;
        assert_int_equal((arena ? net_recv_arena : net_recv)(router, &m, 5000, 0, err), 0);
        assert_int_equal(m.type, DAPO__MSG_TYPE__MSG_GROUP_RESULT);
        assert_int_equal(m.bytes, len);
        Dapo__GroupResult *got = (Dapo__GroupResult *)m.msg;
        assert_int_equal(got->group_id, 77);
        assert_int_equal(got->responses[0]->n_token_ids, n);
        assert_memory_equal(got->responses[0]->token_ids, ids, n * sizeof *ids);
        assert_memory_equal(got->responses[0]->logprobs, lps, n * sizeof *lps);
        net_msg_free(&m);
    }
    /* over a 2 MiB cap: refused as too big, named; a Credit behind it arrives */
    assert_int_equal(net_send(dealer, NULL, 0, DAPO__MSG_TYPE__MSG_GROUP_RESULT, &g.base, false), 0);
    Dapo__Credit cr = DAPO__CREDIT__INIT;
    cr.credits = 5;
    assert_int_equal(net_send(dealer, NULL, 0, DAPO__MSG_TYPE__MSG_CREDIT, &cr.base, false), 0);
    NetMsg m;
    assert_int_equal(net_recv(router, &m, 5000, 2 * NET_FRAME_BYTES, err), ERR_TOO_BIG);
    assert_int_equal(m.type, DAPO__MSG_TYPE__MSG_GROUP_RESULT);
    assert_non_null(strstr(err, "limit"));
    assert_int_equal(net_recv(router, &m, 5000, 2 * NET_FRAME_BYTES, err), 0);
    assert_int_equal(m.type, DAPO__MSG_TYPE__MSG_CREDIT);
    assert_int_equal(((Dapo__Credit *)m.msg)->credits, 5);
    net_msg_free(&m);
    xfree(ids);
    xfree(lps);
    zmq_close(pdealer);
    zmq_close(prouter);
    zmq_close(dealer);
    zmq_close(router);
    zmq_ctx_term(ctx);
}

typedef struct { void *ctx; FakeCoord fc; Worker *w; char health[64]; } Fix;

static int setup(void **state) {
    Fix *f = xcalloc(1, sizeof *f);
    char err[ERR_LEN];
    f->ctx = zmq_ctx_new();
    if (fake_coord_open(&f->fc, f->ctx, "tcp://127.0.0.1:0", err)) return -1;
    snprintf(f->health, sizeof f->health, "/tmp/dapo-test-health-%d", (int)getpid());
    unlink(f->health);
    WorkerOpts o = {.role = DAPO__ROLE__ROLE_VERIFIER, .worker_id = "verifier-t", .coordinator = f->fc.endpoint,
                    .capacity = 8, .heartbeat_ms = 50, .lease_timeout_s = 0.4, .health_file = f->health};
    f->w = worker_open(f->ctx, &o, err);
    if (!f->w) return -1;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    Fix *f = *state;
    worker_close(f->w, "test over");
    unlink(f->health);
    fake_coord_close(&f->fc);
    zmq_ctx_term(f->ctx);
    xfree(f);
    return 0;
}

/* Polls the worker for a while (the worker only acts inside worker_poll). Returns the first work result. */
static int pump(Fix *f, int ms, NetMsg *out) {
    char err[ERR_LEN];
    NetMsg scratch;
    if (!out) out = &scratch;
    int64_t end = clock_ms() + ms;
    while (clock_ms() < end) {
        int rc = worker_poll(f->w, out, 10, err);
        if (rc != 0) return rc;
    }
    return 0;
}

static void register_worker(Fix *f) {
    NetMsg *h = fake_coord_expect(&f->fc, DAPO__MSG_TYPE__MSG_HELLO, 2000, NULL);
    assert_non_null(h);
    Dapo__Hello *hello = (Dapo__Hello *)h->msg;
    assert_int_equal(hello->protocol_version, DAPO_PROTOCOL_VERSION);
    assert_int_equal(hello->role, DAPO__ROLE__ROLE_VERIFIER);
    assert_string_equal(hello->worker_id, "verifier-t");
    assert_int_equal(hello->capacity, 8);
    assert_int_equal(fake_coord_welcome(&f->fc, 50, 0.4), 0);
    NetMsg out;
    assert_int_equal(pump(f, 50, &out), 0);
    assert_int_equal(worker_state(f->w), WORKER_READY);
}

/* net_recv_arena: a GroupResult whose unpacked form needs several arena blocks (a 300 KB response after small
 * ones) arrives intact, can be kept past net_msg_free and freed with net_unpacked_free; a bad frame still fails
 * cleanly; a large frame (net_send's zero-copy path) and a small one both arrive. */
static void test_recv_arena(void **state) {
    (void)state;
    void *ctx = zmq_ctx_new();
    char err[ERR_LEN];
    void *router, *dealer;
    open_pair(ctx, (NetOpts){0}, NULL, &router, &dealer);
    enum { NR = 5, BIG = 75000 };
    static int32_t ids[BIG];
    static float lps[BIG];
    for (int i = 0; i < BIG; i++) { ids[i] = (i * 7919) % 151000; lps[i] = -(float)i / 1000.0f; }
    Dapo__Response r[NR], *rp[NR];
    for (int i = 0; i < NR; i++) {
        dapo__response__init(&r[i]);
        r[i].token_ids = ids;
        r[i].n_token_ids = i == NR - 1 ? BIG : (size_t)(10 + i);
        r[i].logprobs = lps;
        r[i].n_logprobs = r[i].n_token_ids;
        r[i].finish_reason = i % 2 ? "length" : "stop";
        r[i].text.data = (uint8_t *)"Answer: 7";
        r[i].text.len = 9;
        rp[i] = &r[i];
    }
    Dapo__GroupResult g = DAPO__GROUP_RESULT__INIT;
    g.run_id = "run-x";
    g.group_id = 42;
    g.attempt = 2;
    g.n_responses = NR;
    g.responses = rp;
    g.error = "";
    assert_int_equal(net_send(dealer, NULL, 0, DAPO__MSG_TYPE__MSG_GROUP_RESULT, &g.base, false), 0);
    assert_int_equal(zmq_send(dealer, "DAPOxx", 6, 0), 6);                       /* a truncated frame */
    Dapo__Credit cr = DAPO__CREDIT__INIT;
    cr.credits = 3;
    assert_int_equal(net_send(dealer, NULL, 0, DAPO__MSG_TYPE__MSG_CREDIT, &cr.base, false), 0);
    NetMsg m;
    assert_int_equal(net_recv_arena(router, &m, 2000, 0, err), 0);
    assert_int_equal(m.type, DAPO__MSG_TYPE__MSG_GROUP_RESULT);
    assert_non_null(m.arena);
    Dapo__GroupResult *got = (Dapo__GroupResult *)m.msg;
    NetArena *arena = m.arena;
    m.msg = NULL;                                            /* kept past net_msg_free */
    m.arena = NULL;
    net_msg_free(&m);
    assert_string_equal(got->run_id, "run-x");
    assert_int_equal(got->group_id, 42);
    assert_int_equal(got->n_responses, NR);
    for (int i = 0; i < NR; i++) {
        assert_int_equal(got->responses[i]->n_token_ids, r[i].n_token_ids);
        assert_memory_equal(got->responses[i]->token_ids, ids, r[i].n_token_ids * sizeof(int32_t));
        assert_memory_equal(got->responses[i]->logprobs, lps, r[i].n_logprobs * sizeof(float));
        assert_string_equal(got->responses[i]->finish_reason, r[i].finish_reason);
        assert_int_equal(got->responses[i]->text.len, 9);
    }
    net_unpacked_free(&got->base, arena);
    assert_int_equal(net_recv_arena(router, &m, 2000, 0, err), ERR_DECODE);
    net_msg_free(&m);
    assert_int_equal(net_recv_arena(router, &m, 2000, 0, err), 0);
    assert_int_equal(((Dapo__Credit *)m.msg)->credits, 3);
    net_msg_free(&m);
    net_msg_free(&m);                                        /* twice is harmless */
    zmq_close(dealer);
    zmq_close(router);
    zmq_ctx_term(ctx);
}

static void test_worker_hello_credit_heartbeat(void **state) {
    Fix *f = *state;
    NetMsg out;
    pump(f, 20, &out);
    assert_int_equal(worker_state(f->w), WORKER_CONNECTING);
    struct stat hs;                                      /* the liveness file: made at the first poll, connected or not */
    assert_int_equal(stat(f->health, &hs), 0);
    assert_true(labs((long)(hs.st_mtime - time(NULL))) <= 1);
    char word[32] = "";
    FILE *hf = fopen(f->health, "r");
    assert_non_null(hf);
    assert_non_null(fgets(word, sizeof word, hf));
    fclose(hf);
    assert_string_equal(word, "connecting\n");
    register_worker(f);
    NetMsg *c = fake_coord_expect(&f->fc, DAPO__MSG_TYPE__MSG_CREDIT, 1000, NULL);
    assert_non_null(c);
    assert_int_equal(((Dapo__Credit *)c->msg)->credits, 8);            /* capacity - busy */
    /* Heartbeats flow while the worker polls; answer them so the worker stays READY. */
    for (int i = 0; i < 3; i++) {
        pump(f, 60, &out);
        NetMsg *hb = fake_coord_expect(&f->fc, DAPO__MSG_TYPE__MSG_HEARTBEAT, 1000, NULL);
        assert_non_null(hb);
        Dapo__Heartbeat reply = DAPO__HEARTBEAT__INIT;
        fake_coord_reply(&f->fc, DAPO__MSG_TYPE__MSG_HEARTBEAT, &reply.base);
    }
    assert_int_equal(worker_state(f->w), WORKER_READY);
    assert_int_equal(worker_add_credit(f->w, 2), 0);
    c = fake_coord_expect(&f->fc, DAPO__MSG_TYPE__MSG_CREDIT, 1000, NULL);
    assert_non_null(c);
    assert_int_equal(((Dapo__Credit *)c->msg)->credits, 2);
    struct timespec old[2] = {{.tv_sec = 1000}, {.tv_sec = 1000}};    /* made stale: the next second's poll renews it */
    assert_int_equal(utimensat(AT_FDCWD, f->health, old, 0), 0);
    pump(f, 1100, &out);
    assert_int_equal(stat(f->health, &hs), 0);
    assert_true(labs((long)(hs.st_mtime - time(NULL))) <= 1);
    hf = fopen(f->health, "r");
    assert_non_null(hf);
    assert_non_null(fgets(word, sizeof word, hf));
    fclose(hf);
    assert_true(!strcmp(word, "ready\n") || !strcmp(word, "connecting\n"));   /* (unanswered heartbeats: either) */
}

static void test_worker_gets_work_and_cancel(void **state) {
    Fix *f = *state;
    pump(f, 20, NULL);
    register_worker(f);
    Dapo__ScoreRequest sr = DAPO__SCORE_REQUEST__INIT;
    sr.request_id = 5;
    fake_coord_reply(&f->fc, DAPO__MSG_TYPE__MSG_SCORE_REQUEST, &sr.base);
    NetMsg out;
    assert_int_equal(pump(f, 1000, &out), 1);
    assert_int_equal(out.type, DAPO__MSG_TYPE__MSG_SCORE_REQUEST);
    assert_int_equal(((Dapo__ScoreRequest *)out.msg)->request_id, 5);
    net_msg_free(&out);
    Dapo__Cancel ca = DAPO__CANCEL__INIT;
    ca.reason = "batch full";
    fake_coord_reply(&f->fc, DAPO__MSG_TYPE__MSG_CANCEL, &ca.base);
    assert_int_equal(pump(f, 1000, &out), 1);
    assert_int_equal(out.type, DAPO__MSG_TYPE__MSG_CANCEL);
    net_msg_free(&out);
    /* Garbage from the coordinator is dropped; the worker keeps working. */
    fake_coord_send_raw(&f->fc, "junkjunkjunkjunk", 16);
    fake_coord_reply(&f->fc, DAPO__MSG_TYPE__MSG_SCORE_REQUEST, &sr.base);
    assert_int_equal(pump(f, 1000, &out), 1);
    assert_int_equal(out.type, DAPO__MSG_TYPE__MSG_SCORE_REQUEST);
    net_msg_free(&out);
}

static void test_worker_reregisters_after_silence(void **state) {
    Fix *f = *state;
    pump(f, 20, NULL);
    register_worker(f);
    /* The coordinator goes silent (e.g. restarted): after the lease timeout the worker says Hello again. */
    NetMsg out;
    pump(f, 600, &out);
    assert_int_equal(worker_state(f->w), WORKER_CONNECTING);
    NetMsg *h = fake_coord_expect(&f->fc, DAPO__MSG_TYPE__MSG_HELLO, 2000, NULL);
    assert_non_null(h);
    fake_coord_welcome(&f->fc, 50, 0.4);
    pump(f, 50, &out);
    assert_int_equal(worker_state(f->w), WORKER_READY);
    assert_int_equal(worker_sessions(f->w), 2);
    /* A coordinator that does not know the worker (restarted) says so; the worker registers at once. */
    Dapo__ErrorReply er = DAPO__ERROR_REPLY__INIT;
    er.code = ERR_NOTFOUND;
    er.message = "unknown worker";
    fake_coord_reply(&f->fc, DAPO__MSG_TYPE__MSG_ERROR, &er.base);
    pump(f, 30, &out);
    assert_non_null(fake_coord_expect(&f->fc, DAPO__MSG_TYPE__MSG_HELLO, 1000, NULL));
}

static void test_worker_refused_names_versions(void **state) {
    Fix *f = *state;
    pump(f, 20, NULL);
    NetMsg *h = fake_coord_expect(&f->fc, DAPO__MSG_TYPE__MSG_HELLO, 2000, NULL);
    assert_non_null(h);
    /* A coordinator of the next protocol version refuses: the frame carries its version in its header. */
    Dapo__Welcome w = DAPO__WELCOME__INIT;
    w.accepted = false;
    char reason[96];
    snprintf(reason, sizeof reason, "protocol version mismatch: worker speaks %d, coordinator speaks %d",
             DAPO_PROTOCOL_VERSION, DAPO_PROTOCOL_VERSION + 1);
    w.reason = reason;
    size_t len;
    uint8_t *buf = net_encode(DAPO__MSG_TYPE__MSG_WELCOME, &w.base, &len);
    buf[4] = DAPO_PROTOCOL_VERSION + 1;
    fake_coord_send_raw(&f->fc, buf, len);
    xfree(buf);
    char err[ERR_LEN] = "";
    NetMsg out;
    int rc = 0;
    for (int i = 0; i < 100 && rc == 0; i++) rc = worker_poll(f->w, &out, 10, err);
    assert_int_equal(rc, ERR_VERSION);
    assert_non_null(strstr(err, reason));
    assert_int_equal(worker_state(f->w), WORKER_REFUSED);
}

static void test_worker_goodbye(void **state) {
    Fix *f = *state;
    pump(f, 20, NULL);
    register_worker(f);
    worker_close(f->w, "stopping");
    f->w = NULL;
    NetMsg *g = fake_coord_expect(&f->fc, DAPO__MSG_TYPE__MSG_GOODBYE, 2000, NULL);
    assert_non_null(g);
    assert_string_equal(((Dapo__Goodbye *)g->msg)->reason, "stopping");
}

/* Issue 38: clients that claim the routing ids an unseeded libzmq ROUTER would generate next (0, then rand()'s first
 * value 0x6b8b4567 counting up) and then a client without an id: the ROUTER (net_socket seeds rand() from getrandom
 * first) generates another id and takes every client's message; unseeded, libzmq would abort on the collision. It
 * runs first: the claim is about a process's first ROUTER. */
static void test_router_ids_not_guessable(void **state) {
    (void)state;
    void *ctx = zmq_ctx_new();
    char err[ERR_LEN];
    NetOpts o = {.bind = true};
    void *r = net_socket(ctx, ZMQ_ROUTER, "tcp://127.0.0.1:*", &o, err);   /* tcp: inproc names peers otherwise */
    assert_non_null(r);
    char ep[64];
    size_t epl = sizeof ep;
    assert_int_equal(zmq_getsockopt(r, ZMQ_LAST_ENDPOINT, ep, &epl), 0);
    void *d[5];
    for (int k = 0; k < 5; k++) {
        d[k] = zmq_socket(ctx, ZMQ_DEALER);
        uint32_t v = 0x6b8b4567u + (uint32_t)k;
        uint8_t id[5] = {0, (uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
        if (k < 4) assert_int_equal(zmq_setsockopt(d[k], ZMQ_ROUTING_ID, id, sizeof id), 0);
        assert_int_equal(zmq_connect(d[k], ep), 0);
        assert_int_equal(zmq_send(d[k], "x", 1, 0), 1);
    }
    int timeout = 5000;
    zmq_setsockopt(r, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    for (int k = 0; k < 5; k++) {
        uint8_t id[256], body[8];
        int n = zmq_recv(r, id, sizeof id, 0);
        assert_true(n == 5 && id[0] == 0);
        assert_int_equal(zmq_recv(r, body, sizeof body, 0), 1);
    }
    for (int k = 0; k < 5; k++) zmq_close(d[k]);
    zmq_close(r);
    zmq_ctx_term(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_router_ids_not_guessable),
        cmocka_unit_test(test_roundtrip_every_message),
        cmocka_unit_test(test_decode_rejects_bad_frames),
        cmocka_unit_test(test_receiver_survives_bad_frames),
        cmocka_unit_test(test_recv_arena),
        cmocka_unit_test(test_multiframe),
        cmocka_unit_test_setup_teardown(test_worker_hello_credit_heartbeat, setup, teardown),
        cmocka_unit_test_setup_teardown(test_worker_gets_work_and_cancel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_worker_reregisters_after_silence, setup, teardown),
        cmocka_unit_test_setup_teardown(test_worker_refused_names_versions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_worker_goodbye, setup, teardown),
    };
    return cmocka_run_group_tests_name("net", tests, NULL, NULL);
}
