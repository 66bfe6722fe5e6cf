/* tools/dapo-keygen.c: CURVE key pairs for a multi-host cluster (issue 18; common/net/curve.h).
 *
 *   dapo-keygen --dir DIR [--server] [--client NAME]...
 *
 * --server        DIR/server.pub and DIR/server.key: the key pair of the processes that serve (coordinator and
 *                 learner rank 0): cluster.curve.server_public_key (every process) and .server_secret_key
 * --client NAME   DIR/NAME.pub and DIR/NAME.key: one worker's pair (cluster.curve.secret_key), and its public key
 *                 copied into DIR/authorized_keys/NAME.pub, the allow-list of cluster.curve.authorized_keys
 * Keys are Z85 text (zmq_curve_keypair), one per file after a comment line; secret files are mode 0600, the
 * directories 0700. Nothing is overwritten: when any file to be written exists, nothing is written and the exit
 * status is 1. Revoking a worker is deleting its file from authorized_keys/ (read at every handshake).
 * NAME: letters, digits, '-', '_', '.' (not leading), at most 64; a key registers only as the worker of its NAME (use
 * the worker's --id). `dapo-keygen --fingerprint FILE...` prints each key's fingerprint (the logs' and the
 * dashboard's). Exit status 0 made, 1 refused or failed, 2 usage. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "net/curve.h"

#define MAX_NAMES 256

static int usage(const char *argv0) {
    fprintf(stderr, "usage: %s --dir DIR [--server] [--client NAME]...\n"
                    "       %s --fingerprint KEYFILE...\n"
                    "  makes CURVE key pairs for cluster.curve.* (README \"Run on several hosts\"); --fingerprint prints\n"
                    "  the fingerprint the logs and the dashboard show for a key\n", argv0, argv0);
    return 2;
}

static int name_ok(const char *s) {
    size_t n = strlen(s);
    if (!n || n > 64 || s[0] == '.') return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' ||
              ch == '_' || ch == '.'))
            return 0;
    }
    return strcmp(s, "server") != 0;                   /* server.* is the server pair */
}

static char made[3 * MAX_NAMES + 8][4300];   /* the files this run created: removed again if a later one fails */
static int nmade;

/* Writes text to path, created exclusively (O_EXCL: never an existing file) with mode. 0 or -1 (message printed). */
static int write_new(const char *path, const char *text, mode_t mode) {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0) { fprintf(stderr, "dapo-keygen: cannot create %s: %s\n", path, strerror(errno)); return -1; }
    snprintf(made[nmade++], sizeof made[0], "%s", path);
    size_t n = strlen(text);
    int ok = write(fd, text, n) == (ssize_t)n && fchmod(fd, mode) == 0;
    if (close(fd) != 0) ok = 0;
    if (!ok) { fprintf(stderr, "dapo-keygen: cannot write %s: %s\n", path, strerror(errno)); return -1; }
    return 0;
}

static int make_dir(const char *path) {
    if (mkdir(path, 0700) == 0 || errno == EEXIST) {
        struct stat sb;
        if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) return 0;
    }
    fprintf(stderr, "dapo-keygen: cannot make the directory %s: %s\n", path, strerror(errno));
    return -1;
}

/* One pair: DIR/NAME.pub and DIR/NAME.key, and (clients) DIR/authorized_keys/NAME.pub. */
static int make_pair(const char *dir, const char *name, int client) {
    char pub[41], sec[41];
    if (zmq_curve_keypair(pub, sec) != 0) {
        fprintf(stderr, "dapo-keygen: zmq_curve_keypair: %s (a libzmq without CURVE?)\n", zmq_strerror(zmq_errno()));
        return -1;
    }
    char path[4200], text[256];
    snprintf(text, sizeof text, "# dapo CURVE public key: %s\n%s\n", name, pub);
    snprintf(path, sizeof path, "%s/%s.pub", dir, name);
    if (write_new(path, text, 0644)) return -1;
    if (client) {
        snprintf(path, sizeof path, "%s/authorized_keys/%s.pub", dir, name);
        if (write_new(path, text, 0644)) return -1;
    }
    snprintf(text, sizeof text, "# dapo CURVE SECRET key: %s (keep it mode 600, never share it)\n%s\n", name, sec);
    snprintf(path, sizeof path, "%s/%s.key", dir, name);
    if (write_new(path, text, 0600)) return -1;
    printf("%s/%s.pub, %s/%s.key%s\n", dir, name, dir, name, client ? " (+ authorized_keys/)" : "");
    return 0;
}

static int exists(const char *dir, const char *sub, const char *name, const char *ext) {
    char path[4300];
    snprintf(path, sizeof path, "%s/%s%s%s", dir, sub, name, ext);
    if (access(path, F_OK) == 0) { fprintf(stderr, "dapo-keygen: %s exists: not overwritten (nothing written)\n", path); return 1; }
    return 0;
}

/* --fingerprint FILE...: each key's fingerprint as the logs and the dashboard show it: of the public key, which a
 * NAME.key (secret) file gives by derivation (a worker node holds only its NAME.key; issue 38). */
static int fingerprints(int argc, char **argv, int from) {
    int rc = 0;
    for (int i = from; i < argc; i++) {
        char key[CURVE_KEY_Z85], pub[CURVE_KEY_Z85], err[ERR_LEN], fp[17];
        size_t n = strlen(argv[i]);
        int secret = n > 4 && !strcmp(argv[i] + n - 4, ".key");
        if (curve_key_read(argv[i], secret, "--fingerprint", key, err)) { fprintf(stderr, "dapo-keygen: %s\n", err); rc = 1; continue; }
        if (secret && zmq_curve_public(pub, key)) {
            fprintf(stderr, "dapo-keygen: %s: not a CURVE secret key\n", argv[i]);
            rc = 1;
            continue;
        }
        curve_fingerprint(secret ? pub : key, fp);
        printf("%s  %s%s\n", fp, argv[i], secret ? " (its public key's)" : "");
    }
    return rc;
}

int main(int argc, char **argv) {
    const char *dir = NULL, *names[MAX_NAMES];
    int server = 0, n = 0;
    if (argc >= 2 && !strcmp(argv[1], "--fingerprint")) return fingerprints(argc, argv, 2);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(argv[0]); return 0; }
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc) dir = argv[++i];
        else if (!strcmp(argv[i], "--server")) server = 1;
        else if (!strcmp(argv[i], "--client") && i + 1 < argc) {
            const char *nm = argv[++i];
            if (!name_ok(nm)) { fprintf(stderr, "dapo-keygen: --client '%s': a name is 1-64 of [A-Za-z0-9._-], not "
                                                "starting with '.', and not 'server'\n", nm); return 2; }
            for (int k = 0; k < n; k++)
                if (!strcmp(names[k], nm)) { fprintf(stderr, "dapo-keygen: --client %s given twice\n", nm); return 2; }
            if (n == MAX_NAMES) { fprintf(stderr, "dapo-keygen: at most %d --client names\n", MAX_NAMES); return 2; }
            names[n++] = nm;
        } else {
            fprintf(stderr, "dapo-keygen: unknown or incomplete argument '%s'\n", argv[i]);
            return usage(argv[0]);
        }
    }
    if (!dir || !dir[0]) { fprintf(stderr, "dapo-keygen: --dir DIR is required\n"); return usage(argv[0]); }
    if (!server && !n) { fprintf(stderr, "dapo-keygen: nothing to make: give --server and/or --client NAME\n"); return 2; }
    int clash = 0;                                    /* check everything first: all or nothing */
    if (server) clash |= exists(dir, "", "server", ".pub") | exists(dir, "", "server", ".key");
    for (int k = 0; k < n; k++)
        clash |= exists(dir, "", names[k], ".pub") | exists(dir, "", names[k], ".key") |
                 exists(dir, "authorized_keys/", names[k], ".pub");
    if (clash) return 1;
    char auth[4200];
    snprintf(auth, sizeof auth, "%s/authorized_keys", dir);
    if (make_dir(dir) || make_dir(auth)) return 1;
    int failed = server && make_pair(dir, "server", 0);
    for (int k = 0; k < n && !failed; k++) failed = make_pair(dir, names[k], 1);
    if (failed) {                                     /* all or nothing: what this run wrote goes again */
        for (int i = 0; i < nmade; i++) unlink(made[i]);
        fprintf(stderr, "dapo-keygen: nothing written (the %d files made before the failure were removed)\n", nmade);
        return 1;
    }
    return 0;
}
