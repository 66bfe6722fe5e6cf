/* bench/collective/sizes.h: what bench_collective.c (ours) and mpi_collective.c (OpenMPI, built by mpicc alone) share:
 * sizes like "4M" or "1G", the median's sort and the result line. Header-only, libc only. */
#ifndef DAPO_BENCH_COLLECTIVE_SIZES_H
#define DAPO_BENCH_COLLECTIVE_SIZES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "4K" / "4M" / "4G" (binary units) or plain bytes. */
static inline long parse_size(const char *s) {
    char *end;
    double v = strtod(s, &end);
    if (*end == 'K' || *end == 'k') v *= 1 << 10;
    else if (*end == 'M' || *end == 'm') v *= 1 << 20;
    else if (*end == 'G' || *end == 'g') v *= 1 << 30;
    return (long)v;
}

static inline int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One result line: "<who> op=... W=... bytes=... time_s=<med> algbw=<GB/s> busbw=<GB/s>" (nccl-tests' busbw: algbw x
 * 2(W-1)/W for all-reduce, x (W-1)/W for reduce-scatter and all-gather; bytes: the whole buffer). */
static inline void print_row(const char *who, const char *op, int world, double bytes, double med) {
    double algbw = bytes / med / 1e9, f = (double)(world - 1) / world * (strcmp(op, "allreduce") ? 1 : 2);
    printf("%s op=%s W=%d bytes=%.0f time_s=%.6f algbw=%.3f busbw=%.3f\n", who, op, world, bytes, med, algbw, algbw * f);
    fflush(stdout);
}

#endif
