#!/usr/bin/env bash
# bench/gpu_check.sh: the one-shot GPU check of the CUDA backend (issue 10). Run from the repository root on a machine
# with an NVIDIA GPU (written for one H200; budget < 8 minutes including the build):
#   1. builds everything with `make CUDA=1` (into $BUILD, default build-gpu), nvcc sm_90 + PTX;
#   2. build/bin/dapo-gpu-check kernels : every CUDA kernel vs the CPU backend on fresh random inputs (bf16 tolerances);
#   3. tests/unit/test_backend_conformance: the backend conformance suite of `make test`, which on this machine also
#                                         runs for backend_cuda (forward, gradients, AdamW, save/load vs transformers);
#      build/bin/dapo-gpu-check model   : whole forward, backward, grad norm, AdamW step of a small random Qwen2,
#                                         the one model loop on backend_cuda vs backend_cpu; one-rank NCCL;
#   4. build/bin/dapo-gpu-check bench   : Qwen2.5-0.5B-shaped random weights: training tokens/s + MFU (decode tokens/s
#                                         needs the rollout engine on CUDA: the GPU issue);
#   5. bench/gpu/baseline_torch.py      : PyTorch (transformers, sdpa, autocast bf16, fused AdamW; generate) on the same
#                                         GPU, same shapes, same run;
#   6. prints a table (ours vs PyTorch) and writes everything under $OUT/gpu_check (the device tool's output folder;
#      bench/gpu/out/gpu_check when OUT is unset): build.log, check.log, results.jsonl, baseline.log, table.txt,
#      summary.json.
# Exit status: 0 when every check passed and both benchmarks ran, 1 otherwise. NaN never passes a check.
# Usage: bench/gpu_check.sh            (PEAK_TFLOPS=989 by default: H100/H200 SXM dense bf16; SEED=N to repeat inputs)
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
DEST=${OUT:-$ROOT/bench/gpu/out}/gpu_check
BUILD=${BUILD:-build-gpu}
PEAK=${PEAK_TFLOPS:-989}
SEED=${SEED:-$(date +%s)}
mkdir -p "$DEST"
: > "$DEST/results.jsonl"
T0=$(date +%s)
say() { echo "[gpu_check +$(( $(date +%s) - T0 ))s] $*"; }
status=0

say "device"
(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1; nvcc --version 2>&1 | tail -2) | tee "$DEST/device.txt"

say "build: make CUDA=1 -j$(nproc) BUILD=$BUILD all"
if ! make CUDA=1 -j"$(nproc)" BUILD="$BUILD" all "$BUILD/tests/test_backend_conformance" > "$DEST/build.log" 2>&1; then
    tail -30 "$DEST/build.log"
    say "BUILD FAILED (full log: $DEST/build.log)"
    exit 1
fi
grep -E "warning:" "$DEST/build.log" | head -5
say "built ($(grep -c 'nvcc ' "$DEST/build.log") nvcc compiles)"

run_part() {   # part, timeout seconds
    say "dapo-gpu-check $1"
    timeout "$2" "$BUILD/bin/dapo-gpu-check" "$1" --seed "$SEED" --peak-tflops "$PEAK" --out "$DEST/results.jsonl" \
        2>&1 | tee -a "$DEST/check.log"
    local rc=${PIPESTATUS[0]}
    [ "$rc" = 0 ] || { say "part $1: exit status $rc"; status=1; }
}
run_part kernels 120
say "backend conformance suite (CPU and CUDA)"
DAPO_ROOT=$ROOT timeout 120 "$BUILD/tests/test_backend_conformance" > "$DEST/conformance.log" 2>&1 ||
    { say "conformance suite failed"; status=1; }
grep -E "^\[  (PASSED|FAILED)|not run|relative L2|outside" "$DEST/conformance.log" | head -20
run_part model 120
run_part bench 200

say "PyTorch baseline (bench/gpu/baseline_torch.py)"
if python3 -c "import torch, transformers, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    timeout 240 python3 bench/gpu/baseline_torch.py > "$DEST/baseline.log" 2>&1 || { say "baseline failed"; status=1; }
else
    echo "torch with CUDA is not importable here: no baseline" > "$DEST/baseline.log"
    status=1
fi
tail -3 "$DEST/baseline.log"

python3 - "$DEST" "$SEED" "$PEAK" <<'PY'
import json, re, sys, os, datetime
dest, seed, peak = sys.argv[1], sys.argv[2], float(sys.argv[3])
def grab(path, tag):
    try:
        for line in open(path):
            if line.startswith(tag + " "):
                return json.loads(line[len(tag) + 1:])
    except OSError:
        pass
    return {}
ours = grab(os.path.join(dest, "check.log"), "BENCHJSON")
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
          f"{'Qwen2.5-0.5B shape, random weights':40s} {'dapo (CUDA)':>14s} {'PyTorch':>14s} {'ratio':>7s}",
          f"{'train tokens/s (8 x 1024 packed)':40s} {f(ours.get('train_tokens_per_s')):>14s} {f(base.get('train_tokens_per_s')):>14s} {ratio(ours.get('train_tokens_per_s'), base.get('train_tokens_per_s')):>7s}",
          f"{'train MFU (peak %.0f TFLOPS bf16)' % peak:40s} {f(100 * ours['mfu'] if 'mfu' in ours else None, '{:.2f}%'):>14s} {f(100 * mfu_base if mfu_base else None, '{:.2f}%'):>14s}",
          f"{'decode tokens/s (64 seqs, 128+128)':40s} {f(ours.get('decode_tokens_per_s')):>14s} {f(base.get('decode_tokens_per_s')):>14s} {ratio(ours.get('decode_tokens_per_s'), base.get('decode_tokens_per_s')):>7s}",
          f"{'prefill tokens/s':40s} {f(ours.get('prefill_tokens_per_s')):>14s} {f(64 * 128 / base['prefill_s'] if base.get('prefill_s') else None):>14s}"]
text = "\n".join(lines)
print(text)
open(os.path.join(dest, "table.txt"), "w").write(text + "\n")
json.dump(dict(ours=ours, baseline=base, checks_passed=npass, checks=len(checks), seed=seed), open(os.path.join(dest, "summary.json"), "w"), indent=1)
print(f"BENCH gpu_decode ours={ours.get('decode_tokens_per_s', 0):.1f} baseline={base.get('decode_tokens_per_s', 0):.1f} ratio={ratio(ours.get('decode_tokens_per_s'), base.get('decode_tokens_per_s'))}")
print(f"BENCH gpu_train ours={ours.get('train_tokens_per_s', 0):.1f} baseline={base.get('train_tokens_per_s', 0):.1f} ratio={ratio(ours.get('train_tokens_per_s'), base.get('train_tokens_per_s'))}")
sys.exit(0 if checks and npass == len(checks) and ours and base else 1)
PY
[ $? = 0 ] || status=1
say "done (status $status); results in $DEST"
exit $status
