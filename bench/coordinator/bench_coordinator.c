/* bench/coordinator/bench_coordinator.c: how fast the coordinator moves work — groups/s and MB/s of responses
 * through the hub — with 8 scripted rollout workers, a scripted verifier and learner (tests/fake_workers.h, the real
 * protocol) on loopback, beside raw ZeroMQ moving the same message sizes (a ROUTER sends each of 8 DEALERs a
 * request of the GenerateGroup's size and gets back a reply of the GroupResult's size) in the same run.
 *
 *   bench_coordinator BUILD_DIR TOKENIZER_DIR [--steps S] [--resp-tokens R]
 *
 * Prints both sides and, last, `BENCH coordinator ours=<MB/s> baseline=<MB/s> ratio=<ours/baseline>`. Each run of
 * ours also gives the CPU seconds the coordinator and this process (scripted workers, learner, their ZeroMQ I/O
 * threads) spent over the timed span: on 2 cores their sum bounds what a run can reach.
 * Medians over 3 repetitions of each side. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "core/clock.h"
#include "tests/fake_workers.h"
#include "tests/testutil.h"

#define NWORKERS 8
#define GROUP_N  8
#define INFLIGHT 8          /* groups in flight per rollout worker (its credit), and requests per raw dealer */

static double median3(double a, double b, double c) {
    return a > b ? (b > c ? b : (a > c ? c : a)) : (a > c ? a : (b > c ? c : b));
}

/* CPU seconds (user + system, all threads) of this process (the scripted workers and their ZeroMQ threads) and of
 * the coordinator process, to show where the time of a run goes on a machine of few cores. */
static double self_cpu_s(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + (double)u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
}

static double pid_cpu_s(pid_t p) {
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)p);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *q = strrchr(buf, ')');            /* fields after the command name; utime, stime are 14 and 15 */
    unsigned long ut = 0, st = 0;
    if (!q || sscanf(q + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2) return 0;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* One run of the real coordinator: returns response MB/s; groups/s in *gps; CPU seconds of the workers' process and
 * of the coordinator over the timed span in cpu[0], cpu[1]. */
static double run_ours(const char *build, const char *tokdir, int steps, int resp_tokens, double *gps, size_t *msg_bytes,
                       double cpu[2]) {
    char dir[] = "/tmp/dapo-bench-coord-XXXXXX";
    if (!mkdtemp(dir)) return -1;
    char data[300];
    snprintf(data, sizeof data, "%s/prompts.jsonl", dir);
    FILE *f = fopen(data, "w");
    for (int i = 0; i < 8192; i++)
        fprintf(f, "{\"data_source\":\"bench\",\"prompt\":[{\"role\":\"user\",\"content\":\"Problem %d: what is 3+4?\"}],"
                   "\"reward_model\":{\"ground_truth\":\"7\"}}\n", i);
    fclose(f);
    int zport = tu_free_port(), hport = tu_free_port();
    char zep[64], a_bind[96], a_http[64], a_train[320], a_tok[320], a_dir[320], a_steps[64], a_len[64], bin[300], log[300];
    snprintf(zep, sizeof zep, "tcp://127.0.0.1:%d", zport);
    snprintf(a_bind, sizeof a_bind, "cluster.bind=%s", zep);
    snprintf(a_http, sizeof a_http, "cluster.http=127.0.0.1:%d", hport);
    snprintf(a_train, sizeof a_train, "data.train_files=%s", data);
    snprintf(a_tok, sizeof a_tok, "data.tokenizer=%s", tokdir);
    snprintf(a_dir, sizeof a_dir, "trainer.default_local_dir=%s", dir);
    snprintf(a_steps, sizeof a_steps, "trainer.total_training_steps=%d", steps);
    snprintf(a_len, sizeof a_len, "data.max_response_length=%d", resp_tokens + 1);
    snprintf(bin, sizeof bin, "%s/bin/dapo-coordinator", build);
    snprintf(log, sizeof log, "%s/coordinator.log", dir);
    char *argv[] = {bin, a_bind, a_http, a_train, a_tok, a_dir, a_steps, a_len, "data.train_batch_size=1024",
                    "data.gen_batch_size=1024", "actor_rollout_ref.rollout.n=8", "actor_rollout_ref.actor.ppo_mini_batch_size=1024",
                    "algorithm.filter_groups.enable=false", "reward_model.overlong_buffer.enable=false",
                    "trainer.val_before_train=false", "trainer.save_freq=-1", "cluster.heartbeat_ms=200", NULL};
    pid_t coord = tu_spawn(argv, log);
    static FakeRollout r[NWORKERS];
    static FakeLearner l;
    static FakeVerifier v;
    memset(r, 0, sizeof r); memset(&l, 0, sizeof l); memset(&v, 0, sizeof v);
    for (int i = 0; i < NWORKERS; i++) {
        snprintf(r[i].endpoint, sizeof r[i].endpoint, "%s", zep);
        snprintf(r[i].id, sizeof r[i].id, "rollout-%d", i);
        r[i].capacity = INFLIGHT * GROUP_N;
        r[i].resp_tokens = resp_tokens;
        r[i].text_bytes = 4 * resp_tokens;
        pthread_create(&r[i].th, NULL, rollout_main, &r[i]);
    }
    snprintf(l.endpoint, sizeof l.endpoint, "%s", zep);
    snprintf(v.endpoint, sizeof v.endpoint, "%s", zep);
    pthread_create(&l.th, NULL, learner_main, &l);
    pthread_create(&v.th, NULL, verifier_main, &v);
    /* Time from the first group generated to the last step's batch at the learner (no HTTP polling: it would
     * load the coordinator being measured). */
    double t0 = 0, t1 = 0, c0[2] = {0, 0};
    int64_t deadline = clock_ms() + 300000;
    while (clock_ms() < deadline) {
        int groups = 0;
        for (int i = 0; i < NWORKERS; i++) groups += r[i].groups_done;
        if (!t0 && groups) { t0 = clock_s(); c0[0] = self_cpu_s(); c0[1] = pid_cpu_s(coord); }
        if (l.batches >= steps) {
            t1 = clock_s();
            cpu[0] = self_cpu_s() - c0[0];
            cpu[1] = pid_cpu_s(coord) - c0[1];
            break;
        }     /* the last step's batch reached the learner */
        usleep(1000);
    }
    uint64_t bytes = 0;
    int groups = 0;
    for (int i = 0; i < NWORKERS; i++) { bytes += r[i].bytes_sent; groups += r[i].groups_done; }
    *msg_bytes = groups ? (size_t)(bytes / (uint64_t)groups) : 0;
    for (int i = 0; i < NWORKERS; i++) { r[i].stop = 1; pthread_join(r[i].th, NULL); }
    l.stop = v.stop = 1;
    pthread_join(l.th, NULL);
    pthread_join(v.th, NULL);
    kill(coord, SIGTERM);
    tu_wait(coord, 10000);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) {}
    if (!t1 || !t0) { fprintf(stderr, "coordinator run did not finish; see its log\n"); return -1; }
    double dt = t1 - t0;
    *gps = groups / dt;
    return (double)bytes / dt / 1e6;
}

typedef struct { char ep[64]; size_t req, rep; int count; pthread_t th; } RawPeer;

static void *raw_dealer(void *arg) {
    RawPeer *p = arg;
    void *ctx = zmq_ctx_new(), *s = zmq_socket(ctx, ZMQ_DEALER);
    zmq_connect(s, p->ep);
    char *rep = calloc(1, p->rep), *req = malloc(p->req > 0 ? p->req : 1);
    zmq_send(s, "", 0, 0);                                /* hello */
    for (int i = 0; i < p->count; i++) {
        if (zmq_recv(s, req, p->req, 0) < 0) break;
        zmq_send(s, rep, p->rep, 0);
    }
    free(rep); free(req);
    zmq_close(s);
    zmq_ctx_term(ctx);
    return NULL;
}

/* Raw ZeroMQ: the same number of request/reply pairs of the same sizes, 8 dealers, INFLIGHT requests in flight each. */
static double run_raw(size_t req, size_t rep, int count) {
    void *ctx = zmq_ctx_new(), *router = zmq_socket(ctx, ZMQ_ROUTER);
    int port = tu_free_port();
    RawPeer p[NWORKERS];
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    zmq_bind(router, ep);
    for (int i = 0; i < NWORKERS; i++) {
        snprintf(p[i].ep, sizeof p[i].ep, "%s", ep);
        p[i].req = req; p[i].rep = rep; p[i].count = count / NWORKERS;
        pthread_create(&p[i].th, NULL, raw_dealer, &p[i]);
    }
    char id[NWORKERS][256];
    size_t idlen[NWORKERS];
    char *buf = malloc(rep + 1), *rq = calloc(1, req > 0 ? req : 1);
    for (int i = 0; i < NWORKERS; i++) {               /* hellos */
        idlen[i] = (size_t)zmq_recv(router, id[i], sizeof id[i], 0);
        zmq_recv(router, buf, rep, 0);
    }
    double t0 = clock_s();
    int per = count / NWORKERS, sent[NWORKERS] = {0}, total = 0;
    for (int i = 0; i < NWORKERS; i++)
        for (int k = 0; k < INFLIGHT && sent[i] < per; k++, sent[i]++) {
            zmq_send(router, id[i], idlen[i], ZMQ_SNDMORE);
            zmq_send(router, rq, req, 0);
        }
    uint64_t bytes = 0;
    while (total < per * NWORKERS) {
        char who[256];
        int n = zmq_recv(router, who, sizeof who, 0);
        int got = zmq_recv(router, buf, rep, 0);
        if (n < 0 || got < 0) break;
        bytes += (uint64_t)got;
        total++;
        for (int i = 0; i < NWORKERS; i++)
            if ((size_t)n == idlen[i] && !memcmp(who, id[i], idlen[i]) && sent[i] < per) {
                zmq_send(router, id[i], idlen[i], ZMQ_SNDMORE);
                zmq_send(router, rq, req, 0);
                sent[i]++;
            }
    }
    double dt = clock_s() - t0;
    for (int i = 0; i < NWORKERS; i++) pthread_join(p[i].th, NULL);
    free(buf); free(rq);
    zmq_close(router);
    zmq_ctx_term(ctx);
    return (double)bytes / dt / 1e6;
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: bench_coordinator BUILD_DIR TOKENIZER_DIR [--steps S] [--resp-tokens R]\n"); return 2; }
    int steps = 3, resp_tokens = 256;
    for (int i = 3; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--resp-tokens")) resp_tokens = atoi(argv[i + 1]);
    }
    double ours[3], gps[3], raw[3], cpu[3][2];
    size_t msg = 0;
    for (int k = 0; k < 3; k++) {
        ours[k] = run_ours(argv[1], argv[2], steps, resp_tokens, &gps[k], &msg, cpu[k]);
        if (ours[k] < 0) return 1;
        printf("ours  run %d: %.0f groups/s, %.1f MB/s of responses (GroupResult %zu bytes, %d steps x 1024 groups x n %d); "
               "CPU %.3f s coordinator, %.3f s scripted workers\n",
               k + 1, gps[k], ours[k], msg, steps, GROUP_N, cpu[k][1], cpu[k][0]);
    }
    int count = steps * 1024;
    for (int k = 0; k < 3; k++) {
        raw[k] = run_raw(200, msg, count);
        printf("raw ZeroMQ run %d: %.1f MB/s (%d request/reply pairs, %zu-byte replies, 8 dealers)\n", k + 1, raw[k],
               count, msg);
    }
    double o = median3(ours[0], ours[1], ours[2]), b = median3(raw[0], raw[1], raw[2]);
    printf("median: ours %.0f groups/s, %.1f MB/s (CPU %.3f s coordinator, %.3f s scripted workers); raw ZeroMQ %.1f MB/s\n",
           median3(gps[0], gps[1], gps[2]), o, median3(cpu[0][1], cpu[1][1], cpu[2][1]),
           median3(cpu[0][0], cpu[1][0], cpu[2][0]), b);
    printf("BENCH coordinator ours=%.1f baseline=%.1f ratio=%.2f\n", o, b, o / b);
    return 0;
}
