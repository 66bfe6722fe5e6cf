#!/usr/bin/env bash
# Runs every test: the include-rule check (tests/check_layers.sh), the cited-docs check (tests/check_docs.sh) and its
# test, the coordinator's call-graph check (tests/check_calls.sh) and its test (tests/check_calls_test.sh), each cmocka binary $BUILD/tests/test_* (and longtest_* when LONG=1), each fuzz target in
# $BUILD/fuzz for FUZZ_SECONDS.
# Prints one line per test program (a fuzz target's with libFuzzer's "Done N runs in S second(s)") and, last,
# "N passed, N failed" (programs). Exit 1 on any failure.
# TEST_FILTER=substring runs only the matching programs.
set -u
BUILD=${BUILD:-build}
FUZZ_SECONDS=${FUZZ_SECONDS:-10}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
logdir="$BUILD/test-logs"; mkdir -p "$logdir"
pass=0; fail=0; failed=()
run_one() {  # name, command...
  local name=$1; shift
  local t0=$(date +%s%N)
  if "$@" > "$logdir/$name.log" 2>&1; then
    pass=$((pass+1)); printf 'PASS  %-40s %6dms  %s\n' "$name" "$(( ($(date +%s%N) - t0) / 1000000 ))" "$(grep -E '^\[  PASSED  \]|^Done [0-9]+ runs' "$logdir/$name.log" | tail -1)"
  else
    fail=$((fail+1)); failed+=("$name")
    printf 'FAIL  %-40s (log: %s)\n' "$name" "$logdir/$name.log"
    # the cause first (cmocka's ERROR/LINE/FAILED lines), so a shortened CI excerpt still names it; then the tail
    grep -E '^\[  (ERROR|FAILED) +\]|^\[   LINE   \]' "$logdir/$name.log" | head -n 8 | sed 's/^/    ! /'
    tail -n 30 "$logdir/$name.log" | sed 's/^/    | /'
  fi
}
if [ -z "${TEST_FILTER:-}" ] || [[ check_layers == *"$TEST_FILTER"* ]]; then
  run_one check_layers tests/check_layers.sh      # the include rules (no upward include in common/)
fi
if [ -z "${TEST_FILTER:-}" ] || [[ check_docs == *"$TEST_FILTER"* ]]; then
  run_one check_docs tests/check_docs.sh          # every *.md that code and configs cite exists (issue 36)
fi
if [ -z "${TEST_FILTER:-}" ] || [[ check_docs_test == *"$TEST_FILTER"* ]]; then
  run_one check_docs_test tests/check_docs_test.sh   # the check catches a planted missing / empty file
fi
if [ -z "${TEST_FILTER:-}" ] || [[ check_calls_test == *"$TEST_FILTER"* ]]; then
  run_one check_calls_test tests/check_calls_test.sh   # the call-graph cycle check finds a planted back-call
fi
if [ -z "${TEST_FILTER:-}" ] || [[ check_calls == *"$TEST_FILTER"* ]]; then
  run_one check_calls env BUILD="$BUILD" tests/check_calls.sh   # no circle of files in services/coordinator
fi
for t in "$BUILD"/tests/test_*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  [ -n "${TEST_FILTER:-}" ] && [[ "$name" != *"$TEST_FILTER"* ]] && continue
  run_one "$name" env DAPO_ROOT="$root" DAPO_BUILD="$BUILD" "$t"
done
# issue 43: the batch- and worker-invariance tests again under each kernel family this CPU has below its best (the
# runs above use the best; DAPO_CPU_FAMILY forces one: common/backend/cpu/cpu_family.h)
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null)
has() { for f in "$@"; do [[ " $flags " == *" $f "* ]] || return 1; done; }
lesser=""
if has avx512f avx512vl avx512bw avx512dq avx2 fma; then lesser="generic avx2"; elif has avx2 fma; then lesser="generic"; fi
for fam in $lesser; do
  for t in test_model_packed test_generate test_generate_prefix test_model; do
    [ -x "$BUILD/tests/$t" ] || continue
    [ -n "${TEST_FILTER:-}" ] && [[ "$t@$fam" != *"$TEST_FILTER"* ]] && continue
    run_one "$t@$fam" env DAPO_ROOT="$root" DAPO_BUILD="$BUILD" DAPO_CPU_FAMILY="$fam" "$BUILD/tests/$t"
  done
done
if [ "${LONG:-0}" = 1 ]; then             # make check-long: the long tests too
  for t in "$BUILD"/tests/longtest_*; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    [ -n "${TEST_FILTER:-}" ] && [[ "$name" != *"$TEST_FILTER"* ]] && continue
    run_one "$name" env DAPO_ROOT="$root" DAPO_BUILD="$BUILD" "$t"
  done
fi
for f in "$BUILD"/fuzz/fuzz_*; do
  [ -x "$f" ] || continue
  name=$(basename "$f")
  [ -n "${TEST_FILTER:-}" ] && [[ "$name" != *"$TEST_FILTER"* ]] && continue
  corpus="tests/fuzz/corpus/${name#fuzz_}"
  work="$BUILD/fuzz-corpus/${name#fuzz_}"; mkdir -p "$work"
  run_one "$name" "$f" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="$logdir/$name-" "$work" $( [ -d "$corpus" ] && echo "$corpus" )
done
echo
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed"
if [ $((pass + fail)) -eq 0 ]; then         # a filter that matched nothing, or test programs not built
  echo "no test ran${TEST_FILTER:+ for TEST_FILTER=$TEST_FILTER} (build them first: make test-build)" >&2
  exit 1
fi
[ "$fail" -eq 0 ]
