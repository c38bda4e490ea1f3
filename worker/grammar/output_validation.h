// For tests: structured-output answers checked by python-jsonschema
// (testdata/validate_outputs.py), independently of our grammar code.

#ifndef LLAMA_WORKER_GRAMMAR_OUTPUT_VALIDATION_H_
#define LLAMA_WORKER_GRAMMAR_OUTPUT_VALIDATION_H_

#include <string>

namespace llama::grammar {

struct ValidationReport {
  bool valid = false;  // Every answer parses and validates.
  std::string text;    // The validator's output: its failures and a summary.
};

// Validates `results_path`, a JSON file of [{"name", "schema", "outputs"}]
// (validate_outputs.py says more); the validator must be in the runfiles.
ValidationReport ValidateOutputs(const std::string& results_path);

}  // namespace llama::grammar

#endif  // LLAMA_WORKER_GRAMMAR_OUTPUT_VALIDATION_H_
