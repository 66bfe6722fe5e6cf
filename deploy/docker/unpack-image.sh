#!/usr/bin/env bash
# deploy/docker/unpack-image.sh IMAGE DIR: extracts the root filesystem of the local image IMAGE (e.g.
# localhost/dapo:latest) into DIR (created; must be empty), for tests that chroot into it and start the daemons
# without a kubelet, e.g. `chroot --userspec=10001:10001 DIR /opt/dapo/bin/dapo-coordinator --help`. The image's
# environment (PATH, ...) is not part of its filesystem: it is printed at the end, for `env -i $(cat FILE) chroot ...`.
# Needs root (the files keep their owners) and buildah.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 IMAGE DIR" >&2; exit 2; }
image=$1; dir=$2
[ "$(id -u)" = 0 ] || { echo "unpack-image.sh: needs root (the files keep their owners)" >&2; exit 2; }
mkdir -p "$dir"
[ -z "$(ls -A "$dir")" ] || { echo "unpack-image.sh: $dir is not empty" >&2; exit 2; }
ctr=$(buildah from --pull=never "$image")
trap 'buildah umount "$ctr" >/dev/null 2>&1 || true; buildah rm "$ctr" >/dev/null' EXIT
mnt=$(buildah mount "$ctr")
tar -C "$mnt" -c . | tar -C "$dir" -x --numeric-owner
echo "unpack-image.sh: $image -> $dir ($(du -sh "$dir" | cut -f1)); its environment:"
buildah inspect --type image --format '{{range .OCIv1.Config.Env}}{{println .}}{{end}}' "$image"
