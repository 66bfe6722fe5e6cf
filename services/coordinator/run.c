/* services/coordinator/run.c: dapo-coordinator's body, coord_run (coord.h; main.c calls it) — the control plane
 * (docs/design.md §1). One libuv loop: the ZeroMQ
 * ROUTER every worker connects to (through uv_poll on ZMQ_FD, drained until ZMQ_EVENTS has no POLLIN on every
 * wake-up and after every send, since ZMQ_FD is edge-triggered), a 100 ms cron (leases, the stop deadline), the HTTP
 * dashboard and SIGTERM/SIGINT: a stop lets the step in training finish and checkpoints it on both sides (ckpt.c)
 * before exiting; a second one exits at once. Exit status 1 when the run failed.
 * Not here: the training loop (steps.c), the worker registry (registry.c), checkpoints (ckpt.c), HTTP (dashboard.c). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "core/exitcode.h"
#include "backend/backend.h"
#include "net/daemon.h"
#include "net/portcheck.h"
#include "core/clock.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "coord.h"
#include "net/monitor.h"
#include "settings/settings.h"
#include "evlog.h"
#include "persist.h"
#include "io/tfevents.h"

/* A file action (persist.c); coordinator.json that could not be written comes back as EV_WRITE_FAILED, and the
 * frame to send after it (a checkpoint request) is dropped. 1 when a frame is to be sent now. */
static int carry_file(Coord *c, OutAction *a) {
    char err[ERR_LEN];
    int rc = persist_carry(c, a, err);
    if (!rc) return a->frame != NULL;
    log_error("%s", err);
    Event ev = {.kind = EV_WRITE_FAILED, .worker = -1, .item = a->item, .attempt = a->attempt, .code = rc};
    evlog_event(c->evlog, &ev);
    engine_on(c, &ev, NULL);
    return 0;
}

/* Carries out the outbox (outbox.c), in order: each frame to its worker (or peer), each file write, the end of the
 * loop. A send that fails (peer gone, queue full) goes back to the engine as EV_SEND_FAILED, a coordinator.json
 * that cannot be written as EV_WRITE_FAILED; their actions join the same flush. */
static void outbox_flush(Coord *c) {
    for (int i = 0; i < c->nout; i++) {
        OutAction a = c->out[i];                      /* engine_on below may append (and move c->out) */
        c->out[i].frame = NULL;
        c->out[i].metrics = NULL;
        c->out[i].text = NULL;
        evlog_action(c->evlog, &a);
        if (a.kind == OUT_EXIT) {
            http_close(c->http);
            c->http = NULL;
            uv_stop(c->loop);
            continue;
        }
        if (a.kind != OUT_SEND) {
            int send = carry_file(c, &a);
            if (!send && a.frame) out_release(a.frame, a.zb);
            a.frame = send ? a.frame : NULL;
            if (a.metrics) metrics_free(a.metrics);
            xfree(a.metrics);
            xfree(a.text);
            if (!send) continue;
        }
        const WorkerEntry *w = a.worker >= 0 ? &c->workers[a.worker] : NULL;
        c->need_drain = 1;
        int rc = net_send_frames(c->router, w ? w->rid : a.rid, w ? w->rid_len : a.rid_len, a.frame, a.len,
                                 ZMQ_DONTWAIT, out_release, a.zb);
        if (!rc) continue;
        log_debug("send %s to %s: %s", net_type_name(a.type), w ? w->id : "an unregistered peer", err_str(rc));
        if (!w) continue;
        Event ev = {.kind = EV_SEND_FAILED, .worker = a.worker, .type = a.type, .item = a.item, .attempt = a.attempt,
                    .code = rc};
        evlog_event(c->evlog, &ev);
        engine_on(c, &ev, NULL);
    }
    c->nout = 0;
}

/* engine_on (the event recorded first in cluster.event_log), then its actions carried out. */
static int on_event(Coord *c, const Event *ev, char err[ERR_LEN]) {
    evlog_event(c->evlog, ev);
    int rc = engine_on(c, ev, err);
    outbox_flush(c);
    return rc;
}

static void drain(Coord *c) {
    size_t maxb = (size_t)c->cfg.max_msg_mb << 20;
    do {
        c->need_drain = 0;
        for (;;) {
            int ev = 0;
            size_t sz = sizeof ev;
            if (zmq_getsockopt(c->router, ZMQ_EVENTS, &ev, &sz) || !(ev & ZMQ_POLLIN)) break;
            NetMsg m;
            char err[ERR_LEN];
            int rc = net_recv_arena(c->router, &m, 0, maxb, err);
            if (rc == ERR_AGAIN) break;
            if (rc == 0 || (rc == ERR_VERSION && m.type == DAPO__MSG_TYPE__MSG_HELLO && m.msg)) {
                Event e = {.kind = rc == 0 ? EV_MESSAGE : EV_BAD_HELLO, .msg = &m};
                on_event(c, &e, err);
            } else {
                c->msgs_bad++;
                log_warn_limited(&c->warn_bad, 10000, "dropped a bad message (%zu bytes) from %s: %s", m.bytes,
                                 m.peer_address[0] ? m.peer_address : "?", err);
                Dapo__ErrorReply e = DAPO__ERROR_REPLY__INIT;   /* the loop's own answer, not the engine's */
                e.code = rc;
                e.message = err;
                e.in_reply_to = (uint32_t)m.type;
                if (m.peer_len) net_send(c->router, m.peer, m.peer_len, DAPO__MSG_TYPE__MSG_ERROR, &e.base, true);
                c->need_drain = 1;
            }
            net_msg_free(&m);
        }
    } while (c->need_drain);
}

static void on_zmq_readable(uv_poll_t *h, int status, int events) {
    (void)events;
    Coord *c = h->data;
    if (status < 0) log_warn("uv_poll on ZMQ_FD: %s", uv_strerror(status));
    drain(c);
}

static void on_cron(uv_timer_t *t) {
    Coord *c = t->data;
    if (!c->stopping && daemon_orphaned()) {        /* its supervisor was killed: stop as on SIGTERM (checkpoint) */
        log_warn("the supervisor (pid %s) is gone: stopping the run", getenv("DAPO_SUPERVISOR_PID"));
        Event stop = {.kind = EV_STOP};
        on_event(c, &stop, NULL);
    }
    Event tick = {.kind = EV_TICK};
    on_event(c, &tick, NULL);
    log_limit_flush(&c->warn_bad, "dropped bad messages");
    log_limit_flush(&c->warn_foreign, "dropped messages sent with another worker's routing and a key not its own");
    log_limit_flush(&c->warn_unregistered, "messages on connections no worker registered on");
    log_limit_flush(&c->warn_role, "dropped messages that the sender's role does not send");
    log_limit_flush(&c->warn_refused, "refused Hellos");
    log_limit_flush(&c->warn_error_reply, "error replies from workers");
    log_limit_flush(&c->warn_life, "worker registrations and losses");
    log_limit_flush(&c->warn_reject, "group results rejected");
    log_limit_flush(&c->ckpt.warn_control, "Control messages dropped");
    persist_run_seconds(c);
    drain(c);
}

static void close_all(uv_handle_t *h, void *arg) {
    (void)arg;
    if (!uv_is_closing(h)) uv_close(h, NULL);
}

static void on_signal(uv_signal_t *s, int signum) {
    Coord *c = s->data;
    if (signum == SIGINT && ++c->sigints > 1) {
        log_warn("second SIGINT: exiting now");
        _exit(130);
    }
    log_info("%s", signum == SIGTERM ? "SIGTERM" : "SIGINT");
    Event stop = {.kind = EV_STOP};
    on_event(c, &stop, NULL);
}

/* The dashboard's routes; a control request's actions leave at once. */
static void on_http(void *coord, const HttpRequest *req, HttpResponse *resp) {
    CoordView v;
    view_publish(coord, &v);          /* the dashboard reads this snapshot, not the state */
    dashboard_handle(&v, req, resp);
    view_release(&v);
    outbox_flush(coord);
}


/* The resolved config as YAML text, for the dashboard. */
static char *config_text(const Config *cfg) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return xstrdup("");
    config_print_yaml(cfg, f);
    fclose(f);
    char *s = xstrdup(buf ? buf : "");
    free(buf);
    return s;
}

/* The dashboard's bearer token from cluster.token_file (first line, trimmed); NULL when unset. */
static int load_token(Coord *c, char err[ERR_LEN]) {
    if (!c->cfg.token_file[0]) return 0;
    FILE *f = fopen(c->cfg.token_file, "r");
    if (!f) return err_set(err, ERR_IO, "cluster.token_file: cannot read '%s'", c->cfg.token_file);
    char line[512] = "";
    if (!fgets(line, sizeof line, f)) line[0] = 0;
    fclose(f);
    line[strcspn(line, "\r\n")] = 0;
    if (strlen(line) < 8) return err_set(err, ERR_INVAL, "cluster.token_file: '%s' holds no token of 8+ characters", c->cfg.token_file);
    struct stat sb;
    if (stat(c->cfg.token_file, &sb) == 0 && curve_secret_exposed(&sb))
        log_warn("cluster.token_file %s is readable by others (mode %03o): chmod 600 %s", c->cfg.token_file,
                 (unsigned)(sb.st_mode & 0777), c->cfg.token_file);
    c->token = xstrdup(line);
    return 0;
}

/* trainer.logger: console (the step log line) and file (metrics.jsonl) are always on; tensorboard opens an event
 * file where verl writes it (TENSORBOARD_DIR, else tensorboard_log/<project_name>/<experiment_name>); verl's other
 * trackers are dropped with one warning. */
static int open_loggers(Coord *c, char err[ERR_LEN]) {
    const Config *cfg = &c->cfg;
    char dropped[512] = "";
    size_t k = 0;
    for (int i = 0; i < cfg->logger.n; i++)
        if (config_logger_known(cfg->logger.v[i]) == 2 && k < sizeof dropped)
            k += (size_t)snprintf(dropped + k, sizeof dropped - k, "%s%s", k ? ", " : "", cfg->logger.v[i]);
    if (dropped[0])
        log_warn("trainer.logger: %s not available in dapo: dropped (console, tensorboard and file are)", dropped);
    if (!config_has_logger(cfg, "tensorboard")) return 0;
    char dir[1024];
    const char *env = getenv("TENSORBOARD_DIR");
    if (env && *env) snprintf(dir, sizeof dir, "%s", env);
    else snprintf(dir, sizeof dir, "tensorboard_log/%s/%s", cfg->project_name, cfg->experiment_name);
    if (!(c->tb = tfevents_open(dir, err))) return ERR_IO;
    log_info("tensorboard: %s", tfevents_path(c->tb));
    return 0;
}

static int coord_start(Coord *c, const CoordHooks *hooks, char err[ERR_LEN]) {
    c->config_yaml = config_text(&c->cfg);
    c->run_config = config_run_keys(&c->cfg, false, &c->config_hash);
    log_info("run config hash %016llx (the run keys: every key but cluster.* and trainer.device; workers must match)",
             (unsigned long long)c->config_hash);
    if (load_token(c, err)) return ERR_INVAL;
    c->started_ms = clock_ms();
    if (c->cfg.run_id[0]) snprintf(c->run_id, sizeof c->run_id, "%s", c->cfg.run_id);
    else snprintf(c->run_id, sizeof c->run_id, "run-%ld-%d", (long)time(NULL), (int)getpid());
    if (curve_load(&c->cfg, true, false, &c->keys, err)) return ERR_INVAL;
    const char *binds[] = {c->cfg.bind}, *keys[] = {"cluster.bind"};
    if (curve_check_exposure(&c->cfg, &c->keys, binds, keys, 1, c->cfg.http, err)) return ERR_INVAL;
    c->http_public = !curve_is_loopback(c->cfg.http) && c->token;   /* without a token only cluster.insecure gets here:
                                                                       the dashboard is then open, as it warned */
    c->zctx = zmq_ctx_new();
    if (!c->zctx) return err_set(err, ERR_IO, "zmq_ctx_new: %s", zmq_strerror(zmq_errno()));
    int io_threads = c->cfg.io_threads ? c->cfg.io_threads : c->keys.on ? 2 : 1;
    if (zmq_ctx_set(c->zctx, ZMQ_IO_THREADS, io_threads))
        return err_set(err, ERR_IO, "cluster.io_threads=%d: %s", io_threads, zmq_strerror(zmq_errno()));
    if (c->keys.on && !(c->zap = zap_start(c->zctx, c->keys.authorized_keys, err))) return ERR_IO;
    NetOpts o = {.bind = true, .max_msg_bytes = (int64_t)c->cfg.max_msg_mb << 20, .curve = &c->keys,
                 .curve_server = true, .heartbeat_ms = c->cfg.heartbeat_ms,      /* a dead connection closes within */
                 .heartbeat_timeout_ms = (int)(c->cfg.lease_timeout_s * 1000)};  /* the lease timeout */
    char e2[ERR_LEN];
    c->router = net_socket(c->zctx, ZMQ_ROUTER, c->cfg.bind, &o, e2);
    if (!c->router) return err_set(err, ERR_IO, "cluster.bind: %s", e2);
    if (!(c->monitor = net_monitor_start(c->zctx, c->router, "coordinator", err))) return ERR_IO;
    net_last_endpoint(c->router, c->endpoint, sizeof c->endpoint);
    int fd;
    size_t fdsz = sizeof fd;
    if (zmq_getsockopt(c->router, ZMQ_FD, &fd, &fdsz)) return err_set(err, ERR_IO, "ZMQ_FD: %s", zmq_strerror(zmq_errno()));
    c->loop = uv_default_loop();
    int rc = uv_poll_init(c->loop, &c->zpoll, fd);
    if (!rc) { c->zpoll.data = c; rc = uv_poll_start(&c->zpoll, UV_READABLE, on_zmq_readable); }
    if (!rc) { rc = uv_timer_init(c->loop, &c->cron); c->cron.data = c; }
    if (!rc) rc = uv_timer_start(&c->cron, on_cron, 100, 100);
    if (!rc) { rc = uv_signal_init(c->loop, &c->sigterm); c->sigterm.data = c; }
    if (!rc) rc = uv_signal_start(&c->sigterm, on_signal, SIGTERM);
    if (!rc) { rc = uv_signal_init(c->loop, &c->sigint); c->sigint.data = c; }
    if (!rc) rc = uv_signal_start(&c->sigint, on_signal, SIGINT);
    if (rc) return err_set(err, ERR_IO, "libuv setup: %s", uv_strerror(rc));
    c->http = http_listen(c->loop, c->cfg.http, on_http, c, err);
    if (!c->http) return ERR_IO;
    if (hooks && hooks->after_listen && hooks->after_listen(c, hooks->ud, err)) return ERR_IO;
    char host[128];
    snprintf(host, sizeof host, "%s", c->cfg.http);                       /* the address bound, not a guess */
    char *colon = strrchr(host, ':');
    if (colon) *colon = 0;
    log_info("run %s: workers connect to %s%s; dashboard http://%s:%d/%s", c->run_id, c->endpoint,
             c->keys.on ? " (CURVE)" : "", host, http_port(c->http), c->http_public ? " (bearer token required)" : "");
    if (c->cfg.insecure) coord_event(c, "cluster.insecure is set: sockets off loopback may run without CURVE");
    c->control = on_event;
    if (c->cfg.event_log[0] && !(c->evlog = evlog_open(c->cfg.event_log, c->run_id, &c->cfg, err))) return ERR_IO;
    int rc2 = engine_start(c, err);
    if (!rc2 && c->engine) rc2 = persist_lock(c, err);
    if (!rc2) {
        const char *path = ckpt_resume_file(c);
        char *text = NULL;
        int rr = path ? persist_read_file(path, &text, err) : ERR_NOTFOUND;
        rc2 = rr && rr != ERR_NOTFOUND ? rr : ckpt_resume(c, text, err);
        xfree(text);
    }
    if (rc2) return rc2;
    if (c->engine && !c->ckpt.has_saved && !c->ckpt.has_pending) persist_set_aside_metrics(c);
    else if (c->engine) persist_read_history(c);    /* the dashboard's curves; the resume decision trims them */
    if (c->ckpt.rewrite) {                          /* the incarnation one up, on disk before anything runs */
        char *text = ckpt_text(c);
        rc2 = text ? persist_ckpt_now(c, text, err) : err_set(err, ERR_NOMEM, "coordinator.json: out of memory");
        xfree(text);
        if (rc2) return rc2;
    }
    if (c->engine && persist_events_open(c, e2))      /* only the dashboard's history: training goes on without it */
        log_error("%s: the event list is kept in memory only", e2);
    if (c->engine) {
        char path[1024];
        if (fs_mkdir_p(c->cfg.default_local_dir, err)) return ERR_IO;
        snprintf(path, sizeof path, "%s/metrics.jsonl", c->cfg.default_local_dir);
        c->metrics_file = fopen(path, "a");
        if (!c->metrics_file) return err_set(err, ERR_IO, "cannot open %s: %s", path, strerror(errno));
        log_info("metrics: %s", path);
        if (open_loggers(c, err)) return ERR_IO;
    }
    outbox_flush(c);       /* what the start queued (a resume's requests) */
    drain(c);              /* messages that arrived before the poll was registered */
    c->ready = 1;
    return 0;
}

/* The TCP port of a "tcp://HOST:PORT" or "HOST:PORT" address, or -1 (ipc://, inproc://, "*" or 0: none fixed). */
static long tcp_port(const char *addr) {
    if (strstr(addr, "://") && strncmp(addr, "tcp://", 6)) return -1;
    const char *colon = strrchr(addr, ':');
    char *end;
    long p = colon ? strtol(colon + 1, &end, 10) : -1;
    return colon && colon[1] && !*end && p > 0 ? p : -1;
}

/* --check-ports (deploy/local/run.sh, before any preparation): every address a one-machine run binds — the
 * coordinator's cluster.http and cluster.bind, learner rank 0's cluster.weights_bind and, with two or more ranks,
 * cluster.collective — is free here, and no two of them share a port. 0, or 1 after naming the first busy key (or
 * the two that collide), its value and the reason on stderr. */
static int check_ports(const Config *cfg) {
    const struct { const char *key, *value; int used; } a[] = {
        {"cluster.http", cfg->http, 1}, {"cluster.bind", cfg->bind, 1}, {"cluster.weights_bind", cfg->weights_bind, 1},
        {"cluster.collective", cfg->collective, cfg->num_learners > 1}};
    size_t n = sizeof a / sizeof a[0];
    for (size_t i = 0; i < n; i++)
        for (size_t k = i + 1; k < n; k++)
            if (a[i].used && a[k].used && tcp_port(a[i].value) > 0 && tcp_port(a[i].value) == tcp_port(a[k].value)) {
                fprintf(stderr, "dapo-coordinator: %s (%s) and %s (%s) use the same port: one run binds both\n",
                        a[i].key, a[i].value, a[k].key, a[k].value);
                return 1;
            }
    for (size_t i = 0; i < n; i++) {
        char err[ERR_LEN];
        if (!a[i].used || !net_port_free(a[i].value, err)) continue;
        fprintf(stderr, "dapo-coordinator: %s: %s on this machine (another dapo run? set %s=..., or move every port "
                "of the run at once with deploy/local/run.sh --port-base N)\n", a[i].key, err, a[i].key);
        return 1;
    }
    return 0;
}

/* Removes the first `flag` from argv; 1 when there was one. */
static int take_flag(int *argc, char **argv, const char *flag) {
    for (int i = 1; i < *argc; i++)
        if (!strcmp(argv[i], flag)) {
            memmove(&argv[i], &argv[i + 1], (size_t)(*argc - i) * sizeof *argv);
            (*argc)--;
            return 1;
        }
    return 0;
}

int coord_run(int argc, char **argv, const CoordHooks *hooks) {
    log_init("coordinator", LL_INFO);
    signal(SIGPIPE, SIG_IGN);
    static Coord c;
    /* lines logged per 10 s before a kind holds back (issue 38): distinct refusals, registrations and losses, and
     * rejected results each deserve a line until a flood starts */
    c.warn_refused.burst = 10;
    c.warn_life.burst = 20;
    c.warn_reject.burst = 10;
    int print = CONFIG_PRINT_NONE;
    char err[ERR_LEN];
    if (config_help_wanted(argc, argv)) {
        config_usage_print(stdout, argv[0], "[--check-ports]\n  --check-ports     check that this machine can bind "
                           "every address of a one-machine run\n                    (cluster.http, .bind, .weights_bind, "
                           ".collective) and exit (1 names a busy one)");
        return 0;
    }
    int ports = take_flag(&argc, argv, "--check-ports");
    int rc = config_from_cli(&c.cfg, &argc, argv, &print, err);
    if (!rc && argc > 1) rc = err_set(err, ERR_INVAL, "unknown argument '%s' (usage: dapo-coordinator [--config FILE] [key.path=value ...] [--print-config] [--check-ports])", argv[1]);
    /* algorithm.rollout_correction, parsed once: refused before anything starts, kept for setup's log */
    if (!rc) rc = settings_rollout_corr(&c.cfg, &c.corr, err);
    if (!rc) rc = backend_known(config_enum_name(&c.cfg, "trainer.device"), err);   /* trainer.device, before any worker starts (not whether this
                                                        * host has a GPU: the workers' hosts do) */
    if (rc) {
        log_error("%s", err);
        config_free(&c.cfg);
        return 2;
    }
    if (print || ports) {
        if (print) config_print_annotated(&c.cfg, stdout, print == CONFIG_PRINT_LOCAL);
        rc = ports ? check_ports(&c.cfg) : 0;
        config_free(&c.cfg);
        return rc;
    }
    c.lock_fd = -1;
    rc = coord_start(&c, hooks, err);
    if (rc) log_error("%s", err);
    else uv_run(c.loop, UV_RUN_DEFAULT);
    signal(SIGTERM, SIG_IGN);                 /* a stop repeated while it closes down must not kill it: a supervisor */
    signal(SIGINT, SIG_IGN);                  /* restarts a coordinator killed by a signal */
    int failed = c.stop_failed || engine_phase(&c) == PH_FAILED;     /* exit status 1: the run did not end well */
    if (c.loop) {
        http_close(c.http);
        uv_walk(c.loop, close_all, NULL);
        uv_run(c.loop, UV_RUN_DEFAULT);
        uv_loop_close(c.loop);
    }
    if (c.router) {
        int linger = 500;                     /* let the last sends (stop notices) leave */
        zmq_setsockopt(c.router, ZMQ_LINGER, &linger, sizeof linger);
        zmq_close(c.router);
    }
    evlog_close(c.evlog);
    net_monitor_stop(c.monitor);          /* before the context ends: its socket lives there */
    zap_stop(c.zap);
    if (c.zctx) zmq_ctx_term(c.zctx);     /* releases every zero-copy buffer still held */
    if (c.lock_fd >= 0) close(c.lock_fd);
    if (c.metrics_file) fclose(c.metrics_file);
    tfevents_close(c.tb);
    coord_state_free(&c);                 /* the outbox (actions queued after the loop ended), send buffers, state */
    /* stopped as asked but without the last checkpoint: DAPO_EXIT_STOPPED, so a supervisor ends the run instead of
     * restarting it (a second stop meant "now"); a failed run: 1 */
    int stopped = c.stopping && failed && !rc;   /* asked to stop: a failed run as well (a restart would only fail again) */
    log_info("stopped%s", stopped && engine_phase(&c) == PH_FAILED ? " as asked; the run had failed (exit status 76)"
                          : stopped ? " without a checkpoint of the last steps (exit status 76)"
                          : failed ? " (the run had failed: exit status 1)" : "");
    return stopped ? DAPO_EXIT_STOPPED : rc || failed ? 1 : 0;
}
