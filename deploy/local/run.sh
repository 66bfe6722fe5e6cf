#!/usr/bin/env bash
# deploy/local/run.sh: runs a dapo training job on this machine — coordinator, M verifiers, N rollouts and W learner
# ranks from one config — with data, logs, pids, metrics and checkpoints in a run directory; prints the dashboard
# URL; Ctrl-C / SIGTERM stops everything cleanly (the coordinator checkpoints first).
#
#   deploy/local/run.sh [--config FILE] [--run-dir DIR] [--rollouts N] [--verifiers M] [--learners W]
#                       [--steps S] [--port-base N] [key.path=value ...]
#
# Defaults: configs/default.yaml, run directory runs/<config name>, 1 rollout, 1 verifier, 1 learner
# (cluster.num_learners=W among the keys is --learners W).
# Ports: the run binds cluster.http (the dashboard, 127.0.0.1:8080), cluster.bind (the coordinator, 5555; workers
# reach it at cluster.coordinator), cluster.weights_bind (learner rank 0's weight server, 5556; cluster.weights) and,
# with two or more learner ranks, cluster.collective (5557). Every one is checked before any preparation (a busy one
# stops the launch in under a second, naming the key); --port-base N moves them all to loopback ports N (dashboard),
# N+1 (coordinator), N+2 (weights), N+3 (collective), for a second run beside the first.
# Before launching, configs/<name>.prepare.sh (when it exists) makes what the run needs that is not in the
# repository — the generated task data, the SFT-warm-started base model — into the run directory, cached there
# (it skips what already exists), and writes the config overrides that point at it into RUN_DIR/overrides.txt.
# Refuses to start over a live run in the same directory; a stopped run resumes from its last checkpoint
# (trainer.resume_mode auto). Sets the BLAS/threading environment the machine needs where the user has not
# (deploy/local/env.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
BUILD=${BUILD:-build}
case "$BUILD" in /*) bin="$BUILD/bin" ;; *) bin="$root/$BUILD/bin" ;; esac   # BUILD: absolute, or under the tree
config="configs/default.yaml"; rundir=""; nroll=1; nver=1; nlearn=1; nlearn_set=0; steps=""; portbase=""; portbase_set=0; args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config=$2; shift 2 ;;
    --run-dir) rundir=$2; shift 2 ;;
    --rollouts) nroll=$2; shift 2 ;;
    --verifiers) nver=$2; shift 2 ;;
    --learners) nlearn=$2; nlearn_set=1; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --port-base) portbase=$2; portbase_set=1; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) args+=("$1"); shift ;;
  esac
done
# cluster.num_learners on the command line is --learners: the ranks started are the ranks the config names
for a in ${args[@]+"${args[@]}"}; do
  case "$a" in
    cluster.num_learners=*|+cluster.num_learners=*|++cluster.num_learners=*)
      v=${a#*=}
      case "$v" in [1-9]|[1-9][0-9]|[1-9][0-9][0-9]) ;;
        *) echo "run.sh: cluster.num_learners needs a number of learner ranks (1-999), got '$v'" >&2; exit 2 ;; esac
      if [ "$nlearn_set" = 1 ] && [ "$v" != "$nlearn" ]; then
        echo "run.sh: --learners $nlearn and cluster.num_learners=$v disagree; give one of them" >&2; exit 2
      fi
      nlearn=$v ;;
  esac
done
[ -f "$config" ] || { echo "run.sh: no config file $config" >&2; exit 2; }
name=$(basename "$config" .yaml)
rundir=${rundir:-runs/$name}
rundir=$(realpath -m "$rundir")            # made only once the config and the ports are checked
. "$root/deploy/local/env.sh"

if [ -f "$rundir/pids" ]; then
  live=()
  while read -r pid what; do
    kill -0 "$pid" 2>/dev/null && live+=("$what (pid $pid)")
  done < "$rundir/pids"
  if [ ${#live[@]} -gt 0 ]; then
    echo "run.sh: $rundir is in use by a live run: ${live[*]}; stop it first (Ctrl-C in its terminal, or kill -TERM" \
         "the supervisor's pid)" >&2
    exit 1
  fi
  rm -f "$rundir/pids"
fi

# The dashboard's controls (Pause, Stop, ...) need a bearer token: a random one in RUN_DIR/token, made once (0600)
# after the checks below.
token_args=()
case " ${args[*]} " in *" cluster.token_file="*) ;; *) token_args=("cluster.token_file=$rundir/token") ;; esac
# The config as given (without what the preparation adds) is checked before the preparation's long work.
common=(--config "$config" "trainer.default_local_dir=$rundir/checkpoints" "cluster.num_learners=$nlearn"
        "${token_args[@]}")
[ -n "$steps" ] && common+=("trainer.total_training_steps=$steps")
if [ "$portbase_set" = 1 ]; then             # before the user's keys: a key on the command line still wins
  case "$portbase" in [1-9]|[1-9][0-9]|[1-9][0-9][0-9]|[1-9][0-9][0-9][0-9]|[1-9][0-9][0-9][0-9][0-9]) ;;
    *) echo "run.sh: --port-base needs a port number (decimal, no leading zero), got '$portbase'" >&2; exit 2 ;; esac
  [ "$portbase" -ge 1024 ] && [ "$portbase" -le 65532 ] ||
    { echo "run.sh: --port-base must be within 1024..65532 (it uses N..N+3), got $portbase" >&2; exit 2; }
  common+=("cluster.http=127.0.0.1:$portbase" "cluster.bind=tcp://127.0.0.1:$((portbase + 1))"
           "cluster.coordinator=tcp://127.0.0.1:$((portbase + 1))" "cluster.weights_bind=tcp://127.0.0.1:$((portbase + 2))"
           "cluster.weights=tcp://127.0.0.1:$((portbase + 2))" "cluster.collective=tcp://127.0.0.1:$((portbase + 3))")
fi
# trainer.logger=tensorboard writes to TENSORBOARD_DIR (verl's variable); here it defaults into the run directory
export TENSORBOARD_DIR=${TENSORBOARD_DIR:-$rundir/tensorboard}
"$bin/dapo-coordinator" "${common[@]}" "${args[@]}" --print-config > /dev/null
# every port the run binds, before the preparation's minutes of work (the message names the key)
"$bin/dapo-coordinator" "${common[@]}" "${args[@]}" --check-ports || exit 1
mkdir -p "$rundir/logs"
if [ ${#token_args[@]} -gt 0 ] && [ ! -s "$rundir/token" ]; then
  (umask 077; od -An -N16 -tx1 /dev/urandom | tr -d ' \n' > "$rundir/token")
fi
prep_model=1                                  # a model given on the command line needs no prepared base model
for a in "${args[@]}"; do
  case "$a" in
    actor_rollout_ref.model.path=*)
      prep_model=0; m=${a#*=}
      [ -f "$m/config.json" ] || { echo "run.sh: actor_rollout_ref.model.path: $m has no config.json" >&2; exit 2; } ;;
  esac
done

stop_prepare() {
  echo "dapo: interrupted while preparing; stopping it"
  kill -TERM -- "-$prep_pid" 2>/dev/null || true
  wait "$prep_pid" 2>/dev/null || true
  rm -f "$rundir/pids"
  exit 130
}
prep="${config%.yaml}.prepare.sh"
: > "$rundir/overrides.txt"
if [ -x "$prep" ]; then
  echo "dapo: preparing the run with $prep (cached in $rundir)"
  RUN_DIR="$rundir" BUILD="$BUILD" PREPARE_MODEL=$prep_model setsid "$prep" &
  prep_pid=$!
  echo "$prep_pid prepare" > "$rundir/pids"
  trap stop_prepare INT TERM HUP
  rc=0; wait "$prep_pid" || rc=$?
  trap - INT TERM HUP
  rm -f "$rundir/pids"
  [ "$rc" = 0 ] || { echo "run.sh: $prep failed (exit $rc)" >&2; exit 1; }
fi
mapfile -t prepared < <(grep -v '^\s*$' "$rundir/overrides.txt" || true)
common+=("${prepared[@]}" "${args[@]}")
"$bin/dapo-coordinator" "${common[@]}" --print-config > "$rundir/config.yaml"   # validates before anything starts
# The workers get only the local keys (cluster.*, trainer.device): every run key comes from the coordinator when
# they start (docs/design.md §5), so no two copies of the run config can disagree.
"$bin/dapo-coordinator" "${common[@]}" --print-config=local > "$rundir/worker.yaml"
http=$(sed -n 's/^  http: "\([^"]*\)".*/\1/p' "$rundir/config.yaml")   # the value, not its "# source" comment

# The daemons run under dapo-supervise (tools/dapo-supervise.c), which this script becomes (exec): it restarts a
# daemon that exits or is killed (at once, then with backoff; one that keeps dying young fails the run with the end of
# its log), keeps $rundir/pids true, echoes what the terminal should not miss, and stops everything in order on
# Ctrl-C / SIGTERM / SIGHUP — also when this script runs as a background job, whose SIGINT bash itself cannot trap.
json_str() {  # a JSON string literal
  local s=$1
  s=${s//\\/\\\\}; s=${s//\"/\\\"}; s=${s//$'\n'/\\n}; s=${s//$'\t'/\\t}; s=${s//$'\r'/\\r}
  printf '"%s"' "$s"
}
procs=()
proc() {  # name, command...
  local what=$1 a out; shift
  out="{\"name\": $(json_str "$what"), \"argv\": ["
  for a in "$@"; do out+="$(json_str "$a"), "; done
  procs+=("${out%, }]}")
}
proc coordinator "$bin/dapo-coordinator" "${common[@]}"
wargs=(--config "$rundir/worker.yaml")
for i in $(seq 0 $((nver - 1))); do proc "verifier-$i" "$bin/dapo-verifier" "${wargs[@]}" --id "verifier-$i"; done
for r in $(seq 0 $((nlearn - 1))); do proc "learner-$r" "$bin/dapo-learner" "${wargs[@]}" --id "learner-$r" --rank "$r"; done
for i in $(seq 0 $((nroll - 1))); do proc "rollout-$i" "$bin/dapo-rollout" "${wargs[@]}" --id "rollout-$i"; done
{ printf '{"procs": [\n'; (IFS=$'\n'; printf '%s' "${procs[*]}" | sed '$!s/$/,/'); printf '\n]}\n'; } > "$rundir/procs.json"
echo "dapo: starting ($nroll rollout, $nver verifier, $nlearn learner); logs in $rundir/logs"
echo "dapo: dashboard at http://$http/   (Ctrl-C stops the run; run the same command again to resume it)"
[ ${#token_args[@]} -gt 0 ] && echo "dapo: the dashboard's controls take the token in $rundir/token"
exec "$bin/dapo-supervise" --run-dir "$rundir" --spec "$rundir/procs.json"
