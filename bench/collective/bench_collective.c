/* bench/collective/bench_collective.c: one rank of the CPU collective (common/collective: the ring) timing
 * all-reduce, reduce-scatter and all-gather of fp32 buffers. Run W copies (bench/collective/run.sh does, on loopback
 * and across network namespaces); rank 0 prints one line per (op, size):
 *   OURS op=<allreduce|reduce_scatter|allgather> W=<W> bytes=<buffer bytes> time_s=<median> algbw=<GB/s> busbw=<GB/s>
 * with the nccl-tests definitions: algbw = bytes / time; busbw = algbw x 2 (W-1)/W for all-reduce and x (W-1)/W for
 * reduce-scatter and all-gather (bytes: the whole W x shard buffer), the bandwidth each link carries, comparable
 * across W and with MPI (bench/collective/mpi_collective.c prints the same fields). Each size is checked once against
 * the exact sum (integer-valued floats, so any order is exact).
 * Usage: bench_collective --rank R --world W --endpoint EP [--sizes 4M,64M,1G] [--iters 5] [--warmup 1]
 *                         [--ops allreduce,reduce_scatter,allgather] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collective/collective.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/threads_env.h"

#include "sizes.h"

/* Fills buf for rank r so that every sum is an exact small integer: element i of rank r is (i % 7) + r. */
static void fill(float *buf, long n, int r) {
    for (long i = 0; i < n; i++) buf[i] = (float)(i % 7 + r);
}

/* One op on buf (n floats, W | n for the sharded ones). 0 or the collective's code. */
static int run_op(Collective *c, const char *op, float *buf, long n, int W, char err[ERR_LEN]) {
    if (!strcmp(op, "allreduce")) return coll_allreduce_sum(c, buf, n, err);
    if (!strcmp(op, "reduce_scatter")) return coll_reduce_scatter_sum(c, buf, n / W, err);
    return coll_allgather(c, buf, n / W, err);
}

/* Checks the result of one op on the buffer fill() made. 0 when right. */
static int check(const char *op, const float *buf, long n, int W, int rank) {
    long shard = n / W;
    double rsum = (double)W * (W - 1) / 2;
    for (long i = 0; i < n; i += 4099) {
        double want;
        if (!strcmp(op, "allreduce")) want = W * (double)(i % 7) + rsum;
        else if (!strcmp(op, "reduce_scatter")) {
            if (i / shard != rank) continue;
            want = W * (double)(i % 7) + rsum;
        } else want = (double)(i % 7) + (double)(i / shard);   /* region r holds rank r's */
        if (buf[i] != (float)want) {
            fprintf(stderr, "%s: element %ld is %g, want %g\n", op, i, buf[i], want);
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    int rank = 0, world = 1, iters = 5, warmup = 1;
    const char *ep = NULL, *sizes = "4M,64M,1G", *ops = "allreduce,reduce_scatter,allgather";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--rank")) rank = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--world")) world = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--endpoint")) ep = argv[i + 1];
        else if (!strcmp(argv[i], "--sizes")) sizes = argv[i + 1];
        else if (!strcmp(argv[i], "--ops")) ops = argv[i + 1];
        else if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--warmup")) warmup = atoi(argv[i + 1]);
        else { fprintf(stderr, "unknown argument %s\n", argv[i]); return 2; }
    }
    if (!ep || world < 2 || rank < 0 || rank >= world || iters < 1 || iters > 100) {
        fprintf(stderr, "usage: bench_collective --rank R --world W --endpoint EP [--sizes 4M,64M,1G] [--iters N]\n");
        return 2;
    }
    threads_env_ensure(argv);                           /* the learners' malloc and threading settings */
    log_init("bench-collective", LL_ERROR);     /* rank 0 closing first is no news */
    char err[ERR_LEN];
    Collective *c = NULL;
    CollOptions o = {.rank = rank, .world = world, .endpoint = ep, .timeout_s = 300};
    if (coll_open_cpu(&o, &c, err)) { fprintf(stderr, "rank %d: %s\n", rank, err); return 1; }
    char opl[128], szl[256];
    snprintf(opl, sizeof opl, "%s", ops);
    int rc = 0;
    for (char *op_save = NULL, *op = strtok_r(opl, ",", &op_save); op && !rc; op = strtok_r(NULL, ",", &op_save)) {
        snprintf(szl, sizeof szl, "%s", sizes);
        for (char *sz_save = NULL, *s = strtok_r(szl, ",", &sz_save); s && !rc; s = strtok_r(NULL, ",", &sz_save)) {
            long n = parse_size(s) / 4 / world * world;   /* floats, a multiple of W */
            float *buf = malloc((size_t)n * sizeof(float));
            if (!buf) { fprintf(stderr, "out of memory for %s\n", s); rc = 1; break; }
            double t[100];
            for (int k = -warmup; k < iters && !rc; k++) {
                fill(buf, n, rank);
                if (!strcmp(op, "allgather"))            /* only this rank's region is its contribution */
                    for (long i = 0; i < n; i++) buf[i] = i / (n / world) == rank ? (float)(i % 7 + rank) : -1.0f;
                if ((rc = coll_barrier(c, err))) break;
                double t0 = clock_s();
                if ((rc = run_op(c, op, buf, n, world, err))) break;
                if (k >= 0) t[k] = clock_s() - t0;
                if (k == -warmup && check(op, buf, n, world, rank)) rc = 1;
            }
            free(buf);
            if (rc) { fprintf(stderr, "rank %d %s %s: %s\n", rank, op, s, err); break; }
            qsort(t, (size_t)iters, sizeof t[0], cmp_double);
            if (rank == 0) print_row("OURS", op, world, (double)n * 4, t[iters / 2]);
        }
    }
    coll_close(c);
    return rc;
}
