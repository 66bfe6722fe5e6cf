#!/usr/bin/env bash
# bench/coordinator/run.sh: groups/s and MB/s of responses through the coordinator's hub (8 scripted rollout
# workers, a scripted verifier and learner, the real coordinator process) beside raw ZeroMQ moving the same traffic
# (the hub's per-group message table, measured in the run and printed: same counts, sizes, directions, peers and
# in-flight depth, pre-built buffers) in the same run (bench_coordinator.c). No BLAS work: OPENBLAS_CORETYPE does not
# matter here. REPS=K repetitions per side (medians; default 3), STEPS, RESP_TOKENS as before.
# Last line: BENCH coordinator ours=<MB/s> baseline=<MB/s> ratio=<ours/baseline>
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
BUILD=${BUILD:-build}
. deploy/local/env.sh
DAPO_LOG_LEVEL=warn "$BUILD/bench/bench_coordinator" "$BUILD" data/tokenizers/qwen3 --steps "${STEPS:-3}" \
    --resp-tokens "${RESP_TOKENS:-256}" --reps "${REPS:-3}"
