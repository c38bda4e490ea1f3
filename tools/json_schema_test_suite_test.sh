#!/usr/bin/env bash
# The JSON-Schema-Test-Suite (drafts 7 and 2020-12, and 2020-12's tests of
# the formats the grammar writes) through grammar_check:
# for every test case whose schema compiles, each instance is accepted by
# the grammar, and by the token matcher with the Llama 3 fixture's
# tokens, exactly when the suite says it is valid, but for the valid ones
# listed with their reason in json_schema_test_suite_known_rejections.txt.
# The table of cases compiled per keyword file is printed.
set -uo pipefail
check="$1"
testdata=worker/grammar/testdata
tokenizer=tests/fixtures/tiktoken_fixture/tokenizer.model

# The harness fails on a wrong verdict: a suite that calls 1 an invalid integer.
wrong="${TEST_TMPDIR:-/tmp}/wrong_verdict.json"
echo '[{"description": "d", "schema": {"type": "integer"}, "tests": [{"description": "t", "data": 1, "valid": false}]}]' \
  > "$wrong"
if out=$("$check" --suite="$wrong" 2>&1) || [[ "$out" != *"WRONG"*"INVALID, ACCEPTED: 1"* ]]; then
  echo "FAIL: grammar_check passed a wrong verdict:"
  echo "$out"
  exit 1
fi

# 1659 of 2663 tests checked when this was written: fewer is lost coverage.
suite="$testdata/json_schema_test_suite"
exec "$check" --suite="$suite/draft7,$suite/draft2020-12,$suite/draft2020-12/optional/format" \
  --known_rejections="$testdata/json_schema_test_suite_known_rejections.txt" \
  --tokenizer_path="$tokenizer" --min_compiled_tests=1683
