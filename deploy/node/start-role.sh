#!/usr/bin/env bash
# deploy/node/start-role.sh: starts one dapo role on this node, pointed at the coordinator's address, for multi-node
# runs (one invocation per process; run it under systemd, tmux or a Kubernetes pod). The coordinator reads the run's
# config file; a worker needs none: it takes every run key from the coordinator when it starts (docs/design.md §5)
# and is given only its local keys (the addresses below, its key files). A worker's --config FILE contributes only
# its cluster.* keys and trainer.device (extracted here with --print-config=local).
# README "Run on several hosts" walks through it.
#
#   start-role.sh coordinator --config run.yaml --bind ADDR [--keys DIR]
#   start-role.sh rollout     --coordinator HOST --weights HOST_OF_RANK0 [--id rollout-3] [--keys DIR]
#   start-role.sh verifier    --coordinator HOST [--id verifier-0] [--keys DIR]
#   start-role.sh learner     --coordinator HOST --rank 0 --bind ADDR [--keys DIR]
#   start-role.sh learner     --coordinator HOST --rank R --rank0 HOST_OF_RANK0 [--keys DIR]
#   start-role.sh ROLE ... --restart [--run-dir DIR]   (under dapo-supervise: restarted when it exits or is killed)
#
# --bind ADDR: the address the roles that listen (the coordinator: workers on 5555; learner rank 0: weights on
# 5556, the collective on 5557) bind; 127.0.0.1 when not given; --bind-all is --bind 0.0.0.0 (asked for, never the
# default). Off loopback the daemons refuse to start without CURVE keys (or cluster.insecure=true on a private
# network): --keys DIR, made by `dapo-keygen --dir DIR --server --client NAME...` (copy DIR/server.pub, the node's
# own NAME.key and, on the coordinator's and every learner's nodes, server.key and authorized_keys/), sets
# cluster.curve.server_public_key=DIR/server.pub, .secret_key=DIR/NAME.key (NAME: --id, else the role; --key FILE
# names another), and for the coordinator and the learners .server_secret_key=DIR/server.key and
# .authorized_keys=DIR/authorized_keys. The dashboard stays on 127.0.0.1 unless cluster.http says otherwise (off
# loopback it needs cluster.token_file; put TLS in front of it). NCCL's own traffic between GPU hosts is not
# encrypted: keep it on a private network.
#
# --restart runs the role under tools/dapo-supervise.c (restart at once, then with backoff; given up on after 5
# deaths within 10 s of starting; logs, pids and restart events in --run-dir, default runs/node-ROLE[-ID]), as
# deploy/local/run.sh does for a whole local run. A learner needs it (or systemd Restart=on-failure, or Kubernetes)
# for the run to survive its crash: asked to reload the last checkpoint, it exits with status 75 to be restarted.
#
# To stop a run, stop the coordinator first (SIGTERM) and wait for it to exit: it lets the step in training finish
# and has learner rank 0 checkpoint it; then stop the rest. Restarting every role resumes that step (the
# coordinator's coordinator.json and the learner's weights may live on different nodes).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-build}
role=${1:?usage: start-role.sh coordinator|rollout|verifier|learner --config FILE ...}; shift
config=""; coord=""; id=""; rank=0; rank0=""; weights=""; bind=127.0.0.1; restart=0; rundir=""; keys=""; key=""
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config=$2; shift 2 ;;
    --coordinator) coord=$2; shift 2 ;;
    --id) id=$2; shift 2 ;;
    --rank) rank=$2; shift 2 ;;
    --weights) weights=$2; shift 2 ;;
    --rank0) rank0=$2; shift 2 ;;
    --bind) bind=$2; shift 2 ;;
    --bind-all) bind=0.0.0.0; shift ;;
    --keys) keys=$2; shift 2 ;;
    --key) key=$2; shift 2 ;;
    --restart) restart=1; shift ;;
    --run-dir) rundir=$2; shift 2 ;;
    *) extra+=("$1"); shift ;;
  esac
done
. "$root/deploy/local/env.sh"
name=${id:-$role}
args=()
if [ "$role" = coordinator ]; then
  [ -n "$config" ] || { echo "start-role.sh: --config FILE is required for the coordinator" >&2; exit 2; }
  args=(--config "$config")
elif [ -n "$config" ]; then                   # a worker: only the file's local keys
  dir=${rundir:-runs/node-$name}
  mkdir -p "$dir"
  "$root/$BUILD/bin/dapo-coordinator" --config "$config" --print-config=local > "$dir/local.yaml"
  args=(--config "$dir/local.yaml")
fi
serves=0; { [ "$role" = coordinator ] || [ "$role" = learner ]; } && serves=1   # every learner rank serves its ring
if [ -n "$keys" ]; then
  [ -f "$keys/server.pub" ] || { echo "start-role.sh: --keys $keys: no server.pub there (make keys with dapo-keygen)" >&2; exit 2; }
  args+=(cluster.curve.server_public_key="$keys/server.pub" cluster.curve.secret_key="${key:-$keys/$name.key}")
  [ "$serves" = 1 ] && args+=(cluster.curve.server_secret_key="$keys/server.key" cluster.curve.authorized_keys="$keys/authorized_keys")
fi
# run "$@" as process NAME: directly, or with --restart under dapo-supervise
launch() {
  local name=$1; shift
  if [ "$restart" = 0 ]; then exec "$@"; fi
  local dir=${rundir:-runs/node-$name}
  mkdir -p "$dir/logs"
  local a out="{\"procs\": [{\"name\": \"$name\", \"argv\": ["
  for a in "$@"; do
    if [[ "$a" == *[[:cntrl:]]* ]]; then echo "start-role.sh: an argument holds a control character (tab, newline): '$a'" >&2; exit 2; fi
    a=${a//\\/\\\\}; a=${a//\"/\\\"}; out+="\"$a\", "
  done
  printf '%s]}]}\n' "${out%, }" > "$dir/procs.json"
  echo "start-role.sh: $name under dapo-supervise; log $dir/logs/$name.log"
  exec "$root/$BUILD/bin/dapo-supervise" --run-dir "$dir" --spec "$dir/procs.json"
}
case "$role" in
  coordinator)
    args+=(cluster.bind=tcp://$bind:5555)
    launch coordinator "$root/$BUILD/bin/dapo-coordinator" "${args[@]}" "${extra[@]}" ;;
  rollout|verifier|learner)
    [ -n "$coord" ] || { echo "start-role.sh: --coordinator HOST is required for $role" >&2; exit 2; }
    args+=(cluster.coordinator=tcp://$coord:5555)
    [ -n "$id" ] && args+=(--id "$id")
    if [ "$role" = learner ]; then
      args+=(--rank "$rank")
      if [ "$rank" = 0 ]; then args+=(cluster.weights_bind=tcp://$bind:5556 cluster.collective=tcp://$bind:5557)
      else
        [ -n "$rank0" ] || { echo "start-role.sh: --rank0 HOST_OF_RANK0 is required for learner rank $rank" >&2; exit 2; }
        args+=(cluster.collective=tcp://$rank0:5557)
      fi
    fi
    if [ "$role" = rollout ]; then
      [ -n "$weights" ] || { echo "start-role.sh: --weights HOST_OF_RANK0 (where learner rank 0 serves the weights) is" \
                                  "required for a rollout: without it, it would wait for weights for ever" >&2; exit 2; }
      args+=(cluster.weights=tcp://$weights:5556)
    fi
    launch "$name" "$root/$BUILD/bin/dapo-$role" "${args[@]}" "${extra[@]}" ;;
  *) echo "start-role.sh: unknown role '$role' (coordinator|rollout|verifier|learner)" >&2; exit 2 ;;
esac
