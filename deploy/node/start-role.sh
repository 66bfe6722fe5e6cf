#!/usr/bin/env bash
# deploy/node/start-role.sh: starts one dapo role on this node, pointed at the coordinator's address, for multi-node
# runs (one invocation per process; run it under systemd, tmux or a Kubernetes pod). Every node uses the same
# config file; the addresses are overrides.
#
#   start-role.sh coordinator --config run.yaml [--bind-all]
#   start-role.sh rollout     --config run.yaml --coordinator HOST [--id rollout-3]
#   start-role.sh verifier    --config run.yaml --coordinator HOST [--id verifier-0]
#   start-role.sh learner     --config run.yaml --coordinator HOST --rank R --rank0 HOST_OF_RANK0
#   start-role.sh rollout     ... --weights HOST_OF_RANK0   (where the learner rank 0 serves weights)
#   start-role.sh ROLE ... --restart [--run-dir DIR]   (under dapo-supervise: restarted when it exits or is killed)
#
# --restart runs the role under tools/dapo-supervise.c (restart at once, then with backoff; given up on after 5
# deaths within 10 s of starting; logs, pids and restart events in --run-dir, default runs/node-ROLE[-ID]), as
# deploy/local/run.sh does for a whole local run. A learner needs it (or systemd Restart=on-failure, or Kubernetes)
# for the run to survive its crash: asked to reload the last checkpoint, it exits with status 75 to be restarted.
#
# Ports: 5555 coordinator (workers), 5556 learner rank 0 weight server, 5557 learner rank 0 collective,
# 8080 dashboard. --bind-all makes the
# coordinator listen on every interface (the dashboard stays on 127.0.0.1 unless cluster.http says otherwise).
# Off loopback, put the cluster on a private network: CURVE authentication is not implemented yet.
# To stop a run, stop the coordinator first (SIGTERM) and wait for it to exit: it lets the step in training finish
# and has learner rank 0 checkpoint it; then stop the rest. Restarting every role resumes that step (the
# coordinator's coordinator.json and the learner's weights may live on different nodes).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-build}
role=${1:?usage: start-role.sh coordinator|rollout|verifier|learner --config FILE ...}; shift
config=""; coord=""; id=""; rank=0; rank0=""; weights=""; bind_all=0; restart=0; rundir=""; extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config=$2; shift 2 ;;
    --coordinator) coord=$2; shift 2 ;;
    --id) id=$2; shift 2 ;;
    --rank) rank=$2; shift 2 ;;
    --weights) weights=$2; shift 2 ;;
    --rank0) rank0=$2; shift 2 ;;
    --bind-all) bind_all=1; shift ;;
    --restart) restart=1; shift ;;
    --run-dir) rundir=$2; shift 2 ;;
    *) extra+=("$1"); shift ;;
  esac
done
[ -n "$config" ] || { echo "start-role.sh: --config FILE is required" >&2; exit 2; }
. "$root/deploy/local/env.sh"
args=(--config "$config")
# run "$@" as process NAME: directly, or with --restart under dapo-supervise
launch() {
  local name=$1; shift
  if [ "$restart" = 0 ]; then exec "$@"; fi
  local dir=${rundir:-runs/node-$name}
  mkdir -p "$dir/logs"
  local a out="{\"procs\": [{\"name\": \"$name\", \"argv\": ["
  for a in "$@"; do a=${a//\\/\\\\}; a=${a//\"/\\\"}; out+="\"$a\", "; done
  printf '%s]}]}\n' "${out%, }" > "$dir/procs.json"
  echo "start-role.sh: $name under dapo-supervise; log $dir/logs/$name.log"
  exec "$root/$BUILD/bin/dapo-supervise" --run-dir "$dir" --spec "$dir/procs.json"
}
case "$role" in
  coordinator)
    [ "$bind_all" = 1 ] && args+=(cluster.bind=tcp://0.0.0.0:5555)
    launch coordinator "$root/$BUILD/bin/dapo-coordinator" "${args[@]}" "${extra[@]}" ;;
  rollout|verifier|learner)
    [ -n "$coord" ] || { echo "start-role.sh: --coordinator HOST is required for $role" >&2; exit 2; }
    args+=(cluster.coordinator=tcp://$coord:5555)
    [ -n "$id" ] && args+=(--id "$id")
    if [ "$role" = learner ]; then
      args+=(--rank "$rank")
      if [ "$rank" = 0 ]; then args+=(cluster.weights_bind=tcp://0.0.0.0:5556 cluster.collective=tcp://0.0.0.0:5557)
      else [ -n "$rank0" ] && args+=(cluster.collective=tcp://$rank0:5557); fi
    fi
    [ "$role" = rollout ] && [ -n "$weights" ] && args+=(cluster.weights=tcp://$weights:5556)
    launch "${id:-$role}" "$root/$BUILD/bin/dapo-$role" "${args[@]}" "${extra[@]}" ;;
  *) echo "start-role.sh: unknown role '$role' (coordinator|rollout|verifier|learner)" >&2; exit 2 ;;
esac
