#include "worker/serve/text_output.h"

#include <algorithm>

#include "base/status_macros.h"

namespace llama {

std::string TextOutput::Release(bool at_end) {
  // The earliest stop string in what is pending ends the output there.
  size_t cut = std::string::npos;
  for (const std::string& stop : stops_) {
    if (!stop.empty()) cut = std::min(cut, pending_.find(stop));
  }
  if (cut != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, cut);
    pending_.clear();
    return out;
  }
  // Hold back the longest tail that some stop string starts with: the next
  // tokens may complete it.
  size_t keep = 0;
  if (!at_end) {
    for (const std::string& stop : stops_) {
      for (size_t n = std::min(stop.size() - (stop.empty() ? 0 : 1), pending_.size()); n > keep; --n) {
        if (pending_.compare(pending_.size() - n, n, stop, 0, n) == 0) {
          keep = n;
          break;
        }
      }
    }
  }
  std::string out = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

absl::StatusOr<std::string> TextOutput::Push(int id) {
  if (stopped_) return std::string();
  ASSIGN_OR_RETURN(std::string text, decoder_.Push(id));
  pending_ += text;
  return Release(/*at_end=*/false);
}

absl::StatusOr<std::string> TextOutput::Finish() {
  if (stopped_) return std::string();
  ASSIGN_OR_RETURN(std::string text, decoder_.Finish());
  pending_ += text;
  return Release(/*at_end=*/true);
}

}  // namespace llama
