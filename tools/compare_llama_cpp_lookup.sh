#!/usr/bin/env bash
# n-gram speculative decoding side by side with llama.cpp: its llama-lookup
# and our worker's --speculative_ngram, greedy, on the same GGUF file and
# prompts, one prompt at a time (llama-lookup takes one), interleaved; and
# our plain decoding of the same prompts, whose answers the speculative ones
# must equal token for token (checked: a difference fails the run). By
# hand, not in CI.
#
#   ./bazelw build //worker:worker //tools:convert
#   tools/compare_llama_cpp_lookup.sh GGUF PROMPTS_JSON [tokens=128] [rounds=2] [threads=2]
#
# PROMPTS_JSON is a JSON array of strings. Our shards are the GGUF imported
# by //tools:convert (once, beside the file: GGUF.shards/), with the
# tokenizer the GGUF carries unless TOKENIZER names a SentencePiece model.
# LLAMA_CPP is the bin folder of a native llama.cpp build (default: the one
# tools/build_llama_cpp.sh makes from the source node-llama-cpp carries).
# Both draft up to DRAFT (default 4) tokens a step. Our tokens/s counts the
# prompt's prefill too (the job's own figure); llama-lookup's is its decode
# alone: a short prompt's prefill is a few percent of either.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
gguf=${1:?usage: tools/compare_llama_cpp_lookup.sh GGUF PROMPTS_JSON [tokens] [rounds] [threads]}
prompts=${2:?usage: tools/compare_llama_cpp_lookup.sh GGUF PROMPTS_JSON [tokens] [rounds] [threads]}
tokens=${3:-128} rounds=${4:-2} threads=${5:-2} draft=${DRAFT:-4}
for f in bazel-bin/worker/worker bazel-bin/tools/convert; do
  [[ -x $f ]] || { echo "compare: $f is missing; build it first (see the header)" >&2; exit 1; }
done
LLAMA_CPP=${LLAMA_CPP:-$(tools/build_llama_cpp.sh | tail -1)}
[[ -x $LLAMA_CPP/llama-lookup ]] || { echo "compare: $LLAMA_CPP/llama-lookup is missing" >&2; exit 1; }
shards="$gguf.shards"
[[ -f $shards/rank-0-of-1.shard ]] || bazel-bin/tools/convert --ckpt_dir="$gguf" --out_dir="$shards" >/dev/null
tokenizer=${TOKENIZER:-$shards/tokenizer.model}
count=$(/usr/bin/python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$prompts")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "llama.cpp: $(head -2 "$LLAMA_CPP/../../build-identity.txt" 2>/dev/null | tail -1) in $LLAMA_CPP"
echo "file: $gguf; $count prompts, $tokens tokens each, greedy, up to $draft guesses a step, $threads threads"

# Our worker on prompt $1, plain or with guesses ($2: false|true): prints tokens/s, keeps the ids.
ours() {
  local prompt=$1 speculate=$2 out="$work/ours_$2_$3.jsonl"
  bazel-bin/worker/worker --shard_dir="$shards" --tokenizer_path="$tokenizer" --prompt="$prompt" --temperature=0 \
    --max_gen_len="$tokens" --max_seq_len=$((tokens + 512)) --max_batch_size=1 --threads="$threads" \
    --speculative_ngram="$speculate" --num_speculative_tokens="$draft" --output="$out" --overwrite_output \
    2>"$work/log" >/dev/null
  sed -nE 's/.*tokens generated in [0-9.]+ s \(([0-9.]+) tokens\/s\).*/\1/p' "$work/log"
}
theirs() {
  "$LLAMA_CPP/llama-lookup" -m "$gguf" -p "$1" -n "$tokens" -t "$threads" --temp 0 -c $((tokens + 512)) \
    --spec-draft-n-max "$draft" 2>&1 | sed -nE 's/.*decoded +[0-9]+ tokens in +[0-9.]+ seconds, speed: +([0-9.]+) t\/s.*/\1/p'
}
for round in $(seq "$rounds"); do
  for i in $(seq 0 $((count - 1))); do
    prompt=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[int(sys.argv[2])])' "$prompts" "$i")
    plain=$(ours "$prompt" false "$i")
    ngram=$(ours "$prompt" true "$i")
    lookup=$(theirs "$prompt")
    kept=$(sed -nE 's/.*(n-gram speculation kept [0-9]+ of [0-9]+ guesses \([0-9.]+%\), [0-9.]+ tokens per request step).*/\1/p' "$work/log")
    cmp -s <(grep -o '"token_ids":\[[^]]*\]' "$work/ours_false_$i.jsonl") \
           <(grep -o '"token_ids":\[[^]]*\]' "$work/ours_true_$i.jsonl") ||
      { echo "compare: prompt $i: the answer with guesses differs from plain decoding's" >&2; exit 1; }
    printf 'round %d prompt %d: ours plain %6.1f tokens/s, ours n-gram %6.1f (%s), llama-lookup %6.1f; ours n-gram / llama-lookup %.2f (load %s)\n' \
      "$round" "$i" "$plain" "$ngram" "${kept:-no guesses}" "$lookup" \
      "$(/usr/bin/python3 -c 'import sys; print(float(sys.argv[1]) / float(sys.argv[2]))' "$ngram" "$lookup")" \
      "$(cut -d' ' -f1 /proc/loadavg)"
  done
done
