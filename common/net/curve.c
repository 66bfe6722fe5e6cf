/* common/net/curve.c: CURVE key files, socket options and the safe-by-default refusal (curve.h). */
#include "net/curve.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <zmq.h>

#include "core/log.h"

static int is_z85(const char *s, size_t n) {
    static const char alphabet[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";
    for (size_t i = 0; i < n; i++)
        if (!s[i] || !strchr(alphabet, s[i])) return 0;
    return 1;
}

int curve_secret_exposed(const struct stat *sb) {
    return sb->st_uid == 0 && geteuid() != 0 ? (sb->st_mode & 037) != 0 : (sb->st_mode & 077) != 0;
}

int curve_key_read(const char *path, bool secret, const char *what, char out[CURVE_KEY_Z85], char err[ERR_LEN]) {
    out[0] = 0;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return err_set(err, ERR_IO, "%s: cannot read %s: %s", what, path, strerror(errno));
    if (!S_ISREG(sb.st_mode)) return err_set(err, ERR_INVAL, "%s: %s is not a regular file", what, path);
    FILE *f = fopen(path, "r");
    if (!f) return err_set(err, ERR_IO, "%s: cannot read %s: %s", what, path, strerror(errno));
    char line[256];
    int found = 0, bad = 0, says_public = 0;
    while (fgets(line, sizeof line, f)) {
        size_t n = strcspn(line, "\r\n");
        line[n] = 0;
        if (line[0] == '#' && strstr(line, "CURVE public key")) says_public = 1;      /* dapo-keygen's header */
        if (!n || (line[0] == '#' && (n == 1 || line[1] == ' '))) continue;   /* "# ...": Z85 has '#' but no space */
        if (found || n != 40 || !is_z85(line, 40)) { bad = 1; break; }
        memcpy(out, line, 41);
        found = 1;
    }
    fclose(f);
    /* PostgreSQL's rule for its ssl_key_file: no bits for group or others, or, owned by root, group read only — the
     * way a Kubernetes Secret volume with an fsGroup mounts it (root:fsGroup, 0440) */
    int exposed = secret && curve_secret_exposed(&sb);
    if ((secret && says_public) || exposed) out[0] = 0;
    if (secret && says_public)
        return err_set(err, ERR_INVAL, "%s: %s is a PUBLIC key file (its first line says so); name the secret one, the "
                       ".key file of the same name", what, path);
    if (exposed)
        return err_set(err, ERR_INVAL, "%s: the secret key file %s is readable by others (mode %03o): chmod 600 %s "
                       "(a Kubernetes Secret volume: defaultMode 0440 with an fsGroup)", what, path,
                       (unsigned)(sb.st_mode & 0777), path);
    if (bad || !found) {
        out[0] = 0;
        return err_set(err, ERR_INVAL, "%s: %s does not hold one CURVE key (40 Z85 characters on one line; make keys "
                       "with dapo-keygen)", what, path);
    }
    return 0;
}

int curve_load(const Config *cfg, bool serves, bool client, CurveKeys *k, char err[ERR_LEN]) {
    memset(k, 0, sizeof *k);
    if (!cfg->curve_server_public_key || !cfg->curve_server_public_key[0]) return 0;
    k->on = true;
    int rc = curve_key_read(cfg->curve_server_public_key, false, "cluster.curve.server_public_key", k->server_public, err);
    if (rc) return rc;
    if (serves) {
        if (!cfg->curve_server_secret_key || !cfg->curve_server_secret_key[0])
            return err_set(err, ERR_INVAL, "CURVE is on (cluster.curve.server_public_key) but this process serves and "
                           "cluster.curve.server_secret_key is not set (make the pair with dapo-keygen)");
        rc = curve_key_read(cfg->curve_server_secret_key, true, "cluster.curve.server_secret_key", k->server_secret, err);
        if (rc) return rc;
        const char *dir = cfg->curve_authorized_keys ? cfg->curve_authorized_keys : "";
        struct stat sb;
        if (!dir[0])
            return err_set(err, ERR_INVAL, "CURVE is on but cluster.curve.authorized_keys (the directory of client "
                           "public keys let in) is not set");
        if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
            return err_set(err, ERR_INVAL, "cluster.curve.authorized_keys: %s is not a directory", dir);
        snprintf(k->authorized_keys, sizeof k->authorized_keys, "%s", dir);
        char derived[CURVE_KEY_Z85];                   /* the pair must match: a wrong file would refuse everyone */
        if (zmq_curve_public(derived, k->server_secret) != 0 || strcmp(derived, k->server_public) != 0)
            return err_set(err, ERR_INVAL, "cluster.curve.server_secret_key %s is not the secret of "
                           "cluster.curve.server_public_key %s", cfg->curve_server_secret_key,
                           cfg->curve_server_public_key);
    }
    if (client) {
        if (!cfg->curve_secret_key || !cfg->curve_secret_key[0])
            return err_set(err, ERR_INVAL, "CURVE is on (cluster.curve.server_public_key) but cluster.curve.secret_key "
                           "(this worker's own key, made with dapo-keygen) is not set");
        rc = curve_key_read(cfg->curve_secret_key, true, "cluster.curve.secret_key", k->client_secret, err);
        if (rc) return rc;
        if (zmq_curve_public(k->client_public, k->client_secret) != 0)
            return err_set(err, ERR_INVAL, "cluster.curve.secret_key %s: not a CURVE secret key", cfg->curve_secret_key);
    }
    return 0;
}

static int setopt(void *sock, int opt, const char *name, const void *v, size_t n, char err[ERR_LEN]) {
    if (zmq_setsockopt(sock, opt, v, n) == 0) return 0;
    return err_set(err, ERR_IO, "CURVE: zmq_setsockopt(%s): %s", name, zmq_strerror(zmq_errno()));
}

int curve_server(void *sock, const CurveKeys *k, char err[ERR_LEN]) {
    if (!k || !k->on) return 0;
    int one = 1;
    int rc = setopt(sock, ZMQ_CURVE_SERVER, "ZMQ_CURVE_SERVER", &one, sizeof one, err);
    if (!rc) rc = setopt(sock, ZMQ_CURVE_SECRETKEY, "ZMQ_CURVE_SECRETKEY", k->server_secret, 40, err);
    if (!rc) rc = setopt(sock, ZMQ_ZAP_DOMAIN, "ZMQ_ZAP_DOMAIN", "dapo", 4, err);
    return rc;
}

int curve_client(void *sock, const CurveKeys *k, char err[ERR_LEN]) {
    if (!k || !k->on) return 0;
    int rc = setopt(sock, ZMQ_CURVE_SERVERKEY, "ZMQ_CURVE_SERVERKEY", k->server_public, 40, err);
    if (!rc) rc = setopt(sock, ZMQ_CURVE_PUBLICKEY, "ZMQ_CURVE_PUBLICKEY", k->client_public, 40, err);
    if (!rc) rc = setopt(sock, ZMQ_CURVE_SECRETKEY, "ZMQ_CURVE_SECRETKEY", k->client_secret, 40, err);
    return rc;
}

void curve_fingerprint(const char *z85, char out[17]) {
    uint8_t raw[32];
    if (!z85 || strlen(z85) != 40 || !zmq_z85_decode(raw, z85)) { snprintf(out, 17, "?"); return; }
    snprintf(out, 17, "%016llx", (unsigned long long)XXH64(raw, sizeof raw, 0));
}

bool curve_is_loopback(const char *ep) {
    if (!ep) return true;
    if (!strncmp(ep, "ipc://", 6) || !strncmp(ep, "inproc://", 9)) return true;
    const char *h = !strncmp(ep, "tcp://", 6) ? ep + 6 : ep;
    if (!strncmp(h, "127.", 4) || !strncmp(h, "localhost:", 10) || !strncmp(h, "[::1]:", 6)) return true;
    return false;
}

int curve_check_exposure(const Config *cfg, const CurveKeys *k, const char *const *binds, const char *const *keys,
                         int n, const char *http, char err[ERR_LEN]) {
    for (int i = 0; i < n; i++) {
        if (curve_is_loopback(binds[i]) || (k && k->on)) continue;
        if (cfg->insecure) {
            log_warn("cluster.insecure: %s = %s is off loopback WITHOUT CURVE: anyone who can reach it can join the "
                     "run and pull the weights", keys[i], binds[i]);
            continue;
        }
        return err_set(err, ERR_INVAL, "%s = %s is not a loopback address and CURVE is off: anyone who reaches it could "
                       "join the run and pull the weights. Make keys with `dapo-keygen --dir KEYS` and set "
                       "cluster.curve.server_public_key (README \"Run on several hosts\"), or set cluster.insecure=true "
                       "on a private network", keys[i], binds[i]);
    }
    if (http && http[0] && !curve_is_loopback(http) && (!cfg->token_file || !cfg->token_file[0])) {
        if (cfg->insecure) {
            log_warn("cluster.insecure: the dashboard %s is off loopback without cluster.token_file: anyone can read "
                     "it (its controls stay off without a token)", http);
            return 0;
        }
        return err_set(err, ERR_INVAL, "cluster.http = %s is not a loopback address and cluster.token_file is not set: "
                       "off loopback every dashboard endpoint needs the bearer token. Write a token file (mode 600) and "
                       "set cluster.token_file, or set cluster.insecure=true", http);
    }
    return 0;
}
