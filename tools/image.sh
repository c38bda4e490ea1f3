#!/usr/bin/env bash
# Builds an OCI image of a release folder (tools/release.sh) with Debian's
# podman: FROM scratch, the release in /llama, glibc's loader and libraries
# (tools/glibc_root.sh: all the release takes from a system), an empty /tmp
# and a HOME. No registry and no base image: nothing is pulled. The
# launcher is the entrypoint, so `podman run IMAGE serve ...` is
# `launcher serve ...`; deploy/kubernetes runs it on a cluster.
#
#   tools/image.sh <release folder> [tag]     (tag: localhost/llama2-cpp:latest)
#
# PODMAN overrides the command, e.g. PODMAN="podman --storage-driver=vfs"
# where overlay mounts are not allowed (tests/release/check_image.sh).
set -euo pipefail
release="$(cd "${1:?usage: tools/image.sh <release folder> [tag]}" && pwd)"
tag="${2:-localhost/llama2-cpp:latest}"
read -r -a podman <<<"${PODMAN:-podman}"
command -v "${podman[0]}" >/dev/null || { echo "image: no ${podman[0]} (Debian's podman package)" >&2; exit 1; }
[[ -x "$release/launcher" ]] || { echo "image: $release holds no launcher: not a release folder" >&2; exit 1; }

context="$(mktemp -d)"
trap 'rm -rf "$context"' EXIT
mkdir -p "$context/root/llama" "$context/root/tmp" "$context/root/home"
chmod 1777 "$context/root/tmp"
cp -a "$release/." "$context/root/llama/"
"$(dirname "${BASH_SOURCE[0]}")/glibc_root.sh" "$context/root"
cat >"$context/Containerfile" <<'CONTAINERFILE'
FROM scratch
COPY root/ /
ENV PATH=/llama HOME=/home TMPDIR=/tmp
WORKDIR /home
EXPOSE 8000
ENTRYPOINT ["/llama/launcher"]
CONTAINERFILE
"${podman[@]}" build --quiet --tag "$tag" --file "$context/Containerfile" "$context" >/dev/null
echo "image: $tag, $("${podman[@]}" image inspect --format '{{.Size}}' "$tag" | numfmt --to=iec) from $release"
