// A LanguageModel for engine tests whose logits are a function of the
// whole sequence as it reads it back from its paged KV cache: each step
// writes (token, position) into the cache rows the block table names, and
// position p's logits hash the tokens cached at positions [0, p]. A wrong
// block table, a shared block overwritten, a reused prefix that does not
// hold the same tokens or a stale block after preemption change the logits
// (so the tokens), or fail the step when a cached position is not the one
// expected. Its output does not depend on the batch, so a request's tokens
// must equal its solo run's exactly. With an echo period it also favours
// repeating what came that many tokens back, so answers fall into loops
// (as random-weight models' do) that speculative guesses can match.

#ifndef LLAMA_WORKER_ENGINE_CACHE_CHECKING_MODEL_H_
#define LLAMA_WORKER_ENGINE_CACHE_CHECKING_MODEL_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "ops/kv_cache_view.h"
#include "worker/model/language_model.h"

namespace llama::testing {

class CacheCheckingModel final : public LanguageModel {
 public:
  struct Shape {
    int64_t vocab = 32;
    int max_batch_size = 8;
    int64_t max_seq_len = 64;
    int64_t max_step_tokens = 32;
    int64_t block_size = 4;
    int64_t blocks = 64;
    // > 0: position p's logits add echo_bonus to the token cached at
    // p + 1 - echo_period (logits are otherwise in [0, 8)).
    int64_t echo_period = 0;
    float echo_bonus = 6.0f;
  };
  explicit CacheCheckingModel(const Shape& shape)
      : shape_(shape),
        limits_{shape.vocab, shape.max_batch_size, shape.max_seq_len, shape.max_step_tokens, shape.block_size,
                shape.blocks},
        cache_(shape.blocks * shape.block_size) {}

  const ModelLimits& limits() const override { return limits_; }

  absl::StatusOr<absl::Span<const float>> Forward(absl::Span<const SequenceChunk> chunks) override {
    steps.push_back({});
    logits_.clear();
    int64_t total = 0;
    for (const SequenceChunk& c : chunks) total += c.tokens.size();
    if (total > shape_.max_step_tokens || static_cast<int64_t>(chunks.size()) > shape_.max_batch_size) {
      return absl::InvalidArgumentError(absl::StrFormat("a step of %d tokens in %d chunks", total, chunks.size()));
    }
    if (fail_at_step >= 0 && static_cast<int64_t>(steps.size()) > fail_at_step) {
      return absl::UnavailableError("rank 1 is gone");
    }
    for (const SequenceChunk& c : chunks) {
      steps.back().push_back(static_cast<int64_t>(c.tokens.size()));
      for (size_t i = 0; i < c.tokens.size(); ++i) {
        const int64_t p = c.start_pos + static_cast<int64_t>(i);
        if ((p / shape_.block_size) >= static_cast<int64_t>(c.blocks.size())) {
          return absl::InvalidArgumentError(absl::StrFormat("position %d beyond the block table", p));
        }
        cache_[Row(c.blocks, p)] = {c.tokens[i], p};
        if (!c.all_logits && static_cast<int64_t>(i) + 1 + c.proposed < static_cast<int64_t>(c.tokens.size())) continue;
        uint64_t h = 1469598103934665603ull;
        for (int64_t q = 0; q <= p; ++q) {
          const Entry& e = cache_[Row(c.blocks, q)];
          if (e.position != q) {
            return absl::InternalError(
                absl::StrFormat("position %d reads a cache row holding position %d", q, e.position));
          }
          h = (h ^ static_cast<uint64_t>(e.token + 1)) * 1099511628211ull;
        }
        const int64_t echoed = p + 1 - shape_.echo_period;
        const int echo = shape_.echo_period > 0 && echoed >= 0 ? cache_[Row(c.blocks, echoed)].token : -1;
        for (int64_t v = 0; v < shape_.vocab; ++v) {
          uint64_t z = h + 0x9E3779B97F4A7C15ull * (v + 1);
          z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9ull;
          logits_.push_back(static_cast<float>(z >> 40) / static_cast<float>(1 << 24) * 8.0f +
                            (v == echo ? shape_.echo_bonus : 0.0f));
        }
      }
    }
    return absl::Span<const float>(logits_);
  }

  // Tokens of each chunk of each step so far.
  std::vector<std::vector<int64_t>> steps;
  // Steps after this many fail (negative: never).
  int64_t fail_at_step = -1;

 private:
  struct Entry {
    int token = -1;
    int64_t position = -1;
  };
  int64_t Row(absl::Span<const int32_t> table, int64_t p) const { return CacheRowOf(table.data(), shape_.block_size, p); }

  Shape shape_;
  ModelLimits limits_;
  std::vector<Entry> cache_;
  std::vector<float> logits_;
};

}  // namespace llama::testing

#endif  // LLAMA_WORKER_ENGINE_CACHE_CHECKING_MODEL_H_
