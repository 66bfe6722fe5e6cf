#!/usr/bin/env bash
# bench/compare_commits.sh OLD_TREE NEW_TREE: `make bench-train` / `make bench-generate`'s own programs built from two
# checkouts (each against its own build/lib/libdapo.a) and run alternately on the same random models in one run, so
# a refactor's speed is compared under the same load: ROUNDS rounds of (old, new) for the small config's training
# and prefill step and for generation at batch 16. Prints the medians and the new/old ratios.
# Last lines: BENCH refactor_train ours=<new tok/s> baseline=<old tok/s> ratio=<new/old>, the same for generate.
set -euo pipefail
old=$(cd "$1" && pwd); new=$(cd "$2" && pwd)
ROUNDS=${ROUNDS:-3}
cd "$new"
. bench/env.sh
echo "cpu: $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); load $(cut -d' ' -f1-3 /proc/loadavg)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for side in old new; do
  t=${!side}
  CFLAGS="-O2 -g -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fopenmp -I$t -I$t/common -I/usr/include/x86_64-linux-gnu/openblas-pthread $(pkg-config --cflags jansson)"
  for b in train generate; do
    gcc $CFLAGS "$t/bench/$b/bench_$b.c" "$t/build/lib/libdapo.a" $(pkg-config --libs jansson) -lopenblas -lpthread -lm \
        -fopenmp -o "$tmp/${b}_$side"
  done
done
python3 bench/train/baseline_torch.py --make-model "$tmp/small" --config small 2>/dev/null
for r in $(seq "$ROUNDS"); do
  for side in old new; do
    "$tmp/train_$side" --model "$tmp/small" --batch 4 --seq 512 --steps 4 --warmup 1 2>&1 | grep STEP_S | sed "s/^/$side /" >> "$tmp/train.txt"
    "$tmp/generate_$side" --model "$tmp/small" --batch 16 --steps 3 --warmup 1 2>&1 | grep OURS_GEN_TOK_S | sed "s/^/$side /" >> "$tmp/gen.txt"
  done
  echo "round $r/$ROUNDS done"
done
python3 - "$tmp/train.txt" "$tmp/gen.txt" <<'PY'
import statistics, sys
def med(path, side, key):
    return statistics.median(float(l.split("=")[1]) for l in open(path) if l.startswith(f"{side} {key}="))
N = 4 * 512
for key in ("TRAIN_STEP_S", "PREFILL_STEP_S"):
    o, n = N / med(sys.argv[1], "old", key), N / med(sys.argv[1], "new", key)
    print(f"small {key[:-7].lower():8s} tok/s: old {o:8.1f}  new {n:8.1f}  new/old {n / o:.3f}")
go, gn = med(sys.argv[2], "old", "OURS_GEN_TOK_S"), med(sys.argv[2], "new", "OURS_GEN_TOK_S")
print(f"small generate b16 tok/s: old {go:8.1f}  new {gn:8.1f}  new/old {gn / go:.3f}")
to, tn = N / med(sys.argv[1], "old", "TRAIN_STEP_S"), N / med(sys.argv[1], "new", "TRAIN_STEP_S")
print(f"BENCH refactor_train ours={tn:.1f} baseline={to:.1f} ratio={tn / to:.3f}")
print(f"BENCH refactor_generate ours={gn:.1f} baseline={go:.1f} ratio={gn / go:.3f}")
PY
