#!/usr/bin/env bash
# tools/ablation/run.sh (`make ablation`): the DAPO paper's Table 1 ablation at small scale. Runs the seven rows of
# configs/ablation/ (naive GRPO, then + overlong filtering, + clip-higher, + soft overlong punishment, + token-level
# loss, + dynamic sampling, and dapo's default recipe) for SEEDS seeds each, a fixed budget of STEPS training steps,
# from one SFT-warm-started base model; an SFT-only control trained further for the median training wall-clock of the
# dynamic-sampling row; scores every final model with dapo-eval on the held-out set; then writes docs/ablation.md
# and its plots (tools/ablation/report.py, matplotlib).
#
#   tools/ablation/run.sh            (SEEDS="1 2 3" STEPS=40 ABL_DIR=runs/ablation BUILD=build)
#
# Resumable: a finished run (its done.json) is kept and skipped; an unfinished one is started again from scratch, so
# that its wall-clock means one uninterrupted run. Runs go seed by seed (every row of seed 1 first), so a partial
# ablation still compares rows on equal terms. Wall-clock is only compared between runs on one CPU model: a run
# directory made on another CPU model stops the script (move ABL_DIR away or set another).
# What it makes, under ABL_DIR:
#   data/{train,test}.jsonl          dapo-gen-arith --ops 1-4 (20,000 training and 500 held-out problems)
#   base-model/                      runs/default/base-model (configs/default.prepare.sh makes it when missing)
#                                    trained further by dapo-sft on this task until held-out greedy accuracy >= 0.40
#   <row>/s<seed>/                   the run directory (deploy/local/run.sh), done.json, eval.json (dapo-eval)
#   sft-control/s<seed>/             the control model, done.json, eval.json
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
BUILD=${BUILD:-build}
bin="$root/$BUILD/bin"
SEEDS=${SEEDS:-1 2 3}
STEPS=${STEPS:-40}
ABL_DIR=${ABL_DIR:-runs/ablation}
EVAL_K=${EVAL_K:-4}
ROWS=(1-naive-grpo 2-overlong-filtering 3-clip-higher 4-soft-overlong 5-token-mean 6-dynamic-sampling 7-dapo-default)
DAPO_ROW=6-dynamic-sampling          # the row whose median wall-clock the SFT control gets
for b in dapo-gen-arith dapo-sft dapo-eval dapo-coordinator; do
  [ -x "$bin/$b" ] || { echo "ablation: $bin/$b is missing: run make first" >&2; exit 2; }
done
# A stop (SIGINT / SIGTERM) stops the child at work too: the cluster run (an ordered stop) or dapo-sft / dapo-eval.
CHILD=
trap '[ -n "$CHILD" ] && kill -TERM "$CHILD" 2>/dev/null && wait "$CHILD"; exit 130' INT TERM
child() {  # command...: runs it as the stoppable child; its exit status
  "$@" &
  CHILD=$!
  local rc=0
  wait "$CHILD" || rc=$?
  CHILD=
  return $rc
}
mkdir -p "$ABL_DIR/data" "$ABL_DIR/logs"
ABL_DIR=$(cd "$ABL_DIR" && pwd)
. "$root/deploy/local/env.sh"
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
build_rev=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
# the report this script writes (docs/ablation.md, docs/img/ablation*) does not make the build dirty
git -C "$root" diff --quiet HEAD -- . ':!docs/ablation.md' ':!docs/img' 2>/dev/null || build_rev="$build_rev+dirty"
if [ -f "$ABL_DIR/cpu.txt" ] && [ "$(cat "$ABL_DIR/cpu.txt")" != "$cpu" ]; then
  echo "ablation: $ABL_DIR was made on '$(cat "$ABL_DIR/cpu.txt")', this is '$cpu': wall-clock would not compare;" \
       "use another ABL_DIR" >&2
  exit 1
fi
echo "$cpu" > "$ABL_DIR/cpu.txt"
echo "ablation: $cpu, build $build_rev, seeds $SEEDS, $STEPS steps per run, in $ABL_DIR"

# --- the task and the base model -------------------------------------------------------------------------------
if [ ! -s "$ABL_DIR/data/train.jsonl" ] || [ ! -s "$ABL_DIR/data/test.jsonl" ]; then
  "$bin/dapo-gen-arith" --split train --n 20000 --ops 1-4 --seed 11 > "$ABL_DIR/data/train.jsonl.tmp"
  "$bin/dapo-gen-arith" --split test --n 500 --ops 1-4 --seed 12 > "$ABL_DIR/data/test.jsonl.tmp"
  mv "$ABL_DIR/data/train.jsonl.tmp" "$ABL_DIR/data/train.jsonl"
  mv "$ABL_DIR/data/test.jsonl.tmp" "$ABL_DIR/data/test.jsonl"
fi
if [ ! -f "$ABL_DIR/base-model/model.safetensors" ]; then
  if [ ! -f runs/default/base-model/model.safetensors ]; then
    echo "ablation: making the default run's base model first (configs/default.prepare.sh, about 20 minutes)"
    RUN_DIR=runs/default BUILD=$BUILD configs/default.prepare.sh
  fi
  echo "ablation: training the base model further on the ablation task (log in $ABL_DIR/logs/sft-base.log)"
  rm -rf "$ABL_DIR/base-model.tmp"
  child "$bin/dapo-sft" --config configs/ablation/1-naive-grpo.yaml data.tokenizer=data/tokenizers/tiny \
      --model runs/default/base-model --data "$ABL_DIR/data/train.jsonl" --val "$ABL_DIR/data/test.jsonl" \
      --out "$ABL_DIR/base-model.tmp" --steps 400 --batch 128 --lr 5e-4 --warmup 20 --weight-decay 0.01 \
      --beta2 0.95 --eval-every 25 --eval-max 200 --stop-acc 0.40 --log-every 25 --seed 1 \
      > "$ABL_DIR/logs/sft-base.log" 2>&1
  mv "$ABL_DIR/base-model.tmp" "$ABL_DIR/base-model"
fi

# dapo-eval on the held-out set, as the runs' validation samples it (val_kwargs: n EVAL_K, temperature 1, top_p 1).
score() {  # model_dir out.json seed
  child "$bin/dapo-eval" --model "$1" --tokenizer data/tokenizers/tiny --data "$ABL_DIR/data/test.jsonl" --k "$EVAL_K" \
      --temperature 1.0 --top-p 1.0 --max-tokens 44 --chat-template qwen3 --seed "$3" --output "$2.tmp" \
      > /dev/null 2>> "$ABL_DIR/logs/eval.log"
  mv "$2.tmp" "$2"
}
[ -s "$ABL_DIR/base-eval.json" ] || score "$ABL_DIR/base-model" "$ABL_DIR/base-eval.json" 1

write_done() {  # dir wall_s train_s steps
  printf '{"cpu": "%s", "build": "%s", "wall_s": %s, "train_s": %s, "steps": %s, "date": "%s"}\n' \
      "$cpu" "$build_rev" "$2" "$3" "$4" "$(date -u +%FT%TZ)" > "$1/done.json"
}
# The training seconds of a finished run: the sum of its steps' timing_s/step (validation excluded).
train_seconds() {
  python3 -c 'import json,sys
print(round(sum(json.loads(l).get("timing_s/step", 0) for l in open(sys.argv[1]) if l.strip()), 2))' "$1"
}

# A finished run is kept only when it ran the same number of steps: an ABL_DIR of other runs is refused. (The
# controls need no such check: their budget comes from row 6's runs, which are checked before any control.)
kept() {  # dir: 0 when dir holds a finished run of STEPS steps
  [ -f "$1/done.json" ] || return 1
  local n
  n=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["steps"])' "$1/done.json")
  [ "$n" = "$STEPS" ] && return 0
  echo "ablation: $1 holds a finished run of $n steps, not STEPS=$STEPS: use another ABL_DIR" >&2
  exit 1
}
run_row() {  # row seed
  local dir="$ABL_DIR/$1/s$2" t0 t1
  kept "$dir" && return 0
  rm -rf "$dir"
  mkdir -p "$dir"
  echo "ablation: $1 seed $2 ($(date -u +%T))"
  t0=$(date +%s.%N)
  # The coordinator keeps serving the dashboard after the last step (README): the run is stopped (SIGTERM to the
  # supervisor, an ordered stop) once the log says training finished and the final checkpoint is recorded.
  deploy/local/run.sh --config "configs/ablation/$1.yaml" --run-dir "$dir" --steps "$STEPS" \
      "actor_rollout_ref.model.path=$ABL_DIR/base-model" "data.train_files=[$ABL_DIR/data/train.jsonl]" \
      "data.val_files=[$ABL_DIR/data/test.jsonl]" "data.tokenizer=data/tokenizers/tiny" \
      "data.seed=$2" "trainer.seed=$2" "trainer.save_freq=$STEPS" > "$dir/run.log" 2>&1 &
  CHILD=$!
  local final="$dir/checkpoints/global_step_$STEPS/actor/huggingface"
  until grep -q "training finished after $STEPS steps" "$dir/run.log" 2>/dev/null &&
        [ "$(cat "$dir/checkpoints/latest_checkpointed_iteration.txt" 2>/dev/null)" = "$STEPS" ]; do
    kill -0 "$CHILD" 2>/dev/null || { echo "ablation: $1 seed $2 failed; see $dir/run.log and $dir/logs" >&2; exit 1; }
    sleep 1
  done
  t1=$(date +%s.%N)
  kill -TERM "$CHILD"
  wait "$CHILD" || true
  CHILD=
  [ -f "$final/model.safetensors" ] || { echo "ablation: $1 seed $2: no final model in $final" >&2; exit 1; }
  score "$final" "$dir/eval.json" "$2"
  write_done "$dir" "$(echo "$t1 - $t0" | bc)" "$(train_seconds "$dir/checkpoints/metrics.jsonl")" "$STEPS"
}

run_control() {  # seed
  local dir="$ABL_DIR/sft-control/s$1" budget t0 t1
  [ -f "$dir/done.json" ] && return 0
  budget=$(python3 -c 'import json,sys,statistics
print(statistics.median(json.load(open(f))["train_s"] for f in sys.argv[1:]))' "$ABL_DIR/$DAPO_ROW"/s*/done.json)
  rm -rf "$dir"
  mkdir -p "$dir"
  echo "ablation: SFT control seed $1, $budget s ($(date -u +%T))"
  t0=$(date +%s.%N)
  child "$bin/dapo-sft" --config configs/ablation/1-naive-grpo.yaml data.tokenizer=data/tokenizers/tiny \
      --model "$ABL_DIR/base-model" --data "$ABL_DIR/data/train.jsonl" --out "$dir/model" --steps 100000 \
      --batch 128 --lr 5e-4 --warmup 0 --weight-decay 0.01 --beta2 0.95 --log-every 25 --seed "$1" \
      --max-time "$budget" > "$dir/sft.log" 2>&1 \
      || { echo "ablation: SFT control seed $1 failed; see $dir/sft.log" >&2; exit 1; }
  t1=$(date +%s.%N)
  score "$dir/model" "$dir/eval.json" "$1"
  write_done "$dir" "$(echo "$t1 - $t0" | bc)" "$budget" \
      "$(sed -n 's/.*stopping at step \([0-9]*\).*/\1/p' "$dir/sft.log" | tail -1)"
}

for s in $SEEDS; do
  for r in "${ROWS[@]}"; do run_row "$r" "$s"; done
done
for s in $SEEDS; do run_control "$s"; done
python3 tools/ablation/report.py --dir "$ABL_DIR" --steps "$STEPS" \
    --command "SEEDS=\"$SEEDS\" STEPS=$STEPS make ablation" --out docs/ablation.md --img docs/img
echo "ablation: wrote docs/ablation.md"
