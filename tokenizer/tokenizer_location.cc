#include "tokenizer/tokenizer_location.h"

#include <filesystem>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace llama {

absl::StatusOr<std::string> FindTokenizerFile(const std::string& ckpt_dir) {
  namespace fs = std::filesystem;
  const fs::path dir(ckpt_dir);
  for (const fs::path& candidate : {dir / "tokenizer.model", dir.parent_path() / "tokenizer.model",
                                    dir / "original" / "tokenizer.model", dir / "tokenizer.json"}) {
    std::error_code error;
    if (fs::is_regular_file(candidate, error)) return candidate.string();
  }
  return absl::NotFoundError(absl::StrFormat(
      "no tokenizer.model in or next to %s and no tokenizer.json in it; pass --tokenizer_path", ckpt_dir));
}

}  // namespace llama
