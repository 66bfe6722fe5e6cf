#!/usr/bin/env bash
# bench/collective/run.sh: the CPU collective's bandwidth (common/collective: the ring) beside Debian OpenMPI on the
# same transport, in the same run: all-reduce, reduce-scatter and all-gather of fp32 buffers (SIZES, 4 MB to 1 GB by
# default) at W = 2 and 4 ranks, one process per rank, over loopback and across network namespaces (one namespace
# per rank on a bridge, veth links; created here and removed on exit; needs root, else skipped). OpenMPI runs with
# `--mca btl self,tcp` (TCP only, as ours) and is installed here when missing (apt-get; a benchmark-only package).
# Prints one line per (implementation, op, W, size) (bench_collective.c: nccl-tests' algbw/busbw), a table of
# ours / MPI bus bandwidth, and last:
#   BENCH collective ours=<busbw GB/s> baseline=<MPI busbw GB/s> ratio=<ours/MPI>
# for all-reduce at W = 4 on loopback, the largest size.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
BUILD=${BUILD:-build}
SIZES=${SIZES:-4M,16M,64M,256M,1G}
ITERS=${ITERS:-3}
WORLDS=${WORLDS:-2 4}
TRANSPORTS=${TRANSPORTS:-loopback netns}

. bench/env.sh
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1          # one process per rank: the ranks share the cores

if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null || ! command -v socat >/dev/null; then
  echo "installing OpenMPI (openmpi-bin libopenmpi-dev) and socat for the baseline"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q openmpi-bin libopenmpi-dev socat >/dev/null
fi
echo "OpenMPI: $(mpirun --allow-run-as-root --version 2>/dev/null | head -1)"
tmp=$(mktemp -d)
ns_made=()
cleanup() {
  for n in "${ns_made[@]}"; do ip netns del "$n" 2>/dev/null || true; done
  ip link del dapobenchbr0 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
make -s BUILD="$BUILD" "$BUILD/bench/bench_collective"
mpicc -O2 bench/collective/mpi_collective.c -o "$tmp/mpi_collective"
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --mca btl self,tcp -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS)

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Namespaces dapobench0..3 on a bridge, 10.231.77.(1+r)/24.
make_netns() {
  ip link add dapobenchbr0 type bridge && ip link set dapobenchbr0 up
  ip addr add 10.231.77.254/24 dev dapobenchbr0             # the host's side: MPI's PMIx relay (nsexec.sh)
  for r in 0 1 2 3; do
    n=dapobench$r
    ip netns add $n && ns_made+=("$n")
    ip link add dbv$r type veth peer name eth0 netns $n
    ip link set dbv$r master dapobenchbr0 up
    ip -n $n addr add 10.231.77.$((1 + r))/24 dev eth0
    ip -n $n link set eth0 up && ip -n $n link set lo up
  done
}

ours() {   # transport W
  local t=$1 W=$2 port ep
  port=$(free_port)
  if [ "$t" = loopback ]; then ep="tcp://127.0.0.1:$port"; else ep="tcp://10.231.77.1:$port"; fi
  for ((r = 0; r < W; r++)); do
    if [ "$t" = loopback ]; then pre=(); else pre=(ip netns exec dapobench$r); fi
    "${pre[@]}" "$BUILD/bench/bench_collective" --rank $r --world $W --endpoint "$ep" --sizes "$SIZES" --iters "$ITERS" \
      > "$tmp/ours_${t}_${W}_$r.txt" 2> "$tmp/ours_${t}_${W}_$r.err" &
  done
  wait
  sed "s/^OURS /OURS transport=$t /" "$tmp/ours_${t}_${W}_0.txt"
  grep -v ' WARN ' "$tmp"/ours_${t}_${W}_*.err >&2 || true
}

mpi() {    # transport W
  local t=$1 W=$2
  if [ "$t" = loopback ]; then
    "${MPIRUN[@]}" -np $W "$tmp/mpi_collective" --sizes "$SIZES" --iters "$ITERS"
  else
    local app=()
    for ((r = 0; r < W; r++)); do
      [ $r -gt 0 ] && app+=(:)
      app+=(-np 1 bench/collective/nsexec.sh dapobench$r "$tmp/mpi_collective" --sizes "$SIZES" --iters "$ITERS")
    done
    NS_HOST_IP=10.231.77.254 "${MPIRUN[@]}" -x NS_HOST_IP --mca btl_tcp_if_include 10.231.77.0/24 "${app[@]}"
  fi | sed "s/^MPI /MPI transport=$t /"
}

: > "$tmp/all.txt"
for t in $TRANSPORTS; do
  if [ "$t" = netns ]; then
    if [ "$(id -u)" != 0 ] || ! make_netns 2>/dev/null; then echo "netns: skipped (needs root and ip netns)"; continue; fi
  fi
  for W in $WORLDS; do
    echo "== $t, W=$W: ours (the ring)"
    ours $t $W | tee -a "$tmp/all.txt"
    echo "== $t, W=$W: OpenMPI ($t, btl self,tcp)"
    mpi $t $W | tee -a "$tmp/all.txt" || echo "MPI on $t failed"
  done
done
python3 - "$tmp/all.txt" <<'PY'
import sys, re
rows = {}
for line in open(sys.argv[1]):
    m = dict(re.findall(r'(\w+)=(\S+)', line))
    if 'busbw' not in m: continue
    who = line.split()[0]
    rows[(who, m['transport'], m['op'], int(m['W']), int(float(m['bytes'])))] = float(m['busbw'])
print(f"{'transport':9} {'op':15} {'W':>2} {'MB':>6} {'ours GB/s':>10} {'MPI GB/s':>9} {'ratio':>6}")
best = None
for (who, t, op, W, b), v in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][3], kv[0][4])):
    if who != 'OURS': continue
    base = rows.get(('MPI', t, op, W, b))
    r = v / base if base else float('nan')
    print(f"{t:9} {op:15} {W:>2} {b / 2**20:>6.0f} {v:>10.3f} {base if base else float('nan'):>9.3f} {r:>6.2f}")
    if t == 'loopback' and op == 'allreduce' and W == max(k[3] for k in rows) and (best is None or b > best[0]):
        best = (b, v, base)
if best and best[2]:
    print(f"BENCH collective ours={best[1]:.3f} baseline={best[2]:.3f} ratio={best[1] / best[2]:.2f}")
else:
    print("BENCH collective ours=nan baseline=nan ratio=nan")
PY
