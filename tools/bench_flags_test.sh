#!/usr/bin/env bash
# The bench refuses sizes it cannot measure, naming the flag, before it
# builds a model (so each refusal is immediate), with exit status 2 (the
# input is wrong, base/exit_code.h), as it does a flag gflags refuses.
# And LLAMA_CPU_ISA: avx2 picks the avx2 kernels, an unknown value is named.
# serve_bench refuses the flags that belong with --url alike.
set -uo pipefail
bench="$1"
serve_bench="$2"
failed=0
expect_refusal() {  # flags (one word), message[, binary]
  local out binary="${3:-$bench}"
  # shellcheck disable=SC2086
  out=$("$binary" $1 2>&1)
  local rc=$?
  if [[ $rc -ne 2 || "$out" != *"$2"* ]]; then
    echo "FAIL: $(basename "$binary") $1 exited $rc; expected 2 and a refusal containing: $2"
    echo "$out" | tail -n 5
    failed=1
  else
    echo "ok: $(basename "$binary") $1 -> $2"
  fi
}
expect_refusal --decode_tokens=0 "--decode_tokens=0: expected at least 1"
expect_refusal --prefill_tokens=-2 "--prefill_tokens=-2: expected at least 1"
expect_refusal --prefill_repeats=0 "--prefill_repeats=0: expected at least 1"
expect_refusal --batch=0 "--batch=0: expected at least 1"
expect_refusal --world_size=0 "--world_size=0: expected at least 1"
expect_refusal --weight_prefetch_bytes=-2 "--weight_prefetch_bytes=-2: expected 0 to 1048576, or -1 for this CPU's default"
expect_refusal --weights_dtype=int4 '--weights_dtype="int4": expected bf16, fp16, fp32, int8 or q4_k'
expect_refusal "--weights_dtype=q4_k --dim=64" \
  'tensor "layers.0.attention.wq.weight" has rows of 64 values; q4_k needs a multiple of 256'
expect_refusal --no_such_flag "unknown command line flag 'no_such_flag'"
expect_refusal --verify_rows=18 "--verify_rows=18: expected 0 (not timed) to 17 (16 guesses)"
expect_refusal "--verify_rows=5 --json_schema=/nonexistent.json" \
  "--verify_rows and --json_schema are measured one at a time: give one"
expect_refusal --draft_shard_dir=/nonexistent \
  "--draft_shard_dir goes with --url (a server started with it); this process's engine guesses by" "$serve_bench"
expect_refusal --prompts_file=/nonexistent.json "--prompts_file goes with --url" "$serve_bench"
# A value of LLAMA_CPU_ISA it does not know is named in a warning, and the
# CPU's own kernels run; avx2 names the avx2 ones.
tiny=(--dim=256 --n_layers=1 --n_heads=4 --n_kv_heads=4 --ffn_hidden=512 --vocab_size=600 --prefill_tokens=8
      --decode_tokens=1)
out=$(LLAMA_CPU_ISA=avx-2 "$bench" "${tiny[@]}" 2>&1)
if [[ "$out" != *"LLAMA_CPU_ISA=avx-2: expected native or avx2; using what the CPU has"* ]]; then
  echo "FAIL: LLAMA_CPU_ISA=avx-2 gave no warning naming it"; echo "$out" | tail -n 5; failed=1
else
  echo "ok: LLAMA_CPU_ISA=avx-2 -> warned"
fi
if grep -q avx2 /proc/cpuinfo; then
  out=$(LLAMA_CPU_ISA=avx2 "$bench" "${tiny[@]}" 2>&1)
  if [[ "$out" != *"avx2 prefill kernel, avx2 int8 kernel, avx2 q4_k and avx2 q6_k kernels"* ]]; then
    echo "FAIL: LLAMA_CPU_ISA=avx2 did not run the avx2 kernels"; echo "$out" | head -n 3; failed=1
  else
    echo "ok: LLAMA_CPU_ISA=avx2 -> avx2 kernels"
  fi
fi
exit $failed
