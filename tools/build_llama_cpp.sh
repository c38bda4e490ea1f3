#!/usr/bin/env bash
# Builds the llama.cpp that users install today, natively for this CPU: the
# source the node-llama-cpp npm package carries (llama/gitRelease.bundle,
# installed by third_party/setup.sh), cloned and built with cmake
# -DGGML_NATIVE=ON (its AVX-512/VNNI/AMX repacking included where the CPU
# has them). Only the tools we measure against: llama-bench,
# llama-batched-bench, llama-quantize, llama-perplexity and llama-lookup
# (n-gram speculative decoding). Prints the folder holding them (for
# LLAMA_CPP= of tools/compare_llama_cpp.sh and
# tools/compare_llama_cpp_lookup.sh) on its last line, after the build's identity
# (package version, commit and date, the CPU it was built on) on stderr. By hand or from the compare script, not
# in CI: ~15 minutes on 2 cores, once per package version and CPU.
#
#   tools/build_llama_cpp.sh [out_dir]
set -euo pipefail
tools="${XDG_CACHE_HOME:-$HOME/.cache}/llama2-cpp/node-tools"
package="$tools/node_modules/node-llama-cpp"
bundle="$package/llama/gitRelease.bundle"
[[ -f $bundle ]] || { echo "build_llama_cpp: $bundle is missing; run third_party/setup.sh first" >&2; exit 1; }
version=$(sed -nE 's/^ *"version": "([^"]+)".*/\1/p' "$package/package.json" | head -1)
# The CPU's vector features are part of the name: GGML_NATIVE builds for
# the machine it runs on, and sessions move between CPUs.
features=$(grep -m1 -o 'avx512_vnni\|avx_vnni\|amx_int8' /proc/cpuinfo | sort -u | tr '\n' '-' || true)
out=${1:-"${XDG_CACHE_HOME:-$HOME/.cache}/llama2-cpp/llama.cpp-$version-${features:-avx2-}native"}
if [[ ! -f $out/build/CMakeCache.txt ]]; then
  rm -rf "$out"
  git clone -q "$bundle" "$out/src" 2>/dev/null
  cmake -S "$out/src" -B "$out/build" -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DCMAKE_BUILD_TYPE=Release >"$out/cmake.log" 2>&1
fi
# A build made before a tool was added to the list gets just that tool.
missing=()
for target in llama-bench llama-batched-bench llama-quantize llama-perplexity llama-lookup; do
  [[ -x $out/build/bin/$target ]] || missing+=("$target")
done
if (( ${#missing[@]} > 0 )); then
  cmake --build "$out/build" -j"$(nproc)" --target "${missing[@]}" >"$out/build.log" 2>&1 ||
    { tail -20 "$out/build.log" >&2; exit 1; }
fi
if [[ ! -f $out/build-identity.txt ]]; then
  {
    echo "node-llama-cpp $version"
    git -C "$out/src" log -1 --format='llama.cpp commit %H (%cd)'
    echo "built with GGML_NATIVE=ON on: $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)"
  } >"$out/build-identity.txt"
fi
cat "$out/build-identity.txt" >&2
echo "$out/build/bin"
