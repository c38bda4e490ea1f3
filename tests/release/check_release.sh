#!/usr/bin/env bash
# Runs a release folder (tools/release.sh) in an empty root: a chroot that
# holds the folder, glibc's libraries and its loader, and nothing else of
# this machine (no /usr, no /etc; /proc, /dev and an empty /tmp are
# mounted, as any Linux has them). Needs root (chroot, mounts).
#
#   tests/release/check_release.sh <release folder>
#
# Cases: each binary starts (--version); the demo job (a small random
# checkpoint made, converted and run) on 1 rank and on 2 ranks (rendezvous
# over TCP, the TCP collective) prints the same text in the empty root as
# the same release on this machine. Ends with "N passed, N failed".
set -uo pipefail
release="$(cd "${1:?usage: $0 <release folder>}" && pwd)"
[[ $(id -u) -eq 0 ]] || { echo "check_release: needs root (chroot, mount); skipped"; echo "0 passed, 1 failed"; exit 1; }

root="$(mktemp -d)"
cleanup() {
  umount "$root/proc" "$root/dev" 2>/dev/null
  rm -rf --one-file-system "$root"
}
trap cleanup EXIT
mkdir -p "$root"/{llama,tmp,home,proc,dev}
chmod 1777 "$root/tmp"
cp -a "$release/." "$root/llama/"
"$(dirname "${BASH_SOURCE[0]}")/../../tools/glibc_root.sh" "$root"
echo "check_release: an empty root of $(du -sh "$root" | cut -f1), the release and: $(cd "$root" && find . -type f | grep -v '^./llama/' | sort | tr '\n' ' ')"
mount -t proc proc "$root/proc" && mount --bind /dev "$root/dev" || { echo "check_release: cannot mount"; exit 1; }
chroot="$(command -v chroot)" || { echo "check_release: no chroot"; echo "0 passed, 1 failed"; exit 1; }

passed=0 failed=0
record() {  # name, status (0 = pass), detail
  if [[ $2 -eq 0 ]]; then passed=$((passed + 1)); echo "check_release: pass: $1"
  else failed=$((failed + 1)); echo "check_release: FAIL: $1: $3"; fi
}
in_root() {  # command...: run in the empty root with a bare environment
  env -i HOME=/home PATH=/llama TMPDIR=/tmp "$chroot" "$root" "$@"
}

for binary in launcher worker convert inspect tokenize bench; do
  version=$(in_root "/llama/$binary" --version 2>&1)
  record "$binary starts" $? "$version"
done
for nproc in 1 2; do
  job=(--nproc_per_node=$nproc --max_gen_len=16)
  inside=$(timeout 300 env -i HOME=/home PATH=/llama TMPDIR=/tmp "$chroot" "$root" /llama/launcher "${job[@]}" 2>"$root/tmp/err")
  rc=$?
  host_home="$(mktemp -d)"
  outside=$(timeout 300 env -i HOME="$host_home" PATH=/usr/bin:/bin "$release/launcher" "${job[@]}" 2>/dev/null)
  rm -rf "$host_home"
  if [[ $rc -ne 0 ]]; then
    record "demo job on $nproc rank(s)" 1 "exit $rc: $(tail -n 5 "$root/tmp/err")"
  elif [[ "$inside" != "$outside" || -z "$inside" ]]; then
    record "demo job on $nproc rank(s)" 1 "its text differs from the same job outside the root"
  else
    record "demo job on $nproc rank(s)" 0 ""
    echo "$inside" | head -n 4 | sed 's/^/check_release:   /'
  fi
done
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
