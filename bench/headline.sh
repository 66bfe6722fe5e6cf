#!/usr/bin/env bash
# bench/headline.sh: README's headline, measured — `make run`'s default job for DURATION seconds on each of SEEDS,
# one run at a time, then the table README gives (bench/headline_report.py): held-out mean@4 at step 0, the first
# validation +20 points up (seconds since launch, step), the last validation within DURATION, steps run.
#
#   bench/headline.sh                 (SEEDS="1 2 3" DURATION=900 HL_DIR=runs/headline BUILD=build)
#
# Every run starts from the same cached base model and task data, runs/default's (configs/default.prepare.sh makes
# them when missing: about 8 minutes of SFT), copied into HL_DIR/s<seed>; seed N runs deploy/local/run.sh with
# trainer.seed=N data.seed=N, stopped with SIGTERM DURATION seconds after launch (an ordered stop). A run directory
# that holds a finished run (done.txt) is kept. Run it on a quiet machine: it measures wall-clock; the CPU model, its
# flags and the load are printed first and written to HL_DIR/machine.txt.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
BUILD=${BUILD:-build}
SEEDS=${SEEDS:-1 2 3}
DURATION=${DURATION:-900}
HL_DIR=${HL_DIR:-runs/headline}
[ -x "$BUILD/bin/dapo-coordinator" ] || { echo "headline: $BUILD/bin/dapo-coordinator is missing: run make first" >&2; exit 2; }
mkdir -p "$HL_DIR"
HL_DIR=$(cd "$HL_DIR" && pwd)
{
  echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1) ($(nproc) cores)"
  echo "family: $(sed -n 's/^cpu family[[:space:]]*: //p' /proc/cpuinfo | head -1) model $(sed -n 's/^model[[:space:]]*: //p' /proc/cpuinfo | head -1)"
  echo "flags: $(grep -m1 '^flags' /proc/cpuinfo | grep -oE 'avx512[a-z_0-9]*|amx[a-z_0-9]*|avx2|fma' | sort -u | tr '\n' ' ')"
  echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo +dirty)"
  echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$HL_DIR/machine.txt"
if [ ! -f runs/default/base-model/model.safetensors ]; then
  echo "headline: preparing runs/default (task data and the SFT base model)"
  RUN_DIR=runs/default BUILD=$BUILD configs/default.prepare.sh
fi
CHILD=
trap '[ -n "$CHILD" ] && kill -TERM "$CHILD" 2>/dev/null && wait "$CHILD"; exit 130' INT TERM
for s in $SEEDS; do
  dir="$HL_DIR/s$s"
  [ -f "$dir/done.txt" ] && { echo "headline: seed $s already measured ($dir)"; continue; }
  rm -rf "$dir"
  mkdir -p "$dir"
  cp -r runs/default/data runs/default/base-model "$dir/"
  echo "headline: seed $s for $DURATION s ($(date -u +%T), load $(cut -d' ' -f1-3 /proc/loadavg))"
  date +%s.%N > "$dir/launch.txt"
  BUILD=$BUILD deploy/local/run.sh --run-dir "$dir" "trainer.seed=$s" "data.seed=$s" > "$dir/run.log" 2>&1 &
  CHILD=$!
  end=$(( $(date +%s) + DURATION ))
  while [ "$(date +%s)" -lt "$end" ]; do
    kill -0 "$CHILD" 2>/dev/null || { echo "headline: seed $s stopped early; see $dir/run.log" >&2; exit 1; }
    sleep 1
  done
  kill -TERM "$CHILD"
  wait "$CHILD" || true
  CHILD=
  echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)" > "$dir/done.txt"
done
python3 bench/headline_report.py --duration "$DURATION" "$HL_DIR"/s*
