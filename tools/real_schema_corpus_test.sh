#!/usr/bin/env bash
# The real-schema corpus (worker/grammar/testdata/real_schemas: JSON Schema
# Store's catalogue and OpenAI's OpenAPI components) through grammar_check
# --corpus with the Llama 3 fixture's tokenizer: prints the refusals by
# reason and the share that compiles, and fails below the share measured
# when this was written. Whether the answers to those schemas validate is
# //worker/engine:structured_output_test's.
set -euo pipefail
exec "$1" --corpus=worker/grammar/testdata/real_schemas/corpus.jsonl \
  --tokenizer_path=tests/fixtures/tiktoken_fixture/tokenizer.model --min_compiled_share=0.79
