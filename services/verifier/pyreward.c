/* services/verifier/pyreward.c: one Python reward worker process (see pyreward.h). */
#include "pyreward.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/embed.h"
#include "core/log.h"
#include "core/utf8.h"

#define MAX_REPLY (16u << 20)      /* a reply frame larger than this is a broken worker */

extern const EmbeddedFile static_files_verifier[];

struct PyWorker {
    PyWorkerSpec spec;             /* strings owned */
    pid_t        pid;              /* 0: not running */
    int          to_fd, from_fd;   /* our ends: the child's stdin, its stdout */
};

static atomic_ulong g_starts;
static char *g_script;             /* the host script, NUL-terminated */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void load_script(void) {
    const EmbeddedFile *f = embed_find(static_files_verifier, "/reward_host.py");
    if (!f) return;
    g_script = xmalloc(f->len + 1);
    memcpy(g_script, f->data, f->len);
    g_script[f->len] = 0;
}

unsigned long pyworker_starts(void) { return atomic_load(&g_starts); }

const char *pyoutcome_name(PyOutcome o) {
    static const char *n[] = {"ok", "timeout", "crash", "memory", "error"};
    return (unsigned)o < 5 ? n[o] : "?";
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Waits until fd is ready for events or the deadline passes: 1 ready, 0 timed out, < 0 error. */
static int wait_fd(int fd, short events, int64_t deadline) {
    for (;;) {
        int64_t left = deadline - now_ns();
        if (left <= 0) return 0;
        struct pollfd p = {.fd = fd, .events = events};
        int ms = (int)((left + 999999) / 1000000);
        int rc = poll(&p, 1, ms > 1000 ? 1000 : ms);
        if (rc > 0) return 1;
        if (rc < 0 && errno != EINTR) return -errno;
    }
}

/* 0 all written, ERR_TIMEOUT, ERR_CLOSED (the child is gone). */
static int write_all(int fd, const void *buf, size_t n, int64_t deadline) {
    const char *p = buf;
    while (n) {
        ssize_t k = write(fd, p, n);
        if (k > 0) { p += k; n -= (size_t)k; continue; }
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && errno != EAGAIN) return ERR_CLOSED;
        int rc = wait_fd(fd, POLLOUT, deadline);
        if (rc == 0) return ERR_TIMEOUT;
        if (rc < 0) return ERR_CLOSED;
    }
    return 0;
}

/* 0 all read, ERR_TIMEOUT, ERR_CLOSED (end of file: the child is gone). */
static int read_all(int fd, void *buf, size_t n, int64_t deadline) {
    char *p = buf;
    while (n) {
        ssize_t k = read(fd, p, n);
        if (k > 0) { p += k; n -= (size_t)k; continue; }
        if (k == 0) return ERR_CLOSED;
        if (errno == EINTR) continue;
        if (errno != EAGAIN) return ERR_CLOSED;
        int rc = wait_fd(fd, POLLIN, deadline);
        if (rc == 0) return ERR_TIMEOUT;
        if (rc < 0) return ERR_CLOSED;
    }
    return 0;
}

/* One reply frame, parsed. *out owned by the caller (json_decref). */
static int recv_frame(PyWorker *w, int64_t deadline, json_t **out, char err[ERR_LEN]) {
    uint8_t h[4];
    int rc = read_all(w->from_fd, h, 4, deadline);
    if (rc) return rc;
    uint32_t n = (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 24;
    if (n > MAX_REPLY) return err_set(err, ERR_TOO_BIG, "reward worker sent a %u-byte reply", n);
    char *body = xmalloc(n ? n : 1);
    rc = read_all(w->from_fd, body, n, deadline);
    json_error_t je;
    *out = rc ? NULL : json_loadb(body, n, 0, &je);
    xfree(body);
    if (rc) return rc;
    if (!*out || !json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return err_set(err, ERR_DECODE, "reward worker sent a reply that is not a JSON object");
    }
    return 0;
}

static int send_frame(PyWorker *w, const char *body, size_t n, int64_t deadline) {
    uint8_t h[4] = {(uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24)};
    int rc = write_all(w->to_fd, h, 4, deadline);
    return rc ? rc : write_all(w->to_fd, body, n, deadline);
}

/* Kills (when still running) and reaps the child; returns what its end means for the item it had. */
static PyOutcome reap(PyWorker *w, int we_kill, char why[ERR_LEN]) {
    if (!w->pid) return PYR_CRASH;
    if (we_kill) kill(w->pid, SIGKILL);
    int st = 0;
    pid_t r;
    do r = waitpid(w->pid, &st, 0); while (r < 0 && errno == EINTR);
    kill(-w->pid, SIGKILL);                            /* anything the function left running in the worker's group */
    close(w->to_fd);
    close(w->from_fd);
    w->pid = 0;
    w->to_fd = w->from_fd = -1;
    if (r < 0) { err_set(why, ERR_IO, "reward worker lost: waitpid: %s", strerror(errno)); return PYR_CRASH; }
    if (we_kill) return PYR_TIMEOUT;
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) {
        err_set(why, ERR_IO, "reward worker killed by SIGKILL (out of memory?)");
        return PYR_MEMORY;
    }
    if (WIFSIGNALED(st)) err_set(why, ERR_IO, "reward worker died of signal %d (%s)", WTERMSIG(st),
                                 strsignal(WTERMSIG(st)));
    else err_set(why, ERR_IO, "reward worker exited with status %d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    return PYR_CRASH;
}

/* Child side of the fork: only async-signal-safe calls, then exec. */
static _Noreturn void child_exec(int in_fd, int out_fd, long memory_mb, pid_t parent, char *const argv[]) {
    if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0) _exit(126);
    setpgid(0, 0);                                     /* its own group: reap kills what the function started too */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(126);               /* the parent died before prctl */
    if (memory_mb > 0) {
        struct rlimit rl = {.rlim_cur = (rlim_t)memory_mb << 20, .rlim_max = (rlim_t)memory_mb << 20};
        setrlimit(RLIMIT_AS, &rl);
    }
    signal(SIGPIPE, SIG_DFL);
    execvp(argv[0], argv);
    _exit(127);
}

static int spawn(PyWorker *w, char err[ERR_LEN]) {
    if (!g_script) return err_set(err, ERR_NOTFOUND, "the reward host script is not embedded in this build");
    int to[2], from[2];
    if (pipe2(to, O_CLOEXEC)) return err_set(err, ERR_IO, "pipe: %s", strerror(errno));
    if (pipe2(from, O_CLOEXEC)) {
        close(to[0]); close(to[1]);
        return err_set(err, ERR_IO, "pipe: %s", strerror(errno));
    }
    char *argv[] = {(char *)w->spec.python, "-c", g_script, (char *)w->spec.path, (char *)w->spec.name, NULL};
    pid_t parent = getpid(), pid = fork();
    if (pid == 0) child_exec(to[0], from[1], w->spec.memory_mb, parent, argv);
    int fork_errno = errno;
    close(to[0]);
    close(from[1]);
    if (pid < 0) {
        close(to[1]); close(from[0]);
        return err_set(err, ERR_IO, "fork: %s", strerror(fork_errno));
    }
    atomic_fetch_add(&g_starts, 1);
    w->pid = pid;
    w->to_fd = to[1];
    w->from_fd = from[0];
    fcntl(w->to_fd, F_SETFL, O_NONBLOCK);
    fcntl(w->from_fd, F_SETFL, O_NONBLOCK);
    json_t *j = NULL;
    int rc = recv_frame(w, now_ns() + (int64_t)(w->spec.start_timeout_s * 1e9), &j, err);
    if (rc == 0 && json_is_true(json_object_get(j, "ready"))) { json_decref(j); return 0; }
    const char *fatal = j ? json_string_value(json_object_get(j, "fatal")) : NULL;
    if (fatal) err_set(err, ERR_INVAL, "custom_reward_function: %s", fatal);
    else if (rc == ERR_TIMEOUT) err_set(err, ERR_TIMEOUT, "reward worker (%s) not ready within %.0f s: importing %s "
                                        "hangs or is slow", w->spec.python, w->spec.start_timeout_s, w->spec.path);
    else if (rc == ERR_CLOSED) {
        char why[ERR_LEN];
        reap(w, 0, why);
        json_decref(j);
        if (w->spec.memory_mb > 0)
            return err_set(err, ERR_IO, "reward worker (%s) did not start: %s (is the interpreter on PATH? is "
                           "reward_model.worker_memory_mb=%ld enough for it and %s's imports?)", w->spec.python, why,
                           w->spec.memory_mb, w->spec.path);
        return err_set(err, ERR_IO, "reward worker (%s) did not start: %s (is the interpreter on PATH?)",
                       w->spec.python, why);
    } else if (rc == 0) err_set(err, ERR_DECODE, "reward worker sent no ready message");
    json_decref(j);
    char why[ERR_LEN];
    reap(w, 1, why);
    return rc ? rc : ERR_DECODE;
}

PyWorker *pyworker_new(const PyWorkerSpec *spec, char err[ERR_LEN]) {
    pthread_once(&g_once, load_script);
    PyWorker *w = xcalloc(1, sizeof *w);
    w->spec = *spec;
    w->spec.python = xstrdup(spec->python);
    w->spec.path = xstrdup(spec->path);
    w->spec.name = xstrdup(spec->name);
    w->to_fd = w->from_fd = -1;
    if (spawn(w, err)) { pyworker_free(w); return NULL; }
    return w;
}

void pyworker_free(PyWorker *w) {
    if (!w) return;
    char why[ERR_LEN];
    if (w->pid) reap(w, 1, why);
    xfree((char *)w->spec.python);
    xfree((char *)w->spec.path);
    xfree((char *)w->spec.name);
    xfree(w);
}

void pyscore_clear(PyScore *s) {
    xfree(s->pred);
    for (int i = 0; i < s->n_extra; i++) xfree(s->extra_key[i]);
    memset(s, 0, sizeof *s);
}

json_t *reward_json_text(const char *s, size_t n) {
    char *fixed = xmalloc(3 * n + 1);
    size_t m = utf8_repair(s ? s : "", n, fixed);
    json_t *j = json_stringn(fixed, m);
    xfree(fixed);
    return j;
}

/* Reads a reply object into out. */
static PyOutcome parse_reply(json_t *j, PyScore *out) {
    json_t *score = json_object_get(j, "score");
    if (!json_is_number(score)) {
        const char *kind = json_string_value(json_object_get(j, "kind"));
        const char *msg = json_string_value(json_object_get(j, "error"));
        out->outcome = kind && !strcmp(kind, "memory") ? PYR_MEMORY : PYR_ERROR;
        err_set(out->err, ERR_INVAL, "%s%s%s", kind ? kind : "bad reply", msg ? ": " : "", msg ? msg : "");
        return out->outcome;
    }
    out->score = json_number_value(score);
    json_t *acc = json_object_get(j, "acc");
    if (json_is_boolean(acc)) { out->has_acc = 1; out->acc = json_is_true(acc); }
    const char *pred = json_string_value(json_object_get(j, "pred"));
    if (pred) out->pred = xstrdup(pred);
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(j, "extra"), k, v)
        if (json_is_number(v) && out->n_extra < PYR_MAX_EXTRA) {
            out->extra_key[out->n_extra] = xstrdup(k);
            out->extra_val[out->n_extra++] = json_number_value(v);
        }
    return out->outcome = PYR_OK;
}

PyOutcome pyworker_score(PyWorker *w, const char *data_source, const char *solution, size_t solution_len,
                         const char *ground_truth, size_t ground_truth_len, const char *extra_info_json,
                         double timeout_s, PyScore *out) {
    memset(out, 0, sizeof *out);
    if (!w->pid && spawn(w, out->err)) return out->outcome = PYR_ERROR;
    json_t *req = json_object();
    json_object_set_new(req, "data_source", json_string(data_source ? data_source : ""));
    json_object_set_new(req, "solution_str", reward_json_text(solution, solution_len));
    json_object_set_new(req, "ground_truth", reward_json_text(ground_truth, ground_truth_len));
    json_t *extra = extra_info_json ? json_loads(extra_info_json, 0, NULL) : NULL;
    json_object_set_new(req, "extra_info", extra ? extra : json_object());
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    int64_t deadline = now_ns() + (int64_t)(timeout_s * 1e9);
    int rc = body ? send_frame(w, body, strlen(body), deadline) : ERR_NOMEM;
    free(body);
    json_t *reply = NULL;
    char why[ERR_LEN] = "";
    if (rc == 0) rc = recv_frame(w, deadline, &reply, why);
    if (rc == 0) {
        parse_reply(reply, out);
        json_decref(reply);
        if (out->outcome == PYR_MEMORY) reap(w, 1, why);        /* MemoryError: start a clean interpreter */
    } else if (rc == ERR_TIMEOUT) {
        reap(w, 1, why);
        out->outcome = PYR_TIMEOUT;
        err_set(out->err, ERR_TIMEOUT, "timeout: the reward function took more than %.3g s", timeout_s);
    } else {
        out->outcome = reap(w, rc != ERR_CLOSED, why);
        if (rc != ERR_CLOSED) out->outcome = PYR_CRASH;
        err_set(out->err, rc, "%s: %s", pyoutcome_name(out->outcome), why[0] ? why : err_str(rc));
    }
    if (!w->pid) {                                               /* replace it now, so the next item waits less */
        char serr[ERR_LEN];
        if (spawn(w, serr)) log_warn("reward worker restart failed (tried again at the next item): %s", serr);
    }
    return out->outcome;
}
