#!/usr/bin/env bash
# The GPU checks, in two halves, because the GPU machine has neither Bazel
# nor our Debian packages:
#
#   tests/gpu/run_gpu_checks.sh build   here: builds the CUDA test binaries, the
#                                       bench and the worker with --config=portable
#                                       (system libraries linked statically) into
#                                       .gpu_bundle/, with the fixtures' shards and
#                                       PyTorch's tokens for them
#   tests/gpu/run_gpu_checks.sh run     on the GPU machine (carry .gpu_bundle):
#                                       1. the GPU tests (parity of every op, GPU model
#                                          vs CPU model, graphs vs eager, NCCL); a test
#                                          skipped for want of a GPU counts as failed
#                                       2. the worker on the test fixtures, on cuda (1
#                                          rank; 2 ranks over NCCL where 2 GPUs are
#                                          visible), its greedy tokens against PyTorch's
#                                       3. the bench on a 7B-shaped bf16 model: prefill
#                                          512, decode batch 1 (graphs on and off) and
#                                          batch 32, against the copy bandwidth, and a
#                                          2048-token prefill
#                                       and prints one table, under one deadline
#                                       (GPU_CHECKS_DEADLINE_S, default 420 s); the
#                                       table and every log also go to $OUT.
#
# It ends with "N passed, N failed": the tests, the worker runs, and each
# bench run (its numbers are reported, not judged; a bench that fails counts).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

# The worker's job in part 2: the PyTorch golden text completions of the
# test fixtures (tests/fixtures/reference_model.py), with the settings they were made with.
readonly GOLDEN_MODELS=(tiny_fp32_mp1 gqa_bf16_mp1)
readonly WORKER_JOB_FLAGS="--temperature=0 --max_gen_len=32 --max_seq_len=128 --logprobs"

readonly TEST_TARGETS=(//ops/cuda:toolkit_test //ops/cuda:parity_test //ops/cuda:sampling_parity_test
                      //worker/collectives:nccl_communicator_test
                      //worker/batch:cuda_generation_test)
readonly TOOL_TARGETS=(//tools:bench //worker)
readonly BUNDLE="${GPU_BUNDLE:-.gpu_bundle}"

source tools/bazel_outputs.sh

case "${1:-}" in
  build)
    # The fixtures' shards for 1 and 2 ranks, their prompts and PyTorch's
    # tokens for them (one JSON array per prompt).
    # The fixtures' outputs are found through Bazel (cquery), not spelled
    # here: a package move then fails the query, not a copy on a fresh clone.
    readonly FIXTURE_TARGETS=(//tools:convert //tests/fixtures:checkpoint_fixture //tests/fixtures:tokenizer_fixture
                              //tests/fixtures:engine_golden)
    ./bazelw build "${FIXTURE_TARGETS[@]}" || exit 1
    outputs="$(bazel_outputs "${FIXTURE_TARGETS[@]}")" || exit 1
    output() {  # the one built file whose path ends in $1
      local found
      found=$(grep -E "(^|/)$1\$" <<<"$outputs")
      [[ $(grep -c . <<<"$found") -eq 1 ]] || { echo "run_gpu_checks: no single Bazel output ends in $1" >&2; return 1; }
      echo "$found"
    }
    convert="$(output tools/convert)" && tokenizer="$(output tokenizer.model)" || exit 1
    rm -rf "$BUNDLE" && mkdir -p "$BUNDLE/fixtures"
    cp "$tokenizer" "$BUNDLE/fixtures/" || exit 1
    for model in "${GOLDEN_MODELS[@]}"; do
      for ranks in 1 2; do
        params="$(output "$model/params.json")" || exit 1
        "$convert" --progress=false --world_size=$ranks \
          --ckpt_dir="$(dirname "$params")" --out_dir="$BUNDLE/fixtures/$model/tp$ranks" \
          >/dev/null || exit 1
      done
      golden="$(output "$model/golden.json")" || exit 1
      python3 - "$golden" "$BUNDLE/fixtures/$model" <<'PY' || exit 1
import json, sys
completions = json.load(open(sys.argv[1]))["text_completions"]
json.dump([c["prompt"] for c in completions], open(sys.argv[2] + "/prompts.json", "w"))
with open(sys.argv[2] + "/golden_tokens.jsonl", "w") as out:
    for c in completions:
        out.write(json.dumps(c["token_ids"]) + "\n")
PY
    done
    [[ "${GPU_BUNDLE_SKIP_PORTABLE:-0}" == 1 ]] && { echo "fixtures ready in $BUNDLE (portable binaries skipped)"; exit 0; }
    ./bazelw build --config=portable "${TEST_TARGETS[@]}" "${TOOL_TARGETS[@]}" || exit 1
    binaries="$(bazel_outputs --config=portable "${TEST_TARGETS[@]}" "${TOOL_TARGETS[@]}")" || exit 1
    [[ $(grep -c . <<<"$binaries") -eq $((${#TEST_TARGETS[@]} + ${#TOOL_TARGETS[@]})) ]] ||
      { echo "run_gpu_checks: expected one file per binary target, Bazel lists: $binaries"; exit 1; }
    xargs -r cp -t "$BUNDLE/" <<<"$binaries" || exit 1
    strip "$BUNDLE"/*_test "$BUNDLE"/bench "$BUNDLE"/worker
    # Debian ships SentencePiece and cpp-httplib only as shared libraries:
    # they travel beside the binaries, with what they link beyond glibc and
    # libstdc++ (OpenSSL, zlib, Brotli); the CUDA libraries are the GPU
    # machine's own.
    ldd "$BUNDLE"/worker "$BUNDLE"/bench | awk '$2 == "=>" && $3 ~ /^\/(usr\/)?lib\/x86_64-linux-gnu\// {print $3}' |
      grep -v -E '/(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s|ld-linux-x86-64)\.so' | sort -u |
      xargs -r cp -L -t "$BUNDLE/" || exit 1
    [[ -f "$BUNDLE/libsentencepiece.so.0" ]] || { echo "libsentencepiece.so.0 did not travel"; exit 1; }
    du -sh "$BUNDLE" && ls -la "$BUNDLE" && find "$BUNDLE/fixtures" -type f
    ;;
  run)
    # One deadline for the whole run (GPU_CHECKS_DEADLINE_S, default 420 s,
    # inside the device's 10-minute command limit with room for the start):
    # every step's timeout is cut to what is left, a step that cannot start
    # in time is failed as "not run", and each result is printed and written
    # to $OUT the moment it is known, so a run killed from outside still
    # tells what passed.
    readonly deadline=$((SECONDS + ${GPU_CHECKS_DEADLINE_S:-420}))
    out="${OUT:-$(mktemp -d)}"
    mkdir -p "$out"
    # $OUT brings back at most 8 files: one table, one log with every step's
    # full output appended as it finishes.
    table_file="$out/gpu_checks_table.txt" all_logs="$out/gpu_checks_logs.txt"
    : >"$table_file"; : >"$all_logs"
    [[ -d "$BUNDLE" ]] || { echo "no $BUNDLE: run '$0 build' first and carry it"; echo "0 passed, 1 failed"; exit 1; }
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
    gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
    echo "GPUs: ${gpus} (${gpu_name:-none visible}); deadline ${GPU_CHECKS_DEADLINE_S:-420} s; logs in $out" | tee -a "$table_file"
    # The CUDA libraries the binaries open (ops/cuda/cuda_libraries.h; the
    # runtime is linked in), wherever this machine keeps them:
    # the loader's cache first, then one walk of the usual places for what it
    # lacks (a walk per library took 30 s of the deadline on a busy disk).
    dirs="" missing=() ldconfig=$(command -v ldconfig || echo /sbin/ldconfig)
    for lib in libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
      found=$("$ldconfig" -p 2>/dev/null | awk -v lib="$lib" '$1 == lib {print $NF; exit}')
      if [[ -n "$found" ]]; then dirs="$dirs:$(dirname "$found")"; else missing+=(-o -name "$lib"); fi
    done
    if [[ ${#missing[@]} -gt 0 ]]; then
      while read -r found; do dirs="$dirs:$(dirname "$found")"; done < <(
        find /usr/local/cuda* /usr/lib /opt /usr/local/lib \( -false "${missing[@]}" \) 2>/dev/null | sort -u)
    fi
    export LD_LIBRARY_PATH="$PWD/$BUNDLE${dirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    work="$(mktemp -d)"
    passed=0 failed=0
    record() {  # name, ok (0/1), detail
      local line
      if [[ $2 -eq 0 ]]; then passed=$((passed + 1)); line="$(printf '%-40s %-5s %s' "$1" pass "$3")";
      else failed=$((failed + 1)); line="$(printf '%-40s %-5s %s' "$1" FAIL "$3")"; fi
      echo "== $line"
      echo "$line" >>"$table_file"
    }
    note() { echo "== $1"; echo "$1" >>"$table_file"; }
    # Seconds a step may take: its own cap, cut to what is left of the deadline.
    budget() { local left=$((deadline - SECONDS)); echo $((left < $1 ? left : $1)); }
    keep_log() {  # name, log file
      { echo "===== $1 ====="; cat "$2"; echo; } >>"$all_logs"
    }

    # 1. Tests.
    for test in "$BUNDLE"/*_test; do
      name=$(basename "$test") log="$work/$(basename "$test").log"
      limit=$(budget 120)
      if [[ $limit -le 5 ]]; then record "$name" 1 "not run: the deadline was reached"; continue; fi
      timeout -k 5 "$limit" "$test" >"$log" 2>&1
      status=$?
      keep_log "$name" "$log"
      tail -n 25 "$log"
      tests_passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -n 1)
      tests_skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$log" | tail -n 1)
      if [[ $status -eq 124 || $status -eq 137 ]]; then
        record "$name" 1 "timed out after ${limit} s"
      elif [[ $status -ne 0 ]]; then
        record "$name" 1 "status $status, ${tests_passed:-0} tests passed"
      elif [[ -n "$tests_skipped" && "$tests_skipped" != 0 ]]; then
        record "$name" 1 "${tests_skipped} tests skipped (a skip means no GPU was seen)"
      elif [[ -z "$tests_passed" || "$tests_passed" == 0 ]]; then
        record "$name" 1 "exited 0 but no test passed"
      else
        record "$name" 0 "${tests_passed} tests"
      fi
    done

    # 2. The worker on the fixtures, started as torchrun would, against
    # PyTorch's greedy tokens: f32 weights must give the same tokens (at its
    # closest choice PyTorch's top two logits are 8.5e-5 apart, recorded as
    # text_completions_min_top2_gap; GPU-CPU differences are ~1e-5); bf16
    # weights are reported only (the GPU rounds activations to bf16 for the
    # tensor cores, which may flip a near tie).
    worker_job() {  # model, ranks, time limit
      local model=$1 ranks=$2 limit=$3 pids=() status=0 dir="$BUNDLE/fixtures/$1"
      for ((rank = 0; rank < ranks; ++rank)); do
        # shellcheck disable=SC2086
        RANK=$rank WORLD_SIZE=$ranks LOCAL_RANK=$rank LOCAL_WORLD_SIZE=$ranks MASTER_ADDR=127.0.0.1 \
          MASTER_PORT=29611 RENDEZVOUS_TOKEN=gpu-checks timeout -k 5 "$limit" "$BUNDLE/worker" --device=cuda \
          --shard_dir="$dir/tp$ranks" --tokenizer_path="$BUNDLE/fixtures/tokenizer.model" \
          --prompts_file="$dir/prompts.json" $WORKER_JOB_FLAGS --output="$work/$model.tp$ranks.jsonl" \
          >"$work/$model.tp$ranks.rank$rank.log" 2>&1 &
        pids+=($!)
      done
      for pid in "${pids[@]}"; do wait "$pid" || status=1; done
      for ((rank = 0; rank < ranks; ++rank)); do
        keep_log "worker $model tp$ranks rank $rank" "$work/$model.tp$ranks.rank$rank.log"
      done
      tail -n 4 "$work/$model.tp$ranks.rank0.log"
      return $status
    }
    same_tokens() {  # output, golden: prints how many prompts match
      python3 - "$1" "$2" <<'PY'
import json, sys
got = [json.loads(line)["token_ids"] for line in open(sys.argv[1])]
want = [json.loads(line) for line in open(sys.argv[2])]
same = sum(g == w for g, w in zip(got, want))
print(f"{same}/{len(want)} prompts' greedy tokens = PyTorch's")
sys.exit(0 if same == len(want) == len(got) else 1)
PY
    }
    rank_counts=(1)
    [[ $gpus -ge 2 ]] && rank_counts+=(2)
    for model in "${GOLDEN_MODELS[@]}"; do
      for ranks in "${rank_counts[@]}"; do
        name="worker $model, $ranks rank(s)$([[ $ranks -gt 1 ]] && echo ' (NCCL)')"
        limit=$(budget 90)
        if [[ $limit -le 5 ]]; then record "$name" 1 "not run: the deadline was reached"; continue; fi
        if ! worker_job "$model" "$ranks" "$limit"; then
          record "$name" 1 "failed: see the log tail above"
          continue
        fi
        verdict=$(same_tokens "$work/$model.tp$ranks.jsonl" "$BUNDLE/fixtures/$model/golden_tokens.jsonl")
        matched=$?
        if [[ $model == *fp32* ]]; then
          record "$name" $matched "$verdict"
        else
          record "$name" 0 "$verdict (bf16: reported, not judged)"
        fi
      done
    done
    if [[ $gpus -lt 2 ]]; then
      note "NOT COVERED with ${gpus} GPU(s): NCCL across ranks (all-reduce, all-gather of the sharded embedding and"
      note "  logits), collectives captured in graphs across ranks, the watchdog on a dead peer; the 2-rank worker"
      note "  runs need 2 GPUs (NCCL refuses two ranks on one GPU). The NCCL path ran on one rank only."
    fi

    # 3. Benchmarks on a 7B-shaped model, random bf16 weights: numbers, and a
    # failure if the bench does not finish.
    seven_b=(--dim=4096 --n_layers=32 --n_heads=32 --n_kv_heads=32 --ffn_hidden=11008 --vocab_size=32000)
    bench() {  # name, flags...
      local name=$1 limit; shift
      limit=$(budget 100)
      if [[ $limit -le 5 ]]; then record "bench $name" 1 "not run: the deadline was reached"; return; fi
      timeout -k 5 "$limit" "$BUNDLE/bench" --device=cuda "${seven_b[@]}" "$@" >"$work/$name.log" 2>&1
      local status=$?
      keep_log "bench $name" "$work/$name.log"
      cat "$work/$name.log"
      if [[ $status -ne 0 ]]; then record "bench $name" 1 "status $status"; else record "bench $name" 0 "$*"; fi
    }
    field() { [[ -f "$work/$1.log" ]] && grep -o "$2" "$work/$1.log" | head -n 1; }
    bench b1 --prefill_tokens=512 --decode_tokens=128 --batch=1
    bench b1_eager --prefill_tokens=512 --decode_tokens=64 --batch=1 --cuda_graphs=false
    bench b32 --prefill_tokens=128 --decode_tokens=32 --batch=32
    bench p2048 --prefill_tokens=2048 --decode_tokens=16 --batch=1
    {
      echo "7B shape, bf16, ${gpu_name:-no GPU}:"
      echo "  prefill 512 tokens:      $(field b1 '[0-9.]* tokens/s' | head -n 1)"
      echo "  decode batch 1:          $(field b1 'batch 1, [0-9.]* ms/step') (graphs), $(field b1_eager 'batch 1, [0-9.]* ms/step') (no graphs)"
      echo "  bandwidth floor:         $(field b1 '[0-9]*% of the [0-9.]* GB/s memory limit')"
      echo "  decode batch 32:         $(field b32 'batch 32, [0-9.]* ms/step = [0-9.]* tokens/s')"
      echo "  prefill 2048 tokens:     $(field p2048 '[0-9.]* tokens/s' | head -n 1) (attention on tensor cores)"
    } >>"$table_file"
    rm -rf "$work"
    echo "$passed passed, $failed failed" >>"$table_file"
    echo
    echo "== GPU checks =="
    cat "$table_file"
    [[ $failed -eq 0 ]]
    ;;
  *)
    echo "usage: $0 build | run"
    exit 2
    ;;
esac
