#include "worker/engine_flags.h"

namespace llama {

EngineOptions EngineOptionsFromFlags(const JobFlags& flags, LanguageModel* draft) {
  EngineOptions options;
  options.prefix_caching = flags.enable_prefix_caching;
  options.speculative_tokens = (flags.speculative_ngram || draft != nullptr) ? flags.num_speculative_tokens : 0;
  options.draft_model = draft;
  options.speculation_priced = flags.speculation_priced;
  return options;
}

}  // namespace llama
