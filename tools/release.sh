#!/usr/bin/env bash
# Writes a release folder that runs on any x86-64 Linux with a glibc at
# least as new as this machine's (2.36, Debian 12): no package to install,
# no path of this machine.
#
#   tools/release.sh <folder>      (then copy the folder anywhere, e.g. shared storage)
#
# The folder holds launcher, worker, convert, inspect, tokenize and bench,
# built with --config=portable (Debian's static archives linked in), and
# beside them every shared library they load that is not glibc's (Debian
# ships SentencePiece, libcurl and cpp-httplib only as shared objects;
# libstdc++, OpenSSL and what they need travel too). The binaries find them
# through an RPATH of $ORIGIN, which the loader applies to libraries'
# dependencies too (unlike RUNPATH). The CUDA libraries are not in it:
# the worker opens them at run time where a GPU run asks for them
# (ops/cuda/cuda_libraries.h) and runs --device=cpu without them.
# tests/release/check_release.sh runs the folder in an empty root.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source tools/bazel_outputs.sh

out="${1:?usage: tools/release.sh <folder>}"
readonly TARGETS=(//launcher //worker //tools:convert //tools:inspect //tools:tokenize //tools:bench)
readonly FLAGS=(--config=portable --linkopt=-Wl,--disable-new-dtags)
./bazelw build "${FLAGS[@]}" "${TARGETS[@]}"
binaries="$(bazel_outputs "${FLAGS[@]}" "${TARGETS[@]}")"
[[ $(wc -l <<<"$binaries") -eq ${#TARGETS[@]} ]] ||
  { echo "release: expected one file per target, Bazel lists: $binaries" >&2; exit 1; }

# Built beside the destination and renamed into place: never half a release.
staging="${out%/}.partial"
rm -rf "$staging"
mkdir -p "$staging"
xargs cp -t "$staging/" <<<"$binaries"
chmod u+w "$staging"/*
strip "$staging"/*
# glibc's own libraries stay the system's: they must match its loader.
readonly GLIBC='/(libc|libm|libpthread|libdl|librt|libresolv|libutil|ld-linux-x86-64)\.so'
for binary in "$staging"/*; do
  ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// {print $3}'
done | grep -v -E "$GLIBC" | sort -u | xargs -r cp -L -t "$staging/"
for binary in "$staging"/*; do
  if ldd "$binary" | grep -q 'not found'; then
    echo "release: $(basename "$binary") lacks a library:" >&2
    ldd "$binary" | grep 'not found' >&2
    exit 1
  fi
done
# The README and the manuals it links to (docs/), so its links hold.
cp "$(dirname "${BASH_SOURCE[0]}")/../README.md" "$staging/"
cp -r "$(dirname "${BASH_SOURCE[0]}")/../docs" "$staging/"
rm -rf "$out"
mv "$staging" "$out"
echo "release: $(ls "$out" | wc -l) files, $(du -sh "$out" | cut -f1), in $out"
