#!/usr/bin/env bash
# deploy/local/run.sh: starts a dapo cluster on this machine — coordinator, rollout, verifier and learner — from one
# config, with logs and pids in a run directory; prints the dashboard URL; Ctrl-C / SIGTERM stops everything.
# Usage: deploy/local/run.sh [--config FILE] [--run-dir DIR] [key.path=value ...]
# Work in progress (issue 9): the daemons register and heartbeat; generation, scoring and training are being built.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-build}
bin="$root/$BUILD/bin"
config="$root/configs/default.yaml"
rundir="$root/runs/default"
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config=$2; shift 2 ;;
    --run-dir) rundir=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
. "$root/deploy/local/env.sh"
mkdir -p "$rundir/logs"
if [ -f "$rundir/pids" ]; then
  while read -r pid name; do
    if kill -0 "$pid" 2>/dev/null; then echo "run directory $rundir is in use by a live $name (pid $pid); stop it first" >&2; exit 1; fi
  done < "$rundir/pids"
fi
: > "$rundir/pids"
cfg=(); [ -f "$config" ] && cfg=(--config "$config")
pids=()
start() {  # name, binary, args...
  local name=$1; shift
  "$@" >> "$rundir/logs/$name.log" 2>&1 &
  pids+=($!); echo "$! $name" >> "$rundir/pids"
}
stop() {
  trap - INT TERM
  echo "stopping ${#pids[@]} processes..."
  kill -TERM "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
  rm -f "$rundir/pids"
  exit 0
}
trap stop INT TERM
start coordinator "$bin/dapo-coordinator" "${cfg[@]}" "${args[@]}"
sleep 0.3
start verifier-0 "$bin/dapo-verifier" "${cfg[@]}" "${args[@]}" --id verifier-0
start rollout-0 "$bin/dapo-rollout" "${cfg[@]}" "${args[@]}" --id rollout-0
start learner-0 "$bin/dapo-learner" "${cfg[@]}" "${args[@]}" --id learner-0 --rank 0
http=$("$bin/dapo-coordinator" "${cfg[@]}" "${args[@]}" --print-config | sed -n 's/^  http: "\(.*\)"$/\1/p')
echo "dapo: cluster running; logs and pids in $rundir"
echo "dapo: status at http://$http/api/status  (Ctrl-C stops everything)"
wait "${pids[0]}" || true
stop
