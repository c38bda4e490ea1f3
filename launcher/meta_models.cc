#include "launcher/meta_models.h"

#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace llama {
namespace {

// llama-stack's text models in bf16 (llama-models' sku_list): model id,
// folder on Meta's server, shards. The folder is the Hugging Face name's
// last part, except for 405B, whose bf16 checkpoints come for 8 or 16 ranks.
struct LlamaStackModel {
  const char* id;
  const char* folder;
  int shards;
};
constexpr LlamaStackModel kLlamaStackModels[] = {
    {"Llama3.1-8B", "Llama-3.1-8B", 1},
    {"Llama3.1-8B-Instruct", "Llama-3.1-8B-Instruct", 1},
    {"Llama3.1-70B", "Llama-3.1-70B", 8},
    {"Llama3.1-70B-Instruct", "Llama-3.1-70B-Instruct", 8},
    {"Llama3.1-405B:bf16-mp8", "Llama-3.1-405B-MP8", 8},
    {"Llama3.1-405B:bf16-mp16", "Llama-3.1-405B-MP16", 16},
    {"Llama3.1-405B-Instruct:bf16-mp8", "Llama-3.1-405B-Instruct-MP8", 8},
    {"Llama3.1-405B-Instruct:bf16-mp16", "Llama-3.1-405B-Instruct-MP16", 16},
    {"Llama3.2-1B", "Llama-3.2-1B", 1},
    {"Llama3.2-1B-Instruct", "Llama-3.2-1B-Instruct", 1},
    {"Llama3.2-3B", "Llama-3.2-3B", 1},
    {"Llama3.2-3B-Instruct", "Llama-3.2-3B-Instruct", 1},
    {"Llama3.3-70B-Instruct", "Llama-3.3-70B-Instruct", 8},
};

// Why a model Meta offers cannot be run here, or "" if it is not one of those.
std::string WhyNotSupported(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (absl::StrContains(lower, "vision")) {
    return "a vision model (image encoder and cross-attention layers); only text models are supported";
  }
  if (absl::StrContains(lower, "int4") || absl::StrContains(lower, "qlora") || absl::StrContains(lower, "spinquant")) {
    return "an INT4-quantized checkpoint; convert a bf16 one with --weights_dtype=int8 instead";
  }
  if (absl::StrContains(lower, "fp8") || lower == "llama3.1-405b" || lower == "llama3.1-405b-instruct") {
    return "Meta's FP8 checkpoint (fp8_scales_N.pt), which is not supported; the bf16 ones are "
           "Llama3.1-405B[-Instruct]:bf16-mp8 and :bf16-mp16";
  }
  if (absl::StrContains(lower, "llama4") || absl::StrContains(lower, "llama-4")) {
    return "a Llama 4 mixture-of-experts model, which is not supported";
  }
  if (absl::StrContains(lower, "guard")) return "a Llama Guard safety model, which is not supported";
  return "";
}

}  // namespace

absl::StatusOr<MetaModel> LookUpMetaModel(absl::string_view name) {
  // Llama 2 (download.sh of meta-llama/llama): "7B" -> llama-2-7b.
  static const std::map<std::string, int> kShards = {{"7B", 1}, {"13B", 2}, {"70B", 8}};
  const bool chat = absl::EndsWith(name, "-chat");
  const std::string size(chat ? name.substr(0, name.size() - 5) : name);
  if (auto it = kShards.find(size); it != kShards.end()) {
    return MetaModel{absl::StrCat("llama-2-", absl::AsciiStrToLower(size), chat ? "-chat" : ""), it->second, "", 2,
                     MetaChannel::kLlama2Script};
  }
  // Llama 3 (download.sh of meta-llama/llama3): "Llama-3-8B-Instruct" ->
  // Meta-Llama-3-8B-Instruct, fetched from 8b_instruction_tuned/.
  static const MetaModel kLlama3[] = {
      {"Meta-Llama-3-8B", 1, "8b_pre_trained", 3, MetaChannel::kLlama3Script},
      {"Meta-Llama-3-8B-Instruct", 1, "8b_instruction_tuned", 3, MetaChannel::kLlama3Script},
      {"Meta-Llama-3-70B", 8, "70b_pre_trained", 3, MetaChannel::kLlama3Script},
      {"Meta-Llama-3-70B-Instruct", 8, "70b_instruction_tuned", 3, MetaChannel::kLlama3Script},
  };
  for (const MetaModel& model : kLlama3) {
    if (absl::EqualsIgnoreCase(absl::StrCat("Meta-", name), model.folder) || absl::EqualsIgnoreCase(name, model.folder)) {
      return model;
    }
  }
  // Llama 3.1 and later (llama-stack): its model id, or the folder /
  // Hugging Face name.
  absl::string_view bare = name;
  if (absl::StartsWith(bare, "meta-llama/")) bare.remove_prefix(11);
  for (const LlamaStackModel& model : kLlamaStackModels) {
    if (absl::EqualsIgnoreCase(bare, model.id) || absl::EqualsIgnoreCase(bare, model.folder)) {
      return MetaModel{model.folder, model.shards, "", 3, MetaChannel::kLlamaStack};
    }
  }
  if (const std::string why = WhyNotSupported(bare); !why.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat("--models: \"%s\" is %s", name, why));
  }
  std::string llama_stack_ids;
  for (const LlamaStackModel& model : kLlamaStackModels) absl::StrAppend(&llama_stack_ids, ", ", model.id);
  return absl::InvalidArgumentError(absl::StrFormat(
      "--models: unknown model \"%s\"; expected 7B, 13B, 70B, 7B-chat, 13B-chat, 70B-chat (Llama 2), "
      "Llama-3-8B, Llama-3-8B-Instruct, Llama-3-70B, Llama-3-70B-Instruct (Llama 3) or a llama-stack model id "
      "(Llama 3.1 and later%s)",
      name, llama_stack_ids));
}

absl::StatusOr<std::vector<MetaModel>> LookUpMetaModels(const std::vector<std::string>& names) {
  std::vector<MetaModel> models;
  for (const std::string& name : names) {
    ASSIGN_OR_RETURN(MetaModel model, LookUpMetaModel(name));
    models.push_back(std::move(model));
  }
  if (models.empty()) return absl::InvalidArgumentError("--models: expected at least one, e.g. 7B,13B-chat");
  for (const MetaModel& model : models) {
    if (model.channel != models[0].channel) {
      return absl::InvalidArgumentError(
          "--models: Llama 2, Llama 3 and Llama 3.1+ (llama-stack) models come with different URLs (one e-mail "
          "each); download them separately");
    }
  }
  return models;
}

}  // namespace llama
