#!/usr/bin/env bash
# bench/gpu/make_bundle.sh (`make gpu-bundle`, after a CUDA build into $BUILD): packs what the GPU check runs into
# $BUNDLE_DIR (default bundle/, git-ignored), for a GPU host that has an NVIDIA driver, the CUDA 13 runtime, PyTorch
# and python3 but none of this build's Debian -dev packages, no compiler and no network (issue 34):
#   bundle/dapo-gpu.tar.xz   dapo-gpu/bin/     the daemons and tools bench/gpu_check.sh runs (debug info stripped)
#                            dapo-gpu/tests/   test_backend_conformance
#                            dapo-gpu/lib/     every shared library ldd lists for them, but glibc's (libc, libm,
#                                              libpthread, libdl, librt, libresolv, libutil, ld-linux) and CUDA's or
#                                              the driver's (libcudart, libcublas, libcublasLt, libnccl, libcuda,
#                                              libnvidia-*): those the GPU host has, and libcublasLt alone is 541 MB
#                            dapo-gpu/MANIFEST the commit, the newest glibc the files need, the files, their sizes
#   bundle/run.sh            bench/gpu/bundle_run.sh: unpacks, finds the CUDA libraries, runs bench/gpu_check.sh
# The repository's tracked tree travels beside it (configs, tokenizers, test fixtures; the base model is made there
# with dapo-init-model). Fails when the archive is over BUNDLE_MAX_MIB (28) or the tree + bundle over 64 MiB (what
# the device tool carries). BUNDLE_LEAVE_OUT=libname.so.N leaves one library out (the clean-root test's test of
# itself). Needs xz and ldd.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
BUILD=${BUILD:-build}
OUT=${BUNDLE_DIR:-bundle}
MAX_MIB=${BUNDLE_MAX_MIB:-28}
BINS=(dapo-gpu-check dapo-coordinator dapo-learner dapo-rollout dapo-verifier dapo-supervise dapo-init-model
      dapo-gen-arith dapo-logprobs dapo-generate)
TESTS=(test_backend_conformance)
for b in "${BINS[@]}"; do [ -x "$BUILD/bin/$b" ] || { echo "make_bundle: $BUILD/bin/$b is missing" >&2; exit 2; }; done
for t in "${TESTS[@]}"; do [ -x "$BUILD/tests/$t" ] || { echo "make_bundle: $BUILD/tests/$t is missing" >&2; exit 2; }; done
"$BUILD/bin/dapo-gpu-check" --help > /dev/null
if ldd "$BUILD/bin/dapo-learner" | grep -q libcudart; then :; else
  echo "make_bundle: $BUILD is not a CUDA build (dapo-learner does not link libcudart): make CUDA=1" >&2; exit 2
fi
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
d="$stage/dapo-gpu"
mkdir -p "$d/bin" "$d/tests" "$d/lib"
for b in "${BINS[@]}"; do strip --strip-debug -o "$d/bin/$b" "$BUILD/bin/$b"; done
for t in "${TESTS[@]}"; do strip --strip-debug -o "$d/tests/$t" "$BUILD/tests/$t"; done
# the libraries: ldd's closure of every binary, without glibc's and CUDA's
skip='^(libc|libm|libpthread|libdl|librt|libresolv|libutil|ld-linux-x86-64|libcudart|libcublas|libcublasLt|libnccl|libcuda|libnvidia-[a-z-]+)\.so'
missing=$(for f in "$d"/bin/* "$d"/tests/*; do ldd "$f"; done | awk '/not found/{print $1}' | sort -u)
[ -z "$missing" ] || { echo "make_bundle: ldd finds no $missing here" >&2; exit 1; }
for f in "$d"/bin/* "$d"/tests/*; do ldd "$f"; done | awk '/=> \//{print $1, $3}' | sort -u |
while read -r name path; do
  [[ $name =~ $skip ]] && continue
  [ "${BUNDLE_LEAVE_OUT:-}" = "$name" ] && { echo "make_bundle: leaving $name out (BUNDLE_LEAVE_OUT)"; continue; }
  cp -L "$path" "$d/lib/$name"
  strip --strip-unneeded "$d/lib/$name" 2>/dev/null || true
done
{
  echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- . 2>/dev/null || echo +dirty)"
  echo "built $(date -u +%FT%TZ) on $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), glibc $(getconf GNU_LIBC_VERSION | awk '{print $2}')"
  # the newest glibc symbol version any bundled file needs: bundle/run.sh refuses an older host glibc up front
  echo "glibc $(objdump -T "$d"/bin/* "$d"/tests/* "$d"/lib/* 2>/dev/null | grep -oE 'GLIBC_[0-9]+\.[0-9]+' |
                sed 's/GLIBC_//' | sort -uV | tail -1)"
  (cd "$d" && find bin tests lib -type f -printf '%s %p\n' | sort -k2)
} > "$d/MANIFEST"
mkdir -p "$OUT"
raw=$(du -sb "$d" | cut -f1)
tar -C "$stage" -cf - dapo-gpu | xz -9 -T"$(nproc)" > "$OUT/dapo-gpu.tar.xz.tmp"
mv "$OUT/dapo-gpu.tar.xz.tmp" "$OUT/dapo-gpu.tar.xz"
cp bench/gpu/bundle_run.sh "$OUT/run.sh"
chmod +x "$OUT/run.sh"
rm -rf "$OUT/unpacked"                                   # a stale unpack of an older archive
size=$(stat -c %s "$OUT/dapo-gpu.tar.xz")
tree=$(git ls-files -z | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
printf 'gpu-bundle: %s/dapo-gpu.tar.xz %.1f MiB (%.1f MiB unpacked: %d binaries, %d tests, %d libraries)\n' "$OUT" \
  "$(echo "$size / 1048576" | bc -l)" "$(echo "$raw / 1048576" | bc -l)" "${#BINS[@]}" "${#TESTS[@]}" \
  "$(ls "$d/lib" | wc -l)"
printf 'gpu-bundle: tracked tree %.1f MiB + bundle = %.1f MiB (the device tool carries 64 MiB)\n' \
  "$(echo "$tree / 1048576" | bc -l)" "$(echo "($tree + $size) / 1048576" | bc -l)"
[ "$size" -le $((MAX_MIB * 1048576)) ] || { echo "gpu-bundle: over $MAX_MIB MiB" >&2; exit 1; }
[ $((tree + size)) -le $((64 * 1048576)) ] || { echo "gpu-bundle: tree + bundle over 64 MiB" >&2; exit 1; }
