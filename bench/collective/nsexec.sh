#!/bin/bash
# bench/collective/nsexec.sh NS CMD...: runs one MPI rank inside network namespace NS for bench/collective/run.sh. Its
# PMIx server (mpirun, listening on the host's 127.0.0.1, which NS cannot reach) is reached through two socat relays:
# NS's 127.0.0.1:PORT -> NS_HOST_IP:RELAY (the bridge's address on the host) -> the host's 127.0.0.1:PORT.
ns=$1; shift
uri=${PMIX_SERVER_URI41:-${PMIX_SERVER_URI4:-${PMIX_SERVER_URI3:-$PMIX_SERVER_URI2}}}
port=${uri##*:}
relay=$((20000 + ${OMPI_COMM_WORLD_RANK:-0} + (port % 1000) * 8))
socat TCP-LISTEN:$relay,bind=$NS_HOST_IP,fork,reuseaddr TCP:127.0.0.1:$port & r1=$!
ip netns exec "$ns" socat TCP-LISTEN:$port,bind=127.0.0.1,fork,reuseaddr TCP:$NS_HOST_IP:$relay & r2=$!
sleep 0.3
ip netns exec "$ns" "$@"; rc=$?
kill $r1 $r2 2>/dev/null
exit $rc
