/* common/core/threads_env.h: the threading environment a dapo process needs on few cores (docs/performance.md): the
 * OpenMP pool and OpenBLAS's pool busy-waiting on 2 cores starve each other (measured: 10x slower SFT steps and
 * decode). Both libraries read their settings when they load, so this sets OMP_WAIT_POLICY=PASSIVE and
 * OPENBLAS_THREAD_TIMEOUT=4 where the user has not and re-executes the program once. A value the environment set is
 * never overridden. OPENBLAS_CORETYPE is left to the launchers and benchmarks (deploy/local/env.sh), which choose it
 * from the CPU flags: tests run with whatever kernel their environment gives. */
#ifndef DAPO_THREADS_ENV_H
#define DAPO_THREADS_ENV_H

/* Call first thing in main(); may not return (execv of /proc/self/exe with the same argv). */
void threads_env_ensure(char **argv);

#endif
