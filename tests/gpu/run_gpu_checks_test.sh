#!/usr/bin/env bash
# The GPU check script's own logic, on a machine without a GPU: a bundle of
# stand-in binaries (a test that passes, one that skips for want of a GPU,
# one that hangs) must give a verdict within the deadline, count each line
# right, and leave the table and every log in $OUT.
set -uo pipefail
script="$(dirname "${BASH_SOURCE[0]}")/run_gpu_checks.sh"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
bundle="$tmp/bundle" out="$tmp/out"
rm -rf "$bundle" "$out"
mkdir -p "$bundle/fixtures/tiny_fp32_mp1" "$bundle/fixtures/gqa_bf16_mp1" "$out"
stub() {  # name, body
  printf '#!/usr/bin/env bash\n%s\n' "$2" >"$bundle/$1"
  chmod +x "$bundle/$1"
}
stub a_pass_test 'echo "[==========] 3 tests ran."; echo "[  PASSED  ] 3 tests."'
stub b_skip_test 'echo "[  PASSED  ] 0 tests."; echo "[  SKIPPED ] 2 tests, listed below:"'
stub c_hang_test 'echo "started"; exec sleep 1000'
stub worker 'exit 1'
stub bench 'exit 0'

fail() { echo "FAIL: $*"; exit 1; }
start=$SECONDS
PATH="/usr/bin:/bin" GPU_BUNDLE="$bundle" OUT="$out" GPU_CHECKS_DEADLINE_S=15 "$script" run >"$tmp/stdout" 2>&1
status=$?
elapsed=$((SECONDS - start))
cat "$tmp/stdout"
[[ $status -ne 0 ]] || fail "exit status 0 with failures"
# The hung test is killed when the deadline comes (plus timeout's 5 s grace).
[[ $elapsed -le 25 ]] || fail "took ${elapsed} s with a 15 s deadline"
[[ "$(tail -n 1 "$tmp/stdout")" == "1 passed, 8 failed" ]] || fail "last line: $(tail -n 1 "$tmp/stdout")"
grep -q '^a_pass_test .* pass  3 tests$' "$out/gpu_checks_table.txt" || fail "the passing test's line"
grep -q '^b_skip_test .* FAIL  2 tests skipped' "$out/gpu_checks_table.txt" || fail "the skipping test's line"
grep -q '^c_hang_test .* FAIL  timed out' "$out/gpu_checks_table.txt" || fail "the hung test's line"
[[ $(grep -c 'not run: the deadline was reached' "$out/gpu_checks_table.txt") -eq 6 ]] || fail "2 workers + 4 benches not run"
grep -q 'NOT COVERED with 0 GPU' "$out/gpu_checks_table.txt" || fail "what one GPU (or none) cannot cover"
[[ "$(tail -n 1 "$out/gpu_checks_table.txt")" == "1 passed, 8 failed" ]] || fail "the table's count line"
grep -q '===== c_hang_test =====' "$out/gpu_checks_logs.txt" || fail "the hung test's log in \$OUT"
grep -q '^started$' "$out/gpu_checks_logs.txt" || fail "the hung test's output in \$OUT"
echo "PASS: verdict in ${elapsed} s, counts and logs right"
