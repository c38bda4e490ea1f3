// The models Meta's download scripts offer: the folder, shard count and
// remote path of each, for `launcher download` and for the job that
// downloads first.

#ifndef LLAMA_LAUNCHER_META_MODELS_H_
#define LLAMA_LAUNCHER_META_MODELS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace llama {

// The folder and shard count of one of Meta's models ("7B" -> llama-2-7b, 1;
// "70B-chat" -> llama-2-70b-chat, 8; "Llama-3-8B-Instruct" ->
// Meta-Llama-3-8B-Instruct, 1, fetched from the URL's
// "8b_instruction_tuned/", with its own tokenizer.model).
struct MetaModel {
  std::string folder;         // Under target_dir.
  int shards;
  std::string remote_folder;  // Under the URL's "*" when not `folder`.
  int llama_version;          // 2 or 3.
};
absl::StatusOr<MetaModel> LookUpMetaModel(absl::string_view name);

}  // namespace llama

#endif  // LLAMA_LAUNCHER_META_MODELS_H_
