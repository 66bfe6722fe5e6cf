#!/usr/bin/env bash
# bench/train/run.sh: training tokens/s (forward + fused log-prob/entropy + backward + grad clip + AdamW) and
# prefill tokens/s of our CPU model core beside transformers' Qwen2ForCausalLM + torch.optim.AdamW (fp32,
# SDPA attention, as is and under torch.compile, the faster kept; 2 threads, tuned per docs/performance.md), same random
# weights, same token shapes, same run.
# Configs of issue 4: tiny (V512 H256 L4 8/2 heads I704, 16 x 256 tokens) and small (V4096 H512 L8 8/2
# heads I1408, 4 x 512 tokens). ROUNDS rounds alternate ours / baseline (so load from other processes hits
# both alike); each round takes STEPS timed steps after WARMUP; the figure is the median over all timed
# steps. Also GFLOP/s against the ~306 GFLOP/s fp32 sgemm ceiling of docs/performance.md (training flops/token =
# 6 x matmul params + 6 x L x T x qd for causal attention; prefill a third of that).
# Last line: BENCH train ours=<small train tok/s> baseline=<tok/s> ratio=<ours/baseline>
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
BUILD=${BUILD:-build}
STEPS=${STEPS:-4}
WARMUP=${WARMUP:-1}
ROUNDS=${ROUNDS:-2}
BASE_DTYPE=${BASE_DTYPE:-fp32}   # the baseline's precision: fp32, autocast-bf16 or bf16 (baseline_torch.py --dtype)

. bench/env.sh
echo "cpu: $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') (vendor $(grep -m1 '^vendor_id' /proc/cpuinfo | cut -d: -f2 | tr -d ' '))"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -f "$BUILD/lib/libdapo.a" ] || make -s -j2 BUILD="$BUILD" "$BUILD/lib/libdapo.a"
CFLAGS="-O2 -g -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fopenmp -I. -Icommon -I/usr/include/x86_64-linux-gnu/openblas-pthread $(pkg-config --cflags jansson)"
gcc $CFLAGS bench/train/bench_train.c "$BUILD/lib/libdapo.a" $(pkg-config --libs jansson) -lopenblas -lpthread -lm -fopenmp \
    -o "$tmp/bench_train"

for cfg in tiny small; do
  if [ "$cfg" = tiny ]; then B=16; T=256; else B=4; T=512; fi
  python3 bench/train/baseline_torch.py --make-model "$tmp/$cfg" --config "$cfg" 2>/dev/null
  : > "$tmp/ours_$cfg.txt"; : > "$tmp/base_$cfg.txt"
  for r in $(seq "$ROUNDS"); do
    echo "== $cfg round $r/$ROUNDS: ours (C, OpenBLAS + OpenMP), $B x $T tokens"
    "$tmp/bench_train" --model "$tmp/$cfg" --batch $B --seq $T --steps "$STEPS" --warmup "$WARMUP" 2>&1 \
        | grep -v ' INFO ' | tee -a "$tmp/ours_$cfg.txt" | grep -v STEP_S
    echo "== $cfg round $r/$ROUNDS: baseline (transformers Qwen2ForCausalLM + torch.optim.AdamW), $B x $T tokens"
    python3 bench/train/baseline_torch.py --dtype "$BASE_DTYPE" --model "$tmp/$cfg" --batch $B --seq $T --steps "$STEPS" --warmup "$WARMUP" 2>/dev/null \
        | tee -a "$tmp/base_$cfg.txt" | grep -v STEP_S
  done
  python3 - "$cfg" "$B" "$T" "$tmp/ours_$cfg.txt" "$tmp/base_$cfg.txt" "$tmp/result_$cfg.txt" <<'PY'
import statistics, sys
cfg, B, T, ours_f, base_f, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), *sys.argv[4:7]
def steps(path, key):
    return [float(l.split("=")[1]) for l in open(path) if l.startswith(key + "=")]
N = B * T
ot = N / statistics.median(steps(ours_f, "TRAIN_STEP_S")); bt = N / statistics.median(steps(base_f, "TRAIN_STEP_S"))
op = N / statistics.median(steps(ours_f, "PREFILL_STEP_S")); bp = N / statistics.median(steps(base_f, "PREFILL_STEP_S"))
V, H, L, nh, nkv, I = (512, 256, 4, 8, 2, 704) if cfg == "tiny" else (4096, 512, 8, 8, 2, 1408)
hd = H // nh
mat = L * (H * (nh * hd + 2 * nkv * hd) + nh * hd * H + 3 * H * I) + V * H   # matmul params incl. lm_head
att = L * T * nh * hd
train_f, pre_f = 6 * mat + 6 * att, 2 * mat + 2 * att
ceil = 306.0
n = len(steps(ours_f, "TRAIN_STEP_S"))
print(f"{cfg}: medians over {n} timed steps per side")
print(f"{cfg}: train   ours {ot:9.1f} tok/s ({ot * train_f / 1e9:6.1f} GFLOP/s, {ot * train_f / 1e9 / ceil:.2f} of sgemm ceiling)"
      f"  baseline {bt:9.1f} tok/s ({bt * train_f / 1e9:6.1f} GFLOP/s)  ratio {ot / bt:.2f}")
print(f"{cfg}: prefill ours {op:9.1f} tok/s ({op * pre_f / 1e9:6.1f} GFLOP/s, {op * pre_f / 1e9 / ceil:.2f} of sgemm ceiling)"
      f"  baseline {bp:9.1f} tok/s ({bp * pre_f / 1e9:6.1f} GFLOP/s)  ratio {op / bp:.2f}")
oc = N / statistics.median(steps(ours_f, "PREFILL_CPU_S")); bc = N / statistics.median(steps(base_f, "PREFILL_CPU_S"))
print(f"{cfg}: prefill per CPU-second (process CPU time, all threads; load-robust): ours {oc:9.1f} tok/s  "
      f"baseline {bc:9.1f} tok/s  ratio {oc / bc:.2f}")
open(out, "w").write(f"{ot:.1f} {bt:.1f} {op:.1f} {bp:.1f}\n")
PY
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
read -r ot bt op bp < "$tmp/result_small.txt"
ratio=$(python3 -c "print(f'{$ot / $bt:.2f}')")
echo "BENCH train ours=$ot baseline=$bt ratio=$ratio"
