#!/usr/bin/env bash
# bench/train/run.sh: training tokens/s (forward + fused log-prob/entropy + backward + grad clip + AdamW) and
# prefill tokens/s of our CPU model core beside transformers' Qwen2ForCausalLM + torch.optim.AdamW (fp32,
# eager, 2 threads, tuned per /work/shared/PERF.md), same random weights, same token shapes, same run,
# medians after warm-up. Configs of issue 4: tiny (V512 H256 L4 8/2 heads I704, 16 x 256 tokens) and
# small (V4096 H512 L8 8/2 heads I1408, 4 x 512 tokens). Also GFLOP/s against the ~306 GFLOP/s fp32
# sgemm ceiling of PERF.md (training flops/token = 6 x matmul params + 6 x L x T x qd causal attention).
# Last line: BENCH train ours=<small train tok/s> baseline=<tok/s> ratio=<ours/baseline>
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
BUILD=${BUILD:-build}
STEPS=${STEPS:-5}
WARMUP=${WARMUP:-2}

if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  if grep -qw avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX
  elif grep -qw avx2 /proc/cpuinfo; then export OPENBLAS_CORETYPE=Haswell; fi
fi
# PERF.md's fair settings, for both sides (never overriding what the caller set)
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE} OPENBLAS_THREAD_TIMEOUT=${OPENBLAS_THREAD_TIMEOUT:-4}
export MALLOC_MMAP_THRESHOLD_=${MALLOC_MMAP_THRESHOLD_:-4294967296} MALLOC_TRIM_THRESHOLD_=${MALLOC_TRIM_THRESHOLD_:-4294967296}
export MALLOC_TOP_PAD_=${MALLOC_TOP_PAD_:-1073741824}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-2}
echo "env: OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-} OMP_WAIT_POLICY=$OMP_WAIT_POLICY OPENBLAS_THREAD_TIMEOUT=$OPENBLAS_THREAD_TIMEOUT" \
     "OMP_NUM_THREADS=$OMP_NUM_THREADS MALLOC_MMAP_THRESHOLD_=$MALLOC_MMAP_THRESHOLD_ MALLOC_TRIM_THRESHOLD_=$MALLOC_TRIM_THRESHOLD_" \
     "MALLOC_TOP_PAD_=$MALLOC_TOP_PAD_"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -f "$BUILD/lib/libdapo.a" ] || make -s -j2 BUILD="$BUILD" "$BUILD/lib/libdapo.a"
CFLAGS="-O2 -g -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fopenmp -I. -Icommon -I/usr/include/x86_64-linux-gnu/openblas-pthread $(pkg-config --cflags jansson)"
gcc $CFLAGS bench/train/bench_train.c "$BUILD/lib/libdapo.a" $(pkg-config --libs jansson) -lopenblas -lpthread -lm -fopenmp \
    -o "$tmp/bench_train"

declare -A ours_train ours_pre base_train base_pre
for cfg in tiny small; do
  if [ "$cfg" = tiny ]; then B=16; T=256; else B=4; T=512; fi
  python3 bench/train/baseline_torch.py --make-model "$tmp/$cfg" --config "$cfg"
  echo "== $cfg: ours (C, OpenBLAS + OpenMP), $B x $T tokens"
  "$tmp/bench_train" --model "$tmp/$cfg" --batch $B --seq $T --steps "$STEPS" --warmup "$WARMUP" 2>&1 | grep -v ' INFO ' | tee "$tmp/ours_$cfg.txt"
  echo "== $cfg: baseline (transformers Qwen2ForCausalLM + torch.optim.AdamW), $B x $T tokens"
  python3 bench/train/baseline_torch.py --model "$tmp/$cfg" --batch $B --seq $T --steps "$STEPS" --warmup "$WARMUP" | tee "$tmp/base_$cfg.txt"
  ours_train[$cfg]=$(sed -n 's/^OURS_TRAIN_TOK_S=//p' "$tmp/ours_$cfg.txt")
  ours_pre[$cfg]=$(sed -n 's/^OURS_PREFILL_TOK_S=//p' "$tmp/ours_$cfg.txt")
  base_train[$cfg]=$(sed -n 's/^BASE_TRAIN_TOK_S=//p' "$tmp/base_$cfg.txt")
  base_pre[$cfg]=$(sed -n 's/^BASE_PREFILL_TOK_S=//p' "$tmp/base_$cfg.txt")
  python3 - "$cfg" "$T" "${ours_train[$cfg]}" "${base_train[$cfg]}" "${ours_pre[$cfg]}" "${base_pre[$cfg]}" <<'EOF'
import sys
cfg, T = sys.argv[1], int(sys.argv[2])
ot, bt, op, bp = map(float, sys.argv[3:7])
V, H, L, nh, nkv, I = (512, 256, 4, 8, 2, 704) if cfg == "tiny" else (4096, 512, 8, 8, 2, 1408)
hd = H // nh
mat = L * (H * (nh * hd + 2 * nkv * hd) + nh * hd * H + 3 * H * I) + V * H   # matmul params incl. lm_head
att = L * T * nh * hd                                                    # causal: 2*T*qd/2 per fwd matmul pair
train_f, pre_f = 6 * mat + 6 * att, 2 * mat + 2 * att
ceil = 306.0
print(f"{cfg}: train   ours {ot:9.1f} tok/s ({ot * train_f / 1e9:6.1f} GFLOP/s, {ot * train_f / 1e9 / ceil:.2f} of sgemm ceiling)"
      f"  baseline {bt:9.1f} tok/s ({bt * train_f / 1e9:6.1f} GFLOP/s)  ratio {ot / bt:.2f}")
print(f"{cfg}: prefill ours {op:9.1f} tok/s ({op * pre_f / 1e9:6.1f} GFLOP/s, {op * pre_f / 1e9 / ceil:.2f} of sgemm ceiling)"
      f"  baseline {bp:9.1f} tok/s ({bp * pre_f / 1e9:6.1f} GFLOP/s)  ratio {op / bp:.2f}")
EOF
done
ratio=$(python3 -c "print(f'{${ours_train[small]} / ${base_train[small]}:.2f}')")
echo "BENCH train ours=${ours_train[small]} baseline=${base_train[small]} ratio=$ratio"
