#!/usr/bin/env bash
# //tools:perplexity end to end on a small synthetic model and the
# SentencePiece fixture's vocabulary: a figure printed as llama-perplexity
# prints it, the same with --int8_prefill on q8_0 weights (within 1%: the
# int8 activations round), and its refusals naming the flag, with exit 2.
# What the figure means is //tools:perplexity_eval_test's.
set -uo pipefail
perplexity="$1"
tokenizer="$2"
text="$3"
model="--dim=256 --n_layers=2 --n_heads=4 --n_kv_heads=4 --ffn_hidden=512 --vocab_size=600 --ctx=128"
failed=0
ppl() {  # extra flags -> the final PPL
  # shellcheck disable=SC2086
  "$perplexity" --text="$text" --tokenizer_path="$tokenizer" $model $1 2>&1 |
    sed -n 's/^Final estimate: PPL = \([0-9.]*\) +\/- [0-9.]* (.*/\1/p'
}
f32=$(ppl "--weights_dtype=q8_0")
int8=$(ppl "--weights_dtype=q8_0 --int8_prefill")
if [[ -z "$f32" || -z "$int8" ]]; then
  echo "FAIL: no final estimate (f32 prefill '$f32', int8 prefill '$int8')"
  failed=1
elif ! awk -v a="$f32" -v b="$int8" 'BEGIN { d = (a - b) / a; exit !(d < 0.01 && d > -0.01) }'; then
  echo "FAIL: --int8_prefill's PPL $int8 is more than 1% from the f32 prefill's $f32"
  failed=1
else
  echo "ok: PPL $f32 (f32 prefill), $int8 (--int8_prefill)"
fi
expect_refusal() {  # flags, message
  local out
  # shellcheck disable=SC2086
  out=$("$perplexity" --tokenizer_path="$tokenizer" $model $1 2>&1)
  local rc=$?
  if [[ $rc -ne 2 || "$out" != *"$2"* ]]; then
    echo "FAIL: perplexity $1 exited $rc; expected 2 and: $2"
    echo "$out" | tail -n 5
    failed=1
  else
    echo "ok: perplexity $1 -> $2"
  fi
}
expect_refusal "" "--text: required"
expect_refusal "--text=$text --chunks=0" "--chunks=0: expected -1 (all) or at least 1"
expect_refusal "--text=/no/such/file" "--text=/no/such/file: cannot read it"
expect_refusal "--text=$text --vocab_size=100" "has 600 tokens where the model has 100"
exit $failed
