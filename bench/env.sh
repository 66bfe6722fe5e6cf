# bench/env.sh: the environment every benchmark runs in, for ours and the baseline alike (sourced by bench/*/run.sh):
# the launchers' BLAS/threading settings (deploy/local/env.sh: OPENBLAS_CORETYPE from the CPU flags,
# OMP_WAIT_POLICY=PASSIVE, OPENBLAS_THREAD_TIMEOUT=4) plus what docs/performance.md says a fair PyTorch baseline needs
# on this machine (glibc keeping multi-MB buffers, 2 threads). A value the caller set is never overridden.
. "$(dirname "${BASH_SOURCE[0]}")/../deploy/local/env.sh"
export MALLOC_MMAP_THRESHOLD_=${MALLOC_MMAP_THRESHOLD_:-4294967296} MALLOC_TRIM_THRESHOLD_=${MALLOC_TRIM_THRESHOLD_:-4294967296}
export MALLOC_TOP_PAD_=${MALLOC_TOP_PAD_:-1073741824}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-2}
echo "env: OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-} OMP_WAIT_POLICY=$OMP_WAIT_POLICY OPENBLAS_THREAD_TIMEOUT=$OPENBLAS_THREAD_TIMEOUT" \
     "OMP_NUM_THREADS=$OMP_NUM_THREADS OPENBLAS_NUM_THREADS=$OPENBLAS_NUM_THREADS MALLOC_MMAP_THRESHOLD_=$MALLOC_MMAP_THRESHOLD_" \
     "MALLOC_TRIM_THRESHOLD_=$MALLOC_TRIM_THRESHOLD_ MALLOC_TOP_PAD_=$MALLOC_TOP_PAD_"
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
