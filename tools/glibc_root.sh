#!/usr/bin/env bash
# Copies into <root> what a release folder (tools/release.sh) takes from the
# system it runs on: glibc's loader and libraries, which must match each
# other and so never travel in the release itself. For an empty root
# (tests/release/check_release.sh) and a FROM-scratch image (tools/image.sh).
#
#   tools/glibc_root.sh <root>
set -euo pipefail
root="${1:?usage: tools/glibc_root.sh <root>}"
mkdir -p "$root/lib64" "$root/lib/x86_64-linux-gnu"
cp -L /lib64/ld-linux-x86-64.so.2 "$root/lib64/"
for lib in libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 librt.so.1 libresolv.so.2; do
  cp -L "/lib/x86_64-linux-gnu/$lib" "$root/lib/x86_64-linux-gnu/"
done
