/* common/core/threads_env.c: see threads_env.h. */
#include "core/threads_env.h"

#include <malloc.h>
#include <stdlib.h>
#include <unistd.h>

/* glibc's fixed malloc thresholds (see threads_env.h), unless the environment sets its own. */
static void malloc_thresholds(void) {
    if (!getenv("MALLOC_MMAP_THRESHOLD_")) mallopt(M_MMAP_THRESHOLD, 64 << 20);
    if (!getenv("MALLOC_TRIM_THRESHOLD_")) mallopt(M_TRIM_THRESHOLD, 256 << 20);
}

void threads_env_ensure(char **argv) {
    if (getenv("DAPO_THREADS_ENV")) { malloc_thresholds(); return; }   /* already re-executed (or opted out) */
    setenv("DAPO_THREADS_ENV", "1", 1);
    int changed = 0;
    if (!getenv("OMP_WAIT_POLICY")) { setenv("OMP_WAIT_POLICY", "PASSIVE", 1); changed = 1; }
    if (!getenv("OPENBLAS_THREAD_TIMEOUT")) { setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1); changed = 1; }
    if (changed) execv("/proc/self/exe", argv);      /* on failure: go on as we are */
    malloc_thresholds();
}
