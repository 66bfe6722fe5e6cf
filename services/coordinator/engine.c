/* services/coordinator/engine.c: the coordinator's one entry point, engine_on (coord.h; issue 35). run.c turns every
 * input — a worker message, a refused Hello, the 100 ms cron, a send that failed, a signal, the dashboard's control
 * requests — into an Event; engine_on routes it to the registry (registry.c), the training engine (results.c,
 * steps.c) and the checkpoints (ckpt.c), whose sends and file writes go to the outbox (outbox.c) for run.c to carry
 * out. Liveness becomes events here too: a worker the registry finds lost (or gone) is handed on as EV_WORKER_LOST. The stop
 * sequence lives here: a stop lets the step in training finish and checkpoints it on both sides (ckpt.c, steps.c's
 * stop tick), bounded by cluster.stop_timeout_s; a second stop exits at once.
 * Not here: sockets, timers, signals and HTTP (run.c). */
#include "engine.h"

/* As SIGTERM: stop generating, let the step in training finish, checkpoint it on both sides, then exit 0. A second
 * call exits at once. */
static void stop(Coord *c) {
    if (c->stopping) {
        if (ckpt_done(c)) {
            log_info("stop requested again: exiting now");
        } else {
            EngineSnapshot s = {0};
            engine_snapshot(c, &s);
            log_error("stop requested again: exiting now, without a checkpoint of step %ld; the next start resumes "
                      "step %ld, the last checkpoint both sides hold", s.step, c->ckpt.has_saved ? c->ckpt.saved.step : 0L);
            c->stop_failed = 1;
        }
        out_exit(c);
        return;
    }
    c->stopping = 1;
    c->stop_deadline_ms = clock_ms() + (int64_t)(c->cfg.stop_timeout_s * 1000);
    if (c->engine) eng__queue_clear(c);      /* queued steps: not trained; generated again after a resume */
    if (!c->engine) { log_info("stop requested"); out_exit(c); return; }
    log_info("stop requested: generation stops; the step in training finishes and is checkpointed on both sides "
             "(at most %g s, cluster.stop_timeout_s; stop again to exit at once)", c->cfg.stop_timeout_s);
    out_tell_stopping(c, 0);
    engine_tick(c);
}

/* A stop that has waited cluster.stop_timeout_s for the learner exits without the checkpoint: coordinator.json keeps
 * the last checkpoint both sides confirmed (and the one asked for, as pending), so a resume still agrees. */
static void check_stop_deadline(Coord *c) {
    if (c->stopping != 1 || clock_ms() < c->stop_deadline_ms) return;
    log_error("stopping: no checkpoint confirmed by the learner within %g s (cluster.stop_timeout_s); exiting with "
              "the last confirmed one (%s)", c->cfg.stop_timeout_s,
              c->ckpt.has_saved ? "see coordinator.json \"saved\"" : "none: a resume starts over");
    c->stop_failed = 1;
    out_exit(c);
}

void coord_state_free(Coord *c) {
    outbox_clear(c);
    xfree(c->out);
    c->out = NULL;
    for (int i = 0; i < COORD_ZC_BUFS; i++) xfree(c->zc[i].p);
    xfree(c->workers);
    c->workers = NULL;
    xfree(c->lost);
    c->lost = NULL;
    engine_free(c);
    coord_history_free(c);
    config_free(&c->cfg);
}

/* The workers the registry found lost or gone while it handled an event, each as an EV_WORKER_LOST. */
static void raise_lost(Coord *c) {
    for (int i = 0; i < c->nlost; i++) {
        Event lost = {.kind = EV_WORKER_LOST, .worker = c->lost[i]};
        engine_on(c, &lost, NULL);
    }
    c->nlost = 0;
}

/* The event's handling, then coordinator.json again when a fault counter moved (RunFaults: written when they change). */
static int on_event(Coord *c, const Event *ev, char err[ERR_LEN]);

int engine_on(Coord *c, const Event *ev, char err[ERR_LEN]) {
    int rc = on_event(c, ev, err);
    if (c->faults_dirty) {
        c->faults_dirty = 0;
        ckpt_faults_changed(c);
    }
    return rc;
}

static int on_event(Coord *c, const Event *ev, char err[ERR_LEN]) {
    switch (ev->kind) {
    case EV_MESSAGE:
        c->msgs_in++;
        registry_on_message(c, ev->msg);
        raise_lost(c);
        break;
    case EV_BAD_HELLO:
        registry_on_bad_version_hello(c, ev->msg);
        break;
    case EV_TICK:
        registry_cron(c);
        raise_lost(c);
        if (!c->stopping) engine_reclaim_leases(c);
        engine_tick(c);
        check_stop_deadline(c);
        break;
    case EV_SEND_FAILED:
        if (ev->worker >= 0 && ev->worker < c->nworkers) {
            engine_on_send_failed(c, ev->worker, ev->type, ev->item, ev->attempt, ev->code);
            if (ev->code == ERR_CLOSED) registry_connection_gone(c, ev->worker);
            engine_tick(c);
        }
        break;
    case EV_STOP:
        stop(c);
        break;
    case EV_PAUSE:
        if (!c->paused) log_info("paused from the dashboard: no new groups are dispatched");
        c->paused = 1;
        break;
    case EV_RESUME:
        if (c->paused) log_info("resumed from the dashboard");
        c->paused = 0;
        break;
    case EV_CHECKPOINT:
        if (!c->engine) return err_set(err, ERR_UNSUPPORTED, "no training run configured: nothing to checkpoint");
        return ckpt_ask(c, err);
    case EV_WORKER_LOST:
        if (ev->worker >= 0 && ev->worker < c->nworkers) engine_on_worker_lost(c, ev->worker);
        break;
    case EV_WRITE_FAILED:
        if (c->engine) ckpt_on_write_failed(c, (long)ev->item, (CkptWrite)ev->attempt, ev->code);
        break;
    }
    return 0;
}
