#!/usr/bin/env bash
# Installs the Debian packages in deps/debian-packages.txt that are missing. Idempotent: when everything
# is present it only runs dpkg-query (well under a second). Needs root or sudo for the install itself.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mapfile -t want < <(grep -v '^\s*#' "$here/debian-packages.txt" | grep -v '^\s*$')
if [ "${1:-}" = "--extra" ]; then shift; want+=("$@"); fi
missing=()
for p in "${want[@]}"; do
  st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [ "$st" = "install ok installed" ] || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps: installing ${missing[*]}"
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
