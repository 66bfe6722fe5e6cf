/* services/learner/main.c: dapo-learner, rank r of W (docs/design.md §1 step 5, issue 7). Startup: the CPU collective
 * between the W ranks (cluster.collective; every wait bounded by cluster.collective_timeout_s), the model from the
 * newest checkpoint or actor_rollout_ref.model.path (learner.h; every rank must agree on the step it resumes), and on
 * rank 0 the weight server (weights.h) holding the current version (0 for a fresh model). Then the shared worker loop:
 * TrainBatch shards are buffered and trained by learner.h (old log-probs for all mini-batches first); each shard is
 * answered with a StepResult; after the step's last shard rank 0 publishes version v+1 BEFORE its StepResult carries
 * new_policy_version = v+1. Checkpoints are the coordinator's to ask for (it asks at every trainer.save_freq step, the
 * last step and when it stops, and keeps its own state of that step beside them): Control CHECKPOINT of step S saves
 * the weights of step S (rank 0) between steps and answers Control CHECKPOINT_DONE — the coordinator records a
 * checkpoint only once both sides hold it. Control SHUTDOWN stops like SIGTERM; Control RELOAD (the run rolls back to
 * its last checkpoint, coordinator recover.c) exits with status 75 so that the supervisor starts it again from there;
 * so does a rank whose collective lost a peer between steps (coll_poll), and one whose join timed out (a peer not up
 * yet: how long to wait for it is the coordinator's cluster.learner_rejoin_timeout_s, not the supervisor's). Long computations keep heartbeating
 * and serving weight requests (keepalive).
 * Not here: the GPU path (the NCCL collective exists for CUDA builds; the model core is CPU-only), pushing weights. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "core/exitcode.h"
#include "core/log.h"
#include "settings/settings.h"
#include "core/threads_env.h"
#include "model/checkpoint.h"
#include "learner.h"
#include "net/daemon.h"
#include "net/zap.h"
#include "weights.h"

typedef struct {
    Daemon        d;
    Learner      *L;
    Collective   *coll;
    WeightServer *ws;
    NetMsg       *deferred;      /* work messages that arrived during a keepalive poll, in order */
    int           n_deferred, cap_deferred;
    int           in_keepalive;
    int           reload;        /* Control RELOAD: exit with LEARNER_EXIT_RELOAD, to be started again */
    Zap          *zap;           /* rank 0 with CURVE: the ZAP handler of the weight server and collective */
} Svc;

/* The exit status of a learner asked to start again from the newest checkpoint (EX_TEMPFAIL): its supervisor
 * restarts it (tools/dapo-supervise.c and a systemd unit at once; a kubelet after its crash-loop back-off). */
#define LEARNER_EXIT_RELOAD DAPO_EXIT_RESTART

static int on_work(void *ud, NetMsg *m);
static int handle(Svc *s, NetMsg *m);

/* Control RELOAD or SHUTDOWN: acted on at once, even in the middle of a step. A rank blocked in a collective whose
 * peer was restarted would otherwise wait out cluster.collective_timeout_s before it saw the rollback. */
static int stops_now(const NetMsg *m) {
    if (m->type != DAPO__MSG_TYPE__MSG_CONTROL) return 0;
    const Dapo__Control *c = (const Dapo__Control *)m->msg;
    return c->cmd == DAPO__CONTROL_CMD__CONTROL_RELOAD || c->cmd == DAPO__CONTROL_CMD__CONTROL_SHUTDOWN;
}

static void defer(Svc *s, NetMsg *m) {
    XGROW(s->deferred, s->n_deferred, s->cap_deferred, 16);
    s->deferred[s->n_deferred++] = *m;
    m->msg = NULL;
}

/* Heartbeats and weight requests while the engine computes; work messages wait in `deferred`. */
static int keepalive(void *ud) {
    Svc *s = ud;
    if (daemon_stopping()) return ERR_CLOSED;        /* also while the ranks join, before the worker connects */
    if (s->in_keepalive || !s->d.worker) return 0;
    s->in_keepalive = 1;
    char err[ERR_LEN];
    NetMsg m;
    int rc = worker_poll(s->d.worker, &m, 0, err);
    if (rc == 1 && stops_now(&m)) {
        handle(s, &m);                               /* raises SIGTERM: the computation (a collective) is abandoned */
        net_msg_free(&m);
    } else if (rc == 1) {
        defer(s, &m);
        net_msg_free(&m);
    } else if (rc == ERR_VERSION || rc == ERR_INVAL) {
        log_error("%s", err);
    }
    if (s->ws && wsrv_serve(s->ws, 0, err) < 0) log_warn("%s", err);
    s->in_keepalive = 0;
    return daemon_stopping() ? ERR_CLOSED : 0;
}

static void send_result(Svc *s, const LearnerResult *r, int64_t new_version) {
    Dapo__StepResult sr = DAPO__STEP_RESULT__INIT;
    int n = r->metrics.n;
    Dapo__StepResult__MetricsEntry *e = xcalloc((size_t)(n ? n : 1), sizeof *e);
    Dapo__StepResult__MetricsEntry **ep = xcalloc((size_t)(n ? n : 1), sizeof *ep);
    for (int i = 0; i < n; i++) {
        dapo__step_result__metrics_entry__init(&e[i]);
        e[i].key = (char *)r->metrics.m[i].name;
        e[i].value = r->metrics.m[i].value;
        ep[i] = &e[i];
    }
    sr.run_id = r->tb->run_id;
    sr.step = r->tb->step;
    sr.rank = (uint32_t)s->d.rank;
    sr.mini_batch_index = r->tb->mini_batch_index;
    sr.n_metrics = (size_t)n;
    sr.metrics = ep;
    sr.new_policy_version = new_version;
    sr.error = (char *)(r->failed ? r->error : "");
    sr.code = r->failed ? r->code : 0;
    sr.skipped = r->st.skipped != 0;
    int rc = worker_send(s->d.worker, DAPO__MSG_TYPE__MSG_STEP_RESULT, &sr.base);
    if (rc) log_error("step %lld: StepResult not sent: %s", (long long)r->tb->step, err_str(rc));
    xfree(e);
    xfree(ep);
}

/* Control CHECKPOINT of `step` (rank 0; every rank when the optimizer is sharded): saves the weights of that step
 * (a rank > 0: its optimizer shard) unless they are on disk already, and answers
 * CHECKPOINT_DONE with an empty reason, or the reason it did not. Only a step boundary is saved: a request for another
 * step than the last one finished, or one that comes while a step is under way, is refused (the coordinator asks
 * right after a step's results and before it sends the next step, so neither happens in a healthy run). */
static void checkpoint_requested(Svc *s, int64_t step) {
    Learner *L = s->L;
    char err[ERR_LEN] = "", path[4096];
    long have = -1;
    int code = 0;
    if (step != L->steps_done)
        code = err_set(err, ERR_INVAL, "checkpoint asked for step %lld, but the learner's last finished step is %ld",
                       (long long)step, L->steps_done);
    else if (L->cur_step >= 0)
        code = err_set(err, ERR_AGAIN, "checkpoint of step %lld asked while step %ld is being trained", (long long)step,
                       L->cur_step);
    else if (L->rank == 0 && checkpoint_find_latest(L->ckpt_root, path, sizeof path, &have, err) == 0 &&
             have == L->steps_done)
        log_info("checkpoint of step %ld already written", have);
    else
        code = learner_checkpoint(L, err);
    if (!code) err[0] = 0;
    else log_error("checkpoint: %s", err);
    Dapo__Control m = DAPO__CONTROL__INIT;
    m.cmd = DAPO__CONTROL_CMD__CONTROL_CHECKPOINT_DONE;
    m.step = step;
    m.path = L->ckpt_root;
    m.reason = err;
    m.code = code;
    int rc = worker_send(s->d.worker, DAPO__MSG_TYPE__MSG_CONTROL, &m.base);
    if (rc) log_error("checkpoint of step %lld: the confirmation was not sent: %s", (long long)step, err_str(rc));
}

/* Runs at most one shard; 1 when one ran. */
static int run_one(Svc *s) {
    LearnerResult r;
    if (!learner_next(s->L, &r)) return 0;
    int64_t newv = 0;
    int last = !r.failed && r.tb->last_of_step;
    if (last && s->d.rank == 0) {
        char err[ERR_LEN];
        int prc = wsrv_publish(s->ws, s->L->m, learner_params(s->L), s->L->probe_lp, s->L->n_probe, s->L->version,
                               err);
        if (prc) {
            r.failed = 1;
            r.code = prc;
            snprintf(r.error, sizeof r.error, "publishing weights: %.200s", err);
        } else {
            newv = s->L->version;
        }
    }
    send_result(s, &r, newv);
    if (r.failed) log_error("step %lld: %s", (long long)r.tb->step, r.error);
    else log_info("step %lld mini-batch %u epoch %u: pg_loss %.6g grad_norm %.4g lr %.3g%s", (long long)r.tb->step,
                  r.tb->mini_batch_index, r.tb->ppo_epoch, r.st.pg_loss, r.st.grad_norm, r.st.lr,
                  r.st.skipped ? " (update skipped: non-finite)" : "");
    if (last) log_set_step(s->L->steps_done);
    learner_result_free(&r);
    return 1;
}

static int handle(Svc *s, NetMsg *m) {
    switch (m->type) {
    case DAPO__MSG_TYPE__MSG_TRAIN_BATCH:
        worker_set_fresh(s->d.worker, 0);            /* from now on its weights may differ from the checkpoint's */
        learner_submit(s->L, (Dapo__TrainBatch *)m->msg);
        m->msg = NULL;
        break;
    case DAPO__MSG_TYPE__MSG_CONTROL: {
        const Dapo__Control *c = (const Dapo__Control *)m->msg;
        if (c->cmd == DAPO__CONTROL_CMD__CONTROL_CHECKPOINT && (s->d.rank == 0 || s->L->sharded))
            checkpoint_requested(s, c->step);
        else if (c->cmd == DAPO__CONTROL_CMD__CONTROL_SHUTDOWN) raise(SIGTERM);
        else if (c->cmd == DAPO__CONTROL_CMD__CONTROL_RELOAD && !s->reload) {
            log_warn("the coordinator rolls the run back (%s): exiting with status %d to start again from the newest "
                     "checkpoint under %s", c->reason && c->reason[0] ? c->reason : "no reason given",
                     LEARNER_EXIT_RELOAD, s->d.cfg.default_local_dir);
            s->reload = 1;
            raise(SIGTERM);
        }
        break;
    }
    case DAPO__MSG_TYPE__MSG_CANCEL:
        break;
    default:
        daemon_reply_unsupported(&s->d, m);
    }
    return 0;
}

/* Messages that came in during the last computation, in arrival order: before any message read after them. */
static void flush_deferred(Svc *s) {
    for (int i = 0; i < s->n_deferred; i++) {
        handle(s, &s->deferred[i]);
        net_msg_free(&s->deferred[i]);
    }
    s->n_deferred = 0;
}

static int on_work(void *ud, NetMsg *m) {
    flush_deferred(ud);
    return handle(ud, m);
}

/* Between steps, a rank whose collective lost a peer (that rank died, restarted, or went silent; issue 31) starts
 * again from the newest checkpoint, as on Control RELOAD: whichever rank 0 is up then is the one it joins. */
static void check_collective(Svc *s) {
    char err[ERR_LEN];
    if (s->reload || !s->coll || coll_poll(s->coll, err) == 0) return;
    log_warn("%s: exiting with status %d to join the collective again from the newest checkpoint under %s", err,
             LEARNER_EXIT_RELOAD, s->d.cfg.default_local_dir);
    s->reload = 1;
    raise(SIGTERM);
}

static int on_idle(void *ud) {
    Svc *s = ud;
    char err[ERR_LEN];
    flush_deferred(s);
    check_collective(s);
    if (s->ws && wsrv_serve(s->ws, 0, err) < 0) log_warn("%s", err);
    int ran = run_one(s);
    worker_set_status(s->d.worker, (uint32_t)s->L->n_pending, s->L->version);
    unsigned long long wr, wf, cr, cf;               /* issue 38: what this rank's servers refused, to /api/status */
    wsrv_security(s->ws, &wr, &wf);
    coll_security(s->coll, &cr, &cf);
    worker_set_security(s->d.worker, zap_refused(s->zap), wf + cf, wr + cr);
    return ran || s->n_deferred ? 0 : (s->ws ? 10 : 50);
}

/* Every rank must have resumed the same step: rank 0's (step, version) are broadcast and compared. */
static int agree(Svc *s, char err[ERR_LEN]) {
    int64_t v[2] = {s->L->steps_done, s->L->version};
    int rc = coll_broadcast(s->coll, v, sizeof v, err);
    if (rc) return rc;
    if (v[0] != s->L->steps_done || v[1] != s->L->version)
        return err_set(err, ERR_INVAL, "rank %d resumed step %ld (version %lld) but rank 0 has step %lld (version %lld): "
                       "every rank must see the same trainer.default_local_dir", s->d.rank, s->L->steps_done,
                       (long long)s->L->version, (long long)v[0], (long long)v[1]);
    return 0;
}

int main(int argc, char **argv) {
    threads_env_ensure(argv);
    static Svc s;
    char err[ERR_LEN];
    int rc = daemon_init(&s.d, argc, argv, DAPO__ROLE__ROLE_LEARNER, "learner", err);
    if (rc == 0 && config_is_set(&s.d.cfg, "trainer.device"))      /* its own: refused before the coordinator */
        rc = settings_backend(&s.d.cfg, err) ? 0 : ERR_UNSUPPORTED;
    if (rc == 0) rc = daemon_take_run_config(&s.d, DAPO__ROLE__ROLE_LEARNER, err);
    if (rc == 1) { config_free(&s.d.cfg); return 0; }
    int W = s.d.cfg.num_learners;
    if (rc == 0) {
        s.d.zctx = zmq_ctx_new();
        const CurveKeys *k = &s.d.keys;          /* rank 0 serves weights, every rank of several its ring: ZAP */
        if (k->on && (s.d.rank == 0 || W > 1) && !(s.zap = zap_start(s.d.zctx, k->authorized_keys, err))) rc = ERR_IO;
        CollOptions co = {.rank = s.d.rank, .world = W, .endpoint = s.d.cfg.collective,
                          .timeout_s = s.d.cfg.collective_timeout_s, .zctx = s.d.zctx, .idle = keepalive, .idle_ud = &s,
                          .curve_server_secret = k->server_secret, .curve_server_public = k->server_public,
                          .curve_public = k->client_public, .curve_secret = k->client_secret};
        if (rc == 0) rc = coll_open_cpu(&co, &s.coll, err);
        if (rc < 0 && daemon_stopping()) {           /* SIGTERM while the ranks joined: a clean stop */
            log_info("learner rank %d: stopped while waiting for the other learner ranks", s.d.rank);
            rc = 1;
        }
        if (rc == ERR_TIMEOUT) {                     /* a peer is not up (yet): the coordinator decides how long */
            log_warn("%s: exiting with status %d to try again (the coordinator waits up to "
                     "cluster.learner_rejoin_timeout_s for the learners)", err, LEARNER_EXIT_RELOAD);
            s.reload = 1;
        }
    }
    if (rc == 0) {
        s.L = learner_open(&s.d.cfg, s.d.rank, W, s.coll, err);
        if (!s.L) rc = ERR_INVAL;
        else { s.L->keepalive = keepalive; s.L->keepalive_ud = &s; }
    }
    if (rc == 0) rc = agree(&s, err);
    if (rc == 0 && s.d.rank == 0) {
        s.ws = wsrv_open(s.d.zctx, s.d.cfg.weights_bind, s.d.cfg.run_id, (int64_t)s.d.cfg.max_msg_mb << 20, &s.d.keys,
                         err);
        if (!s.ws) rc = ERR_IO;
        else rc = wsrv_publish(s.ws, s.L->m, learner_params(s.L), s.L->probe_lp, s.L->n_probe, s.L->version, err);
    }
    if (rc == 0) {
        /* daemon_connect makes its own context; ours (collective, weights) stays separate */
        void *ours = s.d.zctx;
        s.d.zctx = NULL;
        s.d.policy_version = s.L->version;
        s.d.fresh = 1;                               /* the weights are the checkpoint's (or the base model's) */
        rc = daemon_connect(&s.d, DAPO__ROLE__ROLE_LEARNER, 1, 0, err);
        if (rc == 0) {
            worker_set_status(s.d.worker, 0, s.L->version);
            log_info("learner rank %d of %d ready: step %ld, policy version %lld", s.d.rank, W, s.L->steps_done,
                     (long long)s.L->version);
            rc = daemon_run(&s.d, on_work, on_idle, &s, err);
        }
        wsrv_close(s.ws);
        s.ws = NULL;
        coll_close(s.coll);
        s.coll = NULL;
        zap_stop(s.zap);
        s.zap = NULL;
        zmq_ctx_term(ours);
    }
    if (rc < 0 && !s.reload) log_error("%s", err);
    for (int i = 0; i < s.n_deferred; i++) net_msg_free(&s.deferred[i]);
    xfree(s.deferred);
    learner_close(s.L);
    wsrv_close(s.ws);
    coll_close(s.coll);
    zap_stop(s.zap);                                 /* before its context ends */
    if (s.d.worker) daemon_close(&s.d, s.reload ? "reload" : rc < 0 ? "error" : "shutdown");
    else {
        if (s.d.zctx) zmq_ctx_term(s.d.zctx);
        config_free(&s.d.cfg);
    }
    return s.reload ? LEARNER_EXIT_RELOAD : rc < 0 ? 1 : 0;
}
