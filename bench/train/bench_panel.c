/* bench/train/bench_panel.c: the packed linear (backend/cpu/cpu_decode.h: every product of a forward) of each CPU
 * kernel family this CPU has, called directly (cpu_linear_packed_ex_<family>), in GFLOP/s, best of REPS calls:
 *   build/bench/bench_panel [M N K] [reps]       (default 2048 1408 512, 5; threads: OMP_NUM_THREADS)
 * Against the CPU's FMA peak (2 FMA pipes: AVX2 2 x 8 lanes a cycle, AVX-512 where 512-bit FMAs run on both pipes
 * 2 x 16): the kernels' share of it. Last line: BENCH panel ours=<avx2 GFLOP/s> baseline=<avx512> ratio=<avx2/avx512>
 * (or generic / avx2 on a CPU without AVX-512). Not here: PyTorch (bench/train/run.sh sets the whole model beside it). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "backend/cpu/cpu_decode.h"
#include "backend/cpu/cpu_family.h"
#include "backend/cpu/cpu_kernels.h"

#define X(name, params, args) void name##_generic params; void name##_avx2 params; void name##_avx512 params;
CPU_KERNELS(X)
#undef X

typedef void (*LinFn)(float *, long, const float *, const float *, const float *, int, int, int, int);

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    int M = argc > 3 ? atoi(argv[1]) : 2048, N = argc > 3 ? atoi(argv[2]) : 1408, K = argc > 3 ? atoi(argv[3]) : 512;
    int reps = argc > 4 ? atoi(argv[4]) : 5;
    if (M < 1 || N < 1 || K < 1 || reps < 1) { fprintf(stderr, "usage: bench_panel [M N K [reps]]\n"); return 2; }
    float *x = malloc(4L * M * K), *w = malloc(4L * N * K), *y = malloc(4L * M * N);
    float *wp = malloc(4L * cpu_pack_floats(N, K));
    for (long i = 0; i < (long)M * K; i++) x[i] = (float)(i % 7) * 0.1f;
    for (long i = 0; i < (long)N * K; i++) w[i] = (float)(i % 5) * 0.1f;
    cpu_pack_weights_generic(wp, w, N, K);
    static const LinFn fn[3] = {cpu_linear_packed_ex_generic, cpu_linear_packed_ex_avx2, cpu_linear_packed_ex_avx512};
    double gf[3] = {0};
    printf("M %d N %d K %d, %d threads, best of %d\n", M, N, K, omp_get_max_threads(), reps);
    for (int f = 0; f < 3; f++) {
        if (!cpu_family_supported((CpuFamily)f)) continue;
        double best = 1e30;
        for (int r = 0; r < reps; r++) {
            double t = now();
            fn[f](y, N, x, wp, NULL, M, N, K, 0);
            t = now() - t;
            if (t < best) best = t;
        }
        gf[f] = 2.0 * M * N * K / best / 1e9;
        printf("%-8s %8.1f GFLOP/s\n", cpu_family_name((CpuFamily)f), gf[f]);
    }
    int a = gf[2] > 0 ? 1 : 0, b = gf[2] > 0 ? 2 : 1;
    printf("BENCH panel ours=%.1f baseline=%.1f ratio=%.2f\n", gf[a], gf[b], gf[b] > 0 ? gf[a] / gf[b] : 0);
    free(x); free(w); free(y); free(wp);
    return 0;
}
