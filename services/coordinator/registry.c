/* services/coordinator/registry.c: the worker registry — hello and its answer, heartbeats, credit, goodbye, and
 * noticing a worker that went silent (docs/design.md §1, §7).
 * Called by engine.c only; its sends go to the outbox. The table's queries are in workers.c.
 * Not here: the work items a worker holds (their leases return to the queue when the worker is lost; the
 * dispatch module owns them). */
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "coord.h"

#define REGISTRY_KEEP 256    /* entries kept before a worker gone for a minute or more makes room for a new one */
#define REGISTRY_MAX  4096   /* entries at most: a new worker id beyond is refused */
#define REGISTRY_PER_KEY 1024   /* alive workers one CURVE key may hold (a role key shared by a scaled set of pods) */

static void send_welcome(Coord *c, const NetMsg *m, int accepted, const char *reason) {
    Dapo__Welcome w = DAPO__WELCOME__INIT;
    w.accepted = accepted;
    w.reason = (char *)reason;
    w.protocol_version = DAPO_PROTOCOL_VERSION;
    w.run_id = c->run_id;
    w.heartbeat_ms = (uint32_t)c->cfg.heartbeat_ms;
    w.lease_timeout_s = c->cfg.lease_timeout_s;
    w.policy_version = c->policy_version;
    w.incarnation = c->incarnation;
    w.attempt = ((const Dapo__Hello *)m->msg)->attempt;     /* the worker takes only its current attempt's */
    if (accepted && c->config_yaml) {
        w.config_yaml.data = (uint8_t *)c->config_yaml;
        w.config_yaml.len = strlen(c->config_yaml);
        w.config_hash = c->config_hash;
    }
    out_send_peer(c, m->peer, m->peer_len, DAPO__MSG_TYPE__MSG_WELCOME, &w.base);
}

/* Refuses a Hello, naming why; the log line and the dashboard event (event: NULL for none) only the first time for
 * this worker process (Hello.nonce): the Hellos it resent while it waited, delivered at once, are one refusal. */
static void refuse(Coord *c, const NetMsg *m, const char *why, const char *event) {
    uint64_t nonce = ((const Dapo__Hello *)m->msg)->nonce;
    int seen = 0;
    c->hellos_refused++;
    for (int i = 0; nonce && i < REFUSED_RING; i++) seen |= c->refused[i] == nonce;
    if (!seen) {                     /* rate-limited too (coord_run's burst): a client may send Hellos with a new nonce
                                        each */
        if (nonce) c->refused[c->nrefused++ % REFUSED_RING] = nonce;
        log_warn_limited(&c->warn_refused, 10000, "refused %s", why);
        if (event) coord_event(c, "%s", event);
    }
    send_welcome(c, m, 0, why);
}

/* The entry of the worker registered as id (on any connection), or NULL. */
static WorkerEntry *find_id(Coord *c, const char *id) {
    for (int i = 0; i < c->nworkers; i++)
        if (!strcmp(c->workers[i].id, id)) return &c->workers[i];
    return NULL;
}

/* A worker id is 1-127 characters of [A-Za-z0-9._:-] (Kubernetes pod and host names fit): it is written into logs,
 * metrics labels and file names, so a client cannot put a line break, an escape code or a quote there (issue 38);
 * '@' too: a daemon's default id is <role>-<pid>@<host>. */
static int id_ok(const char *id) {
    size_t n = strlen(id);
    if (n == 0 || n > 127) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z') || (id[i] >= '0' && id[i] <= '9') ||
              id[i] == '.' || id[i] == '_' || id[i] == ':' || id[i] == '-' || id[i] == '@'))
            return 0;
    return 1;
}

/* The checks of a Hello before anything is registered: id syntax, protocol version, role, the CURVE key's name and
 * role, the run config, cluster.num_learners and the learner rank. 1 when it was refused (answered, logged). */
static int hello_refused(Coord *c, NetMsg *m, int version_ok) {
    Dapo__Hello *h = (Dapo__Hello *)m->msg;
    char reason[ERR_LEN];
    if (!id_ok(h->worker_id)) {
        snprintf(reason, sizeof reason, "a Hello from %s: its worker id (%zu bytes) is not 1-127 characters of "
                 "A-Z a-z 0-9 . _ : @ -", m->peer_address[0] ? m->peer_address : "?", strlen(h->worker_id));
        refuse(c, m, reason, NULL);
        return 1;
    }
    if (!version_ok || h->protocol_version != DAPO_PROTOCOL_VERSION) {
        snprintf(reason, sizeof reason, "protocol version mismatch: worker %s speaks %u, coordinator speaks %d",
                 h->worker_id, !version_ok ? m->version : h->protocol_version, DAPO_PROTOCOL_VERSION);
        refuse(c, m, reason, NULL);
        return 1;
    }
    if (h->role != DAPO__ROLE__ROLE_ROLLOUT && h->role != DAPO__ROLE__ROLE_VERIFIER &&
        h->role != DAPO__ROLE__ROLE_LEARNER) {
        snprintf(reason, sizeof reason, "worker %s: role %d is not a worker role", h->worker_id, (int)h->role);
        refuse(c, m, reason, NULL);
        return 1;
    }
    if (c->keys.on) {                 /* issue 18: a key registers only as the worker its file names, or a role key
                                       * (authorized_keys/rollout.pub) as any worker of that role (issue 19: a
                                       * scaled set of pods shares one Secret); issue 38: a key named for a role
                                       * (rollout-0) only as a worker of that role */
        char name[160] = "";
        zap_key_name(m->peer_key, name, sizeof name);
        const char *key_role = zap_key_role(name);
        if (!key_role) {                 /* a key of no role would be held to none (issue 38: it could be rank 0) */
            snprintf(reason, sizeof reason, "worker %s: its CURVE key, authorized_keys/%s.pub, is not named for a role: "
                     "a worker's key is named rollout, verifier or learner, or that and -NAME (dapo-keygen --client "
                     "rollout-3)", h->worker_id, name[0] ? name : "?");
            refuse(c, m, reason, NULL);
            return 1;
        }
        if (strcmp(key_role, role_name(h->role))) {
            snprintf(reason, sizeof reason, "worker %s: its CURVE key, authorized_keys/%s.pub, is a %s's: it cannot "
                     "register as a %s", h->worker_id, name, key_role, role_name(h->role));
            refuse(c, m, reason, NULL);
            return 1;
        }
        if (strcmp(name, h->worker_id) && strcmp(name, role_name(h->role))) {
            snprintf(reason, sizeof reason, "worker id '%s' does not match its CURVE key, which is authorized_keys/%s.pub: "
                     "each worker registers under the name of its key (dapo-keygen --client NAME; --id NAME), or a "
                     "role's key (--client %s) as any %s", h->worker_id, name[0] ? name : "?", role_name(h->role),
                     role_name(h->role));
            refuse(c, m, reason, NULL);
            return 1;
        }
    }
    char key[128], mine[160], theirs[160], why[640];
    if (c->engine && c->run_config && h->run_config && h->run_config[0] &&   /* no engine: no run to agree on */
        config_run_keys_diff(c->run_config, h->run_config, key, sizeof key, mine, theirs, sizeof mine)) {
        snprintf(why, sizeof why, "another run config: %s is %s at worker %s, %s at the coordinator (give a worker only "
                 "its local keys, cluster.* and trainer.device: it takes every run key from the coordinator)", key,
                 theirs, h->worker_id, mine);
        char event[160];
        snprintf(event, sizeof event, "refused %.40s: %.60s differs from the coordinator's", h->worker_id, key);
        refuse(c, m, why, event);
        return 1;
    }
    if (h->role == DAPO__ROLE__ROLE_LEARNER && c->engine && h->world_size != (uint32_t)c->cfg.num_learners) {
        snprintf(why, sizeof why, "worker %s: cluster.num_learners is %u at the learner, %d at the coordinator (every "
                 "learner rank and the coordinator need the same cluster.num_learners)", h->worker_id, h->world_size,
                 c->cfg.num_learners);
        refuse(c, m, why, NULL);
        return 1;
    }
    if (h->role == DAPO__ROLE__ROLE_LEARNER && c->engine) {   /* one worker per rank (issue 38) */
        WorkerEntry *o = NULL;
        for (int i = 0; i < c->nworkers && !o; i++)
            if (c->workers[i].role == DAPO__ROLE__ROLE_LEARNER && c->workers[i].life == WORKER_ALIVE &&
                c->workers[i].rank == h->rank && strcmp(c->workers[i].id, h->worker_id))
                o = &c->workers[i];
        if (h->rank >= h->world_size || o) {
            if (o) snprintf(why, sizeof why, "worker %s: learner rank %u is %s's, which is alive: a rank registers once "
                            "(another learner id for it is refused)", h->worker_id, h->rank, o->id);
            else snprintf(why, sizeof why, "worker %s: learner rank %u is not below cluster.num_learners (%u)",
                          h->worker_id, h->rank, h->world_size);
            refuse(c, m, why, NULL);
            return 1;
        }
    }
    return 0;
}

/* The registry entry a Hello registers: its connection's, its id's (a restart or reconnect, from the key that
 * registered it), a gone one's or a new one, with the connection's routing id. NULL when refused. */
static WorkerEntry *hello_entry(Coord *c, NetMsg *m) {
    Dapo__Hello *h = (Dapo__Hello *)m->msg;
    char reason[ERR_LEN], why[640];
    WorkerEntry *w = registry_find(c, m->peer, m->peer_len);
    if (w && strcmp(w->id, h->worker_id)) {      /* issue 38: one connection, one worker id (else a connection's own
                                                    * entry would skip the takeover rule below) */
        snprintf(why, sizeof why, "worker %.128s: this connection (from %s) registered as %s; a connection registers "
                 "one worker id (connect again to register another)", h->worker_id,
                 m->peer_address[0] ? m->peer_address : "?", w->id);
        refuse(c, m, why, NULL);
        return NULL;
    }
    if (!w && (w = find_id(c, h->worker_id))) {    /* a worker id known from another connection: its restart or
                                                    * reconnect (routing ids are the ROUTER's, one per connection) */
        if (c->keys.on && w->key[0] && strcmp(w->key, zap_key_fingerprint(m->peer_key))) {
            snprintf(reason, sizeof reason, "worker %s is registered with CURVE key %s; this connection's key is %s "
                     "(from %s): a worker's id is taken over only with the key that registered it", h->worker_id,
                     w->key, zap_key_fingerprint(m->peer_key), m->peer_address[0] ? m->peer_address : "?");
            refuse(c, m, reason, NULL);
            return NULL;
        }
        memcpy(w->rid, m->peer, m->peer_len);
        w->rid_len = m->peer_len;
    }
    if (!w && c->keys.on) {                            /* one key holds at most REGISTRY_PER_KEY alive workers, so a
                                                        * leaked role key cannot lock the others out (issue 38) */
        int same = 0;
        const char *fp = zap_key_fingerprint(m->peer_key);
        for (int i = 0; i < c->nworkers; i++) same += c->workers[i].life == WORKER_ALIVE && !strcmp(c->workers[i].key, fp);
        if (same >= REGISTRY_PER_KEY) {
            snprintf(reason, sizeof reason, "worker %s: its key (%s) holds %d alive workers already, the most one key may",
                     h->worker_id, fp, same);
            refuse(c, m, reason, NULL);
            return NULL;
        }
    }
    if (!w && c->nworkers >= REGISTRY_KEEP) {          /* issue 38: a leaked role key registering id after id: the
                                                        * table is bounded, the longest-gone entry makes room */
        int64_t now = clock_ms(), oldest = now - 60000;
        for (int i = 0; i < c->nworkers; i++)
            if (c->workers[i].life != WORKER_ALIVE && c->workers[i].last_seen_ms < oldest) {
                oldest = c->workers[i].last_seen_ms;
                w = &c->workers[i];
            }
        if (!w && c->nworkers >= REGISTRY_MAX) {
            snprintf(reason, sizeof reason, "worker %s: %d workers are registered, the most the coordinator keeps",
                     h->worker_id, c->nworkers);
            refuse(c, m, reason, NULL);
            return NULL;
        }
        if (w) memset(w, 0, sizeof *w);
    }
    if (!w) {
        XGROW(c->workers, c->nworkers, c->cap_workers, 16);
        w = &c->workers[c->nworkers++];
        memset(w, 0, sizeof *w);
    }
    if (!w->rid_len) {
        memcpy(w->rid, m->peer, m->peer_len);
        w->rid_len = m->peer_len;
    }
    return w;
}

static void on_hello(Coord *c, NetMsg *m, int version_ok) {
    Dapo__Hello *h = (Dapo__Hello *)m->msg;
    if (hello_refused(c, m, version_ok)) return;
    if (h->config_only) {             /* a probe: the config it asks for, nothing registered */
        send_welcome(c, m, 1, "");
        return;
    }
    WorkerEntry *w = hello_entry(c, m);
    if (!w) return;
    /* issue 18: Hellos a worker resent for one registration attempt (a backlog delivered at once after a partition)
     * are that one registration: answered again, not a new session; those of an older attempt are dropped */
    if (h->nonce && w->nonce == h->nonce && w->registered_ms) {
        if (h->attempt < w->attempt) return;
        if (h->attempt == w->attempt && w->life == WORKER_ALIVE) { send_welcome(c, m, 1, ""); return; }
    }
    w->nonce = h->nonce;
    w->attempt = h->attempt;
    int again = w->registered_ms != 0;
    int echo = again && clock_ms() - w->registered_ms > 2000;   /* not the Hello retries of one start arriving together */
    if (again && w->life == WORKER_ALIVE) engine_requeue_worker(c, (int)(w - c->workers));   /* restarted before it was
                                                                                               declared lost */
    snprintf(w->address, sizeof w->address, "%s", m->peer_address);
    snprintf(w->key, sizeof w->key, "%s", zap_key_fingerprint(m->peer_key));
    snprintf(w->id, sizeof w->id, "%s", h->worker_id);
    snprintf(w->build_info, sizeof w->build_info, "%s", h->build_info);
    w->role = h->role;
    w->life = WORKER_ALIVE;
    w->capacity = h->capacity;
    w->capacity_tokens = h->capacity_tokens;
    w->credit = 0;                   /* the worker announces its free capacity right after the Welcome */
    w->busy = 0;
    w->policy_version = h->policy_version;
    w->incarnation = h->incarnation;
    w->probe_failed = 0;                                   /* a new process: its next version is probed afresh */
    w->probe_diff = -1;
    w->behind = w->role == DAPO__ROLE__ROLE_ROLLOUT &&     /* a late joiner: the run does not wait for it to load */
                (w->incarnation != c->incarnation || w->policy_version < c->policy_version);
    w->fresh = h->fresh;
    w->restarts = h->restarts;
    w->rank = h->rank;
    w->world_size = h->world_size;
    w->registered_ms = w->last_seen_ms = clock_ms();
    w->closed_ms = 0;
    if (!again || echo)
        log_limited(&c->warn_life, LL_INFO, 10000, "worker %s registered%s: role %s, capacity %u, policy version %lld",
                    w->id, again ? " again" : "", role_name(w->role), w->capacity, (long long)w->policy_version);
    send_welcome(c, m, 1, "");
    if (echo) coord_event(c, "%s registered again (policy version %lld)", w->id, (long long)w->policy_version);
    ckpt_on_learner_hello(c, w);
}

static void mark_gone(Coord *c, WorkerEntry *w, WorkerLife life, const char *why) {
    if (w->life != WORKER_ALIVE) return;
    w->life = life;
    w->credit = 0;
    log_limited(&c->warn_life, life == WORKER_LOST ? LL_WARN : LL_INFO, 10000, "worker %s (%s) %s: %.200s", w->id,
                role_name(w->role), life == WORKER_LOST ? "lost" : "left", why);
    coord_event(c, "%s %s: %s", w->id, life == WORKER_LOST ? "lost" : "left", why);
    XGROW(c->lost, c->nlost, c->cap_lost, 8);        /* engine_on turns it into EV_WORKER_LOST */
    c->lost[c->nlost++] = (int)(w - c->workers);
}

/* The role whose workers send a result or ack of this type, or -1 where any registered worker may (issue 38: a key
 * registered as a rollout cannot report a learner's step or confirm a checkpoint). */
static int sender_role(Dapo__MsgType t) {
    switch (t) {
    case DAPO__MSG_TYPE__MSG_GROUP_RESULT:
    case DAPO__MSG_TYPE__MSG_WEIGHT_ACK:   return DAPO__ROLE__ROLE_ROLLOUT;
    case DAPO__MSG_TYPE__MSG_SCORE_RESULT: return DAPO__ROLE__ROLE_VERIFIER;
    case DAPO__MSG_TYPE__MSG_STEP_RESULT:
    case DAPO__MSG_TYPE__MSG_CONTROL:      return DAPO__ROLE__ROLE_LEARNER;
    default:                               return -1;
    }
}

void registry_on_message(Coord *c, NetMsg *m) {
    if (m->type == DAPO__MSG_TYPE__MSG_HELLO) { on_hello(c, m, 1); return; }
    WorkerEntry *w = registry_find(c, m->peer, m->peer_len);
    const char *from = m->peer_address[0] ? m->peer_address : "?";
    if (!w || w->life != WORKER_ALIVE) {
        /* A worker from before a coordinator restart, or one declared lost: ask it to register again. */
        if (!w) {
            c->msgs_unregistered++;
            log_warn_limited(&c->warn_unregistered, 10000, "a %s from %s (key %s) on a connection no worker registered "
                             "on: answered 'send Hello'", net_type_name(m->type), from,
                             m->peer_key[0] ? m->peer_key : "none");
        }
        out_send_error(c, m->peer, m->peer_len, ERR_NOTFOUND, m->type, "unknown worker: send Hello");
        return;
    }
    if (c->keys.on && strcmp(w->key, zap_key_fingerprint(m->peer_key))) {   /* not the key that registered it */
        c->msgs_foreign++;
        log_warn_limited(&c->warn_foreign, 10000, "dropped a %s for worker %s from %s with key %s: %s registered with "
                         "key %s", net_type_name(m->type), w->id, from, m->peer_key[0] ? m->peer_key : "none", w->id,
                         w->key);
        return;
    }
    w->last_seen_ms = clock_ms();
    switch (m->type) {
    case DAPO__MSG_TYPE__MSG_HEARTBEAT: {
        Dapo__Heartbeat *hb = (Dapo__Heartbeat *)m->msg;
        w->busy = hb->busy;
        w->load = hb->load;
        w->policy_version = hb->policy_version;
        w->incarnation = hb->incarnation;
        w->heartbeats++;
        w->handshakes_refused = hb->handshakes_refused;
        w->handshakes_failed = hb->handshakes_failed;
        w->messages_refused = hb->messages_refused;
        Dapo__Heartbeat reply = DAPO__HEARTBEAT__INIT;
        reply.seq = hb->seq;
        reply.policy_version = c->policy_version;
        reply.incarnation = c->incarnation;
        out_send(c, w, DAPO__MSG_TYPE__MSG_HEARTBEAT, &reply.base);
        break;
    }
    case DAPO__MSG_TYPE__MSG_CREDIT: {
        uint32_t add = ((Dapo__Credit *)m->msg)->credits;
        uint64_t total = (uint64_t)w->credit + add;
        w->credit = total > w->capacity ? w->capacity : (uint32_t)total;   /* never more than it said it holds */
        break;
    }
    case DAPO__MSG_TYPE__MSG_GOODBYE:
        mark_gone(c, w, WORKER_GONE, ((Dapo__Goodbye *)m->msg)->reason);
        break;
    case DAPO__MSG_TYPE__MSG_LEASE_RENEW:
        break;                       /* last_seen_ms above renews everything it holds */
    case DAPO__MSG_TYPE__MSG_ERROR: {
        Dapo__ErrorReply *e = (Dapo__ErrorReply *)m->msg;
        log_warn_limited(&c->warn_error_reply, 10000, "worker %s reports error %d on %s: %.200s", w->id, e->code,
                         net_type_name((Dapo__MsgType)e->in_reply_to), e->message);
        break;
    }
    default: {
        int want = sender_role(m->type);
        if (want >= 0 && w->role != (Dapo__Role)want) {
            c->msgs_wrong_role++;
            log_warn_limited(&c->warn_role, 10000, "dropped a %s from worker %s (%s, from %s): only a %s sends it",
                             net_type_name(m->type), w->id, role_name(w->role), from, role_name((Dapo__Role)want));
            out_send_error(c, w->rid, w->rid_len, ERR_INVAL, m->type, "not a message this worker's role sends");
            return;
        }
        engine_on_message(c, w, m);        /* results and acks */
        break;
    }
    }
}

void registry_on_bad_version_hello(Coord *c, NetMsg *m) { on_hello(c, m, 0); }

void registry_connection_gone(Coord *c, int wi) {
    if (wi < 0 || wi >= c->nworkers || c->workers[wi].life != WORKER_ALIVE) return;
    c->workers[wi].credit = 0;
    if (!c->workers[wi].closed_ms) c->workers[wi].closed_ms = clock_ms();
}

void registry_cron(Coord *c) {
    int64_t now = clock_ms(), limit = (int64_t)(c->cfg.lease_timeout_s * 1000);
    for (int i = 0; i < c->nworkers; i++) {
        WorkerEntry *w = &c->workers[i];
        if (w->life == WORKER_ALIVE && now - w->last_seen_ms > limit) {
            char why[128];
            snprintf(why, sizeof why, "no heartbeat for %.1f s (lease timeout %.1f s)",
                     (now - w->last_seen_ms) / 1000.0, c->cfg.lease_timeout_s);
            mark_gone(c, w, WORKER_LOST, why);
        } else if (w->life == WORKER_ALIVE && w->closed_ms && now - w->closed_ms >= 200) {
            mark_gone(c, w, WORKER_LOST, "its connection is gone (a send found no peer): it registers again on a new "
                                         "one");
        }
    }
}
