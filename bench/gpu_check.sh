#!/usr/bin/env bash
# bench/gpu_check.sh: the GPU check of the CUDA backend (issues 10, 34), the body of bundle/run.sh. It builds nothing:
# the binaries come from DAPO_BIN / DAPO_TESTS (bundle/run.sh points them into the unpacked bundle; in a CUDA build
# tree they default to $BUILD/bin and $BUILD/tests). Parts, cheapest first, each with its own timeout (all within
# 6 minutes), each one's results written as it finishes, so a time-out still leaves the earlier parts' results:
#   machine      the CPU's model and flags, nvidia-smi, the libraries the loader resolves          (cpu)   10 s
#   tools        every bundled binary's --help                                                      (cpu)   10 s
#   conformance  tests/test_backend_conformance: the CPU backend, and backend_cuda when a GPU is here (cpu) 45 s
#   cluster      the four daemons under dapo-supervise (deploy/local/run.sh) on a fresh tiny model with
#                trainer.device=cpu, 2 steps, stopped in order                                       (cpu)   50 s
#   kernels      dapo-gpu-check kernels: every CUDA kernel against the CPU backend                   (gpu)   60 s
#   model        dapo-gpu-check model: forward, backward, grad norm, AdamW of a small Qwen2 on CUDA vs CPU;
#                one-rank NCCL                                                                       (gpu)   45 s
#   bench        dapo-gpu-check bench: Qwen2.5-0.5B-shaped training tokens/s and MFU                 (gpu)   60 s
#   baseline     bench/gpu/baseline_torch.py: PyTorch on the same GPU (transformers if it imports, else plain
#                PyTorch with SDPA)                                                                  (gpu)   75 s
# Usage: bench/gpu_check.sh [--cpu-only] [PART ...]   (--cpu-only: the cpu parts, for a host without a GPU: the
# clean-root test). Results under GPU_CHECK_OUT (default $OUT/gpu_check when the device tool's OUT is set, else
# bench/gpu/out/gpu_check): machine.txt, parts.jsonl (one line per part: part, status, seconds), <part>.log,
# results.jsonl (dapo-gpu-check's checks), table.txt and summary.json (with python3). PEAK_TFLOPS (989: H100/H200
# SXM dense bf16), SEED, GPU_CHECK_PORT_BASE (47100: the cluster part's ports, 47100-47103). A GPU is there when
# nvidia-smi -L lists one or /dev/nvidia0 exists (a container without nvidia-smi). Exit status 0 when every part that
# ran passed and, without --cpu-only, the GPU parts ran; 1 when a part failed or no GPU was found (the GPU parts were
# then not run: this is no GPU check); 2 on bad arguments or an output folder that cannot be written.
set -u
abs() { case "$1" in /*|'') printf '%s' "$1" ;; *) printf '%s/%s' "$PWD" "$1" ;; esac; }
[ -n "${GPU_CHECK_OUT:-}" ] && GPU_CHECK_OUT=$(abs "$GPU_CHECK_OUT")
[ -n "${DAPO_BIN:-}" ] && DAPO_BIN=$(abs "$DAPO_BIN")
[ -n "${DAPO_TESTS:-}" ] && DAPO_TESTS=$(abs "$DAPO_TESTS")
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
BUILD=${BUILD:-build}
BIN=${DAPO_BIN:-$ROOT/$BUILD/bin}
TESTS=${DAPO_TESTS:-$ROOT/$BUILD/tests}
DEST=${GPU_CHECK_OUT:-${OUT:+$OUT/gpu_check}}
DEST=${DEST:-$ROOT/bench/gpu/out/gpu_check}
PEAK=${PEAK_TFLOPS:-989}
SEED=${SEED:-$(date +%s)}
cpu_only=0
parts=()
for a in "$@"; do
  case "$a" in
    --cpu-only) cpu_only=1 ;;
    machine|tools|conformance|cluster|kernels|model|bench|baseline) parts+=("$a") ;;
    -h|--help) sed -n '2,/^[^#]/{/^#/p}' "$0"; exit 0 ;;
    *) echo "gpu_check: unknown argument '$a'" >&2; exit 2 ;;
  esac
done
[ ${#parts[@]} -gt 0 ] || parts=(machine tools conformance cluster kernels model bench baseline)
if [ "$cpu_only" = 1 ] && [[ " ${parts[*]} " != *" machine "* && " ${parts[*]} " != *" tools "* &&
                             " ${parts[*]} " != *" conformance "* && " ${parts[*]} " != *" cluster "* ]]; then
  echo "gpu_check: --cpu-only with only GPU parts (${parts[*]}): nothing to run" >&2; exit 2
fi
if ! mkdir -p "$DEST" 2>/dev/null || ! : > "$DEST/parts.jsonl" 2>/dev/null; then
  echo "gpu_check: cannot write the results folder $DEST: set GPU_CHECK_OUT to a writable folder" >&2; exit 2
fi
: > "$DEST/results.jsonl"
T0=$(date +%s)
say() { echo "[gpu_check +$(( $(date +%s) - T0 ))s] $*"; }
status=0
gpu=0
nogpu="no GPU here"
if [ "$cpu_only" = 1 ]; then nogpu="--cpu-only"
elif command -v nvidia-smi > /dev/null && timeout -k 2 10 nvidia-smi -L > /dev/null 2>&1; then gpu=1
elif [ -e /dev/nvidia0 ]; then gpu=1                 # a container with the device but without nvidia-smi
fi
[ -n "${DAPO_CUDA_MISSING:-}" ] && [ "$gpu" = 1 ] &&
  { say "CUDA libraries missing: $DAPO_CUDA_MISSING: GPU parts skipped"; gpu=0; nogpu="CUDA libraries missing"; }
want_gpu=0
for p in "${parts[@]}"; do case "$p" in kernels|model|bench|baseline) want_gpu=1 ;; esac; done
[ "$cpu_only" = 1 ] && want_gpu=0
# python3 and PyTorch run with the host's libraries, not the bundle's (bundle/run.sh keeps them here)
py() { if [ -n "${DAPO_HOST_LD_LIBRARY_PATH+x}" ]; then LD_LIBRARY_PATH=$DAPO_HOST_LD_LIBRARY_PATH python3 "$@"; else python3 "$@"; fi; }

# part name, "cpu"|"gpu", timeout seconds, command...: runs it, logs to DEST/<part>.log, records the result
part() {
  local name=$1 kind=$2 tmo=$3; shift 3
  local want=0 p
  for p in "${parts[@]}"; do [ "$p" = "$name" ] && want=1; done
  [ "$want" = 1 ] || return 0
  if [ "$kind" = gpu ] && [ "$gpu" = 0 ]; then
    echo "{\"part\": \"$name\", \"status\": \"skipped\", \"why\": \"$nogpu\", \"seconds\": 0}" >> "$DEST/parts.jsonl"
    say "$name: skipped ($nogpu)"
    return 0
  fi
  say "$name (at most $tmo s)"
  local t rc=0
  t=$(date +%s)
  timeout -k 5 "$tmo" bash -c '"$@"' part "$@" > "$DEST/$name.log" 2>&1 || rc=$?   # exported functions; KILL 5 s
                                                                                      # after TERM (a hung part)
  local s=$(( $(date +%s) - t )) st=passed
  [ "$rc" = 0 ] || st=failed
  { [ "$rc" = 124 ] || [ "$rc" = 137 ]; } && st=timeout
  [ "$st" = passed ] || status=1
  echo "{\"part\": \"$name\", \"status\": \"$st\", \"exit\": $rc, \"seconds\": $s}" >> "$DEST/parts.jsonl"
  tail -n 6 "$DEST/$name.log" | sed 's/^/    /'
  say "$name: $st (exit $rc, $s s)"
}

machine() {
  echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(nproc) cores, family" \
       "$(sed -n 's/^cpu family[[:space:]]*: //p' /proc/cpuinfo | head -1) model $(sed -n 's/^model[[:space:]]*: //p' /proc/cpuinfo | head -1)"
  echo "flags: $(grep -m1 '^flags' /proc/cpuinfo | grep -oE 'avx512[a-z_0-9]*|amx[a-z_0-9]*|avx2|fma' | sort -u | tr '\n' ' ')"
  echo "kernel: $(uname -sr)"
  if command -v nvidia-smi > /dev/null; then timeout -k 2 8 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm \
       --format=csv 2>&1; else echo "nvidia-smi: not here"; fi
  echo "glibc: $(getconf GNU_LIBC_VERSION 2>/dev/null)"
  echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
  local f
  for f in "$BIN/dapo-learner" "$TESTS/test_backend_conformance"; do
    [ -x "$f" ] || { echo "machine: $f is missing (DAPO_BIN / DAPO_TESTS, or unpack the bundle again)"; return 1; }
  done
  ldd "$BIN/dapo-learner" | grep -E 'not found|cuda|cublas|nccl|openblas|zmq' || true
  ! ldd "$BIN/dapo-learner" "$TESTS/test_backend_conformance" | grep -q 'not found'
}

tools() {
  local b
  for b in "$BIN"/*; do "$b" --help > /dev/null || { echo "$b --help failed"; return 1; }; echo "ok $(basename "$b") --help"; done
}

conformance() { DAPO_ROOT=$ROOT "$TESTS/test_backend_conformance"; }

# 2 steps of the default run on a fresh tiny model, trainer.device=cpu, on ports from 47100, stopped in order
cluster() {
  local dir rc=0
  dir=$(mktemp -d "${TMPDIR:-/tmp}/dapo-gpu-cluster.XXXXXX")
  "$BIN/dapo-init-model" --config configs/tiny-model/config.json --tokenizer data/tokenizers/tiny --out "$dir/model" || return 1
  BUILD=$(dirname "$BIN") deploy/local/run.sh --run-dir "$dir/run" --port-base "${GPU_CHECK_PORT_BASE:-47100}" \
    --steps 2 trainer.device=cpu "actor_rollout_ref.model.path=$dir/model" data.train_batch_size=4 data.gen_batch_size=4 \
    actor_rollout_ref.rollout.n=4 actor_rollout_ref.actor.ppo_mini_batch_size=2 data.max_response_length=24 \
    reward_model.overlong_buffer.len=8 algorithm.filter_groups.enable=false trainer.val_before_train=false \
    trainer.save_freq=2 > "$dir/launch.log" 2>&1 &
  local L=$!
  for _ in $(seq 400); do
    grep -q "training finished after 2 steps" "$dir/run/logs/coordinator.log" 2>/dev/null && break
    kill -0 "$L" 2>/dev/null || break
    sleep 0.1
  done
  grep -q "training finished after 2 steps" "$dir/run/logs/coordinator.log" 2>/dev/null || rc=1
  kill -TERM "$L" 2>/dev/null; wait "$L" 2>/dev/null
  cat "$dir/launch.log"
  grep -h "step 2 done" "$dir/run/logs/coordinator.log" || true
  [ "$rc" = 0 ] && echo "cluster: 2 steps trained with trainer.device=cpu" && rm -rf "$dir"
  return $rc
}

check() { "$BIN/dapo-gpu-check" "$1" --seed "$SEED" --peak-tflops "$PEAK" --out "$DEST/results.jsonl"; }

export ROOT BIN TESTS DEST PEAK SEED
export -f machine tools conformance cluster check
say "results in $DEST (seed $SEED, $( [ "$gpu" = 1 ] && echo "GPU here" || echo "CPU parts only"))"
part machine cpu 10 machine
cat "$DEST/machine.log" > "$DEST/machine.txt" 2>/dev/null
part tools cpu 10 tools
part conformance cpu 45 conformance
part cluster cpu 50 cluster
part kernels gpu 60 check kernels
part model gpu 45 check model
part bench gpu 60 check bench
export -f py
if command -v python3 > /dev/null && timeout -k 2 60 bash -c 'py -c "import torch"' 2>/dev/null; then
  part baseline gpu 75 py bench/gpu/baseline_torch.py
elif [ "$gpu" = 1 ] && [[ " ${parts[*]} " == *" baseline "* ]]; then
  echo '{"part": "baseline", "status": "failed", "why": "python3 with torch is not here", "seconds": 0}' >> "$DEST/parts.jsonl"
  say "baseline: failed (python3 with torch is not here)"; status=1
fi

if command -v python3 > /dev/null && [ "$gpu" = 1 ]; then
py - "$DEST" "$SEED" "$PEAK" <<'PY' || status=1
import json, sys, os, datetime
dest, seed, peak = sys.argv[1], sys.argv[2], float(sys.argv[3])
def grab(path, tag):
    try:
        for line in open(path):
            if line.startswith(tag + " "):
                return json.loads(line[len(tag) + 1:])
    except OSError:
        pass
    return {}
ours = grab(os.path.join(dest, "bench.log"), "BENCHJSON")
base = grab(os.path.join(dest, "baseline.log"), "BASEJSON")
checks = [json.loads(l) for l in open(os.path.join(dest, "results.jsonl")) if '"check"' in l]
npass = sum(c["pass"] for c in checks)
lines = [f"GPU check {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC, seed {seed}: {npass}/{len(checks)} checks passed"]
for c in checks:
    if not c["pass"]:
        lines.append(f"  FAILED {c['part']}/{c['check']}: {c['metric']} {c['value']:.3e} > tol {c['tol']:.1e}")
def f(x, fmt="{:,.0f}"):
    return fmt.format(x) if isinstance(x, (int, float)) else "n/a"
def ratio(a, b):
    return f"{a / b:.2f}" if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b > 0 else "n/a"
mfu_base = None
if base.get("train_tokens_per_s") and ours.get("flops_per_token"):
    mfu_base = base["train_tokens_per_s"] * ours["flops_per_token"] / (peak * 1e12)
lines += ["",
          f"{'Qwen2.5-0.5B shape, random weights':40s} {'dapo (CUDA)':>14s} {'PyTorch (' + base.get('impl', '?') + ')':>22s} {'ratio':>7s}",
          f"{'train tokens/s (8 x 1024 packed)':40s} {f(ours.get('train_tokens_per_s')):>14s} {f(base.get('train_tokens_per_s')):>22s} {ratio(ours.get('train_tokens_per_s'), base.get('train_tokens_per_s')):>7s}",
          f"{'train MFU (peak %.0f TFLOPS bf16)' % peak:40s} {f(100 * ours['mfu'] if 'mfu' in ours else None, '{:.2f}%'):>14s} {f(100 * mfu_base if mfu_base else None, '{:.2f}%'):>22s}",
          f"{'decode tokens/s (64 seqs, 128+128)':40s} {f(ours.get('decode_tokens_per_s')):>14s} {f(base.get('decode_tokens_per_s')):>22s} {ratio(ours.get('decode_tokens_per_s'), base.get('decode_tokens_per_s')):>7s}"]
text = "\n".join(lines)
print(text)
open(os.path.join(dest, "table.txt"), "w").write(text + "\n")
json.dump(dict(ours=ours, baseline=base, checks_passed=npass, checks=len(checks), seed=seed), open(os.path.join(dest, "summary.json"), "w"), indent=1)
print(f"BENCH gpu_train ours={ours.get('train_tokens_per_s', 0):.1f} baseline={base.get('train_tokens_per_s', 0):.1f} ratio={ratio(ours.get('train_tokens_per_s'), base.get('train_tokens_per_s'))}")
sys.exit(0 if checks and npass == len(checks) and ours and base else 1)
PY
fi
if [ "$want_gpu" = 1 ] && [ "$gpu" = 0 ]; then
  say "no GPU checked ($nogpu: no nvidia-smi -L, no /dev/nvidia0): the GPU parts did not run; --cpu-only runs the CPU parts alone"
  status=1
fi
say "done (status $status); results in $DEST"
exit $status
