#!/usr/bin/env bash
# Our engine and llama.cpp side by side on the same random weights, in one
# interleaved run. The weights are written once with PyTorch in
# TinyLlama-1.1B's shape (dim 2048, 22 layers, 32/4 heads, FFN 5632; the
# default) or stories110M's (SHAPE=stories110m: dim 768, 12 layers, 12
# heads, FFN 2048), converted by //tools:convert to our shards and to GGUF.
# The vocabulary is the tokenizer fixture's 600 pieces unless TOKENIZER
# names another SentencePiece model (GGUF needs the model's vocabulary; a
# 32000-piece one, Llama 2's size, comes from
# tools/make_bench_vocabularies.py). By hand, not in CI: minutes, and up to
# ~10 GB of disk under $WORK (default /tmp/llama-cpp-compare/<shape>).
#
#   ./bazelw build //tools:bench //tools:convert //tests/fixtures:tokenizer_fixture
#   tools/compare_llama_cpp.sh [rounds=2] [prefill=128] [decode=16] [threads=2]
#
# llama.cpp is LLAMA_CPP's native build when given (the bin folder of a
# cmake -DGGML_NATIVE=ON build: llama-bench, llama-batched-bench,
# llama-quantize), else the one tools/build_llama_cpp.sh makes from the
# source node-llama-cpp carries (the llama.cpp users install today; built
# once, ~15 minutes). The first line printed names the build measured.
# DTYPES (default "bf16 fp16 int8") picks the weight types; q4_k_m is
# llama-quantize's Q4_K_M of the fp16 file, which both
# programs run (ours imports it). OUR_FLAGS adds flags to our bench, e.g.
# OUR_FLAGS="--bf16_activations --int8_prefill" for llama.cpp's own
# activation precision, "--kv_cache_dtype=f16" for its KV cache's. BATCH=8 adds a line per type: decode of 8
# sequences at once (ours: --batch=8; llama.cpp: llama-batched-bench). Each line carries
# the load average when it started: compare only lines of a quiet machine.
# REPEATS (default 3) is how many times each side times a prefill (the
# median: ours --prefill_repeats, llama-bench's -r averages them): a
# prefill of a small model lasts well under a second, shorter than this
# machine's swings.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds=${1:-2} prefill=${2:-128} decode=${3:-16} threads=${4:-2} repeats=${REPEATS:-3}
shape=${SHAPE:-tinyllama}
work=${WORK:-/tmp/llama-cpp-compare/$shape}
tokenizer=${TOKENIZER:-bazel-bin/tests/fixtures/tokenizer_fixture/tokenizer.model}
needed=(bazel-bin/tools/bench bazel-bin/tools/convert "$tokenizer")
for f in "${needed[@]}"; do
  [[ -e $f ]] || { echo "compare: $f is missing; build it first (see the header)" >&2; exit 1; }
done
LLAMA_CPP=${LLAMA_CPP:-$(tools/build_llama_cpp.sh | tail -1)}
for f in llama-bench llama-batched-bench llama-quantize; do
  [[ -x $LLAMA_CPP/$f ]] || { echo "compare: $LLAMA_CPP/$f is missing" >&2; exit 1; }
done
echo "llama.cpp: $("$LLAMA_CPP/llama-bench" --version 2>&1 | head -1) in $LLAMA_CPP"
case $shape in
  tinyllama) params=c.BENCH ;;
  stories110m) params='{"dim": 768, "n_layers": 12, "n_heads": 12, "n_kv_heads": 12, "multiple_of": 256,
                        "norm_eps": 1e-05, "vocab_size": -1}' ;;
  *) echo "compare: SHAPE=$shape: expected tinyllama or stories110m" >&2; exit 2 ;;
esac
mkdir -p "$work"
if [[ ! -f $work/ckpt/consolidated.00.pth ]]; then
  # Resolved before the cd: a relative path (the default) is the repository's.
  tokenizer_file=$(realpath "$tokenizer")
  (cd tests/fixtures && /usr/bin/python3 -c "
import sentencepiece, torch
import checkpoint_fixture as c
vocab = sentencepiece.SentencePieceProcessor(model_file='$tokenizer_file').get_piece_size()
c.write_model('$work', 'ckpt', $params, torch.bfloat16, 1, 3, vocab)" && rm -f "$work/ckpt/reference.pt")
fi
dtypes=${DTYPES:-bf16 fp16 int8}
for dtype in $dtypes; do
  if [[ $dtype == q4_k_m ]]; then
    [[ -f $work/fp16.gguf ]] || bazel-bin/tools/convert --ckpt_dir="$work/ckpt" --format=gguf --weights_dtype=fp16 \
      --out="$work/fp16.gguf" --tokenizer_path="$tokenizer" --progress=false
    [[ -f $work/q4_k_m.gguf ]] || "$LLAMA_CPP/llama-quantize" "$work/fp16.gguf" "$work/q4_k_m.gguf" Q4_K_M >/dev/null 2>&1
    [[ -d $work/shards_q4_k_m ]] || bazel-bin/tools/convert --ckpt_dir="$work/q4_k_m.gguf" \
      --out_dir="$work/shards_q4_k_m" --progress=false
    continue
  fi
  [[ -d $work/shards_$dtype ]] || bazel-bin/tools/convert --ckpt_dir="$work/ckpt" --out_dir="$work/shards_$dtype" \
    --weights_dtype=$dtype --progress=false
  [[ -f $work/$dtype.gguf ]] || bazel-bin/tools/convert --ckpt_dir="$work/ckpt" --format=gguf --weights_dtype=$dtype \
    --out="$work/$dtype.gguf" --tokenizer_path="$tokenizer" --progress=false
done

# llama.cpp's prefill tokens/s and decode ms/step at batch 1 on $1, as "P D".
theirs_batch1() {
  "$LLAMA_CPP/llama-bench" -m "$1" -t "$threads" -p "$prefill" -n "$decode" -r "$repeats" -o jsonl 2>/dev/null |
    sed -nE 's/.*"avg_ts": ([0-9.e+-]+).*/\1/p' | awk 'NR == 1 { p = $1 } NR == 2 { print p, 1000 / $1 }'
}

# llama.cpp's decode ms/step of $BATCH sequences at once on $1.
theirs_batched() {
  # The S_TG t/s column: tokens of all sequences per second.
  "$LLAMA_CPP/llama-batched-bench" -m "$1" -t "$threads" -c 2048 -npp 16 -ntg "$decode" -npl "$BATCH" 2>/dev/null |
    awk -F'|' -v b="$BATCH" '$2 ~ /^ *16 *$/ { print 1000 * b / $9 }'
}

load() { cut -d' ' -f1 /proc/loadavg; }

for round in $(seq "$rounds"); do
  for dtype in $dtypes; do
    shard="$work/shards_$dtype/rank-0-of-1.shard"
    gguf="$work/$dtype.gguf"
    l=$(load)
    # Decode after a 16-token prompt, as llama-bench's tg starts at an
    # empty context (after $prefill tokens attention would cost us more).
    # shellcheck disable=SC2086
    ours=$(bazel-bin/tools/bench --shard="$shard" --prefill_tokens="$prefill" --prefill_repeats="$repeats" \
      --decode_tokens=1 --batch=1 --threads="$threads" ${OUR_FLAGS:-} 2>&1)
    our_prefill=$(sed -nE 's/^prefill: .* = ([0-9.]+) tokens\/s.*/\1/p' <<<"$ours")
    # shellcheck disable=SC2086
    ours=$(bazel-bin/tools/bench --shard="$shard" --prefill_tokens=16 --decode_tokens="$decode" --batch=1 \
      --threads="$threads" ${OUR_FLAGS:-} 2>&1)
    our_decode=$(sed -nE 's/^decode: +batch 1, ([0-9.]+) ms\/step.*/\1/p' <<<"$ours")
    read -r their_prefill their_decode <<<"$(theirs_batch1 "$gguf")"
    awk -v r="$round" -v d="$dtype" -v l="$l" -v op="$our_prefill" -v tp="$their_prefill" -v od="$our_decode" \
      -v td="$their_decode" 'BEGIN { printf "round %s %-6s load %4s  prefill ours %6.1f llama.cpp %6.1f tokens/s (ours/theirs %.2f)   decode ours %6.1f llama.cpp %6.1f ms/step (ours/theirs speed %.2f)\n", r, d, l, op, tp, op / tp, od, td, td / od }'
    if [[ -n ${BATCH:-} ]]; then
      l=$(load)
      # shellcheck disable=SC2086
      ours=$(bazel-bin/tools/bench --shard="$shard" --prefill_tokens=16 --decode_tokens="$decode" --batch="$BATCH" \
        --threads="$threads" ${OUR_FLAGS:-} 2>&1)
      their_decode=$(theirs_batched "$gguf")
      our_decode=$(sed -nE "s/^decode: +batch $BATCH, ([0-9.]+) ms\/step.*/\1/p" <<<"$ours")
      awk -v r="$round" -v d="$dtype" -v l="$l" -v b="$BATCH" -v od="$our_decode" -v td="$their_decode" \
        'BEGIN { printf "round %s %-6s load %4s  decode batch %s ours %6.1f llama.cpp %6.1f ms/step (ours/theirs speed %.2f)\n", r, d, l, b, od, td, td / od }'
    fi
  done
done
