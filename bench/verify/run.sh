#!/usr/bin/env bash
# bench/verify/run.sh: math_dapo scoring throughput, ours (common/reward, C) beside verl's own
# math_dapo.compute_score (Python), same cases (tests/data/verifier/cases.jsonl.zst, 4,283), same run, one
# core each (pinned with taskset when available), JSON parsing excluded on both sides. Headline figure:
# corpus cases / median time of a full single-threaded pass over all cases (very_long ones included).
# verl 0.8.0 is pip-installed with --no-deps into a private --target directory (outside the repository:
# $DAPO_VERL_MATH_DIR, default ~/.cache/dapo/verl-0.8.0-nodeps, shared with
# tests/reference/make_verifier_random.py) and only its math_dapo.py file is imported.
# Then the Python reward path (custom_reward_function) beside a plain Python loop: two BENCH verify-python* lines.
# Last line: BENCH verify ours=<cases/s> baseline=<cases/s> ratio=<ours/baseline>
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
BUILD=${BUILD:-build}
MIN_SECONDS=${MIN_SECONDS:-3}
VERL_VERSION=0.8.0

if [ -z "${OPENBLAS_CORETYPE:-}" ]; then   # project convention; this benchmark does no BLAS work
  if grep -qw avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX
  elif grep -qw avx2 /proc/cpuinfo; then export OPENBLAS_CORETYPE=Haswell; fi
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
zstd -q -dc tests/data/verifier/cases.jsonl.zst > "$tmp/cases.jsonl"

# Same compiler flags as the Makefile; link the library the build made, else the few sources it needs.
CFLAGS="-O2 -g -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -I. -Icommon $(pkg-config --cflags jansson)"
if [ -f "$BUILD/lib/libdapo.a" ]; then
  objs="$BUILD/lib/libdapo.a"
else
  echo "note: $BUILD/lib/libdapo.a not found; compiling common/reward and common/core/{err,log}.c directly"
  objs="common/reward/math_dapo.c common/reward/reward.c common/core/err.c common/core/log.c"
fi
gcc $CFLAGS bench/verify/bench_verify.c $objs $(pkg-config --libs jansson) -lopenblas -lpthread -lm \
    -o "$tmp/bench_verify"

pin=()
if command -v taskset >/dev/null 2>&1; then pin=(taskset -c "$(( $(nproc) - 1 ))"); fi
echo "== ours: common/reward (C, gcc -O2), ${pin[*]:-unpinned}"
"${pin[@]}" "$tmp/bench_verify" "$tmp/cases.jsonl" --min-seconds "$MIN_SECONDS" | tee "$tmp/ours.txt"

verl_dir=${DAPO_VERL_MATH_DIR:-$HOME/.cache/dapo/verl-$VERL_VERSION-nodeps}
if [ ! -f "$verl_dir/verl/utils/reward_score/math_dapo.py" ]; then
  echo "== installing verl==$VERL_VERSION --no-deps into $verl_dir"
  pip install -q --no-deps --target "$verl_dir" "verl==$VERL_VERSION"
fi
echo "== baseline: verl $VERL_VERSION math_dapo.compute_score (Python), ${pin[*]:-unpinned}"
"${pin[@]}" python3 bench/verify/baseline_verl.py --verl-dir "$verl_dir" "$tmp/cases.jsonl" \
    --min-seconds "$MIN_SECONDS" | tee "$tmp/base.txt"

# The Python reward path (custom_reward_function): the verifier's pool of python3 workers (bench_pyreward, the same
# scoring.c the daemon runs) beside verl's naive reward manager (one process, a plain loop), same function, same items.
# First verl's CPU-bound math_dapo.compute_score (2 cores cap it), then a function that sleeps 10 ms (waiting, as an
# HTTP or sandbox call does), where throughput follows reward_model.num_workers.
export DAPO_VERL_MATH_DIR=$verl_dir DAPO_SLEEP_MS=10
nproc_=$(nproc)
echo "== python reward path: verl math_dapo.compute_score as custom_reward_function, all cases"
python3 bench/verify/baseline_loop.py bench/verify/verl_math_dapo_reward.py "$tmp/cases.jsonl" \
    --min-seconds "$MIN_SECONDS" | tee "$tmp/pyloop.txt"
"$BUILD/bench/bench_pyreward" "$tmp/cases.jsonl" --reward bench/verify/verl_math_dapo_reward.py \
    --workers "1,$nproc_" --passes 3 | tee "$tmp/pypool.txt"
echo "== python reward path: a reward that sleeps ${DAPO_SLEEP_MS} ms per item, 400 items"
python3 bench/verify/baseline_loop.py bench/verify/sleep_reward.py "$tmp/cases.jsonl" --limit 400 \
    --min-seconds 0 | tee "$tmp/sleeploop.txt"
"$BUILD/bench/bench_pyreward" "$tmp/cases.jsonl" --reward bench/verify/sleep_reward.py --workers 1,2,4,8,16 \
    --limit 400 --passes 3 | tee "$tmp/sleeppool.txt"
py_ours=$(sed -n "s/^OURS_ITEMS_PER_S_$nproc_=//p" "$tmp/pypool.txt")
py_base=$(sed -n 's/^BASE_ITEMS_PER_S=//p' "$tmp/pyloop.txt")
sl_ours=$(sed -n 's/^OURS_ITEMS_PER_S_16=//p' "$tmp/sleeppool.txt")
sl_base=$(sed -n 's/^BASE_ITEMS_PER_S=//p' "$tmp/sleeploop.txt")
echo "BENCH verify-python ours=$py_ours baseline=$py_base ratio=$(python3 -c "print(f'{$py_ours / $py_base:.2f}')")" \
     "(verl math_dapo, $nproc_ workers vs one loop)"
echo "BENCH verify-python-sleep ours=$sl_ours baseline=$sl_base ratio=$(python3 -c "print(f'{$sl_ours / $sl_base:.1f}')")" \
     "(10 ms sleep, 16 workers vs one loop)"

ours=$(sed -n 's/^OURS_CASES_PER_S=//p' "$tmp/ours.txt")
base=$(sed -n 's/^BASE_CASES_PER_S=//p' "$tmp/base.txt")
ratio=$(python3 -c "print(f'{$ours / $base:.1f}')")
echo "BENCH verify ours=$ours baseline=$base ratio=$ratio"
