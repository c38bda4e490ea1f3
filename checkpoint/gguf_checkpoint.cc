#include "checkpoint/gguf_checkpoint.h"

#include <unistd.h>

#include <filesystem>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/staged_file.h"
#include "base/status_macros.h"
#include "checkpoint/conversion_sources.h"
#include "checkpoint/gguf_reader.h"
#include "tokenizer/gguf_vocabulary.h"

namespace llama {

namespace fs = std::filesystem;

std::optional<std::string> GgufCheckpointFile(const std::string& ckpt_dir) {
  std::error_code error;
  if (absl::EndsWith(ckpt_dir, ".gguf") && fs::is_regular_file(ckpt_dir, error)) return ckpt_dir;
  if (!fs::is_directory(ckpt_dir, error) || !NumberedFiles(ckpt_dir, "consolidated.", ".pth").empty() ||
      !ShardFiles(ckpt_dir).empty() || IsHuggingFaceFolder(ckpt_dir)) {
    return std::nullopt;
  }
  absl::StatusOr<std::string> found = FindGgufFile(ckpt_dir);
  if (!found.ok()) return std::nullopt;
  return *found;
}

absl::Status WriteGgufTokenizer(const std::string& gguf, const std::string& out_path) {
  ASSIGN_OR_RETURN(const std::unique_ptr<GgufFile> file, GgufFile::Open(gguf));
  ASSIGN_OR_RETURN(const std::string model, TokenizerModelFromGguf(file->metadata(), gguf));
  std::error_code error;
  fs::create_directories(fs::path(out_path).parent_path(), error);
  // A partial file of this process's own: another launcher may write the same.
  ASSIGN_OR_RETURN(std::unique_ptr<StagedFile> out, StagedFile::Create(out_path, absl::StrCat(".partial.", getpid())));
  RETURN_IF_ERROR(out->Write(model.data(), model.size()));
  return out->Commit();
}

absl::StatusOr<std::optional<ChatTemplateKind>> GgufChatTemplate(const std::string& gguf) {
  ASSIGN_OR_RETURN(const std::unique_ptr<GgufFile> file, GgufFile::Open(gguf));
  for (const auto& [key, value] : file->metadata()) {
    if (key != "tokenizer.chat_template" || !value.is_string()) continue;
    ASSIGN_OR_RETURN(const ChatTemplateKind kind,
                     RecognizeChatTemplate(value.get<std::string>(), gguf + "'s tokenizer.chat_template"));
    return kind;
  }
  return std::nullopt;
}

}  // namespace llama
