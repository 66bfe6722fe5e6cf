/* tests/integration/test_learner_daemon.c: dapo-learner (one rank) against the scripted fake coordinator and a fake
 * rollout on the weight channel: registration, WeightResend of version 0 answered with every chunk (XXH64 checksums,
 * data equal to the model file), a step of two mini-batch shards answered by two StepResults with verl metric names
 * and new_policy_version 1 on the last, version 1 served (equal to the checkpoint written when the coordinator asks for
 * it with Control CHECKPOINT, answered with CHECKPOINT_DONE; nothing saved unasked; another step refused),
 * no answer for a version it does not hold, a malformed shard answered with an error, SIGTERM exit 0, and a restart
 * after kill -9 resuming version 1 from the checkpoint; two ranks (same all-reduced metrics, rank 0 publishes) and a
 * killed rank 1: the idle rank 0 sees its connection close and exits with status 75 to join again (issue 31), saying
 * why, well within cluster.collective_timeout_s. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include <xxhash.h>
#include <zmq.h>

#include "model/probe.h"
#include "core/clock.h"
#include "model/checkpoint.h"
#include "io/safetensors.h"
#include "tests/support/fake_coord.h"
#include "tests/testutil.h"

typedef struct {
    void *ctx;
    FakeCoord fc;
    pid_t pid;
    int wport;
    char wep[64], dir[256];
} Fix;

static pid_t start_rank(Fix *f, int rank, int world, const char *coll) {
    char bin[256], coord[256], log[256], wb[128], mp[512], dd[400], rk[16], nl[64], ce[128], id[64];
    snprintf(coord, sizeof coord, "cluster.coordinator=%s", f->fc.endpoint);
    snprintf(wb, sizeof wb, "cluster.weights_bind=%s", f->wep);
    snprintf(mp, sizeof mp, "actor_rollout_ref.model.path=%s/tests/data/model/qwen2_gqa", tu_root());
    snprintf(dd, sizeof dd, "trainer.default_local_dir=%s", f->dir);
    snprintf(log, sizeof log, "%s/test-logs/learner-daemon.log", tu_build());
    snprintf(rk, sizeof rk, "%d", rank);
    snprintf(nl, sizeof nl, "cluster.num_learners=%d", world);
    snprintf(ce, sizeof ce, "cluster.collective=%s", coll ? coll : "tcp://127.0.0.1:1");
    snprintf(id, sizeof id, "learner-test-%d", rank);
    char *argv[] = {(char *)tu_bin(bin, sizeof bin, "dapo-learner"), TU_DAPO_RECIPE, coord, wb, mp, dd, "cluster.heartbeat_ms=100",
                    "data.max_prompt_length=8", "data.max_response_length=16", "reward_model.overlong_buffer.enable=true", "reward_model.overlong_buffer.len=4",
                    "actor_rollout_ref.actor.use_dynamic_bsz=false",
                    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2", "actor_rollout_ref.actor.ppo_epochs=1",
                    "actor_rollout_ref.actor.optim.lr_warmup_steps=-1", "trainer.save_freq=1", "trainer.resume_mode=auto",
                    nl, ce, "cluster.collective_timeout_s=4", "actor_rollout_ref.rollout.n=2",
                    "actor_rollout_ref.actor.ppo_mini_batch_size=2", (char *)tu_fsdp_size_arg(), "--id", id, "--rank", rk,
                    NULL};
    return tu_spawn(argv, log);
}

static pid_t start_learner(Fix *f) { return start_rank(f, 0, 1, NULL); }

/* Stops the fixture's single-rank learner, for a test that starts its own ranks. */
static void stop_fixture_learner(Fix *f) {
    kill(f->pid, SIGKILL);
    tu_wait(f->pid, 2000);
    f->pid = -1;
}

static void handshake(Fix *f) {
    NetMsg *h = fake_coord_expect(&f->fc, DAPO__MSG_TYPE__MSG_HELLO, 20000, NULL);
    assert_non_null(h);
    assert_int_equal(((Dapo__Hello *)h->msg)->role, DAPO__ROLE__ROLE_LEARNER);
    fake_coord_welcome(&f->fc, 100, 5);
}

static int setup(void **state) {
    Fix *f = xcalloc(1, sizeof *f);
    char err[ERR_LEN];
    f->ctx = zmq_ctx_new();
    if (fake_coord_open(&f->fc, f->ctx, "tcp://127.0.0.1:0", err)) return -1;
    f->wport = tu_free_port();
    snprintf(f->wep, sizeof f->wep, "tcp://127.0.0.1:%d", f->wport);
    snprintf(f->dir, sizeof f->dir, "/tmp/dapo-test-learnerd-%d", (int)getpid());
    checkpoint_remove_tree(f->dir, err);
    f->pid = start_learner(f);
    *state = f;
    return f->pid > 0 ? 0 : -1;
}

static int teardown(void **state) {
    Fix *f = *state;
    char err[ERR_LEN];
    if (f->pid > 0) { kill(f->pid, SIGKILL); tu_wait(f->pid, 2000); }
    fake_coord_close(&f->fc);
    zmq_ctx_term(f->ctx);
    checkpoint_remove_tree(f->dir, err);
    xfree(f);
    return 0;
}

/* A rollout's weight request: returns the chunks received (up to max, in *out, caller frees each). */
static int fetch(Fix *f, int64_t version, const uint32_t *idx, size_t n_idx, Dapo__WeightUpdate **out, int max,
                 int wait_ms) {
    char err[ERR_LEN];
    NetOpts o = {.routing_id = "rollout-test"};
    void *s = net_socket(f->ctx, ZMQ_DEALER, f->wep, &o, err);
    assert_non_null(s);
    Dapo__WeightResend r = DAPO__WEIGHT_RESEND__INIT;
    r.version = version;
    r.chunk_indices = (uint32_t *)idx;
    r.n_chunk_indices = n_idx;
    r.worker_id = "rollout-test";
    assert_int_equal(net_send(s, NULL, 0, DAPO__MSG_TYPE__MSG_WEIGHT_RESEND, &r.base, false), 0);
    int got = 0;
    while (got < max) {
        NetMsg m;
        if (net_recv(s, &m, wait_ms, 0, err) != 0) break;
        assert_int_equal(m.type, DAPO__MSG_TYPE__MSG_WEIGHT_UPDATE);
        out[got++] = (Dapo__WeightUpdate *)m.msg;
        m.msg = NULL;
        if (out[got - 1]->chunk_count == (uint32_t)got && n_idx == 0) break;
        if (n_idx && (size_t)got == n_idx) break;
    }
    zmq_close(s);
    return got;
}

/* Checks chunks against the safetensors file of a model directory. */
static void check_chunks(Dapo__WeightUpdate **u, int n, int64_t version, const char *model_dir) {
    char err[ERR_LEN];
    SafeTensors *st = st_open(model_dir, err);
    assert_non_null(st);
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        assert_int_equal(u[i]->version, version);
        assert_string_equal(u[i]->dtype, "F32");
        assert_true(u[i]->checksum == XXH64(u[i]->data.data, u[i]->data.len, 0));
        assert_true(u[i]->data.len <= (4u << 20));
        if (!strcmp(u[i]->tensor_name, PROBE_TENSOR)) {   /* issue 42: the weight probe's log-probs, after the model */
            assert_int_equal(u[i]->n_shape, 1);
            assert_true(u[i]->shape[0] >= 1 && u[i]->shape[0] <= PROBE_TOKENS && u[i]->data.len == u[i]->shape[0] * 4);
            for (size_t k = 0; k < u[i]->shape[0]; k++) {
                float v;
                memcpy(&v, u[i]->data.data + 4 * k, 4);
                assert_true(isfinite(v) && v <= 0);
            }
            total += u[i]->data.len;
            continue;
        }
        const StTensor *t = st_find(st, u[i]->tensor_name);
        assert_non_null(t);
        assert_int_equal(u[i]->n_shape, (size_t)t->ndim);
        for (int d = 0; d < t->ndim; d++) assert_int_equal(u[i]->shape[d], t->shape[d]);
        float *ref = xmalloc((size_t)t->numel * 4);
        assert_int_equal(st_read_f32(st, u[i]->tensor_name, ref, (size_t)t->numel, err), 0);
        assert_true(u[i]->offset + u[i]->data.len <= (uint64_t)t->numel * 4);
        assert_memory_equal((char *)ref + u[i]->offset, u[i]->data.data, u[i]->data.len);
        xfree(ref);
        total += u[i]->data.len;
    }
    if (n == (int)u[0]->chunk_count) assert_int_equal(total, u[0]->total_bytes);
    st_close(st);
}

static void free_updates(Dapo__WeightUpdate **u, int n) {
    for (int i = 0; i < n; i++) dapo__weight_update__free_unpacked(u[i], NULL);
}

/* One shard: n sequences of (3 prompt + 4 response) tokens. */
static void send_shard_to(Fix *f, const NetMsg *peer, long step, uint32_t mini, uint32_t nmini, int last, uint32_t rank,
                          uint32_t world) {
    enum { S = 4, PL = 3, RL = 4 };
    int32_t ids[S * (PL + RL)];
    uint32_t offs[S + 1], plen[S];
    uint64_t gids[S];
    float mask[S * RL], adv[S * RL], lps[S * RL];
    for (int i = 0; i < S * (PL + RL); i++) ids[i] = (int32_t)(5 + (i * 7 + (int)mini * 3) % 80);
    for (int i = 0; i < S; i++) { offs[i] = (uint32_t)(i * (PL + RL)); plen[i] = PL; gids[i] = (uint64_t)i; }
    offs[S] = S * (PL + RL);
    for (int j = 0; j < S * RL; j++) { mask[j] = 1; adv[j] = (j / RL) % 2 ? 0.8f : -0.6f; lps[j] = -4.4f; }
    Dapo__TrainBatch tb = DAPO__TRAIN_BATCH__INIT;
    tb.run_id = "fake-run";
    tb.step = step;
    tb.policy_version = step - 1;
    tb.mini_batch_index = mini;
    tb.num_mini_batches = nmini;
    tb.input_ids = ids; tb.n_input_ids = S * (PL + RL);
    tb.offsets = offs; tb.n_offsets = S + 1;
    tb.prompt_lengths = plen; tb.n_prompt_lengths = S;
    tb.response_mask = mask; tb.n_response_mask = S * RL;
    tb.advantages = adv; tb.n_advantages = S * RL;
    tb.rollout_logprobs = lps; tb.n_rollout_logprobs = S * RL;
    tb.group_ids = gids; tb.n_group_ids = S;
    tb.global_response_tokens = S * RL * world;
    tb.global_num_seqs = S * world;
    tb.rank = rank;
    tb.world_size = world;
    tb.last_of_step = last;
    if (peer) fake_coord_send(&f->fc, peer->peer, peer->peer_len, DAPO__MSG_TYPE__MSG_TRAIN_BATCH, &tb.base);
    else assert_int_equal(fake_coord_reply(&f->fc, DAPO__MSG_TYPE__MSG_TRAIN_BATCH, &tb.base), 0);
}

static void send_shard(Fix *f, long step, uint32_t mini, uint32_t nmini, int last, uint32_t rank) {
    send_shard_to(f, NULL, step, mini, nmini, last, rank, 1);
}

/* Sends Control CHECKPOINT of `step` and waits for the CHECKPOINT_DONE; returns its step. why (may be NULL) gets the
 * refusal reason; without why a refusal fails the test. */
static long ask_checkpoint(Fix *f, long step, char why[256]) {
    Dapo__Control c = DAPO__CONTROL__INIT;
    c.cmd = DAPO__CONTROL_CMD__CONTROL_CHECKPOINT;
    c.step = step;
    assert_int_equal(fake_coord_reply(&f->fc, DAPO__MSG_TYPE__MSG_CONTROL, &c.base), 0);
    NetMsg *m = fake_coord_expect(&f->fc, DAPO__MSG_TYPE__MSG_CONTROL, 20000, NULL);
    assert_non_null(m);
    Dapo__Control *d = (Dapo__Control *)m->msg;
    assert_int_equal(d->cmd, DAPO__CONTROL_CMD__CONTROL_CHECKPOINT_DONE);
    if (why) snprintf(why, 256, "%s", d->reason);
    else assert_string_equal(d->reason, "");
    return (long)d->step;
}

static double metric(const Dapo__StepResult *r, const char *key) {
    for (size_t i = 0; i < r->n_metrics; i++)
        if (!strcmp(r->metrics[i]->key, key)) return r->metrics[i]->value;
    fail_msg("metric %s missing", key);
    return 0;
}

static void test_step_and_weights(void **state) {
    Fix *f = *state;
    handshake(f);
    char model_dir[512];
    snprintf(model_dir, sizeof model_dir, "%s/tests/data/model/qwen2_gqa", tu_root());
    Dapo__WeightUpdate *u[64];
    int n = fetch(f, 0, NULL, 0, u, 64, 5000);
    assert_true(n >= 1);
    assert_int_equal(n, (int)u[0]->chunk_count);
    check_chunks(u, n, 0, model_dir);
    int nchunks = n;
    free_updates(u, n);
    /* one step, two mini-batches */
    send_shard(f, 1, 0, 2, 0, 0);
    send_shard(f, 1, 1, 2, 1, 0);
    for (uint32_t k = 0; k < 2; k++) {
        NetMsg *m = fake_coord_expect(&f->fc, DAPO__MSG_TYPE__MSG_STEP_RESULT, 20000, NULL);
        assert_non_null(m);
        Dapo__StepResult *r = (Dapo__StepResult *)m->msg;
        assert_string_equal(r->error, "");
        assert_int_equal(r->step, 1);
        assert_int_equal(r->mini_batch_index, k);
        assert_int_equal(r->new_policy_version, k == 1 ? 1 : 0);
        assert_false(r->skipped);
        assert_true(metric(r, "actor/grad_norm") > 0);
        assert_true(metric(r, "actor/lr") > 0);
        metric(r, "actor/pg_loss");
        metric(r, "actor/pg_clipfrac");
        metric(r, "actor/pg_clipfrac_lower");
        metric(r, "actor/ppo_kl");
        assert_true(metric(r, "actor/entropy") > 0);
        metric(r, "rollout_corr/log_ppl_diff");
        assert_true(metric(r, "rollout_corr/abs_logprob_diff") >= 0);
        assert_true(metric(r, "timing_s/old_log_prob") >= 0);
        assert_true(metric(r, "timing_s/update_actor") > 0);
    }
    /* the coordinator asks for the checkpoint of step 1: written before the answer, which names the step */
    char ck[600];
    snprintf(ck, sizeof ck, "%s/global_step_1/actor/huggingface", f->dir);
    assert_int_not_equal(access(ck, F_OK), 0);           /* nothing is saved unless asked */
    assert_int_equal(ask_checkpoint(f, 1, NULL), 1);
    assert_int_equal(access(ck, F_OK), 0);
    assert_int_equal(ask_checkpoint(f, 1, NULL), 1);      /* again: already written, answered all the same */
    char why[256];
    assert_int_equal(ask_checkpoint(f, 7, why), 7);       /* a step it is not at: refused with the reason */
    assert_non_null(strstr(why, "last finished step is 1"));
    /* version 1 == the checkpoint of step 1 */
    uint32_t want[2] = {0, (uint32_t)nchunks - 1};
    n = fetch(f, 1, want, 2, u, 64, 5000);
    assert_int_equal(n, 2);
    assert_int_equal(u[0]->chunk_index, 0);
    assert_int_equal(u[1]->chunk_index, (uint32_t)nchunks - 1);
    check_chunks(u, n, 1, ck);
    free_updates(u, n);
    /* a version it does not hold: no answer */
    assert_int_equal(fetch(f, 5, NULL, 0, u, 1, 300), 0);
    /* a malformed shard fails its step with a reason */
    send_shard(f, 2, 0, 1, 1, 3);
    NetMsg *m = fake_coord_expect(&f->fc, DAPO__MSG_TYPE__MSG_STEP_RESULT, 10000, NULL);
    assert_non_null(m);
    assert_non_null(strstr(((Dapo__StepResult *)m->msg)->error, "rank 3"));
    assert_int_equal(((Dapo__StepResult *)m->msg)->code, ERR_INVAL);
    /* SIGTERM: clean exit */
    kill(f->pid, SIGTERM);
    assert_int_equal(tu_wait(f->pid, 10000), 0);
    /* restart (after a kill -9 it is the same): resumes version 1 from the checkpoint */
    f->pid = start_learner(f);
    handshake(f);
    n = fetch(f, 1, NULL, 0, u, 64, 10000);
    assert_int_equal(n, nchunks);
    check_chunks(u, n, 1, ck);
    free_updates(u, n);
    kill(f->pid, SIGKILL);
    assert_int_equal(tu_wait(f->pid, 5000), 128 + SIGKILL);
    f->pid = start_learner(f);
    handshake(f);
    n = fetch(f, 1, want, 1, u, 64, 10000);
    assert_int_equal(n, 1);
    assert_int_equal(u[0]->version, 1);
    free_updates(u, n);
}

/* Two ranks: the same step on both (equal metrics, rank 0 publishes), then rank 1 is killed: the idle rank 0 exits
 * with status 75 (the supervisor starts it again, to join whichever rank 1 comes) within a second or two, not after
 * the collective timeout, and says which rank it lost. */
static void test_two_ranks_and_dead_peer(void **state) {
    Fix *f = *state;
    stop_fixture_learner(f);                     /* the fixture's single rank is not used here */
    char coll[64];
    snprintf(coll, sizeof coll, "tcp://127.0.0.1:%d", tu_free_port());
    pid_t r1 = start_rank(f, 1, 2, coll);
    f->pid = start_rank(f, 0, 2, coll);
    NetMsg peers[2];
    for (int i = 0; i < 2; i++) {
        NetMsg *h = fake_coord_expect(&f->fc, DAPO__MSG_TYPE__MSG_HELLO, 20000, NULL);
        assert_non_null(h);
        int rank = (int)((Dapo__Hello *)h->msg)->rank;
        assert_true(rank == 0 || rank == 1);
        peers[rank] = *h;
        peers[rank].msg = NULL;
        fake_coord_welcome(&f->fc, 100, 5);
    }
    for (uint32_t r = 0; r < 2; r++) send_shard_to(f, &peers[r], 1, 0, 1, 1, r, 2);
    double loss[2] = {0, 0};
    int64_t newv[2] = {-1, -1};
    for (int i = 0; i < 2; i++) {
        NetMsg *m = fake_coord_expect(&f->fc, DAPO__MSG_TYPE__MSG_STEP_RESULT, 30000, NULL);
        assert_non_null(m);
        Dapo__StepResult *r = (Dapo__StepResult *)m->msg;
        assert_string_equal(r->error, "");
        loss[r->rank] = metric(r, "actor/pg_loss");
        newv[r->rank] = r->new_policy_version;
    }
    assert_true(loss[0] == loss[1]);             /* all-reduced: the same on both ranks */
    assert_int_equal(newv[0], 1);
    assert_int_equal(newv[1], 0);
    kill(r1, SIGKILL);
    assert_int_equal(tu_wait(r1, 5000), 128 + SIGKILL);
    double t0 = clock_s();
    assert_int_equal(tu_wait(f->pid, 3000), 75);
    assert_true(clock_s() - t0 < 3);                 /* cluster.collective_timeout_s is 4 */
    f->pid = -1;
    char cmd[600], out[64];
    snprintf(cmd, sizeof cmd, "grep -c 'the connection to rank 1 closed.*exiting with status 75' %s/test-logs/"
             "learner-daemon.log", tu_build());
    tu_run(cmd, out, sizeof out);
    assert_true(atoi(out) >= 1);
}

/* A learner rank waiting for its peers to join (cluster.collective_timeout_s 4 here, 300 by default) stops at once on
 * SIGTERM, exit 0, instead of waiting out the timeout and asking to be restarted (75). */
static void test_sigterm_while_ranks_join(void **state) {
    Fix *f = *state;
    stop_fixture_learner(f);                     /* the fixture's single rank is not used here */
    char coll[64];
    snprintf(coll, sizeof coll, "tcp://127.0.0.1:%d", tu_free_port());
    f->pid = start_rank(f, 0, 2, coll);                 /* rank 1 never comes */
    for (int i = 0; i < 20; i++) fake_coord_expect(&f->fc, DAPO__MSG_TYPE__MSG_UNKNOWN, 50, NULL);   /* its probe */
    kill(f->pid, SIGTERM);
    double t0 = clock_s();
    assert_int_equal(tu_wait(f->pid, 3000), 0);
    assert_true(clock_s() - t0 < 2);
    f->pid = -1;
}

int main(void) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 0);      /* for the spawned tools (deploy/local/env.sh, docs/performance.md) */
    setenv("OPENBLAS_THREAD_TIMEOUT", "4", 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_step_and_weights, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sigterm_while_ranks_join, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_ranks_and_dead_peer, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
