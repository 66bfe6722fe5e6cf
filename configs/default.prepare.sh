#!/usr/bin/env bash
# configs/default.prepare.sh: what the default run needs beyond the repository, made into RUN_DIR and cached there
# (deploy/local/run.sh calls it before launching):
#   RUN_DIR/data/arith-{train,test}.jsonl   the task (tools/dapo-gen-arith: 20,000 training and 500 held-out problems)
#   RUN_DIR/base-model/                     the tiny model (configs/tiny-model) warm-started by SFT on the worked
#                                           solutions (dapo-sft), so that its held-out accuracy starts between 5% and
#                                           50%: dynamic sampling needs groups with mixed accuracy.
# SFT settings follow docs/tiny-recipe.md (128 sequences per step, AdamW lr 1e-3, betas 0.9/0.95, wd 0.01,
# 50 warm-up steps). It stops at the first evaluation whose held-out greedy accuracy reaches SFT_STOP_ACC (0.35: the
# recipe's prototype started RL from 37% greedy / 25.6% mean@4; a weaker start, 21.5% greedy / 13.4% mean@4, climbed
# less than half as fast). Greedy accuracy jumps late in SFT, and where it crosses 0.35 depends on the CPU's rounding
# (the same seed: 38.5% at step 525 on the machine of README's table; 40.0% at step 475 on an AVX-512 Xeon at d35968d;
# on an AVX2-only AMD EPYC (family 23, Zen 1) at f00ce06 34.5% at 500, 33.0% at 525, 34.0% at 550, then 52.5% at 575, where it
# stopped — a stronger base model: mean@4 37.9% at RL step 0 against the table's 24.5%).
# Writes the config overrides that point at these files to RUN_DIR/overrides.txt. PREPARE_MODEL=0 (run.sh sets it
# when the command line names actor_rollout_ref.model.path) skips the base model.
set -euo pipefail
: "${RUN_DIR:?RUN_DIR must be set}"
BUILD=${BUILD:-build}
bin="$BUILD/bin"
SFT_STEPS=${SFT_STEPS:-1500}
SFT_STOP_ACC=${SFT_STOP_ACC:-0.35}
mkdir -p "$RUN_DIR/data"
if [ ! -s "$RUN_DIR/data/arith-train.jsonl" ] || [ ! -s "$RUN_DIR/data/arith-test.jsonl" ]; then
  "$bin/dapo-gen-arith" --split train --n 20000 --seed 1 > "$RUN_DIR/data/arith-train.jsonl.tmp"
  "$bin/dapo-gen-arith" --split test --n 500 --seed 2 > "$RUN_DIR/data/arith-test.jsonl.tmp"
  mv "$RUN_DIR/data/arith-train.jsonl.tmp" "$RUN_DIR/data/arith-train.jsonl"
  mv "$RUN_DIR/data/arith-test.jsonl.tmp" "$RUN_DIR/data/arith-test.jsonl"
  echo "dapo: task data in $RUN_DIR/data"
fi
if [ "${PREPARE_MODEL:-1}" = 1 ] && [ ! -f "$RUN_DIR/base-model/model.safetensors" ]; then
  echo "dapo: warm-starting the base model with SFT (at most $SFT_STEPS steps; log in $RUN_DIR/logs/sft.log)"
  mkdir -p "$RUN_DIR/logs"
  # An interrupted SFT resumes from its last checkpoint (every 25 steps, exact: the data cursor is in it).
  [ -d "$RUN_DIR/base-model.tmp/checkpoints" ] && echo "dapo: resuming the interrupted SFT"
  "$bin/dapo-sft" --config configs/default.yaml data.tokenizer=data/tokenizers/tiny --model configs/tiny-model \
      --data "$RUN_DIR/data/arith-train.jsonl" --val "$RUN_DIR/data/arith-test.jsonl" --out "$RUN_DIR/base-model.tmp" \
      --steps "$SFT_STEPS" --batch 128 --lr 1e-3 --warmup 50 --weight-decay 0.01 --beta2 0.95 \
      --eval-every 25 --eval-max 200 --stop-acc "$SFT_STOP_ACC" --log-every 25 --seed 1 \
      --save-every 25 --resume trainer.max_actor_ckpt_to_keep=1 \
      2>&1 | tee -a "$RUN_DIR/logs/sft.log" | grep --line-buffered -E 'val/greedy_acc|stopping|resumed|ERROR' || true
  [ -f "$RUN_DIR/base-model.tmp/model.safetensors" ] || { echo "dapo: SFT failed; see $RUN_DIR/logs/sft.log" >&2; exit 1; }
  rm -rf "$RUN_DIR/base-model.tmp/checkpoints"
  mv "$RUN_DIR/base-model.tmp" "$RUN_DIR/base-model"
fi
cat > "$RUN_DIR/overrides.txt" <<EOT
data.train_files=$RUN_DIR/data/arith-train.jsonl
data.val_files=$RUN_DIR/data/arith-test.jsonl
actor_rollout_ref.model.path=$RUN_DIR/base-model
EOT
