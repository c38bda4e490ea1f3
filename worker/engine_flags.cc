#include "worker/engine_flags.h"

namespace llama {

EngineOptions EngineOptionsFromFlags(const JobFlags& flags) {
  EngineOptions options;
  options.prefix_caching = flags.enable_prefix_caching;
  options.speculative_tokens = flags.speculative_ngram ? flags.num_speculative_tokens : 0;
  return options;
}

}  // namespace llama
