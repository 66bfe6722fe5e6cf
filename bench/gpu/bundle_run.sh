#!/usr/bin/env bash
# bundle/run.sh (copied there by `make gpu-bundle` from bench/gpu/bundle_run.sh): the GPU check on a host with an
# NVIDIA driver and the CUDA 13 runtime but without this build's libraries or a compiler (issue 34). Run it from the
# repository's tree, where bundle/ sits:
#   bundle/run.sh [--cpu-only] [PART ...]        (parts: see bench/gpu_check.sh; default: all)
#   1. unpacks bundle/dapo-gpu.tar.xz into bundle/unpacked/ (xz, else python3's lzma; skipped when already there);
#   2. finds the CUDA libraries the binaries need — libcudart.so.13, libcublas.so.13, libcublasLt.so.13,
#      libnccl.so.2 — in CUDA_LIB_DIR (directories separated by ':'), the system CUDA directories (/usr/local/cuda*/lib64, the loader's cache),
#      else PyTorch's nvidia/*/lib, and prints each one it will use (a missing one is named, and the GPU parts are
#      then skipped by gpu_check.sh, whose CPU parts need them too: the binaries link them);
#   3. LD_LIBRARY_PATH = the bundle's lib/ + those directories; runs bench/gpu_check.sh with DAPO_BIN and DAPO_TESTS
#      pointing into the bundle. Its exit status is gpu_check.sh's.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
un=${BUNDLE_UNPACK:-$here/unpacked}
if [ ! -x "$un/dapo-gpu/bin/dapo-gpu-check" ] || [ "$here/dapo-gpu.tar.xz" -nt "$un/dapo-gpu/MANIFEST" ]; then
  rm -rf "$un" && mkdir -p "$un" || exit 1
  if command -v xz > /dev/null; then
    xz -dc "$here/dapo-gpu.tar.xz" | tar -C "$un" -xf - || { echo "run.sh: cannot unpack the bundle" >&2; exit 1; }
  elif command -v python3 > /dev/null; then
    python3 -c 'import lzma, sys, tarfile; tarfile.open(fileobj=lzma.open(sys.argv[1])).extractall(sys.argv[2])' \
      "$here/dapo-gpu.tar.xz" "$un" || { echo "run.sh: cannot unpack the bundle" >&2; exit 1; }
  else
    echo "run.sh: neither xz nor python3 is here to unpack $here/dapo-gpu.tar.xz" >&2; exit 1
  fi
  touch "$un/dapo-gpu/MANIFEST"
fi
echo "run.sh: bundle $(head -1 "$un/dapo-gpu/MANIFEST") in $un"

# the CUDA libraries: the first directory that holds each
cands=()
IFS=: read -r -a given <<< "${CUDA_LIB_DIR:-}"
for d in "${given[@]}"; do [ -n "$d" ] && cands+=("$d"); done
for d in /usr/local/cuda/lib64 /usr/local/cuda-13*/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
         /usr/lib/x86_64-linux-gnu /usr/lib64; do [ -d "$d" ] && cands+=("$d"); done
if command -v python3 > /dev/null; then
  while read -r d; do [ -n "$d" ] && cands+=("$d"); done < <(python3 - 2>/dev/null <<'PY'
import glob, os, site
for s in site.getsitepackages() + [site.getusersitepackages()]:
    for d in sorted(glob.glob(os.path.join(s, "nvidia", "*", "lib"))):
        print(d)
PY
)
fi
libdirs=()
missing=()
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
  found=
  for d in "${cands[@]}"; do [ -e "$d/$lib" ] && { found="$d/$lib"; break; }; done
  [ -z "$found" ] && found=$(ldconfig -p 2>/dev/null | awk -v l="$lib" '$1 == l {print $NF; exit}')
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
export LD_LIBRARY_PATH="$path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export DAPO_BIN="$un/dapo-gpu/bin" DAPO_TESTS="$un/dapo-gpu/tests" DAPO_CUDA_MISSING="${missing[*]}"
exec "$root/bench/gpu_check.sh" "$@"
