#!/usr/bin/env bash
# deploy/docker/build-image.sh [cpu|cuda]: builds the dapo container image with buildah (`make image`, `make image-cuda`).
#   1. installs buildah, podman and debootstrap when missing (apt-get);
#   2. makes the base image $BASE (default localhost/dapo-base:bookworm) from Debian packages with debootstrap
#      (minbase, from this machine's Debian mirror), imported with podman; skipped when the image exists. Set
#      BASE=debian:bookworm-slim to use a registry's image instead;
#   3. builds deploy/docker/Dockerfile (cpu) or Dockerfile.cuda (cuda: the CUDA toolkit of this machine, found from
#      CUDA_HOME or nvcc, is mounted read-only at /usr/local/cuda during the build; the nvidia-* wheels to ship are
#      the versions the toolkit has in its dist-info, else the newest of its major version), tagging the build
#      stage too: localhost/dapo:build + :latest (cpu), localhost/dapo:cuda-build + :cuda (cuda);
#   4. prints the sizes of both stages and the time each part took.
# Environment: BASE, IMAGE (default localhost/dapo), MIRROR / SECURITY_MIRROR (default: this machine's apt sources),
# CUDA_HOME, PIP_CERT (the CA bundle pip uses in the CUDA build; default this machine's).
# Builds use `--isolation chroot` (crun cannot set up cgroups here) and `--layers` (cached between runs).
set -euo pipefail
variant=${1:-cpu}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
[ "$(id -u)" = 0 ] || exec sudo -E "$0" "$@"
BASE=${BASE:-localhost/dapo-base:bookworm}
IMAGE=${IMAGE:-localhost/dapo}
t0=$SECONDS; times=()
lap() { times+=("$1: $((SECONDS - t0)) s"); t0=$SECONDS; }

missing=()
for t in buildah podman debootstrap; do command -v "$t" >/dev/null || missing+=("$t"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "build-image: installing ${missing[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
lap tools

if [[ $BASE == localhost/* ]] && ! podman image exists "$BASE"; then
  mirror=${MIRROR:-$(grep -rhE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
                     | grep -oE 'https?://[^ ]*/debian/?( |$)' | head -1 | tr -d ' ' || true)}
  mirror=${mirror:-http://deb.debian.org/debian}; mirror=${mirror%/}
  security=${SECURITY_MIRROR:-$(grep -rhE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
                     | grep -oE 'https?://[^ ]*/debian-security/?( |$)' | head -1 | tr -d ' ' || true)}
  security=${security:-http://deb.debian.org/debian-security}; security=${security%/}
  dir=$(mktemp -d /var/tmp/dapo-base.XXXXXX)
  trap 'rm -rf "$dir"' EXIT
  echo "build-image: debootstrap --variant=minbase bookworm from $mirror (log: $dir.log)"
  debootstrap --variant=minbase bookworm "$dir" "$mirror" > "$dir.log" 2>&1 || { tail -20 "$dir.log"; exit 1; }
  printf 'deb %s bookworm main\ndeb %s bookworm-updates main\ndeb %s bookworm-security main\n' \
    "$mirror" "$mirror" "$security" > "$dir/etc/apt/sources.list"
  # as Debian's -slim images: no docs (but copyrights), man pages or translations, now or from later apt-get installs
  printf 'path-exclude /usr/share/%s\n' 'doc/*' 'man/*' 'info/*' 'locale/*' 'lintian/*' > "$dir/etc/dpkg/dpkg.cfg.d/01-slim"
  echo 'path-include /usr/share/doc/*/copyright' >> "$dir/etc/dpkg/dpkg.cfg.d/01-slim"
  find "$dir/usr/share/doc" -type f ! -name copyright -delete
  rm -rf "$dir"/usr/share/{man,info,locale,lintian}/* "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/* \
         "$dir"/etc/resolv.conf "$dir"/etc/hostname
  tar -C "$dir" -c . | podman import --change 'CMD ["/bin/bash"]' - "$BASE" >/dev/null
  rm -rf "$dir" "$dir.log"; trap - EXIT
  echo "build-image: base image $BASE made"
fi
lap base

bud=(buildah bud --isolation chroot --layers --force-rm --ignorefile deploy/docker/.dockerignore --build-arg "BASE=$BASE")
if [ "$variant" = cuda ]; then
  nvcc=$(command -v nvcc || true)
  cuda_home=${CUDA_HOME:-${nvcc:+$(dirname "$(dirname "$nvcc")")}}
  [ -x "$cuda_home/bin/nvcc" ] || { echo "build-image: no CUDA toolkit (set CUDA_HOME or put nvcc on PATH)" >&2; exit 2; }
  cuda_home=$(readlink -f "$cuda_home")
  major=$("$cuda_home/bin/nvcc" --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
  wheel() {  # NAME==the version the toolkit has (its dist-info), else NAME==MAJOR.*
    local d; for d in "$cuda_home/dist-info/${1//-/_}"-*.dist-info; do
      [ -d "$d" ] && { d=${d##*/}; d=${d%.dist-info}; echo "$1==${d##*-}"; return; }; done
    echo "$1==$major.*"; }
  if [ "$major" -ge 13 ]; then sfx=""; else sfx="-cu$major"; fi   # CUDA 13 dropped the suffix (not NCCL's)
  wheels="$(wheel "nvidia-cuda-runtime$sfx") $(wheel "nvidia-cublas$sfx") $(wheel "nvidia-nccl-cu$major")"
  echo "build-image: CUDA $major toolkit at $cuda_home; runtime wheels: $wheels"
  bud+=(--volume "$cuda_home:/usr/local/cuda:ro" --build-arg "NVIDIA_WHEELS=$wheels" -f deploy/docker/Dockerfile.cuda)
  # pip in the build trusts this machine's CA bundle (a TLS-intercepting proxy's CA is in it, not in the image's)
  ca=${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}
  [ -f "$ca" ] && bud+=(--volume "$ca:/etc/ssl/build-host-ca.crt:ro" --build-arg PIP_CERT=/etc/ssl/build-host-ca.crt)
  build_tag=$IMAGE:cuda-build; run_tag=$IMAGE:cuda
else
  bud+=(-f deploy/docker/Dockerfile)
  build_tag=$IMAGE:build; run_tag=$IMAGE:latest
fi
"${bud[@]}" --target build -t "$build_tag" .
lap "build stage ($build_tag)"
"${bud[@]}" -t "$run_tag" .
if [ "$variant" = cuda ]; then   # --volume leaves its (empty) mount points in every stage: drop them from the runtime
  ctr=$(buildah from --pull=never "$run_tag"); mnt=$(buildah mount "$ctr")
  rmdir "$mnt/usr/local/cuda"; [ -s "$mnt/etc/ssl/build-host-ca.crt" ] || rm -f "$mnt/etc/ssl/build-host-ca.crt"
  buildah umount "$ctr" >/dev/null; buildah commit -q --rm "$ctr" "$run_tag" >/dev/null
fi
lap "runtime stage ($run_tag)"

echo "build-image: done"
podman images --format '{{.Repository}}:{{.Tag}}  {{.Size}}' | grep -E "^($build_tag|$run_tag|$BASE) " || true
printf 'build-image: time %s\n' "${times[@]}"
