#!/usr/bin/env bash
# Makes the GGUF files of //tests:gguf_import_test with llama.cpp's own
# quantizer (not part of the build; the files are committed):
#   LLAMA_CPP=/path/to/llama.cpp/build/bin checkpoint/testdata/gguf/make_testdata.sh
# 1. A random Llama model whose rows are whole K-quant blocks of 256 (so
#    llama-quantize uses the preset's own types, no fallbacks): dim 256,
#    one layer, 4 query and 2 KV heads, FFN width 256, the fixture
#    tokenizer's 600 pieces, written by real PyTorch in Meta's layout by
#    the checkpoint fixture's own writer (tests/fixtures/checkpoint_fixture.py).
# 2. Our //tools:convert --format=gguf --dtype=fp32 with the fixture's
#    SentencePiece tokenizer (the export //tests:gguf_export_test checks
#    against llama.cpp).
# 3. llama-quantize to Q4_0, Q4_K_M, Q5_K_M, Q6_K and Q8_0 (Q6_K for the
#    output projection in each but Q8_0, and for some layers in the K_M
#    presets).
# 4. llama.cpp's own Hugging Face converter, convert_hf_to_gguf.py (from
#    the llama.cpp source tree, LLAMA_CPP_SRC, default LLAMA_CPP/../..), to
#    F16 and BF16 from the Hugging Face fixture tiny_fp16_bin
#    (pytorch_model.bin and tokenizer.model; Debian's torch 1.13 lacks two
#    things the script names, stood in for below). Needs python3-tqdm.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
out="$root/checkpoint/testdata/gguf"
: "${LLAMA_CPP:?set LLAMA_CPP to the bin folder of a llama.cpp build}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$root"
./bazelw build //tools:convert //tests/fixtures:tokenizer_fixture
(cd tests/fixtures && /usr/bin/python3 -c "
import torch
import checkpoint_fixture as c
params = {'dim': 256, 'n_layers': 1, 'n_heads': 4, 'n_kv_heads': 2, 'multiple_of': 256,
          'ffn_dim_multiplier': 0.375, 'norm_eps': 1e-05, 'vocab_size': -1}
c.write_model('$work', 'model', params, torch.float32, 1, 34, 600)")
bazel-bin/tools/convert --ckpt_dir="$work/model" --format=gguf --dtype=fp32 --progress=false \
  --tokenizer_path=bazel-bin/tests/fixtures/tokenizer_fixture/tokenizer.model --out="$work/f32.gguf"
for type in Q4_0 Q4_K_M Q5_K_M Q6_K Q8_0; do
  "$LLAMA_CPP/llama-quantize" "$work/f32.gguf" "$out/$type.gguf" "$type" > "$work/$type.log" 2>&1 ||
    { cat "$work/$type.log"; exit 1; }
done
src="${LLAMA_CPP_SRC:-$LLAMA_CPP/../..}"
./bazelw build //tests/fixtures:hf_fixture
cp -r bazel-bin/tests/fixtures/hf_fixture/tiny_fp16_bin "$work/hf" && chmod -R u+w "$work/hf"
for type in f16 bf16; do
  (cd "$src" && PYTHONPATH=gguf-py /usr/bin/python3 -c "
import runpy, sys, torch
for name in ('float8_e4m3fn', 'float8_e5m2'):  # In a dtype table only.
    if not hasattr(torch, name):
        setattr(torch, name, torch.uint8)
load = torch.load  # torch.load(mmap=...) is newer than 1.13.
torch.load = lambda *args, mmap=None, **kwargs: load(*args, **kwargs)
sys.argv = ['convert_hf_to_gguf.py', '$work/hf', '--outtype', '$type', '--outfile', '$out/hf_${type^^}.gguf']
runpy.run_path('convert_hf_to_gguf.py', run_name='__main__')") > "$work/$type.log" 2>&1 || { cat "$work/$type.log"; exit 1; }
done
ls -l "$out"/*.gguf
