#!/usr/bin/env bash
# Builds the OCI image of a release folder (tools/image.sh) and runs it with
# Debian's podman: the demo job prints the text the same release prints
# outside, and `serve` answers /health and a completion, then drains on
# SIGTERM (podman stop) and exits 0. Needs root.
#
#   tests/release/check_image.sh <release folder>
#
# Podman runs here with its own storage in a temporary folder (vfs: no
# overlay mounts needed), Debian's runc as the runtime (crun fails on
# hybrid cgroups) and no default rlimits (setting them is refused in some
# VMs); host networking, so the server's port is the host's. Ends with
# "N passed, N failed".
set -uo pipefail
release="$(cd "${1:?usage: $0 <release folder>}" && pwd)"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
[[ $(id -u) -eq 0 ]] || { echo "check_image: needs root; skipped"; echo "0 passed, 1 failed"; exit 1; }
command -v podman >/dev/null || { echo "check_image: no podman"; echo "0 passed, 1 failed"; exit 1; }

state="$(mktemp -d)"
cat >"$state/containers.conf" <<'CONF'
[containers]
default_ulimits = []
CONF
export CONTAINERS_CONF="$state/containers.conf"
runtime="$(command -v runc || true)"
PODMAN="podman --root=$state/storage --runroot=$state/run --storage-driver=vfs ${runtime:+--runtime=$runtime}"
read -r -a podman <<<"$PODMAN"
tag=localhost/llama2-cpp-check:latest
cleanup() {
  "${podman[@]}" rm --force --all >/dev/null 2>&1
  "${podman[@]}" rmi --force --all >/dev/null 2>&1
  rm -rf "$state"
}
trap cleanup EXIT

passed=0 failed=0
record() {  # name, status (0 = pass), detail
  if [[ $2 -eq 0 ]]; then passed=$((passed + 1)); echo "check_image: pass: $1"
  else failed=$((failed + 1)); echo "check_image: FAIL: $1: $3"; fi
}

built=$(PODMAN="$PODMAN" "$here/tools/image.sh" "$release" "$tag" 2>&1)
record "the image builds (tools/image.sh)" $? "$built"
echo "check_image: $built"

job=(--nproc_per_node=2 --max_gen_len=16)
inside=$(timeout 300 "${podman[@]}" run --rm --network=host "$tag" "${job[@]}" 2>"$state/job.err")
rc=$?
host_home="$(mktemp -d)"
outside=$(timeout 300 env -i HOME="$host_home" PATH=/usr/bin:/bin "$release/launcher" "${job[@]}" 2>/dev/null)
rm -rf "$host_home"
if [[ $rc -ne 0 ]]; then
  record "the demo job in the image" 1 "exit $rc: $(tail -n 5 "$state/job.err")"
elif [[ "$inside" != "$outside" || -z "$inside" ]]; then
  record "the demo job in the image" 1 "its text differs from the same job outside the image"
else
  record "the demo job in the image" 0 ""
fi

port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"${podman[@]}" run -d --name=serve --network=host "$tag" serve --nproc_per_node=1 --port="$port" >/dev/null 2>"$state/serve.err"
health=""
for _ in $(seq 1 300); do
  health=$(curl -s "http://127.0.0.1:$port/health" || true)
  [[ "$health" == *'"ok"'* ]] && break
  sleep 0.5
done
answer=$(curl -s "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
  -d '{"model": "demo", "prompt": "Hello", "max_tokens": 5, "temperature": 0}')
if [[ "$health" == *'"ok"'* && "$answer" == *'"completion_tokens":5'* ]]; then
  record "serve in the image answers /health and a completion" 0 ""
else
  record "serve in the image answers /health and a completion" 1 \
    "health: $health; answer: $answer; $("${podman[@]}" logs serve 2>&1 | tail -n 5)"
fi
"${podman[@]}" stop --time=60 serve >/dev/null 2>&1
code=$("${podman[@]}" inspect --format '{{.State.ExitCode}}' serve 2>/dev/null)
logs=$("${podman[@]}" logs serve 2>&1)
if [[ "$code" == 0 && "$logs" == *"the server drained and stopped"* ]]; then
  record "serve in the image drains on SIGTERM and exits 0" 0 ""
else
  record "serve in the image drains on SIGTERM and exits 0" 1 "exit code $code: $(tail -n 3 <<<"$logs")"
fi
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
