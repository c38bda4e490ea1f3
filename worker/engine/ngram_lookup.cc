#include "worker/engine/ngram_lookup.h"

#include <algorithm>
#include <cstdint>

namespace llama {

void NgramLookup(absl::Span<const int> tokens, int max_tokens, std::vector<int>& out) {
  out.clear();
  const int64_t len = static_cast<int64_t>(tokens.size());
  if (max_tokens <= 0) return;
  for (int n = std::min<int64_t>(kNgramLookupMax, len - 1); n >= kNgramLookupMin; --n) {
    const absl::Span<const int> suffix = tokens.subspan(len - n);
    // The latest earlier occurrence, ending at `end` (exclusive) < len:
    // the most recent context is the likeliest to repeat.
    for (int64_t end = len - 1; end >= n; --end) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + (end - n))) continue;
      for (int64_t i = end; static_cast<int>(out.size()) < max_tokens; ++i) {
        out.push_back(i < len ? tokens[i] : out[i - len]);
      }
      return;
    }
  }
}

}  // namespace llama
