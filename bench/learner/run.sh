#!/usr/bin/env bash
# bench/learner/run.sh: one learner rank's DAPO training step through the real engine (services/learner: old-log-prob
# pass + update = forward with fused log-prob/entropy + DAPO loss, backward, all-reduce over the CPU collective, grad
# clip, AdamW) for the tiny and small configs of the model issue, beside the tuned PyTorch training step of
# bench/train (transformers Qwen2ForCausalLM + torch.optim.AdamW, fp32, 2 threads, docs/performance.md settings), same random
# weights, same token shapes, same run, medians after warm-up. Prints step time, update tokens/s per rank and the
# share of forward / backward / optimizer / communication; with 2 ranks (one process each, 1 thread each) too.
# Last line: BENCH learner ours=<small update tok/s, 1 rank> baseline=<torch train tok/s> ratio=<ours/baseline>
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
BUILD=${BUILD:-build}
STEPS=${STEPS:-5}
WARMUP=${WARMUP:-2}

. bench/env.sh

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -x "$BUILD/bench/bench_learner" ]; then
  cp "$BUILD/bench/bench_learner" "$tmp/bench_learner"
else
  make -s -j2 BUILD="$BUILD" "$BUILD/lib/libdapo.a" "$BUILD/lib/libsvc_learner.a" >/dev/null
  PKGS="libzmq libprotobuf-c libfyaml jansson libpcre2-8 libutf8proc libxxhash libzstd libuv"
  CFLAGS="-O2 -g -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fopenmp -I. -Icommon -I$BUILD/gen -I/usr/include/x86_64-linux-gnu/openblas-pthread $(pkg-config --cflags $PKGS)"
  gcc $CFLAGS bench/learner/bench_learner.c "$BUILD/lib/libsvc_learner.a" "$BUILD/lib/libdapo.a" $(pkg-config --libs $PKGS) \
      -lopenblas -lpthread -lm -fopenmp -o "$tmp/bench_learner"
fi
cat > "$tmp/corename.c" <<'C'
#include <stdio.h>
char *openblas_get_corename(void);
int main(void) { printf("%s\n", openblas_get_corename()); return 0; }
C
gcc "$tmp/corename.c" -lopenblas -o "$tmp/corename" && echo "OpenBLAS kernel: $("$tmp/corename")"

declare -A ours base
for cfg in tiny small; do
  if [ "$cfg" = tiny ]; then B=16; T=256; else B=4; T=512; fi
  python3 bench/train/baseline_torch.py --make-model "$tmp/$cfg" --config "$cfg"
  echo "== $cfg: ours, 1 rank ($OMP_NUM_THREADS threads), $B x $T tokens"
  "$tmp/bench_learner" --model "$tmp/$cfg" --batch $B --seq $T --steps "$STEPS" --warmup "$WARMUP" 2>&1 | grep -v ' INFO ' | tee "$tmp/ours_$cfg.txt"
  ours[$cfg]=$(sed -n 's/^OURS_UPDATE_TOK_S=//p' "$tmp/ours_$cfg.txt")
  echo "== $cfg: ours, 2 ranks (1 thread each, CPU collective on loopback), $B x $T tokens per rank"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  for r in 0 1; do
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$tmp/bench_learner" --model "$tmp/$cfg" --batch $B --seq $T --steps "$STEPS" \
      --warmup "$WARMUP" --rank $r --world 2 --endpoint "tcp://127.0.0.1:$port" > "$tmp/ours2_${cfg}_$r.txt" 2>&1 &
  done
  wait
  grep -v ' INFO ' "$tmp/ours2_${cfg}_0.txt" "$tmp/ours2_${cfg}_1.txt" | sed 's/^[^:]*://'
  echo "== $cfg: baseline (transformers Qwen2ForCausalLM + torch.optim.AdamW), $B x $T tokens"
  python3 bench/train/baseline_torch.py --model "$tmp/$cfg" --batch $B --seq $T --steps "$STEPS" --warmup "$WARMUP" | tee "$tmp/base_$cfg.txt"
  base[$cfg]=$(sed -n 's/^BASE_TRAIN_TOK_S=//p' "$tmp/base_$cfg.txt")
  python3 -c "print(f'$cfg: update tok/s per rank ours ${ours[$cfg]} baseline ${base[$cfg]} ratio {${ours[$cfg]} / ${base[$cfg]}:.2f}')"
done
ratio=$(python3 -c "print(f'{${ours[small]} / ${base[small]}:.2f}')")
echo "BENCH learner ours=${ours[small]} baseline=${base[small]} ratio=$ratio"
