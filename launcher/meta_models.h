// The models Meta's download channels offer: the folder, shard count and
// remote path of each, for `launcher download` and for the job that
// downloads first.

#ifndef LLAMA_LAUNCHER_META_MODELS_H_
#define LLAMA_LAUNCHER_META_MODELS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace llama {

// How Meta serves a model; each channel has its own URL (one e-mail each)
// and its own layout.
enum class MetaChannel {
  // download.sh of meta-llama/llama: LICENSE, USE_POLICY.md, one
  // tokenizer.model (+ tokenizer_checklist.chk) for all, llama-2-7b/...
  kLlama2Script,
  // download.sh of meta-llama/llama3: LICENSE, USE_POLICY, then
  // 8b_instruction_tuned/... saved as Meta-Llama-3-8B-Instruct/..., with
  // its own tokenizer.model.
  kLlama3Script,
  // `llama model download --source meta` (llama-stack, Llama 3.1 and
  // later): only the model's folder, Llama-3.1-8B-Instruct/{checklist.chk,
  // tokenizer.model, params.json, consolidated.NN.pth}.
  kLlamaStack,
};

struct MetaModel {
  std::string folder;         // Under target_dir.
  int shards;
  std::string remote_folder;  // On the server, when not `folder`.
  int llama_version;          // 2 or 3.
  MetaChannel channel;
};

// "7B" -> llama-2-7b, 1 shard; "70B-chat" -> llama-2-70b-chat, 8;
// "Llama-3-8B-Instruct" -> Meta-Llama-3-8B-Instruct from
// 8b_instruction_tuned/; llama-stack's model ids ("Llama3.1-8B-Instruct",
// "Llama3.1-405B:bf16-mp16") or their Hugging Face names
// ("meta-llama/Llama-3.2-1B") -> Llama-3.1-8B-Instruct etc. Models this
// project cannot run (vision, FP8, INT4, Llama 4) are refused, saying why.
absl::StatusOr<MetaModel> LookUpMetaModel(absl::string_view name);

// --models, each looked up: at least one, all from one channel (one
// e-mail's URL serves one family).
absl::StatusOr<std::vector<MetaModel>> LookUpMetaModels(const std::vector<std::string>& names);

}  // namespace llama

#endif  // LLAMA_LAUNCHER_META_MODELS_H_
