#!/usr/bin/env bash
# Our engine and llama.cpp side by side on the same random weights, in one
# interleaved run: TinyLlama-1.1B's shape (dim 2048, 22 layers, 32/4 heads,
# FFN 5632) with the tokenizer fixture's 600-piece vocabulary (GGUF needs
# the model's vocabulary), written once with PyTorch, converted by
# //tools:convert to our shards and to GGUF (bf16, f16, q8_0). llama.cpp is
# node-llama-cpp's prebuilt CPU library (third_party/setup.sh installs it),
# timed by tools/llama_cpp_bench.mjs. By hand, not in CI: ~10 minutes and
# ~10 GB of disk under $WORK (default /tmp/llama-cpp-compare).
#
#   ./bazelw build //tools:bench //tools:convert //tests/fixtures:tokenizer_fixture
#   tools/compare_llama_cpp.sh [rounds=2] [prefill=128] [decode=16] [threads=2]
#
# DTYPES (default "bf16 fp16 int8") picks the weight types; OUR_FLAGS adds
# flags to our bench, e.g. OUR_FLAGS="--bf16_activations --int8_prefill"
# for llama.cpp's own activation precision. BATCH=8 adds a line per type:
# decode of 8 sequences at once (ours: --batch=8; llama.cpp: 8 sequences
# of one context, batched by node-llama-cpp).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds=${1:-2} prefill=${2:-128} decode=${3:-16} threads=${4:-2}
work=${WORK:-/tmp/llama-cpp-compare}
tools="${XDG_CACHE_HOME:-$HOME/.cache}/llama2-cpp/node-tools"
tokenizer=bazel-bin/tests/fixtures/tokenizer_fixture/tokenizer.model
for f in bazel-bin/tools/bench bazel-bin/tools/convert "$tokenizer" "$tools/node_modules/node-llama-cpp"; do
  [[ -e $f ]] || { echo "compare: $f is missing; build and run third_party/setup.sh first (see the header)" >&2; exit 1; }
done
mkdir -p "$work"
if [[ ! -f $work/ckpt/consolidated.00.pth ]]; then
  (cd tests/fixtures && /usr/bin/python3 -c "
import sys, torch
import checkpoint_fixture as c
c.write_model('$work', 'ckpt', c.BENCH, torch.bfloat16, 1, 3, 600)" && rm -f "$work/ckpt/reference.pt")
fi
for dtype in bf16 fp16 int8; do
  [[ -d $work/shards_$dtype ]] || bazel-bin/tools/convert --ckpt_dir="$work/ckpt" --out_dir="$work/shards_$dtype" \
    --weights_dtype=$dtype --progress=false
  [[ -f $work/$dtype.gguf ]] || bazel-bin/tools/convert --ckpt_dir="$work/ckpt" --format=gguf --weights_dtype=$dtype \
    --out="$work/$dtype.gguf" --tokenizer_path="$tokenizer" --progress=false
done
for round in $(seq "$rounds"); do
  for dtype in ${DTYPES:-bf16 fp16 int8}; do
    # shellcheck disable=SC2086
    ours=$(bazel-bin/tools/bench --shard="$work/shards_$dtype/rank-0-of-1.shard" --prefill_tokens="$prefill" \
      --decode_tokens="$decode" --batch=1 --threads="$threads" ${OUR_FLAGS:-} 2>&1)
    theirs=$(node tools/llama_cpp_bench.mjs "$tools" "$work/$dtype.gguf" "$prefill" "$decode" "$threads" 2>&1 | tail -1)
    our_prefill=$(sed -nE 's/^prefill: .* = ([0-9.]+) tokens\/s.*/\1/p' <<<"$ours")
    our_decode=$(sed -nE 's/^decode: +batch 1, ([0-9.]+) ms\/step.*/\1/p' <<<"$ours")
    their_prefill=$(sed -nE 's/.*prefill [0-9]+ tokens ([0-9.]+) tokens\/s.*/\1/p' <<<"$theirs")
    their_decode=$(sed -nE 's/.*decode batch 1 ([0-9.]+) ms\/step.*/\1/p' <<<"$theirs")
    awk -v r="$round" -v d="$dtype" -v op="$our_prefill" -v tp="$their_prefill" -v od="$our_decode" -v td="$their_decode" \
      'BEGIN { printf "round %s %-5s prefill ours %6.1f llama.cpp %6.1f tokens/s (ours/theirs %.2f)   decode ours %6.1f llama.cpp %6.1f ms/step (ours/theirs speed %.2f)\n", r, d, op, tp, op / tp, od, td, td / od }'
    if [[ -n ${BATCH:-} ]]; then
      # shellcheck disable=SC2086
      ours=$(bazel-bin/tools/bench --shard="$work/shards_$dtype/rank-0-of-1.shard" --prefill_tokens=16 \
        --decode_tokens="$decode" --batch="$BATCH" --threads="$threads" ${OUR_FLAGS:-} 2>&1)
      theirs=$(node tools/llama_cpp_bench.mjs "$tools" "$work/$dtype.gguf" 16 "$decode" "$threads" "$BATCH" 2>&1 | tail -1)
      our_decode=$(sed -nE "s/^decode: +batch $BATCH, ([0-9.]+) ms\/step.*/\1/p" <<<"$ours")
      their_decode=$(sed -nE "s/.*decode batch $BATCH ([0-9.]+) ms\/step.*/\1/p" <<<"$theirs")
      awk -v r="$round" -v d="$dtype" -v b="$BATCH" -v od="$our_decode" -v td="$their_decode" \
        'BEGIN { printf "round %s %-5s decode batch %s ours %6.1f llama.cpp %6.1f ms/step (ours/theirs speed %.2f)\n", r, d, b, od, td, td / od }'
    fi
  done
done
