/* tests/testutil.h: helpers for tests that run real dapo processes on loopback: spawn with logs, signal, wait
 * with a timeout, free ephemeral ports, a minimal HTTP GET, and paths from DAPO_ROOT / DAPO_BUILD (set by
 * tests/run.sh). Header-only (static) because each test is its own program. */
#ifndef DAPO_TESTUTIL_H
#define DAPO_TESTUTIL_H

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/config.h"

/* cluster.lease_timeout_s for cluster tests that only need a worker's death noticed soon: 1.5 s, and 12 s in an
 * ASan build (GCC and clang define __SANITIZE_ADDRESS__), where one training chunk of the tiny model takes seconds
 * between the learner's heartbeats. */
#if defined(__SANITIZE_ADDRESS__)
#define TU_LEASE_ARG "cluster.lease_timeout_s=12"
#define TU_SLOW 5               /* wait bounds of cluster tests are this many times longer under ASan */
#else
#define TU_LEASE_ARG "cluster.lease_timeout_s=1.5"
#define TU_SLOW 1
#endif

/* The values dapo's table had as defaults before issue 37 gave it verl's: DAPO's algorithm (clip-higher 0.28, dual clip
 * 10, dynamic sampling, the dapo reward manager) and its batch, length, schedule and rollout settings. Tests that start
 * daemons put TU_DAPO_RECIPE first among their overrides (theirs, later, win), and unit tests that build a Config call
 * tu_dapo_recipe, so each runs what it ran before; a test that checks a default reads config_defaults directly. */
#define TU_DAPO_RECIPE \
    "actor_rollout_ref.actor.clip_ratio_high=0.28", "actor_rollout_ref.actor.clip_ratio_c=10.0", \
    "algorithm.filter_groups.enable=true", "algorithm.filter_groups.max_num_gen_batches=10", \
    "reward_model.reward_manager=dapo", "actor_rollout_ref.rollout.seed=-1", \
    "actor_rollout_ref.rollout.val_kwargs.temperature=1.0", "actor_rollout_ref.rollout.val_kwargs.top_p=0.7", \
    "actor_rollout_ref.rollout.val_kwargs.do_sample=true", "actor_rollout_ref.actor.optim.weight_decay=0.1", \
    "actor_rollout_ref.actor.optim.lr_warmup_steps=10", "actor_rollout_ref.actor.use_dynamic_bsz=true", \
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=22528", "actor_rollout_ref.rollout.max_num_batched_tokens=512", \
    "actor_rollout_ref.rollout.max_num_seqs=64", "trainer.save_freq=5", "trainer.test_freq=5", "trainer.total_epochs=1", \
    "data.max_prompt_length=2048", "data.max_response_length=20480", "data.train_batch_size=512", \
    "data.gen_batch_size=1536", "actor_rollout_ref.actor.ppo_mini_batch_size=32"

/* Applies TU_DAPO_RECIPE to c (after config_defaults); aborts the test program on a refused value. */
static inline void tu_dapo_recipe(Config *c) {
    static const char *const recipe[] = {TU_DAPO_RECIPE};
    char err[ERR_LEN];
    for (size_t i = 0; i < sizeof recipe / sizeof recipe[0]; i++)
        if (config_override(c, recipe[i], err)) { fprintf(stderr, "TU_DAPO_RECIPE: %s\n", err); abort(); }
}

/* "actor_rollout_ref.actor.fsdp_config.fsdp_size=<DAPO_TEST_FSDP_SIZE, else 1>": the multi-rank cluster tests pass it
 * to every daemon, so that they run once more with the optimizer sharded (issue 39: DAPO_TEST_FSDP_SIZE=-1). */
static inline const char *tu_fsdp_size_arg(void) {
    static char b[96];
    const char *e = getenv("DAPO_TEST_FSDP_SIZE");
    snprintf(b, sizeof b, "actor_rollout_ref.actor.fsdp_config.fsdp_size=%s", e && *e ? e : "1");
    return b;
}

static inline const char *tu_build(void) { const char *b = getenv("DAPO_BUILD"); return b && *b ? b : "build"; }
static inline const char *tu_root(void) { const char *r = getenv("DAPO_ROOT"); return r && *r ? r : "."; }

/* "$DAPO_BUILD/bin/<name>" into buf. */
static inline const char *tu_bin(char *buf, size_t n, const char *name) {
    snprintf(buf, n, "%s/bin/%s", tu_build(), name);
    return buf;
}

/* A TCP port that was free a moment ago on 127.0.0.1. */
static inline int tu_port_bindable(int port) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                            .sin_port = htons((uint16_t)port)};
    int ok = s >= 0 && bind(s, (struct sockaddr *)&a, sizeof a) == 0;
    if (s >= 0) close(s);
    return ok;
}

/* A loopback TCP port nothing listens on now, chosen below the kernel's ephemeral range (ip_local_port_range): a port
 * the kernel hands out (bind to 0) can be taken again as the source port of any outgoing connection (ZeroMQ's
 * reconnects) before the daemon that was given it binds it — a test then fails with EADDRINUSE. Random in
 * [20000, low), never one this process handed out lately; the kernel's choice when none is found. */
static inline int tu_free_port(void) {
    static int recent[64], n_recent;
    static unsigned seed;
    int low = 32768;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) { if (fscanf(f, "%d", &low) != 1) low = 32768; fclose(f); }
    if (!seed) seed = (unsigned)getpid() * 2654435761u ^ (unsigned)time(NULL);
    for (int tries = 0; low > 20100 && tries < 500; tries++) {
        seed = seed * 1103515245u + 12345u;
        int port = 20000 + (int)((seed >> 8) % (unsigned)(low - 20000)), seen = 0;
        for (int i = 0; i < n_recent && i < 64; i++) seen |= recent[i] == port;
        if (seen || !tu_port_bindable(port)) continue;
        recent[n_recent++ % 64] = port;
        return port;
    }
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) || getsockname(s, (struct sockaddr *)&a, &len)) {
        if (s >= 0) close(s);
        return -1;
    }
    close(s);
    return ntohs(a.sin_port);
}

/* Starts argv[0] with stdout+stderr appended to log (NULL: inherit). Returns the pid or -1. */
static inline pid_t tu_spawn(char *const argv[], const char *log) {
    pid_t pid = fork();
    if (pid != 0) return pid;
    if (log) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) { dup2(fd, 1); dup2(fd, 2); close(fd); }
    }
    execv(argv[0], argv);
    _exit(127);
}

/* Waits up to ms for pid; returns its exit status (128+sig when killed), or -1 on timeout. */
static inline int tu_wait(pid_t pid, int ms) {
    for (int t = 0; t <= ms; t += 10) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (r < 0) return -2;
        usleep(10000);
    }
    return -1;
}

/* The pid a run's pids file ("<pid> <name>" lines: dapo-supervise's RUN_DIR/pids) gives for name, or -1. */
static inline pid_t tu_pid_in(const char *pids_path, const char *name) {
    FILE *f = fopen(pids_path, "r");
    if (!f) return -1;
    char line[256], who[128];
    int pid = -1, p;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%d %127s", &p, who) == 2 && !strcmp(who, name)) pid = p;
    fclose(f);
    return pid;
}

/* Runs a command line through the shell, capturing stdout+stderr into out (NUL-terminated). Returns exit code. */
static inline int tu_run(const char *cmd, char *out, size_t n) {
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t len = fread(out, 1, n - 1, p);
    out[len] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Processes whose command line (arguments joined by spaces) contains needle. */
static inline int tu_count_procs(const char *needle) {
    DIR *d = opendir("/proc");
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        char path[300], buf[8192];
        snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        size_t k = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        for (size_t i = 0; i < k; i++) if (!buf[i]) buf[i] = ' ';
        buf[k] = 0;
        n += strstr(buf, needle) != NULL;
    }
    if (d) closedir(d);
    return n;
}

/* HTTP request to 127.0.0.1:port; the response body (after the headers) into body. Returns the status code or -1. */
static inline int tu_http(int port, const char *method, const char *path, const char *extra_headers, char *body, size_t n) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a)) { if (s >= 0) close(s); return -1; }
    char req[1024];
    int len = snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: localhost\r\n%sContent-Length: 0\r\n\r\n", method, path,
                       extra_headers ? extra_headers : "");
    if (write(s, req, (size_t)len) != len) { close(s); return -1; }
    static char resp[1 << 20];
    size_t got = 0;
    ssize_t r;
    while (got < sizeof resp - 1 && (r = read(s, resp + got, sizeof resp - 1 - got)) > 0) got += (size_t)r;
    close(s);
    resp[got] = 0;
    int status = -1;
    if (sscanf(resp, "HTTP/1.1 %d", &status) != 1) return -1;
    const char *b = strstr(resp, "\r\n\r\n");
    snprintf(body, n, "%s", b ? b + 4 : "");
    return status;
}

#endif
