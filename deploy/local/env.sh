# deploy/local/env.sh: the BLAS and threading environment for dapo processes on this machine (docs/performance.md),
# sourced by the launchers and benchmarks. Sets a variable only where the user has not: never overrides.
# OpenBLAS 0.3.21 does not recognise recent Xeons and silently picks its slowest (Prescott) kernel; choose the
# kernel from the CPU flags instead.
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then export OPENBLAS_CORETYPE=SkylakeX
  elif grep -qw avx2 /proc/cpuinfo 2>/dev/null; then export OPENBLAS_CORETYPE=Haswell
  fi
  [ -n "${OPENBLAS_CORETYPE:-}" ] && echo "dapo: OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE (chosen from the CPU flags)" >&2
else
  echo "dapo: OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE (from the environment)" >&2
fi
# Two OpenMP/OpenBLAS pools busy-waiting on 2 cores starve each other.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
export OPENBLAS_THREAD_TIMEOUT=${OPENBLAS_THREAD_TIMEOUT:-4}
