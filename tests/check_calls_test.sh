#!/usr/bin/env bash
# tests/check_calls_test.sh: the check of tests/check_calls.sh. Compiles three files a -> b -> c (no cycle: passes),
# then plants a back-call c -> a (a cycle of three: fails, naming a, b, c and the planted symbol), then a folder
# with no object files (exit 2). Run by tests/run.sh (make test).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "check_calls_test: $*"; exit 1; }
mk() {  # dir, name, body
  mkdir -p "$1"
  printf '%s\n' "$3" > "$1/$2.c"
  cc -c -o "$1/$2.o" "$1/$2.c" || fail "cannot compile $2.c"
  rm "$1/$2.c"
}
mk "$tmp/ok" a 'int b_fn(int); int a_fn(int x) { return b_fn(x) + 1; }'
mk "$tmp/ok" b 'int c_fn(int); int b_fn(int x) { return c_fn(x) * 2; }'
mk "$tmp/ok" c 'int c_fn(int x) { return x - 3; }'
mk "$tmp/ok" d 'static int lone(int x) { return x; } int d_fn(int x) { return lone(x); }'
out=$("$root/tests/check_calls.sh" "$tmp/ok"); rc=$?
[ "$rc" -eq 0 ] || fail "a -> b -> c is not a cycle, but the check said (exit $rc): $out"
grep -q 'no circle of files' <<<"$out" || fail "no verdict printed: $out"
grep -q '2 arrows among 4 files' <<<"$out" || fail "expected 2 arrows among 4 files: $out"

cp "$tmp/ok"/*.o "$tmp" && mkdir -p "$tmp/bad" && mv "$tmp"/*.o "$tmp/bad/"
mk "$tmp/bad" c 'int a_fn(int); int c_fn(int x) { return x > 0 ? a_fn(x - 1) : 0; }'   # the planted back-call
out=$("$root/tests/check_calls.sh" "$tmp/bad"); rc=$?
[ "$rc" -eq 1 ] || fail "the planted c -> a back-call was not caught (exit $rc): $out"
grep -q 'cycle of 3 files: a b c$' <<<"$out" || fail "the cycle a b c is not named: $out"
grep -q 'cycle of .*d' <<<"$out" && fail "d is in no cycle but was named: $out"
grep -q 'c -> a  a_fn' <<<"$out" || fail "the planted arrow c -> a (a_fn) is not shown: $out"

mkdir -p "$tmp/empty"
"$root/tests/check_calls.sh" "$tmp/empty" > /dev/null 2>&1; rc=$?
[ "$rc" -eq 2 ] || fail "an empty folder gave exit $rc, not 2"
echo "check_calls_test: no cycle passes, a planted back-call fails naming its files and arrow, no objects exit 2"
