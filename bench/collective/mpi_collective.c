/* bench/collective/mpi_collective.c: the baseline of bench/collective: Debian OpenMPI's MPI_Allreduce (and
 * MPI_Reduce_scatter_block, MPI_Allgather) on the same fp32 buffers, sizes and timing as bench_collective.c, printing
 * the same fields with MPI in place of OURS. Built by bench/collective/run.sh with mpicc (never by make: OpenMPI is a
 * benchmark-only dependency); run with mpirun --mca btl self,tcp.
 * Usage: mpirun -np W mpi_collective [--sizes 4M,64M,1G] [--iters 5] [--warmup 1] [--ops ...] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sizes.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, world, iters = 5, warmup = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    const char *sizes = "4M,64M,1G", *ops = "allreduce,reduce_scatter,allgather";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--sizes")) sizes = argv[i + 1];
        else if (!strcmp(argv[i], "--ops")) ops = argv[i + 1];
        else if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--warmup")) warmup = atoi(argv[i + 1]);
    }
    if (iters < 1 || iters > 100) iters = 5;
    char opl[128], szl[256];
    snprintf(opl, sizeof opl, "%s", ops);
    for (char *os = NULL, *op = strtok_r(opl, ",", &os); op; op = strtok_r(NULL, ",", &os)) {
        snprintf(szl, sizeof szl, "%s", sizes);
        for (char *ss = NULL, *s = strtok_r(szl, ",", &ss); s; s = strtok_r(NULL, ",", &ss)) {
            long n = parse_size(s) / 4 / world * world, shard = n / world;
            float *buf = malloc((size_t)n * sizeof(float)), *out = malloc((size_t)n * sizeof(float));
            if (!buf || !out) MPI_Abort(MPI_COMM_WORLD, 1);
            for (long i = 0; i < n; i++) buf[i] = (float)(i % 7 + rank);
            double t[100];
            for (int k = -warmup; k < iters; k++) {
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = MPI_Wtime();
                if (!strcmp(op, "allreduce")) MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                else if (!strcmp(op, "reduce_scatter"))
                    MPI_Reduce_scatter_block(buf, out, (int)shard, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                else MPI_Allgather(buf + rank * shard, (int)shard, MPI_FLOAT, out, (int)shard, MPI_FLOAT, MPI_COMM_WORLD);
                if (k >= 0) t[k] = MPI_Wtime() - t0;
            }
            free(buf);
            free(out);
            qsort(t, (size_t)iters, sizeof t[0], cmp_double);
            if (rank == 0) print_row("MPI", op, world, (double)n * 4, t[iters / 2]);
        }
    }
    MPI_Finalize();
    return 0;
}
