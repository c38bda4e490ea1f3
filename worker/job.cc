#include "worker/job.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "tokenizer/utf8.h"
#include "worker/grammar/json_schema.h"
#include "worker/prompt_files.h"

namespace llama {

absl::StatusOr<Job> ReadJob(const std::string& prompt, const std::string& prompts_file,
                            const std::string& dialogs_file) {
  const int sources = !prompt.empty() + !prompts_file.empty() + !dialogs_file.empty();
  if (sources != 1) {
    return absl::InvalidArgumentError("give exactly one of --prompt, --prompts_file, --dialogs_file");
  }
  Job job;
  if (!prompt.empty()) {
    // Prompts travel as JSON (to the other ranks, into --output's job), and
    // a tokenizer reads text: bytes that are not UTF-8 are refused here.
    for (size_t at = 0; at < prompt.size();) {
      const auto [code_point, length] = DecodeUtf8(prompt, at);
      if (code_point < 0) {
        return absl::InvalidArgumentError(
            absl::StrFormat("--prompt: byte %d is not UTF-8; expected text in UTF-8", at));
      }
      at += length;
    }
    job.prompts = {prompt};
  } else if (!prompts_file.empty()) {
    ASSIGN_OR_RETURN(job.prompts, ReadPromptsFile(prompts_file));
  } else {
    job.chat = true;
    ASSIGN_OR_RETURN(job.dialogs, ReadDialogsFile(dialogs_file));
  }
  return job;
}

std::string SerializeJob(const Job& job) {
  nlohmann::json j;
  j["chat"] = job.chat;
  j["prompts"] = job.prompts;
  nlohmann::json dialogs = nlohmann::json::array();
  for (const Dialog& dialog : job.dialogs) {
    nlohmann::json messages = nlohmann::json::array();
    for (const Message& m : dialog) messages.push_back({{"role", RoleName(m.role)}, {"content", m.content}});
    dialogs.push_back(messages);
  }
  j["dialogs"] = dialogs;
  return j.dump();
}

absl::StatusOr<std::string> ReadJsonSchemaGrammar(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrFormat("--json_schema=%s: cannot read the file", path));
  std::stringstream text;
  text << in.rdbuf();
  // Ordered: properties are generated in the order the file gives them.
  const nlohmann::ordered_json schema = nlohmann::ordered_json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrFormat("--json_schema=%s: not valid JSON", path));
  }
  absl::StatusOr<std::string> gbnf = grammar::JsonSchemaToGbnf(schema);
  if (!gbnf.ok()) {
    return absl::InvalidArgumentError(absl::StrFormat("--json_schema=%s: %s", path, gbnf.status().message()));
  }
  return gbnf;
}

absl::StatusOr<Job> DeserializeJob(const std::string& text) {
  const auto bad = [](const std::string& what) {
    return absl::DataLossError(absl::StrFormat("job description from rank 0: %s", what));
  };
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  const auto chat = j.find("chat");
  if (chat == j.end() || !chat->is_boolean()) return bad("\"chat\" is missing or not true/false");
  const auto prompts = j.find("prompts");
  if (prompts == j.end() || !prompts->is_array()) return bad("\"prompts\" is missing or not an array");
  const auto dialogs = j.find("dialogs");
  if (dialogs == j.end() || !dialogs->is_array()) return bad("\"dialogs\" is missing or not an array");
  Job job;
  job.chat = chat->get<bool>();
  for (size_t i = 0; i < prompts->size(); ++i) {
    if (!(*prompts)[i].is_string()) return bad(absl::StrFormat("prompts[%d] is not a string", i));
    job.prompts.push_back((*prompts)[i].get<std::string>());
  }
  if (job.chat) {
    ASSIGN_OR_RETURN(job.dialogs, ParseDialogs(dialogs->dump(), "rank 0's job"));
  }
  return job;
}

}  // namespace llama
