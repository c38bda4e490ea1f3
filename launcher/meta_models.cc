#include "launcher/meta_models.h"

#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace llama {

absl::StatusOr<MetaModel> LookUpMetaModel(absl::string_view name) {
  // Llama 2 (download.sh of meta-llama/llama): "7B" -> llama-2-7b.
  static const std::map<std::string, int> kShards = {{"7B", 1}, {"13B", 2}, {"70B", 8}};
  const bool chat = absl::EndsWith(name, "-chat");
  const std::string size(chat ? name.substr(0, name.size() - 5) : name);
  if (auto it = kShards.find(size); it != kShards.end()) {
    return MetaModel{absl::StrCat("llama-2-", absl::AsciiStrToLower(size), chat ? "-chat" : ""), it->second, "", 2};
  }
  // Llama 3 (download.sh of meta-llama/llama3): "Llama-3-8B-Instruct" ->
  // Meta-Llama-3-8B-Instruct, fetched from 8b_instruction_tuned/.
  static const MetaModel kLlama3[] = {
      {"Meta-Llama-3-8B", 1, "8b_pre_trained", 3},
      {"Meta-Llama-3-8B-Instruct", 1, "8b_instruction_tuned", 3},
      {"Meta-Llama-3-70B", 8, "70b_pre_trained", 3},
      {"Meta-Llama-3-70B-Instruct", 8, "70b_instruction_tuned", 3},
  };
  for (const MetaModel& model : kLlama3) {
    if (absl::EqualsIgnoreCase(absl::StrCat("Meta-", name), model.folder) || absl::EqualsIgnoreCase(name, model.folder)) {
      return model;
    }
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "--models: unknown model \"%s\"; expected 7B, 13B, 70B, 7B-chat, 13B-chat, 70B-chat (Llama 2) or "
      "Llama-3-8B, Llama-3-8B-Instruct, Llama-3-70B, Llama-3-70B-Instruct (Llama 3)",
      name));
}

}  // namespace llama
