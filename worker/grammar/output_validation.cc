#include "worker/grammar/output_validation.h"

#include <chrono>
#include <memory>

#include "absl/status/statusor.h"
#include "base/durable_file.h"
#include "base/process.h"

namespace llama::grammar {

ValidationReport ValidateOutputs(const std::string& results_path) {
  ProcessOptions validate;
  validate.argv = {"/usr/bin/python3", "worker/grammar/testdata/validate_outputs.py", results_path};
  validate.stdout_path = results_path + ".out";
  validate.stderr_path = results_path + ".err";
  ValidationReport report;
  absl::StatusOr<std::unique_ptr<Process>> process = Process::Spawn(validate);
  if (!process.ok()) {
    report.text = std::string(process.status().message());
    return report;
  }
  absl::StatusOr<ExitStatus> exit = (*process)->Wait(std::chrono::seconds(120));
  for (const std::string& path : {validate.stdout_path, validate.stderr_path}) {
    if (absl::StatusOr<std::string> text = ReadFileToString(path); text.ok()) report.text += *text;
  }
  if (!exit.ok()) report.text += "the validator did not finish: " + std::string(exit.status().message());
  report.valid = exit.ok() && exit->success();
  return report;
}

}  // namespace llama::grammar
