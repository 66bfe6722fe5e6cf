/* common/net/curve.h: ZeroMQ CURVE (encryption and authentication, RFC 26) on every dapo socket that can leave the
 * host (issue 18): the worker protocol (coordinator ROUTER), learner rank 0's weight server and the CPU collective.
 *
 * Keys are Z85 text files (40 characters; lines starting with "# " are comments), made by tools/dapo-keygen.c:
 *   cluster.curve.server_public_key   every process: the servers' public key (coordinator, learner rank 0)
 *   cluster.curve.server_secret_key   the processes that serve (coordinator, learner rank 0): its secret
 *   cluster.curve.secret_key          this process as a client: its own secret key (the public key is derived)
 *   cluster.curve.authorized_keys     servers: a directory of the client public keys let in (*.pub), read again
 *                                     at every handshake (zap.h), so removing a file revokes that key
 * A secret key file readable by group or others is refused. CURVE is on when server_public_key is set.
 * Safe by default (curve_check_exposure): a ZeroMQ socket bound to an address other than loopback without CURVE,
 * or the dashboard off loopback without cluster.token_file, is refused at start unless cluster.insecure is true.
 * Not here: the ZAP handler (zap.h), NCCL's own traffic (it needs a private network). */
#ifndef DAPO_NET_CURVE_H
#define DAPO_NET_CURVE_H

#include <stdbool.h>

#include "core/config.h"
#include "core/err.h"

#define CURVE_KEY_Z85 41       /* 40 Z85 characters + NUL */

typedef struct {
    bool on;                                  /* server_public_key set */
    char server_public[CURVE_KEY_Z85];
    char server_secret[CURVE_KEY_Z85];        /* "" unless loaded with serves */
    char client_public[CURVE_KEY_Z85];        /* derived from client_secret */
    char client_secret[CURVE_KEY_Z85];        /* "" when this process is no client */
    char authorized_keys[4096];               /* servers: the allow-list directory */
} CurveKeys;

/* 1 when a secret file of this mode and owner is exposed by curve_key_read's rule (group or other bits; for a
 * root-owned file read by a non-root process, anything beyond group read), else 0. For the token file too. */
struct stat;
int curve_secret_exposed(const struct stat *sb);

/* Reads one key file into out (40 Z85 characters). secret: the file must not be readable by group or others, except
 * that a file owned by root (this process not being root) may be group-readable (mode 0440 at most: a Kubernetes
 * Secret volume with an fsGroup; PostgreSQL's rule for its key file; curve_secret_exposed).
 * ERR_IO (unreadable, naming the path and the config key `what`), ERR_INVAL (not one 40-character Z85 key; a
 * secret file exposed by that rule, naming the chmod that fixes it). */
int curve_key_read(const char *path, bool secret, const char *what, char out[CURVE_KEY_Z85], char err[ERR_LEN]);

/* Loads the keys cfg names into k (zeroed first): none when cluster.curve.server_public_key is empty (k->on false).
 * serves: also the server secret key and the authorized_keys directory (it must exist); client: the own secret
 * key. A key that is needed and not configured is an ERR_INVAL naming the key and `dapo-keygen`. */
int curve_load(const Config *cfg, bool serves, bool client, CurveKeys *k, char err[ERR_LEN]);

/* Makes sock a CURVE server (ZMQ_CURVE_SERVER, the server secret key, ZAP domain "dapo"); before bind. A no-op
 * when !k->on. 0 or ERR_IO. */
int curve_server(void *sock, const CurveKeys *k, char err[ERR_LEN]);

/* Makes sock a CURVE client of the server public key with this process's key pair; before connect. A no-op when
 * !k->on. 0 or ERR_IO. */
int curve_client(void *sock, const CurveKeys *k, char err[ERR_LEN]);

/* A short, stable name of a public key for logs and the dashboard: the first 16 hex digits of the XXH64 of its
 * 32 bytes. z85: 40 characters. out: 17 bytes. "?" for a malformed key. */
void curve_fingerprint(const char *z85, char out[17]);

/* True when a ZeroMQ endpoint (tcp://HOST:PORT, ipc://, inproc://) or an HTTP HOST:PORT stays on this host:
 * ipc, inproc, 127.0.0.0/8, ::1, localhost. A wildcard (*, 0.0.0.0, ::) is not. */
bool curve_is_loopback(const char *endpoint);

/* The start-up refusal of issue 18, for a process that binds `binds` (n endpoints, the config keys named in
 * `keys`) and, when http is non-NULL, serves the dashboard there: off loopback without CURVE keys, or a dashboard
 * off loopback without cluster.token_file, is ERR_INVAL naming the key and how to fix it, unless cfg->insecure
 * (then 0 and one warning). */
int curve_check_exposure(const Config *cfg, const CurveKeys *k, const char *const *binds, const char *const *keys,
                         int n, const char *http, char err[ERR_LEN]);

#endif
