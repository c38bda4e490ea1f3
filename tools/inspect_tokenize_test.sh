#!/usr/bin/env bash
# tools/inspect on every kind of file a user has (a .pth, safetensors, a
# GGUF file, params.json, config.json), each with its own summary; and
# tools/tokenize showing SentencePiece's "▁", so "▁Hello" and "Hello" differ,
# and every dialog of a file, a refused one as its line.
set -uo pipefail
inspect="$1" convert="$2" tokenize="$3" pth="$4" params="$5" safetensors="$6" config="$7" tokenizer="$8" dialogs="$9"
failed=0
expect() {  # what, output, substring
  if [[ "$2" != *"$3"* ]]; then
    echo "FAIL: $1: expected \"$3\" in:"
    echo "$2" | head -n 12
    failed=1
  else
    echo "ok: $1 -> $3"
  fi
}
out=$("$inspect" "$pth" 2>&1)
expect ".pth" "$out" "PyTorch checkpoint, "
out=$("$inspect" "$safetensors" 2>&1)
expect "safetensors" "$out" ": safetensors, "
expect "safetensors" "$out" "model.embed_tokens.weight"
out=$("$inspect" "$config" 2>&1)
expect "config.json" "$out" ": Hugging Face model config"
expect "config.json" "$out" "config: dim=64 "
out=$("$inspect" "$params" 2>&1)
expect "params.json" "$out" ": Meta's model parameters (vocab_size -1"
expect "params.json" "$out" "vocab_size=-1"
gguf="$TEST_TMPDIR/tiny.gguf"
"$convert" --progress=false --ckpt_dir="$(dirname "$pth")" --format=gguf --out="$gguf" \
  --tokenizer_path="$tokenizer" >/dev/null 2>&1 || { echo "FAIL: convert to GGUF"; failed=1; }
out=$("$inspect" "$gguf" 2>&1)
expect "gguf" "$out" ": GGUF version 3, "
expect "gguf" "$out" 'general.architecture = "llama"'
expect "gguf" "$out" "(600 elements)"
expect "gguf" "$out" "token_embd.weight"
out=$("$inspect" "$TEST_TMPDIR/notes.txt" 2>&1)
expect "another file" "$out" "expected a .pth, .bin, .safetensors, .gguf or .shard file, or params.json"
out=$("$tokenize" --tokenizer_path="$tokenizer" --prompt="Hello Hello" 2>&1)
expect "tokenize" "$out" "▁"
# The docs/tools.md example: invalid dialogs on purpose, each refused, all shown.
out=$("$tokenize" --tokenizer_path="$tokenizer" --dialogs_file="$dialogs" 2>&1)
expect "tokenize dialogs" "$out" "dialog 8: refused: dialog message 1 has role \"user\""
expect "tokenize dialogs" "$out" "dialog 11: "
exit $failed
