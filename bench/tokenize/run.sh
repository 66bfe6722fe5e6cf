#!/usr/bin/env bash
# bench/tokenize/run.sh: encode throughput (MB/s of UTF-8 text) of our tokenizer with the Qwen3 tokenizer.json
# beside HF tokenizers (Python, one thread: Tokenizer.encode(text, add_special_tokens=False) one text at a
# time, and encode_batch with one thread; the baseline is the faster of the two medians, named in the output),
# same corpus, same run. Corpus: GSM8K train+test questions and answers and MATH-500 problems and solutions
# (data/, ~5 MB, 18,584 texts). REPS reps each (default 5), medians; rep 0 of both starts with an empty cache.
# The total token counts of both sides are printed and must be equal (exactness, see tests/unit/test_tokenizer.c).
# Last line: BENCH tokenize ours=<MB/s> baseline=<MB/s> ratio=<ours/baseline>
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
BUILD=${BUILD:-build}
REPS=${REPS:-5}
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  if grep -qw avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX
  elif grep -qw avx2 /proc/cpuinfo; then export OPENBLAS_CORETYPE=Haswell; fi
fi
export TOKENIZERS_PARALLELISM=false RAYON_NUM_THREADS=1
[ -x "$BUILD/bin/dapo-tokenize" ] || make -s -j2 BUILD="$BUILD" "$BUILD/bin/dapo-tokenize"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 bench/tokenize/corpus.py "$tmp/corpus.jsonl"
echo "== ours: $BUILD/bin/dapo-tokenize --bench (C, PCRE2 JIT, one thread)"
"$BUILD/bin/dapo-tokenize" --tokenizer data/tokenizers/qwen3 --bench "$tmp/corpus.jsonl" --reps "$REPS" | tee "$tmp/ours.txt"
echo "== baseline"
python3 bench/tokenize/hf_baseline.py data/tokenizers/qwen3 "$tmp/corpus.jsonl" "$REPS" | tee "$tmp/base.txt"
ours=$(sed -n 's/^ours_mbps=\([0-9.]*\).*/\1/p' "$tmp/ours.txt")
base=$(sed -n 's/^baseline_mbps=\([0-9.]*\).*/\1/p' "$tmp/base.txt")
tok_ours=$(sed -n 's/^ours_mbps=.* tokens=\([0-9]*\)/\1/p' "$tmp/ours.txt")
tok_base=$(sed -n 's/^baseline_mbps=.* tokens=\([0-9]*\)/\1/p' "$tmp/base.txt")
if [ "$tok_ours" != "$tok_base" ]; then echo "token counts differ: ours $tok_ours, HF $tok_base" >&2; exit 1; fi
echo "tokens: ours $tok_ours = HF $tok_base"
ratio=$(python3 -c "print(f'{$ours / $base:.2f}')")
echo "BENCH tokenize ours=$ours baseline=$base ratio=$ratio"
