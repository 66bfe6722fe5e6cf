/* common/core/threads_env.h: the threading environment a dapo process needs on few cores (docs/performance.md): the
 * OpenMP pool and OpenBLAS's pool busy-waiting on 2 cores starve each other (measured: 10x slower SFT steps and
 * decode). Both libraries read their settings when they load, so this sets OMP_WAIT_POLICY=PASSIVE and
 * OPENBLAS_THREAD_TIMEOUT=4 where the user has not and re-executes the program once. A value the environment set is
 * never overridden. OPENBLAS_CORETYPE is left to the launchers and benchmarks (deploy/local/env.sh), which choose it
 * from the CPU flags: tests run with whatever kernel their environment gives.
 * It also fixes glibc's malloc thresholds (mallopt; MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_ in the
 * environment win): buffers up to 64 MiB come from the heap, which gives memory back once 256 MiB are free at its top.
 * glibc's own dynamic threshold maps a multi-MiB buffer with mmap and unmaps it at free, again and again for buffers
 * of one size (ZeroMQ's message per 1 MiB ring segment or weight chunk), each page-faulting anew: the ring's
 * all-reduce at W = 4, 256 MB, ran at 0.71 GB/s bus bandwidth against 0.93 with fixed thresholds (issue 39). */
#ifndef DAPO_THREADS_ENV_H
#define DAPO_THREADS_ENV_H

/* Call first thing in main(); may not return (execv of /proc/self/exe with the same argv). */
void threads_env_ensure(char **argv);

#endif
