#!/usr/bin/env bash
# deploy/k8s/make-secrets.sh: makes the files the kustomize base turns into Secrets, in deploy/k8s/base/secrets/
# (never committed): a CURVE server pair and one key per role (dapo-keygen --client learner|rollout|verifier: a
# role's key registers any worker of that role, so a scaled StatefulSet shares one Secret) and a dashboard token.
# Keeps keys that are there (dapo-keygen never overwrites); delete base/secrets/ to make new ones.
#   deploy/k8s/make-secrets.sh            (dapo-keygen from build/bin, or DAPO_KEYGEN=path, or on PATH)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out="$here/base/secrets"
keygen=${DAPO_KEYGEN:-}
[ -n "$keygen" ] || { [ -x "$here/../../build/bin/dapo-keygen" ] && keygen="$here/../../build/bin/dapo-keygen"; } || true
[ -n "$keygen" ] || keygen=$(command -v dapo-keygen) || { echo "make-secrets.sh: no dapo-keygen (make, or DAPO_KEYGEN=)" >&2; exit 2; }
want="server.pub server.key learner.key rollout.key verifier.key authorized_keys/learner.pub authorized_keys/rollout.pub
      authorized_keys/verifier.pub"
if [ -f "$out/server.pub" ]; then
  for f in $want; do
    [ -s "$out/$f" ] || { echo "make-secrets.sh: $out holds some keys but not $f: delete $out and run again" >&2; exit 2; }
  done
  echo "make-secrets.sh: keeping the keys in $out (delete it for new ones)"
else
  "$keygen" --dir "$out" --server --client learner --client rollout --client verifier
fi
if [ ! -s "$out/token" ]; then
  (umask 077; od -An -N16 -tx1 /dev/urandom | tr -d ' \n' > "$out/token")
fi
echo "make-secrets.sh: secrets in $out (the dashboard token: $out/token)"
