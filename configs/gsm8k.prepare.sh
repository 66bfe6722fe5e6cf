#!/usr/bin/env bash
# configs/gsm8k.prepare.sh: the GSM8K run's base model, made into RUN_DIR and cached there (deploy/local/run.sh calls
# it): configs/gsm8k-model warm-started by SFT on the GSM8K training solutions (extra_info.solution, with the final
# "#### N" line rewritten as "Answer: N", the form the math_dapo verifier reads).
set -euo pipefail
: "${RUN_DIR:?RUN_DIR must be set}"
BUILD=${BUILD:-build}
bin="$BUILD/bin"
SFT_STEPS=${SFT_STEPS:-300}
mkdir -p "$RUN_DIR/data" "$RUN_DIR/logs"
if [ ! -s "$RUN_DIR/data/gsm8k-sft.jsonl" ]; then
  sed 's/\\n#### \([-0-9.,]*\)"/\\nAnswer: \1"/' data/gsm8k-train.jsonl > "$RUN_DIR/data/gsm8k-sft.jsonl.tmp"
  mv "$RUN_DIR/data/gsm8k-sft.jsonl.tmp" "$RUN_DIR/data/gsm8k-sft.jsonl"
fi
if [ ! -f "$RUN_DIR/base-model/model.safetensors" ]; then
  echo "dapo: SFT of the GSM8K base model ($SFT_STEPS steps; log in $RUN_DIR/logs/sft.log)"
  rm -rf "$RUN_DIR/base-model.tmp"
  "$bin/dapo-sft" --config configs/gsm8k.yaml --model configs/gsm8k-model --data "$RUN_DIR/data/gsm8k-sft.jsonl" \
      --out "$RUN_DIR/base-model.tmp" --steps "$SFT_STEPS" --batch 32 --lr 1e-3 --warmup 30 --weight-decay 0.01 \
      --beta2 0.95 --log-every 25 --seed 1 2>&1 | tee "$RUN_DIR/logs/sft.log" | grep --line-buffered -E '"step": [0-9]*00,|ERROR' || true
  [ -f "$RUN_DIR/base-model.tmp/model.safetensors" ] || { echo "dapo: SFT failed; see $RUN_DIR/logs/sft.log" >&2; exit 1; }
  mv "$RUN_DIR/base-model.tmp" "$RUN_DIR/base-model"
fi
echo "actor_rollout_ref.model.path=$RUN_DIR/base-model" > "$RUN_DIR/overrides.txt"
