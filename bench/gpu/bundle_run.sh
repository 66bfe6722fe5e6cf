#!/usr/bin/env bash
# bundle/run.sh (copied there by `make gpu-bundle` from bench/gpu/bundle_run.sh): the GPU check on a host with an
# NVIDIA driver and the CUDA 13 runtime but without this build's libraries or a compiler (issue 34). Run it from the
# repository's tree, where bundle/ sits:
#   bundle/run.sh [--cpu-only] [PART ...]        (parts: see bench/gpu_check.sh; default: all)
#   1. checks the host's glibc against the newest one the bundle's files need (MANIFEST "glibc": the build machine's,
#      2.36 for Debian 12); an older one (Ubuntu 22.04: 2.35) stops here, saying so;
#   2. unpacks bundle/dapo-gpu.tar.xz into BUNDLE_UNPACK (default bundle/unpacked/; xz, else python3's lzma),
#      unless that holds an unpacking of this very archive (its checksum is kept in dapo-gpu/SOURCE);
#   3. finds the CUDA libraries the binaries need — libcudart.so.13, libcublas.so.13, libcublasLt.so.13,
#      libnccl.so.2 — in CUDA_LIB_DIR (directories separated by ':'; one that does not exist or holds none of them is
#      named), the system CUDA directories (/usr/local/cuda*/lib64, the loader's cache), else PyTorch's
#      nvidia/*/lib, and prints each one it will use (a missing one is named, and the GPU parts are then skipped by
#      gpu_check.sh, whose CPU parts need them too: the binaries link them);
#   4. LD_LIBRARY_PATH = the bundle's lib/ + those directories; runs bench/gpu_check.sh with DAPO_BIN and DAPO_TESTS
#      pointing into the bundle. Its exit status is gpu_check.sh's (2: bad arguments or the bundle cannot be used).
# Relative paths in CUDA_LIB_DIR, BUNDLE_UNPACK and GPU_CHECK_OUT are taken from the directory run.sh is started in.
# Carry the tracked tree, bundle/dapo-gpu.tar.xz and bundle/run.sh; not bundle/unpacked/ (54 MiB, made there).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
case " $* " in
  *" -h "*|*" --help "*) sed -n '2,/^[^#]/{/^#/p}' "$0"; echo; sed -n '2,/^[^#]/{/^#/p}' "$root/bench/gpu_check.sh"; exit 0 ;;
esac
abs() { case "$1" in /*|'') printf '%s' "$1" ;; *) printf '%s/%s' "$PWD" "$1" ;; esac; }
un=$(abs "${BUNDLE_UNPACK:-$here/unpacked}")
[ -n "${GPU_CHECK_OUT:-}" ] && GPU_CHECK_OUT=$(abs "$GPU_CHECK_OUT") && export GPU_CHECK_OUT
tarball=$here/dapo-gpu.tar.xz
[ -f "$tarball" ] || { echo "run.sh: $tarball is missing: run make gpu-bundle on a build machine, carry it here" >&2; exit 2; }
sum=$(cksum < "$tarball")
if [ ! -x "$un/dapo-gpu/bin/dapo-gpu-check" ] || [ "$(cat "$un/dapo-gpu/SOURCE" 2>/dev/null)" != "$sum" ]; then
  rm -rf "$un" && mkdir -p "$un" 2>/dev/null ||
    { echo "run.sh: cannot make $un (read-only?): set BUNDLE_UNPACK=DIR to unpack elsewhere" >&2; exit 2; }
  if command -v xz > /dev/null; then
    (set -o pipefail; xz -dc "$tarball" | tar -C "$un" -xf -) || ok=0
  elif command -v python3 > /dev/null; then
    python3 -c 'import lzma, sys, tarfile; tarfile.open(fileobj=lzma.open(sys.argv[1])).extractall(sys.argv[2])' \
      "$tarball" "$un" || ok=0
  else
    echo "run.sh: neither xz nor python3 is here to unpack $tarball" >&2; exit 2
  fi
  if [ "${ok:-1}" = 0 ] || [ ! -x "$un/dapo-gpu/bin/dapo-gpu-check" ]; then
    rm -rf "$un"
    echo "run.sh: cannot unpack $tarball (corrupt or truncated: carry it again)" >&2; exit 2
  fi
  echo "$sum" > "$un/dapo-gpu/SOURCE"
fi
echo "run.sh: bundle $(head -1 "$un/dapo-gpu/MANIFEST") in $un"
need=$(sed -n 's/^glibc //p' "$un/dapo-gpu/MANIFEST")
have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
if [ -n "$need" ] && [ -n "$have" ] && [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -1)" != "$need" ]; then
  echo "run.sh: this host's glibc is $have, older than the $need the bundle's files need (they were built on" \
       "$(sed -n 's/^built .* on //p' "$un/dapo-gpu/MANIFEST" | head -1)): run the check on a host with glibc >= $need" \
       "(Debian 12, Ubuntu 24.04 or newer), or make the bundle on a machine with an older glibc" >&2
  exit 2
fi

# the CUDA libraries: the first directory that holds each
libs=(libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2)
cands=()
IFS=: read -r -a given <<< "${CUDA_LIB_DIR:-}"
for d in "${given[@]}"; do
  [ -n "$d" ] || continue
  d=$(abs "$d")
  if [ ! -d "$d" ]; then echo "run.sh: CUDA_LIB_DIR: $d is not a directory (ignored)" >&2; continue; fi
  n=0; for lib in "${libs[@]}"; do [ -e "$d/$lib" ] && n=$((n + 1)); done
  [ "$n" = 0 ] && echo "run.sh: CUDA_LIB_DIR: $d holds none of ${libs[*]}" >&2
  cands+=("$d")
done
for d in /usr/local/cuda/lib64 /usr/local/cuda-13*/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
         /usr/lib/x86_64-linux-gnu /usr/lib64; do [ -d "$d" ] && cands+=("$d"); done
if command -v python3 > /dev/null; then
  while read -r d; do [ -n "$d" ] && cands+=("$d"); done < <(timeout 30 python3 - 2>/dev/null <<'PY'
import glob, os, site
for s in site.getsitepackages() + [site.getusersitepackages()]:
    for d in sorted(glob.glob(os.path.join(s, "nvidia", "*", "lib"))):
        print(d)
PY
)
fi
libdirs=()
missing=()
for lib in "${libs[@]}"; do
  found=
  for d in "${cands[@]}"; do [ -e "$d/$lib" ] && { found="$d/$lib"; break; }; done
  [ -z "$found" ] && found=$(ldconfig -p 2>/dev/null | awk -v l="$lib" '$1 == l {print $NF; exit}')
  [ -n "$found" ] && [ ! -e "$found" ] && found=         # a stale loader cache entry
  if [ -n "$found" ]; then
    echo "run.sh: $lib -> $(readlink -f "$found")"
    libdirs+=("$(dirname "$found")")
  else
    echo "run.sh: $lib not found (set CUDA_LIB_DIR)" >&2
    missing+=("$lib")
  fi
done
path="$un/dapo-gpu/lib"
for d in "${libdirs[@]}"; do case ":$path:" in *":$d:"*) ;; *) path="$path:$d" ;; esac; done
export DAPO_HOST_LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}"   # python3 and PyTorch run with the host's own (gpu_check.sh)
export LD_LIBRARY_PATH="$path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export DAPO_BIN="$un/dapo-gpu/bin" DAPO_TESTS="$un/dapo-gpu/tests" DAPO_CUDA_MISSING="${missing[*]}"
exec "$root/bench/gpu_check.sh" "$@"
