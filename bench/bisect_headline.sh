#!/usr/bin/env bash
# bench/bisect_headline.sh COMMIT...: learning per step of the default run at each commit (issue 32's bisection):
# each commit's tree (git archive) is built (make all CUDA=0) under BI_DIR/src/<commit> and its own
# deploy/local/run.sh and configs/default.yaml run the default job for STEPS steps from one base model and task data
# (runs/default's, copied: every commit starts from the same bytes), seed SEED; the run is stopped once its
# validation at step STEPS is logged. Prints one line per commit, "BISECT <commit> step=<STEPS> mean@4=<x>
# mean@4_step0=<x> seconds=<wall>", and appends it to BI_DIR/results.txt (a commit already there is skipped).
#
#   bench/bisect_headline.sh d39ade2 HEAD     (STEPS=300 SEED=1 BI_DIR=runs/bisect BUILD=build)
#
# STEPS must be a multiple of the config's trainer.test_freq (25). Wall-clock matters only as a sanity check: run it
# on a quiet machine all the same (the default run is not batch-invariant, so a loaded machine changes the batches).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
STEPS=${STEPS:-300}
SEED=${SEED:-1}
BI_DIR=${BI_DIR:-runs/bisect}
[ $# -gt 0 ] || { sed -n '2,12p' "$0"; exit 2; }
[ -f runs/default/base-model/model.safetensors ] || { echo "bisect: run bench/headline.sh or make run first (runs/default)" >&2; exit 2; }
mkdir -p "$BI_DIR/src"
BI_DIR=$(cd "$BI_DIR" && pwd)
CHILD=
trap '[ -n "$CHILD" ] && kill -TERM "$CHILD" 2>/dev/null && wait "$CHILD"; exit 130' INT TERM
for c in "$@"; do
  sha=$(git rev-parse --short "$c^{commit}")
  grep -q "^BISECT $sha " "$BI_DIR/results.txt" 2>/dev/null && { grep "^BISECT $sha " "$BI_DIR/results.txt"; continue; }
  src="$BI_DIR/src/$sha" dir="$BI_DIR/run-$sha"
  if [ ! -x "$src/build/bin/dapo-supervise" ]; then
    rm -rf "$src" && mkdir -p "$src"
    git archive "$sha" | tar -x -C "$src"
    echo "bisect: building $sha"
    make -C "$src" -j"$(nproc)" all CUDA=0 > "$BI_DIR/build-$sha.log" 2>&1 ||
      { echo "bisect: $sha does not build; see $BI_DIR/build-$sha.log" >&2; exit 1; }
  fi
  rm -rf "$dir" && mkdir -p "$dir"
  cp -r runs/default/data runs/default/base-model "$dir/"
  echo "bisect: $sha, $STEPS steps, seed $SEED ($(date -u +%T), load $(cut -d' ' -f1-3 /proc/loadavg))"
  t0=$(date +%s)
  "$src/deploy/local/run.sh" --run-dir "$dir" "trainer.seed=$SEED" "data.seed=$SEED" \
      "trainer.total_training_steps=$STEPS" > "$dir/run.log" 2>&1 &
  CHILD=$!
  val() {  # step: mean@4 of the validation at that step, or nothing yet
    python3 - "$dir/checkpoints/metrics.jsonl" "$1" <<'PY' 2>/dev/null || true
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("step") == int(sys.argv[2]) and "val-core/arith/acc/mean@4" in r:
        print(r["val-core/arith/acc/mean@4"])
PY
  }
  until [ -n "$(val "$STEPS")" ]; do
    kill -0 "$CHILD" 2>/dev/null || { echo "bisect: the run of $sha stopped early; see $dir/run.log" >&2; exit 1; }
    sleep 2
  done
  secs=$(( $(date +%s) - t0 ))
  kill -TERM "$CHILD"
  wait "$CHILD" || true
  CHILD=
  echo "BISECT $sha step=$STEPS mean@4=$(val "$STEPS") mean@4_step0=$(val 0) seconds=$secs" | tee -a "$BI_DIR/results.txt"
done
