// The serving engine's options from the job flags: one place for what
// batch jobs, `serve` and tools/serve_bench run with.

#ifndef LLAMA_WORKER_ENGINE_FLAGS_H_
#define LLAMA_WORKER_ENGINE_FLAGS_H_

#include "worker/engine/engine.h"
#include "worker/job_flags.h"

namespace llama {

// --enable_prefix_caching, --speculative_ngram or --draft_shard_dir (whose
// model, loaded by the caller, is `draft`), --num_speculative_tokens and
// --speculation_priced (checked by CheckJobFlags); the step budget and batch size come from the
// model's limits (rank_model.h).
EngineOptions EngineOptionsFromFlags(const JobFlags& flags, LanguageModel* draft = nullptr);

}  // namespace llama

#endif  // LLAMA_WORKER_ENGINE_FLAGS_H_
