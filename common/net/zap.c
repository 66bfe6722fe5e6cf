/* common/net/zap.c: the ZAP handler thread (zap.h). */
#include "net/zap.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "core/clock.h"
#include "core/log.h"
#include "net/curve.h"

#define ZAP_ENDPOINT  "inproc://zeromq.zap.01"
#define ZAP_FRAMES    8          /* version, request id, domain, address, routing id, mechanism, credentials (+1) */
#define ZAP_LOGGED    256        /* refused keys remembered for the once-per-key log line */

struct Zap {
    void            *sock;
    pthread_t        th;
    atomic_int       stop;
    atomic_ullong    accepted, refused;
    char             dir[4096];
    char             logged[ZAP_LOGGED][17];
    int              nlogged;
    char             bad[ZAP_LOGGED][128];   /* allow-list files warned about */
    int              nbad;
    uint64_t         unlogged;               /* refusals past ZAP_LOGGED distinct keys, summed in one line a minute */
    int64_t          next_summary_ms;
};

/* Whether path was warned about already (a malformed allow-list file is logged once, not at every handshake). */
static int warned_once(Zap *z, const char *name) {
    for (int i = 0; i < z->nbad; i++)
        if (!strcmp(z->bad[i], name)) return 1;
    if (z->nbad < ZAP_LOGGED) snprintf(z->bad[z->nbad++], sizeof z->bad[0], "%s", name);
    return 0;
}

/* 1 when z85 (a client public key) is the key of a *.pub file in the allow-list directory; name gets that file's
 * name without ".pub" (the worker id the key may register as). A file that is not one key is skipped and logged
 * once. */
static int authorised(Zap *z, const char *z85, char name[128]) {
    DIR *d = opendir(z->dir);
    if (!d) return 0;
    int ok = 0;
    struct dirent *e;
    while (!ok && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 5 || n > 127 || strcmp(e->d_name + n - 4, ".pub") || e->d_name[0] == '.') continue;
        char path[8192], key[CURVE_KEY_Z85], err[ERR_LEN];
        snprintf(path, sizeof path, "%s/%s", z->dir, e->d_name);
        if (curve_key_read(path, false, "cluster.curve.authorized_keys", key, err) != 0) {
            if (!warned_once(z, e->d_name)) log_warn("CURVE: %s (skipped; logged once)", err);
            continue;
        }
        if (!strcmp(key, z85)) {
            ok = 1;
            snprintf(name, 128, "%.*s", (int)(n - 4), e->d_name);
        }
    }
    closedir(d);
    return ok;
}

static void log_refusal(Zap *z, const char *fp, const char *address, const char *why) {
    for (int i = 0; i < z->nlogged; i++)
        if (!strcmp(z->logged[i], fp)) return;
    if (z->nlogged == ZAP_LOGGED) {                  /* a flood of fresh keys: one summary line a minute */
        z->unlogged++;
        if (clock_ms() >= z->next_summary_ms) {
            log_warn("CURVE: %llu more refused clients with keys not seen before (the last from %s); not logged one "
                     "by one past %d keys", (unsigned long long)z->unlogged, address[0] ? address : "?", ZAP_LOGGED);
            z->unlogged = 0;
            z->next_summary_ms = clock_ms() + 60000;
        }
        return;
    }
    snprintf(z->logged[z->nlogged++], 17, "%s", fp);
    log_warn("CURVE: refused a client from %s with key %s: %s (logged once per key)", address[0] ? address : "?", fp, why);
}

static void reply(void *sock, const char *request_id, size_t id_len, const char *code, const char *text,
                  const char *user) {
    zmq_send(sock, "1.0", 3, ZMQ_SNDMORE);
    zmq_send(sock, request_id, id_len, ZMQ_SNDMORE);
    zmq_send(sock, code, strlen(code), ZMQ_SNDMORE);
    zmq_send(sock, text, strlen(text), ZMQ_SNDMORE);
    zmq_send(sock, user, strlen(user), ZMQ_SNDMORE);
    zmq_send(sock, "", 0, 0);
}

/* One request: its frames read, checked and answered. */
static void handle(Zap *z) {
    char f[ZAP_FRAMES][256];
    size_t len[ZAP_FRAMES] = {0};
    int n = 0, more = 1;
    while (more) {
        char buf[256];
        int r = zmq_recv(z->sock, buf, sizeof buf, 0);
        if (r < 0) return;
        if (n < ZAP_FRAMES) {
            len[n] = (size_t)r < sizeof buf ? (size_t)r : sizeof buf;
            memcpy(f[n], buf, len[n]);
            n++;
        }
        int m = 0;
        size_t ms = sizeof m;
        more = zmq_getsockopt(z->sock, ZMQ_RCVMORE, &m, &ms) == 0 && m;
    }
    if (n < 6) return;                                    /* not a ZAP request: REP needs no answer to garbage */
    char address[64] = "", mech[16] = "";
    snprintf(address, sizeof address, "%.*s", (int)(len[3] < 63 ? len[3] : 63), f[3]);
    snprintf(mech, sizeof mech, "%.*s", (int)(len[5] < 15 ? len[5] : 15), f[5]);
    if (strcmp(mech, "CURVE") || n < 7 || len[6] != 32) {
        atomic_fetch_add(&z->refused, 1);
        log_refusal(z, mech[0] ? mech : "none", address, "not a CURVE client");
        reply(z->sock, f[1], len[1], "400", "CURVE required", "");
        return;
    }
    char z85[CURVE_KEY_Z85], fp[17], name[128], user[160];
    zmq_z85_encode(z85, (const uint8_t *)f[6], 32);
    curve_fingerprint(z85, fp);
    int learners_only = len[2] == strlen(ZAP_DOMAIN_LEARNERS) && !memcmp(f[2], ZAP_DOMAIN_LEARNERS, len[2]);
    if (learners_only && authorised(z, z85, name) && !(zap_key_role(name) && !strcmp(zap_key_role(name), "learner"))) {
        atomic_fetch_add(&z->refused, 1);                /* the collective's sockets: learners only (issue 38) */
        log_refusal(z, fp, address, "not a learner key, and the learners' collective takes only learner keys");
        reply(z->sock, f[1], len[1], "400", "not a learner key", "");
        return;
    }
    if (authorised(z, z85, name)) {
        atomic_fetch_add(&z->accepted, 1);
        snprintf(user, sizeof user, "%s %s", name, fp);          /* the "User-Id": key name and fingerprint */
        reply(z->sock, f[1], len[1], "200", "OK", user);
    } else {
        atomic_fetch_add(&z->refused, 1);
        log_refusal(z, fp, address, "its public key is not in cluster.curve.authorized_keys");
        reply(z->sock, f[1], len[1], "400", "key not authorised", "");
    }
}

static void *run(void *arg) {
    Zap *z = arg;
    while (!atomic_load(&z->stop)) {
        zmq_pollitem_t it = {z->sock, 0, ZMQ_POLLIN, 0};
        int r = zmq_poll(&it, 1, 100);
        if (r > 0) handle(z);
        else if (r < 0 && zmq_errno() == ETERM) break;
    }
    return NULL;
}

Zap *zap_start(void *zctx, const char *dir, char err[ERR_LEN]) {
    Zap *z = xcalloc(1, sizeof *z);
    snprintf(z->dir, sizeof z->dir, "%s", dir ? dir : "");
    z->sock = zmq_socket(zctx, ZMQ_REP);
    int zero = 0;
    if (!z->sock || zmq_setsockopt(z->sock, ZMQ_LINGER, &zero, sizeof zero) || zmq_bind(z->sock, ZAP_ENDPOINT)) {
        err_set(err, ERR_IO, "CURVE: cannot start the ZAP handler on %s: %s", ZAP_ENDPOINT, zmq_strerror(zmq_errno()));
        if (z->sock) zmq_close(z->sock);
        xfree(z);
        return NULL;
    }
    if (pthread_create(&z->th, NULL, run, z) != 0) {
        err_set(err, ERR_IO, "CURVE: cannot start the ZAP handler thread");
        zmq_close(z->sock);
        xfree(z);
        return NULL;
    }
    return z;
}

const char *zap_key_fingerprint(const char *peer_key) {
    const char *sp = strchr(peer_key, ' ');
    return sp ? sp + 1 : "";
}

void zap_key_name(const char *peer_key, char *out, size_t n) {
    const char *sp = strchr(peer_key, ' ');
    snprintf(out, n, "%.*s", (int)(sp ? (size_t)(sp - peer_key) : strlen(peer_key)), peer_key);
}

const char *zap_key_role(const char *name) {
    static const char *roles[] = {"rollout", "learner", "verifier"};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(roles[i]);
        if (!strncmp(name, roles[i], n) && (!name[n] || name[n] == '-')) return roles[i];
    }
    return NULL;
}

uint64_t zap_accepted(const Zap *z) { return z ? atomic_load(&((Zap *)z)->accepted) : 0; }
uint64_t zap_refused(const Zap *z) { return z ? atomic_load(&((Zap *)z)->refused) : 0; }

void zap_stop(Zap *z) {
    if (!z) return;
    atomic_store(&z->stop, 1);
    pthread_join(z->th, NULL);
    zmq_close(z->sock);
    xfree(z);
}
