/* services/coordinator/recover.c: a run that survives its learner (issue 17).
 *
 * A learner rank lost mid-run (killed, crashed, partitioned past the lease timeout) does not fail the run. The engine
 * enters PH_REJOIN: what is in flight is cancelled, every learner rank still alive is told to start again from the
 * newest checkpoint on disk (Control RELOAD: it exits with status 75 and its supervisor restarts it). When learner
 * rank 0 registers again with the weights of a checkpoint (Hello.fresh), the resume decision of ckpt.c picks the
 * two-sided checkpoint whose policy version it loaded and the engine rolls back to it, the run's incarnation one up
 * (written to coordinator.json with it, and announced with the version in the same Heartbeat): cursor, step, policy version, group ids and the group accounting as of that checkpoint (the steps trained
 * since are trained again and counted once), metrics.jsonl rows of later steps dropped. A learner that holds newer
 * weights than any checkpoint (the coordinator restarted from its checkpoint while the learner ran on) is told to
 * reload too, instead of failing the run. Only when no learner comes back within cluster.learner_rejoin_timeout_s
 * does the run fail, saying what to run.
 *
 * The incarnation keeps version numbers honest: after a rollback to version v the learners train v+1 again, with
 * other weights than the abandoned v+1. Every worker reports the incarnation of the weights it holds (Hello,
 * Heartbeat, WeightAck); a rollout of another incarnation counts as holding no weights (eng__worker_version), loads
 * the current version again whatever its number, and its group results made before that are dropped and counted
 * (results_abandoned).
 * Not here: the checkpoint files and the resume decision (ckpt.c), restarting processes (tools/dapo-supervise.c). */
#include "engine.h"

void recover_reload_one(Coord *c, int wi, const char *why) {
    WorkerEntry *w = &c->workers[wi];
    Dapo__Control m = DAPO__CONTROL__INIT;
    m.cmd = DAPO__CONTROL_CMD__CONTROL_RELOAD;
    m.path = c->cfg.default_local_dir;
    m.reason = (char *)why;
    int rc = out_send(c, w, DAPO__MSG_TYPE__MSG_CONTROL, &m.base);
    if (rc) log_warn("learner %s: the reload request was not sent: %s", w->id, err_str(rc));
    else log_info("learner %s (rank %u) asked to start again from the last checkpoint", w->id, w->rank);
}

/* Control RELOAD to every live learner rank: each starts again from the newest checkpoint. */
void recover_send_reload(Coord *c, int spare, const char *why) {
    for (int i = 0; i < c->nworkers; i++) {
        WorkerEntry *w = &c->workers[i];
        if (w->role != DAPO__ROLE__ROLE_LEARNER || w->life != WORKER_ALIVE || i == spare) continue;
        recover_reload_one(c, i, why);
    }
}

void engine_rejoin_begin(Coord *c, int spare, const char *fmt, ...) {
    Engine *e = c->engine;
    if (!e || e->phase == PH_FAILED) return;
    char why[ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    /* A finished run first: a learner that leaves while it stops (a checkpoint asked of it unanswered) loses no step
     * the run still needs; the stop then exits without that checkpoint (stop_tick), as a finished run: status 0. */
    if (e->phase == PH_DONE) { log_warn("%s after training finished: nothing to recover", why); return; }
    if (c->stopping) { engine_fail(c, "%s while the run was stopping", why); return; }
    if (e->phase == PH_REJOIN) { log_warn("%s (already waiting for the learners)", why); return; }
    eng__cancel_in_flight(c);
    eng__groups_reset(e);
    e->job.active = 0;
    eng__queue_clear(c);                             /* steps queued behind it: generated again after the rollback */
    e->val_pending = 0;
    e->phase = PH_REJOIN;
    e->rejoin_t0 = clock_s();
    snprintf(e->rejoin_why, sizeof e->rejoin_why, "%s", why);
    c->ckpt.undecided = 1;                           /* learner rank 0's next Hello decides where to resume */
    coord_event(c, "%.120s: waiting for the learners, then a rollback to the last checkpoint", why);
    log_warn("%s: the run waits up to %.0f s (cluster.learner_rejoin_timeout_s) for the learners, then rolls back to the "
             "last checkpoint", why, c->cfg.learner_rejoin_timeout_s);
    recover_send_reload(c, spare, why);
}

void engine_rejoin_done(Coord *c, long step) {
    Engine *e = c->engine;
    if (!e || e->phase != PH_REJOIN) return;
    e->phase = PH_IDLE;
    c->faults.rollbacks++;
    c->faults_dirty = 1;
    coord_event(c, "rolled back to step %ld (policy version %lld, run incarnation %u)", step, (long long)c->policy_version,
                c->incarnation);
    log_warn("rolled back to step %ld (policy version %lld, run incarnation %u): the learners rejoined after %.0f s; "
             "what was trained after step %ld is trained again", step, (long long)c->policy_version, c->incarnation,
             clock_s() - e->rejoin_t0, step);
    eng__announce_version(c);
}

void engine_rejoin_tick(Coord *c) {
    Engine *e = c->engine;
    if (!e || e->phase != PH_REJOIN) return;
    double waited = clock_s() - e->rejoin_t0;
    if (waited > c->cfg.learner_rejoin_timeout_s) {
        log_error("learner lost: %s", e->rejoin_why);
        engine_fail(c, "no learner came back within cluster.learner_rejoin_timeout_s (%.0f s): see the learner logs, "
                    "then run the same command again (it resumes from the last checkpoint)",
                    c->cfg.learner_rejoin_timeout_s);
        return;
    }
    int alive = registry_count(c, DAPO__ROLE__ROLE_LEARNER, WORKER_ALIVE);
    eng__status(c, "waiting for the learners to rejoin (%d of %d ranks live; the run fails after %.0f s): %.160s", alive,
                c->cfg.num_learners, c->cfg.learner_rejoin_timeout_s, e->rejoin_why);
}
