#!/usr/bin/env bash
# deploy/kubernetes's manifests against their schemas (validate_manifests.py):
# LeaderWorkerSet's CRD, Kubernetes' API types, the launcher's own flags.
set -euo pipefail
launcher="$1"
here=deploy/kubernetes
tools="${XDG_CACHE_HOME:-$HOME/.cache}/llama2-cpp/node-tools"
exec /usr/bin/python3 "$here/validate_manifests.py" "$launcher" "$tools" \
  "$here/testdata/leaderworkerset-v1.schema.json.gz" \
  "$here/deployment.yaml" "$here/leaderworkerset.yaml" "$here/secret.yaml"
