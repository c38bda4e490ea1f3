#!/usr/bin/env bash
# The GPU checks, in two halves, because the GPU machine has neither Bazel
# nor our Debian packages:
#
#   tests/gpu/run_gpu_checks.sh build   here: builds the CUDA test binaries with
#                                       --config=portable (system libraries linked
#                                       statically) into .gpu_bundle/
#   tests/gpu/run_gpu_checks.sh run     on the GPU machine (carry .gpu_bundle):
#                                       runs them all; a test skipped for want of a
#                                       GPU counts as a failure there
#
# It ends with "N passed, N failed" (test binaries).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

readonly TARGETS=(//ops/cuda:toolkit_test //ops/cuda:parity_test //worker:nccl_communicator_test
                 //worker:cuda_transformer_test //tools:bench)
readonly BUNDLE=.gpu_bundle

case "${1:-}" in
  build)
    ./bazelw build --config=portable "${TARGETS[@]}" || exit 1
    rm -rf "$BUNDLE" && mkdir -p "$BUNDLE"
    for target in "${TARGETS[@]}"; do
      path="${target#//}"
      cp "bazel-bin/${path/://}" "$BUNDLE/" || exit 1
    done
    # SentencePiece exists only as a shared library; it travels beside the binaries.
    cp /usr/lib/x86_64-linux-gnu/libsentencepiece.so.0 "$BUNDLE/" 2>/dev/null || true
    ls -la "$BUNDLE"
    ;;
  run)
    [[ -d "$BUNDLE" ]] || { echo "no $BUNDLE: run '$0 build' first and carry it"; exit 1; }
    nvidia-smi -L || true
    # The CUDA libraries the binaries need, wherever this machine keeps them.
    dirs=""
    for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
      found=$(find /usr/local/cuda* /usr/lib /opt /usr/local/lib -name "$lib" 2>/dev/null | head -n 1)
      [[ -n "$found" ]] && dirs="$dirs:$(dirname "$found")"
    done
    export LD_LIBRARY_PATH="$BUNDLE${dirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    passed=0 failed=0
    for test in "$BUNDLE"/*_test; do
      log="$(mktemp)"
      "$test" 2>&1 | tee "$log"
      status=${PIPESTATUS[0]}
      if [[ $status -ne 0 ]] || grep -q '\[  SKIPPED \]' "$log"; then
        echo "FAILED: $(basename "$test") (status $status; a skip means no GPU was seen)"
        failed=$((failed + 1))
      else
        passed=$((passed + 1))
      fi
      rm -f "$log"
    done
    # Benchmarks (numbers, not pass/fail): a 7B-shaped model, random bf16 weights.
    seven_b=(--dim=4096 --n_layers=32 --n_heads=32 --n_kv_heads=32 --ffn_hidden=11008 --vocab_size=32000)
    "$BUNDLE/bench" --device=cuda "${seven_b[@]}" --prefill_tokens=512 --decode_tokens=64 --batch=1 || true
    "$BUNDLE/bench" --device=cuda "${seven_b[@]}" --prefill_tokens=128 --decode_tokens=32 --batch=32 || true
    echo "$passed passed, $failed failed"
    [[ $failed -eq 0 ]]
    ;;
  *)
    echo "usage: $0 build | run"
    exit 2
    ;;
esac
