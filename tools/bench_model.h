// The model the benchmarks run (//tools:bench, //tools:serve_bench): a
// converted shard (--shard), or a synthetic model of the shape the flags
// give, TinyLlama-1.1B's by default (dim 2048, 22 layers, 32 heads, 4 KV
// heads, FFN 5632, vocab 32000), with random weights of --weights_dtype.
// Binaries only (it defines flags).

#ifndef LLAMA_TOOLS_BENCH_MODEL_H_
#define LLAMA_TOOLS_BENCH_MODEL_H_

#include <gflags/gflags.h>

#include "absl/status/statusor.h"
#include "worker/flag_help.h"
#include "worker/model/model_weights.h"

DECLARE_string(shard);

namespace llama {

// Rank `rank` of `world_size`'s weights (a shard: world size 1 only).
absl::StatusOr<ModelWeights> BenchModelWeights(int rank, int world_size);

// Its flags, for --help.
FlagGroup BenchModelFlags();

}  // namespace llama

#endif  // LLAMA_TOOLS_BENCH_MODEL_H_
