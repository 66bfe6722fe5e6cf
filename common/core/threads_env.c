/* common/core/threads_env.c: see threads_env.h. */
#include "core/threads_env.h"

#include <stdlib.h>
#include <unistd.h>

void threads_env_ensure(char **argv) {
    if (getenv("DAPO_THREADS_ENV")) return;          /* already re-executed (or the user opted out) */
    setenv("DAPO_THREADS_ENV", "1", 1);
    int changed = 0;
    if (!getenv("OMP_WAIT_POLICY")) { setenv("OMP_WAIT_POLICY", "PASSIVE", 1); changed = 1; }
    if (!getenv("OPENBLAS_THREAD_TIMEOUT")) { setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1); changed = 1; }
    if (changed) execv("/proc/self/exe", argv);      /* on failure: go on as we are */
}
