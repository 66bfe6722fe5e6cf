/* common/backend/cpu/cpu_family.h: the CPU backend's kernel families (issue 43). The hot kernels (cpu_ops.c,
 * cpu_decode.c: every function of cpu_kernels.h) are built once per family, each build with its instruction set, and
 * a table picks one family for the whole process at backend init:
 *   generic  x86-64 (SSE2) or the host's baseline: plain C; fmaf is a library call without FMA hardware
 *   avx2     AVX2 + FMA (Haswell, Zen 1-3 and later): the C loops vectorised for it, plus the AVX2 GEMM panel kernel
 *   avx512   AVX-512 F/VL/BW/DQ (Skylake-SP, Zen 4 and later): the AVX-512 intrinsic kernels (panels, attention)
 * The best family the CPU has (CPUID, and the OS saving the registers: __builtin_cpu_supports), or the one named by the
 * environment variable DAPO_CPU_FAMILY=generic|avx2|avx512, refused when the CPU lacks it, so a test or a benchmark
 * holds any machine to a family. The choice is logged once.
 * Within a family every kernel keeps its fixed accumulation order per output, so batch- and worker-count invariance
 * hold. Across families: the packed linear, the paged attention and everything of cpu_decode.c give bitwise the same
 * results (one fmaf chain per output, no implicit contraction); cpu_ops.c's element-wise loops (norms, RoPE, SwiGLU,
 * the log-prob reductions) are compiled with FP contraction, so a family with FMA rounds a*b+c once where generic
 * rounds twice (fp32 rounding: tests/unit/test_cpu_family.c measures it). OpenBLAS (the training GEMMs) picks its own
 * kernels by CPU, whatever the family (OPENBLAS_CORETYPE forces them). */
#ifndef DAPO_CPU_FAMILY_H
#define DAPO_CPU_FAMILY_H

#include "core/err.h"

typedef enum { CPU_FAMILY_GENERIC = 0, CPU_FAMILY_AVX2 = 1, CPU_FAMILY_AVX512 = 2 } CpuFamily;

/* The family is picked once, as the program loads (a constructor: no kernel call checks it): DAPO_CPU_FAMILY, else the
 * best the CPU has. This reports that choice: the log line (once), and 0, or ERR_INVAL (an unknown name) /
 * ERR_UNSUPPORTED (a family this CPU or this build lacks) with err naming it; the kernels then run the CPU's best. */
int cpu_family_init(char err[ERR_LEN]);
/* The family in use. */
CpuFamily cpu_family(void);
/* 1 when this CPU and build can run family f. */
int cpu_family_supported(CpuFamily f);
const char *cpu_family_name(CpuFamily f);   /* "generic" | "avx2" | "avx512" */

#endif
