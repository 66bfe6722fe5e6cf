#!/usr/bin/env bash
# tests/check_docs_test.sh: tests/check_docs.sh catches what it must: in a planted repository, a C comment citing a
# Markdown file that does not exist, then one that is empty, fails and is named; once the file has content, it passes.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
git -C "$t" init -q
mkdir -p "$t/common/core" "$t/docs"
echo '/* common/core/x.c: see docs/planted.md section 2 */' > "$t/common/core/x.c"
git -C "$t" add -A
out=$("$here/check_docs.sh" "$t") && { echo "FAIL: a missing docs/planted.md passed"; exit 1; }
grep -q "common/core/x.c:1: docs/planted.md" <<<"$out" || { echo "FAIL: not named: $out"; exit 1; }
: > "$t/docs/planted.md"
"$here/check_docs.sh" "$t" > /dev/null && { echo "FAIL: an empty docs/planted.md passed"; exit 1; }
echo "the design" > "$t/docs/planted.md"
"$here/check_docs.sh" "$t" || { echo "FAIL: an existing docs/planted.md was refused"; exit 1; }
echo "check_docs: a missing and an empty cited file are caught and named; an existing one passes"
