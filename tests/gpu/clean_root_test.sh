#!/usr/bin/env bash
# tests/gpu/clean_root_test.sh (make check-long, after make gpu-bundle): the GPU bundle needs nothing installed
# (issue 34). A root made with debootstrap (bookworm, minbase: no -dev package, no compiler, no xz, no python) gets
# the repository's tracked tree and bundle/ unpacked into it, and, read-only under /opt/cuda-lib, the directories
# holding this machine's CUDA runtime libraries (libcudart, libcublas, libcublasLt, libnccl) and nothing else;
# inside it (chroot, env -i) `bundle/run.sh --cpu-only` must run every CPU part of the GPU check: the binaries'
# --help, the conformance suite's CPU half, and the four daemons with trainer.device=cpu for 2 steps. Then the test
# of the test: a bundle made with BUNDLE_LEAVE_OUT=libzmq.so.5 must fail there, naming libzmq.so.5.
# Needs root (debootstrap, chroot, mounts; CI runs as root). The minbase root is cached in DAPO_CLEAN_ROOT (default
# /var/tmp/dapo-clean-root-bookworm; made once, a few minutes, from this machine's Debian mirror); each run works
# in a copy of it, removed at the end with its mounts. CUDA_LIB: the directories to look in first (default
# /usr/local/cuda/lib64; then the loader's cache). Exit 0 when both halves behave.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
[ "$(id -u)" = 0 ] || { echo "clean_root_test: needs root (debootstrap, chroot, mount)" >&2; exit 2; }
[ -f bundle/dapo-gpu.tar.xz ] || { echo "clean_root_test: no bundle/dapo-gpu.tar.xz: make gpu-bundle first" >&2; exit 2; }
# the directories holding the CUDA runtime libraries the binaries link (CUDA's lib64; NCCL may sit elsewhere)
cuda_dirs=()
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
  f=$(for d in ${CUDA_LIB:-/usr/local/cuda/lib64}; do [ -e "$d/$lib" ] && echo "$d/$lib"; done | head -1)
  [ -n "$f" ] || f=$(ldconfig -p | awk -v l="$lib" '$1 == l {print $NF; exit}')
  [ -n "$f" ] || { echo "clean_root_test: no $lib on this machine" >&2; exit 2; }
  d=$(dirname "$(readlink -f "$f")")
  case " ${cuda_dirs[*]} " in *" $d "*) ;; *) cuda_dirs+=("$d") ;; esac
done
base=${DAPO_CLEAN_ROOT:-/var/tmp/dapo-clean-root-bookworm}
t0=$SECONDS
if [ ! -x "$base/bin/bash" ]; then
  command -v debootstrap > /dev/null ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap > /dev/null; }
  mirror=$(grep -rhE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
           | grep -oE 'https?://[^ ]*/debian/?( |$)' | head -1 | tr -d ' ' || true)
  mirror=${mirror:-http://deb.debian.org/debian}
  echo "clean_root_test: debootstrap --variant=minbase bookworm into $base (from ${mirror%/})"
  rm -rf "$base.tmp"
  debootstrap --variant=minbase bookworm "$base.tmp" "${mirror%/}" > /var/tmp/dapo-clean-root.log 2>&1 ||
    { tail -20 /var/tmp/dapo-clean-root.log; exit 1; }
  mv "$base.tmp" "$base"
fi
for t in xz python3 gcc cc; do
  [ -e "$base/usr/bin/$t" ] && { echo "clean_root_test: $base has $t: not a clean root" >&2; exit 1; }
done
work=$(mktemp -d /var/tmp/dapo-clean-root-run.XXXXXX)
mounts=()
cleanup() {
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -l "${mounts[i]}" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
cp -a "$base/." "$work/"
mkdir -p "$work/work/dapo" "$work/opt/cuda-lib"
git ls-files -z | tar --null -T - -cf - | tar -C "$work/work/dapo" -xf -
cuda_in=
for i in "${!cuda_dirs[@]}"; do
  mkdir -p "$work/opt/cuda-lib/$i"
  mount --bind "${cuda_dirs[i]}" "$work/opt/cuda-lib/$i" && mounts+=("$work/opt/cuda-lib/$i")
  mount -o remount,bind,ro "$work/opt/cuda-lib/$i"
  cuda_in=${cuda_in:+$cuda_in:}/opt/cuda-lib/$i
done
mount -t proc proc "$work/proc" && mounts+=("$work/proc")
mount --bind /dev "$work/dev" && mounts+=("$work/dev")

# bundle: unpacked from outside (the root has no xz), as bundle/run.sh would
unpack() {  # archive
  rm -rf "$work/work/dapo/bundle"
  mkdir -p "$work/work/dapo/bundle/unpacked"
  cp "$1" "$work/work/dapo/bundle/dapo-gpu.tar.xz"
  cp bench/gpu/bundle_run.sh "$work/work/dapo/bundle/run.sh"
  xz -dc "$1" | tar -C "$work/work/dapo/bundle/unpacked" -xf -
  cksum < "$1" > "$work/work/dapo/bundle/unpacked/dapo-gpu/SOURCE"   # run.sh's mark of this archive's unpacking
}
inside() {  # log file: bundle/run.sh --cpu-only in the chroot, with nothing from this environment
  chroot "$work" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TMPDIR=/tmp \
    CUDA_LIB_DIR=$cuda_in GPU_CHECK_OUT=/tmp/gpu_check \
    /bin/bash -c 'cd /work/dapo && bundle/run.sh --cpu-only' > "$1" 2>&1
}
unpack bundle/dapo-gpu.tar.xz
echo "clean_root_test: the bundle in a minbase root (root ready after $((SECONDS - t0)) s)"
rc=0
inside "$work/full.log" || rc=$?
sed 's/^/    /' "$work/full.log"
parts=$(cat "$work/tmp/gpu_check/parts.jsonl" 2>/dev/null || true)
for p in machine tools conformance cluster; do
  echo "$parts" | grep -q "\"part\": \"$p\", \"status\": \"passed\"" ||
    { echo "clean_root_test: FAILED: part $p did not pass in the clean root" >&2; exit 1; }
done
[ "$rc" = 0 ] || { echo "clean_root_test: FAILED: bundle/run.sh --cpu-only exited $rc" >&2; exit 1; }
echo "clean_root_test: every CPU part passed in the clean root ($((SECONDS - t0)) s)"

# the test of the test: one library left out must fail, naming it
tmpb=$(mktemp -d)
BUNDLE_DIR=$tmpb BUNDLE_LEAVE_OUT=libzmq.so.5 bench/gpu/make_bundle.sh > "$work/leave-out.log" 2>&1 ||
  { cat "$work/leave-out.log"; echo "clean_root_test: FAILED: could not make the bundle without libzmq" >&2; exit 1; }
unpack "$tmpb/dapo-gpu.tar.xz"
rm -rf "$tmpb" "$work/tmp/gpu_check"
rc=0
inside "$work/leave-out-run.log" || rc=$?
if [ "$rc" = 0 ] || ! grep -q "libzmq.so.5" "$work/leave-out-run.log"; then
  sed 's/^/    /' "$work/leave-out-run.log"
  echo "clean_root_test: FAILED: a bundle without libzmq.so.5 passed, or did not name it (exit $rc)" >&2
  exit 1
fi
grep -m2 "libzmq.so.5" "$work/leave-out-run.log" | sed 's/^/    /'
echo "clean_root_test: a bundle without libzmq.so.5 fails there, naming it; passed ($((SECONDS - t0)) s)"
