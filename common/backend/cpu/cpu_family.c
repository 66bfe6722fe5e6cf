/* common/backend/cpu/cpu_family.c: the kernel-family table and the public kernels that go through it (cpu_family.h).
 * The family builds of cpu_ops.c and cpu_decode.c define cpu_<kernel>_<family> (cpu_family_names.h); here each public
 * cpu_<kernel> calls the chosen family's. */
#include "backend/cpu/cpu_family.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_decode.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_ops.h"
#include "core/log.h"

#if defined(__x86_64__)
#define CPU_X86 1
#else
#define CPU_X86 0
#endif

typedef struct {
#define X(name, params, args) void (*name) params;
    CPU_KERNELS(X)
#undef X
} CpuKernels;

#define X(name, params, args) void name##_generic params;
CPU_KERNELS(X)
#undef X
static const CpuKernels k_generic = {
#define X(name, params, args) name##_generic,
    CPU_KERNELS(X)
#undef X
};
#if CPU_X86
#define X(name, params, args) void name##_avx2 params; void name##_avx512 params;
CPU_KERNELS(X)
#undef X
static const CpuKernels k_avx2 = {
#define X(name, params, args) name##_avx2,
    CPU_KERNELS(X)
#undef X
};
static const CpuKernels k_avx512 = {
#define X(name, params, args) name##_avx512,
    CPU_KERNELS(X)
#undef X
};
#endif

static const char *const names[] = {"generic", "avx2", "avx512"};
static CpuFamily chosen;
static const CpuKernels *k_table = &k_generic;
static int init_rc, forced;
static char init_err[ERR_LEN];
static pthread_once_t once = PTHREAD_ONCE_INIT;

const char *cpu_family_name(CpuFamily f) { return (unsigned)f <= CPU_FAMILY_AVX512 ? names[f] : "?"; }

int cpu_family_supported(CpuFamily f) {
    if (f == CPU_FAMILY_GENERIC) return 1;
#if CPU_X86
    __builtin_cpu_init();
    if (f == CPU_FAMILY_AVX2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (f == CPU_FAMILY_AVX512)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
               cpu_family_supported(CPU_FAMILY_AVX2);
#endif
    return 0;
}

/* The choice, made once when the program loads (before main: no kernel call pays for a check); cpu_family_init
 * reports it (a refusal, the log line). */
static CpuFamily best;
__attribute__((constructor)) static void choose(void) {
    best = cpu_family_supported(CPU_FAMILY_AVX512) ? CPU_FAMILY_AVX512
                     : cpu_family_supported(CPU_FAMILY_AVX2) ? CPU_FAMILY_AVX2 : CPU_FAMILY_GENERIC;
    const char *env = getenv("DAPO_CPU_FAMILY");
    chosen = best;
    forced = env && *env;
    if (env && *env) {
        int f = -1;
        for (int i = 0; i < 3; i++) if (!strcmp(env, names[i])) f = i;
        if (f < 0)
            init_rc = err_set(init_err, ERR_INVAL, "DAPO_CPU_FAMILY=%s: not a kernel family (generic, avx2, avx512)",
                              env);
        else if (!cpu_family_supported((CpuFamily)f))
            init_rc = err_set(init_err, ERR_UNSUPPORTED, "DAPO_CPU_FAMILY=%s: this CPU (or build) has no %s; it has "
                              "%s", env, env, cpu_family_name(best));
        else
            chosen = (CpuFamily)f;
    }
#if CPU_X86
    k_table = chosen == CPU_FAMILY_AVX512 ? &k_avx512 : chosen == CPU_FAMILY_AVX2 ? &k_avx2 : &k_generic;
#endif
}

static void log_choice(void) {
    if (!init_rc)
        log_info("cpu kernels: %s (%s; the CPU's best: %s)", cpu_family_name(chosen),
                 forced ? "DAPO_CPU_FAMILY" : "chosen by CPUID", cpu_family_name(best));
}

int cpu_family_init(char err[ERR_LEN]) {
    pthread_once(&once, log_choice);
    if (init_rc && err) snprintf(err, ERR_LEN, "%s", init_err);
    return init_rc;
}

CpuFamily cpu_family(void) { return chosen; }

#define X(name, params, args) \
    void name params { k_table->name args; }
CPU_KERNELS(X)
#undef X
